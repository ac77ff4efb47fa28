/* agent_bench: what the agent costs the program it profiles. Prints figures (median of several
 * runs, with units) and ratios against baselines measured in the same run; asserts nothing.
 *
 *   1. safe-point poll with nothing pending (inline jettprof_poll, and the jettprof_safe_point
 *      function FFI users call), against an empty loop;
 *   2. enter/leave pairs, plain and inline through call-site caches (jettprof_enter_fast),
 *      back to back and each from a statement of its own (against the statements alone);
 *   3. allocation hook with room in the ring: jettprof_alloc alone and with the call-chain
 *      lookup of an enter/leave around it, and the inline jettprof_alloc_fast; median over
 *      batches;
 *   4. CPU mode at 1000 Hz on a call-heavy host loop against the same loop unprofiled, run
 *      alternately in this process. With $JETTPROFD set the run goes to a private jettprofd
 *      (the real consumer); otherwise to a local ring nobody drains (big enough for the run).
 *   5. `threads`: producer CPU time per allocation event with 1, 2 and 4 registered threads
 *      allocating and freeing at full rate behind a 3-deep chain, plain hooks and inline
 *      ones, into a memory run of a private jettprofd ($JETTPROFD, required); each thread's
 *      CPU time (CLOCK_THREAD_CPUTIME_ID) summed over the events of all, so a 2-core machine
 *      compares the cost of an event, not the wall time; with the run's lost records. Apart
 *      from the loops, timed on warm rings: a registration's CPU (its ring made) and the CPU
 *      an event of the ring's first lap takes (its pages faulted in as the events reach them,
 *      which registration paid up front for every thread when rings were faulted in whole).
 *   6. `start`: what a profiled run's start and end cost the program, wall, median of 20 (needs
 *      $JETTPROFD): jettprof_start of a memory run (spawning the private daemon, the handshake,
 *      the main ring and its first step faulted in), the first registration (the thread's
 *      ring), and jettprof_finish of the empty run (FINALIZE, the result, the daemon's exit);
 *      beside the daemon's own start, `jettprofd --version` spawned and waited for (posix_spawn, waitpid)
 *      (what the agent cannot make cheaper), so start less that is the agent's part.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "bench/lib/stats.h"

#define RUNS 7

/* `quick`: a twentieth of the work, to check that every part runs (figures are then rough). */
static uint64_t work_div = 1;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's CPU time: the micro-benchmarks' clock, which time slices given to other
 * processes on a shared machine do not inflate. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct jettprof_config config(uint32_t mode, uint32_t slots)
{
    struct jettprof_config c = {
        .size = sizeof c, .mode = mode, .rate_hz = mode == JETTPROF_MODE_CPU ? 1000 : 0,
        .threshold_bp = 500, .limit = 10, .outputs = JETTPROF_OUT_TOON, .capabilities = 0xffu,
        .capture_fd = -1, .ring_slots = slots,
    };
    return c;
}

static uint32_t frame(jettprof_run *run, const char *fn, uint32_t line)
{
    uint32_t src, id;
    if (jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "bench/host.jett", &src) < 0)
        abort();
    struct jettprof_frame_desc d = {.size = sizeof d, .ns = "bench", .function = fn,
                                    .source_id = src, .decl_start = line, .decl_end = line + 1,
                                    .decl_line = line, .decl_col = 1};
    if (jettprof_frame(run, &d, &id) < 0)
        abort();
    return id;
}

/* ---- 1. poll ---- */

static double bench_loop(int which, jettprof_thread *t, const uint32_t *pw, uint64_t n)
{
    volatile uint64_t sink = 0;
    uint64_t t0 = cpu_ns();
    for (uint64_t i = 0; i < n; i++) {
        if (which == 1)
            jettprof_poll(t, pw);
        else if (which == 2)
            jettprof_safe_point(t);
        __asm__ __volatile__("" ::: "memory"); /* keep the loop a loop in all three */
    }
    sink = n;
    (void)sink;
    return (double)(cpu_ns() - t0) / (double)n;
}

