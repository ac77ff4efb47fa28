/* Concurrency on the main ring (a local run has no daemon, so every thread writes there under
 * the spin flag, as a thread past the daemon's ring cap does): several registered producers,
 * run-level interning from one thread while another produces, the real timer thread accounting
 * for every tick, and registration churn under the timer. A consumer thread drains the ring
 * while everything runs, as the daemon does. These are the agent's ThreadSanitizer targets; the
 * worker rings' own are tests/agent/test_e2e.c's two-thread test and daemon-rings-tsan. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stream.h"

struct consumer {
    pthread_t th;
    struct stream s;
    uint32_t stop;
};

static void *consume(void *arg)
{
    struct consumer *c = arg;
    while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
        if (ta_stream_drain(&c->s) == 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    ta_stream_drain(&c->s);
    return NULL;
}

static void consumer_start(struct consumer *c, jettprof_run *run)
{
    memset(c, 0, sizeof *c);
    ta_stream_open(&c->s, run);
    cr_assert_eq(pthread_create(&c->th, NULL, consume, c), 0);
}

static void consumer_stop(struct consumer *c)
{
    __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
    pthread_join(c->th, NULL);
}

/* ---- several producers ---- */

#define NPROD 4
#define NALLOC 20000

struct producer {
    jettprof_run *run;
    uint32_t id;
    uint32_t frame;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    char fn[32];
    snprintf(fn, sizeof fn, "worker%u", p->id);
    p->frame = ta_frame(p->run, "pool", fn, p->id); /* a run-level call from each thread */
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(p->run, p->id, &t), 0);
    for (int i = 0; i < NALLOC; i++) {
        cr_assert_eq(jettprof_enter(t, p->frame), 0);
        uint64_t id;
        cr_assert_eq(jettprof_alloc(t, 16, &id), 0);
        cr_assert_eq(jettprof_free(t, id, 16), 0);
        jettprof_leave(t);
        if (i % 1000 == 0)
            jettprof_set_task(t, (uint32_t)i, JETTPROF_ID_UNAVAILABLE);
    }
    jettprof_thread_unregister(t);
    return NULL;
}

static void share_one_ring(uint32_t slots)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.ring_slots = slots;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    struct consumer con;
    consumer_start(&con, run);
    pthread_t th[NPROD];
    struct producer p[NPROD];
    for (int i = 0; i < NPROD; i++) {
        p[i] = (struct producer){run, (uint32_t)i + 1, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, produce, &p[i]), 0);
    }
    for (int i = 0; i < NPROD; i++)
        pthread_join(th[i], NULL);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    consumer_stop(&con);
    struct stream *s = &con.s;
    cr_assert_eq(ta_stream_count(s, JP_REC_ALLOC), NPROD * NALLOC);
    cr_assert_eq(ta_stream_count(s, JP_REC_FREE), NPROD * NALLOC);
    /* Ids: one per-run counter across all threads, each exactly once. */
    uint8_t *seen = calloc(NPROD * NALLOC + 1, 1);
    /* Node -> frame from the definitions; frame -> producer from the definitions' names. */
    uint32_t node_frame[64] = {0}, frame_owner[64] = {0};
    uint32_t exec_thread = JP_ID_UNAVAILABLE;
    for (size_t i = 0; i < s->n; i++) {
        const struct jp_rec_hdr *h = ta_rec_at(s, i);
        if (h->type == JP_REC_FRAME_DEF) {
            const struct jp_rec_frame_def *f = (const void *)h;
            cr_assert_lt(f->frame_id, 64);
            const char *fn = (const char *)(f + 1) + f->ns_len;
            cr_assert_eq(memcmp(fn, "worker", 6), 0);
            frame_owner[f->frame_id] = (uint32_t)(fn[6] - '0');
        } else if (h->type == JP_REC_NODE_DEF) {
            const struct jp_rec_node_def *n = (const void *)h;
            cr_assert_lt(n->node_id, 64);
            cr_assert_neq(frame_owner[n->frame_id], 0, "node before its frame");
            node_frame[n->node_id] = n->frame_id;
        } else if (h->type == JP_REC_EXEC) {
            exec_thread = ((const struct jp_rec_exec *)(const void *)h)->runtime_thread_id;
        } else if (h->type == JP_REC_ALLOC) {
            const struct jp_rec_alloc *a = (const void *)h;
            cr_assert(a->allocation_id >= 1 && a->allocation_id <= NPROD * NALLOC);
            cr_assert_eq(seen[a->allocation_id], 0, "id %llu reused",
                         (unsigned long long)a->allocation_id);
            seen[a->allocation_id] = 1;
            /* The identity in force is the allocating thread's: its node is its frame. */
            cr_assert_neq(node_frame[a->node], 0, "alloc before its node");
            cr_assert_eq(frame_owner[node_frame[a->node]], exec_thread,
                         "an event attributed to another thread's identity");
        }
    }
    free(seen);
    const struct jp_rec_run_stop *st = ta_rec_at(s, s->n - 1);
    cr_assert_eq(st->h.type, JP_REC_RUN_STOP);
    cr_assert_eq(st->record_count, s->n - 1);
    const struct jp_rec_counters *k = ta_stream_last(s, JP_REC_COUNTERS);
    cr_assert_eq(k->lost_records, 0, "backpressure: nothing is lost while the consumer moves");
    ta_stream_free(s);
}

