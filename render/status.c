/* A report's status block (jp_report_status, report.h): the one derivation of status,
 * reasons, termination and the exactness flags from a view and how the run ended. It is in the
 * writers' archive, with no engine symbol, so the agent's collector-failure profile
 * (failure.c) derives its status the same way the report builder does.
 */
#include "render/report.h"

void jp_report_status(const struct jp_engine_view *v, uint32_t ending, struct jp_report *r)
{
    const struct jp_rec_counters *c = v->counters;
    uint32_t reasons = 0;
#define SET(n) (reasons |= 1u << JP_REASON_BIT_##n)
    if (ending == JP_END_COLLECTOR_FAILURE)
        SET(COLLECTOR_FAILURE);
    if (ending == JP_END_RUNNING) {
        SET(IN_PROGRESS); /* a snapshot: the run goes on, whatever the records say */
    } else if (!v->have_stop) {
        if (ending == JP_END_PRODUCER_LOST)
            SET(PRODUCER_LOST);
        else if (ending == JP_END_SHUTDOWN)
            SET(INTERRUPTED);
        else if (ending == JP_END_TRUNCATED || ending == JP_END_STOP)
            SET(MISSING_STOP_EVENT);
    } else if (v->termination == JP_TERM_INTERRUPTED) {
        SET(INTERRUPTED);
    }
    r->record_mismatch = ending == JP_END_RUNNING ? 0 : jp_view_record_mismatch(v);
    /* Dropped ticks are an ordinary total like coalesced ones (READINGS.md #15): an opportunity
     * not taken, not an account left incomplete. Records that did not arrive are. */
    if (c->lost_records || r->record_mismatch)
        SET(RECORDS_DROPPED);
    r->live_exact = jp_view_live_exact(v);
    if (v->mode == JP_MODE_MEMORY && (v->detail_stopped || !v->live_exact))
        SET(RETENTION_METADATA_LIMIT);
    if (v->mode == JP_MODE_CPU && v->detail_stopped)
        SET(CPU_METADATA_LIMIT);
    if (v->truncated_stacks)
        SET(STACK_CAPTURE_LIMIT);
#undef SET
    r->reasons = reasons;
    r->status = JP_STATUS_COMPLETE;
    r->reason = "";
    /* A snapshot's reason is a bounded-detail one that already holds, as the final profile
     * will say it, else in_progress (render/REPORT.md, "Snapshots"). */
    uint32_t primary = ending != JP_END_RUNNING ? reasons
                       : reasons & ((1u << JP_REASON_BIT_COLLECTOR_FAILURE) |
                                    (1u << JP_REASON_BIT_RETENTION_METADATA_LIMIT) |
                                    (1u << JP_REASON_BIT_CPU_METADATA_LIMIT) |
                                    (1u << JP_REASON_BIT_STACK_CAPTURE_LIMIT) |
                                    (1u << JP_REASON_BIT_IN_PROGRESS));
    if (reasons) {
        r->status = JP_STATUS_PARTIAL;
        for (unsigned b = 0; b < JP_REASON_COUNT; b++)
            if (primary & (1u << b)) {
                r->reason = jp_reason_name(b);
                break;
            }
    }
    /* A collector that failed before anything was recorded leaves nothing to be partial of. */
    if ((reasons & (1u << JP_REASON_BIT_COLLECTOR_FAILURE)) && !v->producer_records)
        r->status = JP_STATUS_UNAVAILABLE;
    if (ending == JP_END_RUNNING)
        r->termination = "running";
    else if (v->have_stop)
        r->termination = jp_termination_name(v->termination);
    else
        r->termination = ending == JP_END_SHUTDOWN ? "interrupted" : "unavailable";
    if (!r->termination)
        r->termination = "unavailable";
    /* Detail the suggestions would rest on is incomplete: counts lost in transit, stacks cut,
     * or detail buckets refused. */
    r->detail_partial = (reasons & ((1u << JP_REASON_BIT_RECORDS_DROPPED) |
                                    (1u << JP_REASON_BIT_STACK_CAPTURE_LIMIT))) ||
                        v->detail_stopped;
}
