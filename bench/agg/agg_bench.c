/* Aggregation throughput of the engine, one core, no I/O: CPU samples over a calling-context
 * tree, allocation events with a realistic live set (~10% retained), and metadata bytes per
 * live allocation. Prints medians of several runs with units, and the ratio to a baseline
 * measured in the same run (the same records through jp_rec_validate only: the least any
 * consumer must do). Never asserts timing.
 *
 * Usage: agg_bench [scale [cpu|mem|snapshot [64|65536 [runs]]]]   (scale 1 = the default sizes;
 * smaller for a quick look; the second argument runs one half only, e.g. under perf, or the
 * snapshot costs alone; the third one lifetime mix only; the fourth fewer runs than 5, e.g. one
 * under callgrind)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/lib/stats.h"
#include "engine/engine.h"
#include "render/report.h"
#include "tests/lib/clock.h"
#include "tests/lib/recbuild.h"

#define RUNS_MAX 5
static int runs = RUNS_MAX; /* argv[4] lowers it, e.g. for one run under callgrind */

static uint64_t rng = 0x2545F4914F6CDD1Du;
static inline uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A definition or the run's start: fed as the drain feeds anything that is not an event. */
static int feed_def(struct jp_engine *e, const void *rec, uint32_t len)
{
    const char *why;
    return jp_engine_feed(e, rec, len, &why);
}

static void must(int r, const char *what)
{
    if (r != 0) {
        fprintf(stderr, "agg_bench: %s failed: %d\n", what, r);
        exit(1);
    }
}

static void start(struct jp_engine *e, uint32_t mode, uint64_t retention_budget)
{
    struct jp_rec_run_start r = tl_rec_run_start(mode);
    r.threshold_bp = 500;
    r.cpu_budget_bytes = 32u << 20;
    r.retention_budget_bytes = retention_budget;
    must(feed_def(e, &r, sizeof r), "run_start");
}

/* A program of `nfuncs` functions and a calling-context tree of `nnodes` nodes, each node's
 * parent chosen among the earlier ones (depth capped at 24). Returns the node count. */
static uint32_t define_program(struct jp_engine *e, uint32_t nfuncs, uint32_t nnodes)
{
    uint8_t buf[512];
    struct jp_rec_source_def s = {.h = {JP_REC_SOURCE_DEF, 0}, .source_id = 1,
                                  .origin = JP_ORIGIN_PROJECT, .path_len = 12};
    s.h.size = (uint16_t)(sizeof s + 12);
    memcpy(buf, &s, sizeof s);
    memcpy(buf + sizeof s, "src/big.jett", 12);
    must(feed_def(e, buf, s.h.size), "source");
    for (uint32_t i = 1; i <= nfuncs; i++) {
        char fn[16];
        int n = snprintf(fn, sizeof fn, "f%u", i);
        struct jp_rec_frame_def f = {.h = {JP_REC_FRAME_DEF, 0}, .frame_id = i, .source_id = 1,
                                     .decl_start = i * 100, .decl_end = i * 100 + 50,
                                     .decl_line = i * 3, .decl_col = 1,
                                     .kind = JP_FRAME_FUNCTION, .ns_len = 3,
                                     .fn_len = (uint16_t)n};
        f.h.size = (uint16_t)(sizeof f + 3 + (uint32_t)n);
        memcpy(buf, &f, sizeof f);
        memcpy(buf + sizeof f, "big", 3);
        memcpy(buf + sizeof f + 3, fn, (size_t)n);
        must(feed_def(e, buf, f.h.size), "frame");
    }
    static uint8_t depth[1u << 20];
    for (uint32_t i = 1; i <= nnodes; i++) {
        uint32_t parent = 0;
        if (i > 1) {
            parent = 1 + (uint32_t)(next() % (i - 1));
            while (depth[parent] >= 24)
                parent = 1 + (uint32_t)(next() % (i - 1));
        }
        depth[i] = (uint8_t)(parent ? depth[parent] + 1 : 1);
        struct jp_rec_node_def nd = {{JP_REC_NODE_DEF, sizeof nd}, i, parent,
                                     1 + (uint32_t)(next() % nfuncs)};
        must(feed_def(e, &nd, sizeof nd), "node");
    }
    return nnodes;
}

