/* The stacks every export writes, read from the engine's aggregates (export.h), and the frame
 * facts the formats share.
 *
 * CPU stacks are valued by the engine's per-chain leaf counts (jp_chain.leaf: the samples
 * whose stack is exactly that chain, recursion included), so every stack is exported whole and
 * exact; the values add up to every jett sample whose stack the budget kept.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"

static const char *const format_names[] = {
#define JP_X(n, w) w,
    JP_EXPORT_FORMATS(JP_X)
#undef JP_X
};
static const struct {
    const char *word, *unit;
    uint32_t mode;
} values[] = {
#define JP_X(n, w, m, u) {w, u, m},
    JP_EXPORT_VALUES(JP_X)
#undef JP_X
};

const char *jp_export_format_name(uint32_t format)
{
    return format < JP_EXPORT_FORMAT_COUNT ? format_names[format] : NULL;
}

int jp_export_format_parse(const char *word, uint32_t *format)
{
    for (uint32_t i = 0; i < JP_EXPORT_FORMAT_COUNT; i++)
        if (!strcmp(word, format_names[i])) {
            *format = i;
            return 0;
        }
    return -EINVAL;
}

const char *jp_export_value_name(uint32_t value)
{
    return value < JP_XVAL_COUNT ? values[value].word : NULL;
}

int jp_export_value_parse(const char *word, uint32_t *value)
{
    for (uint32_t i = 0; i < JP_XVAL_COUNT; i++)
        if (!strcmp(word, values[i].word)) {
            *value = i;
            return 0;
        }
    return -EINVAL;
}

const char *jpx_value_unit(uint32_t value)
{
    return value < JP_XVAL_COUNT ? values[value].unit : "";
}

uint32_t jpx_stack_frames(const struct jpx_prof *p, const struct jpx_stack *s, uint32_t *seq)
{
    if (s->chain != JPX_STACK_UNATTRIBUTED)
        return jp_chain_funcs(p->v, s->chain, seq);
    seq[0] = p->v->nfuncs;
    return 1;
}

const char *jpx_frame_path(const struct jp_engine_view *v, const struct jp_func *f, uint16_t *len)
{
    if (!f->source || f->source >= v->nsources)
        return NULL;
    *len = v->sources[f->source].path_len;
    return v->sources[f->source].path;
}

/* A counted value's slot in a base (export.h), or -1 for a level value. */
static int base_slot(uint32_t value)
{
    return value == JP_XVAL_SAMPLES || value == JP_XVAL_ALLOC_COUNT ? 0
           : value == JP_XVAL_ALLOC_BYTES                          ? 1
                                                                    : -1;
}

/* The value of every chain (vals[chain]) and the report's total for the value. Only called
 * with a value of the run's mode. */
static int chain_values(const struct jp_engine_view *v, uint32_t value, uint64_t *vals,
                        uint64_t *total)
{
    if (value == JP_XVAL_SAMPLES) {
        for (uint32_t c = 0; c < v->nchains; c++)
            vals[c] = v->chains[c].leaf;
        *total = v->state_samples[JP_STATE_JETT];
        return 0;
    }
    /* memory: every creation chain holds its own figures (struct jp_chain) */
    for (uint32_t c = 0; c < v->nchains; c++) {
        const struct jp_chain *ch = &v->chains[c];
        vals[c] = value == JP_XVAL_ALLOC_BYTES      ? ch->allocated
                  : value == JP_XVAL_ALLOC_COUNT    ? ch->count
                  : value == JP_XVAL_RETAINED_BYTES || value == JP_XVAL_LIVE_BYTES ? ch->live
                  : value == JP_XVAL_RETAINED_COUNT ? ch->live_count
                                                    : jp_chain_live_at_peak(ch, v->peak_epoch);
    }
    *total = value == JP_XVAL_ALLOC_BYTES      ? v->allocated_bytes
             : value == JP_XVAL_ALLOC_COUNT    ? v->allocation_count
             : value == JP_XVAL_RETAINED_BYTES || value == JP_XVAL_LIVE_BYTES ? v->live_bytes
             : value == JP_XVAL_RETAINED_COUNT ? v->live_count
                                               : v->peak_bytes;
    return 0;
}

static int stack_order(const void *a, const void *b, void *v)
{
    return jp_chain_lex_cmp(v, ((const struct jpx_stack *)a)->chain,
                            ((const struct jpx_stack *)b)->chain);
}

int jpx_prof_build(const struct jp_report *r, uint32_t value, struct jpx_prof *p)
{
    return jpx_prof_since(r, value, NULL, p);
}

