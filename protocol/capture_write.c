/* Capture files, the writing side: the block encoder and the writer (layout in capture.h). */
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

#include "capture_format.h"
#include "mpcheck.h"

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
            for (unsigned i = 0; i < jp_cap_layouts[t].nfields; i++)
                per[jp_cap_layouts[t].f[i].col] += jp_cap_layouts[t].f[i].width == 4 ? 5 : 10;
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
    const struct col_layout *l = &jp_cap_layouts[type];
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
    static const uint8_t *const magic[4] = {NULL, jp_cap_block_magic_v1, jp_cap_block_magic_v2, jp_cap_block_magic};
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
        memcpy(hdr, jp_cap_file_magic, 8);
        put16(hdr + 8, (uint16_t)version);
        put16(hdr + 10, JP_CAPTURE_HEADER_SIZE);
        put32(hdr + 12, (uint32_t)sb.size);
        put32(hdr + 16, jp_crc32c(0, sb.data, sb.size));
        r = jp_capture_write_all(fd, hdr, sizeof hdr);
        if (r == 0)
            r = jp_capture_write_all(fd, (const uint8_t *)sb.data, sb.size);
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
            r = jp_capture_write_all(w->fd, b, n);
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
