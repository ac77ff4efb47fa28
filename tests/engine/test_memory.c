/* Injected allocation streams: counts, positive and negative resize deltas, frees, zero sizes,
 * the peak snapshot, retained sites, id reuse and unknown ids, large sizes and ids, the
 * retention budget, and a randomized stream checked against a naive model. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

enum { SRC = 1, N_MAIN = 1, N_A = 2, N_B = 3 };

static void define_sites(struct jp_engine *e)
{
    t_source(e, SRC, JP_ORIGIN_PROJECT, "src/mem.jett");
    t_frame(e, 1, SRC, "<root>", "main", 0, 10, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, SRC, "m", "a", 10, 20, 20, JP_FRAME_FUNCTION);
    t_frame(e, 3, SRC, "m", "b", 20, 30, 30, JP_FRAME_FUNCTION);
    t_node(e, N_MAIN, 0, 1);
    t_node(e, N_A, N_MAIN, 2);
    t_node(e, N_B, N_MAIN, 3);
}

static int feed_bad(struct jp_engine *e, const void *rec, uint32_t len)
{
    return t_feed_raw(e, rec, len, NULL);
}

Test(memory, counters_sites_peak_and_violations)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 500, 10, 32 * MiB, 64 * MiB);
    define_sites(e);
    t_alloc(e, N_A, 1, 100);      /* live 100, peak 100 */
    t_alloc(e, N_B, 2, 50);       /* live 150, peak 150 */
    t_alloc(e, N_A, 3, 0);        /* zero size: counted, no bytes */
    t_resize(e, N_B, 1, 100, 300); /* +200 charged to b (resizing frame); live 350 = peak */
    t_free(e, N_MAIN, 2, 50);     /* b's allocation freed: freed 50 to b; live 300 */
    t_resize(e, N_A, 1, 300, 120); /* -180: freed to a (creation site); live 120 */
    t_resize(e, N_A, 3, 0, 40);    /* from zero: +40 to a; live 160 */
    t_alloc(e, N_B, 4, 10);       /* live 170 */
    t_alloc(e, 0, 5, 7);          /* stack unavailable: totals only; live 177 */
    t_free(e, 0, 5, 7);           /* live 170 */
    /* six violations, each excluded from every figure (READINGS.md #11) */
    struct jp_rec_alloc reuse_live = {{JP_REC_ALLOC, 32}, N_A, 1, 5, 0};
    struct jp_rec_alloc reuse_retired = {{JP_REC_ALLOC, 32}, N_A, 2, 5, 0};
    struct jp_rec_free unknown = {{JP_REC_FREE, 32}, 0, 99, 1, 0};
    struct jp_rec_free mismatch = {{JP_REC_FREE, 32}, 0, 4, 11, 0};
    struct jp_rec_resize retired = {{JP_REC_RESIZE, 32}, N_A, 2, 50, 60};
    struct jp_rec_free double_free = {{JP_REC_FREE, 32}, 0, 2, 50, 0};
    cr_assert_eq(feed_bad(e, &reuse_live, 32), 0);
    cr_assert_eq(feed_bad(e, &reuse_retired, 32), 0);
    cr_assert_eq(feed_bad(e, &unknown, 32), 0);
    cr_assert_eq(feed_bad(e, &mismatch, 32), 0);
    cr_assert_eq(feed_bad(e, &retired, 32), 0);
    cr_assert_eq(feed_bad(e, &double_free, 32), 0);
    t_sample(e, JP_STATE_JETT, N_A, 0, 0); /* a CPU record in memory mode: a violation too */
    t_stop(e, JP_TERM_RETURNED, 5000, JP_NS_UNAVAILABLE, 0);

    char *json, *human;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, &human, &json, &status);
    cr_assert_eq(status, JP_STATUS_COMPLETE);
    J_EQ(json, "profile.mode", "memory");
    J_EQ(json, "profile.coverage", "jett_heap");
    J_EQ(json, "profile.config.retention_metadata_budget_bytes", "67108864");
    J_EQ(json, "profile.totals.allocation_count", "5");
    J_EQ(json, "profile.totals.resize_count", "3");
    J_EQ(json, "profile.totals.allocated_bytes", "407"); /* 100+50+0+200+40+10+7 */
    J_EQ(json, "profile.totals.freed_bytes", "237");     /* 50+180+7 */
    J_EQ(json, "profile.totals.peak_live_bytes", "350");
    J_EQ(json, "profile.totals.retained_bytes", "170");  /* 407 - 237 */
    J_EQ(json, "profile.totals.attributed_allocated_bytes", "400"); /* minus the 7 unattributed */
    J_EQ(json, "profile.totals.protocol_violations", "7");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 2);
    /* b: 50 + 200 growth + 10 = 260 (65%); a: 100 + 0 + 40 = 140 (35%) */
    J_EQ(json, "profile.bottlenecks.0.function", "b");
    J_EQ(json, "profile.bottlenecks.0.allocation_count", "2");
    J_EQ(json, "profile.bottlenecks.0.allocated_bytes", "260");
    J_EQ(json, "profile.bottlenecks.0.allocation_percent", "65");
    J_EQ(json, "profile.bottlenecks.0.freed_bytes", "50");
    J_EQ(json, "profile.bottlenecks.0.retained_bytes", "10");
    J_EQ(json, "profile.bottlenecks.0.live_at_peak_bytes", "50");
    J_EQ(json, "profile.bottlenecks.0.resize_count", "1");
    J_EQ(json, "profile.bottlenecks.1.function", "a");
    J_EQ(json, "profile.bottlenecks.1.allocated_bytes", "140");
    J_EQ(json, "profile.bottlenecks.1.allocation_percent", "35");
    J_EQ(json, "profile.bottlenecks.1.freed_bytes", "180");
    J_EQ(json, "profile.bottlenecks.1.retained_bytes", "160");
    J_EQ(json, "profile.bottlenecks.1.live_at_peak_bytes", "300"); /* id 1 was 300 at the peak */
    J_EQ(json, "profile.bottlenecks.1.resize_count", "2");
    /* suggestions: both under pressure; only a retains >= 5% (160/400; b 10/400 = 2.5%) */
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.suggestions"), 1);
    J_EQ(json, "profile.bottlenecks.0.suggestions.0.rule", "MEM_ALLOCATION_PRESSURE");
    J_EQ(json, "profile.bottlenecks.0.suggestions.0.text",
         "Reduce, reuse, or batch allocations in m.b at src/mem.jett:30; it allocated 260 bytes "
         "in 2 allocations.");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.1.suggestions"), 2);
    J_EQ(json, "profile.bottlenecks.1.suggestions.0.rule", "MEM_ALLOCATION_PRESSURE");
    J_EQ(json, "profile.bottlenecks.1.suggestions.1.rule", "MEM_RETAINED");
    J_EQ(json, "profile.bottlenecks.1.suggestions.1.text",
         "Review the lifetime of allocations from m.a at src/mem.jett:20; 160 bytes were still "
         "live at the end of the run.");
    cr_assert(strstr(human, "Memory profile\n") == human);

    struct jp_engine_summary sum;
    cr_assert_eq(jp_engine_summary(e, &sum), 0);
    cr_assert_eq(sum.allocated_bytes, 407);
    cr_assert_eq(sum.peak_live_bytes, 350);
    cr_assert_eq(sum.violations, 7);
    cr_assert_eq(sum.live_exact, 1);
    free(json);
    free(human);
    jp_engine_free(e);
}

