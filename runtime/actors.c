/* The actor scheduler (actors.h): workers, the run queue, coroutine switches, mailboxes,
 * preemption, deadlock and the end of the run.
 *
 * Locking: one mutex (s->mu) guards every actor's state, mailbox and join result, the run
 * queue and the counters; an actor's jt_rt is touched only by the worker running it. A switch is
 * a coroutine swap, never under the mutex: an actor that must wait records what it wants
 * (a->want) and swaps to its worker, and the worker applies the wish under the mutex once the
 * actor's context is saved, so a sender that wakes it can never resume a half-saved context.
 * The preemption words (w->poke) are the only state read without the mutex: relaxed atomics,
 * a hint that makes the next safe point take the mutex.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include "actors_internal.h"
#include "call.h"

#if defined(__SANITIZE_ADDRESS__)
#define JT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define JT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define JT_TSAN 1
#endif
#endif
#ifdef JT_TSAN
/* ThreadSanitizer follows each actor as a fiber: a switch is a hand-off (it synchronises),
 * and an actor resumed on another worker keeps its own history. */
#include <sanitizer/tsan_interface.h>
#define TSAN_FIBER(x) x
#else
#define TSAN_FIBER(x)
#endif

#ifdef JT_ASAN
#include <dlfcn.h>
#include <sanitizer/common_interface_defs.h>

/* AddressSanitizer's own swapcontext prints a warning on first use (it cannot know where the
 * stacks are); every switch here tells it through the fiber calls instead, so the C library's
 * swapcontext is called directly and the program's stderr stays the program's. */
static int (*real_swapcontext)(ucontext_t *, const ucontext_t *);
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static void real_init(void)
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    void *sym = libc ? dlsym(libc, "swapcontext") : NULL;
    if (sym) /* POSIX: a symbol's address converts to its function pointer */
        memcpy(&real_swapcontext, &sym, sizeof sym);
    if (!real_swapcontext)
        real_swapcontext = swapcontext;
}
static int switch_context(ucontext_t *from, const ucontext_t *to)
{
    pthread_once(&real_once, real_init);
    return real_swapcontext(from, to);
}
#else
#define switch_context swapcontext
#endif

#define ACTOR_STACK (256u << 20) /* as deep as the jett-runtime thread's (main.c) */
#define WORKER_STACK (8u << 20)  /* a worker's own loop only: actors run on their stacks */
#define IDLE_POLL_NS 10000000ull /* an idle worker looks at interrupts this often */


uint64_t jt_sched_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- run queue and wake-ups (under s->mu) ----------------------------------------------- */

void jt_sched_queue(struct jt_sched *s, struct jt_actor *a)
{
    a->state = A_RUNNABLE;
    a->rq_next = NULL;
    if (s->rq_tail)
        s->rq_tail->rq_next = a;
    else
        s->rq_head = a;
    s->rq_tail = a;
    pthread_cond_signal(&s->cv);
}

static struct jt_actor *rq_pop(struct jt_sched *s)
{
    struct jt_actor *a = s->rq_head;
    if (a) {
        s->rq_head = a->rq_next;
        if (!s->rq_head)
            s->rq_tail = NULL;
    }
    return a;
}

static void poke_all(struct jt_sched *s)
{
    for (uint32_t i = 0; i < s->nw; i++)
        __atomic_store_n(&s->w[i].poke, 1u, __ATOMIC_RELAXED);
}

static void stop_run(struct jt_sched *s)
{
    s->stop = true;
    poke_all(s);
    pthread_cond_broadcast(&s->cv);
}

/* The first runtime error of the run wins; it ends every actor. */
static void fail_run(struct jt_sched *s, const char *msg, size_t len)
{
    if (!s->failed) {
        s->failed = true;
        jt_buf_put(&s->first_err, msg, len);
    }
    stop_run(s);
}

/* ---- switching ----------------------------------------------------------------------------- */

static uint32_t agent_depth(const struct jt_rt *rt)
{
    return rt->depth + (rt->init_frame ? 1u : 0u);
}

/* Points the actor's state at worker w's agent handle, with the actor's call stack on it: the
 * handle keeps the stack of the last actor that ran on w, so unless that was this actor and it
 * ran nowhere since, the old stack is left and this one re-entered frame by frame (with each
 * caller's statement), which gives the same call chains as if it had never moved. */
