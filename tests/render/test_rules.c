/* The contract readings that decide edge rules (docs/READINGS.md): entries
 * at threshold 0 (14), dropped ticks (15), lost memory events (16), truncated frees (17),
 * source-less suggestions (12), and the excerpt budget when an answer is replaced. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/engine/helpers.h"

/* Memory stream: big allocates 100 B; zero allocates 0 B; shrink only shrinks big's
 * allocation (100 -> 40); idle is defined with a node but never observed. */
static void zero_impact_stream(struct jp_engine *e, uint32_t thr)
{
    t_start(e, JP_MODE_MEMORY, 0, thr, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/z.jett");
    t_frame(e, 1, 1, "z", "big", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "z", "zero", 10, 19, 2, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "z", "shrink", 20, 29, 3, JP_FRAME_FUNCTION);
    t_frame(e, 4, 1, "z", "idle", 30, 39, 4, JP_FRAME_FUNCTION);
    for (uint32_t i = 1; i <= 4; i++)
        t_node(e, i, 0, i);
    t_alloc(e, 1, 1, 100);
    t_alloc(e, 2, 2, 0);
    t_resize(e, 3, 1, 100, 40);
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
}

Test(rules, zero_impact_sites_are_entries_at_threshold_zero)
{
    struct jp_engine *e = t_engine();
    zero_impact_stream(e, 0);
    char *json, *human;
    t_render(e, JP_END_STOP, NULL, &human, &json, NULL);
    J_EQ(json, "profile.totals.eligible_bottlenecks", "3");
    /* impact 100, then two zero impacts ordered by allocation count (1 before 0) */
    J_EQ(json, "profile.bottlenecks.0.function", "big");
    J_EQ(json, "profile.bottlenecks.1.function", "zero");
    J_EQ(json, "profile.bottlenecks.1.allocated_bytes", "0");
    J_EQ(json, "profile.bottlenecks.1.allocation_count", "1");
    J_EQ(json, "profile.bottlenecks.1.allocation_percent", "0");
    J_EQ(json, "profile.bottlenecks.2.function", "shrink");
    J_EQ(json, "profile.bottlenecks.2.resize_count", "1");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 3, "idle was only defined: %s", json);
    /* zero bytes allocated: no MEM_ALLOCATION_PRESSURE */
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.1.suggestions"), 0);
    cr_assert(strstr(human, "#2 z.zero (src/z.jett:2)") != NULL, "%s", human);
    free(json);
    free(human);
    jp_engine_free(e);

    /* one basis point above zero: zero impact no longer qualifies */
    e = t_engine();
    zero_impact_stream(e, 1);
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.eligible_bottlenecks", "1");
    J_EQ(json, "profile.bottlenecks.0.function", "big");
    free(json);
    jp_engine_free(e);
}

Test(rules, cpu_functions_only_defined_are_not_entries_at_threshold_zero)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/c.jett");
    t_frame(e, 1, 1, "c", "hot", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "c", "cold", 10, 19, 2, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 0, 2);
    t_sample(e, JP_STATE_JETT, 1, 2, 1);
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.eligible_bottlenecks", "1");
    J_EQ(json, "profile.bottlenecks.0.function", "hot");
    free(json);
    jp_engine_free(e);
}

Test(rules, dropped_ticks_alone_leave_the_profile_complete)
{
    struct jp_engine *e = t_engine();
    t_simple_cpu(e);
    t_counters(e, 9, 2, 3, 0, 0, 0);
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json, *human;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, &human, &json, &status);
    cr_assert_eq(status, JP_STATUS_COMPLETE);
    J_EQ(json, "profile.status", "complete");
    J_EQ(json, "profile.totals.dropped_ticks", "3");
    J_EQ(json, "profile.totals.coalesced_ticks", "2");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.suggestions"), 1, "%s", json);
    J_EQ(json, "profile.bottlenecks.0.suggestions.0.rule", "CPU_HIGH_SELF");
    cr_assert(strstr(human, "status: complete\n") != NULL, "%s", human);
    cr_assert(strstr(human, "suggestion CPU_HIGH_SELF") != NULL, "%s", human);
    free(json);
    free(human);
    jp_engine_free(e);
}

/* alloc 1 (64 B) and 2 (32 B) at fill, free 1: exact figures would be freed 64, live 32,
 * peak 96, retained 32. */
