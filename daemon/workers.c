/* The worker pool of `jettprofd serve`: N threads, each running its own libuv loop, that drain
 * the runs; and what the workers post back to the main loop.
 *
 * Ownership. The main loop (the daemon's thread) owns the listener, the signals, every
 * connection until its HELLO is accepted, SHOW, the runs log, the kept store and the session
 * count. After its HELLO a session is handed to one worker and belongs to it for the rest of its
 * life (session.h, Loops): that worker's thread alone touches it, its ring, its engine and its
 * captures. Nothing a worker does reaches another worker.
 *
 * Crossings, each through one mutex and one uv_async_t (uv_async_send may be called from any
 * thread; several sends may run the callback once, so each callback takes everything queued):
 *   main -> worker   w->mu: the inbox of tasks (a function and what it concerns: a session
 *                    handed over, the shutdown) and the quit request; w->wake
 *   worker -> main   d->post_mu: posts, each a function and its payload run on the main loop
 *                    in the order they were posted (kept.c posts runs-log rows and kept
 *                    profiles), and the count of sessions freed; d->post
 *   any loop         d->flights_mu: what each uid holds (server.c)
 * Memory ordering: a pthread mutex's unlock releases and its lock acquires, so whatever a thread
 * wrote before queueing (a session's whole state, a post's contents) is visible to the thread
 * that dequeues it under the same mutex. After queueing, the sender never touches the item
 * again. A worker posts a run's row and profile before it sends the run's RESULT, and the main
 * loop runs every post (jpd_workers_absorb) before it reads the kept store (SHOW, RUNS) or the
 * session count (accept), so a client that got its RESULT always finds its run with `show`, as
 * with a single loop. The pool knows none of its users: a task and a post are functions, and
 * the freed sessions are handed to the function the server gave jpd_workers_start. The
 * per-worker run count used to balance hand-overs is a relaxed atomic: a hint.
 *
 * A profile's bytes depend only on its run's records: which worker drained it changes nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jpd.h"
#include "server.h"
#include "util.h"

struct jpd_post {
    struct jpd_post *next;
    jpd_post_fn *fn;
    max_align_t payload[]; /* the poster's bytes, copied */
};

int jpd_on_main(const struct jpd_daemon *d)
{
    return pthread_equal(pthread_self(), d->main_thread);
}

/* ---- worker side ---- */

static void on_wake(uv_async_t *h)
{
    struct jpd_loop *w = h->data;
    pthread_mutex_lock(&w->mu);
    struct jpd_task *t = w->inbox;
    w->inbox = w->inbox_tail = NULL;
    int quit = w->quit;
    pthread_mutex_unlock(&w->mu);
    while (t) { /* in the order queued; a task may free what holds it: next is read first */
        struct jpd_task *next = t->next;
        t->fn(w, t);
        t = next;
    }
    if (quit)
        uv_close((uv_handle_t *)&w->wake, NULL); /* the loop's last handle: uv_run returns */
}

static void *worker_main(void *arg)
{
    struct jpd_loop *w = arg;
    uv_run(w->uv, UV_RUN_DEFAULT);
    return NULL;
}

/* Queues t (or, t NULL, the quit request) to worker w and wakes it. */
static void queue(struct jpd_loop *w, struct jpd_task *t)
{
    pthread_mutex_lock(&w->mu);
    if (!t) {
        w->quit = 1;
    } else {
        t->next = NULL;
        if (w->inbox_tail)
            w->inbox_tail->next = t;
        else
            w->inbox = t;
        w->inbox_tail = t;
    }
    pthread_mutex_unlock(&w->mu);
    uv_async_send(&w->wake);
}

/* ---- main side ---- */

/* Everything posted so far, in order, and (gone not NULL) the count of freed sessions. */
static struct jpd_post *take_posts(struct jpd_daemon *d, uint32_t *gone)
{
    pthread_mutex_lock(&d->post_mu);
    struct jpd_post *p = d->posts;
    d->posts = d->posts_tail = NULL;
    if (gone) {
        *gone = d->gone;
        d->gone = 0;
    }
    pthread_mutex_unlock(&d->post_mu);
    return p;
}

static void run_posts(struct jpd_daemon *d, struct jpd_post *p)
{
    while (p) {
        struct jpd_post *next = p->next;
        p->fn(d, p->payload);
        free(p);
        p = next;
    }
}

static void on_post(uv_async_t *h)
{
    jpd_workers_absorb(h->data);
}

/* Undoes a worker whose thread never started: its loop holds only the async handle. */
static void worker_unmake(struct jpd_loop *w)
{
    uv_close((uv_handle_t *)&w->wake, NULL);
    uv_run(&w->own, UV_RUN_DEFAULT);
    (void)uv_loop_close(&w->own);
    pthread_mutex_destroy(&w->mu);
}

