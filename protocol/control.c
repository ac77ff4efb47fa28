/* Control messages: msgpack encoding from one field table per message, strict incremental
 * decoding. The socket helpers (send, receive, SCM_RIGHTS) are protocol/ctlsock.c.
 *
 * Every message is a map {"t": wire name, field: value, ...}; the tables below are the whole
 * schema, used both to encode (in table order) and to decode (any order, each field exactly
 * once, nothing else). Integers are msgpack unsigned integers; error codes travel as their
 * stable word; excerpt keys are arrays [source_id, line, col]; excerpts are arrays
 * [source_id, line, col, flags, text].
 */
#include "protocol/control.h"

#include <errno.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpcheck.h"
#include "protocol/records.h"
#include "protocol/ring.h"

static const char *const ctl_names[JP_CTL_TYPE_LIMIT] = {
#define JP_X(n, s) [JP_CTL_##n] = s,
    JP_CTL_TYPES(JP_X)
#undef JP_X
};
static const char *const ctl_error_names[JP_CTLE_LIMIT] = {
#define JP_X(n, s) [JP_CTLE_##n] = s,
    JP_CTL_ERRORS(JP_X)
#undef JP_X
};

const char *jp_ctl_type_name(uint32_t type)
{
    return type < JP_CTL_TYPE_LIMIT ? ctl_names[type] : NULL;
}

const char *jp_ctl_error_name(uint32_t code)
{
    return code < JP_CTLE_LIMIT ? ctl_error_names[code] : NULL;
}

static const char *const status_format_names[] = {
#define JP_X(n, w) w,
    JP_STATUS_FORMATS(JP_X)
#undef JP_X
};

const char *jp_status_format_name(uint32_t format)
{
    return format < JP_STATUS_FORMAT_COUNT ? status_format_names[format] : NULL;
}

int jp_status_format_parse(const char *word, uint32_t count, uint32_t *format)
{
    for (uint32_t i = 0; i < count && i < JP_STATUS_FORMAT_COUNT; i++)
        if (!strcmp(word, status_format_names[i])) {
            *format = i;
            return 0;
        }
    return -EINVAL;
}

/* ---- schema ---------------------------------------------------------------------------- */

enum field_kind {
    F_U32,     /* uint32_t at off, within [lo, hi] */
    F_U64,     /* uint64_t at off */
    F_STR,     /* const char * at off, size_t length at off2 */
    F_ERRCODE, /* uint32_t enum jp_ctl_error at off, as its wire word */
    F_KEYS,    /* const struct jp_ctl_excerpt_key * at off, uint32_t count at off2 */
    F_ITEMS,   /* const struct jp_ctl_excerpt * at off, uint32_t count at off2 */
    F_U64S,    /* const uint64_t * at off, uint32_t count (<= hi) at off2 */
    F_ROWS,    /* const struct jp_ctl_top_row * at off, uint32_t count at off2 */
};

struct field {
    const char *name;
    uint8_t kind;
    uint16_t off, off2;
    uint32_t lo, hi;
    const char *missing, *wrong_type, *out_of_range, *duplicate;
};

#define OFF(path) ((uint16_t)offsetof(struct jp_ctl_msg, u.path))
#define REASONS(msg, name)                                                                        \
    "missing field " #msg "." #name, "wrong type for field " #msg "." #name,                      \
        "field " #msg "." #name " out of range", "duplicate field " #msg "." #name
