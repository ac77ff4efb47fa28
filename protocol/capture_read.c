/* Capture files, the reading side: a streaming, distrustful reader (layout in capture.h). */
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

/* ---- I/O ------------------------------------------------------------------------------- */

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
    if (got >= 8 && memcmp(h, jp_cap_file_magic, 8) != 0)
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
    const struct col_layout *l = &jp_cap_layouts[type];
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
    static const uint8_t *const magic[4] = {NULL, jp_cap_block_magic_v1, jp_cap_block_magic_v2, jp_cap_block_magic};
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