struct feed_result {
    double seconds, cpu_seconds;
    uint64_t events, live, table_bytes, metadata_bytes, peak_bytes, exact;
};

/* How a chunk is fed: as the daemon's drain feeds a run of ring slots (jp_engine_feed_slots,
 * one call a chunk), record by record (jp_engine_feed), or to validation only (the baseline). */
enum { FEED_SLOTS, FEED_EACH, FEED_VALIDATE };
#define CHUNK_SLOTS 2048u /* 64 KiB: one drain's worth of ring */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void flush_chunk(struct jp_engine *e, int how, const uint8_t *chunk, uint32_t nrec,
                        struct feed_result *res)
{
    double t0 = tl_now_s(), c0 = cpu_s();
    const char *why;
    if (how == FEED_SLOTS) {
        uint64_t fed;
        must(jp_engine_feed_slots(e, chunk, nrec, &fed), "feed_slots");
        if (fed != nrec)
            must(1, "feed_slots (a slot declined)");
        nrec = 0;
    }
    for (uint32_t i = 0; i < nrec; i++) {
        const uint8_t *r = chunk + (size_t)i * JP_SLOT_SIZE;
        int rc = how == FEED_EACH ? jp_engine_feed(e, r, JP_SLOT_SIZE, &why)
                                  : jp_rec_validate(r, JP_SLOT_SIZE, &why);
        must(rc, "feed");
    }
    res->seconds += tl_now_s() - t0;
    res->cpu_seconds += cpu_s() - c0;
}

static double last_render_s;

/* CPU samples of random leaf nodes at one of 8 statements each. As for the allocation stream
 * below, the samples are generated into a chunk laid out like the ring and only feeding the
 * chunk is timed (the generator's random picks are not the engine's cost). */
static struct feed_result run_cpu(int how, uint64_t samples, uint32_t nnodes)
{
    struct jp_engine *e;
    must(jp_engine_new(&e), "new");
    rng = 0x2545F4914F6CDD1Du;
    start(e, JP_MODE_CPU, 64u << 20);
    define_program(e, 500, nnodes);
    static uint8_t chunk[CHUNK_SLOTS * JP_SLOT_SIZE] __attribute__((aligned(64)));
    struct feed_result res = {0};
    struct jp_rec_cpu_sample r = {.h = {JP_REC_CPU_SAMPLE, sizeof r}, .state = JP_STATE_JETT,
                                  .flags = JP_SAMPLE_HAS_STMT};
    _Static_assert(sizeof r == JP_SLOT_SIZE, "a sample fills its slot");
    uint32_t nrec = 0;
    for (uint64_t i = 0; i < samples; i++) {
        uint64_t x = next();
        r.node = 1 + (uint32_t)(x % nnodes);
        r.stmt_line = 1 + (uint32_t)((x >> 32) % 8u);
        r.stmt_col = 1;
        r.requested_tick = i;
        memcpy(chunk + (size_t)nrec++ * JP_SLOT_SIZE, &r, sizeof r);
        res.events++;
        if (nrec == CHUNK_SLOTS || i + 1u == samples) {
            flush_chunk(e, how, chunk, nrec, &res);
            nrec = 0;
        }
    }
    if (how != FEED_VALIDATE) {
        /* inclusive and chain counts are settled from the node counts at report time */
        struct jp_report_opts o = {sizeof o, -1, -1, JP_END_TRUNCATED, JP_OUT_TOON, 0, 0, 0};
        struct jp_rendered out;
        double r0 = tl_now_s();
        must(jp_profile_render(e, &o, &out), "render");
        last_render_s = tl_now_s() - r0;
        jp_rendered_free(&out);
    }
    jp_engine_free(e);
    return res;
}

/* Allocation stream: each allocation is retained for good with probability 1/10; the others
 * join a window of at most `window` freeable live allocations, and once the window is full a
 * random one of them is freed (or, one time in 20, resized first). Records are generated into
 * a chunk laid out like the ring (one 32-byte slot each) and only feeding the chunk is timed,
 * so the generator's own cost (random picks in a 64K window) is not charged to the engine. */
