/* Budgets count growth transients: a table growth holds its old and new arrays at once, so
 * it is refused unless both fit, and then the run degrades exactly as when the budget is
 * exhausted (memory: exact live tracking ends; CPU: detail stops). Each case probes the stream
 * with a roomy budget for its steady-state bytes (U) and its high-water mark (P > U), then
 * replays it at P (fits: complete) and at U and P - 1 (steady state fits, transient does not:
 * partial). Accounting only steady state would leave the U run complete. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

/* 3000 allocations over 8 sites, every third freed at once, the rest kept. */
static void mem_stream(struct jp_engine *e, uint64_t budget)
{
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, budget);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/b.jett");
    char fn[8];
    for (uint32_t i = 1; i <= 8; i++) {
        snprintf(fn, sizeof fn, "s%u", i);
        t_frame(e, i, 1, "b", fn, i * 10, i * 10 + 5, i, JP_FRAME_FUNCTION);
        t_node(e, i, 0, i);
    }
    /* ids past the young-id ring's reach go to the table: a stride of 4096 per step */
    for (uint64_t k = 1; k <= 3000; k++) {
        uint64_t id = k * 4097u;
        t_alloc(e, 1 + (uint32_t)(k % 8u), id, 8u + k % 64u);
        if (k % 3u == 0)
            t_free(e, 0, id, 8u + k % 64u);
    }
    t_stop(e, JP_TERM_RETURNED, 1000, 0, 0);
}

static struct jp_engine *mem_run(uint64_t budget, char **json)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    mem_stream(e, budget);
    t_render(e, JP_END_STOP, NULL, NULL, json, NULL);
    cr_assert_leq(jp_engine_metadata_peak_bytes(e), budget, "held more than the budget");
    return e;
}

Test(budget, memory_growth_transient_must_fit)
{
    char *json;
    struct jp_engine *e = mem_run(64 * MiB, &json);
    uint64_t steady = jp_engine_metadata_bytes(e), peak = jp_engine_metadata_peak_bytes(e);
    J_EQ(json, "profile.status", "complete");
    char *alloc_count = t_json_get(json, "profile.totals.allocation_count");
    char *allocated = t_json_get(json, "profile.totals.allocated_bytes");
    free(json);
    jp_engine_free(e);
    cr_assert_gt(peak, steady, "a growth holds old and new at once (peak %llu, steady %llu)",
                 (unsigned long long)peak, (unsigned long long)steady);

    e = mem_run(peak, &json); /* exactly the high-water mark: fits */
    J_EQ(json, "profile.status", "complete");
    cr_assert_eq(jp_engine_metadata_bytes(e), steady);
    free(json);
    jp_engine_free(e);

    uint64_t tight[] = {peak - 1, steady};
    for (int i = 0; i < 2; i++) {
        e = mem_run(tight[i], &json);
        /* the same degradation as an exhausted budget */
        J_EQ(json, "profile.status", "partial");
        J_EQ(json, "profile.partial_reason", "retention_metadata_limit");
        J_EQ(json, "profile.totals.freed_bytes", "unavailable");
        J_EQ(json, "profile.totals.retained_bytes", "unavailable");
        J_EQ(json, "profile.totals.allocation_count", alloc_count); /* counts go on exactly */
        J_EQ(json, "profile.totals.allocated_bytes", allocated);
        struct jp_engine_summary s;
        cr_assert_eq(jp_engine_summary(e, &s), 0);
        cr_assert_eq(s.live_exact, 0);
        free(json);
        jp_engine_free(e);
    }
    free(alloc_count);
    free(allocated);
}

/* 600 calling-context nodes (the node, chain and hot-line tables double as they fill). */
static struct jp_engine *cpu_run(uint64_t budget, char **json)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_CPU, 100, 0, 10, budget, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/c.jett");
    t_frame(e, 1, 1, "c", "main", 0, 5, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "c", "step", 5, 9, 2, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    for (uint32_t i = 2; i <= 600; i++) {
        t_node(e, i, i - 1 > 100 ? 1 : i - 1, 2);
        t_sample(e, JP_STATE_JETT, i, i % 50u + 1, 1);
    }
    t_stop(e, JP_TERM_RETURNED, 1000, 0, 0);
    t_render(e, JP_END_STOP, NULL, NULL, json, NULL);
    cr_assert_leq(jp_engine_metadata_peak_bytes(e), budget, "held more than the budget");
    return e;
}

Test(budget, cpu_growth_transient_must_fit)
{
    char *json;
    struct jp_engine *e = cpu_run(32 * MiB, &json);
    uint64_t steady = jp_engine_metadata_bytes(e), peak = jp_engine_metadata_peak_bytes(e);
    J_EQ(json, "profile.status", "complete");
    J_EQ(json, "profile.totals.attributed_stacks", "599");
    free(json);
    jp_engine_free(e);
    cr_assert_gt(peak, steady);

    e = cpu_run(peak, &json);
    J_EQ(json, "profile.status", "complete");
    free(json);
    jp_engine_free(e);

    uint64_t tight[] = {peak - 1, steady};
    for (int i = 0; i < 2; i++) {
        e = cpu_run(tight[i], &json);
        J_EQ(json, "profile.status", "partial");
        J_EQ(json, "profile.partial_reason", "cpu_metadata_limit");
        J_EQ(json, "profile.totals.attributed_samples", "599"); /* totals stay exact */
        char *stacks = t_json_get(json, "profile.totals.attributed_stacks");
        cr_assert(stacks != NULL && strtoull(stacks, NULL, 10) < 599, "detail stopped");
        free(stacks);
        free(json);
        jp_engine_free(e);
    }
}

/* A snapshot of a run past its budget says the budget's reason, as its final profile will,
 * not in_progress; a run within it says in_progress. Both say running. */
Test(budget, a_snapshot_of_a_run_past_its_budget_shows_the_budgets_reason)
{
    char *json;
    struct jp_engine *e = mem_run(64 * MiB, &json);
    uint64_t steady = jp_engine_metadata_bytes(e);
    free(json);
    jp_engine_free(e);
    for (int tight = 0; tight < 2; tight++) {
        e = mem_run(tight ? steady : 64 * MiB, &json);
        free(json);
        struct jp_report_opts o = {sizeof o, -1, -1, JP_END_RUNNING, JP_OUT_TOON | JP_OUT_HUMAN,
                                   0, 123, 0};
        t_render_opts(e, &o, NULL, NULL, &json, NULL);
        J_EQ(json, "profile.status", "partial");
        J_EQ(json, "profile.termination", "running");
        J_EQ(json, "profile.partial_reason", tight ? "retention_metadata_limit" : "in_progress");
        J_EQ(json, "profile.totals.records_taken", "123");
        J_EQ(json, "profile.totals.retained_bytes", "unavailable");
        free(json);
        jp_engine_free(e);
    }
}
