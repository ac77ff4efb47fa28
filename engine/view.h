/* The engine's read-only view of one run: what the report builder (render/report.c) and the
 * writers (render/toon.c, render/human.c) read.
 * The engine fills it (engine/view.c) and never calls the report; the report never
 * sees the engine's state (engine_internal.h is private to engine/).
 *
 * Ownership: every array below belongs to the engine and is accounted against the run's
 * metadata budget (CPU mode: cpu_budget_bytes; memory mode: retention_budget_bytes, which
 * covers the definitions, the per-site table and the live-allocation table alike). A view is
 * valid until the next record is fed or the engine is freed; readers only read it.
 */
#ifndef JETTPROF_ENGINE_VIEW_H
#define JETTPROF_ENGINE_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

#define JP_FUNC_NONE UINT32_MAX

/* One function identity (READINGS.md #1), also the memory "site". */
#define JP_FUNC_HOT_WAYS 8u /* a power of two */
struct jp_func {
    const char *ns, *fn;
    uint16_t ns_len, fn_len;
    uint8_t kind;      /* JP_FRAME_* */
    uint8_t origin;    /* JP_ORIGIN_*, JP_ORIGIN_NONE: source unavailable */
    uint32_t source;   /* canonical source index, 0 = unavailable */
    uint32_t decl_start, decl_end, decl_line;
    uint32_t uniq;     /* unavailable-symbol frames: their frame id, so two never merge */
    /* The two counters whose meaning is the run's mode: read the member the mode names. */
    union {
        struct { uint64_t inclusive, self; } cpu;   /* CPU: samples */
        struct { uint64_t allocated, count; } mem;  /* memory: bytes (initial + growth
                                                     * charged here), allocations */
    };
    uint64_t resize_count;
    union {
        /* Memory mode: mem.allocated, mem.count, live, snap and stamp are the sums of the
         * site's chains (struct jp_chain), settled when a view is taken; freed and
         * resize_count are counted per event. */
        struct {
            uint64_t freed, live; /* bytes of allocations created here */
            uint64_t snap, stamp; /* live-at-peak snapshot, see engine_internal.h */
        };
        /* CPU mode, the engine's own: hot-line index + 1 of the line of this function that
         * last took a sample at way (line ^ col) % JP_FUNC_HOT_WAYS, 0 none (cpu.c). A
         * function's sampled statements are few and mostly on nearby lines, so a sample
         * finds its line here without hashing. */
        uint32_t hot_way[JP_FUNC_HOT_WAYS];
    };
};

/* One distinct execution identity seen with one detail key: CPU mode, the call chain of a
 * sample's leaf node (every function on it saw the identity); memory mode, the creation site
 * (function index) of an allocation. JP_ID_UNAVAILABLE where the EXEC record had none. */
struct jp_exec_tuple {
    uint32_t key, thread, task;
};

struct jp_source {
    const char *path;
    uint16_t path_len;
    uint8_t origin;
    uint32_t first_id; /* the first source id defined with this identity (excerpt keys) */
};

/* A call chain: the function sequence root..func, interned as (parent chain, func).
 * CPU mode: `samples`, the samples counted for func through this chain (settled per view).
 * Memory mode: the chain is a complete root-to-site creation chain (func is the site, the
 * event's leaf) and carries the site's figures split by chain, so the chains of a site sum
 * exactly to its jp_func figures (mem.allocated, mem.count, live, live at peak). */
struct jp_chain {
    uint32_t parent; /* chain index + 1, 0 for a root */
    uint32_t func;
    uint32_t depth;
    uint32_t live_count; /* memory: allocations created with this chain still live (a live set
                          * fits the retention budget, far below 2^32); 0 in CPU mode */
    union {
        struct {          /* CPU, settled from the node counts (jpe_cpu_settle) */
            uint64_t samples; /* jett samples whose stack passes through this chain's function
                               * at its root-most occurrence (READINGS.md #4):
                               * the subtree's */
            uint64_t leaf;    /* jett samples whose stack is exactly this chain */
        };
        struct {          /* memory */
            uint64_t allocated;   /* bytes charged to allocations created with this chain
                                   * (initial + growth, as jp_func.mem.allocated: growth is
                                   * charged to the resizing event's chain) */
            uint64_t count;       /* allocations created with this chain */
            uint64_t live;        /* bytes of those still live (retained at the end of the run) */
            uint64_t snap, stamp; /* live-at-peak snapshot, same scheme as jp_func */
        };
    };
};

struct jp_hot {
    uint32_t func, line, col, reserved;
    uint64_t samples;
};

