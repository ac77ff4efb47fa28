/* Interning: sources, frames and call-chain nodes get dense run-local ids (from 1, in
 * definition order) and are announced in the stream before anything names them. Definitions
 * wait for ring room (bounded); losing one marks the run collector-failed, because every later
 * record naming it would dangle.
 *
 * All tables are touched only inside a producer section (see produce.c), so they need no lock
 * of their own. The node table is probed on every enter, so it is a flat open-addressing table
 * of packed (parent, frame) keys; sources and frames are rare and use a set of ids over their
 * entry arrays.
 */
#include "agent.h"
#include "protocol/records.h" /* JP_STATUS_*: the statuses of the wire and the writers */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The public values of jettprof.h are the internal ones, passed through unchanged: tie each to
 * its JP_* twin so neither list can drift from the other. */
#define JP_SAME(pub, internal) _Static_assert((pub) == (internal), #pub " is " #internal)
JP_SAME(JETTPROF_MODE_CPU, JP_MODE_CPU);
JP_SAME(JETTPROF_MODE_MEMORY, JP_MODE_MEMORY);
JP_SAME(JETTPROF_BACKEND_INTERPRETER, JP_BACKEND_INTERPRETER);
JP_SAME(JETTPROF_BACKEND_VM, JP_BACKEND_VM);
JP_SAME(JETTPROF_CAP_CPU_TICK_SOURCE, JP_CAP_CPU_TICK_SOURCE);
JP_SAME(JETTPROF_CAP_SAFE_STACK_CAPTURE, JP_CAP_SAFE_STACK_CAPTURE);
JP_SAME(JETTPROF_CAP_THREAD_REGISTRATION, JP_CAP_THREAD_REGISTRATION);
JP_SAME(JETTPROF_CAP_TASK_ATTRIBUTION, JP_CAP_TASK_ATTRIBUTION);
JP_SAME(JETTPROF_CAP_SOURCE_SPANS, JP_CAP_SOURCE_SPANS);
JP_SAME(JETTPROF_CAP_PROCESS_CPU_TIME, JP_CAP_PROCESS_CPU_TIME);
JP_SAME(JETTPROF_CAP_HEAP_ALLOCATION_HOOKS, JP_CAP_HEAP_ALLOCATION_HOOKS);
JP_SAME(JETTPROF_CAP_FREE_AND_RESIZE_EVENTS, JP_CAP_FREE_AND_RESIZE_EVENTS);
JP_SAME(JETTPROF_OUT_HUMAN, JP_OUT_HUMAN);
JP_SAME(JETTPROF_OUT_TOON, JP_OUT_TOON);
JP_SAME(JETTPROF_OUT_VERBOSE, JP_OUT_VERBOSE);
JP_SAME(JETTPROF_ORIGIN_PROJECT, JP_ORIGIN_PROJECT);
JP_SAME(JETTPROF_ORIGIN_DEPENDENCY, JP_ORIGIN_DEPENDENCY);
JP_SAME(JETTPROF_ORIGIN_STDLIB, JP_ORIGIN_STDLIB);
JP_SAME(JETTPROF_FRAME_FUNCTION, JP_FRAME_FUNCTION);
JP_SAME(JETTPROF_FRAME_RUNTIME_BUCKET, JP_FRAME_RUNTIME_BUCKET);
JP_SAME(JETTPROF_FRAME_UNAVAILABLE_SYMBOL, JP_FRAME_UNAVAILABLE_SYMBOL);
JP_SAME(JETTPROF_STATE_JETT, JP_STATE_JETT);
JP_SAME(JETTPROF_STATE_RUNTIME, JP_STATE_RUNTIME);
JP_SAME(JETTPROF_STATE_WAITING, JP_STATE_WAITING);
JP_SAME(JETTPROF_TERM_RETURNED, JP_TERM_RETURNED);
JP_SAME(JETTPROF_TERM_RUNTIME_ERROR, JP_TERM_RUNTIME_ERROR);
JP_SAME(JETTPROF_TERM_INTERRUPTED, JP_TERM_INTERRUPTED);
JP_SAME(JETTPROF_STATUS_COMPLETE, JP_STATUS_COMPLETE);
JP_SAME(JETTPROF_STATUS_PARTIAL, JP_STATUS_PARTIAL);
JP_SAME(JETTPROF_STATUS_UNAVAILABLE, JP_STATUS_UNAVAILABLE);
JP_SAME(JETTPROF_ID_UNAVAILABLE, JP_ID_UNAVAILABLE);
#undef JP_SAME

#define NODE_INITIAL_BITS 12u
#define SET_INITIAL_CAP 256u