static void poll_bench(void)
{
    struct jettprof_config c = config(JETTPROF_MODE_CPU, 0);
    jettprof_run *run;
    if (jp_agent_start_local(&c, 0, &run) < 0) { /* no timer: nothing is ever pending */
        fprintf(stderr, "agent_bench: cannot start a local run\n");
        exit(1);
    }
    jettprof_thread *t;
    jettprof_thread_register(run, 1, &t);
    const uint32_t *pw = jettprof_pending_word(t);
    const uint64_t n = 50000000 / work_div;
    double base[RUNS], inl[RUNS], fn[RUNS];
    for (int r = 0; r < RUNS; r++) {
        base[r] = bench_loop(0, t, pw, n);
        inl[r] = bench_loop(1, t, pw, n);
        fn[r] = bench_loop(2, t, pw, n);
    }
    double b = bench_median(base, RUNS), i = bench_median(inl, RUNS), f = bench_median(fn, RUNS);
    printf("poll, nothing pending, inline jettprof_poll: %.3f ns/poll (%.3f ns over the empty "
           "loop)\n", i, i - b);
    printf("poll, nothing pending, jettprof_safe_point(): %.3f ns/poll (%.3f ns over the empty "
           "loop)\n", f, f - b);
    printf("baseline empty loop: %.3f ns/iteration\n", b);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
}

/* ---- 2. enter/leave ---- */

/* An interpreter's call pattern: a caller that calls two functions in turn from two call sites
 * at the same depth, so the plain path's one-entry-per-depth cache misses on every call and
 * each enter looks the (caller, frame) pair up in the node table; the inline path keeps one
 * cache per site and hits. */
static double enter_loop(int which, jettprof_thread *t, struct jettprof_fast *f,
                         struct jettprof_site *s, uint32_t fa, uint32_t fb, uint64_t n)
{
    struct jettprof_pos *pos = jettprof_stmt_pos(t);
    uint64_t t0 = cpu_ns();
    for (uint64_t i = 0; i < n; i++) {
        if (which == 1) {
            jettprof_enter(t, fa);
            jettprof_leave(t);
            jettprof_enter(t, fb);
            jettprof_leave(t);
        } else if (which == 2) {
            jettprof_enter_fast(f, &s[0], fa);
            jettprof_leave_fast(f);
            jettprof_enter_fast(f, &s[1], fb);
            jettprof_leave_fast(f);
        } else if (which == 3) { /* the caller's statements only: the baseline of 4 */
            jettprof_stmt_set(pos, 10, 5);
            __asm__ __volatile__("" ::: "memory");
            jettprof_stmt_set(pos, 11, 5);
        } else if (which == 4) { /* each call from a statement of its own */
            jettprof_stmt_set(pos, 10, 5);
            jettprof_enter_fast(f, &s[0], fa);
            jettprof_leave_fast(f);
            __asm__ __volatile__("" ::: "memory");
            jettprof_stmt_set(pos, 11, 5);
            jettprof_enter_fast(f, &s[1], fb);
            jettprof_leave_fast(f);
        }
        __asm__ __volatile__("" ::: "memory");
    }
    return (double)(cpu_ns() - t0) / (double)(2 * n);
}

