/* native_bench: a native allocation workload, to weigh the agent against another heap profiler
 * on the same program. Several million malloc-family calls from a handful of allocation sites,
 * reached through a realistic call chain (6 to 11 frames); most blocks are freed soon after (a
 * window of recent ones), about one in ten is retained to the end, and one block in four of the
 * window is resized once. The workload is deterministic (a fixed PRNG seed), so every mode
 * performs exactly the same calls.
 *
 *   native_bench plain [N]   the workload alone (what heaptrack runs: bench/run wraps it)
 *   native_bench agent [N [CAPTURE]]
 *                            the same, driven as an interpreter drives the agent: enter/leave
 *                            through call-site caches at every call, the inline hooks after
 *                            each malloc and realloc and before each free, in memory mode with
 *                            a private jettprofd ($JETTPROFD); with CAPTURE, the run's capture
 *                            is written to that file
 *
 * Prints one line of figures, `native: mode=... key=value ...`: the workload's own counts and
 * peak (the truth both profilers are checked against), wall and CPU time (CPU: this process
 * and its reaped children, so the private daemon is included); in agent mode also the
 * profile's totals (`profile_*`). Asserts nothing about speed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "jettprof.h"

#define WINDOW 64u        /* recent blocks: each allocation replaces (frees) the oldest */
#define RETAIN_EVERY 10u  /* one allocation in ten is retained to the end */
#define RESIZE_EVERY 4u   /* one window block in four is resized once */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

struct block {
    void *p;
    uint64_t size, id;
};

struct work {
    struct jettprof_fast *f; /* NULL: plain */
    uint32_t frames[16];
    struct block window[WINDOW];
    uint32_t next;
    struct block *kept; /* mapped, not malloc'd: the workload's bookkeeping is not its heap */
    uint64_t nkept;
    uint64_t allocs, frees, resizes, live, peak, retained;
};

enum { F_MAIN, F_STEP, F_PARSE, F_EXPR, F_TERM, F_FACTOR, F_SMALL, F_STRING, F_BUFFER, F_VECTOR,
       F_N };
static const char *const frame_names[F_N] = {"main", "step", "parse", "expr", "term", "factor",
                                             "make_small", "make_string", "make_buffer",
                                             "make_vector"};

/* Every call into a workload function enters through its own call site, as an interpreter's
 * call instruction does; sites are per calling place, so static here. */
#define ENTER(w, fr)                                                                             \
    do {                                                                                         \
        static struct jettprof_site site_;                                                       \
        if ((w)->f)                                                                              \
            jettprof_enter_fast((w)->f, &site_, (w)->frames[fr]);                                \
    } while (0)
#define LEAVE(w)                                                                                 \
    do {                                                                                         \
        if ((w)->f)                                                                              \
            jettprof_leave_fast((w)->f);                                                         \
    } while (0)

static void note_live(struct work *w, uint64_t add, uint64_t sub)
{
    w->live += add;
    w->live -= sub;
    if (w->live > w->peak)
        w->peak = w->live;
}

static void release(struct work *w, struct block *b)
{
    if (!b->p)
        return;
    if (w->f)
        jettprof_free_fast(w->f, b->id, b->size);
    free(b->p);
    note_live(w, 0, b->size);
    w->frees++;
    b->p = NULL;
}

/* One allocation site: allocates, then either keeps the block to the end or puts it in the
 * window (freeing the block it replaces). */