/* ---- validation ---- */

int jp_path_check(const char *path, size_t len, const char **why)
{
    const char *w = NULL;
    if (len == 0)
        w = "source path is empty";
    else if (len > JP_PATH_MAX)
        w = "source path is longer than 1024 bytes";
    else if (path[0] == '/')
        w = "source path is absolute";
    else if (path[0] == '~')
        w = "source path is relative to a home directory";
    else if (len >= 2 && path[1] == ':' &&
             ((path[0] >= 'A' && path[0] <= 'Z') || (path[0] >= 'a' && path[0] <= 'z')))
        w = "source path starts with a drive letter";
    else if (jp_utf8_check(path, len) < 0)
        w = "source path is not valid UTF-8";
    if (!w) {
        size_t seg = 0;
        for (size_t i = 0; i <= len && !w; i++) {
            unsigned char c = i < len ? (unsigned char)path[i] : '/';
            if (c < 0x20 || c == 0x7f)
                w = "source path contains a control character";
            else if (c == '\\')
                w = "source path contains a backslash";
            else if (c == '/') {
                size_t n = i - seg;
                if (n == 0)
                    w = "source path has an empty segment";
                else if ((n == 1 && path[seg] == '.') ||
                         (n == 2 && path[seg] == '.' && path[seg + 1] == '.'))
                    w = "source path has a '.' or '..' segment";
                seg = i + 1;
            }
        }
    }
    if (why)
        *why = w ? w : "";
    return w ? -EINVAL : 0;
}

static int name_check(const char *s, size_t *len, const char *what_missing,
                      const char *what_long, const char *what_utf8)
{
    if (!s) {
        jp_set_reason(what_missing);
        return -EINVAL;
    }
    size_t n = strnlen(s, JP_NAME_MAX + 1u);
    if (n == 0) {
        jp_set_reason(what_missing);
        return -EINVAL;
    }
    if (n > JP_NAME_MAX) {
        jp_set_reason(what_long);
        return -EINVAL;
    }
    if (jp_utf8_check(s, n) < 0) {
        jp_set_reason(what_utf8);
        return -EINVAL;
    }
    *len = n;
    return 0;
}

/* ---- hashing ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_SEED 0xcbf29ce484222325ull

static int idset_init(struct jp_idset *s)
{
    s->slots = calloc(SET_INITIAL_CAP, sizeof *s->slots);
    s->cap = SET_INITIAL_CAP;
    s->count = 0;
    return s->slots ? 0 : -ENOMEM;
}

/* ---- sources ---- */

static uint64_t source_hash(uint32_t origin, const char *path, size_t len)
{
    return fnv(fnv(FNV_SEED, &origin, sizeof origin), path, len);
}

static uint32_t source_find(const struct jettprof_run *run, uint32_t origin, const char *path,
                            size_t len, uint32_t *slot)
{
    uint32_t mask = run->source_set.cap - 1u;
    uint32_t i = (uint32_t)source_hash(origin, path, len) & mask;
    for (;;) {
        uint32_t id = run->source_set.slots[i];
        if (id == 0) {
            *slot = i;
            return 0;
        }
        const struct jp_agent_source *s = &run->sources[id - 1u];
        if (s->origin == origin && s->len == len && memcmp(s->path, path, len) == 0)
            return id;
        i = (i + 1u) & mask;
    }
}

/* Doubles a set, reinserting with the entry hash the caller supplies. */
static int idset_grow(struct jettprof_run *run, struct jp_idset *set,
                      uint64_t (*hash)(const struct jettprof_run *, uint32_t id))
{
    uint32_t cap = set->cap * 2u;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (uint32_t i = 0; i < set->cap; i++) {
        uint32_t id = set->slots[i];
        if (!id)
            continue;
        uint32_t j = (uint32_t)hash(run, id) & (cap - 1u);
        while (slots[j])
            j = (j + 1u) & (cap - 1u);
        slots[j] = id;
    }
    free(set->slots);
    set->slots = slots;
    set->cap = cap;
    return 0;
}

static uint64_t source_hash_id(const struct jettprof_run *run, uint32_t id)
{
    const struct jp_agent_source *s = &run->sources[id - 1u];
    return source_hash(s->origin, s->path, s->len);
}

