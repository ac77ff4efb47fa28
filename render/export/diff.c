/* The diff of two runs: per function (CPU: inclusive samples) or site (memory: attributed
 * allocated bytes, or the value asked for: allocations, live, retained or peak bytes), each
 * run's impact as a share of that run's own total of it (by default the report's denominator:
 * jett samples, attributed allocated bytes), so runs of different length compare; ranked by
 * the absolute change of share, then by name and path. A function is matched across the runs
 * by its qualified name and relative path (its declaration span moves when the program is
 * edited). Formats:
 *   human   a heading with both statuses and totals, one line per function: change in
 *           percentage points, both shares, both impacts, name, path;
 *   toon    the same as a `diff:` TOON object (schema jettprof.diff.v1);
 *   folded  the differential folded stacks: `frame;frame base new` per stack of either run;
 *   svg     a differential flame graph: the new run's graph, each box coloured by the change
 *           of its share (red: grew, blue: shrank, white: unchanged), both figures in its
 *           tooltip;
 *   html    the HTML page (html.c) of the new run with that flame graph's colours and the
 *           human diff's ranked changes.
 * Shares and changes are exact rationals; only the printed hundredths are rounded (half away
 * from zero), and the ranking compares the exact values. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/toon.h"
#include "common/text.h"
#include "export_internal.h"

__extension__ typedef unsigned __int128 u128;

#define DIFF_SCHEMA "jettprof.diff.v1"

static const char *const diff_format_names[] = {
#define JP_X(n, w) w,
    JP_DIFF_FORMATS(JP_X)
#undef JP_X
};

int jp_diff_format_parse(const char *word, uint32_t *format)
{
    for (uint32_t i = 0; i < JP_DIFF_FORMAT_COUNT; i++)
        if (!strcmp(word, diff_format_names[i])) {
            *format = i;
            return 0;
        }
    return -EINVAL;
}

/* One function of either run, by name and path. */
struct drow {
    char *key;        /* "name\0path" (path empty when unavailable), malloc'ed */
    size_t name_len, key_len;
    uint64_t impact[2]; /* base, new */
    u128 change;      /* |new share - base share| x both denominators (diff_change) */
    bool grew;        /* the new share is the larger */
};