Test(producers, several_threads_share_one_ring)
{
    share_one_ring(1u << 14);
}

/* The smallest ring: the producers wait for room all the time, one of them asleep on the ring's
 * futex inside its section while the others wait for the section, and the consumer thread wakes
 * it on each release it sees flagged (the wait/wake under ThreadSanitizer). */
Test(producers, several_threads_wait_for_room_in_a_tiny_ring)
{
    share_one_ring(64);
}

/* ---- one thread produces while another interns ---- */

struct owner_ctx {
    jettprof_run *run;
    uint32_t frame;
    uint32_t go, done;
    uint64_t allocs;
};

static void *owner_loop(void *arg)
{
    struct owner_ctx *o = arg;
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(o->run, 1, &t), 0);
    __atomic_store_n(&o->go, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&o->done, __ATOMIC_ACQUIRE)) {
        cr_assert_eq(jettprof_enter(t, o->frame), 0);
        uint64_t id;
        cr_assert_eq(jettprof_alloc(t, 8, &id), 0);
        jettprof_leave(t);
        o->allocs++;
    }
    jettprof_thread_unregister(t);
    return NULL;
}

Test(producers, interning_from_another_thread_while_one_produces)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.ring_slots = 1u << 14;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    struct consumer con;
    consumer_start(&con, run);
    struct owner_ctx o = {.run = run};
    o.frame = ta_frame(run, "m", "hot", 1);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, owner_loop, &o), 0);
    while (!__atomic_load_n(&o.go, __ATOMIC_ACQUIRE))
        sched_yield();
    for (int i = 0; i < 2000; i++) {
        char fn[32];
        snprintf(fn, sizeof fn, "late%d", i);
        uint32_t id = ta_frame(run, "m", fn, (uint32_t)i + 2);
        cr_assert_eq(id, (uint32_t)i + 2, "frame ids stay dense under concurrency");
    }
    __atomic_store_n(&o.done, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    consumer_stop(&con);
    struct stream *s = &con.s;
    cr_assert_eq(ta_stream_count(s, JP_REC_FRAME_DEF), 2001);
    cr_assert_eq(ta_stream_count(s, JP_REC_ALLOC), o.allocs);
    uint32_t next = 1;
    for (size_t i = 0; i < s->n; i++) {
        const struct jp_rec_hdr *h = ta_rec_at(s, i);
        if (h->type == JP_REC_FRAME_DEF) {
            cr_assert_eq(((const struct jp_rec_frame_def *)(const void *)h)->frame_id, next,
                         "frame definitions out of order");
            next++;
        }
    }
    ta_stream_free(s);
}

/* ---- the real timer ---- */

static void spin_ms(jettprof_thread *t, const uint32_t *pw, uint32_t frame, uint64_t ms)
{
    uint64_t end = jp_mono_ns() + ms * 1000000u;
    while (jp_mono_ns() < end) {
        jettprof_enter(t, frame);
        jettprof_poll(t, pw);
        jettprof_leave(t);
        jettprof_poll(t, pw);
    }
}

static void check_ticks_accounted(struct stream *s, uint64_t *samples_out)
{
    const struct jp_rec_counters *k = ta_stream_last(s, JP_REC_COUNTERS);
    uint64_t samples = ta_stream_count(s, JP_REC_CPU_SAMPLE);
    cr_assert_eq(k->requested_ticks,
                 samples + k->coalesced_ticks + k->dropped_ticks + k->waiting_ticks +
                     k->runtime_ticks,
                 "requested %llu != samples %llu + coalesced %llu + dropped %llu + waiting %llu "
                 "+ runtime %llu",
                 (unsigned long long)k->requested_ticks, (unsigned long long)samples,
                 (unsigned long long)k->coalesced_ticks, (unsigned long long)k->dropped_ticks,
                 (unsigned long long)k->waiting_ticks, (unsigned long long)k->runtime_ticks);
    if (samples_out)
        *samples_out = samples;
}