Test(memory, reaching_the_same_peak_again_does_not_snapshot)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    define_sites(e);
    t_alloc(e, N_A, 10, 100); /* peak 100, held by a */
    t_free(e, 0, 10, 100);
    t_alloc(e, N_B, 11, 100); /* live 100 again: not strictly above (READINGS.md #10) */
    t_stop(e, JP_TERM_RETURNED, 5000, 0, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.peak_live_bytes", "100");
    /* equal impact and count: a before b by name */
    J_EQ(json, "profile.bottlenecks.0.function", "a");
    J_EQ(json, "profile.bottlenecks.0.live_at_peak_bytes", "100");
    J_EQ(json, "profile.bottlenecks.1.function", "b");
    J_EQ(json, "profile.bottlenecks.1.live_at_peak_bytes", "0");
    J_EQ(json, "profile.bottlenecks.1.retained_bytes", "100");
    free(json);
    jp_engine_free(e);
}

Test(memory, huge_sizes_and_ids_take_the_exact_overflow_paths)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    define_sites(e);
    uint64_t big = UINT64_C(1) << 41; /* past the 40-bit packed size */
    t_alloc(e, N_A, 0, 1);
    t_alloc(e, N_A, UINT64_MAX, 2);
    t_alloc(e, N_A, UINT64_C(1) << 40, big);
    t_alloc(e, N_B, UINT32_MAX, 3);
    t_resize(e, N_B, UINT64_C(1) << 40, big, big + 5);
    t_resize(e, N_B, UINT64_C(1) << 40, big + 5, 6);
    t_free(e, 0, UINT64_MAX, 2);
    t_free(e, 0, 0, 1);
    t_free(e, 0, UINT32_MAX, 3);
    t_free(e, 0, UINT64_C(1) << 40, 6);
    struct jp_rec_free again = {{JP_REC_FREE, 32}, 0, UINT64_MAX, 2, 0};
    cr_assert_eq(t_feed_raw(e, &again, 32, NULL), 0);
    t_stop(e, JP_TERM_RETURNED, 5000, 0, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    char want[64];
    snprintf(want, sizeof want, "%llu", (unsigned long long)(1 + 2 + big + 3 + 5));
    /* the reference decoder reads numbers as doubles: these stay below 2^53 */
    J_EQ(json, "profile.totals.allocated_bytes", want);
    J_EQ(json, "profile.totals.freed_bytes", want);
    J_EQ(json, "profile.totals.retained_bytes", "0");
    snprintf(want, sizeof want, "%llu", (unsigned long long)(1 + 2 + big + 3 + 5));
    J_EQ(json, "profile.totals.peak_live_bytes", want);
    J_EQ(json, "profile.totals.protocol_violations", "1");
    free(json);
    jp_engine_free(e);
}

