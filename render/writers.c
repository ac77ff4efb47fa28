/* The writers library: prints a built report and never builds one (no engine, no report
 * builder: the agent links it alone). This file: the facts both writers share (names,
 * suggestion texts, the one list of totals; declared in render/writers.h), the TOON writer
 * (the `profile:` object, valid TOON per ../shared/design/TOON_NOTES.md, field names and order
 * in render/REPORT.md) and jp_report_write. The human writer is render/human.c. Both walk the
 * same struct jp_report, in the same order, with the same values.
 *
 * Percentages: TOON carries them as numbers in canonical TOON form (shortest round-trip:
 * 34.19, 12.5, 50), computed from integers in hundredths of a percent; the human text prints
 * the same hundredths with two fixed decimals and a % sign.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/toon.h"
#include "report.h"
#include "writers.h"

static void indent(struct jp_buf *s, unsigned level)
{
    for (unsigned i = 0; i < level; i++)
        jp_buf_put(s, "  ", 2);
}

static void key(struct jp_buf *s, unsigned level, const char *k)
{
    indent(s, level);
    jp_buf_puts(s, k);
    jp_buf_put(s, ": ", 2);
}

static void kv_u64(struct jp_buf *s, unsigned level, const char *k, uint64_t v)
{
    key(s, level, k);
    jp_buf_printf(s, "%" PRIu64 "\n", v);
}

static void kv_opt(struct jp_buf *s, unsigned level, const char *k, bool avail, uint64_t v)
{
    if (avail) {
        kv_u64(s, level, k, v);
        return;
    }
    key(s, level, k);
    jp_buf_puts(s, "unavailable\n");
}

static void kv_str(struct jp_buf *s, unsigned level, const char *k, const char *v, size_t n)
{
    key(s, level, k);
    jp_toon_str(s, v, n);
    jp_buf_put(s, "\n", 1);
}

static void kv_word(struct jp_buf *s, unsigned level, const char *k, const char *v)
{
    kv_str(s, level, k, v, strlen(v));
}

/* hundredths as a canonical TOON number: 3419 -> 34.19, 1250 -> 12.5, 5000 -> 50 */
static void put_hundredths(struct jp_buf *s, uint64_t h)
{
    uint64_t ip = h / 100u, fp = h % 100u;
    if (!fp)
        jp_buf_printf(s, "%" PRIu64, ip);
    else if (fp % 10u == 0)
        jp_buf_printf(s, "%" PRIu64 ".%" PRIu64, ip, fp / 10u);
    else
        jp_buf_printf(s, "%" PRIu64 ".%02" PRIu64, ip, fp);
}

static void kv_hundredths(struct jp_buf *s, unsigned level, const char *k, bool avail, uint64_t h)
{
    key(s, level, k);
    if (avail)
        put_hundredths(s, h);
    else
        jp_buf_puts(s, "unavailable");
    jp_buf_put(s, "\n", 1);
}

/* ---- shared facts ---------------------------------------------------------------------- */

void jp_wr_qualified(struct jp_buf *s, const struct jp_func *f)
{
    if (!(f->ns_len == 6 && !memcmp(f->ns, "<root>", 6))) {
        jp_buf_put(s, f->ns, f->ns_len);
        jp_buf_put(s, ".", 1);
    }
    jp_buf_put(s, f->fn, f->fn_len);
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
        bool wall = v->have_stop && v->wall_ns;
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
            uint64_t rate = (uint64_t)(((u128)rec * UINT64_C(100000000000) + v->wall_ns / 2u) /
                                       v->wall_ns);
            it[n++] = (struct jp_wr_item){"observed_rate_hz", JP_WR_HUNDREDTHS, rate};
        } else {
            ADD("observed_rate_hz", false, 0);
        }
        ADD("wall_duration_ns", v->have_stop, v->wall_ns);
        ADD("process_cpu_duration_ns", v->have_stop && v->process_cpu_ns != JP_NS_UNAVAILABLE,
            v->process_cpu_ns);
    } else {
        bool live = r->live_exact;
        ADD("allocation_count", true, v->allocation_count);
        ADD("resize_count", true, v->resize_count);
        ADD("allocated_bytes", true, v->allocated_bytes);
        ADD("freed_bytes", live, v->freed_bytes);
        ADD("peak_live_bytes", live, v->peak_bytes);
        ADD("retained_bytes", live, v->live_bytes);
        ADD("live_bytes", live, v->live_bytes);
        ADD("attributed_allocated_bytes", true, v->attributed_allocated);
        ADD("truncated_stacks", true, v->truncated_stacks);
        ADD("wall_duration_ns", v->have_stop, v->wall_ns);
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
#undef ADD
    return n;
}

/* ---- TOON ------------------------------------------------------------------------------ */

