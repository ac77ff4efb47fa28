/* The facts both writers of the writers library share, declared in render/writers.h: the
 * qualified names, the excerpt lookup, the rule names and fixed suggestion texts, and the one
 * list of totals. The writers library prints a built report and never builds one (no engine,
 * no report builder: the agent links it alone); its TOON writer is render/toon.c, its human
 * writer render/human.c and render/dispatch.c picks between them. Both writers walk the same
 * struct jp_report, in the same order, with the same values, taking from here what they must
 * not word differently.
 */
#include <inttypes.h>
#include <string.h>

#include "common/buf.h"
#include "report.h"
#include "writers.h"

void jp_wr_qualified(struct jp_buf *s, const struct jp_func *f)
{
    if (!(f->ns_len == 6 && !memcmp(f->ns, "<root>", 6))) {
        jp_buf_put(s, f->ns, f->ns_len);
        jp_buf_put(s, ".", 1);
    }
    jp_buf_put(s, f->fn, f->fn_len);
}

void jp_report_func_name(struct jp_buf *s, const struct jp_func *f)
{
    jp_wr_qualified(s, f);
}

static uint64_t recorded_samples(const struct jp_engine_view *v)
{
    uint64_t n = v->counters->waiting_ticks + v->counters->runtime_ticks;
    for (unsigned i = 0; i < JP_STATE_LIMIT; i++)
        n += v->state_samples[i];
    return n;
}

const struct jp_excerpt_ent *jp_wr_find_excerpt(const struct jp_engine_view *v, uint32_t src,
                                                uint32_t line, uint32_t col)
{
    for (uint32_t i = 0; i < v->nexcerpts; i++)
        if (v->excerpts[i].source == src && v->excerpts[i].line == line &&
            v->excerpts[i].col == col)
            return &v->excerpts[i];
    return NULL;
}

const char *const jp_wr_rule_names[JP_RULE_COUNT] = {
#define JP_X(n) #n,
    JP_RULES(JP_X)
#undef JP_X
};

void jp_wr_suggestion_text(struct jp_buf *s, const struct jp_report *r, const struct jp_entry *en,
                           uint32_t rule)
{
    const struct jp_engine_view *v = r->v;
    const struct jp_func *f = &v->funcs[en->func];
    const struct jp_source *src = &v->sources[f->source];
    switch (rule) {
    case JP_RULE_CPU_CALLEE_DOMINATED:
        jp_buf_puts(s, "Inspect the dominant reported call chain through ");
        jp_wr_qualified(s, f);
        jp_buf_puts(s, "; its callees account for more than half of its samples.");
        break;
    case JP_RULE_CPU_HIGH_SELF:
        jp_buf_puts(s, "Inspect the reported hot lines in ");
        jp_wr_qualified(s, f);
        jp_buf_puts(s, "; self work accounts for at least half of its samples.");
        break;
    case JP_RULE_MEM_ALLOCATION_PRESSURE:
        jp_buf_puts(s, "Reduce, reuse, or batch allocations in ");
        jp_wr_qualified(s, f);
        jp_buf_puts(s, " at ");
        jp_buf_put(s, src->path, src->path_len);
        jp_buf_printf(s, ":%" PRIu32 "; it allocated %" PRIu64 " bytes in %" PRIu64 " allocations.",
                  f->decl_line, f->mem.allocated, f->mem.count);
        break;
    case JP_RULE_MEM_RETAINED:
        jp_buf_puts(s, "Review the lifetime of allocations from ");
        jp_wr_qualified(s, f);
        jp_buf_puts(s, " at ");
        jp_buf_put(s, src->path, src->path_len);
        jp_buf_printf(s, ":%" PRIu32 "; %" PRIu64 " bytes were still live at the end of the run.",
                  f->decl_line, f->live);
        break;
    }
}