/* UINT64_MAX reached by counting up from UINT64_MAX - 1 is still the last id there is: once
 * freed, allocating it again is a reused id, as when it came alone. */
Test(memory, the_last_id_reached_in_sequence_is_not_reusable_either)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    define_sites(e);
    t_alloc(e, N_A, UINT64_MAX - 1u, 4);
    t_alloc(e, N_A, UINT64_MAX, 2);
    t_free(e, 0, UINT64_MAX, 2);
    struct jp_rec_alloc again = {{JP_REC_ALLOC, 32}, N_A, UINT64_MAX, 8, 0};
    cr_assert_eq(t_feed_raw(e, &again, 32, NULL), 0);
    t_stop(e, JP_TERM_RETURNED, 5000, 0, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.protocol_violations", "1");
    J_EQ(json, "profile.totals.allocation_count", "2");
    J_EQ(json, "profile.totals.retained_bytes", "4");
    free(json);
    jp_engine_free(e);
}

Test(memory, retention_budget_makes_live_fields_unavailable)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 8192);
    define_sites(e);
    for (uint64_t id = 1; id <= 2000; id++)
        t_alloc(e, N_A, id, 8);
    for (uint64_t id = 1; id <= 10; id++)
        t_free(e, 0, id, 8);
    t_resize(e, N_B, 1500, 8, 20);
    t_stop(e, JP_TERM_RETURNED, 5000, 0, 0);
    cr_assert_leq(jp_engine_metadata_bytes(e), 8192);
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    cr_assert_eq(status, JP_STATUS_PARTIAL);
    J_EQ(json, "profile.partial_reason", "retention_metadata_limit");
    J_EQ(json, "profile.totals.allocation_count", "2000"); /* counts go on */
    J_EQ(json, "profile.totals.resize_count", "1");
    J_EQ(json, "profile.totals.allocated_bytes", "16012");  /* 2000 * 8 + 12 */
    J_EQ(json, "profile.totals.freed_bytes", "unavailable");
    J_EQ(json, "profile.totals.peak_live_bytes", "unavailable");
    J_EQ(json, "profile.totals.retained_bytes", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.function", "a");
    J_EQ(json, "profile.bottlenecks.0.freed_bytes", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.retained_bytes", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.live_at_peak_bytes", "unavailable");
    /* pressure rests on exact counts and stays; retention needs live data and is omitted */
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.suggestions"), 1);
    J_EQ(json, "profile.bottlenecks.0.suggestions.0.rule", "MEM_ALLOCATION_PRESSURE");
    struct jp_engine_summary sum;
    cr_assert_eq(jp_engine_summary(e, &sum), 0);
    cr_assert_eq(sum.live_exact, 0);
    free(json);
    jp_engine_free(e);
}

