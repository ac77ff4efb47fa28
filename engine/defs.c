/* Definitions: RUN_START, SOURCE_DEF, FRAME_DEF and NODE_DEF. Sources, functions
 * (READINGS.md #1) and call chains are interned as they are defined; every node
 * precomputes what a sample needs (its function, chain, depth, root-most occurrence, truncation).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---- sources --------------------------------------------------------------------------- */

struct source_key { uint8_t origin; const char *path; uint16_t len; };

static uint64_t source_hash_k(const struct jp_engine *e, const struct source_key *k)
{
    struct sip h;
    jpe_sip_init(&h, e->seed);
    jpe_sip_bytes(&h, &k->origin, 1);
    jpe_sip_bytes(&h, k->path, k->len);
    return jpe_sip_final(&h);
}
static uint64_t source_hash(const struct jp_engine *e, uint32_t idx)
{
    const struct jp_source *s = &e->sources[idx];
    struct source_key k = {s->origin, s->path, s->path_len};
    return source_hash_k(e, &k);
}
static bool source_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    const struct source_key *k = key;
    const struct jp_source *s = &e->sources[idx];
    return s->origin == k->origin && s->path_len == k->len && !memcmp(s->path, k->path, k->len);
}

/* ---- functions ------------------------------------------------------------------------- */

struct func_key {
    const char *ns, *fn; uint16_t ns_len, fn_len;
    uint8_t kind; uint32_t source, decl_start, decl_end, uniq;
};

/* Exactly the fields func_eq compares; lengths first, so (ns, fn) splits stay distinct. */
static uint64_t func_hash_k(const struct jp_engine *e, const struct func_key *k)
{
    struct sip h;
    jpe_sip_init(&h, e->seed);
    uint32_t nums[6] = {k->ns_len, k->fn_len, k->source, k->decl_start, k->decl_end, k->uniq};
    jpe_sip_bytes(&h, nums, sizeof nums);
    jpe_sip_bytes(&h, k->ns, k->ns_len);
    jpe_sip_bytes(&h, k->fn, k->fn_len);
    return jpe_sip_final(&h);
}
static uint64_t func_hash(const struct jp_engine *e, uint32_t idx)
{
    const struct jp_func *f = &e->funcs[idx];
    struct func_key k = {f->ns, f->fn, f->ns_len, f->fn_len, f->kind, f->source,
                         f->decl_start, f->decl_end, f->uniq};
    return func_hash_k(e, &k);
}
static bool func_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    const struct func_key *k = key;
    const struct jp_func *f = &e->funcs[idx];
    return f->source == k->source && f->decl_start == k->decl_start &&
           f->decl_end == k->decl_end && f->uniq == k->uniq && f->ns_len == k->ns_len &&
           f->fn_len == k->fn_len && !memcmp(f->ns, k->ns, k->ns_len) &&
           !memcmp(f->fn, k->fn, k->fn_len);
}

/* ---- chains ---------------------------------------------------------------------------- */

struct chain_key { uint32_t parent, func; };
static uint64_t chain_hash_k(const struct jp_engine *e, const struct chain_key *k)
{
    return hash2(e->seed, k->parent, k->func);
}
static uint64_t chain_hash(const struct jp_engine *e, uint32_t idx)
{
    struct chain_key k = {e->chains[idx].parent, e->chains[idx].func};
    return chain_hash_k(e, &k);
}
static bool chain_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    const struct chain_key *k = key;
    return e->chains[idx].parent == k->parent && e->chains[idx].func == k->func;
}

/* ---- definitions ----------------------------------------------------------------------- */

int jpe_on_run_start(struct jp_engine *e, const struct jp_rec_run_start *r, const char **why)
{
    if (r->format_version != JP_FORMAT_VERSION && r->format_version != JP_FORMAT_VERSION_SEQ) {
        *why = "unsupported record format version";
        return -EPROTO;
    }
    e->seq_stream = r->format_version == JP_FORMAT_VERSION_SEQ;
    if (r->mode != JP_MODE_CPU && r->mode != JP_MODE_MEMORY) {
        *why = "RUN_START names no known mode";
        return -EPROTO;
    }
    e->start = *r;
    e->mode = r->mode;
    e->mem_fast = r->mode == JP_MODE_MEMORY && e->live_exact && !e->no_fast_paths;
    e->cpu_fast = r->mode == JP_MODE_CPU && !e->detail_stopped && !e->no_fast_paths;
    e->budget = r->mode == JP_MODE_CPU ? r->cpu_budget_bytes : r->retention_budget_bytes;
    e->started = e->open = true;
    return 0;
}