static void enter_bench(void)
{
    struct jettprof_config c = config(JETTPROF_MODE_CPU, 0);
    jettprof_run *run;
    if (jp_agent_start_local(&c, 0, &run) < 0)
        exit(1);
    uint32_t fm = frame(run, "main", 1), fa = frame(run, "a", 2), fb = frame(run, "b", 3);
    jettprof_thread *t;
    jettprof_thread_register(run, 1, &t);
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    struct jettprof_site sites[2] = {0};
    jettprof_enter(t, fm);
    const uint64_t n = 5000000 / work_div;
    double base[RUNS], plain[RUNS], fast[RUNS], sbase[RUNS], sfast[RUNS];
    for (int r = 0; r < RUNS; r++) {
        base[r] = enter_loop(0, t, f, sites, fa, fb, n);
        plain[r] = enter_loop(1, t, f, sites, fa, fb, n);
        fast[r] = enter_loop(2, t, f, sites, fa, fb, n);
        sbase[r] = enter_loop(3, t, f, sites, fa, fb, n);
        sfast[r] = enter_loop(4, t, f, sites, fa, fb, n);
    }
    double b = bench_median(base, RUNS), p = bench_median(plain, RUNS), q = bench_median(fast, RUNS);
    double sb = bench_median(sbase, RUNS), sq = bench_median(sfast, RUNS);
    printf("enter+leave pair, plain calls, two callees in turn: %.3f ns/pair (%.3f ns over the "
           "empty loop)\n", p, p - b);
    printf("enter+leave pair, inline with call-site caches (hit): %.3f ns/pair (%.3f ns over "
           "the empty loop; %.2fx cheaper than plain)\n", q, q - b, (p - b) / (q - b));
    printf("enter+leave pair, inline (hit), each call from its own statement: %.3f ns/pair "
           "(%.3f ns over the loop setting the statements alone)\n", sq, sq - sb);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
}

/* ---- 3. allocation hook ---- */

static void drain(struct jp_ring *c)
{
    const uint8_t *p;
    uint64_t n;
    while ((n = jp_ring_peek(c, &p)) > 0)
        jp_ring_release(c, n);
}

static void alloc_bench(void)
{
    struct jettprof_config c = config(JETTPROF_MODE_MEMORY, 1u << 18);
    jettprof_run *run;
    if (jp_agent_start_local(&c, 0, &run) < 0)
        exit(1);
    struct jp_ring cons;
    if (jp_ring_map(dup(jp_agent_ring_fd(run)), &cons) < 0)
        exit(1);
    uint32_t fa = frame(run, "outer", 1), fb = frame(run, "inner", 2);
    jettprof_thread *t;
    jettprof_thread_register(run, 1, &t);
    jettprof_enter(t, fa);
    jettprof_enter(t, fb);
    jettprof_leave(t);
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    enum { BATCH = 2000, BATCHES_MAX = 301 };
    const int BATCHES = work_div > 1 ? 31 : BATCHES_MAX;
    static double a_only[BATCHES_MAX], a_enter[BATCHES_MAX], a_fast[BATCHES_MAX],
        base[BATCHES_MAX];
    for (int b = 0; b < BATCHES; b++) {
        drain(&cons); /* room for the whole batch, outside the timing */
        uint64_t t0 = cpu_ns();
        for (int i = 0; i < BATCH; i++) {
            uint64_t id;
            jettprof_alloc(t, 64, &id);
        }
        uint64_t t1 = cpu_ns();
        drain(&cons);
        uint64_t t2 = cpu_ns();
        for (int i = 0; i < BATCH; i++) {
            uint64_t id;
            jettprof_enter(t, fb); /* the call-chain lookup of (outer, inner) */
            jettprof_alloc(t, 64, &id);
            jettprof_leave(t);
        }
        uint64_t t3 = cpu_ns();
        for (int i = 0; i < BATCH; i++) /* the inline loop's own cost, without the hook */
            __asm__ __volatile__("" ::: "memory");
        uint64_t t4 = cpu_ns();
        drain(&cons);
        uint64_t t5 = cpu_ns();
        for (int i = 0; i < BATCH; i++) {
            uint64_t id;
            jettprof_alloc_fast(f, 64, &id);
            __asm__ __volatile__("" ::: "memory");
        }
        uint64_t t6 = cpu_ns();
        a_only[b] = (double)(t1 - t0) / BATCH;
        a_enter[b] = (double)(t3 - t2) / BATCH;
        base[b] = (double)(t4 - t3) / BATCH;
        a_fast[b] = (double)(t6 - t5) / BATCH;
    }
    double bl = bench_median(base, BATCHES);
    printf("allocation hook, room in the ring: %.2f ns/event median over %d batches of %d\n",
           bench_median(a_only, BATCHES), BATCHES, BATCH);
    printf("allocation hook + enter/leave (call-chain lookup): %.2f ns/event median\n",
           bench_median(a_enter, BATCHES));
    printf("allocation hook inline (jettprof_alloc_fast), room in the ring: %.2f ns/event "
           "median\n", bench_median(a_fast, BATCHES));
    printf("baseline empty loop: %.2f ns/iteration\n", bl);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    jp_ring_unmap(&cons);
}

