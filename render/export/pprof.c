/* pprof: the profile.proto message (profile.proto here, compiled by protoc-c at build time),
 * gzip-compressed, with Go's sample-type names so pprof backends read it unconfigured:
 *   CPU     samples/count and cpu/nanoseconds (samples x the period of the requested rate);
 *   memory  alloc_objects/count, alloc_space/bytes, and inuse_objects/count and
 *           inuse_space/bytes (allocations and bytes retained at the end) while live tracking
 *           is exact.
 * One function and one location per frame (its declaration line; the engine keeps no call
 * line per chain), ids from 1 in the order the frames first appear in the stacks;
 * string_table[0] is "". Samples list their locations leaf first, as the format wants. No
 * time stamp, and the gzip header carries none, so the bytes depend on the profile only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "export_internal.h"
#include "profile.pb-c.h"

typedef Jettprof__Pprof__Profile pb_profile;
typedef Jettprof__Pprof__ValueType pb_vtype;
typedef Jettprof__Pprof__Sample pb_sample;
typedef Jettprof__Pprof__Location pb_location;
typedef Jettprof__Pprof__Line pb_line;
typedef Jettprof__Pprof__Function pb_function;

#define MAX_TYPES 4u

struct strtab {
    char **s;
    size_t n, cap;
    bool failed;
};

/* Adds a copy of s[0..n) and returns its index (0 once out of memory: failed latches). */
static int64_t str_add(struct strtab *t, const char *s, size_t n)
{
    if (t->failed)
        return 0;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2u : 64u;
        char **p = realloc(t->s, cap * sizeof *p);
        if (!p) {
            t->failed = true;
            return 0;
        }
        t->s = p;
        t->cap = cap;
    }
    char *c = malloc(n + 1u);
    if (!c) {
        t->failed = true;
        return 0;
    }
    memcpy(c, s, n);
    c[n] = '\0';
    t->s[t->n] = c;
    return (int64_t)t->n++;
}

static int64_t str_lit(struct strtab *t, const char *s)
{
    return str_add(t, s, strlen(s));
}

static void str_free(struct strtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->s[i]);
    free(t->s);
}

/* gzip (RFC 1952) of in, with no file name and a zero time stamp. */
static int gzip_bytes(const uint8_t *in, size_t n, char **out, size_t *len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    uLong cap = deflateBound(&z, (uLong)n);
    uint8_t *buf = malloc(cap ? cap : 1u);
    if (!buf) {
        deflateEnd(&z);
        return -ENOMEM;
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)cap;
    int zr = deflate(&z, Z_FINISH);
    size_t got = cap - z.avail_out;
    deflateEnd(&z);
    if (zr != Z_STREAM_END) {
        free(buf);
        return zr == Z_MEM_ERROR ? -ENOMEM : -EIO;
    }
    *out = (char *)buf;
    *len = got;
    return 0;
}

/* The run's stacks for each sample type; every list is in the one stack order. */
struct types {
    struct jpx_prof prof[MAX_TYPES];
    const char *name[MAX_TYPES], *unit[MAX_TYPES];
    uint64_t mul[MAX_TYPES]; /* value multiplier (cpu/nanoseconds: the period) */
    uint32_t n;
};

static int stack_cmp(const struct jp_engine_view *v, const struct jpx_stack *a,
                     const struct jpx_stack *b)
{
    if (a->chain == b->chain)
        return 0;
    if (a->chain == JPX_STACK_UNATTRIBUTED)
        return 1;
    if (b->chain == JPX_STACK_UNATTRIBUTED)
        return -1;
    return jp_chain_lex_cmp(v, a->chain, b->chain);
}