/* `frames[d]: q1,q2,...`: chain ci's functions root first, as qualified names (t: scratch). */
static void toon_frames(struct jp_buf *s, struct jp_buf *t, const struct jp_engine_view *v,
                        uint32_t ci, unsigned level)
{
    uint32_t seq[JP_MAX_DEPTH], d = v->chains[ci].depth;
    uint32_t k = d;
    for (uint32_t c = ci + 1u; c && k; c = v->chains[c - 1u].parent)
        seq[--k] = v->chains[c - 1u].func;
    indent(s, level);
    jp_buf_printf(s, "frames[%" PRIu32 "]: ", d);
    for (uint32_t j = 0; j < d; j++) {
        t->len = 0;
        jp_wr_qualified(t, &v->funcs[seq[j]]);
        if (j)
            jp_buf_put(s, ",", 1);
        jp_toon_str(s, t->p ? t->p : "", t->len);
    }
    jp_buf_put(s, "\n", 1);
}

/* A memory entry's creation chains (READINGS.md #18): after the contract's fields, in the shape of
 * the CPU call chains, each with the bytes charged through it, its allocations and the bytes
 * of those still live (`unavailable` where the entry's retained bytes are). */
static void toon_mem_chains(struct jp_buf *s, struct jp_buf *t, const struct jp_report *r,
                            const struct jp_entry *en)
{
    const struct jp_engine_view *v = r->v;
    indent(s, 3);
    if (!en->nchains) {
        jp_buf_puts(s, "chains: []\n");
        return;
    }
    jp_buf_printf(s, "chains[%" PRIu32 "]:\n", en->nchains);
    for (uint32_t i = 0; i < en->nchains; i++) {
        const struct jp_chain *c = &v->chains[en->chain[i]];
        indent(s, 4);
        jp_buf_printf(s, "- allocated_bytes: %" PRIu64 "\n", c->allocated);
        kv_u64(s, 5, "allocation_count", c->count);
        kv_opt(s, 5, "retained_bytes", r->live_exact, c->live);
        toon_frames(s, t, v, en->chain[i], 5);
    }
}

static void toon_entry_detail(struct jp_buf *s, const struct jp_report *r,
                              const struct jp_entry *en)
{
    const struct jp_engine_view *v = r->v;
    const struct jp_func *f = &v->funcs[en->func];
    struct jp_buf t = {0};
    if (en->nsugg) {
        indent(s, 3);
        jp_buf_printf(s, "suggestions[%" PRIu32 "]{rule,text}:\n", en->nsugg);
        for (uint32_t i = 0; i < en->nsugg; i++) {
            indent(s, 4);
            jp_buf_puts(s, jp_wr_rule_names[en->sugg[i]]);
            jp_buf_put(s, ",", 1);
            t.len = 0;
            jp_wr_suggestion_text(&t, r, en, en->sugg[i]);
            jp_toon_str(s, t.p ? t.p : "", t.len);
            jp_buf_put(s, "\n", 1);
        }
    } else {
        indent(s, 3);
        jp_buf_puts(s, en->sugg_unavailable ? "suggestions: unavailable\n" : "suggestions: []\n");
    }
    if (v->mode != JP_MODE_CPU) {
        toon_mem_chains(s, &t, r, en);
        kv_opt(s, 3, "runtime_threads", en->threads > 0, en->threads);
        kv_opt(s, 3, "tasks", en->tasks > 0, en->tasks);
        free(t.p);
        s->failed |= t.failed;
        return;
    }
    const struct jp_source *src = f->source ? &v->sources[f->source] : NULL;
    indent(s, 3);
    if (!en->nhot) {
        jp_buf_puts(s, "hot_lines: []\n");
    } else {
        jp_buf_printf(s, "hot_lines[%" PRIu32 "]{path,line,column,self_samples,code,source_redacted}:\n",
                  en->nhot);
        for (uint32_t i = 0; i < en->nhot; i++) {
            const struct jp_hot *h = &v->hots[en->hot[i]];
            const struct jp_excerpt_ent *x =
                src ? jp_wr_find_excerpt(v, f->source, h->line, h->col) : NULL;
            indent(s, 4);
            if (src) {
                jp_toon_str(s, src->path, src->path_len);
                jp_buf_printf(s, ",%" PRIu32 ",%" PRIu32, h->line, h->col);
            } else {
                jp_buf_puts(s, "unavailable,unavailable,unavailable");
            }
            jp_buf_printf(s, ",%" PRIu64 ",", h->samples);
            if (x && x->text && !(x->flags & JP_EXCERPT_UNAVAILABLE))
                jp_toon_str(s, x->text, x->text_len);
            else
                jp_buf_puts(s, "unavailable");
            jp_buf_puts(s, x && (x->flags & JP_EXCERPT_REDACTED) ? ",true\n" : ",false\n");
        }
    }
    indent(s, 3);
    if (!en->nchains) {
        jp_buf_puts(s, "call_chains: []\n");
    } else {
        jp_buf_printf(s, "call_chains[%" PRIu32 "]:\n", en->nchains);
        for (uint32_t i = 0; i < en->nchains; i++) {
            const struct jp_chain *c = &v->chains[en->chain[i]];
            indent(s, 4);
            jp_buf_printf(s, "- samples: %" PRIu64 "\n", c->samples);
            toon_frames(s, &t, v, en->chain[i], 5);
        }
    }
    kv_opt(s, 3, "runtime_threads", en->threads > 0, en->threads);
    kv_opt(s, 3, "tasks", en->tasks > 0, en->tasks);
    s->failed |= t.failed;
    free(t.p);
}

