/* The profile of a run whose collection failed after user code started, from what its producer
 * alone knows: the RUN_START and COUNTERS records it made. It is what the engine and the report
 * builder make of exactly those two records with the collector_failure ending (nothing was
 * attributed, so no entry; no RUN_STOP, so termination unavailable; no event, so unavailable;
 * records the producer could not push make it records_dropped too), written by the writers
 * alone: the agent links this and the writers, never the engine or the report builder. */
#ifndef JETTPROF_RENDER_FAILURE_H
#define JETTPROF_RENDER_FAILURE_H

#include "protocol/records.h"
#include "render/rendered.h"

/* 0 with *out filled (jp_rendered_free frees it); -EINVAL when a record is not valid or its
 * parameters are outside the contract's ranges; -ENOMEM. outputs: JP_OUT_*; run_id: the
 * long-lived daemon's id of the run, 0 for none. */
int jp_render_failure(const struct jp_rec_run_start *rs, const struct jp_rec_counters *c,
                      uint32_t outputs, uint64_t run_id, struct jp_rendered *out);

#endif
