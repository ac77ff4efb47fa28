/* Capture files: a block writer and a streaming, distrustful reader (layout in capture.h). */
#include "protocol/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "mpcheck.h"

static const uint8_t file_magic[8] = {'J', 'P', 'C', 'A', 'P', 'T', '\r', '\n'};
static const uint8_t block_magic_v1[4] = {'J', 'P', 'B', 'K'};
static const uint8_t block_magic[4] = {'J', 'P', 'B', 'Z'};

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

/* ---- writer ---------------------------------------------------------------------------- */

struct jp_capture_writer {
    int fd;
    int err;     /* first write error, sticky */
    int stopped; /* RUN_STOP written */
    uint32_t version;
    uint32_t used, count;
    uint8_t *buf;  /* block header space, then the raw payload */
    uint8_t *zbuf; /* version 2: block header space, then the compressed payload */
    size_t zcap;   /* bytes after zbuf's header space */
    ZSTD_CCtx *cctx;
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
    ZSTD_freeCCtx(w->cctx);
    free(w->buf);
    free(w->zbuf);
    free(w);
}

int jp_capture_writer_new(int fd, const struct jp_capture_meta *meta,
                          struct jp_capture_writer **out)
{
    if (fd < 0 || !meta || !out || !jp_mode_name(meta->mode))
        return -EINVAL;
    uint32_t version = meta->format ? meta->format : JP_CAPTURE_VERSION;
    if (version != JP_CAPTURE_VERSION && version != JP_CAPTURE_VERSION_1)
        return -EINVAL;
    struct jp_capture_writer *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->fd = fd;
    w->version = version;
    w->buf = malloc(JP_CAPTURE_BLOCK_HEADER_SIZE + JP_CAPTURE_BLOCK_TARGET + JP_REC_MAX_SIZE);
    if (!w->buf) {
        writer_free(w);
        return -ENOMEM;
    }
    if (version == JP_CAPTURE_VERSION) {
        /* Everything compression needs is had now, so a capture that starts can compress. A
         * block never holds more than BLOCK_TARGET + one record of raw bytes. */
        w->zcap = ZSTD_compressBound(JP_CAPTURE_BLOCK_TARGET + JP_REC_MAX_SIZE);
        w->zbuf = malloc(JP_CAPTURE_BLOCK_HEADER_SIZE + w->zcap);
        w->cctx = ZSTD_createCCtx();
        if (!w->zbuf || !w->cctx ||
            ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel,
                                                JP_CAPTURE_ZSTD_LEVEL))) {
            writer_free(w);
            return -ENOMEM;
        }
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int r = encode_meta(meta, version, &sb);
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

/* The pending block as version 1: header in front of the raw payload. */
static const uint8_t *block_v1(struct jp_capture_writer *w, size_t *n)
{
    uint8_t *h = w->buf + JP_CAPTURE_BLOCK_HEADER_SIZE - JP_CAPTURE_BLOCK_HEADER_SIZE_V1;
    memcpy(h, block_magic_v1, 4);
    put32(h + 4, w->used);
    put32(h + 8, w->count);
    uint32_t crc = jp_crc32c(0, h, 12);
    put32(h + 12, jp_crc32c(crc, w->buf + JP_CAPTURE_BLOCK_HEADER_SIZE, w->used));
    *n = JP_CAPTURE_BLOCK_HEADER_SIZE_V1 + (size_t)w->used;
    return h;
}

/* The pending block as version 2: compressed when zstd makes it smaller, else stored raw.
 * NULL with *err = -ENOMEM when the compressor could not allocate.
 *
 * Compression stays on the writer's thread (the daemon's drain). Measured on the memory
 * capture of examples/alloc_builder (398,532,298 bytes of records, 64 KiB blocks), rewriting
 * it from a version 1 file: version 1 took 1.28 s user + 0.60 s sys, version 2 at level 1
 * 1.93 s user + 0.16 s sys (30,624,887 bytes; level 3: 2.27 s user, 31,554,029 bytes). zstd
 * costs about 0.65 s of CPU per 400 MB (some 600 MB/s), against a live run that produced the
 * same records at about 26 MB/s: a few percent of the drain, partly paid back in write()s. */
static const uint8_t *block_v2(struct jp_capture_writer *w, size_t *n, int *err)
{
    const uint8_t *raw = w->buf + JP_CAPTURE_BLOCK_HEADER_SIZE;
    size_t z = ZSTD_compress2(w->cctx, w->zbuf + JP_CAPTURE_BLOCK_HEADER_SIZE, w->zcap, raw,
                              w->used);
    uint8_t *h = w->zbuf;
    uint32_t stored = (uint32_t)z;
    if (ZSTD_isError(z)) {
        /* The bound makes room for any input: only the compressor's own allocations fail. */
        if (ZSTD_getErrorCode(z) == ZSTD_error_memory_allocation) {
            *err = -ENOMEM;
            return NULL;
        }
        stored = w->used;
    }
    if (stored >= w->used) {
        h = w->buf;
        stored = w->used;
    }
    memcpy(h, block_magic, 4);
    put32(h + 4, stored);
    put32(h + 8, w->used);
    put32(h + 12, w->count);
    uint32_t crc = jp_crc32c(0, h, 16);
    put32(h + 16, jp_crc32c(crc, h + JP_CAPTURE_BLOCK_HEADER_SIZE, stored));
    *n = JP_CAPTURE_BLOCK_HEADER_SIZE + (size_t)stored;
    return h;
}

