/* The read-only view (view.h) and the run's totals (jp_engine_summary).
 */
#include <errno.h>
#include <string.h>

#include "engine_internal.h"

/* ---- views for render/ and callers ----------------------------------------------------- */

static void fill_view(const struct jp_engine *e, struct jp_engine_view *v)
{
    memset(v, 0, sizeof *v);
    v->mode = e->mode;
    v->start = e->started ? &e->start : NULL;
    v->have_stop = e->have_stop;
    v->termination = e->termination;
    v->wall_ns = e->wall_ns;
    v->process_cpu_ns = e->process_cpu_ns;
    v->stop_record_count = e->stop_record_count;
    v->records_counted = e->records_counted;
    v->counters = &e->counters;
    v->violations = e->violations;
    v->producer_records = e->producer_records;
    v->detail_stopped = e->detail_stopped;
    v->live_exact = e->live_exact;
    v->truncated_stacks = e->truncated_stacks;
    memcpy(v->state_samples, e->state_samples, sizeof v->state_samples);
    v->attributed_stacks = e->attributed_stacks;
    v->allocation_count = e->allocation_count;
    v->resize_count = e->resize_count;
    v->allocated_bytes = e->allocated_bytes;
    v->freed_bytes = e->freed_bytes;
    v->live_bytes = e->live_bytes;
    v->live_count = e->live_count;
    v->peak_bytes = e->peak_bytes;
    v->attributed_allocated = e->attributed_allocated;
    v->peak_epoch = e->peak_epoch;
    v->funcs = e->funcs; v->nfuncs = e->nfuncs;
    v->sources = e->sources; v->nsources = e->nsources;
    v->chains = e->chains; v->nchains = e->nchains;
    v->hots = e->hots; v->nhots = e->nhots;
    v->excerpts = e->excerpts; v->nexcerpts = e->nexcerpts;
    v->exec = e->exec_tuples; v->nexec = e->nexec;
    v->exec_exact = !e->exec_lost;
    v->runtime_threads = e->nthreads;
    v->threads_exact = !e->threads_lost;
    v->timeline = e->tl;
    v->timeline_n = e->tl_n;
    v->timeline_stretch_ns = e->tl_stretch_ns;
}

int jp_engine_view(struct jp_engine *e, struct jp_engine_view *v)
{
    if (!e->started) {
        memset(v, 0, sizeof *v);
        return -ENODATA;
    }
    jpe_cpu_settle(e);
    jpe_mem_settle(e);
    fill_view(e, v);
    return 0;
}

const struct jp_source *jp_engine_sources(const struct jp_engine *e, uint32_t *n)
{
    *n = e->started ? e->nsources : 0;
    return e->started ? e->sources : NULL;
}

int jp_engine_summary(const struct jp_engine *e, struct jp_engine_summary *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    if (!e->started)
        return -ENODATA;
    struct jp_engine_view v;
    fill_view(e, &v); /* for jp_view_live_exact; the totals need no settled counts */
    out->mode = e->mode;
    out->termination = e->have_stop ? e->termination : JP_TERM_NONE;
    out->records = e->records_counted;
    out->violations = e->violations;
    if (e->mode == JP_MODE_CPU) {
        uint64_t extra = e->counters.waiting_ticks + e->counters.runtime_ticks;
        out->requested_ticks = e->counters.requested_ticks;
        for (unsigned s = 0; s < JP_STATE_LIMIT; s++)
            out->recorded_samples += e->state_samples[s];
        out->recorded_samples += extra;
        out->attributed_samples = e->state_samples[JP_STATE_JETT];
        out->live_exact = 1;
    } else {
        out->allocation_count = e->allocation_count;
        out->resize_count = e->resize_count;
        out->allocated_bytes = e->allocated_bytes;
        out->live_exact = jp_view_live_exact(&v);
        if (out->live_exact) {
            out->freed_bytes = e->freed_bytes;
            out->peak_live_bytes = e->peak_bytes;
            out->retained_bytes = e->live_bytes;
        }
    }
    return 0;
}
