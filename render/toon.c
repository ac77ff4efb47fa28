/* The TOON writer: the `profile:` object of a built report, valid TOON, its field names and
 * order in render/REPORT.md; the names, suggestion texts and totals come from render/writers.h,
 * as the human writer's do (render/human.c).
 *
 * Percentages: TOON carries them as numbers in canonical TOON form (shortest round-trip:
 * 34.19, 12.5, 50), computed from integers in hundredths of a percent; the human text prints
 * the same hundredths with two fixed decimals and a % sign.
 */
#include <inttypes.h>
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
        kv_opt(s, 5, "retained_bytes", r->live_exact && !r->snapshot, c->live);
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
    char backend[48];
    snprintf(backend, sizeof backend, "%s_%s", jp_backend_name(v->start->backend),
             cpu ? "safe_point" : "alloc_hooks");
    kv_word(&s, 1, "backend", backend);
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
            kv_opt(&s, 3, "retained_bytes", live && !r->snapshot, f->live);
            kv_opt(&s, 3, "live_at_peak_bytes", live, jp_func_live_at_peak(f, v->peak_epoch));
            kv_u64(&s, 3, "resize_count", f->resize_count);
        }
        toon_entry_detail(&s, r, en);
    }
    return jp_buf_finish(&s, out, len);
}
