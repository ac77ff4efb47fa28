/* The built report both writers read (render/report.c builds it, render/writers.c prints it).
 * Private to engine_dep. */
#ifndef JETTPROF_RENDER_REPORT_H
#define JETTPROF_RENDER_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../daemon/engine/view.h"

/* Partial/unavailable reasons, one list, in the documented priority order: when several apply,
 * the first one here is the profile's one stable reason; the human report lists them all.
 * X(NAME, "word") */
#define JP_REASONS(X)                                                                             \
    X(COLLECTOR_FAILURE, "collector_failure")                                                     \
    X(PRODUCER_LOST, "producer_lost")                                                             \
    X(INTERRUPTED, "interrupted")                                                                 \
    X(MISSING_STOP_EVENT, "missing_stop_event")                                                   \
    X(RECORDS_DROPPED, "records_dropped")                                                         \
    X(RETENTION_METADATA_LIMIT, "retention_metadata_limit")                                       \
    X(CPU_METADATA_LIMIT, "cpu_metadata_limit")                                                   \
    X(STACK_CAPTURE_LIMIT, "stack_capture_limit")
enum {
#define JP_X(n, s) JP_REASON_BIT_##n,
    JP_REASONS(JP_X)
#undef JP_X
    JP_REASON_COUNT
};
const char *jp_reason_name(unsigned bit);

/* Suggestion rule ids, sorted by id (the order they are emitted in). X(NAME) */
#define JP_RULES(X) X(CPU_CALLEE_DOMINATED) X(CPU_HIGH_SELF) X(MEM_ALLOCATION_PRESSURE) X(MEM_RETAINED)

enum {
#define JP_X(n) JP_RULE_##n,
    JP_RULES(JP_X)
#undef JP_X
    JP_RULE_COUNT
};

struct jp_entry {
    uint32_t func;
    uint64_t impact; /* CPU: inclusive samples; memory: attributed allocated bytes */
    uint64_t key2;   /* CPU: self samples; memory: allocation count */
    uint32_t hot[3], nhot;       /* CPU: indices into view->hots, reported order */
    uint32_t chain[3], nchains;  /* CPU: indices into view->chains, reported order */
    uint32_t sugg[2], nsugg;     /* JP_RULE_*, ordered by rule id */
    bool sugg_unavailable;       /* source unavailable: suggestions render `unavailable` */
    /* distinct runtime threads / tasks behind the entry's samples (CPU) or creation events
     * (memory); 0 = unavailable (no event carried that identity, or the budget refused) */
    uint32_t threads, tasks;
};

struct jp_report {
    const struct jp_engine_view *v;
    uint32_t threshold_bp, limit;
    uint32_t status;
    uint32_t reasons;       /* 1 << JP_REASON_BIT_* */
    const char *reason;     /* the highest-priority reason, "" when complete */
    const char *termination;
    bool detail_partial;
    bool live_exact; /* memory: freed/live/peak/retained are exact (jp_view_live_exact) */
    uint64_t record_mismatch; /* |RUN_STOP.record_count - records received|, 0 without stop */
    uint64_t denominator;
    struct jp_entry *entries; /* eligible, in order; the first `emitted` are reported */
    uint32_t eligible, emitted;
};

int jp_func_cmp(const struct jp_engine_view *v, uint32_t a, uint32_t b);
uint64_t jp_percent_hundredths(uint64_t impact, uint64_t den);

/* The writers: *out is malloc'ed and NUL-terminated at *len. 0, or -ENOMEM when an
 * allocation failed (nothing is left to free). jp_render_build returns
 * -ENOMEM likewise when building the report runs out of memory, and never for anything else
 * but -EINVAL (a threshold or limit out of range). */
int jp_write_toon(const struct jp_report *r, char **out, size_t *len);
int jp_write_human(const struct jp_report *r, char **out, size_t *len);

/* |RUN_STOP.record_count - records received|; 0 without RUN_STOP. */
uint64_t jp_view_record_mismatch(const struct jp_engine_view *v);
/* Memory mode: whether freed, live, peak, retained and live-at-peak bytes are exact: the live
 * table held (no retention-budget refusal) and no event was lost on the way (COUNTERS
 * lost_records, or a RUN_STOP count that differs from what arrived: reading 16). */
bool jp_view_live_exact(const struct jp_engine_view *v);
int jp_render_build(const struct jp_engine_view *v, const struct jp_report_opts *o,
                    struct jp_rendered *out, struct jp_ctl_excerpt_key **keys, uint32_t *nkeys);


#endif
