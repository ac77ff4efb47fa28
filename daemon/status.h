#ifndef JETTPROF_DAEMON_STATUS_H
#define JETTPROF_DAEMON_STATUS_H

#include "jpd.h"

/* status.c: the live runs, the totals and the texts of STATUS and RUNS. */
/* `status --format prometheus` lists this many live runs one by one, the rest added up. */
#define JPD_PROM_MAX_RUNS 100u
/* On the run's loop: the run started (lists l) / drained (its figures) / ended (unlists l,
 * counts it finished with its records). _end on a run never begun does nothing. */
void jpd_live_begin(struct jpd_daemon *d, struct jpd_live *l);
/* _update takes the fill of the run's fullest ring (of its slots), sums the wakes and gauges of
 * all its rings, takes the engine's live bytes, allocations and samples and, until it is known,
 * names the program. */
void jpd_live_update(struct jpd_daemon *d, struct jpd_live *l, uint64_t records, uint64_t fill,
                     uint64_t slots, const struct jp_ring *const *rings, uint32_t nrings,
                     const struct jp_engine *eng);
/* The drain's waits for its capture compressor (compress.h), shown with the run. */
void jpd_live_capture(struct jpd_daemon *d, struct jpd_live *l, uint64_t waits, uint64_t wait_ns);
void jpd_live_end(struct jpd_daemon *d, struct jpd_live *l);
/* Main loop: a connection was refused (permission, too many runs). */
void jpd_live_refused(struct jpd_daemon *d);
/* The status text for a caller of uid viewer in format JPD_STATUS_*, appended to b. A viewer
 * that is root or the daemon's own uid sees every live run; any other sees its own runs in
 * full and others' only as a count. */
void jpd_status_text(struct jpd_daemon *d, uid_t viewer, uint32_t format, struct jp_buf *b);
/* Main loop: the newest `limit` finished runs (d->recent) a caller of uid viewer may see (the
 * same rule as status, but others' runs are left out), format JP_STATUS_FMT_HUMAN or _JSON. */
void jpd_runs_text(struct jpd_daemon *d, uid_t viewer, uint32_t format, uint32_t limit,
                   struct jp_buf *b);

#endif