static struct feed_result run_mem(int how, uint64_t allocs, uint32_t window, uint64_t budget,
                                 uint32_t retain_per_10)
{
    struct jp_engine *e;
    must(jp_engine_new(&e), "new");
    rng = 0x9E3779B97F4A7C15u;
    start(e, JP_MODE_MEMORY, budget);
    define_program(e, 64, 256);
    uint64_t *ids = malloc(window * sizeof *ids), *sizes = malloc(window * sizeof *sizes);
    static uint8_t chunk[CHUNK_SLOTS * JP_SLOT_SIZE] __attribute__((aligned(64)));
    uint32_t n = 0, nrec = 0;
    struct feed_result res = {0};
    struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, sizeof a}};
    struct jp_rec_free f = {.h = {JP_REC_FREE, sizeof f}};
    struct jp_rec_resize rz = {.h = {JP_REC_RESIZE, sizeof rz}};
#define PUT(rec)                                                                                  \
    do {                                                                                          \
        memcpy(chunk + (size_t)nrec++ * JP_SLOT_SIZE, &(rec), sizeof(rec));                       \
        res.events++;                                                                             \
    } while (0)
    for (uint64_t id = 1; id <= allocs; id++) {
        if (nrec + 3u > CHUNK_SLOTS) {
            flush_chunk(e, how, chunk, nrec, &res);
            nrec = 0;
        }
        uint64_t x = next();
        a.node = 1 + (uint32_t)(x % 256u);
        a.allocation_id = id;
        a.size = 16u + ((x >> 16) & 255u);
        PUT(a);
        if (((x >> 40) % 10u) < retain_per_10)
            continue; /* retained to the end */
        if (n == window) {
            uint32_t i = (uint32_t)((x >> 24) % window);
            if (((x >> 50) % 20u) == 0) {
                rz.node = a.node;
                rz.allocation_id = ids[i];
                rz.old_size = sizes[i];
                rz.new_size = sizes[i] * 2u;
                PUT(rz);
                sizes[i] *= 2u;
            }
            f.allocation_id = ids[i];
            f.old_size = sizes[i];
            PUT(f);
            ids[i] = id;
            sizes[i] = a.size;
        } else {
            ids[n] = id;
            sizes[n++] = a.size;
        }
    }
#undef PUT
    flush_chunk(e, how, chunk, nrec, &res);
    res.table_bytes = jp_engine_live_table_bytes(e, &res.live);
    res.metadata_bytes = jp_engine_metadata_bytes(e);
    res.peak_bytes = jp_engine_metadata_peak_bytes(e);
    struct jp_engine_summary s;
    must(jp_engine_summary(e, &s), "summary");
    res.exact = s.live_exact;
    jp_engine_free(e);
    free(ids);
    free(sizes);
    return res;
}

/* What a snapshot costs the run it is taken of (`jettprofd show` of a run in flight): it is
 * built on the run's loop between two drains, so for that long nothing is drained and the
 * producer may wait for room once its ring is full. A run of `n` sites (memory: every node
 * allocates, a tenth kept; CPU: every node sampled), then the snapshot rendered as `show`
 * renders it (both texts), median of the runs; beside it, how many events (samples; allocations
 * with their frees) the drain feeds in that time in the same run: the ring room that keeps the
 * producer from waiting. */
