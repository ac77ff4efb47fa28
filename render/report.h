/* The report: built once per run from the engine's read-only view (render/report.c, the
 * report library), printed by the writers (render/toon.c and render/human.c, the writers
 * library, which never builds one), and jp_profile_render for callers without an excerpt round trip
 * (render/profile.c). The engine never includes this header: the arrows go protocol <- engine
 * <- report <- writers <- callers. */
#ifndef JETTPROF_RENDER_REPORT_H
#define JETTPROF_RENDER_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/view.h"
#include "render/rendered.h"

struct jp_buf;

struct jp_report_opts {
    uint32_t size;         /* sizeof(struct jp_report_opts) */
    int32_t threshold_bp;  /* -1: as the run asked (RUN_START) */
    int32_t limit;         /* -1: as the run asked */
    uint32_t ending;       /* JP_END_*: STOP when the stream has its RUN_STOP */
    uint32_t outputs;      /* JP_OUT_HUMAN | JP_OUT_TOON, and JP_OUT_VERBOSE for the human
                              text's full totals block (the writers; building ignores it) */
    uint64_t run_id;       /* the long-lived daemon's id of the run, named in the human text's
                              header; 0: none (private daemon, replay) */
    /* A snapshot (ending JP_END_RUNNING): the records of the run's merged stream it covers, and
     * how long the run had been going (0: not known, as in a replay). */
    uint64_t records_taken;
    uint64_t elapsed_ns;
};


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
    X(STACK_CAPTURE_LIMIT, "stack_capture_limit")                                                 \
    X(IN_PROGRESS, "in_progress")
enum {
#define JP_X(n, s) JP_REASON_BIT_##n,
    JP_REASONS(JP_X)
#undef JP_X
    JP_REASON_COUNT
};
static inline const char *jp_reason_name(unsigned bit)
{
    static const char *const names[] = {
#define JP_X(n, s) s,
        JP_REASONS(JP_X)
#undef JP_X
    };
    return bit < JP_REASON_COUNT ? names[bit] : NULL;
}

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
    uint32_t chain[3], nchains;  /* indices into view->chains, reported order: CPU the
                                  * function's chains by samples; memory the site's creation
                                  * chains by allocated bytes (READINGS.md #18) */
    uint32_t sugg[2], nsugg;     /* JP_RULE_*, ordered by rule id */
    bool sugg_unavailable;       /* source unavailable: suggestions render `unavailable` */
    /* distinct runtime threads / tasks behind the entry's samples (CPU) or creation events
     * (memory); 0 = unavailable (no event carried that identity, or the budget refused) */
    uint32_t threads, tasks;
};

/* A built report. Everything below comes from one jp_report_build, except the status block
 * (status .. record_mismatch) and the suggestions, which jp_report_rebind derives again from
 * the fresh view: they depend on RUN_STOP and on how the run ended, which the daemon learns
 * only after it asked for the excerpts. The writers read the totals from *v at write time. */
struct jp_report {
    const struct jp_engine_view *v; /* what the writers read: &view for a built report */
    struct jp_engine_view view;     /* the builder's copy of the view it was built (rebound) on */
    uint32_t ending;
    uint32_t threshold_bp, limit;
    uint32_t status;
    uint32_t reasons;       /* 1 << JP_REASON_BIT_* */
    const char *reason;     /* the highest-priority reason, "" when complete */
    const char *termination;
    bool detail_partial;
    bool live_exact; /* memory: freed/live/peak/retained are exact (jp_view_live_exact) */
    uint64_t record_mismatch; /* |RUN_STOP.record_count - records received|, 0 without stop */
    bool snapshot;            /* ending JP_END_RUNNING: a profile of a run in flight */
    uint64_t records_taken, elapsed_ns; /* a snapshot's (jp_report_opts) */
    uint64_t denominator;
    struct jp_entry *entries; /* eligible, in order; the first `emitted` are reported */
    uint32_t eligible, emitted;
};