/* A deterministic random stream over narrow, wide and scattered ids, checked against a naive
 * model, to exercise probing, backward-shift deletion and table growth. */
Test(memory, random_stream_matches_naive_model)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    define_sites(e);
    enum { MAXLIVE = 3000, OPS = 40000 };
    static uint64_t ids[MAXLIVE], sizes[MAXLIVE];
    uint32_t nlive = 0;
    uint64_t x = 88172645463325252u, next_id = 1;
    uint64_t allocated = 0, freed = 0, live = 0, peak = 0, nalloc = 0, nresize = 0;
    for (int op = 0; op < OPS; op++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned kind = (unsigned)(x % 3u);
        if (nlive < 10 || (kind == 0 && nlive < MAXLIVE)) {
            /* ids: mostly increasing, some in the wide range, spaced to make gaps */
            uint64_t id = (x & 8) ? (UINT64_C(1) << 33) + next_id * 7u : next_id * 3u;
            next_id++;
            uint64_t size = (x >> 20) % 200u;
            t_alloc(e, (x & 16) ? N_A : N_B, id, size);
            ids[nlive] = id;
            sizes[nlive++] = size;
            allocated += size;
            live += size;
            nalloc++;
        } else if (kind == 1) {
            uint32_t i = (uint32_t)((x >> 8) % nlive);
            uint64_t ns = (x >> 30) % 300u;
            t_resize(e, N_A, ids[i], sizes[i], ns);
            if (ns > sizes[i]) {
                allocated += ns - sizes[i];
                live += ns - sizes[i];
            } else {
                freed += sizes[i] - ns;
                live -= sizes[i] - ns;
            }
            sizes[i] = ns;
            nresize++;
        } else {
            uint32_t i = (uint32_t)((x >> 8) % nlive);
            t_free(e, 0, ids[i], sizes[i]);
            freed += sizes[i];
            live -= sizes[i];
            ids[i] = ids[nlive - 1];
            sizes[i] = sizes[--nlive];
        }
        if (live > peak)
            peak = live;
    }
    struct jp_engine_summary s;
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.violations, 0);
    cr_assert_eq(s.allocation_count, nalloc);
    cr_assert_eq(s.resize_count, nresize);
    cr_assert_eq(s.allocated_bytes, allocated);
    cr_assert_eq(s.freed_bytes, freed);
    cr_assert_eq(s.retained_bytes, live);
    cr_assert_eq(s.peak_live_bytes, peak);
    uint64_t tracked;
    jp_engine_live_table_bytes(e, &tracked);
    cr_assert_eq(tracked, nlive);
    /* every remaining live id can still be freed exactly once */
    for (uint32_t i = 0; i < nlive; i++)
        t_free(e, 0, ids[i], sizes[i]);
    t_stop(e, JP_TERM_RETURNED, 5000, 0, 0);
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.violations, 0);
    cr_assert_eq(s.retained_bytes, 0);
    cr_assert_eq(s.freed_bytes, allocated);
    jp_engine_live_table_bytes(e, &tracked);
    cr_assert_eq(tracked, 0);
    jp_engine_free(e);
}