/* A logical path the report may show: relative, '/'-separated, no empty, "." or ".."
 * segment, no backslash, drive letter or control character. Anything else would be an
 * absolute or unauthorized path, which never reaches a report. */
static bool path_authorized(const char *p, size_t n)
{
    if (!n || p[0] == '/' || (n >= 2 && p[1] == ':'))
        return false;
    size_t seg = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == '/') {
            size_t len = i - seg;
            const char *s = p + seg;
            if (!len || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
                return false;
            seg = i + 1;
            continue;
        }
        if ((unsigned char)p[i] < 0x20 || p[i] == '\\' || p[i] == 0x7f)
            return false;
    }
    return true;
}

int jpe_on_source_def(struct jp_engine *e, const uint8_t *rec)
{
    struct jp_rec_source_def r;
    memcpy(&r, rec, sizeof r);
    if (r.source_id != e->nsource_defined + 1u)
        return violation(e); /* not dense */
    e->nsource_defined++;
    if (e->detail_stopped)
        return 0;
    int rc = jpe_vec_grow(e, (void **)&e->source_map, &e->source_map_cap, e->nsource_defined + 1u,
                      sizeof *e->source_map);
    if (rc < 0)
        return jpe_budget_fail(e, rc);
    struct source_key k = {r.origin, (const char *)rec + sizeof r, r.path_len};
    if (r.origin < JP_ORIGIN_PROJECT || r.origin > JP_ORIGIN_STDLIB ||
        !path_authorized(k.path, k.len)) {
        /* The id stays defined (later ids keep their meaning) but names no source: frames
         * in it report their location unavailable. */
        e->source_map[r.source_id] = 0;
        e->nsource_stored = e->nsource_defined;
        return violation(e);
    }
    if (!e->nsources)
        e->nsources = 1; /* index 0 means "unavailable" */
    uint64_t h = source_hash_k(e, &k);
    struct intern in = {&e->source_tab, source_hash, source_eq, (void **)&e->sources,
                        &e->sources_cap, e->nsources, UINT32_MAX, sizeof *e->sources};
    uint32_t idx;
    if ((rc = intern_find(e, &in, h, &k, &idx)) < 0)
        return jpe_budget_fail(e, rc);
    if (rc) {
        char *path;
        if ((rc = jpe_budget_dup(e, k.path, k.len, &path)) < 0)
            return jpe_budget_fail(e, rc);
        e->sources[idx] = (struct jp_source){path, k.len, r.origin, r.source_id};
        e->nsources++;
        jpe_intern_put(&e->source_tab, h, idx);
    }
    e->source_map[r.source_id] = idx;
    e->nsource_stored = e->nsource_defined;
    return 0;
}

