/* Capture files: a block writer and a streaming, distrustful reader (layout in capture.h). */
#include "protocol/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "mpcheck.h"

static const uint8_t file_magic[8] = {'J', 'P', 'C', 'A', 'P', 'T', '\r', '\n'};
static const uint8_t block_magic_v1[4] = {'J', 'P', 'B', 'K'};
static const uint8_t block_magic_v2[4] = {'J', 'P', 'B', 'Z'};
static const uint8_t block_magic[4] = {'J', 'P', 'B', 'C'};

static const char *const integrity_names[] = {
    [JP_CAPI_NONE] = NULL,
#define JP_X(n, s) [JP_CAPI_##n] = s,
    JP_CAPTURE_INTEGRITY(JP_X)
#undef JP_X
};

const char *jp_capture_integrity_name(uint32_t v)
{
    return v < sizeof integrity_names / sizeof integrity_names[0] ? integrity_names[v] : NULL;
}

/* ---- crc32c ---------------------------------------------------------------------------- */

/* Castagnoli CRC (reflected polynomial 0x82f63b78). Replay and capture writing checksum every
 * byte of the stream, so a byte-at-a-time table would cost more than aggregating the records:
 * x86-64 processors with SSE4.2 have an instruction for exactly this polynomial, and everything
 * else uses eight tables (slicing-by-8), eight bytes per step. Both give the same values. */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_have_hw;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1u ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xffu];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *b, size_t n)
{
    while (n && ((uintptr_t)b & 7u)) {
        crc = crc_table[0][(crc ^ *b++) & 0xffu] ^ (crc >> 8);
        n--;
    }
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8); /* little-endian host: records.h refuses others */
        uint32_t lo = (uint32_t)w ^ crc, hi = (uint32_t)(w >> 32);
        crc = crc_table[7][lo & 0xffu] ^ crc_table[6][(lo >> 8) & 0xffu] ^
              crc_table[5][(lo >> 16) & 0xffu] ^ crc_table[4][lo >> 24] ^
              crc_table[3][hi & 0xffu] ^ crc_table[2][(hi >> 8) & 0xffu] ^
              crc_table[1][(hi >> 16) & 0xffu] ^ crc_table[0][hi >> 24];
    }
    while (n--)
        crc = crc_table[0][(crc ^ *b++) & 0xffu] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *b, size_t n)
{
    uint64_t c = crc;
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    crc = (uint32_t)c;
    while (n--)
        crc = __builtin_ia32_crc32qi(crc, *b++);
    return crc;
}
#endif

uint32_t jp_crc32c(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_have_hw)
        return ~crc_hw(crc, p, n);
#endif
    return ~crc_sw(crc, p, n);
}

/* Test hook: the portable path, so tests can prove both paths agree. */
uint32_t jp_crc32c_portable(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    return ~crc_sw(~crc, p, n);
}

