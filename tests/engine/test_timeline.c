/* The run over time (engine/timeline.c): a run 100 times longer than the 512 points' first
 * stretches still fits in 512 points, its points add up to the run's totals exactly, and the
 * most bytes live at once in any point is the run's peak: a spike between two marks is kept. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "helpers.h"

static void mark(struct jp_engine *e, uint64_t ns)
{
    struct jp_rec_time t = {.h = {JP_REC_TIME, sizeof t}, .ns = ns};
    cr_assert_eq(t_feed_raw(e, &t, sizeof t, NULL), 0);
}

Test(timeline, a_memory_run_of_many_stretches_fits_and_adds_up)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_MEMORY, 0, 500, 10, 32u << 20, 64u << 20);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    t_frame(e, 1, 1, "m", "f", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    const uint64_t marks = 512u * 100u, stretch = 10000000u; /* 10 ms, the first stretch */
    uint64_t id = 0;
    for (uint64_t k = 1; k <= marks; k++) {
        uint64_t kept = ++id;
        t_alloc(e, 1, kept, 16 + k % 7);
        if (k == 12345) { /* a spike that is gone before the next mark */
            t_alloc(e, 1, ++id, 1u << 20);
            t_free(e, 1, id, 1u << 20);
        }
        if (k % 3)
            t_free(e, 1, kept, 16 + k % 7);
        mark(e, k * stretch);
    }
    t_stop(e, JP_TERM_RETURNED, marks * stretch, 0, 0);
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    cr_assert_not_null(v.timeline);
    cr_assert_leq(v.timeline_n, JP_TIMELINE_POINTS);
    cr_assert_gt(v.timeline_n, JP_TIMELINE_POINTS / 2u, "the points are used, not wasted");
    cr_assert_geq(v.timeline_stretch_ns * JP_TIMELINE_POINTS, marks * stretch);
    cr_assert_eq(v.timeline_stretch_ns % stretch, 0);
    uint64_t allocated = 0, count = 0, live_max = 0;
    for (uint32_t i = 0; i < v.timeline_n; i++) {
        allocated += v.timeline[i].allocated;
        count += v.timeline[i].count;
        if (v.timeline[i].live_max > live_max)
            live_max = v.timeline[i].live_max;
    }
    cr_assert_eq(allocated, v.allocated_bytes);
    cr_assert_eq(count, v.allocation_count);
    cr_assert_eq(live_max, v.peak_bytes, "the spike between two marks is in its point");
    cr_assert_geq(live_max, 1u << 20);
    jp_engine_free(e);
}

Test(timeline, a_cpu_runs_points_add_up_to_its_samples_by_state)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32u << 20, 64u << 20);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    t_frame(e, 1, 1, "m", "f", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    for (uint64_t k = 1; k <= 3000; k++) {
        t_sample(e, k % 5 ? JP_STATE_JETT : JP_STATE_WAITING, 1, 3, 1);
        if (k % 7 == 0)
            mark(e, k * 1000000u); /* a sample a millisecond */
    }
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    cr_assert_leq(v.timeline_n, JP_TIMELINE_POINTS);
    uint64_t sum[JP_STATE_LIMIT] = {0};
    for (uint32_t i = 0; i < v.timeline_n; i++)
        for (unsigned s = 0; s < JP_STATE_LIMIT; s++)
            sum[s] += v.timeline[i].samples[s];
    /* what came after the last mark waits for the next one */
    cr_assert_eq(sum[JP_STATE_JETT] + sum[JP_STATE_WAITING], 2996u);
    cr_assert_eq(sum[JP_STATE_WAITING], 599u);
    jp_engine_free(e);
}

Test(timeline, a_mark_from_any_time_lands_in_the_last_point)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32u << 20, 64u << 20);
    mark(e, UINT64_MAX);
    mark(e, 5);
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    cr_assert_leq(v.timeline_n, JP_TIMELINE_POINTS);
    cr_assert_gt(v.timeline_stretch_ns, 0);
    jp_engine_free(e);
}