int jettprof_source(jettprof_run *run, uint32_t origin, const char *logical_path, uint32_t *id)
{
    if (!run || !id) {
        jp_set_reason("source interning needs a run and an output id");
        return -EINVAL;
    }
    if (origin < JETTPROF_ORIGIN_PROJECT || origin > JETTPROF_ORIGIN_STDLIB) {
        jp_set_reason("source origin is not project, dependency or stdlib");
        return -EINVAL;
    }
    if (!logical_path) {
        jp_set_reason("source path is missing");
        return -EINVAL;
    }
    size_t len = strnlen(logical_path, JP_PATH_MAX + 1u);
    const char *why;
    if (jp_path_check(logical_path, len, &why) < 0) {
        jp_set_reason(why);
        return -EINVAL;
    }
    int r = 0;
    enum jp_sect s = jp_sect_enter(run, NULL);
    uint32_t slot;
    uint32_t found = source_find(run, origin, logical_path, len, &slot);
    if (found) {
        *id = found;
        goto out;
    }
    if (run->nsources >= JP_AGENT_MAX_SOURCES) {
        jp_set_reason("too many sources in this run");
        r = -ENOSPC;
        goto out;
    }
    if ((run->source_set.count + 1u) * 2u > run->source_set.cap) {
        /* Grown before the insert, so the set is never more than half full. */
        if (idset_grow(run, &run->source_set, source_hash_id) < 0) {
            r = -ENOMEM;
            goto out;
        }
        (void)source_find(run, origin, logical_path, len, &slot);
    }
    if (run->nsources == run->sources_cap) {
        uint32_t cap = run->sources_cap ? run->sources_cap * 2u : 64u;
        struct jp_agent_source *ns = realloc(run->sources, cap * sizeof *ns);
        if (!ns) {
            r = -ENOMEM;
            goto out;
        }
        run->sources = ns;
        run->sources_cap = cap;
    }
    char *copy = malloc(len);
    if (!copy) {
        r = -ENOMEM;
        goto out;
    }
    memcpy(copy, logical_path, len);
    uint32_t nid = run->nsources + 1u;
    run->sources[nid - 1u] = (struct jp_agent_source){origin, (uint16_t)len, copy};
    run->nsources = nid;
    run->source_set.slots[slot] = nid;
    run->source_set.count++;
    uint32_t size = (uint32_t)(sizeof(struct jp_rec_source_def) + len);
    struct jp_rec_source_def *p = jp_push_reserve(run, size, JP_WAIT_META);
    if (p) {
        *p = (struct jp_rec_source_def){
            .h = {JP_REC_SOURCE_DEF, (uint16_t)size},
            .source_id = nid,
            .origin = (uint8_t)origin,
            .path_len = (uint16_t)len,
        };
        memcpy(p + 1, logical_path, len);
        jp_push_commit(run, 1);
    }
    /* A lost definition already marked the run collector-failed; the id stays valid locally
     * so the program runs on unchanged. */
    *id = nid;
out:
    jp_sect_leave(run, s);
    return r;
}

/* ---- frames ---- */

static uint64_t frame_hash(const struct jettprof_frame_desc *d, const char *ns, size_t ns_len,
                           const char *fn, size_t fn_len)
{
    uint32_t fixed[6] = {d->kind, d->source_id, d->decl_start, d->decl_end, d->decl_line,
                         d->decl_col};
    uint64_t h = fnv(FNV_SEED, fixed, sizeof fixed);
    uint16_t lens[2] = {(uint16_t)ns_len, (uint16_t)fn_len};
    h = fnv(h, lens, sizeof lens);
    h = fnv(h, ns, ns_len);
    return fnv(h, fn, fn_len);
}

static uint64_t frame_hash_id(const struct jettprof_run *run, uint32_t id)
{
    const struct jp_frame *f = &run->frames[id - 1u];
    return frame_hash(&f->d, f->names, f->ns_len, f->names + f->ns_len, f->fn_len);
}

static int frame_same(const struct jp_frame *f, const struct jettprof_frame_desc *d,
                      const char *ns, size_t ns_len, const char *fn, size_t fn_len)
{
    return f->d.kind == d->kind && f->d.source_id == d->source_id &&
           f->d.decl_start == d->decl_start && f->d.decl_end == d->decl_end &&
           f->d.decl_line == d->decl_line && f->d.decl_col == d->decl_col &&
           f->ns_len == ns_len && f->fn_len == fn_len && memcmp(f->names, ns, ns_len) == 0 &&
           memcmp(f->names + ns_len, fn, fn_len) == 0;
}

/* The slot where the frame is or would go; *id its id, or 0. */
static uint32_t frame_find(const struct jettprof_run *run, uint64_t h,
                           const struct jettprof_frame_desc *d, const char *ns, size_t ns_len,
                           const char *fn, size_t fn_len, uint32_t *id)
{
    uint32_t mask = run->frame_set.cap - 1u, i = (uint32_t)h & mask;
    for (;;) {
        uint32_t fid = run->frame_set.slots[i];
        if (!fid || frame_same(&run->frames[fid - 1u], d, ns, ns_len, fn, fn_len)) {
            *id = fid;
            return i;
        }
        i = (i + 1u) & mask;
    }
}