int jp_func_cmp(const struct jp_engine_view *v, uint32_t a, uint32_t b);
/* Fills seq[] (room for JP_MAX_DEPTH) with a chain's functions root first; returns how many. */
uint32_t jp_chain_funcs(const struct jp_engine_view *v, uint32_t chain, uint32_t *seq);
/* Two chains element by element by the function keys, a shorter prefix first (READINGS.md #5). */
int jp_chain_lex_cmp(const struct jp_engine_view *v, uint32_t a, uint32_t b);

/* impact / den as a percentage in hundredths, rounded half away from zero (READINGS.md #13). */
static inline uint64_t jp_percent_hundredths(uint64_t impact, uint64_t den)
{
    __extension__ typedef unsigned __int128 u128;
    if (!den)
        return 0;
    u128 num = (u128)impact * 10000u;
    u128 q = num / den, r = num % den;
    if (r * 2u >= den)
        q++;
    return (uint64_t)q;
}

/* ---- the report library (render/report.c) ---- */

/* Builds the report from a view (jp_engine_view): status and reasons, thresholds on exact
 * counts, ordering, limit, hot lines, chains, execution identity counts, suggestions. The
 * report keeps a copy of *v (not the pointer); the arrays it points to stay the engine's.
 * Deterministic: same records + same opts => same report. 0 with *out to jp_report_free;
 * -EINVAL (bad opts, a threshold or limit out of range), -ENOMEM (nothing to free). */
int jp_report_build(const struct jp_engine_view *v, const struct jp_report_opts *o,
                    struct jp_report **out);
/* The source lines the report shows as hot lines, for which the daemon asks the runtime for
 * redacted excerpts; feed the answers to the engine as JP_REC_EXCERPT records, then take a
 * fresh view and jp_report_rebind. *keys is malloc'ed (NULL when none); free() it. 0,
 * -ENOMEM. */
int jp_report_excerpt_keys(const struct jp_report *r, struct jp_ctl_excerpt_key **keys,
                           uint32_t *count);
/* Points the report at a fresh view of the same run and derives its status block and its
 * suggestions again for `ending`. Only for records that change no ranked count: EXCERPT
 * records and RUN_STOP (what the daemon feeds after asking for excerpts). Never allocates. */
void jp_report_rebind(struct jp_report *r, const struct jp_engine_view *v, uint32_t ending);
/* The status block of r from view v and the run's ending: status, reason, reasons,
 * termination, record_mismatch, live_exact and detail_partial (status.c, in the writers'
 * archive so the collector-failure profile uses it too). */
void jp_report_status(const struct jp_engine_view *v, uint32_t ending, struct jp_report *r);
void jp_report_free(struct jp_report *r);

/* For other views of a run (`jettprofd top`), the report's own rules: a function's qualified
 * name as the writers give it (raw bytes: make them safe for where they go), and bytes for a
 * person as the human text writes them (`1023 B`, `1.5 MiB`). */
void jp_report_func_name(struct jp_buf *s, const struct jp_func *f);
void jp_report_bytes(struct jp_buf *s, uint64_t b);

/* ---- the writers library (render/toon.c, human.c, dispatch.c); it never builds a report ---- */

/* *out is malloc'ed and NUL-terminated at *len. 0, or -ENOMEM when an allocation failed
 * (nothing is left to free). The human text reads o->outputs (JP_OUT_VERBOSE) and o->run_id;
 * its layout is runtime/OUTPUT.md's. */
int jp_write_toon(const struct jp_report *r, char **out, size_t *len);
int jp_write_human(const struct jp_report *r, const struct jp_report_opts *o, char **out,
                   size_t *len);
/* Both documents o->outputs asks for (JP_OUT_*), with the report's status and reason. 0,
 * -EINVAL (o NULL or smaller than this library's), or -ENOMEM (out then holds nothing to
 * free). */
int jp_report_write(const struct jp_report *r, const struct jp_report_opts *o,
                    struct jp_rendered *out);

/* ---- build and write at once (render/profile.c) ---- */

/* For callers with no excerpt round trip (replay, tests, benches): view, build, write, free.
 * 0; -EINVAL (bad opts), -ENODATA (no RUN_START), -ENOMEM (*out then holds nothing to free). */
int jp_profile_render(struct jp_engine *e, const struct jp_report_opts *o,
                      struct jp_rendered *out);


#endif