#define U32(msg, name, lo, hi) {#name, F_U32, OFF(msg.name), 0, lo, hi, REASONS(msg, name)}
#define U64(msg, name) {#name, F_U64, OFF(msg.name), 0, 0, 0, REASONS(msg, name)}
#define STR(msg, name) {#name, F_STR, OFF(msg.name), OFF(msg.name##_len), 0, 0, REASONS(msg, name)}
#define ANY UINT32_MAX
#define ARR(kind, msg, name, count, hi)                                                           \
    {#name, kind, OFF(msg.name), OFF(msg.count), 0, hi, REASONS(msg, name)}

static const struct field hello_fields[] = {
    U32(hello, version, 0, ANY), /* any value: the daemon answers unsupported_version */
    U32(hello, pid, 0, ANY),
    U32(hello, mode, JP_MODE_CPU, JP_MODE_MEMORY),
    U32(hello, rate_hz, 0, ANY),
    U32(hello, threshold_bp, 0, ANY),
    U32(hello, limit, 0, ANY),
    U32(hello, outputs, 0, JP_OUT_ALL),
    U32(hello, capabilities, 0, ANY),
};
static const struct field welcome_fields[] = {U64(welcome, run_id), U64(welcome, ring_bytes)};
static const struct field ring_fields[] = {
    U32(ring, slot_count, JP_RING_MIN_SLOTS, JP_RING_MAX_SLOTS),
    U32(ring, has_capture, 0, 1),
};
static const struct field finalize_fields[] = {
    U32(finalize, termination, JP_TERM_RETURNED, JP_TERM_INTERRUPTED),
    U32(finalize, exports, 0, (1u << JP_EXPORT_FORMAT_COUNT) - 1u),
};
static const struct field export_fields[] = {
    U32(export_piece, format, 0, JP_EXPORT_FORMAT_COUNT - 1u),
    U32(export_piece, error, 0, 4095),
    U64(export_piece, total),
    U64(export_piece, offset),
    STR(export_piece, data),
};
static const struct field excerpt_request_fields[] = {
    {"keys", F_KEYS, OFF(excerpt_request.keys), OFF(excerpt_request.count), 0,
     JP_CTL_MAX_EXCERPT_KEYS, REASONS(excerpt_request, keys)},
};
static const struct field excerpts_fields[] = {
    {"items", F_ITEMS, OFF(excerpts.items), OFF(excerpts.count), 0, JP_CTL_MAX_EXCERPT_KEYS,
     REASONS(excerpts, items)},
};
static const struct field result_fields[] = {
    U32(result, status, JP_STATUS_FIRST, JP_STATUS_LAST),
    STR(result, reason),
    STR(result, human),
    STR(result, toon),
    U32(result, capture_errno, 0, 4095),
};
static const struct field show_fields[] = {
    U64(show, run_id),
    U32(show, outputs, 0, JP_OUT_HUMAN | JP_OUT_TOON),
};
static const struct field status_fields[] = {
    U32(status, format, 0, JP_STATUS_FORMAT_COUNT - 1),
};
static const struct field status_reply_fields[] = {STR(status_reply, text)};
static const struct field runs_fields[] = {
    U32(runs, format, 0, JP_RUNS_FORMAT_LAST),
    U32(runs, limit, 1, JP_CTL_MAX_RUNS_LIMIT),
};
static const struct field worker_ring_fields[] = {
    U32(worker_ring, slot_count, JP_RING_MIN_SLOTS, JP_RING_MAX_SLOTS),
};
static const struct field top_fields[] = {
    U64(top, run_id),
    U32(top, rows, 1, JP_CTL_MAX_TOP_ROWS),
};
static const struct field top_frame_fields[] = {
    U64(top_frame, run_id),
    U32(top_frame, mode, JP_MODE_CPU, JP_MODE_MEMORY),
    STR(top_frame, program),
    U64(top_frame, elapsed_ns),
    U64(top_frame, records),
    U64(top_frame, fill),
    U64(top_frame, slots),
    U64(top_frame, lost),
    U64(top_frame, violations),
    ARR(F_U64S, top_frame, figures, nfigures, JP_CTL_MAX_TOP_FIGURES),
    U64(top_frame, stretch_ns),
    ARR(F_U64S, top_frame, timeline, npoints, JP_CTL_MAX_TOP_POINTS),
    ARR(F_ROWS, top_frame, rows, nrows, JP_CTL_MAX_TOP_ROWS),
};
static const struct field error_fields[] = {
    {"code", F_ERRCODE, OFF(error.code), 0, 1, JP_CTLE_LIMIT - 1, REASONS(error, code)},
    STR(error, message),
};

struct schema {
    const struct field *fields;
    unsigned count;
    const char *unknown_field;
};
#define SCHEMA(f, msg) {f, sizeof f / sizeof f[0], "unknown field in " msg " message"}
static const struct schema schemas[JP_CTL_TYPE_LIMIT] = {
    [JP_CTL_HELLO] = SCHEMA(hello_fields, "hello"),
    [JP_CTL_WELCOME] = SCHEMA(welcome_fields, "welcome"),
    [JP_CTL_RING] = SCHEMA(ring_fields, "ring"),
    [JP_CTL_FINALIZE] = SCHEMA(finalize_fields, "finalize"),
    [JP_CTL_EXCERPT_REQUEST] = SCHEMA(excerpt_request_fields, "excerpt_request"),
    [JP_CTL_EXCERPTS] = SCHEMA(excerpts_fields, "excerpts"),
    [JP_CTL_RESULT] = SCHEMA(result_fields, "result"),
    [JP_CTL_SHOW] = SCHEMA(show_fields, "show"),
    [JP_CTL_ERROR] = SCHEMA(error_fields, "error"),
    [JP_CTL_EXPORT] = SCHEMA(export_fields, "export"),
    [JP_CTL_STATUS] = SCHEMA(status_fields, "status"),
    [JP_CTL_STATUS_REPLY] = SCHEMA(status_reply_fields, "status_reply"),
    [JP_CTL_RUNS] = SCHEMA(runs_fields, "runs"),
    [JP_CTL_WORKER_RING] = SCHEMA(worker_ring_fields, "worker_ring"),
    [JP_CTL_TOP] = SCHEMA(top_fields, "top"),
    [JP_CTL_TOP_FRAME] = SCHEMA(top_frame_fields, "top_frame"),
};
#define MAX_FIELDS 32u
_Static_assert(sizeof top_frame_fields / sizeof top_frame_fields[0] <= MAX_FIELDS,
               "seen-mask width");
#define MAX_ARRAYS 3u /* array fields of one message, each decoded into its own allocation */

static uint32_t get_u32(const struct jp_ctl_msg *m, uint16_t off)
{
    uint32_t v;
    memcpy(&v, (const char *)m + off, sizeof v);
    return v;
}
static void put_u32(struct jp_ctl_msg *m, uint16_t off, uint32_t v)
{
    memcpy((char *)m + off, &v, sizeof v);
}

/* ---- encoding -------------------------------------------------------------------------- */

static int pack_str(msgpack_packer *pk, const char *s, size_t len)
{
    if (len > UINT32_MAX)
        return -1;
    if (msgpack_pack_str(pk, len) < 0)
        return -1;
    return len ? msgpack_pack_str_body(pk, s, len) : 0;
}

static int check_field(const struct jp_ctl_msg *m, const struct field *f)
{
    const char *base = (const char *)m;
    switch (f->kind) {
    case F_U32:
    case F_ERRCODE: {
        uint32_t v = get_u32(m, f->off);
        return v >= f->lo && v <= f->hi ? 0 : -EINVAL;
    }
    case F_STR: {
        const char *s;
        size_t len;
        memcpy(&s, base + f->off, sizeof s);
        memcpy(&len, base + f->off2, sizeof len);
        return len == 0 || s ? 0 : -EINVAL;
    }
    case F_KEYS:
    case F_ITEMS:
    case F_U64S:
    case F_ROWS: {
        const void *p;
        memcpy(&p, base + f->off, sizeof p);
        uint32_t n = get_u32(m, f->off2);
        if (n > f->hi || (n && !p))
            return -EINVAL;
        if (f->kind == F_ROWS) {
            const struct jp_ctl_top_row *r = p;
            for (uint32_t i = 0; i < n; i++)
                if ((r[i].name_len && !r[i].name) || (r[i].path_len && !r[i].path))
                    return -EINVAL;
        }
        if (f->kind == F_ITEMS) {
            const struct jp_ctl_excerpt *it = p;
            for (uint32_t i = 0; i < n; i++)
                if (it[i].text_len > JP_EXCERPT_MAX || (it[i].text_len && !it[i].text) ||
                    (it[i].flags & ~(uint32_t)(JP_EXCERPT_REDACTED | JP_EXCERPT_UNAVAILABLE)))
                    return -EINVAL;
        }
        return 0;
    }
    default:
        return 0;
    }
}

static int pack_field(msgpack_packer *pk, const struct jp_ctl_msg *m, const struct field *f)
{
    const char *base = (const char *)m;
    if (pack_str(pk, f->name, strlen(f->name)) < 0)
        return -1;
    switch (f->kind) {
    case F_U32:
        return msgpack_pack_uint32(pk, get_u32(m, f->off));
    case F_U64: {
        uint64_t v;
        memcpy(&v, base + f->off, sizeof v);
        return msgpack_pack_uint64(pk, v);
    }
    case F_STR: {
        const char *s;
        size_t len;
        memcpy(&s, base + f->off, sizeof s);
        memcpy(&len, base + f->off2, sizeof len);
        return pack_str(pk, s, len);
    }
    case F_ERRCODE: {
        const char *w = jp_ctl_error_name(get_u32(m, f->off));
        return pack_str(pk, w, strlen(w));
    }
    case F_KEYS: {
        const struct jp_ctl_excerpt_key *k;
        memcpy(&k, base + f->off, sizeof k);
        uint32_t n = get_u32(m, f->off2);
        if (msgpack_pack_array(pk, n) < 0)
            return -1;
        for (uint32_t i = 0; i < n; i++)
            if (msgpack_pack_array(pk, 3) < 0 || msgpack_pack_uint32(pk, k[i].source_id) < 0 ||
                msgpack_pack_uint32(pk, k[i].line) < 0 || msgpack_pack_uint32(pk, k[i].col) < 0)
                return -1;
        return 0;
    }
    case F_ITEMS: {
        const struct jp_ctl_excerpt *it;
        memcpy(&it, base + f->off, sizeof it);
        uint32_t n = get_u32(m, f->off2);
        if (msgpack_pack_array(pk, n) < 0)
            return -1;
        for (uint32_t i = 0; i < n; i++)
            if (msgpack_pack_array(pk, 5) < 0 || msgpack_pack_uint32(pk, it[i].source_id) < 0 ||
                msgpack_pack_uint32(pk, it[i].line) < 0 || msgpack_pack_uint32(pk, it[i].col) < 0 ||
                msgpack_pack_uint32(pk, it[i].flags) < 0 ||
                pack_str(pk, it[i].text, it[i].text_len) < 0)
                return -1;
        return 0;
    }
    case F_U64S: {
        const uint64_t *v;
        memcpy(&v, base + f->off, sizeof v);
        uint32_t n = get_u32(m, f->off2);
        if (msgpack_pack_array(pk, n) < 0)
            return -1;
        for (uint32_t i = 0; i < n; i++)
            if (msgpack_pack_uint64(pk, v[i]) < 0)
                return -1;
        return 0;
    }
    case F_ROWS: {
        const struct jp_ctl_top_row *r;
        memcpy(&r, base + f->off, sizeof r);
        uint32_t n = get_u32(m, f->off2);
        if (msgpack_pack_array(pk, n) < 0)
            return -1;
        for (uint32_t i = 0; i < n; i++)
            if (msgpack_pack_array(pk, 6) < 0 || pack_str(pk, r[i].name, r[i].name_len) < 0 ||
                pack_str(pk, r[i].path, r[i].path_len) < 0 ||
                msgpack_pack_uint32(pk, r[i].line) < 0 || msgpack_pack_uint64(pk, r[i].v[0]) < 0 ||
                msgpack_pack_uint64(pk, r[i].v[1]) < 0 || msgpack_pack_uint64(pk, r[i].v[2]) < 0)
                return -1;
        return 0;
    }
    default:
        return -1;
    }
}

int jp_ctl_encode(const struct jp_ctl_msg *m, uint8_t **out, size_t *out_len)
{
    if (!m || !out || !out_len || m->type == JP_CTL_NONE || m->type >= JP_CTL_TYPE_LIMIT)
        return -EINVAL;
    const struct schema *sc = &schemas[m->type];
    for (unsigned i = 0; i < sc->count; i++)
        if (check_field(m, &sc->fields[i]) < 0)
            return -EINVAL;

    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    static const char no_len[4];
    int bad = msgpack_sbuffer_write(&sb, no_len, sizeof no_len) < 0 ||
              msgpack_pack_map(&pk, 1 + sc->count) < 0 || pack_str(&pk, "t", 1) < 0 ||
              pack_str(&pk, ctl_names[m->type], strlen(ctl_names[m->type])) < 0;
    for (unsigned i = 0; !bad && i < sc->count; i++)
        bad = pack_field(&pk, m, &sc->fields[i]) < 0;
    if (bad) {
        msgpack_sbuffer_destroy(&sb);
        return -ENOMEM;
    }
    size_t body = sb.size - 4;
    if (body > JP_CTL_MAX_FRAME) {
        msgpack_sbuffer_destroy(&sb);
        return -EMSGSIZE;
    }
    uint8_t *p = (uint8_t *)sb.data;
    p[0] = (uint8_t)body;
    p[1] = (uint8_t)(body >> 8);
    p[2] = (uint8_t)(body >> 16);
    p[3] = (uint8_t)(body >> 24);
    *out_len = sb.size;
    *out = (uint8_t *)msgpack_sbuffer_release(&sb);
    return 0;
}

/* ---- decoding -------------------------------------------------------------------------- */

struct jp_ctl_decoder {
    uint32_t max_frame;
    uint8_t *buf; /* received bytes; [off, len) not yet returned */
    size_t off, len, cap;
    int oversize;       /* a header announced more than max_frame: no more input taken */
    const char *failed; /* final decoding error, or NULL */
    uint8_t *frame; /* the frame last returned by next(); strings point into it */
    size_t frame_cap;
    msgpack_unpacked up;
    int up_live;
    void *arr[MAX_ARRAYS]; /* the array fields of the last message */
    unsigned narr;
};

int jp_ctl_decoder_new(uint32_t max_frame, struct jp_ctl_decoder **out)
{
    if (!out || max_frame == 0 || max_frame > JP_CTL_MAX_FRAME)
        return -EINVAL;
    struct jp_ctl_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->max_frame = max_frame;
    *out = d;
    return 0;
}

int jp_ctl_decoder_set_max_frame(struct jp_ctl_decoder *d, uint32_t max_frame)
{
    if (!d || max_frame == 0 || max_frame > JP_CTL_MAX_FRAME)
        return -EINVAL;
    d->max_frame = max_frame;
    return 0;
}

static void release_last(struct jp_ctl_decoder *d)
{
    if (d->up_live)
        msgpack_unpacked_destroy(&d->up);
    d->up_live = 0;
    for (unsigned i = 0; i < d->narr; i++)
        free(d->arr[i]);
    d->narr = 0;
}

void jp_ctl_decoder_free(struct jp_ctl_decoder *d)
{
    if (!d)
        return;
    release_last(d);
    free(d->buf);
    free(d->frame);
    free(d);
}

size_t jp_ctl_decoder_pending(const struct jp_ctl_decoder *d)
{
    return d ? d->len - d->off : 0;
}

static int reserve(uint8_t **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *q = realloc(*p, n);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

/* Position of the first frame header whose body is not fully buffered (all frames before it
 * were checked when their headers arrived). */
static size_t scan_pos(const struct jp_ctl_decoder *d, size_t *partial_hdr, int *bad)
{
    size_t p = d->off;
    *bad = 0;
    for (;;) {
        size_t have = d->len - p;
        if (have < 4) {
            *partial_hdr = have;
            return p;
        }
        const uint8_t *h = d->buf + p;
        uint32_t n = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
                     (uint32_t)h[3] << 24;
        if (n > d->max_frame) {
            *bad = 1;
            return p;
        }
        if (have < 4 + (size_t)n) {
            *partial_hdr = 4;
            return p;
        }
        p += 4 + (size_t)n;
    }
}

int jp_ctl_decoder_feed(struct jp_ctl_decoder *d, const uint8_t *bytes, size_t len)
{
    if (!d || (len && !bytes))
        return -EINVAL;
    if (d->oversize)
        return -EMSGSIZE;
    if (d->failed)
        return -EPROTO;
    /* Move to the frame being filled, then take input in pieces: a header's 4 bytes first, and
     * the body only once the header has been checked against max_frame. */
    while (len) {
        size_t hdr;
        int bad;
        size_t p = scan_pos(d, &hdr, &bad);
        if (bad) {
            d->oversize = 1;
            return -EMSGSIZE;
        }
        size_t take;
        if (hdr < 4) {
            take = 4 - hdr;
        } else {
            const uint8_t *h = d->buf + p;
            size_t n = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 |
                       (size_t)h[3] << 24;
            take = 4 + n - (d->len - p);
        }
        if (take > len)
            take = len;
        if (d->off > 0 && d->len + take > d->cap) {
            memmove(d->buf, d->buf + d->off, d->len - d->off);
            d->len -= d->off;
            d->off = 0;
        }
        if (reserve(&d->buf, &d->cap, d->len + take) < 0)
            return -ENOMEM;
        memcpy(d->buf + d->len, bytes, take);
        d->len += take;
        bytes += take;
        len -= take;
    }
    size_t hdr;
    int bad;
    scan_pos(d, &hdr, &bad);
    if (bad) {
        d->oversize = 1; /* next() still returns the complete frames before it */
        return -EMSGSIZE;
    }
    return 0;
}

static int key_is(const msgpack_object *k, const char *name)
{
    size_t n = strlen(name);
    return k->via.str.size == n && memcmp(k->via.str.ptr, name, n) == 0;
}

static int obj_u32(const msgpack_object *o, uint32_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return -1;
    if (o->via.u64 > UINT32_MAX)
        return -2;
    *v = (uint32_t)o->via.u64;
    return 0;
}

static const char *decode_field(struct jp_ctl_decoder *d, struct jp_ctl_msg *m,
                                const struct field *f, const msgpack_object *v)
{
    char *base = (char *)m;
    switch (f->kind) {
    case F_U32: {
        uint32_t x;
        int r = obj_u32(v, &x);
        if (r == -1)
            return f->wrong_type;
        if (r < 0 || x < f->lo || x > f->hi)
            return f->out_of_range;
        put_u32(m, f->off, x);
        return NULL;
    }
    case F_U64:
        if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return f->wrong_type;
        memcpy(base + f->off, &v->via.u64, sizeof v->via.u64);
        return NULL;
    case F_STR: {
        if (v->type != MSGPACK_OBJECT_STR)
            return f->wrong_type;
        const char *s = v->via.str.size ? v->via.str.ptr : "";
        size_t n = v->via.str.size;
        memcpy(base + f->off, &s, sizeof s);
        memcpy(base + f->off2, &n, sizeof n);
        return NULL;
    }
    case F_ERRCODE: {
        if (v->type != MSGPACK_OBJECT_STR)
            return f->wrong_type;
        for (uint32_t c = 1; c < JP_CTLE_LIMIT; c++)
            if (key_is(v, ctl_error_names[c])) {
                put_u32(m, f->off, c);
                return NULL;
            }
        return "unknown error code";
    }
    case F_KEYS:
    case F_ITEMS: {
        if (v->type != MSGPACK_OBJECT_ARRAY)
            return f->wrong_type;
        uint32_t n = v->via.array.size;
        if (n > f->hi)
            return f->out_of_range;
        size_t each = f->kind == F_KEYS ? sizeof(struct jp_ctl_excerpt_key)
                                        : sizeof(struct jp_ctl_excerpt);
        void *arr = n ? calloc(n, each) : NULL;
        if (n && !arr)
            return "out of memory";
        d->arr[d->narr++] = arr; /* a message's fields are each decoded once */
        for (uint32_t i = 0; i < n; i++) {
            const msgpack_object *e = &v->via.array.ptr[i];
            uint32_t want = f->kind == F_KEYS ? 3 : 5;
            if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != want)
                return f->wrong_type;
            const msgpack_object *a = e->via.array.ptr;
            uint32_t sid, line, col;
            if (obj_u32(&a[0], &sid) || obj_u32(&a[1], &line) || obj_u32(&a[2], &col))
                return f->wrong_type;
            if (f->kind == F_KEYS) {
                struct jp_ctl_excerpt_key *k = (struct jp_ctl_excerpt_key *)arr + i;
                k->source_id = sid, k->line = line, k->col = col;
                continue;
            }
            struct jp_ctl_excerpt *it = (struct jp_ctl_excerpt *)arr + i;
            uint32_t flags;
            if (obj_u32(&a[3], &flags) || a[4].type != MSGPACK_OBJECT_STR)
                return f->wrong_type;
            if (flags & ~(uint32_t)(JP_EXCERPT_REDACTED | JP_EXCERPT_UNAVAILABLE))
                return "unknown excerpt flags";
            if (a[4].via.str.size > JP_EXCERPT_MAX)
                return "excerpt text too long";
            it->source_id = sid, it->line = line, it->col = col, it->flags = flags;
            it->text = a[4].via.str.size ? a[4].via.str.ptr : "";
            it->text_len = a[4].via.str.size;
        }
        memcpy(base + f->off, &arr, sizeof arr);
        put_u32(m, f->off2, n);
        return NULL;
    }
    case F_U64S:
    case F_ROWS: {
        if (v->type != MSGPACK_OBJECT_ARRAY)
            return f->wrong_type;
        uint32_t n = v->via.array.size;
        if (n > f->hi)
            return f->out_of_range;
        size_t each = f->kind == F_U64S ? sizeof(uint64_t) : sizeof(struct jp_ctl_top_row);
        void *arr = n ? calloc(n, each) : NULL;
        if (n && !arr)
            return "out of memory";
        d->arr[d->narr++] = arr;
        for (uint32_t i = 0; i < n; i++) {
            const msgpack_object *e = &v->via.array.ptr[i];
            if (f->kind == F_U64S) {
                if (e->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                    return f->wrong_type;
                ((uint64_t *)arr)[i] = e->via.u64;
                continue;
            }
            if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 6)
                return f->wrong_type;
            const msgpack_object *a = e->via.array.ptr;
            struct jp_ctl_top_row *r = (struct jp_ctl_top_row *)arr + i;
            if (a[0].type != MSGPACK_OBJECT_STR || a[1].type != MSGPACK_OBJECT_STR ||
                obj_u32(&a[2], &r->line))
                return f->wrong_type;
            for (int k = 0; k < 3; k++) {
                if (a[3 + k].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                    return f->wrong_type;
                r->v[k] = a[3 + k].via.u64;
            }
            r->name = a[0].via.str.size ? a[0].via.str.ptr : "";
            r->name_len = a[0].via.str.size;
            r->path = a[1].via.str.size ? a[1].via.str.ptr : "";
            r->path_len = a[1].via.str.size;
        }
        memcpy(base + f->off, &arr, sizeof arr);
        put_u32(m, f->off2, n);
        return NULL;
    }
    default:
        return "internal: bad field kind";
    }
}

static const char *decode_map(struct jp_ctl_decoder *d, const msgpack_object *o,
                              struct jp_ctl_msg *m)
{
    if (o->type != MSGPACK_OBJECT_MAP)
        return "message is not a map";
    const msgpack_object_kv *kv = o->via.map.ptr;
    uint32_t n = o->via.map.size;
    const msgpack_object *t = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (kv[i].key.type != MSGPACK_OBJECT_STR)
            return "field name is not a string";
        if (key_is(&kv[i].key, "t")) {
            if (t)
                return "duplicate field t";
            t = &kv[i].val;
        }
    }
    if (!t)
        return "missing field t";
    if (t->type != MSGPACK_OBJECT_STR)
        return "wrong type for field t";
    uint32_t type = JP_CTL_NONE;
    for (uint32_t c = 1; c < JP_CTL_TYPE_LIMIT; c++)
        if (key_is(t, ctl_names[c]))
            type = c;
    if (type == JP_CTL_NONE)
        return "unknown message type";
    memset(m, 0, sizeof *m);
    m->type = type;
    const struct schema *sc = &schemas[type];
    unsigned seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (key_is(&kv[i].key, "t"))
            continue;
        unsigned f = 0;
        while (f < sc->count && !key_is(&kv[i].key, sc->fields[f].name))
            f++;
        if (f == sc->count)
            return sc->unknown_field;
        if (seen & (UINT32_C(1) << f))
            return sc->fields[f].duplicate;
        seen |= UINT32_C(1) << f;
        const char *why = decode_field(d, m, &sc->fields[f], &kv[i].val);
        if (why)
            return why;
    }
    for (unsigned f = 0; f < sc->count; f++)
        if (!(seen & (UINT32_C(1) << f)))
            return sc->fields[f].missing;
    return NULL;
}

