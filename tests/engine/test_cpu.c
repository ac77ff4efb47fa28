/* Injected CPU streams: inclusive/self, recursion, hot lines, call chains, the non-jett
 * buckets, coalescing, truncation at 128 frames, identity merging, the CPU metadata budget. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

enum { SRC = 1 };

static char *read_golden(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/render/golden/%s", getenv("JETTPROF_SOURCE_ROOT"),
             name);
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "missing golden file %s", path);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}


Test(cpu, inclusive_self_recursion_hot_lines_chains)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    /* threshold 24.00%: rec (3 of 13 = 23.08%) is just below, the other three above */
    t_start(e, JP_MODE_CPU, 1000, 2400, 10, 32 * MiB, 64 * MiB);
    t_golden_cpu_program(e);
    t_golden_cpu_samples(e);

    struct jp_report_opts o = {sizeof o, -1, -1, JP_END_STOP, 0, 0, 0, 0};
    struct jp_ctl_excerpt_key *keys;
    uint32_t nkeys;
    struct jp_engine_view v;
    struct jp_report *rep;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    cr_assert_eq(jp_report_build(&v, &o, &rep), 0);
    cr_assert_eq(jp_report_excerpt_keys(rep, &keys, &nkeys), 0);
    jp_report_free(rep);
    /* leaf's three hot lines and work's one, in report order */
    cr_assert_eq(nkeys, 4);
    cr_assert(keys[0].source_id == SRC && keys[0].line == 21 && keys[0].col == 5);
    cr_assert(keys[1].line == 22 && keys[1].col == 3);
    cr_assert(keys[2].line == 23 && keys[2].col == 1);
    cr_assert(keys[3].line == 11 && keys[3].col == 1);
    free(keys);
    t_excerpt(e, SRC, 21, 5, JP_EXCERPT_REDACTED, "let x = <redacted-literal>");
    t_excerpt(e, SRC, 22, 3, JP_EXCERPT_UNAVAILABLE, NULL);
    t_stop(e, JP_TERM_RETURNED, 1000000000u, 500000000u, 0);

    char *json, *human;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, &human, &json, &status);
    cr_assert_eq(status, JP_STATUS_COMPLETE);
    J_EQ(json, "profile.status", "complete");
    J_EQ(json, "profile.termination", "returned");
    /* 13 jett + 2 runtime + 1 waiting + 1 unavailable records, + 2 waiting and 1 runtime
     * ticks the timer saw while no safe point was reachable */
    J_EQ(json, "profile.totals.requested_ticks", "30");
    J_EQ(json, "profile.totals.recorded_samples", "20");
    J_EQ(json, "profile.totals.attributed_samples", "13");
    J_EQ(json, "profile.totals.runtime_samples", "3");
    J_EQ(json, "profile.totals.waiting_samples", "3");
    J_EQ(json, "profile.totals.unavailable_samples", "1");
    J_EQ(json, "profile.totals.coalesced_ticks", "5");
    J_EQ(json, "profile.totals.attributed_stacks", "13");
    J_EQ(json, "profile.totals.unavailable_stacks", "1");
    J_EQ(json, "profile.totals.observed_rate_hz", "20"); /* 20 samples in 1 s */
    J_EQ(json, "profile.totals.wall_duration_ns", "1000000000");
    J_EQ(json, "profile.totals.process_cpu_duration_ns", "500000000");
    J_EQ(json, "profile.totals.eligible_bottlenecks", "3");
    J_EQ(json, "profile.totals.emitted_bottlenecks", "3");
    J_EQ(json, "profile.totals.truncated_bottlenecks", "0");
    J_EQ(json, "profile.totals.protocol_violations", "0");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 3);
    /* main 13/13; leaf and work tie at 9 inclusive, leaf has more self (9 vs 3) */
    J_EQ(json, "profile.bottlenecks.0.function", "main");
    J_EQ(json, "profile.bottlenecks.0.inclusive_samples", "13");
    J_EQ(json, "profile.bottlenecks.0.self_samples", "0");
    J_EQ(json, "profile.bottlenecks.0.cpu_percent", "100");
    J_EQ(json, "profile.bottlenecks.1.rank", "2");
    J_EQ(json, "profile.bottlenecks.1.namespace", "app");
    J_EQ(json, "profile.bottlenecks.1.function", "leaf");
    J_EQ(json, "profile.bottlenecks.1.path", "src/app.jett");
    J_EQ(json, "profile.bottlenecks.1.line", "20");
    J_EQ(json, "profile.bottlenecks.1.inclusive_samples", "9");
    /* self: 4 + 2 (node 3) + 2 (node 6) + 1 (node 7) */
    J_EQ(json, "profile.bottlenecks.1.self_samples", "9");
    J_EQ(json, "profile.bottlenecks.1.cpu_percent", "69.23"); /* 9/13 = 69.2307... */
    J_EQ(json, "profile.bottlenecks.2.function", "work");
    J_EQ(json, "profile.bottlenecks.2.self_samples", "3");
    /* hot lines of leaf: (21,5) 4 + 2, (22,3) 2, (23,1) 1 */
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.1.hot_lines"), 3);
    J_EQ(json, "profile.bottlenecks.1.hot_lines.0.line", "21");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.0.column", "5");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.0.self_samples", "6");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.0.code", "let x = <redacted-literal>");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.0.source_redacted", "true");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.1.self_samples", "2");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.1.code", "unavailable");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.1.source_redacted", "false");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.2.line", "23");
    J_EQ(json, "profile.bottlenecks.1.hot_lines.2.code", "unavailable");
    /* chains of leaf: main>work>leaf 6, main>rec>rec>leaf 2, main>leaf 1 */
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.1.call_chains"), 3);
    J_EQ(json, "profile.bottlenecks.1.call_chains.0.samples", "6");
    J_EQ(json, "profile.bottlenecks.1.call_chains.0.frames", "[\"main\",\"app.work\",\"app.leaf\"]");
    J_EQ(json, "profile.bottlenecks.1.call_chains.1.samples", "2");
    J_EQ(json, "profile.bottlenecks.1.call_chains.1.frames",
         "[\"main\",\"app.rec\",\"app.rec\",\"app.leaf\"]");
    J_EQ(json, "profile.bottlenecks.1.call_chains.2.frames", "[\"main\",\"app.leaf\"]");
    /* suggestions: leaf self >= half -> CPU_HIGH_SELF; work and main callee-dominated */
    J_EQ(json, "profile.bottlenecks.1.suggestions.0.rule", "CPU_HIGH_SELF");
    J_EQ(json, "profile.bottlenecks.1.suggestions.0.text",
         "Inspect the reported hot lines in app.leaf; self work accounts for at least half of "
         "its samples.");
    J_EQ(json, "profile.bottlenecks.2.suggestions.0.rule", "CPU_CALLEE_DOMINATED");
    J_EQ(json, "profile.bottlenecks.2.suggestions.0.text",
         "Inspect the dominant reported call chain through app.work; its callees account for "
         "more than half of its samples.");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.2.suggestions"), 1);
    cr_assert(strstr(human, "CPU profile\n") == human);
    /* byte for byte, explained line by line in tests/render/golden/README.md */
    char *toon;
    t_render(e, JP_END_STOP, &toon, NULL, NULL, NULL);
    cr_assert_str_eq(toon, read_golden("cpu.toon"));
    cr_assert_str_eq(human, read_golden("cpu.txt"));
    free(toon);
    free(json);
    free(human);
    jp_engine_free(e);
}