static void snapshot_cost(uint32_t mode, uint32_t n)
{
    struct jp_engine *e;
    must(jp_engine_new(&e), "new");
    rng = 0x243F6A8885A308D3u;
    start(e, mode, 64u << 20);
    define_program(e, n, n);
    static uint8_t chunk[CHUNK_SLOTS * JP_SLOT_SIZE] __attribute__((aligned(64)));
    uint64_t events = (uint64_t)n * 20u < 400000u ? 400000u : (uint64_t)n * 20u;
    struct feed_result res = {0};
    uint32_t nrec = 0;
    for (uint64_t i = 0; i < events; i++) {
        uint64_t x = next();
        uint32_t node = 1 + (uint32_t)(i % n);
        if (mode == JP_MODE_CPU) {
            struct jp_rec_cpu_sample r = {.h = {JP_REC_CPU_SAMPLE, sizeof r},
                                          .state = JP_STATE_JETT, .flags = JP_SAMPLE_HAS_STMT,
                                          .node = node, .stmt_line = 1 + (uint32_t)(x % 8u),
                                          .stmt_col = 1, .requested_tick = i};
            memcpy(chunk + (size_t)nrec++ * JP_SLOT_SIZE, &r, sizeof r);
        } else {
            struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, sizeof a}, .node = node,
                                     .allocation_id = i + 1u, .size = 16u + (x & 255u)};
            memcpy(chunk + (size_t)nrec++ * JP_SLOT_SIZE, &a, sizeof a);
            if (x % 10u) { /* freed at once: nine in ten */
                struct jp_rec_free f = {.h = {JP_REC_FREE, sizeof f}, .node = node,
                                        .allocation_id = i + 1u, .old_size = a.size};
                memcpy(chunk + (size_t)nrec++ * JP_SLOT_SIZE, &f, sizeof f);
            }
        }
        res.events = i + 1u;
        if (nrec + 2u > CHUNK_SLOTS || i + 1u == events) {
            flush_chunk(e, FEED_SLOTS, chunk, nrec, &res);
            nrec = 0;
        }
    }
    double t[RUNS_MAX];
    for (int i = 0; i < runs; i++) {
        struct jp_report_opts o = {sizeof o, -1, -1, JP_END_RUNNING, JP_OUT_TOON | JP_OUT_HUMAN,
                                   0, res.events, 1};
        struct jp_rendered out;
        double r0 = tl_now_s();
        must(jp_profile_render(e, &o, &out), "snapshot");
        t[i] = tl_now_s() - r0;
        jp_rendered_free(&out);
    }
    double snap = bench_median(t, runs), per = res.seconds / (double)res.events;
    printf("  %s, %6u sites: snapshot %8.3f ms (%d runs: %.3f-%.3f); the drain feeds %.0f "
           "events in that time\n", mode == JP_MODE_CPU ? "cpu   " : "memory", (unsigned)n,
           snap * 1e3, runs, t[0] * 1e3, t[runs - 1] * 1e3, snap / per);
    jp_engine_free(e);
}