/* Finds or creates a frame from an already validated description. In-section. */
static int frame_intern(struct jettprof_run *run, const struct jettprof_frame_desc *d,
                        const char *ns, size_t ns_len, const char *fn, size_t fn_len,
                        uint32_t *id)
{
    uint64_t h = frame_hash(d, ns, ns_len, fn, fn_len);
    uint32_t i = frame_find(run, h, d, ns, ns_len, fn, fn_len, id);
    if (*id)
        return 0;
    if (run->nframes >= JP_AGENT_MAX_FRAMES) {
        jp_set_reason("too many frames in this run");
        return -ENOSPC;
    }
    if ((run->frame_set.count + 1u) * 2u > run->frame_set.cap) {
        if (idset_grow(run, &run->frame_set, frame_hash_id) < 0)
            return -ENOMEM;
        i = frame_find(run, h, d, ns, ns_len, fn, fn_len, id);
    }
    if (run->nframes == run->frames_cap) {
        uint32_t cap = run->frames_cap ? run->frames_cap * 2u : 256u;
        struct jp_frame *nf = realloc(run->frames, cap * sizeof *nf);
        if (!nf)
            return -ENOMEM;
        run->frames = nf;
        run->frames_cap = cap;
    }
    char *names = malloc(ns_len + fn_len);
    if (!names)
        return -ENOMEM;
    memcpy(names, ns, ns_len);
    memcpy(names + ns_len, fn, fn_len);
    uint32_t fid = run->nframes + 1u;
    struct jp_frame *f = &run->frames[fid - 1u];
    f->d = *d;
    f->d.ns = f->d.function = NULL;
    f->names = names;
    f->ns_len = (uint16_t)ns_len;
    f->fn_len = (uint16_t)fn_len;
    run->frame_set.slots[i] = fid;
    run->frame_set.count++;

    uint32_t size = (uint32_t)(sizeof(struct jp_rec_frame_def) + ns_len + fn_len);
    struct jp_rec_frame_def *p = jp_push_reserve(run, size, JP_WAIT_META);
    if (p) {
        *p = (struct jp_rec_frame_def){
            .h = {JP_REC_FRAME_DEF, (uint16_t)size},
            .frame_id = fid,
            .source_id = d->source_id,
            .decl_start = d->decl_start,
            .decl_end = d->decl_end,
            .decl_line = d->decl_line,
            .decl_col = d->decl_col,
            .kind = (uint8_t)d->kind,
            .ns_len = (uint16_t)ns_len,
            .fn_len = (uint16_t)fn_len,
        };
        memcpy((char *)(p + 1), ns, ns_len);
        memcpy((char *)(p + 1) + ns_len, fn, fn_len);
        jp_push_commit(run, 1);
    }
    /* Published last: enter() accepts the id only once its definition is in the stream. */
    run->nframes = fid;
    *id = fid;
    return 0;
}

static int tail_is_zero(const void *p, size_t from, size_t to)
{
    const unsigned char *b = p;
    for (size_t i = from; i < to; i++)
        if (b[i])
            return 0;
    return 1;
}

int jettprof_frame(jettprof_run *run, const struct jettprof_frame_desc *d, uint32_t *id)
{
    if (!run || !d || !id) {
        jp_set_reason("frame interning needs a run, a description and an output id");
        return -EINVAL;
    }
    if (d->size < sizeof *d) {
        jp_set_reason("frame description size is smaller than this library's");
        return -EINVAL;
    }
    if (d->size > sizeof *d && !tail_is_zero(d, sizeof *d, d->size)) {
        jp_set_reason("frame description uses fields this library does not know");
        return -EINVAL;
    }
    if (d->kind > JETTPROF_FRAME_UNAVAILABLE_SYMBOL) {
        jp_set_reason("frame kind is not function, runtime bucket or unavailable symbol");
        return -EINVAL;
    }
    size_t fn_len, ns_len;
    const char *ns = d->ns && d->ns[0] ? d->ns : "<root>"; /* NULL or "": no namespace */
    int r = name_check(d->function, &fn_len, "frame function name is missing or empty",
                       "frame function name is longer than 255 bytes",
                       "frame function name is not valid UTF-8");
    if (r < 0)
        return r;
    r = name_check(ns, &ns_len, "frame namespace is empty",
                   "frame namespace is longer than 255 bytes", "frame namespace is not valid UTF-8");
    if (r < 0)
        return r;
    struct jettprof_frame_desc n = *d;
    n.size = sizeof n;
    if (n.decl_end < n.decl_start) {
        jp_set_reason("frame declaration range ends before it starts");
        return -EINVAL;
    }
    /* Without a source, or when the runtime declared no source spans, the declaration is
     * unavailable: the record says so with zeros. */
    if (n.source_id == JP_ID_NONE || !(run->caps & JETTPROF_CAP_SOURCE_SPANS))
        n.decl_start = n.decl_end = n.decl_line = n.decl_col = 0;
    enum jp_sect s = jp_sect_enter(run, NULL);
    if (n.source_id > run->nsources) {
        jp_set_reason("frame names a source id this run never interned");
        r = -EINVAL;
    } else {
        r = frame_intern(run, &n, ns, ns_len, d->function, fn_len, id);
    }
    jp_sect_leave(run, s);
    return r;
}