static int types_build(const struct jpx_prof *p, uint32_t which, struct types *t)
{
    memset(t, 0, sizeof *t);
    const struct jp_engine_view *v = p->v;
    if (v->mode == JP_MODE_CPU) {
        uint32_t rate = v->start->rate_hz ? v->start->rate_hz : 1u;
        t->prof[0] = t->prof[1] = *p;
        t->name[0] = "samples", t->unit[0] = "count", t->mul[0] = 1;
        t->name[1] = "cpu", t->unit[1] = "nanoseconds", t->mul[1] = 1000000000u / rate;
        t->n = 2;
        return 0;
    }
    static const struct { uint32_t value; const char *name, *unit; } mem[] = {
        {JP_XVAL_ALLOC_COUNT, "alloc_objects", "count"},
        {JP_XVAL_ALLOC_BYTES, "alloc_space", "bytes"},
        {JP_XVAL_RETAINED_COUNT, "inuse_objects", "count"},
        {JP_XVAL_RETAINED_BYTES, "inuse_space", "bytes"},
    };
    for (uint32_t i = 0; i < sizeof mem / sizeof mem[0]; i++) {
        if ((which == JP_PPROF_COUNTS && i >= 2u) || (which == JP_PPROF_INUSE && i < 2u))
            continue;
        if (mem[i].value == p->value) {
            t->prof[t->n] = *p;
            t->prof[t->n].st = NULL; /* borrowed: not freed with the others */
        } else {
            int rc = jpx_prof_since(p->r, mem[i].value, p->base, &t->prof[t->n]);
            if (rc == -ENODATA)
                continue; /* retained bytes unavailable: no in-use type */
            if (rc < 0)
                return rc;
        }
        t->name[t->n] = mem[i].name, t->unit[t->n] = mem[i].unit, t->mul[t->n] = 1;
        t->n++;
    }
    return 0;
}

static void types_free(struct types *t, const struct jpx_prof *p)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (p->v->mode == JP_MODE_MEMORY && t->prof[i].st)
            jpx_prof_free(&t->prof[i]);
}

static const struct jpx_stack *types_stack(const struct types *t, const struct jpx_prof *p,
                                           uint32_t i, uint32_t k)
{
    const struct jpx_prof *x = &t->prof[i];
    if (p->v->mode == JP_MODE_MEMORY && x->value == p->value)
        x = p;
    return k < x->n ? &x->st[k] : NULL;
}

/* The samples past max (by their default type's value, largest kept, ties in stack order)
 * merged into the last one kept, which becomes the single frame <cut>: the sums stay. Returns
 * the new count; *cut gets how many were merged into it. */