int main(int argc, char **argv)
{
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    if (scale <= 0)
        scale = 1.0;
    uint64_t samples = (uint64_t)(4e6 * scale);
    uint64_t allocs = (uint64_t)(4e6 * scale);
    double te[RUNS_MAX], tb[RUNS_MAX];
    if (argc > 4 && atoi(argv[4]) >= 1 && atoi(argv[4]) <= RUNS_MAX)
        runs = atoi(argv[4]);
    const char *only = argc > 2 ? argv[2] : "";
    uint32_t only_window = argc > 3 ? (uint32_t)atoi(argv[3]) : 0;
    double me, mb;
    if (strcmp(only, "mem") == 0)
        goto mem;
    if (strcmp(only, "snapshot") == 0) {
        printf("snapshots of a run in flight (median, min-max; built between two drains):\n");
        static const uint32_t sizes[] = {10, 1000, 100000};
        for (unsigned m = 0; m < 2; m++)
            for (unsigned k = 0; k < 3; k++)
                snapshot_cost(m ? JP_MODE_MEMORY : JP_MODE_CPU, sizes[k]);
        return 0;
    }

    /* Each run feeds the same samples through the drain's call, record by record and through
     * validation only, in turn; rates per second of this thread's CPU time, as below. */
    double tr[RUNS_MAX], ts[RUNS_MAX], tsw[RUNS_MAX];
    for (int i = 0; i < runs; i++) {
        struct feed_result x = run_cpu(FEED_SLOTS, samples, 20000);
        ts[i] = x.cpu_seconds / (double)x.events;
        tsw[i] = x.seconds / (double)x.events;
        tr[i] = last_render_s;
        x = run_cpu(FEED_EACH, samples, 20000);
        te[i] = x.cpu_seconds / (double)x.events;
        x = run_cpu(FEED_VALIDATE, samples, 20000);
        tb[i] = x.cpu_seconds / (double)x.events;
    }
    double ms = bench_median(ts, runs), msw = bench_median(tsw, runs);
    me = bench_median(te, runs);
    mb = bench_median(tb, runs);
    printf("cpu samples (median of %d runs, %llu samples, 20000-node tree, depth <= 24, 8 "
           "statements a node):\n", runs, (unsigned long long)samples);
    printf("  jp_engine_feed_slots (the drain's call): %.1f M samples/s CPU time (%.1f M/s "
           "wall)\n", 1.0 / ms / 1e6, 1.0 / msw / 1e6);
    printf("  jp_engine_feed, record by record: %.1f M samples/s CPU time\n", 1.0 / me / 1e6);
    printf("  validate-only baseline %.1f M rec/s CPU time; feed_slots/baseline time %.2fx\n",
           1.0 / mb / 1e6, ms / mb);
    printf("  report of that run (settle inclusive/chains + rank + TOON): %.2f ms median\n",
           bench_median(tr, runs) * 1e3);

    if (strcmp(only, "cpu") == 0)
        return 0;
mem:;
    /* Two lifetime mixes, both with ~10% of allocations retained to the end: most others die
     * young (freed at random from the newest 64), or live long (the newest 65536). Each run
     * feeds the same stream through the drain's call (jp_engine_feed_slots), record by record
     * (jp_engine_feed) and through validation only, in turn, so the three see the same machine
     * state. Rates are per second of this thread's CPU time (a shared machine's other load does
     * not count), wall time beside. */
    static const uint32_t windows[] = {64, 65536};
    for (int w = 0; w < 2; w++) {
        if (only_window && only_window != windows[w])
            continue;
        struct feed_result last = {0};
        double tc[RUNS_MAX], tw[RUNS_MAX], ec[RUNS_MAX], vc[RUNS_MAX];
        for (int i = 0; i < runs; i++) {
            last = run_mem(FEED_SLOTS, allocs, windows[w], 64u << 20, 1);
            tc[i] = last.cpu_seconds / (double)last.events;
            tw[i] = last.seconds / (double)last.events;
            struct feed_result b = run_mem(FEED_EACH, allocs, windows[w], 64u << 20, 1);
            ec[i] = b.cpu_seconds / (double)b.events;
            b = run_mem(FEED_VALIDATE, allocs, windows[w], 64u << 20, 1);
            vc[i] = b.cpu_seconds / (double)b.events;
        }
        double mc = bench_median(tc, runs), mw = bench_median(tw, runs), mv = bench_median(vc, runs);
        double mec = bench_median(ec, runs);
        printf("allocation events, frees among the newest %u (median of %d runs, %llu events, "
               "%llu live at end, ~10%% retained):\n",
               windows[w], runs, (unsigned long long)last.events,
               (unsigned long long)last.live);
        printf("  jp_engine_feed_slots (the drain's call): %.1f M events/s CPU time (%.1f M/s "
               "wall), exact live tracking\n", 1.0 / mc / 1e6, 1.0 / mw / 1e6);
        printf("  jp_engine_feed, record by record: %.1f M events/s CPU time\n",
               1.0 / mec / 1e6);
        printf("  validate-only baseline %.1f M rec/s CPU time; feed_slots/baseline time "
               "%.2fx\n", 1.0 / mv / 1e6, mc / mv);
        printf("  live metadata: %.2f bytes per live allocation (%llu bytes of live tracking "
               "for %llu live); all engine metadata %llu bytes\n",
               (double)last.table_bytes / (double)last.live,
               (unsigned long long)last.table_bytes, (unsigned long long)last.live,
               (unsigned long long)last.metadata_bytes);
    }
    if (only_window)
        return 0;

    /* Capacity: how many never-freed allocations the 64 MiB retention budget holds exactly. */
    uint64_t big = (uint64_t)(4.5e6 * (scale < 1 ? scale : 1));
    struct feed_result cap = run_mem(FEED_SLOTS, big, 1, 64u << 20, 10);
    if (cap.exact)
        printf("retention capacity: all %llu never-freed allocations tracked exactly within "
               "64 MiB, %.2f bytes per live allocation, %llu bytes accounted, at most %llu "
               "held at once (growth transients included)\n",
               (unsigned long long)cap.live,
               (double)cap.table_bytes / (double)(cap.live ? cap.live : 1),
               (unsigned long long)cap.metadata_bytes, (unsigned long long)cap.peak_bytes);
    else
        printf("retention capacity: exact tracking held %llu never-freed live allocations "
               "within 64 MiB before the budget refused to grow (%.2f bytes per live "
               "allocation, %llu bytes accounted, at most %llu held at once); the rest of the "
               "%llu went partial\n",
               (unsigned long long)cap.live,
               (double)cap.table_bytes / (double)(cap.live ? cap.live : 1),
               (unsigned long long)cap.metadata_bytes, (unsigned long long)cap.peak_bytes,
               (unsigned long long)big);
    return 0;
}