static void site(struct work *w, uint64_t size)
{
    void *p = malloc(size);
    if (!p) {
        fprintf(stderr, "native_bench: out of memory\n");
        exit(1);
    }
    memset(p, 0, size < 64 ? size : 64);
    struct block b = {p, size, 0};
    if (w->f)
        jettprof_alloc_fast(w->f, size, &b.id);
    w->allocs++;
    note_live(w, size, 0);
    if (w->allocs % RETAIN_EVERY == 0) {
        w->kept[w->nkept++] = b; /* room for every one: see main */
        w->retained += size;
        return;
    }
    struct block *slot = &w->window[w->next++ % WINDOW];
    release(w, slot);
    *slot = b;
    if (w->allocs % RESIZE_EVERY == 1) {
        uint64_t ns = size * 2 + 16;
        void *q = realloc(slot->p, ns);
        if (!q) {
            fprintf(stderr, "native_bench: out of memory\n");
            exit(1);
        }
        if (w->f)
            jettprof_resize_fast(w->f, slot->id, slot->size, ns);
        note_live(w, ns, slot->size);
        slot->p = q;
        slot->size = ns;
        w->resizes++;
    }
}

static void leaf(struct work *w, uint64_t r)
{
    switch (r % 4) {
    case 0:
        ENTER(w, F_SMALL);
        site(w, 16 + (r >> 8) % 48);
        break;
    case 1:
        ENTER(w, F_STRING);
        site(w, 24 + (r >> 8) % 200);
        break;
    case 2:
        ENTER(w, F_BUFFER);
        site(w, (r >> 8) % 64 == 0 ? 4096 : 256 + (r >> 16) % 256);
        break;
    default:
        ENTER(w, F_VECTOR);
        site(w, 8 * (1 + (r >> 8) % 32));
        break;
    }
    LEAVE(w);
}

/* A recursive descent of depth 1..5 through three functions, as a parser would. */
static void factor(struct work *w, uint64_t r, unsigned depth);
static void expr(struct work *w, uint64_t r, unsigned depth)
{
    ENTER(w, F_EXPR);
    factor(w, r, depth);
    LEAVE(w);
}
static void term(struct work *w, uint64_t r, unsigned depth)
{
    ENTER(w, F_TERM);
    if (depth > 1)
        expr(w, r, depth - 1);
    else
        leaf(w, r);
    LEAVE(w);
}
static void factor(struct work *w, uint64_t r, unsigned depth)
{
    ENTER(w, F_FACTOR);
    term(w, r, depth);
    LEAVE(w);
}

static void step(struct work *w)
{
    uint64_t r = next_rand();
    ENTER(w, F_STEP);
    ENTER(w, F_PARSE);
    expr(w, r >> 3, 1 + (unsigned)(r % 5));
    LEAVE(w);
    LEAVE(w);
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
    struct rusage s, c;
    getrusage(RUSAGE_SELF, &s);
    getrusage(RUSAGE_CHILDREN, &c);
    uint64_t us = (uint64_t)(s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec +
                             c.ru_stime.tv_sec) * 1000000u +
                  (uint64_t)(s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec +
                             c.ru_stime.tv_usec);
    return us * 1000u;
}