Test(cpu, recursion_counts_once_and_chain_ends_at_root_most_occurrence)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32 * MiB, 64 * MiB);
    t_golden_cpu_program(e);
    t_sample(e, JP_STATE_JETT, 6, 21, 5); /* main > rec > rec > leaf */
    t_stop(e, JP_TERM_RETURNED, 1000, JP_NS_UNAVAILABLE, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.process_cpu_duration_ns", "unavailable");
    /* main, leaf, rec all 1/1; order by key 2 (self: leaf 1) then names: main < rec */
    J_EQ(json, "profile.bottlenecks.0.function", "leaf");
    J_EQ(json, "profile.bottlenecks.1.function", "main");
    J_EQ(json, "profile.bottlenecks.2.function", "rec");
    J_EQ(json, "profile.bottlenecks.2.inclusive_samples", "1");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.2.call_chains"), 1);
    J_EQ(json, "profile.bottlenecks.2.call_chains.0.frames", "[\"main\",\"app.rec\"]");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 3);
    free(json);
    jp_engine_free(e);
}

/* A stack of depth 128 ending in <truncated-stack> (127 kept frames + the marker). */
static void define_deep(struct jp_engine *e, bool truncated, uint32_t depth)
{
    char fn[16];
    t_source(e, SRC, JP_ORIGIN_PROJECT, "src/deep.jett");
    for (uint32_t i = 1; i < depth; i++) {
        snprintf(fn, sizeof fn, "f%03u", i);
        t_frame(e, i, SRC, "deep", fn, i * 10, i * 10 + 5, i, JP_FRAME_FUNCTION);
        t_node(e, i, i - 1, i);
    }
    if (truncated)
        t_frame(e, depth, JP_ID_NONE, "<root>", "<truncated-stack>", 0, 0, 0, JP_FRAME_TRUNCATED);
    else
        t_frame(e, depth, SRC, "deep", "last", 9000, 9001, 900, JP_FRAME_FUNCTION);
    t_node(e, depth, depth - 1, depth);
}