struct jp_excerpt_ent {
    uint32_t source, line, col, flags; /* source: canonical index */
    char *text;
    uint32_t text_len;
};

/* The run over time (engine/timeline.c): at most JP_TIMELINE_POINTS points, point i covering
 * [i * stretch_ns, (i + 1) * stretch_ns) of the run as the daemon's time marks placed its
 * records; when the run outgrows them, neighbours merge and the stretch doubles. */
#define JP_TIMELINE_POINTS 512u
struct jp_timeline_point {
    uint64_t samples[JP_STATE_LIMIT]; /* CPU: samples by state */
    uint64_t live_max;                /* memory: the most bytes live at once in the stretch */
    uint64_t allocated, count;        /* memory: bytes and allocations made in it */
};

struct jp_engine_view {
    uint32_t mode;
    const struct jp_timeline_point *timeline; /* timeline_n points (NULL: no mark yet) */
    uint32_t timeline_n;
    uint64_t timeline_stretch_ns;
    const struct jp_rec_run_start *start;
    bool have_stop;
    uint32_t termination;
    uint64_t wall_ns, process_cpu_ns;
    uint64_t stop_record_count, records_counted;
    const struct jp_rec_counters *counters;
    uint64_t violations;
    uint64_t producer_records; /* samples and allocation events accepted */
    bool detail_stopped;       /* a definition/detail table growth was refused */
    bool live_exact;           /* memory: exact live tracking still holds */
    uint64_t truncated_stacks;

    /* CPU */
    uint64_t state_samples[JP_STATE_LIMIT];
    uint64_t attributed_stacks; /* jett samples whose stack reached function detail */

    /* memory */
    uint64_t allocation_count, resize_count, allocated_bytes, freed_bytes, live_bytes, peak_bytes;
    uint64_t live_count; /* allocations live now (retained at the end), while tracking is exact */
    uint64_t attributed_allocated; /* denominator: bytes charged to a site */
    uint64_t peak_epoch;

    const struct jp_func *funcs; uint32_t nfuncs;
    const struct jp_source *sources; uint32_t nsources; /* index 0 unused */
    const struct jp_chain *chains; uint32_t nchains;
    const struct jp_hot *hots; uint32_t nhots;
    const struct jp_excerpt_ent *excerpts; uint32_t nexcerpts;

    /* execution identity (run-local attribution, reported as counts only) */
    const struct jp_exec_tuple *exec; uint32_t nexec;
    bool exec_exact;          /* every identity tuple was kept (no budget refusal) */
    uint32_t runtime_threads; /* distinct runtime thread ids over the producer's events */
    bool threads_exact;
};

/* Fills *v from the engine, after settling the CPU self, inclusive and chain counts from the
 * node counts (jpe_cpu_settle) and the memory sites' figures from their chains (jpe_mem_settle),
 * which is why the engine is not const. 0, or -ENODATA without RUN_START
 * (no mode, nothing to report). */
int jp_engine_view(struct jp_engine *e, struct jp_engine_view *v);
/* The function table slot holding function index func (UINT32_MAX: none), so tests can show
 * that two seeds lay the tables out differently. */
uint32_t jp_engine_func_slot(const struct jp_engine *e, uint32_t func);

/* Live bytes of a site at the global peak (see the epoch scheme in engine_internal.h). */
static inline uint64_t jp_func_live_at_peak(const struct jp_func *f, uint64_t epoch)
{
    return f->stamp == epoch ? f->snap : f->live;
}

/* Live bytes of a creation chain's allocations at the global peak (same scheme). */
static inline uint64_t jp_chain_live_at_peak(const struct jp_chain *c, uint64_t epoch)
{
    return c->stamp == epoch ? c->snap : c->live;
}

/* |RUN_STOP.record_count - records received|; 0 without RUN_STOP. */
static inline uint64_t jp_view_record_mismatch(const struct jp_engine_view *v)
{
    if (!v->have_stop)
        return 0;
    return v->stop_record_count > v->records_counted ? v->stop_record_count - v->records_counted
                                                     : v->records_counted - v->stop_record_count;
}

/* Memory mode: whether freed, live, peak, retained and live-at-peak bytes are exact: the live
 * table held (no retention-budget refusal) and no event was lost on the way (COUNTERS
 * lost_records, or a RUN_STOP count that differs from what arrived: READINGS.md #16). */
static inline bool jp_view_live_exact(const struct jp_engine_view *v)
{
    return v->mode == JP_MODE_MEMORY && v->live_exact && !v->counters->lost_records &&
           !jp_view_record_mismatch(v);
}

#endif