Test(timer, every_requested_tick_is_accounted_for)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 1, &run), 0);
    struct consumer con;
    consumer_start(&con, run);
    uint32_t f = ta_frame(run, "m", "busy", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    const uint32_t *pw = jettprof_pending_word(t);
    spin_ms(t, pw, f, 150);
    jettprof_set_state(t, JETTPROF_STATE_WAITING);
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    jettprof_set_state(t, JETTPROF_STATE_JETT);
    /* Not polling for a while: ticks coalesce. */
    uint64_t end = jp_mono_ns() + 50000000u;
    while (jp_mono_ns() < end) {
    }
    jettprof_safe_point(t);
    spin_ms(t, pw, f, 50);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    consumer_stop(&con);
    uint64_t samples;
    check_ticks_accounted(&con.s, &samples);
    const struct jp_rec_counters *k = ta_stream_last(&con.s, JP_REC_COUNTERS);
    /* Loose sanity only (the machine is shared): the timer ran and the states were seen. */
    cr_assert_gt(samples, 3);
    cr_assert_gt(k->waiting_ticks, 3);
    cr_assert_gt(k->coalesced_ticks, 1);
    ta_stream_free(&con.s);
}

struct churn {
    jettprof_run *run;
    uint32_t id, frame;
    uint64_t taken; /* ticks this thread found pending at a poll, and so answered */
};

/* Registers, polls and unregisters over and over: for 200 ms, and on until the thread has
 * taken a tick between a registration and the next (a bound of 60 s only ends a thread the
 * timer never reaches). */
static void *churn_loop(void *arg)
{
    struct churn *c = arg;
    uint64_t start = jp_mono_ns(), end = start + 200000000u;
    for (uint64_t now = start; now < end || c->taken == 0; now = jp_mono_ns()) {
        cr_assert_lt(now - start, 60000000000u, "thread %u never took a tick", c->id);
        jettprof_thread *t;
        int r = jettprof_thread_register(c->run, c->id, &t);
        cr_assert_eq(r, 0, "%s", jettprof_last_reason());
        const uint32_t *pw = jettprof_pending_word(t);
        for (int i = 0; i < 2000; i++) {
            jettprof_enter(t, c->frame);
            /* only this thread clears its word: set now, the poll below answers it */
            c->taken += __atomic_load_n(pw, __ATOMIC_RELAXED) != 0;
            jettprof_poll(t, pw);
            jettprof_leave(t);
        }
        jettprof_thread_unregister(t);
    }
    return NULL;
}

Test(timer, registration_churn_under_the_timer)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    c.ring_slots = 1u << 14;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 1, &run), 0);
    struct consumer con;
    consumer_start(&con, run);
    uint32_t f = ta_frame(run, "m", "churn", 1);
    pthread_t th[3];
    struct churn ch[3];
    for (int i = 0; i < 3; i++) {
        ch[i] = (struct churn){run, (uint32_t)i + 1, f, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, churn_loop, &ch[i]), 0);
    }
    uint64_t taken = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        cr_assert_gt(ch[i].taken, 0, "thread %d took no tick", i + 1);
        taken += ch[i].taken;
    }
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    consumer_stop(&con);
    uint64_t samples;
    check_ticks_accounted(&con.s, &samples);
    /* every tick taken is a sample, or a drop when the ring was full (an unregistration
     * answers a pending tick too, uncounted above) */
    const struct jp_rec_counters *k = ta_stream_last(&con.s, JP_REC_COUNTERS);
    cr_assert_geq(samples + k->dropped_ticks, taken, "%llu samples and %llu drops for %llu "
                  "ticks taken", (unsigned long long)samples,
                  (unsigned long long)k->dropped_ticks, (unsigned long long)taken);
    ta_stream_free(&con.s);
}

Test(threads, registration_limits)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    jettprof_thread *t, *u;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_thread_register(run, 2, &u), -EEXIST,
                 "one registration per thread and run");
    cr_assert_eq(jettprof_thread_register(run, JETTPROF_ID_UNAVAILABLE, &u), -EINVAL);
    jettprof_thread_unregister(t);
    jettprof_thread_unregister(NULL);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);

    /* Without the thread-registration capability a single thread may register. */
    c.capabilities &= ~JETTPROF_CAP_THREAD_REGISTRATION;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
}

struct dup_ctx {
    jettprof_run *run;
    uint32_t id;
    int r;
};

static void *reg_dup(void *arg)
{
    struct dup_ctx *d = arg;
    jettprof_thread *t;
    d->r = jettprof_thread_register(d->run, d->id, &t);
    if (d->r == 0)
        jettprof_thread_unregister(t);
    return NULL;
}

Test(threads, duplicate_runtime_ids_are_refused)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 5, &t), 0);
    struct dup_ctx d = {run, 5, 0};
    pthread_t th;
    pthread_create(&th, NULL, reg_dup, &d);
    pthread_join(th, NULL);
    cr_assert_eq(d.r, -EEXIST);
    d.id = 6;
    pthread_create(&th, NULL, reg_dup, &d);
    pthread_join(th, NULL);
    cr_assert_eq(d.r, 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
}