static void lossy_memory(struct jp_engine *e, uint64_t lost, int64_t count_delta)
{
    t_start(e, JP_MODE_MEMORY, 0, 500, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    t_frame(e, 1, 1, "m", "fill", 0, 9, 3, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_alloc(e, 1, 1, 64);
    t_alloc(e, 1, 2, 32);
    t_free(e, 1, 1, 64);
    t_counters(e, 0, 0, 0, 0, 0, lost);
    t_stop(e, JP_TERM_RETURNED, 10, 0, count_delta);
}

static void check_live_unavailable(struct jp_engine *e)
{
    char *json, *human;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, &human, &json, &status);
    cr_assert_eq(status, JP_STATUS_PARTIAL);
    J_EQ(json, "profile.partial_reason", "records_dropped");
    const char *gone[] = {"freed_bytes", "live_bytes", "peak_live_bytes", "retained_bytes"};
    char path[96];
    for (unsigned i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "profile.totals.%s", gone[i]);
        J_EQ(json, path, "unavailable");
    }
    cr_assert(strstr(human, " freed, peak and retained unavailable\n") != NULL, "%s", human);
    cr_assert(strstr(human, "\nretained at the end, largest sites: unavailable") != NULL, "%s",
              human);
    cr_assert(strstr(human, "\nlive at the peak, largest sites: unavailable") != NULL, "%s", human);
    J_EQ(json, "profile.bottlenecks.0.freed_bytes", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.retained_bytes", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.live_at_peak_bytes", "unavailable");
    /* what arrived stays exact */
    J_EQ(json, "profile.totals.allocation_count", "2");
    J_EQ(json, "profile.totals.allocated_bytes", "96");
    J_EQ(json, "profile.bottlenecks.0.allocation_count", "2");
    J_EQ(json, "profile.bottlenecks.0.allocated_bytes", "96");
    cr_assert(strstr(human, "freed, retained and live at peak unavailable") != NULL, "%s",
              human);
    struct jp_engine_summary sum;
    cr_assert_eq(jp_engine_summary(e, &sum), 0);
    cr_assert_eq(sum.live_exact, 0);
    cr_assert_eq(sum.freed_bytes, 0);
    cr_assert_eq(sum.allocated_bytes, 96);
    free(json);
    free(human);
}

Test(rules, lost_memory_events_make_live_figures_unavailable)
{
    struct jp_engine *e = t_engine();
    lossy_memory(e, 2, 0);
    check_live_unavailable(e);
    jp_engine_free(e);

    /* records announced by RUN_STOP that never arrived break exactness the same way */
    e = t_engine();
    lossy_memory(e, 0, 1);
    check_live_unavailable(e);
    jp_engine_free(e);

    /* and with nothing lost the same stream is exact */
    e = t_engine();
    lossy_memory(e, 0, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.status", "complete");
    J_EQ(json, "profile.totals.freed_bytes", "64");
    J_EQ(json, "profile.totals.peak_live_bytes", "96");
    J_EQ(json, "profile.totals.retained_bytes", "32");
    J_EQ(json, "profile.bottlenecks.0.live_at_peak_bytes", "96");
    free(json);
    jp_engine_free(e);
}

/* Frames f1..f127 then <truncated-stack>: node 128 is a cut stack, node 1 a whole one. */
static void deep_memory(struct jp_engine *e)
{
    t_start(e, JP_MODE_MEMORY, 0, 500, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/d.jett");
    t_frame(e, 1, 1, "d", "f", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 0, "<root>", "<truncated-stack>", 0, 0, 0, JP_FRAME_TRUNCATED);
    for (uint32_t i = 1; i <= 127; i++)
        t_node(e, i, i - 1, 1);
    t_node(e, 128, 127, 2);
}

Test(rules, a_truncated_free_counts_and_makes_partial)
{
    struct jp_engine *e = t_engine();
    deep_memory(e);
    t_alloc(e, 1, 1, 64);
    t_free(e, 128, 1, 64);
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
    char *json, *human;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, &human, &json, &status);
    cr_assert_eq(status, JP_STATUS_PARTIAL);
    J_EQ(json, "profile.partial_reason", "stack_capture_limit");
    J_EQ(json, "profile.totals.truncated_stacks", "1");
    /* the free still attributes nothing to the truncated frame: the site keeps its freed */
    J_EQ(json, "profile.bottlenecks.0.function", "f");
    J_EQ(json, "profile.bottlenecks.0.freed_bytes", "64");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 1, "%s", json);
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.suggestions"), 0);
    cr_assert(strstr(human, "status: partial (stack_capture_limit: a call stack deeper than 128 "
                            "frames was cut)\n") != NULL, "%s", human);
    free(json);
    free(human);
    jp_engine_free(e);
}