int jp_capture_flush(struct jp_capture_writer *w)
{
    if (!w)
        return -EINVAL;
    if (w->err)
        return w->err;
    if (w->used == 0)
        return 0;
    size_t n = 0;
    int r = 0;
    const uint8_t *b = w->version == JP_CAPTURE_VERSION_1 ? block_v1(w, &n) : block_v2(w, &n, &r);
    if (b)
        r = write_all(w->fd, b, n);
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
    if (w->used && (w->used + len > JP_CAPTURE_BLOCK_TARGET || h.type == JP_REC_RUN_STOP)) {
        int r = jp_capture_flush(w);
        if (r < 0)
            return r;
    }
    memcpy(w->buf + JP_CAPTURE_BLOCK_HEADER_SIZE + w->used, rec, len);
    w->used += len;
    w->count++;
    if (h.type == JP_REC_RUN_STOP) {
        w->stopped = 1;
        return jp_capture_flush(w);
    }
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
    uint8_t *zblk;     /* version 2: the stored bytes of a compressed block */
    size_t zblk_cap;
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
    if (r->version != JP_CAPTURE_VERSION && r->version != JP_CAPTURE_VERSION_1)
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

/* Makes *buf (of *cap bytes) hold at least need bytes, need <= JP_CAPTURE_MAX_BLOCK. */
static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 65536;
    while (n < need)
        n *= 2;
    if (n > JP_CAPTURE_MAX_BLOCK)
        n = JP_CAPTURE_MAX_BLOCK;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

/* Reads len (<= JP_CAPTURE_MAX_BLOCK) bytes into *buf, growing it only as bytes arrive: a cut
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

/* Decompresses the verified stored bytes of a version 2 block into r->blk, which must come out
 * exactly raw bytes long. 1, 0 with the verdict set, -ENOMEM. The output buffer bounds what a
 * frame can produce (a frame expanding past it fails with dstSize_tooSmall), and one-shot
 * decompression keeps its history in that buffer: whatever window a frame claims, the decoder
 * allocates nothing for it beyond its fixed context. */
static int inflate_block(struct jp_capture_reader *r, uint32_t stored, uint32_t raw, uint64_t at)
{
    if (!r->dctx) {
        r->dctx = ZSTD_createDCtx();
        if (!r->dctx)
            return -ENOMEM;
    }
    int e = grow(&r->blk, &r->blk_cap, raw);
    if (e < 0)
        return e;
    size_t n = ZSTD_decompressDCtx(r->dctx, r->blk, raw, r->zblk, stored);
    if (ZSTD_isError(n) && ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
        return -ENOMEM;
    if (ZSTD_isError(n) || n != raw)
        return finish(r, JP_CAPI_INVALID, "bad compressed block", at);
    return 1;
}

/* Reads, checks and verifies the next block. 1: its records are ready; 0: the stream ended
 * (verdict set); -errno. */
static int load_block(struct jp_capture_reader *r)
{
    uint64_t at = r->pos;
    int v1 = r->version == JP_CAPTURE_VERSION_1;
    size_t hsize = v1 ? JP_CAPTURE_BLOCK_HEADER_SIZE_V1 : JP_CAPTURE_BLOCK_HEADER_SIZE;
    uint8_t h[JP_CAPTURE_BLOCK_HEADER_SIZE];
    ssize_t got = read_full(r->fd, h, hsize);
    if (got < 0)
        return (int)got;
    if (got == 0)
        return finish(r, JP_CAPI_MISSING_STOP_EVENT, "missing stop record", at);
    if ((size_t)got < hsize)
        return finish(r, JP_CAPI_MISSING_STOP_EVENT, "truncated block", at);
    if (memcmp(h, v1 ? block_magic_v1 : block_magic, 4) != 0)
        return finish(r, JP_CAPI_INVALID, "bad block magic", at);
    /* Version 1 stores every block raw: its payload_len is both lengths. */
    uint32_t stored = get32(h + 4), plen = v1 ? stored : get32(h + 8);
    uint32_t count = get32(h + (v1 ? 8 : 12)), crc = get32(h + hsize - 4);
    if (plen == 0)
        return finish(r, JP_CAPI_INVALID, "empty block", at);
    if (plen > JP_CAPTURE_MAX_BLOCK)
        return finish(r, JP_CAPI_INVALID, "block larger than the maximum", at);
    if (stored == 0 || stored > plen)
        return finish(r, JP_CAPI_INVALID, "bad stored block length", at);
    int packed = stored < plen;
    int e = packed ? read_stored(r, &r->zblk, &r->zblk_cap, stored)
                   : read_stored(r, &r->blk, &r->blk_cap, stored);
    if (e <= 0)
        return e < 0 ? e : finish(r, JP_CAPI_MISSING_STOP_EVENT, "truncated block", at);
    if (jp_crc32c(jp_crc32c(0, h, hsize - 4), packed ? r->zblk : r->blk, stored) != crc)
        return finish(r, JP_CAPI_INVALID, "block checksum mismatch", at);
    if (packed && (e = inflate_block(r, stored, plen, at)) <= 0)
        return e;

    /* Verify every record before handing out any. */
    uint64_t counted = r->counted, records = r->records;
    uint32_t n = 0, off = 0;
    int stop = 0;
    while (off < plen) {
        uint64_t rec_at = packed ? at : at + hsize + off;
        uint32_t left = plen - off;
        struct jp_rec_hdr rh;
        if (left < sizeof rh)
            return finish(r, JP_CAPI_INVALID, "record out of bounds", rec_at);
        memcpy(&rh, r->blk + off, sizeof rh);
        if (rh.size > left)
            return finish(r, JP_CAPI_INVALID, "record out of bounds", rec_at);
        const char *why;
        if (jp_rec_validate(r->blk + off, left, &why) < 0)
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
    free(r);
}