/* The value of `key: N` in the profile's TOON, or -1. */
static long long toon_field(const char *toon, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "%s: ", key);
    const char *p = toon ? strstr(toon, pat) : NULL;
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static int start_agent(struct work *w, int capture_fd, jettprof_run **run, jettprof_thread **t)
{
    struct jettprof_config c = {
        .size = sizeof c, .mode = JETTPROF_MODE_MEMORY, .threshold_bp = 500, .limit = 10,
        .outputs = JETTPROF_OUT_TOON, .capture_fd = capture_fd,
        .capabilities = JETTPROF_CAP_HEAP_ALLOCATION_HOOKS | JETTPROF_CAP_FREE_AND_RESIZE_EVENTS |
                        JETTPROF_CAP_SOURCE_SPANS | JETTPROF_CAP_THREAD_REGISTRATION,
    };
    int r = jettprof_start(&c, run);
    if (r < 0) {
        fprintf(stderr, "native_bench: %s: %s\n", jettprof_strerror(r), jettprof_last_reason());
        return r;
    }
    uint32_t src;
    if ((r = jettprof_source(*run, JETTPROF_ORIGIN_PROJECT, "bench/native.c", &src)) < 0)
        return r;
    for (uint32_t i = 0; i < F_N; i++) {
        struct jettprof_frame_desc d = {.size = sizeof d, .ns = "native",
                                        .function = frame_names[i], .source_id = src,
                                        .decl_start = 100 * i, .decl_end = 100 * i + 50,
                                        .decl_line = 10 * i + 1, .decl_col = 1};
        if ((r = jettprof_frame(*run, &d, &w->frames[i])) < 0)
            return r;
    }
    if ((r = jettprof_thread_register(*run, 1, t)) < 0)
        return r;
    w->f = jettprof_thread_fast(*t, JETTPROF_FAST_VERSION);
    if (!w->f) {
        fprintf(stderr, "native_bench: the agent's fast-path layout is not this header's\n");
        return -ENOTSUP;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 3000000u;
    int agent = strcmp(mode, "agent") == 0;
    if ((!agent && strcmp(mode, "plain") != 0) || n == 0) {
        fprintf(stderr, "usage: native_bench plain|agent [allocations [capture]]\n");
        return 2;
    }
    int capture_fd = -1;
    if (agent && argc > 3) {
        capture_fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (capture_fd < 0) {
            fprintf(stderr, "native_bench: cannot create %s: %s\n", argv[3], strerror(errno));
            return 1;
        }
    }
    static struct work w;
    /* The retained blocks' list lives outside the malloc heap, so a heap profiler sees exactly
     * the workload's allocations (and the C library's few of its own). */
    size_t kept_bytes = (size_t)(n / RETAIN_EVERY + 1) * sizeof *w.kept;
    w.kept = mmap(NULL, kept_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w.kept == MAP_FAILED) {
        fprintf(stderr, "native_bench: cannot map %zu bytes\n", kept_bytes);
        return 1;
    }
    jettprof_run *run = NULL;
    jettprof_thread *t = NULL;
    uint64_t w0 = wall_ns(), c0 = cpu_ns();
    if (agent && start_agent(&w, capture_fd, &run, &t) < 0)
        return 1;
    ENTER(&w, F_MAIN);
    while (w.allocs < n)
        step(&w);
    for (uint32_t i = 0; i < WINDOW; i++)
        release(&w, &w.window[i]);
    LEAVE(&w);
    struct jettprof_result res = {.size = sizeof res};
    if (agent) {
        jettprof_thread_unregister(t);
        if (jettprof_finish(run, JETTPROF_TERM_RETURNED, &res) < 0 ||
            res.status == JETTPROF_STATUS_UNAVAILABLE) {
            fprintf(stderr, "native_bench: no profile (%s)\n", res.reason);
            return 1;
        }
    }
    uint64_t wall = wall_ns() - w0, cpu = cpu_ns() - c0;
    printf("native: mode=%s allocations=%llu frees=%llu resizes=%llu events=%llu "
           "peak_bytes=%llu retained_bytes=%llu wall_ns=%llu cpu_ns=%llu",
           mode, (unsigned long long)w.allocs, (unsigned long long)w.frees,
           (unsigned long long)w.resizes, (unsigned long long)(w.allocs + w.frees + w.resizes),
           (unsigned long long)w.peak, (unsigned long long)w.retained,
           (unsigned long long)wall, (unsigned long long)cpu);
    if (agent)
        printf(" profile_allocation_count=%lld profile_resize_count=%lld "
               "profile_peak_live_bytes=%lld profile_retained_bytes=%lld "
               "profile_lost_records=%lld profile_producer_wait_ns=%lld",
               toon_field(res.toon, "allocation_count"), toon_field(res.toon, "resize_count"),
               toon_field(res.toon, "peak_live_bytes"), toon_field(res.toon, "retained_bytes"),
               toon_field(res.toon, "lost_records"), toon_field(res.toon, "producer_wait_ns"));
    printf("\n");
    jettprof_result_release(&res);
    for (uint64_t i = 0; i < w.nkept; i++) /* retained to the end of the workload, not leaked */
        free(w.kept[i].p);
    munmap(w.kept, kept_bytes);
    return 0;
}