/* ---- 4. CPU mode on a call-heavy loop ---- */

/* The host: a recursive function (fib) whose every call runs `stmts` statements of a fixed
 * amount of dependent arithmetic the compiler cannot remove, with the agent calls a tree-walking
 * interpreter makes: enter/leave per call, the inline statement position + safe-point poll
 * per statement. The
 * unprofiled host is the same code with no thread handle, so every agent call is skipped by a
 * branch, as in a runtime built with the agent but run without --profile. */
struct host {
    jettprof_thread *t; /* NULL: unprofiled */
    const uint32_t *pw;
    struct jettprof_pos *pos;
    uint32_t f_fib;
    int stmts, work;
};

static uint64_t statement(uint64_t x, int work)
{
    for (int i = 0; i < work; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ __volatile__("" : "+r"(x)); /* one dependent step each, never folded */
    }
    return x;
}

static uint64_t fib(struct host *h, int n, uint64_t x)
{
    if (h->t)
        jettprof_enter(h->t, h->f_fib);
    for (int s = 0; s < h->stmts; s++) {
        if (h->t) {
            jettprof_stmt_set(h->pos, 10u + (uint32_t)s, 3);
            jettprof_poll(h->t, h->pw);
        }
        x = statement(x, h->work);
    }
    if (n >= 2)
        x = fib(h, n - 1, x) ^ fib(h, n - 2, x + 1);
    if (h->t)
        jettprof_leave(h->t);
    return x;
}

static uint64_t fib_calls(int n)
{
    return n < 2 ? 1 : 1 + fib_calls(n - 1) + fib_calls(n - 2);
}

static double host_run(struct host *h, int n, volatile uint64_t *sink)
{
    uint64_t t0 = now_ns();
    *sink += fib(h, n, 1);
    return (double)(now_ns() - t0);
}

static void cpu_case(jettprof_run *run, struct host *prof, const char *what, int stmts, int work,
                     int n)
{
    struct host plain = *prof;
    plain.t = NULL;
    prof->stmts = plain.stmts = stmts;
    prof->work = plain.work = work;
    volatile uint64_t sink = 0;
    enum { PAIRS = 21 };
    double wp[PAIRS], wu[PAIRS], ratio[PAIRS];
    host_run(&plain, n, &sink); /* warm-up of both paths; nodes interned */
    host_run(prof, n, &sink);
    /* Short runs, alternated in pairs: load from other processes drifts slowly compared with
     * one pair, so the median of the per-pair ratios is the robust figure. */
    for (int i = 0; i < PAIRS; i++) {
        wu[i] = host_run(&plain, n, &sink);
        wp[i] = host_run(prof, n, &sink);
        ratio[i] = wp[i] / wu[i];
    }
    double calls = (double)fib_calls(n);
    double q = bench_median(ratio, PAIRS);
    double u = bench_median(wu, PAIRS), p = bench_median(wp, PAIRS);
    printf("%s host (%d statements/call), unprofiled: %.2f ms median of %d, %.1f ns/call\n",
           what, stmts, u / 1e6, PAIRS, u / calls);
    printf("%s host, CPU mode at 1000 Hz: %.2f ms median of %d, %.1f ns/call\n", what, p / 1e6,
           PAIRS, p / calls);
    printf("%s host, CPU mode overhead: %+.2f%% wall time (median profiled/unprofiled ratio "
           "of %d pairs %.4fx), %.2f ns/call of agent work\n",
           what, 100.0 * (q - 1.0), PAIRS, q, (q - 1.0) * u / calls);
    (void)run;
}

