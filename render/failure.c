/* The collector-failure profile (failure.h): a fixed report over two records, printed by the
 * writers. */
#include "render/failure.h"

#include <errno.h>
#include <string.h>

#include "render/report.h"

int jp_render_failure(const struct jp_rec_run_start *rs, const struct jp_rec_counters *c,
                      uint32_t outputs, uint64_t run_id, struct jp_rendered *out)
{
    memset(out, 0, sizeof *out);
    const char *why;
    if (jp_rec_validate(rs, sizeof *rs, &why) < 0 || jp_rec_validate(c, sizeof *c, &why) < 0 ||
        rs->threshold_bp > JP_THRESHOLD_BP_MAX || rs->limit > JP_LIMIT_MAX)
        return -EINVAL;
    struct jp_engine_view v = {
        .mode = rs->mode, .start = rs, .counters = c,
        .records_counted = 2, /* RUN_START and COUNTERS */
        .live_exact = true, .exec_exact = true, .threads_exact = true,
    };
    struct jp_report r = {
        .v = &v, .ending = JP_END_COLLECTOR_FAILURE,
        .threshold_bp = rs->threshold_bp, .limit = rs->limit,
    };
    jp_report_status(&v, JP_END_COLLECTOR_FAILURE, &r); /* the builder's own derivation */
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_COLLECTOR_FAILURE, .outputs = outputs,
                               .run_id = run_id};
    return jp_report_write(&r, &o, out);
}