Test(rules, a_whole_free_is_not_counted_as_truncated)
{
    struct jp_engine *e = t_engine();
    deep_memory(e);
    t_alloc(e, 1, 1, 64);
    t_free(e, 127, 1, 64); /* 127 frames deep: whole */
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    cr_assert_eq(status, JP_STATUS_COMPLETE);
    J_EQ(json, "profile.totals.truncated_stacks", "0");
    free(json);
    jp_engine_free(e);
}

Test(rules, a_source_less_entry_renders_suggestions_unavailable)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/s.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 0, "<root>", "<unavailable-symbol>", 0, 0, 0, JP_FRAME_UNAVAILABLE_SYMBOL);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    t_sample(e, JP_STATE_JETT, 2, 5, 1);
    t_sample(e, JP_STATE_JETT, 2, 5, 1);
    t_sample(e, JP_STATE_JETT, 1, 2, 1);
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json, *toon, *human;
    t_render(e, JP_END_STOP, &toon, &human, &json, NULL);
    /* main: 3 inclusive, source known, CPU_CALLEE_DOMINATED */
    J_EQ(json, "profile.bottlenecks.0.function", "main");
    J_EQ(json, "profile.bottlenecks.0.suggestions.0.rule", "CPU_CALLEE_DOMINATED");
    J_EQ(json, "profile.bottlenecks.1.function", "<unavailable-symbol>");
    J_EQ(json, "profile.bottlenecks.1.path", "unavailable");
    J_EQ(json, "profile.bottlenecks.1.suggestions", "unavailable");
    cr_assert(strstr(toon, "\n      suggestions: unavailable\n") != NULL, "%s", toon);
    const char *b2 = strstr(human, "#2 <unavailable-symbol> (source unavailable)");
    cr_assert(b2 != NULL, "%s", human);
    cr_assert(strstr(b2, "\n   suggestions: unavailable\n") != NULL, "%s", human);
    cr_assert(strstr(human, "suggestions: unavailable") > b2, "only #2 says so: %s", human);
    free(json);
    free(toon);
    free(human);
    jp_engine_free(e);

    /* memory: a site without a source */
    e = t_engine();
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_frame(e, 1, 0, "<root>", "<runtime>", 0, 0, 0, JP_FRAME_RUNTIME_BUCKET);
    t_node(e, 1, 0, 1);
    t_alloc(e, 1, 1, 16);
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
    t_render(e, JP_END_STOP, &toon, &human, &json, NULL);
    J_EQ(json, "profile.bottlenecks.0.suggestions", "unavailable");
    cr_assert(strstr(human, "\n   suggestions: unavailable\n") != NULL, "%s", human);
    free(json);
    free(toon);
    free(human);
    jp_engine_free(e);
}

Test(rules, replacing_an_excerpt_returns_its_bytes_to_the_budget)
{
    struct jp_engine *e = t_engine();
    t_simple_cpu(e);
    uint64_t before = jp_engine_metadata_bytes(e);
    t_excerpt(e, 1, 2, 1, 0, "let x = compute(y)");
    uint64_t once = jp_engine_metadata_bytes(e);
    cr_assert_gt(once, before);
    for (int i = 0; i < 50; i++)
        t_excerpt(e, 1, 2, 1, 0, "let x = compute(y)");
    cr_assert_eq(jp_engine_metadata_bytes(e), once, "%llu after 51 answers, %llu after one",
                 (unsigned long long)jp_engine_metadata_bytes(e), (unsigned long long)once);
    /* a replacement of another length is accounted at its own length */
    t_excerpt(e, 1, 2, 1, 0, "x");
    cr_assert_eq(jp_engine_metadata_bytes(e), once - strlen("let x = compute(y)") + 1);
    t_excerpt(e, 1, 2, 1, JP_EXCERPT_UNAVAILABLE, NULL);
    cr_assert_eq(jp_engine_metadata_bytes(e), once - strlen("let x = compute(y)") - 1);
    jp_engine_free(e);
}
