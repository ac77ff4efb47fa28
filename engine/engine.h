/* The profile engine: online aggregation of one run's record stream within the contract's
 * budgets. No I/O: the daemon's sessions, replay and tests all drive it by feeding records, so
 * a live profile and the replay of its capture go through the same code and give the same
 * bytes. It never builds or writes the report: callers take its read-only view (view.h) and
 * hand it to render/ (report.h).
 */
#ifndef JETTPROF_ENGINE_ENGINE_H
#define JETTPROF_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "protocol/control.h"
#include "protocol/records.h"

struct jp_engine; /* opaque */

/* Out of memory. Every call below that allocates returns -ENOMEM when malloc, calloc,
 * realloc or aligned_alloc fails, and only then: jp_engine_new and jp_engine_feed. A refusal
 * by the run's metadata budget is never -ENOMEM: it degrades the profile as the
 * contract says (detail stops, or exact live tracking ends) and the call succeeds. So a
 * caller that sees -ENOMEM says "out of memory" and gives up (the daemon ends the session,
 * replay exits non-zero); it never reports the profile as partial for a budget. After a feed
 * returned -ENOMEM the engine takes no further record (every later feed returns -ENOMEM) but
 * stays consistent: jp_engine_view, jp_engine_summary and jp_engine_free still work on what
 * it had. */

int jp_engine_new(struct jp_engine **out);
void jp_engine_free(struct jp_engine *e);
/* The engine keys the hashes of every table a producer can fill (names, ids, call chains, hot
 * lines) with a per-engine secret taken from getrandom at jp_engine_new, so no stream can be
 * built in advance to make them collide. Output never depends on the seed: reports come from
 * definition-ordered arrays sorted on the contract's keys, and tables grow on entry counts
 * alone. This replaces the seed (tests, reproducing a layout); only before the first record:
 * -EBUSY after it. */
int jp_engine_set_hash_seed(struct jp_engine *e, uint64_t seed);
/* Whether allocation, free and CPU sample events may take their one-pass paths (the
 * default). Off, every event takes the general path, which gives the very same results and
 * profile; for checking the two against each other (tests, fuzzing). Only before the first
 * record: -EBUSY after. */
int jp_engine_set_event_fast_paths(struct jp_engine *e, bool on);

/* Feeds one record, already copied out of untrusted memory. The engine validates it
 * (jp_rec_validate) and its place in the stream. Returns:
 *   0        accepted (including semantic violations the contract says to count and exclude:
 *            unknown ids, reused ids, size mismatches, undefined frames/nodes);
 *   -EPROTO  the stream cannot go on (structurally bad record, nothing before RUN_START, a
 *            second RUN_START, anything after RUN_STOP); *why names it. The caller ends the
 *            session; the engine's view still shows what it had;
 *   -ENOMEM  the host itself is out of memory (not the run's budget): the engine stays
 *            consistent and its view usable, but this record may be only partly counted, and
 *            every later record is refused with -ENOMEM too.
 * Never allocates beyond the budgets the RUN_START record set (detail stops; totals go on).
 * Memory mode's budget (retention_budget_bytes) covers the definitions, the per-site table
 * and the exact live-allocation tracking; CPU mode's (cpu_budget_bytes) every definition and
 * detail table. A source whose path is absolute or not normalized is a counted violation; its
 * id stays defined and its location is reported unavailable. */
int jp_engine_feed(struct jp_engine *e, const void *rec, uint32_t len, const char **why);
/* jp_engine_feed for one ring slot (JP_SLOT_SIZE bytes) that may still change under the
 * caller (the producer's shared memory): the slot is copied once and nothing is read from it
 * again. When the copy is a one-slot CPU sample or allocation event that jp_engine_feed would
 * take in the stream's present state, it is fed and the result is jp_engine_feed's (0, or
 * -ENOMEM); for anything else (another type, a bad header or sample, a stream not open, an
 * engine out of memory) it returns 1 having changed nothing, and the caller feeds its own copy
 * through jp_engine_feed, which decides it and gives the reason. */
int jp_engine_feed_slot(struct jp_engine *e, const void *slot);
/* jp_engine_feed_slot over n consecutive slots, in order, stopping at the first that does not
 * return 0: returns that result (1, JP_ENGINE_HELD or -ENOMEM; 0 when all n were fed) with *fed the slots fed
 * before it. The same as calling jp_engine_feed_slot n times, without a call per slot. */
int jp_engine_feed_slots(struct jp_engine *e, const void *slots, uint64_t n, uint64_t *fed);

/* Hold mode, for a caller that merges a run's records from several rings (the daemon with
 * worker rings). While it is on, an event that names what the stream has not given yet - a
 * sample or event whose node is not defined, a resize or free of an id that is not live or is
 * live with another size - is not taken: the feeds above return JP_ENGINE_HELD having changed
 * nothing (not even the record count), and the caller offers it again after the other rings
 * gave what they had. Off (the default, and always for one stream), the same event is the
 * counted violation the contract says. A held record fed again with hold off is exactly that
 * violation, so a stream merged under hold replays the same without it. */
#define JP_ENGINE_HELD 3
void jp_engine_set_hold(struct jp_engine *e, int on);

/* Totals for the runs log and capture summaries. Fields a mode does not have are 0; fields that
 * became unavailable have the matching *_exact flag cleared. The run's status is the report's
 * (render/report.h), not a total. 0, -EINVAL, -ENODATA (no RUN_START); never allocates. */
struct jp_engine_summary {
    uint32_t mode, termination;
    uint64_t records;
    uint64_t violations;
    /* cpu */
    uint64_t requested_ticks, recorded_samples, attributed_samples;
    /* memory */
    uint64_t allocation_count, resize_count, allocated_bytes;
    uint64_t freed_bytes, peak_live_bytes, retained_bytes;
    uint32_t live_exact; /* 0 past the retention budget */
};
int jp_engine_summary(const struct jp_engine *e, struct jp_engine_summary *out);

/* Bytes the engine has accounted against the run's metadata budget so far (CPU mode: the
 * cpu budget; memory mode: the retention budget, which covers definitions, sites and the live
 * table). For benches, tests and the runs log. */
uint64_t jp_engine_metadata_bytes(const struct jp_engine *e);
/* The most the engine has held against that budget at any instant: a table growth holds the
 * old and the new array at once, and is refused (detail stops / exact live tracking ends, as
 * when the budget is exhausted) unless both fit. Never above the budget. */
uint64_t jp_engine_metadata_peak_bytes(const struct jp_engine *e);
/* Bytes held by the exact live-allocation tracking alone (table, overflow, id history), and in
 * *live_count the allocations it tracks right now. */
uint64_t jp_engine_live_table_bytes(const struct jp_engine *e, uint64_t *live_count);

/* The source table as it stands (view.h's struct jp_source; index 0 is the reserved none),
 * without settling anything: cheap enough to call mid-run. Its count in *n. */
struct jp_source;
const struct jp_source *jp_engine_sources(const struct jp_engine *e, uint32_t *n);

#endif