Test(cpu, truncated_stack_takes_self_and_makes_partial)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_CPU, 1000, 0, 100, 32 * MiB, 64 * MiB);
    define_deep(e, true, JP_MAX_DEPTH);
    t_sample(e, JP_STATE_JETT, JP_MAX_DEPTH, 0, 0);
    /* a 129th node is past the limit: a counted violation, not a node */
    t_node(e, JP_MAX_DEPTH + 1, JP_MAX_DEPTH, 1);
    t_stop(e, JP_TERM_RETURNED, 1000, 10, 0);
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    cr_assert_eq(status, JP_STATUS_PARTIAL);
    J_EQ(json, "profile.partial_reason", "stack_capture_limit");
    J_EQ(json, "profile.totals.truncated_stacks", "1");
    J_EQ(json, "profile.totals.protocol_violations", "1");
    J_EQ(json, "profile.totals.eligible_bottlenecks", "128");
    /* the marker has the only self sample, so it sorts first among the 128 equal inclusives */
    J_EQ(json, "profile.bottlenecks.0.function", "<truncated-stack>");
    J_EQ(json, "profile.bottlenecks.0.path", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.line", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.self_samples", "1");
    J_EQ(json, "profile.bottlenecks.1.function", "f001");
    J_EQ(json, "profile.bottlenecks.0.suggestions", "unavailable"); /* no source */
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.1.suggestions"), 0); /* partial data */
    free(json);
    jp_engine_free(e);
}

Test(cpu, exactly_128_frames_is_not_truncated)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_CPU, 1000, 0, 1, 32 * MiB, 64 * MiB);
    define_deep(e, false, JP_MAX_DEPTH);
    t_sample(e, JP_STATE_JETT, JP_MAX_DEPTH, 900, 2);
    t_stop(e, JP_TERM_RETURNED, 1000, 10, 0);
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    cr_assert_eq(status, JP_STATUS_COMPLETE);
    J_EQ(json, "profile.totals.truncated_stacks", "0");
    J_EQ(json, "profile.bottlenecks.0.function", "last");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.call_chains.0.frames"), 128);
    J_EQ(json, "profile.totals.eligible_bottlenecks", "128");
    J_EQ(json, "profile.totals.emitted_bottlenecks", "1");
    J_EQ(json, "profile.totals.truncated_bottlenecks", "127");
    free(json);
    jp_engine_free(e);
}

Test(cpu, equal_identities_merge_but_unknown_symbols_never_do)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/a.jett");
    t_source(e, 2, JP_ORIGIN_PROJECT, "src/a.jett"); /* the same source interned again */
    t_frame(e, 1, 1, "m", "f", 5, 50, 2, JP_FRAME_FUNCTION);
    t_frame(e, 2, 2, "m", "f", 5, 50, 2, JP_FRAME_FUNCTION); /* same identity (READINGS.md #1) */
    t_frame(e, 3, JP_ID_NONE, "<root>", "<unavailable-symbol>", 0, 0, 0,
            JP_FRAME_UNAVAILABLE_SYMBOL);
    t_frame(e, 4, JP_ID_NONE, "<root>", "<unavailable-symbol>", 0, 0, 0,
            JP_FRAME_UNAVAILABLE_SYMBOL);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 0, 2);
    t_node(e, 3, 0, 3);
    t_node(e, 4, 0, 4);
    t_sample(e, JP_STATE_JETT, 1, 3, 1);
    t_sample(e, JP_STATE_JETT, 2, 3, 1);
    t_sample(e, JP_STATE_JETT, 3, 0, 0);
    t_sample(e, JP_STATE_JETT, 4, 0, 0);
    t_stop(e, JP_TERM_RETURNED, 1000, 10, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 3);
    J_EQ(json, "profile.bottlenecks.0.function", "f");
    J_EQ(json, "profile.bottlenecks.0.inclusive_samples", "2");
    J_EQ(json, "profile.bottlenecks.0.hot_lines.0.self_samples", "2");
    J_EQ(json, "profile.bottlenecks.1.function", "<unavailable-symbol>");
    J_EQ(json, "profile.bottlenecks.1.inclusive_samples", "1");
    J_EQ(json, "profile.bottlenecks.2.inclusive_samples", "1");
    J_EQ(json, "profile.bottlenecks.1.suggestions", "unavailable"); /* no source: READINGS.md #12 */
    free(json);
    jp_engine_free(e);
}