unsigned jp_wr_totals(const struct jp_report *r, struct jp_wr_item *it)
{
    const struct jp_engine_view *v = r->v;
    const struct jp_rec_counters *c = v->counters;
    unsigned n = 0;
#define ADD(key, avail, val)                                                                      \
    it[n++] = (struct jp_wr_item){(key), (avail) ? JP_WR_U64 : JP_WR_UNAVAILABLE, (val)}
    if (v->mode == JP_MODE_CPU) {
        uint64_t rec = recorded_samples(v);
        /* a snapshot's duration is the run's so far, when the daemon knows it */
        uint64_t wall_ns = r->snapshot ? r->elapsed_ns : v->have_stop ? v->wall_ns : 0;
        bool wall = wall_ns != 0;
        ADD("requested_ticks", true, c->requested_ticks);
        ADD("recorded_samples", true, rec);
        ADD("attributed_samples", true, v->state_samples[JP_STATE_JETT]);
        ADD("runtime_samples", true, v->state_samples[JP_STATE_RUNTIME] + c->runtime_ticks);
        ADD("waiting_samples", true, v->state_samples[JP_STATE_WAITING] + c->waiting_ticks);
        ADD("unavailable_samples", true, v->state_samples[JP_STATE_UNAVAILABLE]);
        ADD("coalesced_ticks", true, c->coalesced_ticks);
        ADD("dropped_ticks", true, c->dropped_ticks);
        ADD("attributed_stacks", true, v->attributed_stacks);
        ADD("unavailable_stacks", true, v->state_samples[JP_STATE_UNAVAILABLE]);
        ADD("truncated_stacks", true, v->truncated_stacks);
        ADD("requested_rate_hz", true, v->start->rate_hz);
        if (wall) {
            /* samples per second in hundredths, rounded half up: rec * 1e9 * 100 / wall */
            __extension__ typedef unsigned __int128 u128;
            uint64_t rate = (uint64_t)(((u128)rec * UINT64_C(100000000000) + wall_ns / 2u) /
                                       wall_ns);
            it[n++] = (struct jp_wr_item){"observed_rate_hz", JP_WR_HUNDREDTHS, rate};
        } else {
            ADD("observed_rate_hz", false, 0);
        }
        ADD("wall_duration_ns", wall || (v->have_stop && !r->snapshot), wall_ns);
        ADD("process_cpu_duration_ns",
            v->have_stop && !r->snapshot && v->process_cpu_ns != JP_NS_UNAVAILABLE,
            v->process_cpu_ns);
    } else {
        bool live = r->live_exact;
        ADD("allocation_count", true, v->allocation_count);
        ADD("resize_count", true, v->resize_count);
        ADD("allocated_bytes", true, v->allocated_bytes);
        ADD("freed_bytes", live, v->freed_bytes);
        ADD("peak_live_bytes", live, v->peak_bytes);
        ADD("retained_bytes", live && !r->snapshot, v->live_bytes); /* live at the end */
        ADD("live_bytes", live, v->live_bytes);
        ADD("attributed_allocated_bytes", true, v->attributed_allocated);
        ADD("truncated_stacks", true, v->truncated_stacks);
        ADD("wall_duration_ns", r->snapshot ? r->elapsed_ns > 0 : v->have_stop,
            r->snapshot ? r->elapsed_ns : v->wall_ns);
    }
    ADD("lost_records", true, c->lost_records);
    ADD("producer_wait_ns", true, c->producer_wait_ns); /* ns the program waited for room */
    ADD("record_count_mismatch", v->have_stop, r->record_mismatch);
    ADD("protocol_violations", true, v->violations);
    ADD("eligible_bottlenecks", true, r->eligible);
    ADD("emitted_bottlenecks", true, r->emitted);
    ADD("truncated_bottlenecks", true, r->eligible - r->emitted);
    /* appended after the contract's fields: distinct runtime threads over the producer's
     * events (CPU samples; memory allocation events) */
    ADD("runtime_threads", v->threads_exact && v->runtime_threads, v->runtime_threads);
    if (r->snapshot) /* only a snapshot says how much of the run's stream it covers */
        ADD("records_taken", true, r->records_taken);
#undef ADD
    return n;
}