static void cpu_bench(void)
{
    int daemon = getenv("JETTPROFD") != NULL && *getenv("JETTPROFD");
    struct jettprof_config c = config(JETTPROF_MODE_CPU, 1u << 18);
    jettprof_run *run;
    int r = daemon ? jettprof_start(&c, &run) : jp_agent_start_local(&c, 1, &run);
    if (r < 0) {
        fprintf(stderr, "agent_bench: cannot start a CPU run: %s\n", jettprof_strerror(r));
        exit(1);
    }
    printf("CPU mode runs go to %s\n", daemon ? "a private jettprofd" : "a local ring");
    struct host prof = {0};
    prof.f_fib = frame(run, "fib", 10);
    jettprof_thread_register(run, 1, &prof.t);
    prof.pw = jettprof_pending_word(prof.t);
    prof.pos = jettprof_stmt_pos(prof.t);
    /* A tree-walking interpreter spends a few hundred ns per call (arguments, environment,
     * statement dispatch): "interpreter-like" models that; "light" is a much cheaper call to
     * show how the fixed agent cost per call scales. */
    cpu_case(run, &prof, "interpreter-like", 6, 24, 24);
    cpu_case(run, &prof, "light", 2, 12, 29);
    jettprof_thread_unregister(prof.t);
    struct jp_rec_counters k;
    jp_agent_counters(run, &k);
    printf("ticks: %llu requested, %llu coalesced, %llu dropped\n",
           (unsigned long long)k.requested_ticks, (unsigned long long)k.coalesced_ticks,
           (unsigned long long)k.dropped_ticks);
    if (daemon) {
        struct jettprof_result res = {.size = sizeof res};
        jettprof_finish(run, JETTPROF_TERM_RETURNED, &res);
        printf("profile status %u%s%s\n", res.status, res.reason[0] ? ", reason " : "",
               res.reason);
        jettprof_result_release(&res);
    } else {
        jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    }
}

/* ---- 5. threads ---- */

struct producer {
    jettprof_run *run;
    uint32_t tid, frames[3];
    int inline_hooks;
    uint64_t pairs; /* alloc + free pairs to make */
    uint64_t cpu;   /* this thread's CPU time for them, ns (the loop alone) */
    uint64_t reg;   /* this thread's CPU time for its registration, ns (its ring made) */
    uint64_t lap;   /* ... for its ring's first lap of events (faulted in by demand), ns */
    int err;
};

/* n alloc + free pairs behind the thread's chain, through the inline hooks or the plain ones */
static void pairs(jettprof_thread *t, struct jettprof_fast *f, int inline_hooks, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id = 0;
        if (inline_hooks && f) {
            jettprof_alloc_fast(f, 64u + (i & 63u), &id);
            jettprof_free_fast(f, id, 64u + (i & 63u));
        } else {
            jettprof_alloc(t, 64u + (i & 63u), &id);
            jettprof_free(t, id, 64u + (i & 63u));
        }
    }
}