Test(cpu, metadata_budget_stops_detail_keeps_totals)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    /* 2 KiB: enough for the first few definitions, not for 200 functions */
    t_start(e, JP_MODE_CPU, 1000, 0, 100, 2048, 64 * MiB);
    t_source(e, SRC, JP_ORIGIN_PROJECT, "src/many.jett");
    char fn[16];
    for (uint32_t i = 1; i <= 200; i++) {
        snprintf(fn, sizeof fn, "g%03u", i);
        t_frame(e, i, SRC, "many", fn, i, i + 1, i, JP_FRAME_FUNCTION);
        t_node(e, i, 0, i);
    }
    for (uint32_t i = 1; i <= 200; i++)
        t_sample(e, JP_STATE_JETT, i, i, 1);
    t_stop(e, JP_TERM_RETURNED, 1000, 10, 0);
    cr_assert_leq(jp_engine_metadata_bytes(e), 2048);
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    cr_assert_eq(status, JP_STATUS_PARTIAL);
    J_EQ(json, "profile.partial_reason", "cpu_metadata_limit");
    J_EQ(json, "profile.totals.attributed_samples", "200"); /* totals stay exact */
    J_EQ(json, "profile.totals.protocol_violations", "0");  /* ids stayed valid */
    char *n = t_json_get(json, "profile.totals.attributed_stacks");
    cr_assert(atoi(n) > 0 && atoi(n) < 200, "detail for some, not all: %s", n);
    free(n);
    int b = t_json_len(json, "profile.bottlenecks");
    cr_assert(b > 0 && b < 200);
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.suggestions"), 0);
    free(json);
    jp_engine_free(e);
}

Test(cpu, memory_records_in_cpu_mode_are_violations)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32 * MiB, 64 * MiB);
    t_alloc(e, 0, 1, 10);
    t_sample(e, JP_STATE_JETT, 9, 0, 0); /* undefined node */
    t_stop(e, JP_TERM_RETURNED, 1000, 10, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.protocol_violations", "2");
    J_EQ(json, "profile.totals.recorded_samples", "0");
    J_EQ(json, "profile.bottlenecks", "[]");
    free(json);
    jp_engine_free(e);
}

/* The hot line of each sample, read from the view: (function name, line, col) -> samples. */
static uint64_t hot_samples(const struct jp_engine_view *v, const char *fn, uint32_t line,
                            uint32_t col)
{
    for (uint32_t i = 0; i < v->nhots; i++) {
        const struct jp_hot *h = &v->hots[i];
        const struct jp_func *f = &v->funcs[h->func];
        if (h->line == line && h->col == col && f->fn_len == strlen(fn) &&
            memcmp(f->fn, fn, f->fn_len) == 0)
            return h->samples;
    }
    return 0;
}

/* A function caches its hot lines by way, (line ^ col) % 8: statements whose ways collide,
 * on the same line or not, and the same statement in another function, are each counted
 * apart, however the samples alternate. */
