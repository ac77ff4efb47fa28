/* The timeline of a run: what top and the HTML report draw of a run over time. At most
 * JP_TIMELINE_POINTS points, each covering one stretch of the run; the daemon marks time in the
 * stream it takes (JP_REC_TIME), and at each mark what came since the last one (CPU samples by
 * state; memory bytes and allocations made, and the most bytes live at once, so no spike is
 * lost) joins the point of the mark's time. A mark past the last point merges neighbours in
 * pairs and doubles the stretch, as often as it takes, so a run of any length fits in the same
 * points. The points are made at the first mark, within the run's budget; the figures they
 * sum are kept by the accounting rules anyway (tl_live_max by mem_live_add), so an event costs
 * the timeline one compare. A capture keeps the marks: a replay draws the same timeline.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* The first stretch: 10 ms, so a short run has detail; a run of more than 5.12 s doubles it. */
#define TL_FIRST_STRETCH_NS 10000000u

static void merge_pairs(struct jp_engine *e)
{
    for (uint32_t i = 0; i < JP_TIMELINE_POINTS / 2u; i++) {
        struct jp_timeline_point *a = &e->tl[2u * i], *b = &e->tl[2u * i + 1u], m;
        for (unsigned s = 0; s < JP_STATE_LIMIT; s++)
            m.samples[s] = a->samples[s] + b->samples[s];
        m.live_max = a->live_max > b->live_max ? a->live_max : b->live_max;
        m.allocated = a->allocated + b->allocated;
        m.count = a->count + b->count;
        e->tl[i] = m;
    }
    memset(&e->tl[JP_TIMELINE_POINTS / 2u], 0,
           JP_TIMELINE_POINTS / 2u * sizeof *e->tl);
    e->tl_n = (e->tl_n + 1u) / 2u;
    e->tl_stretch_ns *= 2u;
}

int jpe_on_time(struct jp_engine *e, const struct jp_rec_time *r)
{
    if (!e->tl) {
        uint64_t bytes = JP_TIMELINE_POINTS * (uint64_t)sizeof *e->tl;
        if (jpe_budget_hold(e, bytes) < 0)
            return 0; /* no timeline for this run; everything else goes on */
        if (!(e->tl = calloc(JP_TIMELINE_POINTS, sizeof *e->tl)))
            return -ENOMEM;
        e->used += bytes;
        e->tl_stretch_ns = TL_FIRST_STRETCH_NS;
        e->tl_live_max = e->live_bytes;
    }
    /* A mark from a capture may say any time: past what doubling reaches, the last point. */
    while (r->ns / e->tl_stretch_ns >= JP_TIMELINE_POINTS && e->tl_stretch_ns <= UINT64_MAX / 2u)
        merge_pairs(e);
    uint64_t q = r->ns / e->tl_stretch_ns;
    uint32_t i = q < JP_TIMELINE_POINTS ? (uint32_t)q : JP_TIMELINE_POINTS - 1u;
    struct jp_timeline_point *p = &e->tl[i];
    for (unsigned s = 0; s < JP_STATE_LIMIT; s++) {
        p->samples[s] += e->state_samples[s] - e->tl_samples[s];
        e->tl_samples[s] = e->state_samples[s];
    }
    if (e->tl_live_max > p->live_max)
        p->live_max = e->tl_live_max;
    p->allocated += e->allocated_bytes - e->tl_allocated;
    p->count += e->allocation_count - e->tl_count;
    e->tl_allocated = e->allocated_bytes;
    e->tl_count = e->allocation_count;
    e->tl_live_max = e->live_bytes;
    if (i + 1u > e->tl_n)
        e->tl_n = i + 1u;
    return 0;
}