static void *producer_main(void *arg)
{
    struct producer *p = arg;
    jettprof_thread *t;
    uint64_t r0 = cpu_ns();
    if ((p->err = jettprof_thread_register(p->run, p->tid, &t)) < 0)
        return NULL;
    p->reg = cpu_ns() - r0;
    for (int d = 0; d < 3; d++)
        jettprof_enter(t, p->frames[d]);
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    /* the ring's first lap apart: its pages are faulted in as the events reach them */
    uint64_t t0 = cpu_ns();
    pairs(t, f, p->inline_hooks, JP_DEFAULT_WORKER_SLOTS_MEMORY / 2u);
    p->lap = cpu_ns() - t0;
    t0 = cpu_ns();
    pairs(t, f, p->inline_hooks, p->pairs);
    p->cpu = cpu_ns() - t0;
    for (int d = 0; d < 3; d++)
        jettprof_leave(t);
    jettprof_thread_unregister(t);
    return NULL;
}

/* One run with `threads` producers: ns of producer CPU per event (the loops alone, on warm
 * rings); *lost the run's lost records (from its TOON totals), -1 when the run failed; *reg
 * the CPU a registration took, ns, and *lap a first lap's CPU per event, ns, the means of the
 * threads'. */
static double threads_case(uint32_t threads, int inline_hooks, uint64_t events, long long *lost,
                           double *reg, double *lap)
{
    struct jettprof_config c = config(JETTPROF_MODE_MEMORY, 0);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    if (r < 0) {
        fprintf(stderr, "agent_bench: cannot start a memory run: %s (%s)\n",
                jettprof_strerror(r), jettprof_last_reason());
        exit(1);
    }
    struct producer p[4];
    pthread_t th[4];
    uint32_t fr[3] = {frame(run, "main", 1), frame(run, "step", 5), frame(run, "leaf", 9)};
    for (uint32_t i = 0; i < threads; i++) {
        p[i] = (struct producer){run, i + 1, {fr[0], fr[1], fr[2]}, inline_hooks,
                                 events / 2 / threads, 0, 0, 0, 0};
        pthread_create(&th[i], NULL, producer_main, &p[i]);
    }
    uint64_t cpu = 0, regs = 0, laps = 0;
    for (uint32_t i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        if (p[i].err < 0) {
            fprintf(stderr, "agent_bench: register: %s\n", jettprof_strerror(p[i].err));
            exit(1);
        }
        cpu += p[i].cpu;
        regs += p[i].reg;
        laps += p[i].lap;
    }
    *reg = (double)regs / threads;
    *lap = (double)laps / threads / (double)JP_DEFAULT_WORKER_SLOTS_MEMORY; /* 2 events a pair */
    struct jettprof_result res = {.size = sizeof res};
    jettprof_finish(run, JETTPROF_TERM_RETURNED, &res);
    const char *l = res.toon ? strstr(res.toon, "lost_records: ") : NULL;
    *lost = l ? strtoll(l + strlen("lost_records: "), NULL, 10) : -1;
    jettprof_result_release(&res);
    return (double)cpu / (double)(events / 2 / threads * threads * 2);
}

static void threads_bench(void)
{
    if (!getenv("JETTPROFD") || !*getenv("JETTPROFD")) {
        fprintf(stderr, "agent_bench threads: set JETTPROFD to a jettprofd\n");
        exit(1);
    }
    uint64_t events = 8000000u / work_div;
    enum { N = 5 };
    printf("producer threads, memory mode, %llu events (alloc + free) in all, private jettprofd\n",
           (unsigned long long)events);
    for (int inl = 0; inl < 2; inl++) {
        double one = 0;
        for (uint32_t threads = 1; threads <= 4; threads *= 2) {
            double v[N], reg[N], lap[N];
            long long lost_all = 0;
            for (int k = 0; k < N; k++) {
                long long lost;
                v[k] = threads_case(threads, inl, events, &lost, &reg[k], &lap[k]);
                lost_all += lost < 0 ? 0 : lost;
            }
            double lo = v[0], hi = v[0];
            for (int k = 1; k < N; k++) {
                lo = v[k] < lo ? v[k] : lo;
                hi = v[k] > hi ? v[k] : hi;
            }
            double m = bench_median(v, N);
            if (threads == 1)
                one = m;
            printf("%s hooks, %u thread%s: %.2f ns/event producer CPU (%.2f - %.2f), "
                   "%.2fx one thread, lost %lld; registration %.1f us CPU a thread; "
                   "the first lap %.2f ns/event\n",
                   inl ? "inline" : "plain", threads, threads > 1 ? "s" : "", m, lo, hi,
                   m / one, lost_all, bench_median(reg, N) / 1000.0, bench_median(lap, N));
        }
    }
}