Test(cpu, hot_lines_sharing_a_way_are_each_counted)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, SRC, JP_ORIGIN_PROJECT, "src/w.jett");
    t_frame(e, 1, SRC, "w", "main", 0, 100, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, SRC, "w", "other", 100, 200, 20, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 1); /* main called from main: the same function, another node */
    t_node(e, 3, 1, 2);
    /* all in way 2: 3^1, 11^1, 19^1, 3^9, 10^8 */
    static const uint32_t stmt[][3] = {{3, 1, 5}, {11, 1, 4}, {19, 1, 3}, {3, 9, 2}, {10, 8, 1}};
    for (uint32_t round = 0; round < 5; round++)
        for (uint32_t k = 0; k < 5; k++)
            if (round < stmt[k][2])
                t_sample(e, JP_STATE_JETT, 1u + (round + k) % 2u, stmt[k][0], stmt[k][1]);
    t_sample(e, JP_STATE_JETT, 3, 3, 1); /* other's 3:1 is not main's */
    t_sample(e, JP_STATE_JETT, 1, 3, 1);
    t_stop(e, JP_TERM_RETURNED, 1000, 10, 0);
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    cr_assert_eq(v.nhots, 6);
    cr_assert_eq(hot_samples(&v, "main", 3, 1), 6);
    cr_assert_eq(hot_samples(&v, "main", 11, 1), 4);
    cr_assert_eq(hot_samples(&v, "main", 19, 1), 3);
    cr_assert_eq(hot_samples(&v, "main", 3, 9), 2);
    cr_assert_eq(hot_samples(&v, "main", 10, 8), 1);
    cr_assert_eq(hot_samples(&v, "other", 3, 1), 1);
    cr_assert_eq(v.state_samples[JP_STATE_JETT], 17);
    jp_engine_free(e);
}

/* ---- the one-pass sample path against the general one ------------------------------------ */

static uint64_t rng = 1;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A CPU run that walks the edge of every condition on_cpu_sample's one-pass path tests: the
 * four states, samples with and without a statement, statements whose ways collide (lines and
 * columns 1..24 and 1..3), undefined nodes, a truncated stack, EXEC switches of thread and
 * task; and, with a small CPU budget, the end of detail part way (hot lines refused, nodes
 * defined later kept without detail). */
static void cpu_edge_stream(struct jp_engine *e, uint64_t cpu_budget, uint64_t seed)
{
    t_start(e, JP_MODE_CPU, 1000, 0, 10, cpu_budget, 64 * MiB);
    t_source(e, SRC, JP_ORIGIN_PROJECT, "src/edge.jett");
    char fn[16];
    for (uint32_t i = 1; i <= 40; i++) {
        snprintf(fn, sizeof fn, "f%02u", i);
        t_frame(e, i, SRC, "edge", fn, i * 100, i * 100 + 50, i * 3, JP_FRAME_FUNCTION);
    }
    t_frame(e, 41, 0, "<root>", "<truncated-stack>", 0, 0, 0, JP_FRAME_TRUNCATED);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 41); /* defined before the budget can stop detail */
    uint32_t nnodes = 2;
    rng = seed;
    for (int i = 0; i < 60000; i++) {
        uint64_t x = next_rand();
        unsigned what = (unsigned)(x % 1000u);
        if (what < 3) {
            /* a node: a root or a child of a defined node; one in 16 a truncation */
            uint32_t parent = (x >> 10) % 4u ? 1u + (uint32_t)((x >> 12) % nnodes) : 0;
            uint32_t frame = (x >> 30) % 16u ? 1u + (uint32_t)((x >> 34) % 40u) : 41u;
            t_node(e, ++nnodes, parent, frame);
        } else if (what < 6) {
            struct jp_rec_exec r = {{JP_REC_EXEC, sizeof r}, 1u + (uint32_t)((x >> 10) % 3u),
                                    (x >> 20) % 2u ? 7u : JP_ID_UNAVAILABLE,
                                    JP_ID_UNAVAILABLE};
            cr_assert_eq(t_feed_raw(e, &r, sizeof r, NULL), 0);
        } else {
            uint8_t state = (x >> 10) % 16u ? JP_STATE_JETT : (uint8_t)((x >> 14) % JP_STATE_LIMIT);
            uint32_t node = (x >> 20) % 64u ? 1u + (uint32_t)((x >> 26) % nnodes)
                                            : nnodes + 1u + (uint32_t)((x >> 26) % 5u);
            bool stmt = (x >> 40) % 16u != 0;
            struct jp_rec_cpu_sample r = {.h = {JP_REC_CPU_SAMPLE, sizeof r}, .state = state,
                                          .flags = stmt ? JP_SAMPLE_HAS_STMT : 0, .node = node,
                                          .stmt_line = stmt ? 1u + (uint32_t)((x >> 44) % 24u) : 0,
                                          .stmt_col = stmt ? 1u + (uint32_t)((x >> 50) % 3u) : 0,
                                          .requested_tick = (uint64_t)i};
            cr_assert_eq(t_feed_raw(e, &r, sizeof r, NULL), 0);
        }
    }
    t_stop(e, JP_TERM_RETURNED, 1000000, 1000, 0);
}