int jpe_on_frame_def(struct jp_engine *e, const uint8_t *rec)
{
    struct jp_rec_frame_def r;
    memcpy(&r, rec, sizeof r);
    if (r.frame_id != e->nframe_defined + 1u)
        return violation(e);
    if (r.source_id > e->nsource_defined)
        return violation(e); /* names an undefined source */
    e->nframe_defined++;
    if (e->detail_stopped || r.source_id > e->nsource_stored)
        return jpe_stop_detail(e);
    struct func_key k = {
        .ns = (const char *)rec + sizeof r, .ns_len = r.ns_len,
        .fn = (const char *)rec + sizeof r + r.ns_len, .fn_len = r.fn_len,
        .kind = r.kind,
        .source = r.source_id ? e->source_map[r.source_id] : 0,
        /* Two native frames without a symbol are never one function because their display
         * names match (the contract forbids merging unknown native addresses). */
        .uniq = r.kind == JP_FRAME_UNAVAILABLE_SYMBOL ? r.frame_id : 0,
    };
    if (k.source) { /* without a source the declaration span means nothing */
        k.decl_start = r.decl_start;
        k.decl_end = r.decl_end;
    }
    int rc = jpe_vec_grow(e, (void **)&e->frame_func, &e->frame_cap, e->nframe_defined + 1u,
                      sizeof *e->frame_func);
    if (rc < 0)
        return jpe_budget_fail(e, rc);
    uint64_t h = func_hash_k(e, &k);
    struct intern in = {&e->func_tab, func_hash, func_eq, (void **)&e->funcs, &e->funcs_cap,
                        e->nfuncs, UINT32_MAX, sizeof *e->funcs};
    uint32_t idx;
    if ((rc = intern_find(e, &in, h, &k, &idx)) < 0)
        return jpe_budget_fail(e, rc);
    if (rc) {
        char *ns, *fn = NULL;
        if ((rc = jpe_budget_dup(e, k.ns, k.ns_len, &ns)) < 0 ||
            (rc = jpe_budget_dup(e, k.fn, k.fn_len, &fn)) < 0) {
            if (ns) {
                free(ns);
                e->used -= k.ns_len + 1u;
            }
            return jpe_budget_fail(e, rc);
        }
        struct jp_func *f = &e->funcs[idx];
        memset(f, 0, sizeof *f);
        f->ns = ns; f->ns_len = k.ns_len;
        f->fn = fn; f->fn_len = k.fn_len;
        f->kind = r.kind;
        f->source = k.source;
        f->origin = k.source ? e->sources[k.source].origin : JP_ORIGIN_NONE;
        f->decl_start = k.decl_start;
        f->decl_end = k.decl_end;
        f->decl_line = k.source ? r.decl_line : 0;
        f->uniq = k.uniq;
        e->nfuncs++;
        jpe_intern_put(&e->func_tab, h, idx);
    }
    e->frame_func[r.frame_id] = idx;
    e->nframe_stored = e->nframe_defined;
    return 0;
}

int jpe_on_node_def(struct jp_engine *e, const struct jp_rec_node_def *r)
{
    if (r->node_id != e->nnode_defined + 1u || r->parent > e->nnode_defined ||
        r->frame_id == JP_ID_NONE || r->frame_id > e->nframe_defined)
        return violation(e); /* not dense, or names an undefined parent or frame */
    bool storable = !e->detail_stopped && r->parent <= e->nnode_stored &&
                    r->frame_id <= e->nframe_stored;
    uint32_t depth = 1;
    if (storable && r->parent)
        depth = e->nodes[r->parent - 1u].depth + 1u;
    if (depth > JP_MAX_DEPTH)
        return violation(e);
    /* Past the budget the parent's depth is unknown; such a node carries no detail anyway. */
    e->nnode_defined++;
    if (!storable)
        return jpe_stop_detail(e);
    int rc = jpe_vec_grow(e, (void **)&e->nodes, &e->node_cap, e->nnode_defined, sizeof *e->nodes);
    if (rc < 0)
        return jpe_budget_fail(e, rc);
    uint32_t func = e->frame_func[r->frame_id];
    bool first = true;
    for (uint32_t p = r->parent; p; p = e->nodes[p - 1u].parent)
        if (e->nodes[p - 1u].func == func) {
            first = false;
            break;
        }
    struct chain_key k = {r->parent ? e->nodes[r->parent - 1u].chain + 1u : 0, func};
    uint64_t h = chain_hash_k(e, &k);
    struct intern in = {&e->chain_tab, chain_hash, chain_eq, (void **)&e->chains,
                        &e->chains_cap, e->nchains, UINT32_MAX, sizeof *e->chains};
    uint32_t ci;
    if ((rc = intern_find(e, &in, h, &k, &ci)) < 0)
        return jpe_budget_fail(e, rc);
    if (rc) {
        e->chains[ci] = (struct jp_chain){.parent = k.parent, .func = func, .depth = depth};
        e->nchains++;
        jpe_intern_put(&e->chain_tab, h, ci);
    }
    e->nodes[r->node_id - 1u] = (struct jp_node){
        r->parent, func, ci, (uint8_t)depth, first,
        e->funcs[func].kind == JP_FRAME_TRUNCATED, 0, 0, 0, 0};
    e->nnode_stored = e->nnode_defined;
    return 0;
}