/* ---- little-endian fields -------------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- I/O ------------------------------------------------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd pf = {fd, POLLOUT, 0};
                if (poll(&pf, 1, -1) < 0 && errno != EINTR)
                    return -errno;
                continue;
            }
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads up to n bytes, stopping early only at end of file. Returns the count or -errno. */
static ssize_t read_full(int fd, uint8_t *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* ---- version 3 columns ----------------------------------------------------------------- */

/* The record kinds packed field by field (capture.h): every byte after the header is one
 * field, in this order, so a record decodes to exactly its bytes (reserved fields and padding
 * included). Identifiers and counters that advance by small steps (call-chain nodes,
 * allocation ids, requested ticks) are deltas; sizes and the rest are plain varints. Each
 * column holds one sort of value of one kind, so zstd meets long runs of the same few bytes,
 * and a free's node and size, which repeat its allocation's some records later, repeat them
 * in the same order in the free's own columns, where zstd finds them as long matches. */
enum {
    COL_KIND, COL_OTHER,
    COL_A_NODE, COL_A_ID, COL_A_SIZE, COL_A_MISC,
    COL_F_NODE, COL_F_ID, COL_F_SIZE, COL_F_MISC,
    COL_R_NODE, COL_R_ID, COL_R_OLD, COL_R_NEW,
    COL_S_NODE, COL_S_TICK, COL_S_MISC,
};
_Static_assert(COL_S_MISC + 1 == JP_CAPTURE_COLUMNS, "one length per column");

/* delta: 0 a plain value, DELTA_OWN from the same field of the previous record of its kind,
 * DELTA_EVENT (nodes of allocation events) from the node of the previous allocation event of
 * any kind: a free or a resize happens where the program is, mostly at the node of the
 * allocation just before it. */
enum { DELTA_OWN = 1, DELTA_EVENT = 2 };
struct col_field {
    uint8_t off, width, col, delta;
};
struct col_layout {
    uint8_t nfields;
    struct col_field f[6];
};
#define PACKED_SIZE 32u /* the size of every packed kind (each is fixed-size) */
static const struct col_layout layouts[JP_REC_TYPE_LIMIT] = {
    [JP_REC_ALLOC] = {4, {{4, 4, COL_A_NODE, DELTA_EVENT}, {8, 8, COL_A_ID, DELTA_OWN},
                          {16, 8, COL_A_SIZE, 0}, {24, 8, COL_A_MISC, 0}}},
    [JP_REC_FREE] = {4, {{4, 4, COL_F_NODE, DELTA_EVENT}, {8, 8, COL_F_ID, DELTA_OWN},
                         {16, 8, COL_F_SIZE, 0}, {24, 8, COL_F_MISC, 0}}},
    [JP_REC_RESIZE] = {4, {{4, 4, COL_R_NODE, DELTA_EVENT}, {8, 8, COL_R_ID, DELTA_OWN},
                           {16, 8, COL_R_OLD, 0}, {24, 8, COL_R_NEW, 0}}},
    /* state, flags and reserved0 as one u32; the four bytes before requested_tick are padding */
    [JP_REC_CPU_SAMPLE] = {6, {{4, 4, COL_S_MISC, 0}, {8, 4, COL_S_NODE, DELTA_OWN},
                               {12, 4, COL_S_MISC, 0}, {16, 4, COL_S_MISC, 0},
                               {20, 4, COL_S_MISC, 0}, {24, 8, COL_S_TICK, DELTA_OWN}}},
};
_Static_assert(sizeof(struct jp_rec_alloc) == PACKED_SIZE &&
                   offsetof(struct jp_rec_alloc, node) == 4 &&
                   offsetof(struct jp_rec_alloc, allocation_id) == 8 &&
                   offsetof(struct jp_rec_alloc, size) == 16 &&
                   offsetof(struct jp_rec_alloc, reserved0) == 24,
               "alloc layout");
_Static_assert(sizeof(struct jp_rec_free) == PACKED_SIZE &&
                   offsetof(struct jp_rec_free, node) == 4 &&
                   offsetof(struct jp_rec_free, allocation_id) == 8 &&
                   offsetof(struct jp_rec_free, old_size) == 16 &&
                   offsetof(struct jp_rec_free, reserved0) == 24,
               "free layout");
_Static_assert(sizeof(struct jp_rec_resize) == PACKED_SIZE &&
                   offsetof(struct jp_rec_resize, node) == 4 &&
                   offsetof(struct jp_rec_resize, allocation_id) == 8 &&
                   offsetof(struct jp_rec_resize, old_size) == 16 &&
                   offsetof(struct jp_rec_resize, new_size) == 24,
               "resize layout");
_Static_assert(sizeof(struct jp_rec_cpu_sample) == PACKED_SIZE &&
                   offsetof(struct jp_rec_cpu_sample, state) == 4 &&
                   offsetof(struct jp_rec_cpu_sample, node) == 8 &&
                   offsetof(struct jp_rec_cpu_sample, stmt_line) == 12 &&
                   offsetof(struct jp_rec_cpu_sample, stmt_col) == 16 &&
                   offsetof(struct jp_rec_cpu_sample, requested_tick) == 24,
               "cpu sample layout");

static inline uint64_t get_field(const uint8_t *p, unsigned width)
{
    uint64_t v = 0;
    memcpy(&v, p, width); /* little-endian host: records.h refuses others */
    return v;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* The zigzag of a difference taken modulo the field's width: small steps either way are
 * small numbers. */
static inline uint64_t zigzag(uint64_t d, unsigned width)
{
    if (width == 4) {
        int32_t s = (int32_t)(uint32_t)d;
        return (uint32_t)(((uint32_t)s << 1) ^ (uint32_t)(s >> 31));
    }
    int64_t s = (int64_t)d;
    return ((uint64_t)s << 1) ^ (uint64_t)(s >> 63);
}
static inline uint64_t unzigzag(uint64_t z)
{
    return (z >> 1) ^ (0 - (z & 1));
}

/* ---- writer ---------------------------------------------------------------------------- */

struct jp_capture_encoder {
    uint32_t version;
    ZSTD_CCtx *cctx;
    uint8_t *col[JP_CAPTURE_COLUMNS]; /* version 3: each JP_CAPTURE_BLOCK_RAW_MAX bytes */
    uint8_t *packed;                  /* version 3: column lengths, then the columns */
    uint8_t *out;                     /* block header space, then the stored bytes */
    size_t out_cap;                   /* bytes after out's header space */
};

void jp_capture_encoder_free(struct jp_capture_encoder *e)
{
    if (!e)
        return;
    ZSTD_freeCCtx(e->cctx);
    for (unsigned i = 0; i < JP_CAPTURE_COLUMNS; i++)
        free(e->col[i]);
    free(e->packed);
    free(e->out);
    free(e);
}

/* Everything encoding needs is had here, so a capture that starts can always encode. */
int jp_capture_encoder_new(uint32_t version, int level, struct jp_capture_encoder **out)
{
    if (!out || version < JP_CAPTURE_VERSION_1 || version > JP_CAPTURE_VERSION)
        return -EINVAL;
    if (level == 0)
        level = version == JP_CAPTURE_VERSION ? JP_CAPTURE_ZSTD_LEVEL_V3 : JP_CAPTURE_ZSTD_LEVEL;
    if (version != JP_CAPTURE_VERSION_1 && (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()))
        return -EINVAL;
    struct jp_capture_encoder *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->version = version;
    size_t in_max = JP_CAPTURE_BLOCK_RAW_MAX;
    int bad = 0;
    if (version == JP_CAPTURE_VERSION) {
        /* A column holds at most its most bytes a record (a varint per field it takes: 5 for
         * a 4-byte field, 10 for an 8-byte one) for every record a block can have. */
        size_t per[JP_CAPTURE_COLUMNS] = {[COL_KIND] = 1, [COL_OTHER] = 0};
        for (unsigned t = 0; t < JP_REC_TYPE_LIMIT; t++)
            for (unsigned i = 0; i < layouts[t].nfields; i++)
                per[layouts[t].f[i].col] += layouts[t].f[i].width == 4 ? 5 : 10;
        for (unsigned i = 0; i < JP_CAPTURE_COLUMNS; i++) {
            size_t cap = i == COL_OTHER ? JP_CAPTURE_BLOCK_RAW_MAX
                         : i == COL_KIND ? JP_CAPTURE_BLOCK_RAW_MAX / sizeof(struct jp_rec_hdr)
                                         : JP_CAPTURE_BLOCK_RAW_MAX / PACKED_SIZE * per[i];
            bad |= !(e->col[i] = malloc(cap));
        }
        in_max = 4u * JP_CAPTURE_COLUMNS + JP_CAPTURE_BLOCK_RAW_MAX + JP_CAPTURE_BLOCK_RAW_MAX / 4;
        bad |= !(e->packed = malloc(in_max));
    }
    e->out_cap = version == JP_CAPTURE_VERSION_1 ? in_max : ZSTD_compressBound(in_max);
    bad |= !(e->out = malloc(JP_CAPTURE_BLOCK_HEADER_SIZE_V3 + e->out_cap));
    if (!bad && version != JP_CAPTURE_VERSION_1) {
        e->cctx = ZSTD_createCCtx();
        bad = !e->cctx ||
              ZSTD_isError(ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_compressionLevel, level));
    }
    if (bad) {
        jp_capture_encoder_free(e);
        return -ENOMEM;
    }
    *out = e;
    return 0;
}

/* One record of a packed kind into its columns (c: each column's next byte; a local array of
 * the caller's, whose address never escapes, so it lives in registers). */
static inline __attribute__((always_inline)) void pack_kind(unsigned type, const uint8_t *rec,
                                                            uint8_t **c, uint64_t *prev,
                                                            uint64_t *event_node)
{
    const struct col_layout *l = &layouts[type];
#pragma GCC unroll 6
    for (unsigned i = 0; i < l->nfields; i++) {
        const struct col_field *f = &l->f[i];
        uint64_t v;
        if (f->width == 4) {
            uint32_t x;
            memcpy(&x, rec + f->off, 4);
            v = x;
        } else {
            memcpy(&v, rec + f->off, 8);
        }
        if (f->delta) {
            uint64_t *pv = f->delta == DELTA_EVENT ? event_node : &prev[i];
            uint64_t d = v - *pv;
            *pv = v;
            v = zigzag(d, f->width);
        }
        uint8_t **q = &c[f->col];
        if (v < 0x80)
            *(*q)++ = (uint8_t)v;
        else
            *q = put_varint(*q, v);
    }
}

/* Packs a block's records into e->packed (capture.h's version 3 columns). Returns the packed
 * length. The records passed jp_rec_validate, so each kind in the table has its fixed size. */
static uint32_t pack_block(struct jp_capture_encoder *e, const uint8_t *raw, uint32_t len)
{
    uint8_t *c[JP_CAPTURE_COLUMNS];
    for (unsigned i = 0; i < JP_CAPTURE_COLUMNS; i++)
        c[i] = e->col[i];
    uint64_t prev[JP_REC_TYPE_LIMIT][6], event_node = 0;
    memset(prev, 0, sizeof prev);
    for (uint32_t off = 0; off < len;) {
        struct jp_rec_hdr h;
        memcpy(&h, raw + off, sizeof h);
        *c[COL_KIND]++ = (uint8_t)h.type;
        /* one case per packed kind, so each layout is a constant the compiler unrolls */
        switch (h.type) {
        case JP_REC_ALLOC: pack_kind(JP_REC_ALLOC, raw + off, c, prev[JP_REC_ALLOC], &event_node); break;
        case JP_REC_FREE: pack_kind(JP_REC_FREE, raw + off, c, prev[JP_REC_FREE], &event_node); break;
        case JP_REC_RESIZE: pack_kind(JP_REC_RESIZE, raw + off, c, prev[JP_REC_RESIZE], &event_node); break;
        case JP_REC_CPU_SAMPLE:
            pack_kind(JP_REC_CPU_SAMPLE, raw + off, c, prev[JP_REC_CPU_SAMPLE], &event_node);
            break;
        default:
            memcpy(c[COL_OTHER], raw + off, h.size);
            c[COL_OTHER] += h.size;
        }
        off += h.size;
    }
    uint8_t *p = e->packed + 4u * JP_CAPTURE_COLUMNS;
    for (unsigned i = 0; i < JP_CAPTURE_COLUMNS; i++) {
        uint32_t n = (uint32_t)(c[i] - e->col[i]);
        put32(e->packed + 4 * i, n);
        memcpy(p, e->col[i], n);
        p += n;
    }
    return (uint32_t)(p - e->packed);
}

/* Version 1: the header in front of the raw records. Versions 2 and 3: zstd of the raw
 * records (2) or of their columns (3), stored as they are when zstd cannot shrink them.
 *
 * Version 2 measured on the memory capture of examples/alloc_builder (398,532,298 bytes of
 * records, 64 KiB blocks), rewriting it from a version 1 file: level 1 30,624,887 bytes in
 * 1.93 s user, level 3 31,554,029 bytes in 2.27 s. Version 3's level and block size: see
 * bench/RESULTS.md (the packed columns are a few bytes a record, so zstd's time is small beside
 * the packing's at the low levels). */
int jp_capture_encode_block(struct jp_capture_encoder *e, const uint8_t *raw, uint32_t len,
                            uint32_t count, const uint8_t **out, size_t *n)
{
    if (!e || !raw || !out || !n || len == 0 || len > JP_CAPTURE_BLOCK_RAW_MAX)
        return -EINVAL;
    uint32_t hs = jp_capture_block_header_size(e->version);
    uint8_t *h = e->out + JP_CAPTURE_BLOCK_HEADER_SIZE_V3 - hs, *body = e->out +
                                                                   JP_CAPTURE_BLOCK_HEADER_SIZE_V3;
    const uint8_t *in = raw;
    uint32_t in_len = len, stored;
    if (e->version == JP_CAPTURE_VERSION_1) {
        memcpy(body, raw, len);
        stored = len;
    } else {
        if (e->version == JP_CAPTURE_VERSION) {
            in_len = pack_block(e, raw, len);
            in = e->packed;
        }
        size_t z = ZSTD_compress2(e->cctx, body, e->out_cap, in, in_len);
        /* The bound makes room for any input: only the compressor's own allocations fail. */
        if (ZSTD_isError(z) && ZSTD_getErrorCode(z) == ZSTD_error_memory_allocation)
            return -ENOMEM;
        stored = ZSTD_isError(z) || z >= in_len ? in_len : (uint32_t)z;
        if (stored == in_len)
            memcpy(body, in, in_len);
    }
    static const uint8_t *const magic[4] = {NULL, block_magic_v1, block_magic_v2, block_magic};
    memcpy(h, magic[e->version], 4);
    uint8_t *q = h + 4;
    put32(q, stored), q += 4;
    if (e->version == JP_CAPTURE_VERSION)
        put32(q, in_len), q += 4;
    if (e->version != JP_CAPTURE_VERSION_1)
        put32(q, len), q += 4;
    put32(q, count), q += 4;
    put32(q, jp_crc32c(jp_crc32c(0, h, (size_t)(q - h)), body, stored));
    *out = h;
    *n = hs + (size_t)stored;
    return 0;
}

struct jp_capture_writer {
    int fd;
    int err;     /* first write error, sticky */
    int stopped; /* RUN_STOP written */
    uint32_t target;
    uint32_t used, count;
    uint32_t slots_open; /* slots handed out by the last jp_capture_slots_begin */
    uint8_t *buf; /* the pending block's raw records, JP_CAPTURE_BLOCK_RAW_MAX bytes */
    struct jp_capture_encoder *enc; /* without a sink */
    struct jp_capture_sink sink;
};

static int encode_meta(const struct jp_capture_meta *m, uint32_t version, msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    static const char *const k[4] = {"format", "mode", "pid", "run_id"};
    int bad = msgpack_pack_map(&pk, 4) < 0;
    for (int i = 0; i < 4 && !bad; i++) {
        bad = msgpack_pack_str(&pk, strlen(k[i])) < 0 ||
              msgpack_pack_str_body(&pk, k[i], strlen(k[i])) < 0;
        if (bad)
            break;
        switch (i) {
        case 0: bad = msgpack_pack_uint32(&pk, version) < 0; break;
        case 1: bad = msgpack_pack_uint32(&pk, m->mode) < 0; break;
        case 2: bad = msgpack_pack_uint32(&pk, m->pid) < 0; break;
        default: bad = msgpack_pack_uint64(&pk, m->run_id) < 0; break;
        }
    }
    return bad ? -ENOMEM : 0;
}

static void writer_free(struct jp_capture_writer *w)
{
    if (!w)
        return;
    jp_capture_encoder_free(w->enc);
    free(w->buf);
    free(w);
}

int jp_capture_writer_new_opts(int fd, const struct jp_capture_meta *meta,
                               const struct jp_capture_options *opt,
                               struct jp_capture_writer **out)
{
    if (fd < 0 || !meta || !out || !jp_mode_name(meta->mode))
        return -EINVAL;
    uint32_t version = meta->format ? meta->format : JP_CAPTURE_VERSION;
    if (version < JP_CAPTURE_VERSION_1 || version > JP_CAPTURE_VERSION)
        return -EINVAL;
    const struct jp_capture_options none = {0};
    if (!opt)
        opt = &none;
    if (opt->block_target > JP_CAPTURE_BLOCK_TARGET_V3 || (opt->sink && !opt->sink->block))
        return -EINVAL;
    struct jp_capture_writer *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->fd = fd;
    w->target = opt->block_target ? opt->block_target
                : version == JP_CAPTURE_VERSION ? JP_CAPTURE_BLOCK_TARGET_V3
                                                : JP_CAPTURE_BLOCK_TARGET;
    int r = 0;
    if (!(w->buf = malloc(JP_CAPTURE_BLOCK_RAW_MAX)))
        r = -ENOMEM;
    else if (opt->sink)
        w->sink = *opt->sink;
    else
        r = jp_capture_encoder_new(version, opt->level, &w->enc);
    if (r < 0) {
        writer_free(w);
        return r;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    r = encode_meta(meta, version, &sb);
    if (r == 0) {
        uint8_t hdr[JP_CAPTURE_HEADER_SIZE];
        memcpy(hdr, file_magic, 8);
        put16(hdr + 8, (uint16_t)version);
        put16(hdr + 10, JP_CAPTURE_HEADER_SIZE);
        put32(hdr + 12, (uint32_t)sb.size);
        put32(hdr + 16, jp_crc32c(0, sb.data, sb.size));
        r = write_all(fd, hdr, sizeof hdr);
        if (r == 0)
            r = write_all(fd, (const uint8_t *)sb.data, sb.size);
    }
    msgpack_sbuffer_destroy(&sb);
    if (r < 0) {
        writer_free(w);
        return r;
    }
    *out = w;
    return 0;
}

int jp_capture_writer_new(int fd, const struct jp_capture_meta *meta,
                          struct jp_capture_writer **out)
{
    return jp_capture_writer_new_opts(fd, meta, NULL, out);
}

int jp_capture_flush(struct jp_capture_writer *w)
{
    if (!w)
        return -EINVAL;
    if (w->err)
        return w->err;
    if (w->used == 0)
        return 0;
    int r;
    if (w->sink.block) {
        r = w->sink.block(w->sink.ctx, &w->buf, w->used, w->count);
    } else {
        const uint8_t *b;
        size_t n;
        r = jp_capture_encode_block(w->enc, w->buf, w->used, w->count, &b, &n);
        if (r == 0)
            r = write_all(w->fd, b, n);
    }
    if (r < 0) {
        w->err = r;
        return r;
    }
    w->used = w->count = 0;
    return 0;
}

int jp_capture_write(struct jp_capture_writer *w, const void *rec, uint32_t len)
{
    if (!w || !rec)
        return -EINVAL;
    if (w->err)
        return w->err;
    struct jp_rec_hdr h;
    if (len < sizeof h || jp_rec_validate(rec, len, NULL) < 0)
        return -EINVAL;
    memcpy(&h, rec, sizeof h);
    if (h.size != len || w->stopped)
        return -EINVAL;
    if (h.type == JP_REC_PAD)
        return 0;
    /* The stop record always gets a block of its own: a capture whose last write was cut
     * short loses only that block, and every data record stays in complete, verified blocks
     * (a small run would otherwise lose everything with one block). */
    if (w->used && (w->used + len > w->target || h.type == JP_REC_RUN_STOP)) {
        int r = jp_capture_flush(w);
        if (r < 0)
            return r;
    }
    memcpy(w->buf + w->used, rec, len);
    w->used += len;
    w->count++;
    if (h.type == JP_REC_RUN_STOP) {
        w->stopped = 1;
        return jp_capture_flush(w);
    }
    return 0;
}

uint8_t *jp_capture_slots_begin(struct jp_capture_writer *w, uint32_t *n, int *err)
{
    if (!w || !n || !err || *n == 0 || w->stopped) {
        if (err)
            *err = w && w->err ? w->err : -EINVAL;
        return NULL;
    }
    if (w->err) {
        *err = w->err;
        return NULL;
    }
    if (w->used + JP_SLOT_SIZE > w->target) {
        int r = jp_capture_flush(w);
        if (r < 0) {
            *err = r;
            return NULL;
        }
    }
    uint32_t room = (w->target - w->used) / JP_SLOT_SIZE;
    if (room == 0)
        room = 1; /* an empty block takes one record whatever its target */
    if (*n > room)
        *n = room;
    w->slots_open = *n;
    return w->buf + w->used;
}

int jp_capture_slots_commit(struct jp_capture_writer *w, uint32_t k)
{
    if (!w || k > w->slots_open)
        return -EINVAL;
    w->slots_open = 0;
    const uint8_t *p = w->buf + w->used;
    for (uint32_t i = 0; i < k; i++, p += JP_SLOT_SIZE) {
        struct jp_rec_hdr h;
        memcpy(&h, p, sizeof h);
        /* Allocation events have no rule in jp_rec_validate beyond their header's: a known
         * type at its fixed size, checked here in one test; anything else takes the whole. */
        if (h.size == JP_SLOT_SIZE &&
            (h.type == JP_REC_ALLOC || h.type == JP_REC_FREE || h.type == JP_REC_RESIZE))
            continue;
        if (h.size != JP_SLOT_SIZE || h.type == JP_REC_PAD || h.type == JP_REC_RUN_START ||
            h.type == JP_REC_RUN_STOP || jp_rec_validate(p, JP_SLOT_SIZE, NULL) < 0)
            return -EINVAL;
    }
    w->used += k * JP_SLOT_SIZE;
    w->count += k;
    return 0;
}

void jp_capture_writer_free(struct jp_capture_writer *w)
{
    if (!w)
        return;
    jp_capture_flush(w);
    writer_free(w);
}

/* ---- reader ---------------------------------------------------------------------------- */

struct jp_capture_reader {
    int fd, own_fd;
    int meta_ok;
    struct jp_capture_meta meta;
    uint64_t pos;      /* offset of the next unread byte, from where reading started */
    uint32_t version;  /* the file's, once its header was read */
    uint8_t *blk;      /* raw payload of the current, verified block */
    size_t blk_cap;
    uint8_t *zblk;     /* versions 2 and 3: the stored bytes of a compressed block */
    size_t zblk_cap;
    uint8_t *pk;       /* version 3: the packed columns of the current block */
    size_t pk_cap;
    ZSTD_DCtx *dctx;   /* made for the first compressed block */
    uint32_t emit_pos, emit_left;
    uint64_t counted;  /* records so far that RUN_STOP.record_count counts */
    uint64_t records;  /* all records so far */
    int stop_seen;
    int done;
    int pending_verdict; /* the header was bad: next() ends at once */
    uint32_t verdict;
    const char *reason;
    uint64_t offset;
    _Alignas(8) uint8_t rec[JP_REC_MAX_SIZE];
};

static int finish(struct jp_capture_reader *r, uint32_t v, const char *why, uint64_t off)
{
    r->verdict = v;
    r->reason = why;
    r->offset = off;
    r->done = 1;
    return 0;
}

/* Decodes the metadata map: 0, -ENOMEM when msgpack could not allocate for bytes that passed
 * the structural check (the host's trouble, not the file's), or -EPROTO with *why. */
static int decode_meta(const uint8_t *p, uint32_t len, uint32_t version,
                       struct jp_capture_meta *m, const char **why)
{
    if (jp__mp_check(p, len, 64)) {
        *why = "bad metadata";
        return -EPROTO;
    }
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t used = 0;
    const char *bad = NULL;
    msgpack_unpack_return ur = msgpack_unpack_next(&up, (const char *)p, len, &used);
    if (ur == MSGPACK_UNPACK_NOMEM_ERROR) {
        msgpack_unpacked_destroy(&up);
        return -ENOMEM;
    }
    if (ur != MSGPACK_UNPACK_SUCCESS || used != len || up.data.type != MSGPACK_OBJECT_MAP ||
        up.data.via.map.size != 4) {
        bad = "bad metadata";
    } else {
        static const char *const k[4] = {"format", "mode", "pid", "run_id"};
        uint64_t v[4];
        unsigned seen = 0;
        for (uint32_t i = 0; i < 4 && !bad; i++) {
            const msgpack_object_kv *kv = &up.data.via.map.ptr[i];
            if (kv->key.type != MSGPACK_OBJECT_STR ||
                kv->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
                bad = "bad metadata";
                break;
            }
            unsigned j = 0;
            while (j < 4 && !(kv->key.via.str.size == strlen(k[j]) &&
                              memcmp(kv->key.via.str.ptr, k[j], strlen(k[j])) == 0))
                j++;
            if (j == 4 || (seen & (1u << j)))
                bad = "bad metadata";
            else {
                seen |= 1u << j;
                v[j] = kv->val.via.u64;
            }
        }
        if (!bad && v[0] != version)
            bad = "unsupported metadata format";
        else if (!bad && (v[1] > UINT32_MAX || !jp_mode_name((uint32_t)v[1]) || v[2] > UINT32_MAX))
            bad = "bad metadata";
        else if (!bad) {
            m->mode = (uint32_t)v[1];
            m->pid = (uint32_t)v[2];
            m->run_id = v[3];
            m->format = version;
        }
    }
    msgpack_unpacked_destroy(&up);
    *why = bad;
    return bad ? -EPROTO : 0;
}

/* Reads and checks the file header and metadata; a problem becomes the pending verdict. */
static int read_header(struct jp_capture_reader *r)
{
    uint8_t h[JP_CAPTURE_HEADER_SIZE];
    ssize_t got = read_full(r->fd, h, sizeof h);
    if (got < 0)
        return (int)got;
    r->pending_verdict = 1;
    if (got >= 8 && memcmp(h, file_magic, 8) != 0)
        return finish(r, JP_CAPI_INVALID, "bad magic", 0);
    if (got < (ssize_t)sizeof h)
        return finish(r, JP_CAPI_INVALID, "truncated header", 0);
    r->version = get16(h + 8);
    if (!jp_capture_block_header_size(r->version))
        return finish(r, JP_CAPI_INVALID, "unsupported version", 8);
    if (get16(h + 10) != JP_CAPTURE_HEADER_SIZE)
        return finish(r, JP_CAPI_INVALID, "bad header size", 10);
    uint32_t mlen = get32(h + 12);
    if (mlen == 0 || mlen > JP_CAPTURE_MAX_META)
        return finish(r, JP_CAPI_INVALID, "bad metadata length", 12);
    uint8_t *meta = malloc(mlen); /* bounded by JP_CAPTURE_MAX_META */
    if (!meta)
        return -ENOMEM;
    got = read_full(r->fd, meta, mlen);
    if (got < 0) {
        free(meta);
        return (int)got;
    }
    const char *bad = NULL;
    if ((size_t)got < mlen)
        bad = "truncated metadata";
    else if (jp_crc32c(0, meta, mlen) != get32(h + 16))
        bad = "metadata checksum mismatch";
    else if (decode_meta(meta, mlen, r->version, &r->meta, &bad) == -ENOMEM) {
        free(meta);
        return -ENOMEM;
    }
    free(meta);
    if (bad)
        return finish(r, JP_CAPI_INVALID, bad, JP_CAPTURE_HEADER_SIZE);
    r->meta_ok = 1;
    r->pending_verdict = 0;
    r->done = 0;
    r->pos = JP_CAPTURE_HEADER_SIZE + (uint64_t)mlen;
    return 0;
}

int jp_capture_open_fd(int fd, struct jp_capture_reader **out)
{
    if (fd < 0 || !out)
        return -EINVAL;
    struct jp_capture_reader *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->fd = fd;
    int e = read_header(r);
    if (e < 0) {
        free(r);
        return e;
    }
    r->done = 0; /* the verdict shows only once next() has returned 0 */
    *out = r;
    return 0;
}

int jp_capture_open(const char *path, struct jp_capture_reader **out)
{
    if (!path || !out)
        return -EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int e = jp_capture_open_fd(fd, out);
    if (e < 0) {
        close(fd);
        return e;
    }
    (*out)->own_fd = 1;
    return 0;
}

const struct jp_capture_meta *jp_capture_meta(const struct jp_capture_reader *r)
{
    return r && r->meta_ok ? &r->meta : NULL;
}

/* Makes *buf (of *cap bytes) hold at least need bytes, need <= JP_CAPTURE_MAX_PACKED. */
static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 65536;
    while (n < need)
        n *= 2;
    if (n > JP_CAPTURE_MAX_PACKED)
        n = JP_CAPTURE_MAX_PACKED;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

/* Reads len (<= JP_CAPTURE_MAX_PACKED) bytes into *buf, growing it only as bytes arrive: a cut
 * file claiming a large block allocates what it has. 1 when all came, 0 when the file ended
 * first, -errno. */
static int read_stored(struct jp_capture_reader *r, uint8_t **buf, size_t *cap, uint32_t len)
{
    size_t have = 0;
    while (have < len) {
        size_t chunk = len - have < 65536 ? len - have : 65536;
        int e = grow(buf, cap, have + chunk);
        if (e < 0)
            return e;
        ssize_t got = read_full(r->fd, *buf + have, chunk);
        if (got < 0)
            return (int)got;
        have += (size_t)got;
        if ((size_t)got < chunk)
            return 0;
    }
    return 1;
}

/* Decompresses the verified stored bytes of a version 2 or 3 block into *dst (r->blk: the
 * records; r->pk: the packed columns), which must come out exactly want bytes long. 1, 0 with
 * the verdict set, -ENOMEM. The output buffer bounds what a frame can produce (a frame
 * expanding past it fails with dstSize_tooSmall), and one-shot decompression keeps its history
 * in that buffer: whatever window a frame claims, the decoder allocates nothing for it beyond
 * its fixed context. */
static int inflate_block(struct jp_capture_reader *r, uint8_t **dst, size_t *cap,
                         uint32_t stored, uint32_t want, uint64_t at)
{
    if (!r->dctx) {
        r->dctx = ZSTD_createDCtx();
        if (!r->dctx)
            return -ENOMEM;
    }
    int e = grow(dst, cap, want);
    if (e < 0)
        return e;
    size_t n = ZSTD_decompressDCtx(r->dctx, *dst, want, r->zblk, stored);
    if (ZSTD_isError(n) && ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
        return -ENOMEM;
    if (ZSTD_isError(n) || n != want)
        return finish(r, JP_CAPI_INVALID, "bad compressed block", at);
    return 1;
}

/* One LEB128 varint from [*p, end): 1, 0 when it runs past end, -1 when it is longer than 10
 * bytes or larger than 64 bits. */
static inline int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *q = *p;
    uint64_t x = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (q == end)
            return 0;
        uint8_t b = *q++;
        if (shift == 63 && b > 1)
            return -1;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
        if (shift == 63)
            return -1;
    }
    *p = q;
    *v = x;
    return 1;
}

/* One record of a packed kind from its columns into o (PACKED_SIZE bytes): NULL, or why the
 * columns are bad. */
static inline __attribute__((always_inline)) const char *
unpack_kind(unsigned type, uint8_t *o, const uint8_t **c, const uint8_t *const *end,
            uint64_t *prev, uint64_t *event_node)
{
    const struct col_layout *l = &layouts[type];
    struct jp_rec_hdr h = {.type = (uint16_t)type, .size = PACKED_SIZE};
    memcpy(o, &h, sizeof h);
    for (unsigned i = 0; i < l->nfields; i++) {
        const struct col_field *f = &l->f[i];
        uint64_t v;
        const uint8_t *q = c[f->col];
        if (__builtin_expect(q < end[f->col] && *q < 0x80, 1)) {
            v = *q;
            c[f->col] = q + 1;
        } else {
            int g = get_varint(&c[f->col], end[f->col], &v);
            if (g <= 0)
                return g ? "bad varint in a column" : "field runs past its column";
            if (f->width == 4 && v > UINT32_MAX)
                return "field value wider than its field";
        }
        if (f->delta) {
            uint64_t *pv = f->delta == DELTA_EVENT ? event_node : &prev[i];
            v = *pv + unzigzag(v); /* modulo the width, as written */
            if (f->width == 4)
                v = (uint32_t)v;
            *pv = v;
        }
        if (f->width == 4) {
            uint32_t x = (uint32_t)v;
            memcpy(o + f->off, &x, 4);
        } else {
            memcpy(o + f->off, &v, 8);
        }
    }
    return NULL;
}

/* Decodes a version 3 block's packed columns (r->pk, plen bytes) into r->blk, which must come
 * out exactly raw bytes of count records. 1, 0 with the verdict set, -ENOMEM. Every column
 * is bounded by its length and every record by raw, so a hostile block costs at most one pass
 * over its packed bytes and raw bytes of output. */
static int unpack_block(struct jp_capture_reader *r, uint32_t plen, uint32_t raw,
                        uint32_t count, uint64_t at)
{
    const uint8_t *pk = r->pk;
    if (plen < 4u * JP_CAPTURE_COLUMNS)
        return finish(r, JP_CAPI_INVALID, "packed block shorter than its column lengths", at);
    const uint8_t *c[JP_CAPTURE_COLUMNS], *end[JP_CAPTURE_COLUMNS];
    uint64_t sum = 0;
    const uint8_t *p = pk + 4u * JP_CAPTURE_COLUMNS;
    for (unsigned i = 0; i < JP_CAPTURE_COLUMNS; i++) {
        uint32_t n = get32(pk + 4 * i);
        sum += n;
        if (sum > plen - 4u * JP_CAPTURE_COLUMNS)
            return finish(r, JP_CAPI_INVALID, "column runs past the packed block", at);
        c[i] = p;
        end[i] = p + n;
        p += n;
    }
    if (sum != plen - 4u * JP_CAPTURE_COLUMNS)
        return finish(r, JP_CAPI_INVALID, "bytes after the last column", at);
    if ((uint64_t)(end[COL_KIND] - c[COL_KIND]) != count)
        return finish(r, JP_CAPI_INVALID, "block record count mismatch", at);
    int e = grow(&r->blk, &r->blk_cap, raw);
    if (e < 0)
        return e;
    uint64_t prev[JP_REC_TYPE_LIMIT][6], event_node = 0;
    memset(prev, 0, sizeof prev);
    uint32_t off = 0;
    const char *why = NULL;
    while (c[COL_KIND] < end[COL_KIND]) {
        uint8_t k = *c[COL_KIND]++;
        uint8_t *o = r->blk + off;
        int packed_kind = k == JP_REC_ALLOC || k == JP_REC_FREE || k == JP_REC_RESIZE ||
                          k == JP_REC_CPU_SAMPLE;
        if (packed_kind) {
            if (raw - off < PACKED_SIZE)
                return finish(r, JP_CAPI_INVALID, "records run past the block's size", at);
            /* one case per packed kind, as in pack_block */
            switch (k) {
            case JP_REC_ALLOC: why = unpack_kind(JP_REC_ALLOC, o, c, end, prev[k], &event_node); break;
            case JP_REC_FREE: why = unpack_kind(JP_REC_FREE, o, c, end, prev[k], &event_node); break;
            case JP_REC_RESIZE: why = unpack_kind(JP_REC_RESIZE, o, c, end, prev[k], &event_node); break;
            default: why = unpack_kind(JP_REC_CPU_SAMPLE, o, c, end, prev[k], &event_node); break;
            }
            if (__builtin_expect(why != NULL, 0))
                return finish(r, JP_CAPI_INVALID, why, at);
            off += PACKED_SIZE;
        } else {
            struct jp_rec_hdr h;
            size_t left = (size_t)(end[COL_OTHER] - c[COL_OTHER]);
            if (left < sizeof h)
                return finish(r, JP_CAPI_INVALID, "record runs past its column", at);
            memcpy(&h, c[COL_OTHER], sizeof h);
            if (h.size < sizeof h || h.size > left)
                return finish(r, JP_CAPI_INVALID, "record runs past its column", at);
            if (h.type != k)
                return finish(r, JP_CAPI_INVALID, "record kind differs from its record", at);
            if (h.size > raw - off)
                return finish(r, JP_CAPI_INVALID, "records run past the block's size", at);
            memcpy(o, c[COL_OTHER], h.size);
            c[COL_OTHER] += h.size;
            off += h.size;
        }
    }
    for (unsigned i = 0; i < JP_CAPTURE_COLUMNS; i++)
        if (c[i] != end[i])
            return finish(r, JP_CAPI_INVALID, "column has bytes left over", at);
    if (off != raw)
        return finish(r, JP_CAPI_INVALID, "records fall short of the block's size", at);
    return 1;
}

/* Reads, checks and verifies the next block. 1: its records are ready; 0: the stream ended
 * (verdict set); -errno. */
static int load_block(struct jp_capture_reader *r)
{
    uint64_t at = r->pos;
    const uint32_t v = r->version;
    size_t hsize = jp_capture_block_header_size(v);
    uint8_t h[JP_CAPTURE_BLOCK_HEADER_SIZE_V3];
    ssize_t got = read_full(r->fd, h, hsize);
    if (got < 0)
        return (int)got;
    if (got == 0)
        return finish(r, JP_CAPI_MISSING_STOP_EVENT, "missing stop record", at);
    if ((size_t)got < hsize)
        return finish(r, JP_CAPI_MISSING_STOP_EVENT, "truncated block", at);
    static const uint8_t *const magic[4] = {NULL, block_magic_v1, block_magic_v2, block_magic};
    if (memcmp(h, magic[v], 4) != 0)
        return finish(r, JP_CAPI_INVALID, "bad block magic", at);
    /* Version 1 stores every block raw: its payload_len is all three lengths; version 2 has
     * no packed form: its stored bytes inflate to the records themselves. */
    uint32_t stored = get32(h + 4);
    uint32_t packed = v == JP_CAPTURE_VERSION ? get32(h + 8) : 0;
    uint32_t plen = v == JP_CAPTURE_VERSION_1 ? stored : get32(h + hsize - 12);
    uint32_t count = get32(h + hsize - 8), crc = get32(h + hsize - 4);
    if (plen == 0)
        return finish(r, JP_CAPI_INVALID, "empty block", at);
    if (plen > JP_CAPTURE_MAX_BLOCK)
        return finish(r, JP_CAPI_INVALID, "block larger than the maximum", at);
    if (v == JP_CAPTURE_VERSION && packed > JP_CAPTURE_MAX_PACKED)
        return finish(r, JP_CAPI_INVALID, "packed block larger than the maximum", at);
    uint32_t inner = v == JP_CAPTURE_VERSION ? packed : plen; /* what the stored bytes hold */
    if (stored == 0 || stored > inner)
        return finish(r, JP_CAPI_INVALID, "bad stored block length", at);
    int zipped = stored < inner;
    uint8_t **sbuf = zipped ? &r->zblk : v == JP_CAPTURE_VERSION ? &r->pk : &r->blk;
    size_t *scap = zipped ? &r->zblk_cap : v == JP_CAPTURE_VERSION ? &r->pk_cap : &r->blk_cap;
    int e = read_stored(r, sbuf, scap, stored);
    if (e <= 0)
        return e < 0 ? e : finish(r, JP_CAPI_MISSING_STOP_EVENT, "truncated block", at);
    if (jp_crc32c(jp_crc32c(0, h, hsize - 4), *sbuf, stored) != crc)
        return finish(r, JP_CAPI_INVALID, "block checksum mismatch", at);
    if (zipped && (e = v == JP_CAPTURE_VERSION
                           ? inflate_block(r, &r->pk, &r->pk_cap, stored, packed, at)
                           : inflate_block(r, &r->blk, &r->blk_cap, stored, plen, at)) <= 0)
        return e;
    if (v == JP_CAPTURE_VERSION && (e = unpack_block(r, packed, plen, count, at)) <= 0)
        return e;
    /* A bad record of a block that is not stored as it is has no file offset of its own. */
    int packed_form = v == JP_CAPTURE_VERSION || zipped;

    /* Verify every record before handing out any. */
    uint64_t counted = r->counted, records = r->records;
    uint32_t n = 0, off = 0;
    int stop = 0;
    while (off < plen) {
        uint64_t rec_at = packed_form ? at : at + hsize + off;
        uint32_t left = plen - off;
        struct jp_rec_hdr rh;
        if (left < sizeof rh)
            return finish(r, JP_CAPI_INVALID, "record out of bounds", rec_at);
        memcpy(&rh, r->blk + off, sizeof rh);
        if (rh.size > left)
            return finish(r, JP_CAPI_INVALID, "record out of bounds", rec_at);
        const char *why;
        /* A version 3 allocation event was made by unpack_block, header and all, at its fixed
         * size: jp_rec_validate has no other rule for it. Everything else is checked whole. */
        int made = v == JP_CAPTURE_VERSION && rh.size == PACKED_SIZE &&
                   (rh.type == JP_REC_ALLOC || rh.type == JP_REC_FREE ||
                    rh.type == JP_REC_RESIZE);
        if (!made && jp_rec_validate(r->blk + off, left, &why) < 0)
            return finish(r, JP_CAPI_INVALID, why, rec_at);
        /* One test in the common case: none of the checks below can fire unless one of
         * these holds. */
        if (__builtin_expect(stop || records == 0 || rh.type == JP_REC_PAD ||
                                 rh.type == JP_REC_RUN_START,
                             0)) {
            if (stop)
                return finish(r, JP_CAPI_INVALID, "records after the stop record", rec_at);
            if (rh.type == JP_REC_PAD)
                return finish(r, JP_CAPI_INVALID, "pad record in capture", rec_at);
            if (records == 0 && rh.type != JP_REC_RUN_START)
                return finish(r, JP_CAPI_INVALID, "first record is not run_start", rec_at);
            if (records > 0 && rh.type == JP_REC_RUN_START)
                return finish(r, JP_CAPI_INVALID, "run_start after the first record", rec_at);
        }
        if (rh.type == JP_REC_RUN_STOP) {
            struct jp_rec_run_stop st;
            memcpy(&st, r->blk + off, sizeof st);
            if (st.record_count != counted)
                return finish(r, JP_CAPI_INVALID, "stop record count mismatch", rec_at);
            stop = 1;
        } else if (rh.type != JP_REC_EXCERPT) {
            counted++;
        }
        records++;
        n++;
        off += rh.size;
    }
    if (n != count)
        return finish(r, JP_CAPI_INVALID, "block record count mismatch", at);
    r->counted = counted;
    r->records = records;
    r->stop_seen = stop;
    r->emit_pos = 0;
    r->emit_left = n;
    r->pos = at + hsize + stored;
    return 1;
}

/* Everything but handing out the next record of a loaded block: block loading and the end of
 * the stream. Kept out of line so the per-record path below stays a leaf with few registers. */
__attribute__((noinline)) static int next_slow(struct jp_capture_reader *r, const void **rec,
                                               uint32_t *len)
{
    for (;;) {
        if (r->done || r->pending_verdict) {
            r->done = 1;
            return 0;
        }
        if (r->emit_left)
            return jp_capture_next(r, rec, len);
        if (r->stop_seen) {
            uint8_t extra;
            ssize_t got = read_full(r->fd, &extra, 1);
            if (got < 0)
                return (int)got;
            if (got)
                finish(r, JP_CAPI_INVALID, "data after the stop record", r->pos);
            else
                finish(r, JP_CAPI_COMPLETE, NULL, r->pos);
            return 0;
        }
        int e = load_block(r);
        if (e < 0)
            return e;
    }
}

int jp_capture_next(struct jp_capture_reader *r, const void **rec, uint32_t *len)
{
    if (!r || !rec || !len)
        return -EINVAL;
    /* emit_left is non-zero only between a successful load_block and the block's last record;
     * done and pending_verdict are never set meanwhile. */
    if (__builtin_expect(r->emit_left == 0 || r->done || r->pending_verdict, 0))
        return next_slow(r, rec, len);
    /* The block is private and verified, and stays put until the next load_block, which only
     * a later call can run: an 8-byte aligned record is handed out where it lies; only the
     * others (a record size that is not a multiple of 8 shifts the rest of its block) are
     * copied to the aligned buffer. */
    const uint8_t *p = r->blk + r->emit_pos;
    struct jp_rec_hdr h;
    memcpy(&h, p, sizeof h);
    r->emit_pos += h.size;
    r->emit_left--;
    if ((uintptr_t)p & 7u) {
        memcpy(r->rec, p, h.size);
        p = r->rec;
    }
    *rec = p;
    *len = h.size;
    return 1;
}

int jp_capture_next_run(struct jp_capture_reader *r, const void **slots, uint32_t *n)
{
    if (!r || !slots || !n)
        return -EINVAL;
    if (r->emit_left == 0 || r->done || r->pending_verdict)
        return 0;
    const uint8_t *p = r->blk + r->emit_pos;
    uint32_t k = 0;
    while (k < r->emit_left) {
        struct jp_rec_hdr h;
        memcpy(&h, p + (size_t)k * JP_SLOT_SIZE, sizeof h);
        if (h.size != JP_SLOT_SIZE ||
            !(h.type == JP_REC_ALLOC || h.type == JP_REC_FREE || h.type == JP_REC_RESIZE ||
              h.type == JP_REC_CPU_SAMPLE))
            break;
        k++;
    }
    if (k == 0)
        return 0;
    r->emit_pos += k * JP_SLOT_SIZE;
    r->emit_left -= k;
    *slots = p;
    *n = k;
    return 1;
}

uint32_t jp_capture_verdict(const struct jp_capture_reader *r, const char **reason,
                            uint64_t *offset)
{
    int shown = r && r->done;
    if (reason)
        *reason = shown ? r->reason : NULL;
    if (offset)
        *offset = shown ? r->offset : 0;
    return shown ? r->verdict : JP_CAPI_NONE;
}

void jp_capture_close(struct jp_capture_reader *r)
{
    if (!r)
        return;
    if (r->own_fd)
        close(r->fd);
    ZSTD_freeDCtx(r->dctx);
    free(r->blk);
    free(r->zblk);
    free(r->pk);
    free(r);
}