int jp_write_toon(const struct jp_report *r, char **out, size_t *len)
{
    const struct jp_engine_view *v = r->v;
    bool cpu = v->mode == JP_MODE_CPU;
    struct jp_buf s = {0};
    jp_buf_puts(&s, "profile:\n");
    kv_word(&s, 1, "schema", "jett.profile.v1");
    kv_word(&s, 1, "mode", cpu ? "cpu" : "memory");
    kv_word(&s, 1, "status", jp_status_word(r->status));
    if (r->status != JP_STATUS_COMPLETE)
        kv_word(&s, 1, "partial_reason", r->reason);
    kv_word(&s, 1, "termination", r->termination);
    kv_word(&s, 1, "backend", cpu ? "interpreter_safe_point" : "interpreter_alloc_hooks");
    kv_word(&s, 1, "coverage", cpu ? "jett_runtime_threads" : "jett_heap");
    jp_buf_puts(&s, "  config:\n");
    if (cpu)
        kv_u64(&s, 2, "requested_rate_hz", v->start->rate_hz);
    kv_u64(&s, 2, "threshold_basis_points", r->threshold_bp);
    kv_u64(&s, 2, "limit", r->limit);
    if (cpu)
        kv_u64(&s, 2, "cpu_metadata_budget_bytes", v->start->cpu_budget_bytes);
    else
        kv_u64(&s, 2, "retention_metadata_budget_bytes", v->start->retention_budget_bytes);
    jp_buf_puts(&s, "  totals:\n");
    struct jp_wr_item items[JP_WR_MAX_ITEMS];
    unsigned n = jp_wr_totals(r, items);
    for (unsigned i = 0; i < n; i++) {
        if (items[i].kind == JP_WR_HUNDREDTHS)
            kv_hundredths(&s, 2, items[i].k, true, items[i].v);
        else
            kv_opt(&s, 2, items[i].k, items[i].kind == JP_WR_U64, items[i].v);
    }
    if (!r->emitted) {
        jp_buf_puts(&s, "  bottlenecks: []\n");
        return jp_buf_finish(&s, out, len);
    }
    jp_buf_printf(&s, "  bottlenecks[%" PRIu32 "]:\n", r->emitted);
    for (uint32_t i = 0; i < r->emitted; i++) {
        const struct jp_entry *en = &r->entries[i];
        const struct jp_func *f = &v->funcs[en->func];
        const struct jp_source *src = f->source ? &v->sources[f->source] : NULL;
        jp_buf_printf(&s, "    - rank: %" PRIu32 "\n", i + 1u);
        kv_str(&s, 3, "namespace", f->ns, f->ns_len);
        kv_str(&s, 3, "function", f->fn, f->fn_len);
        if (src)
            kv_str(&s, 3, "path", src->path, src->path_len);
        else
            kv_word(&s, 3, "path", "unavailable");
        kv_opt(&s, 3, "line", src != NULL, f->decl_line);
        uint64_t pct = jp_percent_hundredths(en->impact, r->denominator);
        if (cpu) {
            kv_u64(&s, 3, "inclusive_samples", f->cpu.inclusive);
            kv_u64(&s, 3, "self_samples", f->cpu.self);
            kv_hundredths(&s, 3, "cpu_percent", true, pct);
        } else {
            bool live = r->live_exact;
            kv_u64(&s, 3, "allocation_count", f->mem.count);
            kv_u64(&s, 3, "allocated_bytes", f->mem.allocated);
            kv_hundredths(&s, 3, "allocation_percent", true, pct);
            kv_opt(&s, 3, "freed_bytes", live, f->freed);
            kv_opt(&s, 3, "retained_bytes", live, f->live);
            kv_opt(&s, 3, "live_at_peak_bytes", live, jp_func_live_at_peak(f, v->peak_epoch));
            kv_u64(&s, 3, "resize_count", f->resize_count);
        }
        toon_entry_detail(&s, r, en);
    }
    return jp_buf_finish(&s, out, len);
}

int jp_report_write(const struct jp_report *r, const struct jp_report_opts *o,
                    struct jp_rendered *out)
{
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!o || o->size < sizeof *o)
        return -EINVAL;
    out->status = r->status;
    snprintf(out->reason, sizeof out->reason, "%s", r->reason);
    if (o->outputs & JP_OUT_TOON)
        rc = jp_write_toon(r, &out->toon, &out->toon_len);
    if (rc >= 0 && (o->outputs & JP_OUT_HUMAN))
        rc = jp_write_human(r, o, &out->human, &out->human_len);
    if (rc < 0)
        jp_rendered_free(out);
    return rc < 0 ? rc : 0;
}

void jp_rendered_free(struct jp_rendered *r)
{
    if (!r)
        return;
    free(r->human);
    free(r->toon);
    r->human = r->toon = NULL;
    r->human_len = r->toon_len = 0;
}