Test(cpu, one_pass_and_general_sample_paths_agree)
{
    static const uint64_t budgets[] = {32 * MiB, 64 * 1024};
    for (unsigned b = 0; b < 2; b++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            struct t_tap tap = {0};
            t_tap_set(&tap);
            struct jp_engine *fast = t_engine();
            cpu_edge_stream(fast, budgets[b], seed * 0x9E3779B97F4A7C15u);
            t_tap_set(NULL);
            struct jp_engine *general = t_engine();
            cr_assert_eq(jp_engine_set_event_fast_paths(general, false), 0);
            for (uint32_t off = 0; off < tap.len;) {
                struct jp_rec_hdr h;
                memcpy(&h, tap.buf + off, sizeof h);
                cr_assert_eq(jp_engine_feed(general, tap.buf + off, h.size, NULL), 0);
                off += jp_rec_slots(h.size) * JP_SLOT_SIZE;
            }
            struct jp_engine_view vf, vg;
            cr_assert_eq(jp_engine_view(fast, &vf), 0);
            cr_assert_eq(jp_engine_view(general, &vg), 0);
            cr_assert_eq(vf.detail_stopped, b == 1, "budget %u: detail %s", b,
                         b == 0 ? "goes on" : "stops part way");
            cr_assert_gt(vf.violations, 0);
            cr_assert_gt(vf.truncated_stacks, 0, "budget %u seed %llu", b, (unsigned long long)seed);
            cr_assert_eq(vf.violations, vg.violations);
            cr_assert_eq(vf.producer_records, vg.producer_records);
            cr_assert_eq(vf.truncated_stacks, vg.truncated_stacks);
            cr_assert_eq(vf.attributed_stacks, vg.attributed_stacks);
            cr_assert_eq(vf.detail_stopped, vg.detail_stopped);
            for (uint32_t s = 0; s < JP_STATE_LIMIT; s++)
                cr_assert_eq(vf.state_samples[s], vg.state_samples[s]);
            cr_assert_eq(vf.nfuncs, vg.nfuncs);
            for (uint32_t i = 0; i < vf.nfuncs; i++) {
                cr_assert_eq(vf.funcs[i].cpu.inclusive, vg.funcs[i].cpu.inclusive);
                cr_assert_eq(vf.funcs[i].cpu.self, vg.funcs[i].cpu.self);
            }
            cr_assert_eq(vf.nchains, vg.nchains);
            for (uint32_t i = 0; i < vf.nchains; i++)
                cr_assert(vf.chains[i].samples == vg.chains[i].samples &&
                          vf.chains[i].leaf == vg.chains[i].leaf, "chain %u", i);
            cr_assert_eq(vf.nhots, vg.nhots);
            cr_assert_gt(vf.nhots, 40);
            for (uint32_t i = 0; i < vf.nhots; i++)
                cr_assert(vf.hots[i].func == vg.hots[i].func &&
                              vf.hots[i].line == vg.hots[i].line &&
                              vf.hots[i].col == vg.hots[i].col &&
                              vf.hots[i].samples == vg.hots[i].samples,
                          "budget %u seed %llu: hot line %u differs", b,
                          (unsigned long long)seed, i);
            cr_assert_eq(vf.nexec, vg.nexec);
            cr_assert_eq(vf.runtime_threads, vg.runtime_threads);
            cr_assert_eq(jp_engine_metadata_bytes(fast), jp_engine_metadata_bytes(general));
            char *tf, *hf, *tg, *hg;
            uint32_t stf, stg;
            t_render(fast, JP_END_STOP, &tf, &hf, NULL, &stf);
            t_render(general, JP_END_STOP, &tg, &hg, NULL, &stg);
            cr_assert_eq(stf, stg);
            cr_assert_str_eq(tf, tg, "budget %u seed %llu: the TOON profiles differ", b,
                             (unsigned long long)seed);
            cr_assert_str_eq(hf, hg);
            free(tf), free(hf), free(tg), free(hg);
            jp_engine_free(fast);
            jp_engine_free(general);
            free(tap.buf);
        }
    }
}