static int worker_make(struct jpd_daemon *d, struct jpd_loop *w)
{
    w->d = d;
    w->uv = &w->own;
    int r = uv_loop_init(&w->own);
    if (r < 0)
        return r;
    r = uv_async_init(&w->own, &w->wake, on_wake);
    if (r < 0) {
        (void)uv_loop_close(&w->own);
        return r;
    }
    w->wake.data = w;
    pthread_mutex_init(&w->mu, NULL);
    r = jpd_thread_start(&w->thread, worker_main, w);
    if (r < 0) {
        worker_unmake(w);
        return r;
    }
    w->started = 1;
    return 0;
}

int jpd_workers_start(struct jpd_daemon *d, uint32_t n,
                      void (*sessions_gone)(struct jpd_daemon *d, uint32_t n))
{
    d->sessions_gone = sessions_gone;
    if (n == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus < 1 ? 1u : cpus > (long)JPD_MAX_WORKERS ? JPD_MAX_WORKERS : (uint32_t)cpus;
    }
    d->workers = calloc(n, sizeof *d->workers);
    if (!d->workers)
        return -ENOMEM;
    int r = uv_async_init(d->loop, &d->post, on_post);
    if (r < 0) {
        free(d->workers);
        d->workers = NULL;
        return r;
    }
    d->post.data = d;
    d->post_active = 1;
    for (uint32_t i = 0; i < n; i++) {
        r = worker_make(d, &d->workers[i]);
        if (r < 0)
            break;
        d->nworkers++;
    }
    if (r < 0) {
        jpd_workers_stop(d);
        jpd_workers_join(d);
        return r;
    }
    return 0;
}

void jpd_workers_hand_over(struct jpd_daemon *d, struct jpd_task *t)
{
    struct jpd_loop *best = &d->workers[0];
    uint32_t least = __atomic_load_n(&best->assigned, __ATOMIC_RELAXED);
    for (uint32_t i = 1; i < d->nworkers; i++) {
        uint32_t a = __atomic_load_n(&d->workers[i].assigned, __ATOMIC_RELAXED);
        if (a < least) {
            least = a;
            best = &d->workers[i];
        }
    }
    __atomic_add_fetch(&best->assigned, 1u, __ATOMIC_RELAXED);
    queue(best, t);
}

void jpd_workers_hand_to(struct jpd_loop *w, struct jpd_task *t)
{
    __atomic_add_fetch(&w->assigned, 1u, __ATOMIC_RELAXED);
    queue(w, t);
}

void jpd_workers_shutdown(struct jpd_daemon *d, void (*fn)(struct jpd_loop *, struct jpd_task *))
{
    for (uint32_t i = 0; i < d->nworkers; i++) {
        d->workers[i].stop.fn = fn;
        queue(&d->workers[i], &d->workers[i].stop);
    }
}

void jpd_workers_stop(struct jpd_daemon *d)
{
    if (d->workers_stopping)
        return;
    d->workers_stopping = 1;
    for (uint32_t i = 0; i < d->nworkers; i++)
        queue(&d->workers[i], NULL);
    if (d->post_active) {
        /* No session is left anywhere, so no worker posts again. */
        d->post_active = 0;
        uv_close((uv_handle_t *)&d->post, NULL);
    }
}

void jpd_workers_join(struct jpd_daemon *d)
{
    for (uint32_t i = 0; i < d->nworkers; i++) {
        struct jpd_loop *w = &d->workers[i];
        if (!w->started)
            continue;
        pthread_join(w->thread, NULL);
        if (uv_loop_close(&w->own) < 0) {
            jpd_log("internal: a worker left handles open at exit");
            d->exit_code = 1;
        }
        pthread_mutex_destroy(&w->mu);
    }
    free(d->workers);
    d->workers = NULL;
    d->nworkers = 0;
    /* Posts that raced the end still run (a run's row is never lost to the shutdown). */
    run_posts(d, take_posts(d, NULL));
}

void jpd_workers_absorb(struct jpd_daemon *d)
{
    uint32_t gone;
    run_posts(d, take_posts(d, &gone));
    if (gone)
        d->sessions_gone(d, gone);
}

/* ---- posts (any thread) ---- */

int jpd_post(struct jpd_daemon *d, jpd_post_fn *fn, const void *payload, size_t size)
{
    struct jpd_post *p = malloc(sizeof *p + size);
    if (!p)
        return -ENOMEM;
    p->next = NULL;
    p->fn = fn;
    memcpy(p->payload, payload, size);
    pthread_mutex_lock(&d->post_mu);
    if (d->posts_tail)
        d->posts_tail->next = p;
    else
        d->posts = p;
    d->posts_tail = p;
    pthread_mutex_unlock(&d->post_mu);
    uv_async_send(&d->post);
    return 0;
}

void jpd_post_gone(struct jpd_daemon *d, struct jpd_loop *lp)
{
    __atomic_sub_fetch(&lp->assigned, 1u, __ATOMIC_RELAXED);
    pthread_mutex_lock(&d->post_mu);
    d->gone++;
    pthread_mutex_unlock(&d->post_mu);
    uv_async_send(&d->post);
}