int jp_ctl_decoder_next(struct jp_ctl_decoder *d, struct jp_ctl_msg *m, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    if (!d || !m)
        return -EINVAL;
    release_last(d);
    if (d->failed) {
        *why = d->failed;
        return -EPROTO;
    }
    size_t have = d->len - d->off;
    if (have < 4)
        return 0;
    const uint8_t *h = d->buf + d->off;
    size_t n = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 | (size_t)h[3] << 24;
    if (n > d->max_frame) {
        d->failed = "frame larger than the maximum";
        *why = d->failed;
        return -EPROTO;
    }
    if (have < 4 + n)
        return 0;
    /* The frame moves to its own buffer so that feeding more bytes (which may move buf) leaves
     * the strings of this message valid until the next call. */
    if (reserve(&d->frame, &d->frame_cap, n ? n : 1) < 0)
        return -ENOMEM;
    memcpy(d->frame, h + 4, n);
    d->off += 4 + n;
    if (d->off == d->len)
        d->off = d->len = 0;

    const char *bad = n ? jp__mp_check(d->frame, n, JP_CTL_MAX_ELEMENTS) : "empty frame";
    if (!bad) {
        msgpack_unpacked_init(&d->up);
        d->up_live = 1;
        size_t used = 0;
        msgpack_unpack_return r = msgpack_unpack_next(&d->up, (const char *)d->frame, n, &used);
        if (r == MSGPACK_UNPACK_NOMEM_ERROR)
            return -ENOMEM;
        if (r != MSGPACK_UNPACK_SUCCESS)
            bad = r == MSGPACK_UNPACK_CONTINUE ? "truncated message" : "malformed msgpack";
        else if (used != n)
            bad = "trailing bytes after message";
        else
            bad = decode_map(d, &d->up.data, m);
    }
    if (bad) {
        release_last(d);
        memset(m, 0, sizeof *m);
        d->failed = bad;
        *why = bad;
        return -EPROTO;
    }
    return 1;
}