static int key_cmp(const char *a, size_t la, const char *b, size_t lb)
{
    int c = memcmp(a, b, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

/* What the diff compares (--value): a function's or site's impact, the run's total of it (the
 * shares' denominator), and the words its headings use. */
static uint64_t impact_of(const struct jp_engine_view *v, const struct jp_func *f,
                          uint32_t value)
{
    switch (value) {
    case JP_XVAL_SAMPLES:
        return f->cpu.inclusive;
    case JP_XVAL_ALLOC_COUNT:
        return f->mem.count;
    case JP_XVAL_LIVE_BYTES:
    case JP_XVAL_RETAINED_BYTES:
        return f->live;
    case JP_XVAL_PEAK_BYTES:
        return jp_func_live_at_peak(f, v->peak_epoch);
    default:
        return f->mem.allocated;
    }
}

static uint64_t total_of(const struct jp_report *r, uint32_t value)
{
    const struct jp_engine_view *v = r->v;
    switch (value) {
    case JP_XVAL_ALLOC_COUNT:
        return v->allocation_count;
    case JP_XVAL_LIVE_BYTES:
    case JP_XVAL_RETAINED_BYTES:
        return v->live_bytes;
    case JP_XVAL_PEAK_BYTES:
        return v->peak_bytes;
    default: /* the report's own denominator: jett samples, attributed allocated bytes */
        return r->denominator;
    }
}

/* The total's key (TOON) and words (human), and the impact's key and words. */
static void value_words(uint32_t value, const char **total_key, const char **total_words,
                        const char **impact_key, const char **impact_words)
{
    switch (value) {
    case JP_XVAL_SAMPLES:
        *total_key = "attributed_samples", *total_words = "jett samples";
        *impact_key = "inclusive_samples", *impact_words = "inclusive samples";
        return;
    case JP_XVAL_ALLOC_COUNT:
        *total_key = "allocation_count", *total_words = "allocations";
        *impact_key = "allocation_count", *impact_words = "allocations";
        return;
    case JP_XVAL_LIVE_BYTES:
        *total_key = "live_bytes", *total_words = "live bytes";
        *impact_key = "live_bytes", *impact_words = "live bytes";
        return;
    case JP_XVAL_RETAINED_BYTES:
        *total_key = "retained_bytes", *total_words = "retained bytes";
        *impact_key = "retained_bytes", *impact_words = "retained bytes";
        return;
    case JP_XVAL_PEAK_BYTES:
        *total_key = "peak_live_bytes", *total_words = "bytes live at the peak";
        *impact_key = "live_at_peak_bytes", *impact_words = "bytes live at the peak";
        return;
    default:
        *total_key = "attributed_allocated_bytes", *total_words = "attributed bytes";
        *impact_key = "allocated_bytes", *impact_words = "allocated bytes";
        return;
    }
}

/* Appends a row per function of one run with an impact (rows of equal key are merged
 * later, merge_rows). */
static int add_run(const struct jp_report *r, int side, uint32_t value, struct drow **rows,
                   size_t *n, size_t *cap)
{
    const struct jp_engine_view *v = r->v;
    struct jp_buf k = {0};
    for (uint32_t i = 0; i < v->nfuncs; i++) {
        const struct jp_func *f = &v->funcs[i];
        uint64_t imp = impact_of(v, f, value);
        if (!imp)
            continue;
        k.len = 0;
        jp_buf_put(&k, "", 0);
        jp_wr_qualified(&k, f);
        size_t name_len = k.len;
        jp_buf_put(&k, "", 1);
        uint16_t plen;
        const char *path = jpx_frame_path(v, f, &plen);
        if (path)
            jp_buf_put(&k, path, plen);
        if (!k.failed && *n == *cap) {
            size_t nc = *cap ? *cap * 2u : 64u;
            struct drow *p = realloc(*rows, nc * sizeof *p);
            if (p) {
                *rows = p;
                *cap = nc;
            } else {
                k.failed = true;
            }
        }
        char *key = k.failed ? NULL : malloc(k.len + 1u);
        if (!key) {
            jp_buf_free(&k);
            return -ENOMEM;
        }
        memcpy(key, k.p, k.len + 1u);
        (*rows)[(*n)++] = (struct drow){key, name_len, k.len, {0, 0}, 0, false};
        (*rows)[*n - 1u].impact[side] = imp;
    }
    jp_buf_free(&k);
    return 0;
}

static int key_order(const struct drow *a, const struct drow *b)
{
    return key_cmp(a->key, a->key_len, b->key, b->key_len);
}

static int row_cmp(const struct drow *a, const struct drow *b)
{
    if (a->change != b->change)
        return a->change > b->change ? -1 : 1;
    if (a->grew != b->grew)
        return a->grew ? -1 : 1;
    return key_cmp(a->key, a->key_len, b->key, b->key_len);
}

static int by_key(const void *a, const void *b, void *unused)
{
    (void)unused;
    return key_order(a, b);
}

static int by_change(const void *a, const void *b, void *unused)
{
    (void)unused;
    return row_cmp(a, b);
}

/* num/den (num <= den: a change of share is at most 100 points) as signed hundredths,
 * rounded half away from zero. Both are cut to 100 bits first when they are wider, so the
 * product with 10000 fits; that only touches runs of more than 2^50 samples or bytes on each
 * side, and the ranking compares the exact values anyway. */
static int64_t hundredths(u128 num, u128 den, bool neg)
{
    while (den >> 100) {
        num >>= 1;
        den >>= 1;
    }
    if (!den)
        return 0;
    u128 m = num * 10000u;
    u128 q = m / den, r = m % den;
    if (r * 2u >= den)
        q++;
    return neg ? -(int64_t)q : (int64_t)q;
}

/* Signed hundredths as a canonical TOON number (like the report's percentages). */
static void put_signed(struct jp_buf *b, int64_t h, bool fixed)
{
    uint64_t a = (uint64_t)(h < 0 ? -h : h), ip = a / 100u, fp = a % 100u;
    if (h < 0)
        jp_buf_put(b, "-", 1);
    else if (fixed)
        jp_buf_put(b, "+", 1);
    if (fixed)
        jp_buf_printf(b, "%" PRIu64 ".%02" PRIu64, ip, fp);
    else if (!fp)
        jp_buf_printf(b, "%" PRIu64, ip);
    else if (fp % 10u == 0)
        jp_buf_printf(b, "%" PRIu64 ".%" PRIu64, ip, fp / 10u);
    else
        jp_buf_printf(b, "%" PRIu64 ".%02" PRIu64, ip, fp);
}

struct diff {
    const struct jp_report *run[2];
    uint32_t value; /* JP_XVAL_*, the default resolved */
    uint64_t den[2];
    struct drow *rows;
    size_t n;
};

/* A zero denominator counts as 1: that run's shares are all 0 (its impacts are 0 too). */
static u128 diff_den(const struct diff *d)
{
    return (u128)(d->den[0] ? d->den[0] : 1u) * (d->den[1] ? d->den[1] : 1u);
}

/* Sets a row's change: new/den1 - base/den0, over den0 x den1. */
static void diff_change(const struct diff *d, struct drow *w)
{
    u128 p1 = d->den[1] ? (u128)w->impact[1] * (d->den[0] ? d->den[0] : 1u) : 0;
    u128 p0 = d->den[0] ? (u128)w->impact[0] * (d->den[1] ? d->den[1] : 1u) : 0;
    w->grew = p1 > p0;
    w->change = p1 > p0 ? p1 - p0 : p0 - p1;
}

static const char *status_of(const struct jp_report *r)
{
    return jp_status_word(r->status) ? jp_status_word(r->status) : "unknown";
}

static void human(struct jp_buf *b, const struct diff *d)
{
    const char *tk, *unit, *ik, *iw;
    value_words(d->value, &tk, &unit, &ik, &iw);
    jp_buf_printf(b, "%s profile diff\n", d->run[0]->v->mode == JP_MODE_CPU ? "CPU" : "Memory");
    static const char *const label[2] = {"base", "new"};
    for (int s = 0; s < 2; s++) {
        const struct jp_report *r = d->run[s];
        jp_buf_printf(b, "  %-4s %s%s%s%s, %" PRIu64 " %s\n", label[s], status_of(r),
                      r->reason[0] ? " (" : "", r->reason, r->reason[0] ? ")" : "",
                      d->den[s], unit);
    }
    bool cpu = d->run[0]->v->mode == JP_MODE_CPU;
    jp_buf_printf(b, "%zu %s%s, largest change first (change of share in percentage points, "
                     "base share -> new share, base -> new %s):\n",
                  d->n, cpu ? "function" : "site", d->n == 1 ? "" : "s", iw);
    u128 den = diff_den(d);
    for (size_t i = 0; i < d->n; i++) {
        const struct drow *w = &d->rows[i];
        JP_BUF_LIT(b, "  ");
        put_signed(b, hundredths(w->change, den, !w->grew), true);
        uint64_t s0 = jp_percent_hundredths(w->impact[0], d->den[0]);
        uint64_t s1 = jp_percent_hundredths(w->impact[1], d->den[1]);
        jp_buf_printf(b, " pp  %" PRIu64 ".%02" PRIu64 "%% -> %" PRIu64 ".%02" PRIu64 "%%  %"
                      PRIu64 " -> %" PRIu64 "  ", s0 / 100u, s0 % 100u, s1 / 100u, s1 % 100u,
                      w->impact[0], w->impact[1]);
        /* names and paths are a capture's bytes: the one rule for human text */
        jp_text_safe(b, w->key, w->name_len);
        size_t plen = w->key_len - w->name_len - 1u;
        if (plen) {
            JP_BUF_LIT(b, "  ");
            jp_text_safe(b, w->key + w->name_len + 1u, plen);
        }
        jp_buf_put(b, "\n", 1);
    }
}

static void toon(struct jp_buf *b, const struct diff *d)
{
    const bool cpu = d->run[0]->v->mode == JP_MODE_CPU;
    const char *tk, *tw, *ik, *iw;
    value_words(d->value, &tk, &tw, &ik, &iw);
    JP_BUF_LIT(b, "diff:\n  schema: " DIFF_SCHEMA "\n");
    jp_buf_printf(b, "  mode: %s\n", cpu ? "cpu" : "memory");
    static const char *const label[2] = {"base", "new"};
    for (int s = 0; s < 2; s++) {
        const struct jp_report *r = d->run[s];
        jp_buf_printf(b, "  %s:\n    status: %s\n", label[s], status_of(r));
        if (r->reason[0])
            jp_buf_printf(b, "    reason: %s\n", r->reason);
        jp_buf_printf(b, "    %s: %" PRIu64 "\n", tk, d->den[s]);
    }
    jp_buf_printf(b, "  changes[%zu]{namespace_function,path,base_%s,new_%s,base_percent,"
                     "new_percent,change_points}:\n",
                  d->n, ik, ik);
    u128 den = diff_den(d);
    for (size_t i = 0; i < d->n; i++) {
        const struct drow *w = &d->rows[i];
        JP_BUF_LIT(b, "    ");
        jp_toon_str(b, w->key, w->name_len);
        jp_buf_put(b, ",", 1);
        size_t plen = w->key_len - w->name_len - 1u;
        if (plen)
            jp_toon_str(b, w->key + w->name_len + 1u, plen);
        else
            JP_BUF_LIT(b, "unavailable");
        jp_buf_printf(b, ",%" PRIu64 ",%" PRIu64 ",", w->impact[0], w->impact[1]);
        put_signed(b, (int64_t)jp_percent_hundredths(w->impact[0], d->den[0]), false);
        jp_buf_put(b, ",", 1);
        put_signed(b, (int64_t)jp_percent_hundredths(w->impact[1], d->den[1]), false);
        jp_buf_put(b, ",", 1);
        put_signed(b, hundredths(w->change, den, !w->grew), false);
        jp_buf_put(b, "\n", 1);
    }
}

/* ---- stacks matched by their folded text ---- */

struct dstack {
    char *text; /* malloc'ed folded frames */
    size_t len;
    uint64_t value;
};

static int dstack_cmp(const struct dstack *a, const struct dstack *b)
{
    return key_cmp(a->text, a->len, b->text, b->len);
}

static int dstack_order(const void *a, const void *b, void *unused)
{
    (void)unused;
    return dstack_cmp(a, b);
}

static void dstacks_free(struct dstack *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        free(s[i].text);
    free(s);
}

/* The stacks of p as folded text, sorted by it, equal texts merged. */
static int dstacks_of(const struct jpx_prof *p, struct dstack **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct dstack *s = calloc(p->n + 1u, sizeof *s);
    struct jp_buf b = {0}, scratch = {0};
    int rc = s ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < p->n; i++) {
        b.len = 0;
        jp_buf_put(&b, "", 0);
        jpx_folded_stack(&b, &scratch, p, &p->st[i]);
        if (b.failed || scratch.failed || !(s[i].text = malloc(b.len + 1u))) {
            rc = -ENOMEM;
            break;
        }
        memcpy(s[i].text, b.p, b.len + 1u);
        s[i].len = b.len;
        s[i].value = p->st[i].value;
        *n = i + 1u;
    }
    jp_buf_free(&b);
    jp_buf_free(&scratch);
    if (rc < 0) {
        dstacks_free(s, *n);
        *n = 0;
        return rc;
    }
    if (*n > 1)
        qsort_r(s, *n, sizeof *s, dstack_order, NULL);
    size_t m = 0;
    for (size_t i = 0; i < *n; i++) {
        if (m && !dstack_cmp(&s[m - 1u], &s[i])) {
            s[m - 1u].value += s[i].value;
            free(s[i].text);
        } else {
            s[m++] = s[i];
        }
    }
    *n = m;
    *out = s;
    return 0;
}

static int folded(struct jp_buf *b, const struct jpx_prof *x)
{
    struct dstack *s[2];
    size_t n[2];
    int rc = dstacks_of(&x[0], &s[0], &n[0]);
    if (rc < 0)
        return rc;
    if ((rc = dstacks_of(&x[1], &s[1], &n[1])) < 0) {
        dstacks_free(s[0], n[0]);
        return rc;
    }
    size_t i = 0, j = 0;
    while (i < n[0] || j < n[1]) {
        int c = i == n[0] ? 1 : j == n[1] ? -1 : dstack_cmp(&s[0][i], &s[1][j]);
        const struct dstack *t = c <= 0 ? &s[0][i] : &s[1][j];
        jp_buf_put(b, t->text, t->len);
        jp_buf_printf(b, " %" PRIu64 " %" PRIu64 "\n", c <= 0 ? s[0][i].value : 0,
                      c >= 0 ? s[1][j].value : 0);
        i += c <= 0;
        j += c >= 0;
    }
    dstacks_free(s[0], n[0]);
    dstacks_free(s[1], n[1]);
    return 0;
}

/* ---- the differential flame graph ---- */

struct dsvg {
    const struct jpx_prof *x;      /* base, new */
    const struct jpx_svg_node *nd; /* the new run's boxes */
    uint64_t *base;                /* per box: the base run's value at the same frame path */
    u128 max;                      /* the largest change of share over the boxes */
};

static void dsvg_change(const struct dsvg *g, uint32_t i, u128 *mag, bool *grew)
{
    uint64_t t0 = g->x[0].total ? g->x[0].total : 1u, t1 = g->x[1].total ? g->x[1].total : 1u;
    u128 p1 = (u128)g->nd[i].value * t0, p0 = (u128)g->base[i] * t1;
    *grew = p1 > p0;
    *mag = p1 > p0 ? p1 - p0 : p0 - p1;
}

static uint32_t dsvg_fill(void *ctx, uint32_t i)
{
    const struct dsvg *g = ctx;
    u128 mag;
    bool grew;
    dsvg_change(g, i, &mag, &grew);
    while (g->max >> 100 && mag) /* keep the product below in range (see hundredths) */
        mag >>= 1;
    u128 max = g->max;
    while (max >> 100)
        max >>= 1;
    uint32_t fade = max ? (uint32_t)(mag * 200u / max) : 0; /* 0 unchanged .. 200 the most */
    uint32_t c = 255u - fade;
    return grew ? 0xff0000u | c << 8 | c : c << 16 | c << 8 | 0xffu;
}

static void dsvg_tip(void *ctx, struct jp_buf *b, uint32_t i)
{
    const struct dsvg *g = ctx;
    uint64_t s0 = jp_percent_hundredths(g->base[i], g->x[0].total);
    uint64_t s1 = jp_percent_hundredths(g->nd[i].value, g->x[1].total);
    u128 mag;
    bool grew;
    dsvg_change(g, i, &mag, &grew);
    u128 den = (u128)(g->x[0].total ? g->x[0].total : 1u) * (g->x[1].total ? g->x[1].total : 1u);
    jp_buf_printf(b, ": base %" PRIu64 " (%" PRIu64 ".%02" PRIu64 "%%), new %" PRIu64 " (%"
                  PRIu64 ".%02" PRIu64 "%%), change ", g->base[i], s0 / 100u, s0 % 100u,
                  g->nd[i].value, s1 / 100u, s1 % 100u);
    put_signed(b, hundredths(mag, den, !grew), true);
    JP_BUF_LIT(b, " pp");
}

/* Each box's frame path as folded text, built from its parent's. */
static int node_paths(const struct jpx_prof *p, const struct jpx_svg_node *nd, uint32_t n,
                      struct dstack *out)
{
    struct jp_buf b = {0};
    for (uint32_t i = 0; i < n; i++) {
        b.len = 0;
        jp_buf_put(&b, "", 0);
        if (nd[i].parent) {
            const struct dstack *up = &out[nd[i].parent - 1u];
            jp_buf_put(&b, up->text, up->len);
            jp_buf_put(&b, ";", 1);
        }
        if (nd[i].func >= p->v->nfuncs)
            JP_BUF_LIT(&b, JPX_FRAME_UNATTRIBUTED);
        else
            jp_wr_qualified(&b, &p->v->funcs[nd[i].func]);
        if (b.failed || !(out[i].text = malloc(b.len + 1u))) {
            jp_buf_free(&b);
            return -ENOMEM;
        }
        memcpy(out[i].text, b.p, b.len + 1u);
        out[i].len = b.len;
        out[i].value = nd[i].value;
    }
    jp_buf_free(&b);
    return 0;
}

/* The differential flame graph: as SVG, or (changes not NULL) as the HTML page with the
 * changes' HTML after its tables. */
static int svg(struct jp_buf *b, const struct jpx_prof *x, const struct diff *d,
               const char *changes)
{
    struct jpx_svg_node *nd[2] = {NULL, NULL};
    uint32_t n[2] = {0, 0};
    struct dstack *path[2] = {NULL, NULL};
    uint64_t *base = NULL;
    int rc = 0;
    for (int s = 0; s < 2 && rc == 0; s++)
        if ((rc = jpx_svg_tree(&x[s], &nd[s], &n[s])) == 0 &&
            !(path[s] = calloc(n[s] + 1u, sizeof *path[s])))
            rc = -ENOMEM;
    for (int s = 0; s < 2 && rc == 0; s++)
        rc = node_paths(&x[s], nd[s], n[s], path[s]);
    if (rc == 0 && !(base = calloc(n[1] + 1u, sizeof *base)))
        rc = -ENOMEM;
    if (rc == 0) {
        /* the base boxes sorted by path, then each new box looks its path up */
        struct dstack *sorted = calloc(n[0] + 1u, sizeof *sorted);
        if (!sorted) {
            rc = -ENOMEM;
        } else {
            memcpy(sorted, path[0], n[0] * sizeof *sorted);
            if (n[0] > 1)
                qsort_r(sorted, n[0], sizeof *sorted, dstack_order, NULL);
            struct dsvg g = {x, nd[1], base, 0};
            for (uint32_t i = 0; i < n[1]; i++) {
                size_t lo = 0, hi = n[0];
                while (lo < hi) {
                    size_t mid = lo + (hi - lo) / 2u;
                    int c = dstack_cmp(&sorted[mid], &path[1][i]);
                    if (!c) {
                        base[i] += sorted[mid].value; /* equal paths: their sum */
                        for (size_t k = mid; k-- > lo && !dstack_cmp(&sorted[k], &path[1][i]);)
                            base[i] += sorted[k].value;
                        for (size_t k = mid + 1u; k < hi && !dstack_cmp(&sorted[k], &path[1][i]);
                             k++)
                            base[i] += sorted[k].value;
                        break;
                    }
                    if (c < 0)
                        lo = mid + 1u;
                    else
                        hi = mid;
                }
                u128 mag;
                bool grew;
                dsvg_change(&g, i, &mag, &grew);
                if (mag > g.max)
                    g.max = mag;
            }
            free(sorted);
            struct jp_buf title = {0}, sub = {0};
            jp_buf_printf(&title, "%s profile diff: red grew, blue shrank (share of each run)",
                          x[1].v->mode == JP_MODE_CPU ? "CPU" : "Memory");
            static const char *const label[2] = {"base", "new"};
            for (int s = 0; s < 2; s++)
                jp_buf_printf(&sub, "%s%s %s%s%s%s, %" PRIu64 " %s", s ? "; " : "", label[s],
                              status_of(d->run[s]), d->run[s]->reason[0] ? " (" : "",
                              d->run[s]->reason, d->run[s]->reason[0] ? ")" : "",
                              x[s].total, jpx_value_unit(x[s].value));
            if (title.failed || sub.failed) {
                rc = -ENOMEM;
            } else if (changes) {
                uint32_t *colour = malloc((n[1] + 1u) * sizeof *colour);
                if (!colour) {
                    rc = -ENOMEM;
                } else {
                    for (uint32_t i = 0; i < n[1]; i++)
                        colour[i] = dsvg_fill(&g, i);
                    jp_buf_printf(&title, " - %s", sub.p);
                    jpx_write_html_diff(b, &x[1], title.p, colour, n[1], changes);
                    free(colour);
                }
            } else {
                struct jpx_svg_style st = {&g, dsvg_fill, dsvg_tip, sub.p};
                jpx_svg_doc(b, &x[1], nd[1], n[1], title.p, &st);
            }
            jp_buf_free(&title);
            jp_buf_free(&sub);
        }
    }
    for (int s = 0; s < 2; s++) {
        if (path[s])
            for (uint32_t i = 0; i < n[s]; i++)
                free(path[s][i].text);
        free(path[s]);
        free(nd[s]);
    }
    free(base);
    return rc;
}

int jp_diff_write(const struct jp_report *base, const struct jp_report *next, uint32_t format,
                  uint32_t value, char **out, size_t *len)
{
    if (!base || !next || format >= JP_DIFF_FORMAT_COUNT || !out || !len)
        return -EINVAL;
    *out = NULL;
    *len = 0;
    if (base->v->mode != next->v->mode)
        return -EDOM;
    if (value == JP_XVAL_DEFAULT)
        value = base->v->mode == JP_MODE_CPU ? JP_XVAL_SAMPLES : JP_XVAL_ALLOC_BYTES;
    if (value >= JP_XVAL_COUNT || value == JP_XVAL_RETAINED_COUNT ||
        (value == JP_XVAL_SAMPLES) != (base->v->mode == JP_MODE_CPU))
        return -EINVAL;
    if ((value == JP_XVAL_LIVE_BYTES || value == JP_XVAL_RETAINED_BYTES ||
         value == JP_XVAL_PEAK_BYTES) && !(base->live_exact && next->live_exact))
        return -ENODATA;
    struct diff d = {{base, next}, value, {total_of(base, value), total_of(next, value)}, NULL,
                     0};
    struct jp_buf b = {0};
    jp_buf_put(&b, "", 0);
    int rc = 0;
    struct jp_buf changes = {0};
    if (format == JP_DIFF_HTML) {
        /* the page: the largest changes as the human diff has them, then the flame graph */
        char *text = NULL;
        size_t tlen = 0;
        rc = jp_diff_write(base, next, JP_DIFF_HUMAN, value, &text, &tlen);
        if (rc < 0) {
            jp_buf_free(&b);
            return rc;
        }
        JP_BUF_LIT(&changes, "<h2>largest changes</h2>\n<pre class=\"changes\">");
        jpx_html_text(&changes, text, tlen);
        JP_BUF_LIT(&changes, "</pre>\n");
        free(text);
    }
    if (format == JP_DIFF_FOLDED || format == JP_DIFF_SVG || format == JP_DIFF_HTML) {
        struct jpx_prof x[2];
        if ((rc = jpx_prof_build(base, value, &x[0])) < 0) {
            jp_buf_free(&b);
            return rc;
        }
        if ((rc = jpx_prof_build(next, value, &x[1])) < 0) {
            jpx_prof_free(&x[0]);
            jp_buf_free(&b);
            return rc;
        }
        rc = format == JP_DIFF_FOLDED ? folded(&b, x)
             : changes.failed         ? -ENOMEM
                                      : svg(&b, x, &d, format == JP_DIFF_HTML ? changes.p : NULL);
        jpx_prof_free(&x[0]);
        jpx_prof_free(&x[1]);
    } else {
        size_t cap = 0;
        rc = add_run(base, 0, value, &d.rows, &d.n, &cap);
        if (rc == 0)
            rc = add_run(next, 1, value, &d.rows, &d.n, &cap);
        if (rc == 0) {
            /* one row per key: the same function in both runs (or twice in one, for names
             * that only the declaration span told apart) is one row */
            if (d.n > 1)
                qsort_r(d.rows, d.n, sizeof *d.rows, by_key, NULL);
            size_t m = 0;
            for (size_t i = 0; i < d.n; i++) {
                if (m && !key_order(&d.rows[m - 1u], &d.rows[i])) {
                    d.rows[m - 1u].impact[0] += d.rows[i].impact[0];
                    d.rows[m - 1u].impact[1] += d.rows[i].impact[1];
                    free(d.rows[i].key);
                } else {
                    d.rows[m++] = d.rows[i];
                }
            }
            d.n = m;
            for (size_t i = 0; i < d.n; i++)
                diff_change(&d, &d.rows[i]);
            if (d.n > 1)
                qsort_r(d.rows, d.n, sizeof *d.rows, by_change, NULL);
            if (format == JP_DIFF_HUMAN)
                human(&b, &d);
            else
                toon(&b, &d);
        }
        for (size_t i = 0; i < d.n; i++)
            free(d.rows[i].key);
        free(d.rows);
    }
    jp_buf_free(&changes);
    if (rc < 0) {
        jp_buf_free(&b);
        return rc;
    }
    return jp_buf_finish(&b, out, len);
}