static void switch_in(struct jt_worker *w, struct jt_actor *a, bool stopping)
{
    struct jt_sched *s = w->s;
    struct jt_rt *rt = a->rt;
    __atomic_store_n(&w->poke, stopping ? 1u : 0u, __ATOMIC_RELAXED);
    rt->poke = &w->poke;
    if (w->t) {
        jettprof_set_task(w->t, a->id, a->id);
        jettprof_set_state(w->t, JETTPROF_STATE_JETT);
        if (w->owner != a || a->last_worker != w) {
            for (uint32_t i = 0; i < w->held; i++)
                jettprof_leave(w->t);
            if (rt->init_frame) {
                jettprof_stmt(w->t, 0, 0);
                jettprof_enter(w->t, rt->init_frame);
            }
            for (uint32_t d = 0; d < rt->depth; d++) {
                jettprof_stmt(w->t, rt->frames[d].line, rt->frames[d].col);
                jettprof_enter(w->t, rt->frames[d].frame);
            }
            jettprof_stmt(w->t, rt->line, rt->col);
            w->owner = a;
        }
        rt->pt = w->t;
        rt->pw = w->pw;
        /* The call-site caches live in the program's call nodes, which every worker runs: a
         * cache may be used by one thread at a time (jettprof.h), so with several workers
         * calls take the plain enter and leave (the handle's per-depth cache still hits). */
        rt->pf = s->nw == 1 ? w->pf : NULL;
        rt->stmt_pos = s->hook_heap ? NULL : w->stmt_pos;
        if (s->hook_heap) {
            rt->heap.pt = w->t;
            rt->heap.pf = w->pf;
        }
    }
    a->worker = a->last_worker = w;
}

void jt_sched_yield(struct jt_actor *a)
{
    struct jt_worker *w = a->worker;
    w->held = agent_depth(a->rt);
#ifdef JT_ASAN
    __sanitizer_start_switch_fiber(a->want == W_DONE || a->want == W_ABANDON ? NULL
                                                                               : &a->asan_fake,
                                   w->asan_bottom, w->asan_size);
#endif
    TSAN_FIBER(__tsan_switch_to_fiber(w->tsan_fiber, 0));
    switch_context(&a->ctx, &w->ctx);
#ifdef JT_ASAN
    __sanitizer_finish_switch_fiber(a->asan_fake, &a->worker->asan_bottom,
                                    &a->worker->asan_size);
#endif
}

/* Leaves for good without unwinding: the run is over, and what the actor holds stays alive
 * (retained), so an actor stopped mid-way reports no frees it would not have made. */
void jt_sched_abandon(struct jt_actor *a)
{
    a->want = W_ABANDON;
    jt_sched_yield(a);
    abort(); /* never resumed */
}

static void record_error(struct jt_actor *a)
{
    struct jt_sched *s = a->rt->sched;
    struct jt_rt *rt = a->rt;
    pthread_mutex_lock(&s->mu);
    fail_run(s, rt->errmsg.p ? rt->errmsg.p : "runtime error", rt->errmsg.len);
    pthread_mutex_unlock(&s->mu);
}

static void actor_main(unsigned lo, unsigned hi)
{
    struct jt_actor *a = (struct jt_actor *)(uintptr_t)((uint64_t)hi << 32 | lo);
#ifdef JT_ASAN
    __sanitizer_finish_switch_fiber(NULL, &a->worker->asan_bottom, &a->worker->asan_size);
#endif
    struct jt_rt *rt = a->rt;
    if (a->id == 0) {
        jt_rt_run(rt);
    } else {
        for (uint32_t i = 0; i < a->fn->nparams; i++)
            jt_heap_adopt(&rt->heap, a->args[i]);
        jv r = jt_call_values(rt, a->at, a->fn, a->args);
        free(a->args);
        a->args = NULL;
        a->result = r;
    }
    if (rt->ctl == CTL_ERROR)
        record_error(a);
    a->interrupted = rt->ctl == CTL_INTERRUPT;
    a->want = W_DONE;
    jt_sched_yield(a);
    abort(); /* an ended actor is never resumed */
}

