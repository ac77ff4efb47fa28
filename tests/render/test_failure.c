/* The collector-failure profile the agent renders alone (jp_render_failure, with the writers
 * only) is what the engine and the report builder make of the same two records - RUN_START and
 * COUNTERS - with the collector_failure ending, byte for byte: the two share the one status
 * derivation (jp_report_status), and this holds them to it in both modes, with and without
 * records the producer lost, with and without a run id. */
#include <criterion/criterion.h>
#include <string.h>

#include "render/failure.h"
#include "render/report.h"
#include "tests/engine/helpers.h"
#include "tests/lib/recbuild.h"

static void same_as_general(uint32_t mode, uint64_t lost, uint64_t run_id)
{
    struct jp_rec_run_start rs = tl_rec_run_start(mode);
    rs.rate_hz = mode == JP_MODE_CPU ? 997 : 0;
    rs.threshold_bp = 250;
    rs.limit = 7;
    rs.capabilities = mode == JP_MODE_CPU ? JP_CAPS_CPU_REQUIRED : JP_CAPS_MEMORY_REQUIRED;
    struct jp_rec_counters c = {.h = {JP_REC_COUNTERS, sizeof c}, .requested_ticks = 40,
                                .coalesced_ticks = 3, .dropped_ticks = 1, .waiting_ticks = 2,
                                .runtime_ticks = 5, .lost_records = lost};
    const uint32_t outputs = JP_OUT_HUMAN | JP_OUT_TOON;
    struct jp_rendered alone;
    cr_assert_eq(jp_render_failure(&rs, &c, outputs, run_id, &alone), 0);

    struct jp_engine *e = t_engine();
    cr_assert_eq(t_feed_raw(e, &rs, sizeof rs, NULL), 0);
    cr_assert_eq(t_feed_raw(e, &c, sizeof c, NULL), 0);
    struct jp_report_opts o = {sizeof o, -1, -1, JP_END_COLLECTOR_FAILURE, outputs, run_id, 0, 0};
    struct jp_rendered general;
    cr_assert_eq(jp_profile_render(e, &o, &general), 0);

    cr_assert_eq(alone.status, general.status);
    cr_assert_str_eq(alone.reason, general.reason);
    cr_assert_str_eq(alone.toon, general.toon, "mode %u, lost %llu", mode,
                     (unsigned long long)lost);
    cr_assert_str_eq(alone.human, general.human, "mode %u, lost %llu", mode,
                     (unsigned long long)lost);
    cr_assert_eq(alone.status, JP_STATUS_UNAVAILABLE, "nothing was recorded");
    jp_rendered_free(&alone);
    jp_rendered_free(&general);
    jp_engine_free(e);
}

Test(failure, cpu_profile_equals_the_general_path)
{
    same_as_general(JP_MODE_CPU, 0, 0);
    same_as_general(JP_MODE_CPU, 0, 42);
}

Test(failure, memory_profile_equals_the_general_path)
{
    same_as_general(JP_MODE_MEMORY, 0, 0);
    same_as_general(JP_MODE_MEMORY, 0, 42);
}

Test(failure, lost_records_make_both_paths_say_the_same)
{
    same_as_general(JP_MODE_CPU, 9, 0);
    same_as_general(JP_MODE_MEMORY, 9, 0);
    same_as_general(JP_MODE_MEMORY, 9, 42);
}
