/* The report library: from the engine's read-only view to the report: status and reasons,
 * eligibility on exact integers, the contract's four ordering keys, limit and ranks, hot
 * lines, call chains, suggestions and the excerpt keys. Built once per run; the writers
 * (render/toon.c and human.c, another library) turn it into human text and TOON, both from the same
 * struct so they cannot disagree on totals or order. Never calls a writer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

/* READINGS.md #3 key 4: project < dependency < stdlib, unavailable source after all of them. */
static unsigned origin_rank(uint8_t origin)
{
    return origin == JP_ORIGIN_NONE ? 4u : origin;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

/* Ordering keys 3 and 4 (READINGS.md #3 and #5), then the frame id of an unavailable-symbol frame,
 * which only separates frames that the contract forbids merging. */
int jp_func_cmp(const struct jp_engine_view *v, uint32_t ia, uint32_t ib)
{
    if (ia == ib)
        return 0;
    const struct jp_func *a = &v->funcs[ia], *b = &v->funcs[ib];
    int c = bytes_cmp(a->ns, a->ns_len, b->ns, b->ns_len);
    if (!c)
        c = bytes_cmp(a->fn, a->fn_len, b->fn, b->fn_len);
    if (!c)
        c = cmp_u64(origin_rank(a->origin), origin_rank(b->origin));
    if (!c && a->source && b->source) {
        const struct jp_source *sa = &v->sources[a->source], *sb = &v->sources[b->source];
        c = bytes_cmp(sa->path, sa->path_len, sb->path, sb->path_len);
    }
    if (!c)
        c = cmp_u64(a->decl_start, b->decl_start);
    if (!c)
        c = cmp_u64(a->decl_end, b->decl_end);
    if (!c)
        c = cmp_u64(a->uniq, b->uniq);
    return c;
}

static int entry_cmp(const struct jp_engine_view *v, const struct jp_entry *a,
                     const struct jp_entry *b)
{
    if (a->impact != b->impact)
        return a->impact > b->impact ? -1 : 1; /* key 1: descending impact */
    if (a->key2 != b->key2)
        return a->key2 > b->key2 ? -1 : 1; /* key 2: descending self / allocation count */
    return jp_func_cmp(v, a->func, b->func);
}

/* Merge sort with the view as context (qsort has none, and a static would make rendering
 * unsafe from two threads, e.g. the agent's fallback beside a daemon in one process). The
 * keys are total, so stability does not matter for the result. */
static void sort_entries(const struct jp_engine_view *v, struct jp_entry *a, struct jp_entry *tmp,
                         uint32_t n)
{
    if (n < 2)
        return;
    uint32_t h = n / 2u;
    sort_entries(v, a, tmp, h);
    sort_entries(v, a + h, tmp, n - h);
    uint32_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = entry_cmp(v, &a[j], &a[i]) < 0 ? a[j++] : a[i++];
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

uint32_t jp_chain_funcs(const struct jp_engine_view *v, uint32_t ci, uint32_t *seq)
{
    uint32_t d = v->chains[ci].depth;
    if (d > JP_MAX_DEPTH)
        d = JP_MAX_DEPTH;
    uint32_t i = d;
    for (uint32_t c = ci + 1u; c && i; c = v->chains[c - 1u].parent)
        seq[--i] = v->chains[c - 1u].func;
    return d;
}

int jp_chain_lex_cmp(const struct jp_engine_view *v, uint32_t a, uint32_t b)
{
    uint32_t sa[JP_MAX_DEPTH], sb[JP_MAX_DEPTH];
    uint32_t la = jp_chain_funcs(v, a, sa), lb = jp_chain_funcs(v, b, sb);
    for (uint32_t i = 0; i < la && i < lb; i++) {
        int c = jp_func_cmp(v, sa[i], sb[i]);
        if (c)
            return c;
    }
    return la < lb ? -1 : la > lb;
}

/* A chain's ranking figure: CPU its samples, memory the bytes charged through it. */
static uint64_t chain_impact(const struct jp_engine_view *v, uint32_t c)
{
    return v->mode == JP_MODE_CPU ? v->chains[c].samples : v->chains[c].allocated;
}

/* Chains: descending samples (CPU) or allocated bytes (memory: READINGS.md #18), then element by
 * element with the function keys, a shorter prefix first (READINGS.md #5). */
static int chain_cmp(const struct jp_engine_view *v, uint32_t a, uint32_t b)
{
    uint64_t ia = chain_impact(v, a), ib = chain_impact(v, b);
    if (ia != ib)
        return ia > ib ? -1 : 1;
    return jp_chain_lex_cmp(v, a, b);
}

/* Hot lines of one function: descending self samples, then source identity (one source per
 * function), line, column. */
static int hot_cmp(const struct jp_engine_view *v, uint32_t a, uint32_t b)
{
    const struct jp_hot *x = &v->hots[a], *y = &v->hots[b];
    if (x->samples != y->samples)
        return x->samples > y->samples ? -1 : 1;
    int c = cmp_u64(x->line, y->line);
    return c ? c : cmp_u64(x->col, y->col);
}

typedef int (*top_cmp)(const struct jp_engine_view *v, uint32_t a, uint32_t b);

static void top3_offer(const struct jp_engine_view *v, uint32_t *top, uint32_t *n, uint32_t cand,
                       top_cmp cmp)
{
    uint32_t i = *n;
    if (i == 3u) {
        if (cmp(v, cand, top[2]) >= 0)
            return;
        i = 2u;
    } else {
        (*n)++;
    }
    while (i > 0 && cmp(v, cand, top[i - 1u]) < 0) {
        top[i] = top[i - 1u];
        i--;
    }
    top[i] = cand;
}

/* Eligibility on exact integers: impact / den >= threshold_bp / 10000 (the contract's
 * "greater than or equal to", so at threshold 0 a zero impact qualifies: READINGS.md #14). A zero
 * denominator admits nothing. */
static bool eligible(uint64_t impact, uint64_t den, uint32_t threshold_bp)
{
    __extension__ typedef unsigned __int128 u128;
    return den && (u128)impact * 10000u >= (u128)threshold_bp * den;
}

/* READINGS.md #14: an entry is a function (CPU) or creation/resize site (memory) with at least one
 * attributed observation; a frame that was only defined is none. A site of zero-size
 * allocations, or one that only shrank allocations, is one. */
static bool observed(const struct jp_engine_view *v, const struct jp_func *f)
{
    return v->mode == JP_MODE_CPU ? f->cpu.inclusive > 0
                                  : f->mem.count > 0 || f->resize_count > 0;
}

static void add_suggestions(const struct jp_engine_view *v, const struct jp_report *r,
                            struct jp_entry *en)
{
    const struct jp_func *f = &v->funcs[en->func];
    en->nsugg = 0;
    /* READINGS.md #12: a source-less entry gets none and says so (`unavailable`); partial data
     * withholds every rule (an empty list). */
    en->sugg_unavailable = !f->source;
    if (r->detail_partial || !f->source || r->status == JP_STATUS_UNAVAILABLE)
        return;
    /* Rules are tried in rule-id order, so the (at most two) emitted stay ordered by id. */
    if (v->mode == JP_MODE_CPU) {
        if (f->cpu.self * 2u < f->cpu.inclusive && en->nchains > 0)
            en->sugg[en->nsugg++] = JP_RULE_CPU_CALLEE_DOMINATED;
        if (f->cpu.self * 2u >= f->cpu.inclusive && en->nhot > 0)
            en->sugg[en->nsugg++] = JP_RULE_CPU_HIGH_SELF;
    } else {
        if (f->mem.allocated > 0)
            en->sugg[en->nsugg++] = JP_RULE_MEM_ALLOCATION_PRESSURE;
        if (r->live_exact && !r->snapshot && f->live > 0 && eligible(f->live, v->attributed_allocated,
                                                     r->threshold_bp))
            en->sugg[en->nsugg++] = JP_RULE_MEM_RETAINED;
    }
}

struct id_pair {
    uint32_t entry, id;
};

static int pair_cmp(const void *a, const void *b)
{
    const struct id_pair *x = a, *y = b;
    if (x->entry != y->entry)
        return x->entry < y->entry ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

struct pair_vec {
    struct id_pair *p;
    size_t n, cap;
};

static int pair_push(struct pair_vec *v, uint32_t entry, uint32_t id)
{
    if (id == JP_ID_UNAVAILABLE)
        return 0;
    if (v->n == v->cap) {
        size_t ncap = v->cap ? v->cap * 2u : 64u;
        struct id_pair *np = realloc(v->p, ncap * sizeof *np);
        if (!np)
            return -ENOMEM;
        v->p = np;
        v->cap = ncap;
    }
    v->p[v->n++] = (struct id_pair){entry, id};
    return 0;
}

/* Distinct ids per entry: sorted pairs, counted where (entry, id) changes. */
static void pair_count(struct pair_vec *v, struct jp_report *r, bool threads)
{
    if (v->n > 1)
        qsort(v->p, v->n, sizeof *v->p, pair_cmp);
    for (size_t i = 0; i < v->n; i++) {
        if (i && !pair_cmp(&v->p[i - 1u], &v->p[i]))
            continue;
        struct jp_entry *en = &r->entries[v->p[i].entry];
        if (threads)
            en->threads++;
        else
            en->tasks++;
    }
}

/* Execution identity per emitted entry: every identity tuple goes to the entries on its key's
 * path (CPU: each function of the leaf's call chain, i.e. every function the sample counted
 * for inclusively; memory: the creation site). Recursion repeats a function in a chain; the
 * distinct count absorbs that. */
static int exec_counts(const struct jp_engine_view *v, struct jp_report *r)
{
    if (!r->emitted || !v->nexec || !v->exec_exact)
        return 0;
    int32_t *slot = malloc(v->nfuncs * sizeof *slot);
    if (!slot)
        return -ENOMEM;
    for (uint32_t i = 0; i < v->nfuncs; i++)
        slot[i] = -1;
    for (uint32_t i = 0; i < r->emitted; i++)
        slot[r->entries[i].func] = (int32_t)i;
    struct pair_vec th = {0}, tk = {0};
    int rc = 0;
    for (uint32_t i = 0; i < v->nexec && rc == 0; i++) {
        const struct jp_exec_tuple *t = &v->exec[i];
        if (v->mode == JP_MODE_MEMORY) {
            int32_t s = t->key < v->nfuncs ? slot[t->key] : -1;
            if (s >= 0 && (rc = pair_push(&th, (uint32_t)s, t->thread)) == 0)
                rc = pair_push(&tk, (uint32_t)s, t->task);
            continue;
        }
        for (uint32_t c = t->key + 1u; c && rc == 0; c = v->chains[c - 1u].parent) {
            int32_t s = slot[v->chains[c - 1u].func];
            if (s >= 0 && (rc = pair_push(&th, (uint32_t)s, t->thread)) == 0)
                rc = pair_push(&tk, (uint32_t)s, t->task);
        }
    }
    if (rc == 0) {
        pair_count(&th, r, true);
        pair_count(&tk, r, false);
    }
    free(th.p);
    free(tk.p);
    free(slot);
    return rc;
}

/* The status block and the suggestions: everything that RUN_STOP or the ending can change. */
static void derive_status(struct jp_report *r)
{
    jp_report_status(r->v, r->ending, r);
    for (uint32_t i = 0; i < r->emitted; i++)
        add_suggestions(r->v, r, &r->entries[i]);
}

void jp_report_rebind(struct jp_report *r, const struct jp_engine_view *v, uint32_t ending)
{
    r->view = *v;
    r->v = &r->view;
    r->ending = ending;
    derive_status(r);
}

void jp_report_free(struct jp_report *r)
{
    if (!r)
        return;
    free(r->entries);
    free(r);
}

int jp_report_build(const struct jp_engine_view *view, const struct jp_report_opts *o,
                    struct jp_report **out)
{
    *out = NULL;
    if (!o || o->size < sizeof *o || !view->start)
        return -EINVAL;
    uint32_t threshold = o->threshold_bp >= 0 ? (uint32_t)o->threshold_bp
                                              : view->start->threshold_bp;
    uint32_t limit = o->limit >= 0 ? (uint32_t)o->limit : view->start->limit;
    if (threshold > JP_THRESHOLD_BP_MAX || limit > JP_LIMIT_MAX)
        return -EINVAL;
    struct jp_report *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->view = *view;
    const struct jp_engine_view *v = r->v = &r->view;
    r->ending = o->ending;
    r->snapshot = o->ending == JP_END_RUNNING;
    r->records_taken = o->records_taken;
    r->elapsed_ns = o->elapsed_ns;
    r->threshold_bp = threshold;
    r->limit = limit;
    r->denominator = v->mode == JP_MODE_CPU ? v->state_samples[JP_STATE_JETT]
                                            : v->attributed_allocated;
    if (v->nfuncs) {
        r->entries = calloc(v->nfuncs, sizeof *r->entries);
        if (!r->entries)
            goto nomem;
    }
    for (uint32_t i = 0; i < v->nfuncs; i++) {
        const struct jp_func *f = &v->funcs[i];
        /* The ranking keys by mode: CPU inclusive then self samples; memory allocated bytes
         * then allocation count. */
        bool cpu = v->mode == JP_MODE_CPU;
        uint64_t impact = cpu ? f->cpu.inclusive : f->mem.allocated;
        uint64_t key2 = cpu ? f->cpu.self : f->mem.count;
        if (!observed(v, f) || !eligible(impact, r->denominator, r->threshold_bp))
            continue;
        r->entries[r->eligible++] = (struct jp_entry){.func = i, .impact = impact, .key2 = key2};
    }
    if (r->eligible > 1) {
        struct jp_entry *tmp = malloc((size_t)r->eligible * sizeof *tmp);
        if (!tmp)
            goto nomem;
        sort_entries(v, r->entries, tmp, r->eligible);
        free(tmp);
    }
    r->emitted = r->eligible < r->limit ? r->eligible : r->limit;

    if (r->emitted) {
        /* One pass over hot lines and chains, each offered to its function's entry. A chain
         * counts when something was observed through it: CPU samples; in memory mode (where
         * a chain's func is the site) allocations created or bytes grown through it. */
        int32_t *slot = malloc(v->nfuncs * sizeof *slot);
        if (!slot)
            goto nomem;
        for (uint32_t i = 0; i < v->nfuncs; i++)
            slot[i] = -1;
        for (uint32_t i = 0; i < r->emitted; i++)
            slot[r->entries[i].func] = (int32_t)i;
        for (uint32_t h = 0; h < v->nhots; h++) {
            int32_t s = slot[v->hots[h].func];
            if (s >= 0 && v->hots[h].samples)
                top3_offer(v, r->entries[s].hot, &r->entries[s].nhot, h, hot_cmp);
        }
        for (uint32_t c = 0; c < v->nchains; c++) {
            int32_t s = slot[v->chains[c].func];
            const struct jp_chain *ch = &v->chains[c];
            bool seen = v->mode == JP_MODE_CPU ? ch->samples > 0 : ch->count || ch->allocated;
            if (s >= 0 && seen)
                top3_offer(v, r->entries[s].chain, &r->entries[s].nchains, c, chain_cmp);
        }
        free(slot);
    }
    if (exec_counts(v, r) < 0)
        goto nomem;
    derive_status(r);
    *out = r;
    return 0;
nomem:
    jp_report_free(r);
    return -ENOMEM;
}

int jp_report_excerpt_keys(const struct jp_report *r, struct jp_ctl_excerpt_key **keys,
                           uint32_t *count)
{
    const struct jp_engine_view *v = r->v;
    uint32_t n = 0;
    struct jp_ctl_excerpt_key *k = NULL;
    *keys = NULL;
    *count = 0;
    if (r->emitted) {
        k = calloc((size_t)r->emitted * 3u, sizeof *k);
        if (!k)
            return -ENOMEM;
    }
    for (uint32_t i = 0; i < r->emitted; i++)
        for (uint32_t j = 0; j < r->entries[i].nhot; j++) {
            const struct jp_hot *h = &v->hots[r->entries[i].hot[j]];
            uint32_t src = v->funcs[h->func].source;
            if (!src)
                continue;
            struct jp_ctl_excerpt_key key = {v->sources[src].first_id, h->line, h->col};
            bool dup = false;
            for (uint32_t m = 0; m < n; m++)
                dup |= !memcmp(&k[m], &key, sizeof key);
            if (!dup)
                k[n++] = key;
        }
    *keys = k;
    *count = n;
    return 0;
}