/* Applies what the actor that just switched out wants (under s->mu). */
static void apply_want(struct jt_sched *s, struct jt_actor *a)
{
    bool interrupted = __atomic_load_n(s->root->interrupt, __ATOMIC_RELAXED) != 0;
    switch (a->want) {
    case W_PREEMPT:
        jt_sched_queue(s, a);
        break;
    case W_RECV:
        if (a->mb_head || interrupted)
            jt_sched_queue(s, a);
        else
            a->state = A_RECV;
        break;
    case W_JOIN:
        if (s->actors[a->join_target]->state == A_DONE || interrupted)
            jt_sched_queue(s, a);
        else
            a->state = A_JOIN;
        break;
    case W_SLEEP:
        if (interrupted) {
            jt_sched_queue(s, a);
        } else {
            a->state = A_SLEEP;
            s->sleeping++;
            pthread_cond_broadcast(&s->cv); /* idle workers recompute their deadline */
        }
        break;
    case W_DONE:
        a->state = A_DONE;
        s->alive--;
        for (uint32_t i = 0; i < s->nactors; i++) {
            struct jt_actor *j = s->actors[i];
            if (j->state == A_JOIN && j->join_target == a->id)
                jt_sched_queue(s, j);
        }
        if (a->id == 0)
            stop_run(s); /* the run ends when main does */
        break;
    case W_ABANDON:
    case W_NONE:
        break;
    }
    a->want = W_NONE;
}

/* Moves sleepers that are due (or every waiter, once an interrupt came) to the run queue;
 * returns the earliest wake-up still ahead, or UINT64_MAX. */
static uint64_t wake_due(struct jt_sched *s, uint64_t now)
{
    bool interrupted = __atomic_load_n(s->root->interrupt, __ATOMIC_RELAXED) != 0;
    if (interrupted && !s->interrupt_woken) {
        s->interrupt_woken = true; /* every waiter sees the interrupt at its wait */
        for (uint32_t i = 0; i < s->nactors; i++) {
            struct jt_actor *a = s->actors[i];
            if (a->state == A_RECV || a->state == A_JOIN || a->state == A_SLEEP) {
                if (a->state == A_SLEEP)
                    s->sleeping--;
                jt_sched_queue(s, a);
            }
        }
    }
    uint64_t next = UINT64_MAX;
    if (!s->sleeping)
        return next;
    for (uint32_t i = 0; i < s->nactors; i++) {
        struct jt_actor *a = s->actors[i];
        if (a->state != A_SLEEP)
            continue;
        if (a->wake_ns <= now) {
            s->sleeping--;
            jt_sched_queue(s, a);
        } else if (a->wake_ns < next) {
            next = a->wake_ns;
        }
    }
    return next;
}

/* Every actor waits in receive or join and none can wake: the run's runtime error, at main's
 * current statement. */
static void deadlock(struct jt_sched *s)
{
    const struct jt_rt *m = s->root;
    struct jp_buf b = {0};
    jt_buf_printf(&b, "%s:%u:%u: runtime error: deadlock: every actor is waiting",
                  m->fn ? m->fn->src->logical : "?", m->line, m->col);
    fail_run(s, b.p, b.len);
    jp_buf_free(&b);
}