/* Sequential ids, as the agent hands them out: young ones die in the young-id ring, survivors
 * move to the hashed table when the ring needs their slot; both stay exact. */
Test(memory, sequential_ids_survivors_leave_the_ring_exactly)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    define_sites(e);
    enum { N = 20000, LAG = 10 };
    uint64_t live = 0, allocated = 0;
    for (uint64_t id = 1; id <= N; id++) {
        t_alloc(e, N_A, id, id % 50u);
        allocated += id % 50u;
        live += id % 50u;
        /* free the allocation LAG ids back unless it is a survivor (every 7th) */
        if (id > LAG && (id - LAG) % 7u != 0) {
            t_free(e, 0, id - LAG, (id - LAG) % 50u);
            live -= (id - LAG) % 50u;
        }
    }
    /* survivors made it through the ring: resize one, free another, re-free and reuse are
     * violations wherever the id now lives */
    t_resize(e, N_B, 7, 7, 100);
    allocated += 93;
    live += 93;
    t_free(e, 0, 14, 14);
    live -= 14;
    struct jp_rec_free twice = {{JP_REC_FREE, 32}, 0, 14, 14, 0};
    struct jp_rec_alloc reuse = {{JP_REC_ALLOC, 32}, N_A, 21, 1, 0};
    struct jp_rec_alloc reuse_young = {{JP_REC_ALLOC, 32}, N_A, N - 1, 1, 0};
    cr_assert_eq(t_feed_raw(e, &twice, 32, NULL), 0);
    cr_assert_eq(t_feed_raw(e, &reuse, 32, NULL), 0);
    cr_assert_eq(t_feed_raw(e, &reuse_young, 32, NULL), 0);
    struct jp_engine_summary s;
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.violations, 3);
    cr_assert_eq(s.allocated_bytes, allocated);
    cr_assert_eq(s.retained_bytes, live);
    cr_assert_eq(s.freed_bytes, allocated - live);
    uint64_t tracked;
    jp_engine_live_table_bytes(e, &tracked);
    /* survivors among 1..N-LAG (multiples of 7, minus id 14), plus the last LAG */
    cr_assert_eq(tracked, (N - LAG) / 7u - 1u + LAG);
    jp_engine_free(e);
}

/* Ids in any order (a runtime may assign its own): descending ids land in the late-id set,
 * and every retired one is still caught when it comes back. 200000 of them also guard
 * against any quadratic bookkeeping (the suite's timeout would trip). */
Test(memory, out_of_order_ids_are_tracked_exactly)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    define_sites(e);
    enum { N = 200000 };
    for (uint64_t id = N; id >= 1; id--)
        t_alloc(e, N_A, id * 2u, 1);
    for (uint64_t id = 1; id <= N; id++)
        t_free(e, 0, id * 2u, 1);
    struct jp_rec_alloc reuse_mid = {{JP_REC_ALLOC, 32}, N_A, N, 1, 0};
    struct jp_rec_alloc reuse_first = {{JP_REC_ALLOC, 32}, N_A, 2u * N, 1, 0};
    cr_assert_eq(t_feed_raw(e, &reuse_mid, 32, NULL), 0);
    cr_assert_eq(t_feed_raw(e, &reuse_first, 32, NULL), 0);
    t_alloc(e, N_A, 3, 5); /* never used: odd */
    struct jp_engine_summary s;
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.violations, 2);
    cr_assert_eq(s.allocation_count, N + 1);
    cr_assert_eq(s.retained_bytes, 5);
    cr_assert_eq(s.live_exact, 1);
    jp_engine_free(e);
}