int jp_export_base_take(struct jp_export_base *b, const struct jp_report *r)
{
    const struct jp_engine_view *v = r->v;
    if (v->nchains > b->cap) {
        uint32_t cap = v->nchains + v->nchains / 2u + 16u;
        for (int k = 0; k < 2; k++) {
            uint64_t *n = realloc(b->v[k], (size_t)cap * sizeof *n);
            if (!n)
                return -ENOMEM; /* the slots grown so far are only larger */
            b->v[k] = n;
        }
        b->cap = cap;
    }
    /* the slots of base_slot: CPU samples; memory allocations and bytes */
    if (v->mode == JP_MODE_CPU) {
        (void)chain_values(v, JP_XVAL_SAMPLES, b->v[0], &b->total[0]);
    } else {
        (void)chain_values(v, JP_XVAL_ALLOC_COUNT, b->v[0], &b->total[0]);
        (void)chain_values(v, JP_XVAL_ALLOC_BYTES, b->v[1], &b->total[1]);
    }
    b->nchains = v->nchains;
    return 0;
}

void jp_export_base_free(struct jp_export_base *b)
{
    free(b->v[0]);
    free(b->v[1]);
    memset(b, 0, sizeof *b);
}

int jpx_prof_since(const struct jp_report *r, uint32_t value, const struct jp_export_base *base,
                   struct jpx_prof *p)
{
    const struct jp_engine_view *v = r->v;
    memset(p, 0, sizeof *p);
    if (value == JP_XVAL_DEFAULT)
        value = v->mode == JP_MODE_CPU ? JP_XVAL_SAMPLES : JP_XVAL_ALLOC_BYTES;
    if (value >= JP_XVAL_COUNT || values[value].mode != v->mode)
        return -EINVAL;
    if ((value == JP_XVAL_RETAINED_BYTES || value == JP_XVAL_PEAK_BYTES ||
         value == JP_XVAL_RETAINED_COUNT || value == JP_XVAL_LIVE_BYTES) && !r->live_exact)
        return -ENODATA;
    uint32_t cap = v->nchains + 1u;
    uint64_t *vals = calloc(cap, sizeof *vals);
    struct jpx_stack *st = malloc(cap * sizeof *st);
    int rc = vals && st ? 0 : -ENOMEM;
    uint64_t total = 0;
    if (rc == 0)
        rc = chain_values(v, value, vals, &total);
    if (rc < 0) {
        free(vals);
        free(st);
        return rc;
    }
    int slot = base ? base_slot(value) : -1;
    if (slot >= 0) {
        /* A window: counts only grow, chain by chain and in all, so nothing goes below 0. */
        for (uint32_t c = 0; c < v->nchains && c < base->nchains; c++)
            vals[c] -= base->v[slot][c];
        total -= base->total[slot];
    }
    uint32_t n = 0;
    uint64_t sum = 0;
    for (uint32_t c = 0; c < v->nchains; c++)
        if (vals[c]) {
            st[n++] = (struct jpx_stack){c, vals[c]};
            sum += vals[c];
        }
    if (n > 1) /* distinct chains never tie */
        qsort_r(st, n, sizeof *st, stack_order, (void *)v);
    if (total > sum)
        st[n++] = (struct jpx_stack){JPX_STACK_UNATTRIBUTED, total - sum};
    else
        total = sum;
    free(vals);
    *p = (struct jpx_prof){r, v, value, st, n, total, base};
    return 0;
}

void jpx_prof_free(struct jpx_prof *p)
{
    free(p->st);
    memset(p, 0, sizeof *p);
}

void jpx_prof_title(struct jp_buf *b, const struct jpx_prof *p)
{
    const struct jp_report *r = p->r;
    jp_buf_puts(b, p->v->mode == JP_MODE_CPU ? "CPU profile, " : "Memory profile, ");
    jp_buf_puts(b, jp_status_word(r->status) ? jp_status_word(r->status) : "unknown");
    if (r->reason && r->reason[0])
        jp_buf_printf(b, " (%s)", r->reason);
    jp_buf_printf(b, ", %llu %s", (unsigned long long)p->total, jpx_value_unit(p->value));
    if (p->value != JP_XVAL_SAMPLES && p->value != JP_XVAL_DEFAULT)
        jp_buf_printf(b, " (%s)", values[p->value].word);
}

int jp_export_write(const struct jp_report *r, const struct jp_export_opts *o, char **out,
                    size_t *len)
{
    if (!r || !o || o->size < sizeof *o || o->format >= JP_EXPORT_FORMAT_COUNT || !out || !len)
        return -EINVAL;
    *out = NULL;
    *len = 0;
    struct jpx_prof p;
    int rc = jpx_prof_since(r, o->value, o->base, &p);
    if (rc < 0)
        return rc;
    if (o->format == JP_EXPORT_PPROF) {
        rc = jpx_write_pprof(&p, o, out, len);
        jpx_prof_free(&p);
        return rc;
    }
    struct jp_buf b = {.limit = (size_t)o->max_bytes};
    jp_buf_put(&b, "", 0); /* an empty profile is an empty document, not a failure */
    if (o->format == JP_EXPORT_FOLDED)
        jpx_write_folded(&b, &p);
    else if (o->format == JP_EXPORT_SPEEDSCOPE)
        jpx_write_speedscope(&b, &p);
    else if (o->format == JP_EXPORT_HTML)
        jpx_write_html(&b, &p);
    else
        jpx_write_svg(&b, &p);
    jpx_prof_free(&p);
    return jp_buf_finish(&b, out, len);
}