uint32_t jp_truncated_frame(struct jettprof_run *run)
{
    if (run->trunc_frame)
        return run->trunc_frame;
    static const char ns[] = "<root>", fn[] = "<truncated-stack>";
    struct jettprof_frame_desc d = {.size = sizeof d, .kind = JP_FRAME_TRUNCATED};
    uint32_t id = 0;
    if (frame_intern(run, &d, ns, sizeof ns - 1u, fn, sizeof fn - 1u, &id) == 0)
        run->trunc_frame = id;
    return run->trunc_frame;
}

/* ---- call-chain nodes ---- */

static int nodetab_alloc(struct jp_nodetab *t, uint32_t bits)
{
    uint32_t cap = 1u << bits;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -ENOMEM;
    }
    t->keys = keys;
    t->vals = vals;
    t->cap = cap;
    t->bits = bits;
    return 0;
}

static int nodetab_grow(struct jp_nodetab *t)
{
    struct jp_nodetab n = {0};
    if (nodetab_alloc(&n, t->bits + 1u) < 0)
        return -ENOMEM;
    for (uint32_t i = 0; i < t->cap; i++) {
        if (!t->keys[i])
            continue;
        uint32_t slot = 0;
        (void)jp_node_find(&n, t->keys[i], &slot);
        n.keys[slot] = t->keys[i];
        n.vals[slot] = t->vals[i];
    }
    n.count = t->count;
    free(t->keys);
    free(t->vals);
    *t = n;
    return 0;
}

uint32_t jp_node_child(struct jettprof_run *run, uint32_t parent, uint32_t frame, int *err)
{
    struct jp_nodetab *t = &run->nodes;
    uint64_t key = jp_node_key(parent, frame);
    uint32_t slot = 0;
    uint32_t node = jp_node_find(t, key, &slot);
    if (node)
        return node;
    if (t->count >= JP_AGENT_MAX_NODES) {
        jp_set_reason("the run has too many call-chain nodes; new stacks are unavailable");
        *err = -ENOSPC;
        return JP_NODE_LOST;
    }
    if ((t->count + 1u) * 2u > t->cap) {
        if (nodetab_grow(t) < 0) {
            *err = -ENOMEM;
            return JP_NODE_LOST;
        }
        (void)jp_node_find(t, key, &slot);
    }
    node = ++t->count;
    t->keys[slot] = key;
    t->vals[slot] = node;
    struct jp_rec_node_def *p = jp_push_reserve(run, sizeof *p, JP_WAIT_META);
    if (p) {
        *p = (struct jp_rec_node_def){
            .h = {JP_REC_NODE_DEF, sizeof *p}, .node_id = node, .parent = parent,
            .frame_id = frame};
        jp_push_commit(run, 1);
    }
    return node;
}

int jp_intern_init(struct jettprof_run *run)
{
    if (idset_init(&run->source_set) < 0 || idset_init(&run->frame_set) < 0 ||
        nodetab_alloc(&run->nodes, NODE_INITIAL_BITS) < 0) {
        jp_intern_free(run);
        return -ENOMEM;
    }
    return 0;
}

void jp_intern_free(struct jettprof_run *run)
{
    for (uint32_t i = 0; i < run->nsources; i++)
        free(run->sources[i].path);
    for (uint32_t i = 0; i < run->nframes; i++)
        free(run->frames[i].names);
    free(run->sources);
    free(run->frames);
    free(run->source_set.slots);
    free(run->frame_set.slots);
    free(run->nodes.keys);
    free(run->nodes.vals);
    run->sources = NULL;
    run->frames = NULL;
    run->source_set.slots = run->frame_set.slots = NULL;
    run->nodes.keys = NULL;
    run->nodes.vals = NULL;
    run->nsources = run->nframes = 0;
}