static void worker_loop(struct jt_worker *w)
{
    struct jt_sched *s = w->s;
    TSAN_FIBER(w->tsan_fiber = __tsan_get_current_fiber());
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        uint64_t next = wake_due(s, jt_sched_now_ns());
        struct jt_actor *a = rq_pop(s);
        if (!a) {
            if (s->running == 0 && s->sleeping == 0 && s->alive > 0) {
                deadlock(s);
                break;
            }
            if (w->t)
                jettprof_set_state(w->t, JETTPROF_STATE_WAITING);
            uint64_t now = jt_sched_now_ns(), until = now + IDLE_POLL_NS;
            if (next < until)
                until = next;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t abs = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                           (until - now);
            ts.tv_sec = (time_t)(abs / 1000000000ull);
            ts.tv_nsec = (long)(abs % 1000000000ull);
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            continue;
        }
        a->state = A_RUNNING;
        s->running++;
        __atomic_store_n(&w->switches, w->switches + 1u, __ATOMIC_RELAXED);
        bool stopping = s->stop;
        pthread_mutex_unlock(&s->mu);
        switch_in(w, a, stopping);
#ifdef JT_ASAN
        __sanitizer_start_switch_fiber(&w->asan_fake, a->stack, a->stack_len);
#endif
        TSAN_FIBER(__tsan_switch_to_fiber(a->tsan_fiber, 0));
        switch_context(&w->ctx, &a->ctx);
#ifdef JT_ASAN
        __sanitizer_finish_switch_fiber(w->asan_fake, NULL, NULL);
#endif
        pthread_mutex_lock(&s->mu);
        s->running--;
        apply_want(s, a);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- workers and the ticker ------------------------------------------------------------- */

static int worker_register(struct jt_worker *w, jettprof_run *run)
{
    if (!run)
        return 0;
    int r = jettprof_thread_register(run, w->index, &w->t);
    if (r < 0)
        return r;
    w->pw = jettprof_pending_word(w->t);
    w->pf = jettprof_thread_fast(w->t, JETTPROF_FAST_VERSION);
    w->stmt_pos = jettprof_stmt_pos(w->t);
    return 0;
}

static void *worker_thread(void *arg)
{
    struct jt_worker *w = arg;
    struct jt_sched *s = w->s;
    int r = worker_register(w, s->run);
    pthread_mutex_lock(&s->mu);
    if (r < 0 && !s->setup_err)
        s->setup_err = r;
    s->ready++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (r == 0)
        worker_loop(w);
    if (w->t)
        jettprof_thread_unregister(w->t);
    w->t = NULL;
    return NULL;
}

/* Every JT_ACTOR_SLICE_NS, a worker that has run the same actor since the last tick gets its
 * preemption word raised; the actor's next safe point then gives way if another is ready. */
static void *ticker_thread(void *arg)
{
    struct jt_sched *s = arg;
    while (!__atomic_load_n(&s->ticker_stop, __ATOMIC_RELAXED)) {
        struct timespec ts = {0, (long)JT_ACTOR_SLICE_NS};
        nanosleep(&ts, NULL);
        for (uint32_t i = 0; i < s->nw; i++) {
            struct jt_worker *w = &s->w[i];
            uint64_t sw = __atomic_load_n(&w->switches, __ATOMIC_RELAXED);
            if (sw == w->seen)
                __atomic_store_n(&w->poke, 1u, __ATOMIC_RELAXED);
            w->seen = sw;
        }
    }
    return NULL;
}

/* A new actor with its own state and stack, queued (under s->mu). NULL when out of memory. */
/* The actor's first context: actor_main on its own stack. getcontext returns twice, so the
 * pointer is read through a volatile once it has run. */
static __attribute__((noinline)) void context_init(struct jt_actor *actor)
{
    struct jt_actor *volatile a = actor;
    getcontext(&a->ctx);
    a->ctx.uc_stack.ss_sp = a->stack;
    a->ctx.uc_stack.ss_size = a->stack_len;
    a->ctx.uc_link = NULL;
    uintptr_t p = (uintptr_t)a;
    makecontext(&a->ctx, (void (*)(void))actor_main, 2, (unsigned)(p & 0xffffffffu),
                (unsigned)((uint64_t)p >> 32));
}

/* Not inlined: getcontext returns twice, which would make the callers' locals suspect. */
static __attribute__((noinline)) struct jt_actor *actor_new(struct jt_sched *s, struct jt_rt *rt)
{
    if (s->nactors == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2u : 16u;
        struct jt_actor **na = realloc(s->actors, nc * sizeof *na);
        if (!na)
            return NULL;
        s->actors = na;
        s->cap = nc;
    }
    struct jt_actor *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->stack_len = ACTOR_STACK;
    a->stack = mmap(NULL, a->stack_len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (a->stack == MAP_FAILED) {
        free(a);
        return NULL;
    }
    mprotect(a->stack, 4096, PROT_NONE); /* a guard page below the stack */
    context_init(a);
    TSAN_FIBER(a->tsan_fiber = __tsan_create_fiber(0));
    a->id = s->nactors;
    a->rt = rt;
    rt->actor = a;
    rt->sched = s;
    s->actors[s->nactors++] = a;
    s->alive++;
    return a;
}

static void actor_free(struct jt_actor *a)
{
    struct jt_rt *rt = a->rt;
    for (struct msg *m = a->mb_head, *nx; m; m = nx) { /* undelivered: retained, now freed */
        nx = m->next;
        jt_heap_adopt(&rt->heap, m->v);
        free(m);
    }
    if (a->args)
        for (uint32_t i = 0; i < a->fn->nparams; i++)
            jt_heap_adopt(&rt->heap, a->args[i]);
    free(a->args);
    if (a->id != 0) {
        jt_rt_fini(rt);
        free(rt);
    }
    TSAN_FIBER(__tsan_destroy_fiber(a->tsan_fiber));
    munmap(a->stack, a->stack_len);
    free(a);
}

/* Under s->mu. */
struct jt_actor *jt_sched_start(struct jt_sched *s, struct jt_rt *rt, const struct jt_fn *f,
                                jv *args, const struct jt_node *at)
{
    struct jt_actor *a = actor_new(s, rt);
    if (!a)
        return NULL;
    a->fn = f;
    a->args = args;
    a->at = at;
    s->multi = true;
    if (!s->ticker_on && pthread_create(&s->ticker, NULL, ticker_thread, s) == 0)
        s->ticker_on = true;
    jt_sched_queue(s, a);
    return a;
}

enum jt_outcome jt_sched_run(struct jt_rt *root, const struct jt_sched_config *cfg,
                             int *setup_err)
{
    *setup_err = 0;
    struct jt_sched *s = jt_xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->shared_mu, NULL);
    s->root = root;
    s->hook_heap = cfg->hook_heap;
    s->nw = cfg->workers ? cfg->workers : 1u;
    s->w = jt_xcalloc(s->nw, sizeof *s->w);
    root->sched = s;
    for (uint32_t i = 0; i < s->nw; i++) {
        s->w[i].s = s;
        s->w[i].index = i;
    }
    s->run = cfg->run;
    int r = worker_register(&s->w[0], cfg->run);
    for (uint32_t i = 1; i < s->nw && r == 0; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, WORKER_STACK);
        int e = pthread_create(&s->w[i].th, &attr, worker_thread, &s->w[i]);
        pthread_attr_destroy(&attr);
        if (e != 0)
            r = -e;
        else
            s->w[i].started = true;
    }
    pthread_mutex_lock(&s->mu);
    uint32_t want = 0;
    for (uint32_t i = 1; i < s->nw; i++)
        want += s->w[i].started;
    while (s->ready < want)
        pthread_cond_wait(&s->cv, &s->mu);
    if (r == 0)
        r = s->setup_err;
    struct jt_actor *main_actor = r == 0 ? actor_new(s, root) : NULL;
    if (r == 0 && !main_actor)
        r = -ENOMEM;
    if (r == 0)
        jt_sched_queue(s, main_actor);
    else
        stop_run(s);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);

    if (r == 0)
        worker_loop(&s->w[0]);

    for (uint32_t i = 1; i < s->nw; i++)
        if (s->w[i].started)
            pthread_join(s->w[i].th, NULL);
    if (s->ticker_on) {
        __atomic_store_n(&s->ticker_stop, 1u, __ATOMIC_RELAXED);
        pthread_join(s->ticker, NULL);
    }
    if (s->w[0].t)
        jettprof_thread_unregister(s->w[0].t);
    s->w[0].t = NULL;
    /* No worker runs any more: the actors' runtime states must not point at the handles just
     * unregistered. */
    for (uint32_t i = 0; i < s->nactors; i++) {
        struct jt_rt *rt = s->actors[i]->rt;
        rt->pt = NULL;
        rt->pf = NULL;
        rt->pw = &jt_no_pending;
        rt->poke = &jt_no_pending;
        rt->stmt_pos = NULL;
        rt->heap.pt = NULL;
        rt->heap.pf = NULL;
    }
    if (r < 0) {
        *setup_err = r;
        return JT_OUT_RUNTIME_ERROR;
    }
    if (s->failed) {
        root->errmsg.len = 0;
        jt_buf_put(&root->errmsg, s->first_err.p, s->first_err.len);
        return JT_OUT_RUNTIME_ERROR;
    }
    if (root->ctl == CTL_INTERRUPT)
        return JT_OUT_INTERRUPTED;
    return JT_OUT_RETURNED;
}

void jt_sched_free(struct jt_sched *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->nactors; i++)
        actor_free(s->actors[i]);
    free(s->actors);
    free(s->w);
    jp_buf_free(&s->first_err);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->shared_mu);
    free(s);
}