/* ---- 6. start ---- */

static uint64_t wall_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void start_bench(void)
{
    const char *d = getenv("JETTPROFD");
    if (!d || !*d) {
        fprintf(stderr, "agent_bench start: set JETTPROFD to a jettprofd\n");
        exit(1);
    }
    enum { N = 20 };
    double st[N], reg[N], fin[N], ver[N];
    char *argv[] = {(char *)"jettprofd", (char *)"--version", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    for (int k = 0; k < N; k++) {
        uint64_t t0 = wall_ns();
        pid_t pid;
        int ws = 0;
        if (posix_spawn(&pid, d, &fa, NULL, argv, environ) != 0 ||
            waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "agent_bench start: %s --version failed\n", d);
            exit(1);
        }
        ver[k] = (double)(wall_ns() - t0) / 1e6;
        struct jettprof_config c = config(JETTPROF_MODE_MEMORY, 0);
        jettprof_run *run;
        jettprof_thread *t;
        t0 = wall_ns();
        int r = jettprof_start(&c, &run);
        uint64_t t1 = wall_ns();
        if (r < 0 || jettprof_thread_register(run, 1, &t) < 0) {
            fprintf(stderr, "agent_bench start: %s (%s)\n", jettprof_strerror(r),
                    jettprof_last_reason());
            exit(1);
        }
        uint64_t t2 = wall_ns();
        jettprof_thread_unregister(t);
        struct jettprof_result res = {.size = sizeof res};
        uint64_t t3 = wall_ns();
        jettprof_finish(run, JETTPROF_TERM_RETURNED, &res);
        uint64_t t4 = wall_ns();
        jettprof_result_release(&res);
        st[k] = (double)(t1 - t0) / 1e6;
        reg[k] = (double)(t2 - t1) / 1e6;
        fin[k] = (double)(t4 - t3) / 1e6;
    }
    posix_spawn_file_actions_destroy(&fa);
    double *v[4] = {ver, st, reg, fin};
    const char *what[4] = {"jettprofd --version, spawned and waited for",
                           "jettprof_start, memory run, private daemon",
                           "first thread registration (its ring)",
                           "jettprof_finish of the empty run"};
    double med[4];
    for (int i = 0; i < 4; i++) {
        double lo = v[i][0], hi = v[i][0];
        for (int k = 1; k < N; k++) {
            lo = v[i][k] < lo ? v[i][k] : lo;
            hi = v[i][k] > hi ? v[i][k] : hi;
        }
        med[i] = bench_median(v[i], N);
        printf("start: %s: %.3f ms (%.3f - %.3f)\n", what[i], med[i], lo, hi);
    }
    printf("start: the agent's part (start + registration + finish - the daemon's own start): "
           "%.3f ms\n", med[1] + med[2] + med[3] - med[0]);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : "";
    if (argc > 2 && strcmp(argv[2], "quick") == 0)
        work_div = 20;
    printf("agent_bench: medians of %d runs unless stated\n", RUNS);
    if (!*only || !strcmp(only, "poll"))
        poll_bench();
    if (!*only || !strcmp(only, "enter"))
        enter_bench();
    if (!*only || !strcmp(only, "alloc"))
        alloc_bench();
    if (!*only || !strcmp(only, "cpu"))
        cpu_bench();
    if (!strcmp(only, "start"))
        start_bench();
    if (!strcmp(only, "threads"))
        threads_bench();
    return 0;
}