static int by_value_desc(const void *a, const void *b, void *arg)
{
    const uint32_t k = *(const uint32_t *)arg;
    const pb_sample *x = *(pb_sample *const *)a, *y = *(pb_sample *const *)b;
    if (x->value[k] != y->value[k])
        return x->value[k] > y->value[k] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static uint32_t cut_samples(pb_sample **sp, uint32_t n, uint32_t max, uint32_t k, uint32_t ntypes,
                            uint64_t cut_loc, uint64_t *cut)
{
    if (max == 0 || n <= max)
        return n;
    qsort_r(sp, n, sizeof *sp, by_value_desc, &k);
    pb_sample *last = sp[max - 1u];
    for (uint32_t i = max; i < n; i++)
        for (uint32_t t = 0; t < ntypes; t++)
            last->value[t] += sp[i]->value[t];
    last->location_id[0] = cut_loc;
    last->n_location_id = 1;
    *cut += n - (max - 1u);
    return max;
}

int jpx_write_pprof(const struct jpx_prof *p, const struct jp_export_opts *o, char **out,
                    size_t *len)
{
    const uint64_t max_bytes = o->max_bytes;
    const struct jp_engine_view *v = p->v;
    struct types t;
    int rc = types_build(p, v->mode == JP_MODE_MEMORY ? o->pprof_types : JP_PPROF_ALL, &t);
    struct strtab st = {0};
    uint32_t nf = v->nfuncs + 2u; /* + <unattributed>, + <cut> */
    uint64_t *fid = calloc(nf, sizeof *fid);        /* function id per function, 0: unused */
    int64_t *src_str = calloc(v->nsources + 1u, sizeof *src_str);
    size_t nsamp_cap = 0;
    for (uint32_t i = 0; i < t.n; i++)
        nsamp_cap += t.prof[i].n;
    pb_sample *samples = calloc(nsamp_cap + 1u, sizeof *samples);
    pb_sample **sample_ptr = calloc(nsamp_cap + 1u, sizeof *sample_ptr);
    uint64_t *locs = calloc((nsamp_cap + 1u) * JP_MAX_DEPTH, sizeof *locs);
    int64_t *vals = calloc((nsamp_cap + 1u) * MAX_TYPES, sizeof *vals);
    pb_function *funcs = calloc(nf, sizeof *funcs);
    pb_function **func_ptr = calloc(nf, sizeof *func_ptr);
    pb_location *locations = calloc(nf, sizeof *locations);
    pb_location **loc_ptr = calloc(nf, sizeof *loc_ptr);
    pb_line *lines = calloc(nf, sizeof *lines);
    pb_line **line_ptr = calloc(nf, sizeof *line_ptr);
    uint8_t *packed = NULL;
    if (rc == 0 && !(fid && src_str && samples && sample_ptr && locs && vals && funcs &&
                     func_ptr && locations && loc_ptr && lines && line_ptr))
        rc = -ENOMEM;
    if (rc < 0)
        goto done;

    str_lit(&st, "");
    pb_vtype vt[MAX_TYPES], *vt_ptr[MAX_TYPES], period_type;
    for (uint32_t i = 0; i < t.n; i++) {
        jettprof__pprof__value_type__init(&vt[i]);
        vt[i].type = str_lit(&st, t.name[i]);
        vt[i].unit = str_lit(&st, t.unit[i]);
        vt_ptr[i] = &vt[i];
    }
    jettprof__pprof__value_type__init(&period_type);
    if (v->mode == JP_MODE_CPU) {
        period_type.type = vt[1].type;
        period_type.unit = vt[1].unit;
    } else {
        period_type.type = str_lit(&st, "space");
        period_type.unit = str_lit(&st, "bytes");
    }
    for (uint32_t s = 1; s < v->nsources; s++)
        src_str[s] = str_add(&st, v->sources[s].path, v->sources[s].path_len);

    /* Walk the stacks of every type at once (each list is in the one order), one sample per
     * distinct stack with a value of every type. */
    uint32_t pos[MAX_TYPES] = {0}, nsamp = 0, nfunc = 0;
    uint32_t seq[JP_MAX_DEPTH];
    struct jp_buf name = {0};
    for (;;) {
        const struct jpx_stack *next = NULL;
        for (uint32_t i = 0; i < t.n; i++) {
            const struct jpx_stack *s = types_stack(&t, p, i, pos[i]);
            if (s && (!next || stack_cmp(v, s, next) < 0))
                next = s;
        }
        if (!next)
            break;
        pb_sample *sm = &samples[nsamp];
        jettprof__pprof__sample__init(sm);
        sm->value = &vals[(size_t)nsamp * MAX_TYPES];
        sm->n_value = t.n;
        for (uint32_t i = 0; i < t.n; i++) {
            const struct jpx_stack *s = types_stack(&t, p, i, pos[i]);
            if (s && stack_cmp(v, s, next) == 0) {
                sm->value[i] = (int64_t)(s->value * t.mul[i]);
                pos[i]++;
            }
        }
        uint32_t depth = jpx_stack_frames(p, next, seq);
        sm->location_id = &locs[(size_t)nsamp * JP_MAX_DEPTH];
        sm->n_location_id = depth;
        for (uint32_t k = 0; k < depth; k++) {
            uint32_t f = seq[k];
            if (!fid[f]) {
                fid[f] = ++nfunc;
                pb_function *fn = &funcs[nfunc - 1u];
                jettprof__pprof__function__init(fn);
                fn->id = nfunc;
                name.len = 0;
                jp_buf_put(&name, "", 0);
                if (f == v->nfuncs)
                    JP_BUF_LIT(&name, JPX_FRAME_UNATTRIBUTED);
                else
                    jp_wr_qualified(&name, &v->funcs[f]);
                st.failed |= name.failed;
                fn->name = fn->system_name = name.failed ? 0 : str_add(&st, name.p, name.len);
                if (f < v->nfuncs && v->funcs[f].source && v->funcs[f].source < v->nsources) {
                    fn->filename = src_str[v->funcs[f].source];
                    fn->start_line = v->funcs[f].decl_line;
                }
                func_ptr[nfunc - 1u] = fn;
                pb_line *ln = &lines[nfunc - 1u];
                jettprof__pprof__line__init(ln);
                ln->function_id = nfunc;
                ln->line = fn->start_line;
                line_ptr[nfunc - 1u] = ln;
                pb_location *lc = &locations[nfunc - 1u];
                jettprof__pprof__location__init(lc);
                lc->id = nfunc;
                lc->line = &line_ptr[nfunc - 1u];
                lc->n_line = 1;
                loc_ptr[nfunc - 1u] = lc;
            }
            sm->location_id[depth - 1u - k] = fid[f]; /* leaf first */
        }
        sample_ptr[nsamp++] = sm;
    }
    jp_buf_free(&name);
    if (st.failed) {
        rc = -ENOMEM;
        goto done;
    }
    pb_profile prof;
    jettprof__pprof__profile__init(&prof);
    prof.sample_type = vt_ptr;
    prof.n_sample_type = t.n;
    prof.sample = sample_ptr;
    prof.n_sample = nsamp;
    prof.location = loc_ptr;
    prof.n_location = nfunc;
    prof.function = func_ptr;
    prof.n_function = nfunc;
    prof.string_table = st.s;
    prof.n_string_table = st.n;
    prof.duration_nanos = (int64_t)v->wall_ns;
    if (o->time_nanos) {
        prof.time_nanos = o->time_nanos;
        prof.duration_nanos = o->duration_nanos;
    }
    if (o->pprof_types == JP_PPROF_INUSE && v->mode == JP_MODE_MEMORY)
        prof.duration_nanos = 0; /* a point in time: no receiver sums it as a delta */
    prof.period_type = &period_type;
    prof.period = (int64_t)(v->mode == JP_MODE_CPU ? t.mul[1] : 1u);
    uint32_t deflt = 0;
    for (uint32_t i = 0; i < t.n; i++)
        if (v->mode == JP_MODE_CPU ? i == 1u : t.prof[i].value == p->value) {
            prof.default_sample_type = vt[i].type;
            deflt = i;
        }
    /* The receiver's limits: at most max_samples samples, at most max_raw_bytes before gzip;
     * what does not fit is merged into one <cut> sample, never dropped. */
    uint64_t cut = 0, cut_loc = 0;
    if ((o->max_samples && nsamp > o->max_samples) || o->max_raw_bytes) {
        pb_function *fn = &funcs[nfunc];
        jettprof__pprof__function__init(fn);
        fn->id = nfunc + 1u;
        fn->name = fn->system_name = str_lit(&st, JPX_FRAME_CUT);
        pb_line *ln = &lines[nfunc];
        jettprof__pprof__line__init(ln);
        ln->function_id = fn->id;
        pb_location *lc = &locations[nfunc];
        jettprof__pprof__location__init(lc);
        lc->id = fn->id;
        cut_loc = lc->id;
        if (st.failed) {
            rc = -ENOMEM;
            goto done;
        }
        prof.string_table = st.s; /* the table grew by the frame's name (and may have moved) */
        prof.n_string_table = st.n;
    }
    uint32_t max_samples = o->max_samples;
    for (;;) {
        uint32_t kept = cut_samples(sample_ptr, nsamp, max_samples, deflt, t.n, cut_loc, &cut);
        if (kept != nsamp) {
            nsamp = kept;
            prof.n_sample = nsamp;
            if (!prof.n_location || loc_ptr[prof.n_location - 1u] != &locations[nfunc]) {
                func_ptr[nfunc] = &funcs[nfunc];
                line_ptr[nfunc] = &lines[nfunc];
                locations[nfunc].line = &line_ptr[nfunc];
                locations[nfunc].n_line = 1;
                loc_ptr[nfunc] = &locations[nfunc];
                prof.n_location = prof.n_function = nfunc + 1u;
            }
        }
        if (!o->max_raw_bytes || nsamp <= 1u ||
            jettprof__pprof__profile__get_packed_size(&prof) <= o->max_raw_bytes)
            break;
        max_samples = nsamp / 2u; /* halve until it fits */
    }
    if (o->cut)
        *o->cut += cut;
    size_t plen = jettprof__pprof__profile__get_packed_size(&prof);
    if (max_bytes && plen > max_bytes) {
        rc = -EFBIG;
        goto done;
    }
    packed = malloc(plen ? plen : 1u);
    if (!packed) {
        rc = -ENOMEM;
        goto done;
    }
    jettprof__pprof__profile__pack(&prof, packed);
    rc = gzip_bytes(packed, plen, out, len);
    if (rc == 0 && max_bytes && *len > max_bytes) {
        free(*out);
        *out = NULL;
        *len = 0;
        rc = -EFBIG;
    }
done:
    types_free(&t, p);
    str_free(&st);
    free(packed);
    free(fid);
    free(src_str);
    free(samples);
    free(sample_ptr);
    free(locs);
    free(vals);
    free(funcs);
    free(func_ptr);
    free(locations);
    free(loc_ptr);
    free(lines);
    free(line_ptr);
    return rc;
}
