/* Capture files: write then read back; every truncation and every flipped byte gets the right
 * verdict without a crash, with every complete block before the damage recovered. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zstd.h>

#include "protocol/capture.h"
#include "protocol/records.h"
#include "tests/lib/recbuild.h"

/* Every version the reader reads; the exhaustive tests run on each. */
static const uint32_t formats[] = {JP_CAPTURE_VERSION_1, JP_CAPTURE_VERSION_2,
                                   JP_CAPTURE_VERSION};
#define NFORMATS (sizeof formats / sizeof formats[0])

static size_t block_header_size(uint32_t format)
{
    return jp_capture_block_header_size(format);
}

/* ---- fixture: a small capture with several blocks -------------------------------------- */

#define MAX_RECS 64
struct fixture {
    uint32_t format; /* the capture version written (0: the writer's default) */
    uint8_t recs[MAX_RECS][JP_REC_MAX_SIZE];
    uint32_t lens[MAX_RECS];
    unsigned nrecs;
    uint64_t bounds[MAX_RECS]; /* file offset after the header, then after each block */
    unsigned nbounds;
    unsigned recs_before[MAX_RECS]; /* records in the blocks before bound i */
    uint8_t *file;
    size_t size;
};

static int mem_fd(const void *data, size_t len)
{
    int fd = memfd_create("capture", MFD_CLOEXEC);
    cr_assert_geq(fd, 0, "memfd");
    cr_assert_eq(write(fd, data, len), (ssize_t)len, "write");
    cr_assert_eq(lseek(fd, 0, SEEK_SET), 0, "rewind");
    return fd;
}

static void add(struct fixture *f, const void *rec, uint32_t len)
{
    cr_assert_lt(f->nrecs, MAX_RECS, "fixture size");
    memcpy(f->recs[f->nrecs], rec, len);
    f->lens[f->nrecs++] = len;
}

static void make_records(struct fixture *f, int with_stop, uint64_t stop_count_delta)
{
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_CPU);
    add(f, &rs, sizeof rs);

    uint8_t buf[JP_REC_MAX_SIZE];
    struct jp_rec_source_def sd = {.source_id = 1, .origin = JP_ORIGIN_PROJECT};
    add(f, buf, tl_rec_source(buf, &sd, "main.jett", 9));

    struct jp_rec_frame_def fd;
    memset(&fd, 0, sizeof fd);
    fd.frame_id = 1;
    fd.source_id = 1;
    add(f, buf, tl_rec_frame(buf, &fd, "<root>", 6, "main", 4));

    struct jp_rec_node_def nd = {{JP_REC_NODE_DEF, 16}, 1, 0, 1};
    add(f, &nd, 16);
    for (uint64_t i = 0; i < 24; i++) {
        struct jp_rec_cpu_sample s;
        memset(&s, 0, sizeof s);
        s.h = (struct jp_rec_hdr){JP_REC_CPU_SAMPLE, sizeof s};
        s.state = i % 5 ? JP_STATE_JETT : JP_STATE_RUNTIME;
        s.node = 1;
        s.flags = JP_SAMPLE_HAS_STMT;
        s.stmt_line = (uint32_t)i + 1;
        s.stmt_col = 1;
        s.requested_tick = i;
        add(f, &s, sizeof s);
    }
    struct jp_rec_excerpt ex = {.source_id = 1, .line = 3, .col = 1};
    add(f, buf, tl_rec_excerpt(buf, &ex, "x = 1", 5));
    if (with_stop) {
        struct jp_rec_run_stop st;
        memset(&st, 0, sizeof st);
        st.h = (struct jp_rec_hdr){JP_REC_RUN_STOP, sizeof st};
        st.termination = JP_TERM_RETURNED;
        st.wall_ns = 123456789;
        st.process_cpu_ns = JP_NS_UNAVAILABLE;
        st.record_count = f->nrecs - 1 + stop_count_delta; /* all but the excerpt */
        add(f, &st, sizeof st);
    }
}

/* The offset after the last complete block the writer has written. */
static void mark_bound(struct fixture *f, int fd, unsigned recs_before)
{
    uint64_t at = (uint64_t)lseek(fd, 0, SEEK_CUR);
    if (at != f->bounds[f->nbounds - 1]) {
        f->bounds[f->nbounds] = at;
        f->recs_before[f->nbounds++] = recs_before;
    }
}

/* Writes the fixture's records, ending a block every `per_block` records; the writer itself
 * ends one before the stop record. */
static void write_fixture(struct fixture *f, unsigned per_block)
{
    int fd = memfd_create("capture", MFD_CLOEXEC);
    cr_assert_geq(fd, 0, "memfd");
    struct jp_capture_meta meta = {JP_MODE_CPU, 4242, 77, f->format};
    struct jp_capture_writer *w;
    cr_assert_eq(jp_capture_writer_new(fd, &meta, &w), 0, "writer");
    f->nbounds = 0;
    f->bounds[f->nbounds] = (uint64_t)lseek(fd, 0, SEEK_CUR);
    f->recs_before[f->nbounds++] = 0;
    for (unsigned i = 0; i < f->nrecs; i++) {
        struct jp_rec_hdr h;
        memcpy(&h, f->recs[i], sizeof h);
        if (h.type == JP_REC_RUN_STOP) {
            /* The writer ends the pending block before the stop record's own block; ending
             * it here gives the same bytes and shows where the blocks before it end. */
            cr_assert_eq(jp_capture_flush(w), 0, "flush");
            mark_bound(f, fd, i);
        }
        cr_assert_eq(jp_capture_write(w, f->recs[i], f->lens[i]), 0, "write record %u", i);
        if ((i + 1) % per_block == 0 || h.type == JP_REC_RUN_STOP) {
            cr_assert_eq(jp_capture_flush(w), 0, "flush");
            mark_bound(f, fd, i + 1);
        }
    }
    jp_capture_writer_free(w);
    off_t end = lseek(fd, 0, SEEK_END);
    if ((uint64_t)end != f->bounds[f->nbounds - 1]) {
        f->bounds[f->nbounds] = (uint64_t)end;
        f->recs_before[f->nbounds++] = f->nrecs;
    }
    f->size = (size_t)end;
    f->file = malloc(f->size);
    cr_assert_eq(pread(fd, f->file, f->size, 0), (ssize_t)f->size, "read back");
    close(fd);
}

struct outcome {
    unsigned records; /* records read that matched the fixture, in order */
    int mismatch;     /* a record came out that is not the fixture's next one */
    uint32_t verdict;
    const char *reason;
    uint64_t offset;
    int has_meta;
};

static struct outcome read_bytes(const struct fixture *f, const uint8_t *data, size_t len)
{
    struct outcome o = {0};
    int fd = mem_fd(data, len);
    struct jp_capture_reader *r;
    cr_assert_eq(jp_capture_open_fd(fd, &r), 0, "open");
    o.has_meta = jp_capture_meta(r) != NULL;
    cr_assert_eq(jp_capture_verdict(r, NULL, NULL), JP_CAPI_NONE, "no verdict before the end");
    const void *rec;
    uint32_t rlen;
    int k;
    while ((k = jp_capture_next(r, &rec, &rlen)) == 1) {
        cr_assert_eq((uintptr_t)rec % 8, 0, "aligned record");
        cr_assert_eq(jp_rec_validate(rec, rlen, NULL), 0, "records come out valid");
        if (o.records < f->nrecs && rlen == f->lens[o.records] &&
            memcmp(rec, f->recs[o.records], rlen) == 0)
            o.records++;
        else
            o.mismatch = 1;
    }
    cr_assert_eq(k, 0, "no I/O error");
    cr_assert_eq(jp_capture_next(r, &rec, &rlen), 0, "end is sticky");
    o.verdict = jp_capture_verdict(r, &o.reason, &o.offset);
    jp_capture_close(r);
    close(fd);
    return o;
}

Test(capture, crc32c_fast_and_portable_paths_agree)
{
    uint8_t buf[300];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    cr_assert_eq(jp_crc32c_portable(0, "123456789", 9), 0xe3069283u, "portable check value");
    for (size_t off = 0; off < 8; off++)
        for (size_t len = 0; len + off <= sizeof buf; len += 7)
            cr_assert_eq(jp_crc32c(7, buf + off, len), jp_crc32c_portable(7, buf + off, len),
                         "offset %zu length %zu", off, len);
}

Test(capture, crc32c_known_answer)
{
    cr_assert_eq(jp_crc32c(0, "123456789", 9), 0xe3069283u, "check value");
    cr_assert_eq(jp_crc32c(0, "", 0), 0, "empty");
    uint32_t c = jp_crc32c(0, "1234", 4);
    cr_assert_eq(jp_crc32c(c, "56789", 5), 0xe3069283u, "chained");
}

/* A fresh fixture in the given capture version. */
static void fixture_for(struct fixture *f, uint32_t format, int with_stop, uint64_t delta,
                        unsigned per_block)
{
    free(f->file);
    memset(f, 0, sizeof *f);
    f->format = format;
    make_records(f, with_stop, delta);
    write_fixture(f, per_block);
}

Test(capture, round_trip_is_complete)
{
    static struct fixture f;
    for (size_t k = 0; k < NFORMATS; k++) {
        fixture_for(&f, formats[k], 1, 0, 7);
        cr_assert_geq(f.nbounds, 5, "several blocks");
        struct outcome o = read_bytes(&f, f.file, f.size);
        cr_assert_eq(o.verdict, JP_CAPI_COMPLETE, "v%u complete: %s", f.format,
                     o.reason ? o.reason : "");
        cr_assert_null(o.reason, "no reason");
        cr_assert_eq(o.offset, f.size, "offset is the file size");
        cr_assert_eq(o.records, f.nrecs, "every record");
        cr_assert_not(o.mismatch, "in order, intact");
        cr_assert_str_eq(jp_capture_integrity_name(o.verdict), "complete", "name");

        int fd = mem_fd(f.file, f.size);
        struct jp_capture_reader *r;
        cr_assert_eq(jp_capture_open_fd(fd, &r), 0, "open");
        const struct jp_capture_meta *m = jp_capture_meta(r);
        cr_assert_not_null(m, "metadata");
        cr_assert(m->mode == JP_MODE_CPU && m->pid == 4242 && m->run_id == 77,
                  "metadata values");
        cr_assert_eq(m->format, formats[k], "the file's version");
        cr_assert_eq(f.file[8], formats[k], "the header says it");
        jp_capture_close(r);
        close(fd);
    }
}

/* Version 2 blocks are zstd frames: repetitive records take a fraction of their raw size. (A
 * block stored raw, which the writer keeps for bytes zstd cannot shrink, is read in
 * structural_rules_inside_checksummed_blocks: valid records always shrink.) */
Test(capture, version_2_blocks_are_compressed)
{
    static struct fixture f1, f2;
    fixture_for(&f1, JP_CAPTURE_VERSION_1, 1, 0, 1000);
    fixture_for(&f2, JP_CAPTURE_VERSION_2, 1, 0, 1000);
    cr_assert_eq(f2.file[8], JP_CAPTURE_VERSION_2, "version 2 on request");
    struct jpt_blk {
        uint32_t stored, raw;
    } first;
    memcpy(&first, f2.file + f2.bounds[0] + 4, sizeof first);
    cr_assert_lt(first.stored, first.raw / 2, "the records' block is compressed: %u of %u",
                 first.stored, first.raw);
    cr_assert_eq(first.raw, f1.bounds[1] - f1.bounds[0] - JP_CAPTURE_BLOCK_HEADER_SIZE_V1,
                 "the same raw bytes as version 1");
    cr_assert_lt(f2.size, f1.size, "the file is smaller");

    free(f1.file);
    free(f2.file);
    f1.file = f2.file = NULL;
}

Test(capture, one_big_block_then_the_stop_record_alone_by_default)
{
    static struct fixture f;
    for (size_t k = 0; k < NFORMATS; k++) {
        fixture_for(&f, formats[k], 1, 0, 1000);
        cr_assert_eq(f.nbounds, 3, "header, one block of records, then the stop record's block");
        cr_assert_eq(f.recs_before[1], f.nrecs - 1, "every record but the stop in the first");
        /* version 3 stores a record's kind and the column lengths beside it */
        size_t packing = formats[k] == JP_CAPTURE_VERSION ? 4u * JP_CAPTURE_COLUMNS + 1u : 0u;
        cr_assert_leq(f.bounds[2] - f.bounds[1],
                      block_header_size(formats[k]) + packing + f.lens[f.nrecs - 1],
                      "the stop block holds it alone");
        struct outcome o = read_bytes(&f, f.file, f.size);
        cr_assert_eq(o.verdict, JP_CAPI_COMPLETE, "complete");
        /* so a file cut short by one byte still gives every record before the stop */
        o = read_bytes(&f, f.file, f.size - 1);
        cr_assert_eq(o.verdict, JP_CAPI_MISSING_STOP_EVENT, "cut");
        cr_assert_eq(o.records, f.nrecs - 1, "every data record recovered");
        cr_assert_eq(o.offset, f.bounds[1], "the stop block is where trouble starts");
    }
}

Test(capture, truncated_at_every_byte_offset)
{
    static struct fixture f;
    for (size_t k = 0; k < NFORMATS; k++) {
        fixture_for(&f, formats[k], 1, 0, 5);
        uint64_t header_end = f.bounds[0];
        for (size_t cut = 0; cut <= f.size; cut++) {
            struct outcome o = read_bytes(&f, f.file, cut);
            cr_assert_not(o.mismatch, "v%u cut %zu: only fixture records, in order", f.format,
                          cut);
            if (cut == f.size) {
                cr_assert_eq(o.verdict, JP_CAPI_COMPLETE, "whole file");
                continue;
            }
            if (cut < header_end) {
                cr_assert_eq(o.verdict, JP_CAPI_INVALID, "cut %zu in the header", cut);
                cr_assert_not(o.has_meta, "no metadata");
                cr_assert_eq(o.records, 0, "nothing read");
                const char *want = cut < JP_CAPTURE_HEADER_SIZE ? "truncated header"
                                                                : "truncated metadata";
                cr_assert_str_eq(o.reason, want, "cut %zu reason", cut);
                continue;
            }
            /* Find the block the cut falls in. */
            unsigned b = 0;
            while (b + 1 < f.nbounds && f.bounds[b + 1] <= cut)
                b++;
            cr_assert_eq(o.verdict, JP_CAPI_MISSING_STOP_EVENT, "v%u cut %zu: %s %s", f.format,
                         cut, jp_capture_integrity_name(o.verdict), o.reason ? o.reason : "");
            cr_assert_eq(o.records, f.recs_before[b], "cut %zu: every complete block recovered",
                         cut);
            cr_assert_eq(o.offset, f.bounds[b], "cut %zu: trouble starts at the block", cut);
            cr_assert_str_eq(o.reason,
                             cut == f.bounds[b] ? "missing stop record" : "truncated block",
                             "cut %zu reason", cut);
        }
    }
}

Test(capture, every_byte_flipped)
{
    static struct fixture f;
    for (size_t k = 0; k < NFORMATS; k++) {
        fixture_for(&f, formats[k], 1, 0, 5);
        uint8_t *copy = malloc(f.size);
        static const uint8_t pats[] = {0x01, 0x80, 0xff};
        for (size_t pos = 0; pos < f.size; pos++)
            for (unsigned p = 0; p < 3; p++) {
                memcpy(copy, f.file, f.size);
                copy[pos] ^= pats[p];
                struct outcome o = read_bytes(&f, copy, f.size);
                cr_assert_not(o.mismatch, "v%u byte %zu ^%02x: no damaged record handed out",
                              f.format, pos, pats[p]);
                cr_assert_neq(o.verdict, JP_CAPI_COMPLETE, "v%u byte %zu ^%02x noticed",
                              f.format, pos, pats[p]);
                cr_assert_not_null(o.reason, "a reason");
                if (pos < f.bounds[0]) {
                    cr_assert_eq(o.verdict, JP_CAPI_INVALID, "byte %zu: header damage", pos);
                    cr_assert_leq(o.offset, JP_CAPTURE_HEADER_SIZE, "reported in the header");
                    cr_assert_eq(o.records, 0, "no record from a bad header");
                    continue;
                }
                /* Every block that ends before the damaged byte is recovered, and the trouble
                 * is reported at the start of the damaged block. */
                unsigned b = 0;
                while (b + 1 < f.nbounds && f.bounds[b + 1] <= pos)
                    b++;
                cr_assert_eq(o.records, f.recs_before[b], "v%u byte %zu: blocks before it",
                             f.format, pos);
                cr_assert_eq(o.offset, f.bounds[b], "v%u byte %zu: offset of its block",
                             f.format, pos);
                if (o.verdict == JP_CAPI_MISSING_STOP_EVENT)
                    cr_assert_str_eq(o.reason, "truncated block",
                                     "only a length pointing past the end reads as a cut");
            }
        free(copy);
    }
}

Test(capture, bad_magic_and_version)
{
    static struct fixture f;
    fixture_for(&f, 0, 1, 0, 100);
    uint8_t *copy = malloc(f.size);

    memcpy(copy, f.file, f.size);
    copy[0] = 'X';
    struct outcome o = read_bytes(&f, copy, f.size);
    cr_assert_eq(o.verdict, JP_CAPI_INVALID, "bad magic");
    cr_assert_str_eq(o.reason, "bad magic", "reason");
    cr_assert_eq(o.offset, 0, "offset");

    static const uint8_t unknown[] = {0, 4, 0xff};
    for (size_t i = 0; i < sizeof unknown; i++) {
        memcpy(copy, f.file, f.size);
        copy[8] = unknown[i];
        o = read_bytes(&f, copy, f.size);
        cr_assert_eq(o.verdict, JP_CAPI_INVALID, "version %u", unknown[i]);
        cr_assert_str_eq(o.reason, "unsupported version", "reason");
        cr_assert_eq(o.offset, 8, "offset");
    }
    /* The header's version and the metadata's must agree. */
    memcpy(copy, f.file, f.size);
    copy[8] = JP_CAPTURE_VERSION_1;
    o = read_bytes(&f, copy, f.size);
    cr_assert_str_eq(o.reason, "unsupported metadata format", "version 3 metadata, 1 header");

    memcpy(copy, f.file, f.size);
    copy[10] = 24;
    o = read_bytes(&f, copy, f.size);
    cr_assert_str_eq(o.reason, "bad header size", "header size");

    memcpy(copy, f.file, f.size);
    copy[12] = 0, copy[13] = 0, copy[14] = 0x10, copy[15] = 0; /* 1 MiB of metadata */
    o = read_bytes(&f, copy, f.size);
    cr_assert_str_eq(o.reason, "bad metadata length", "metadata length");

    memcpy(copy, f.file, f.size);
    copy[JP_CAPTURE_HEADER_SIZE + 2] ^= 0x40;
    o = read_bytes(&f, copy, f.size);
    cr_assert_str_eq(o.reason, "metadata checksum mismatch", "metadata");
    cr_assert_eq(o.offset, JP_CAPTURE_HEADER_SIZE, "offset");

    o = read_bytes(&f, (const uint8_t *)"JPCAPX", 6);
    cr_assert_str_eq(o.reason, "truncated header", "short file, magic unknown yet");
    o = read_bytes(&f, (const uint8_t *)"NOTACAPTURE", 11);
    cr_assert_str_eq(o.reason, "bad magic", "short file with wrong magic");
    free(copy);
}

/* Writes one block in the fixture's version at dst: the payload stored raw, or (version 2,
 * packed) as the zstd frame given, with the lengths and count given and a fresh checksum. */
static size_t forge_stored(uint8_t *dst, uint32_t format, const uint8_t *stored, uint32_t slen,
                           uint32_t raw, uint32_t count)
{
    size_t hs = block_header_size(format);
    if (format == JP_CAPTURE_VERSION_1) {
        memcpy(dst, "JPBK", 4);
        memcpy(dst + 4, &slen, 4);
        memcpy(dst + 8, &count, 4);
    } else {
        memcpy(dst, "JPBZ", 4);
        memcpy(dst + 4, &slen, 4);
        memcpy(dst + 8, &raw, 4);
        memcpy(dst + 12, &count, 4);
    }
    uint32_t crc = jp_crc32c(jp_crc32c(0, dst, hs - 4), stored, slen);
    memcpy(dst + hs - 4, &crc, 4);
    memcpy(dst + hs, stored, slen);
    return hs + (size_t)slen;
}

/* The verdict of the fixture's header followed by one forged block. */
static const char *verdict_of_stored(const struct fixture *f, const uint8_t *stored,
                                     uint32_t slen, uint32_t raw, uint32_t count,
                                     uint32_t *verdict)
{
    uint8_t *file = malloc(f->bounds[0] + JP_CAPTURE_BLOCK_HEADER_SIZE + slen);
    memcpy(file, f->file, f->bounds[0]);
    size_t n = f->bounds[0] +
               forge_stored(file + f->bounds[0], f->format, stored, slen, raw, count);
    struct outcome o = read_bytes(f, file, n);
    free(file);
    *verdict = o.verdict;
    return o.reason;
}

/* forge_block in each way a version stores a payload: index 0 raw, 1 a zstd frame. */
static int forge_packed;

static const char *verdict_of_forged(const struct fixture *f, const uint8_t *payload,
                                     uint32_t plen, uint32_t count, uint32_t *verdict)
{
    if (!forge_packed)
        return verdict_of_stored(f, payload, plen, plen, count, verdict);
    size_t cap = ZSTD_compressBound(plen);
    uint8_t *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, payload, plen, 3);
    cr_assert(!ZSTD_isError(zn) && zn < plen, "the payload compresses");
    const char *why = verdict_of_stored(f, z, (uint32_t)zn, plen, count, verdict);
    free(z);
    return why;
}

Test(capture, structural_rules_inside_checksummed_blocks)
{
    static struct fixture f;
    for (unsigned way = 0; way < 3; way++) {
        fixture_for(&f, way == 0 ? JP_CAPTURE_VERSION_1 : JP_CAPTURE_VERSION_2, 1, 0, 100);
        forge_packed = way == 2;
        uint8_t payload[4096];
        uint32_t v;
        size_t n = 0;
        for (unsigned i = 0; i < f.nrecs; i++) {
            memcpy(payload + n, f.recs[i], f.lens[i]);
            n += f.lens[i];
        }
        cr_assert_null(verdict_of_forged(&f, payload, (uint32_t)n, f.nrecs, &v),
                       "forgery works");
        cr_assert_eq(v, JP_CAPI_COMPLETE, "baseline");

        cr_assert_str_eq(verdict_of_forged(&f, payload, (uint32_t)n, f.nrecs + 1, &v),
                         "block record count mismatch", "count");
        cr_assert_str_eq(verdict_of_forged(&f, payload, (uint32_t)n - 1, f.nrecs, &v),
                         "record out of bounds", "last record cut inside its block");
        cr_assert_str_eq(verdict_of_forged(&f, payload + 64, (uint32_t)n - 64, f.nrecs - 1,
                                           &v),
                         "first record is not run_start", "no run_start");

        uint8_t two[4096]; /* run_start twice */
        memcpy(two, payload, 64);
        memcpy(two + 64, payload, n);
        cr_assert_str_eq(verdict_of_forged(&f, two, (uint32_t)n + 64, f.nrecs + 1, &v),
                         "run_start after the first record", "second run_start");

        uint8_t pad[4096];
        memcpy(pad, payload, 64);
        struct jp_rec_hdr ph = {JP_REC_PAD, 32};
        memset(pad + 64, 0, 32);
        memcpy(pad + 64, &ph, 4);
        memcpy(pad + 96, payload + 64, n - 64);
        cr_assert_str_eq(verdict_of_forged(&f, pad, (uint32_t)n + 32, f.nrecs + 1, &v),
                         "pad record in capture", "pad");

        uint8_t after[4096];
        memcpy(after, payload, n);
        memcpy(after + n, f.recs[3], 16); /* a node def after the stop */
        cr_assert_str_eq(verdict_of_forged(&f, after, (uint32_t)n + 16, f.nrecs + 1, &v),
                         "records after the stop record", "after stop");

        uint8_t badrec[4096];
        memcpy(badrec, payload, n);
        badrec[64 + 8] = 7; /* source origin 7 */
        cr_assert_str_eq(verdict_of_forged(&f, badrec, (uint32_t)n, f.nrecs, &v),
                         "unknown source origin", "record validation reason");
        cr_assert_eq(v, JP_CAPI_INVALID, "invalid");
    }
    forge_packed = 0;
}

Test(capture, stop_record_count_must_match)
{
    static struct fixture f;
    for (size_t k = 0; k < NFORMATS; k++) {
        fixture_for(&f, formats[k], 1, 1, 5);
        struct outcome o = read_bytes(&f, f.file, f.size);
        cr_assert_eq(o.verdict, JP_CAPI_INVALID, "invalid");
        cr_assert_str_eq(o.reason, "stop record count mismatch", "reason");
        cr_assert_eq(o.records, f.recs_before[f.nbounds - 2], "blocks before the stop's block");
    }
}

Test(capture, data_after_the_stop_record)
{
    static struct fixture f;
    for (size_t k = 0; k < NFORMATS; k++) {
        fixture_for(&f, formats[k], 1, 0, 5);
        uint8_t *copy = malloc(f.size + 1);
        memcpy(copy, f.file, f.size);
        copy[f.size] = 0;
        struct outcome o = read_bytes(&f, copy, f.size + 1);
        cr_assert_eq(o.verdict, JP_CAPI_INVALID, "invalid");
        cr_assert_str_eq(o.reason, "data after the stop record", "reason");
        cr_assert_eq(o.offset, f.size, "offset");
        cr_assert_eq(o.records, f.nrecs, "all records still read");
        free(copy);
    }
}

Test(capture, huge_block_lengths_allocate_nothing)
{
    static struct fixture f;
    for (size_t k = 0; k < NFORMATS; k++) {
        fixture_for(&f, formats[k], 1, 0, 100);
        int v1 = formats[k] == JP_CAPTURE_VERSION_1, v3 = formats[k] == JP_CAPTURE_VERSION;
        size_t hs = block_header_size(formats[k]);
        uint8_t file[4096];
        memcpy(file, f.file, f.bounds[0]);
        uint8_t *b = file + f.bounds[0];
        /* the length the reader bounds: version 1's payload_len, version 2's and 3's raw_len
         * (version 3's packed_len is made as large as it may be, below) */
        uint8_t *len_at = b + (v1 ? 4 : v3 ? 12 : 8);
        memset(b, 0xff, hs);
        memcpy(b, v1 ? "JPBK" : v3 ? "JPBC" : "JPBZ", 4);
        if (v3) {
            uint32_t most = JP_CAPTURE_MAX_PACKED;
            memcpy(b + 8, &most, 4);
        }
        struct outcome o = read_bytes(&f, file, f.bounds[0] + hs);
        cr_assert_str_eq(o.reason, "block larger than the maximum", "4 GiB block");
        uint32_t big = JP_CAPTURE_MAX_BLOCK + 1;
        memcpy(len_at, &big, 4);
        o = read_bytes(&f, file, f.bounds[0] + hs);
        cr_assert_str_eq(o.reason, "block larger than the maximum", "one byte over");
        big = JP_CAPTURE_MAX_BLOCK; /* allowed, but the file ends: a cut */
        memcpy(b + 4, &big, 4);
        memcpy(len_at, &big, 4);
        o = read_bytes(&f, file, f.bounds[0] + hs + 100);
        cr_assert_eq(o.verdict, JP_CAPI_MISSING_STOP_EVENT, "cut");
        cr_assert_str_eq(o.reason, "truncated block", "reason");
        big = 0;
        memcpy(len_at, &big, 4);
        o = read_bytes(&f, file, f.bounds[0] + hs);
        cr_assert_str_eq(o.reason, "empty block", "empty");
    }
}

/* Version 2: what the stored length and a zstd frame can claim. A frame is decompressed
 * into a buffer of the block's raw_len (itself bounded), so a small frame that expands to far
 * more (a "bomb"), or to less, is refused as a bad block; stored bytes longer than the raw
 * ones are refused before anything is read. */
Test(capture, compressed_blocks_are_bounded)
{
    static struct fixture f;
    fixture_for(&f, JP_CAPTURE_VERSION_2, 1, 0, 100);
    uint8_t payload[4096];
    size_t n = 0;
    for (unsigned i = 0; i < f.nrecs; i++) {
        memcpy(payload + n, f.recs[i], f.lens[i]);
        n += f.lens[i];
    }
    uint32_t v;
    cr_assert_str_eq(verdict_of_stored(&f, payload, (uint32_t)n, (uint32_t)n - 1, f.nrecs, &v),
                     "bad stored block length", "stored longer than raw");
    cr_assert_eq(v, JP_CAPI_INVALID);
    cr_assert_str_eq(verdict_of_stored(&f, payload, 0, (uint32_t)n, f.nrecs, &v),
                     "bad stored block length", "nothing stored");

    /* 64 MiB of zeros in a few kilobytes, claiming to be a 64 KiB block or the largest */
    size_t bomb_raw = 64u << 20, cap = ZSTD_compressBound(bomb_raw);
    uint8_t *zeros = calloc(1, bomb_raw), *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, zeros, bomb_raw, 19);
    cr_assert(!ZSTD_isError(zn) && zn < 65536, "the bomb is small: %zu", zn);
    cr_assert_str_eq(verdict_of_stored(&f, z, (uint32_t)zn, 65536, f.nrecs, &v),
                     "bad compressed block", "a frame expanding past raw_len");
    cr_assert_str_eq(verdict_of_stored(&f, z, (uint32_t)zn, JP_CAPTURE_MAX_BLOCK, f.nrecs, &v),
                     "bad compressed block", "past the largest block");
    cr_assert_eq(v, JP_CAPI_INVALID);

    /* a frame giving fewer bytes than raw_len says */
    zn = ZSTD_compress(z, cap, payload, n, 3);
    cr_assert(!ZSTD_isError(zn) && zn < n);
    cr_assert_str_eq(verdict_of_stored(&f, z, (uint32_t)zn, (uint32_t)n + 8, f.nrecs, &v),
                     "bad compressed block", "short frame");
    /* bytes that are no zstd frame at all */
    memset(z, 0x5a, 64);
    cr_assert_str_eq(verdict_of_stored(&f, z, 64, (uint32_t)n, f.nrecs, &v),
                     "bad compressed block", "not zstd");

    free(zeros);
    free(z);
}

Test(capture, missing_file_and_missing_stop)
{
    struct jp_capture_reader *r = NULL;
    cr_assert_eq(jp_capture_open("/nonexistent/dir/run.jpcap", &r), -ENOENT, "missing");
    cr_assert_null(r, "no reader");
    cr_assert_str_eq(jp_capture_integrity_name(JP_CAPI_MISSING), "capture_missing", "name");

    static struct fixture f;
    for (size_t k = 0; k < NFORMATS; k++) {
        fixture_for(&f, formats[k], 0, 0, 6);
        struct outcome o = read_bytes(&f, f.file, f.size);
        cr_assert_eq(o.verdict, JP_CAPI_MISSING_STOP_EVENT, "no stop");
        cr_assert_str_eq(o.reason, "missing stop record", "reason");
        cr_assert_eq(o.records, f.nrecs, "everything else read");
        cr_assert_eq(o.offset, f.size, "at the end");
    }
}

Test(capture, open_by_path)
{
    static struct fixture f;
    make_records(&f, 1, 0);
    write_fixture(&f, 9);
    char path[] = "/tmp/jp-capture-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp");
    cr_assert_eq(write(fd, f.file, f.size), (ssize_t)f.size, "write");
    close(fd);
    struct jp_capture_reader *r;
    cr_assert_eq(jp_capture_open(path, &r), 0, "open");
    unlink(path);
    const void *rec;
    uint32_t len;
    unsigned n = 0;
    while (jp_capture_next(r, &rec, &len) == 1)
        n++;
    cr_assert_eq(n, f.nrecs, "records");
    cr_assert_eq(jp_capture_verdict(r, NULL, NULL), JP_CAPI_COMPLETE, "complete");
    jp_capture_close(r);
}

Test(capture, writer_rules)
{
    int fd = memfd_create("capture", MFD_CLOEXEC);
    struct jp_capture_meta meta = {JP_MODE_MEMORY, 1, 2, 0};
    struct jp_capture_writer *w;
    struct jp_capture_meta bad = {3, 1, 2, 0};
    cr_assert_eq(jp_capture_writer_new(fd, &bad, &w), -EINVAL, "bad mode");
    struct jp_capture_meta bad_format = {JP_MODE_MEMORY, 1, 2, JP_CAPTURE_VERSION + 1};
    cr_assert_eq(jp_capture_writer_new(fd, &bad_format, &w), -EINVAL, "unknown format");
    cr_assert_eq(lseek(fd, 0, SEEK_CUR), 0, "nothing written for a refused writer");
    cr_assert_eq(jp_capture_writer_new(fd, &meta, &w), 0, "writer");
    struct jp_rec_hdr pad[8] = {{JP_REC_PAD, 32}};
    cr_assert_eq(jp_capture_write(w, pad, 32), 0, "PAD accepted");
    struct jp_rec_node_def nd = {{JP_REC_NODE_DEF, 16}, 1, 0, 1};
    cr_assert_eq(jp_capture_write(w, &nd, 12), -EINVAL, "len disagrees with size");
    struct jp_rec_hdr junk = {99, 4};
    cr_assert_eq(jp_capture_write(w, &junk, 4), -EINVAL, "invalid record");
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_MEMORY);
    cr_assert_eq(jp_capture_write(w, &rs, sizeof rs), 0, "run start");
    struct jp_rec_run_stop st;
    memset(&st, 0, sizeof st);
    st.h = (struct jp_rec_hdr){JP_REC_RUN_STOP, sizeof st};
    st.termination = JP_TERM_INTERRUPTED;
    st.record_count = 1; /* the PAD is not counted, and not written */
    cr_assert_eq(jp_capture_write(w, &st, sizeof st), 0, "stop");
    cr_assert_eq(jp_capture_write(w, &nd, 16), -EINVAL, "nothing after the stop");
    jp_capture_writer_free(w);
    lseek(fd, 0, SEEK_SET);
    struct jp_capture_reader *r;
    cr_assert_eq(jp_capture_open_fd(fd, &r), 0, "open");
    cr_assert_eq(jp_capture_meta(r)->mode, JP_MODE_MEMORY, "meta");
    const void *rec;
    uint32_t len;
    unsigned n = 0;
    while (jp_capture_next(r, &rec, &len) == 1)
        n++;
    const char *why;
    cr_assert_eq(jp_capture_verdict(r, &why, NULL), JP_CAPI_COMPLETE, "complete: %s",
                 why ? why : "");
    cr_assert_eq(n, 2, "PAD dropped");
    jp_capture_close(r);

    /* A write error is sticky. */
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0, "pipe");
    close(pfd[0]);
    signal(SIGPIPE, SIG_IGN);
    cr_assert_eq(jp_capture_writer_new(pfd[1], &meta, &w), -EPIPE, "reader gone");
    close(pfd[1]);
    close(fd);
}

/* Many blocks of the default size: the writer splits near JP_CAPTURE_BLOCK_TARGET and the
 * reader streams through them. */
Test(capture, large_capture_streams)
{
    int fd = memfd_create("capture", MFD_CLOEXEC);
    struct jp_capture_meta meta = {JP_MODE_CPU, 1, 2, 0};
    struct jp_capture_writer *w;
    cr_assert_eq(jp_capture_writer_new(fd, &meta, &w), 0, "writer");
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_CPU);
    cr_assert_eq(jp_capture_write(w, &rs, sizeof rs), 0, "start");
    uint64_t n = 100000;
    for (uint64_t i = 0; i < n; i++) {
        struct jp_rec_cpu_sample s;
        memset(&s, 0, sizeof s);
        s.h = (struct jp_rec_hdr){JP_REC_CPU_SAMPLE, sizeof s};
        s.state = JP_STATE_WAITING;
        s.requested_tick = i;
        cr_assert_eq(jp_capture_write(w, &s, sizeof s), 0, "sample");
    }
    struct jp_rec_run_stop st;
    memset(&st, 0, sizeof st);
    st.h = (struct jp_rec_hdr){JP_REC_RUN_STOP, sizeof st};
    st.termination = JP_TERM_RETURNED;
    st.record_count = n + 1;
    cr_assert_eq(jp_capture_write(w, &st, sizeof st), 0, "stop");
    jp_capture_writer_free(w);
    off_t size = lseek(fd, 0, SEEK_END);
    cr_assert_lt(size, (off_t)(n * 32 / 4), "written, compressed");
    lseek(fd, 0, SEEK_SET);
    struct jp_capture_reader *r;
    cr_assert_eq(jp_capture_open_fd(fd, &r), 0, "open");
    const void *rec;
    uint32_t len;
    uint64_t got = 0, tick = 0;
    while (jp_capture_next(r, &rec, &len) == 1) {
        const struct jp_rec_hdr *h = rec;
        if (h->type == JP_REC_CPU_SAMPLE) {
            const struct jp_rec_cpu_sample *s = rec;
            cr_assert_eq(s->requested_tick, tick, "in order");
            tick++;
        }
        got++;
    }
    cr_assert_eq(got, n + 2, "every record");
    uint64_t off;
    cr_assert_eq(jp_capture_verdict(r, NULL, &off), JP_CAPI_COMPLETE, "complete");
    cr_assert_eq(off, (uint64_t)size, "offset = size");
    jp_capture_close(r);
    close(fd);
}

/* ---- version 3: records by column ------------------------------------------------------- */

/* capture.h's column order: kind, other, then an allocation's node, id, size and reserved0
 * (the forged blocks below hold allocations only) */
enum { COL_KIND_T, COL_OTHER_T, COL_NODE_T, COL_ID_T, COL_SIZE_T, COL_MISC_T };

/* A memory stream whose allocation events carry every value a field can hold: ids and nodes
 * that step back, wrap past the top of their width and jump, nonzero reserved fields and CPU
 * sample padding, between records stored whole. Written as version 3 it reads back byte for
 * byte. */
Test(capture, version_3_round_trips_every_field_byte_for_byte)
{
    static struct fixture f;
    free(f.file);
    memset(&f, 0, sizeof f);
    f.format = JP_CAPTURE_VERSION;
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_MEMORY);
    add(&f, &rs, sizeof rs);
    struct jp_rec_node_def nd = {{JP_REC_NODE_DEF, 16}, 1, 0, 1};
    add(&f, &nd, 16);
    static const uint64_t ids[] = {1, 2, 0, UINT64_MAX, 0, 1ull << 63, 5, UINT64_MAX - 1};
    static const uint32_t nodes[] = {1, UINT32_MAX, 0, 7, 1u << 31, 2, UINT32_MAX - 3, 1};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (unsigned i = 0; i < 48; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint8_t rec[32];
        memcpy(rec + 4, &nodes[i % 8], 4);
        memcpy(rec + 8, &ids[(i / 3) % 8], 8);
        memcpy(rec + 16, &x, 8);
        uint64_t y = i % 4 ? 0 : x * 3;
        memcpy(rec + 24, &y, 8);
        static const uint16_t kinds[] = {JP_REC_ALLOC, JP_REC_RESIZE, JP_REC_FREE,
                                         JP_REC_CPU_SAMPLE};
        struct jp_rec_hdr h = {kinds[i % 4], 32};
        memcpy(rec, &h, sizeof h);
        if (h.type == JP_REC_CPU_SAMPLE)
            rec[4] = JP_STATE_JETT, rec[5] = 0; /* a state and flags the validator takes */
        if (jp_rec_validate(rec, 32, NULL) < 0)
            continue; /* a value the record's own rules refuse is no test of the packing */
        add(&f, rec, 32);
        if (i % 16 == 5)
            add(&f, &nd, 16);
    }
    cr_assert_gt(f.nrecs, 40, "most records are valid");
    write_fixture(&f, 1000);
    cr_assert_eq(f.file[8], JP_CAPTURE_VERSION, "version 3");
    struct outcome o = read_bytes(&f, f.file, f.size);
    cr_assert_eq(o.verdict, JP_CAPI_MISSING_STOP_EVENT, "no stop record: %s", o.reason);
    cr_assert_not(o.mismatch, "every record as it was written");
    cr_assert_eq(o.records, f.nrecs, "every record");
}

/* A regular allocation stream packs to a fraction of version 2's bytes: the columns turn the
 * ids' steps and the repeated nodes into runs zstd takes in a few bytes. */
static size_t memory_stream_file(uint32_t format, uint8_t **file)
{
    int fd = memfd_create("capture", MFD_CLOEXEC);
    struct jp_capture_meta meta = {JP_MODE_MEMORY, 1, 2, format};
    struct jp_capture_writer *w;
    cr_assert_eq(jp_capture_writer_new(fd, &meta, &w), 0, "writer");
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_MEMORY);
    cr_assert_eq(jp_capture_write(w, &rs, sizeof rs), 0);
    for (uint64_t i = 1; i <= 100000; i++) {
        struct jp_rec_alloc a = {{JP_REC_ALLOC, 32}, (uint32_t)(1 + i % 3), i, 16 + i % 7, 0};
        cr_assert_eq(jp_capture_write(w, &a, sizeof a), 0);
        struct jp_rec_free fr = {{JP_REC_FREE, 32}, (uint32_t)(1 + i % 3), i, 16 + i % 7, 0};
        cr_assert_eq(jp_capture_write(w, &fr, sizeof fr), 0);
    }
    jp_capture_writer_free(w);
    off_t n = lseek(fd, 0, SEEK_END);
    *file = malloc((size_t)n);
    cr_assert_eq(pread(fd, *file, (size_t)n, 0), n);
    close(fd);
    return (size_t)n;
}

Test(capture, version_3_is_a_fraction_of_version_2)
{
    uint8_t *f2, *f3;
    size_t n2 = memory_stream_file(JP_CAPTURE_VERSION_2, &f2);
    size_t n3 = memory_stream_file(0, &f3);
    cr_assert_eq(f3[8], JP_CAPTURE_VERSION, "the default is version 3");
    cr_assert_lt(n3 * 10, n2, "version 3 %zu bytes against version 2's %zu", n3, n2);
    free(f2);
    free(f3);
}

/* A forged version 3 block: packed columns given as (length, bytes) pairs, stored raw or as a
 * zstd frame, with the packed and raw lengths and record count given and a fresh checksum,
 * after the fixture's header. The verdict's reason. */
struct col_forge {
    const uint8_t *bytes[JP_CAPTURE_COLUMNS];
    uint32_t len[JP_CAPTURE_COLUMNS];
};

static const char *verdict_of_v3(const struct fixture *f, const struct col_forge *cf,
                                 int zipped, uint32_t packed_claim, uint32_t raw,
                                 uint32_t count, uint32_t *verdict)
{
    uint8_t packed[8192];
    size_t n = 4u * JP_CAPTURE_COLUMNS;
    for (unsigned i = 0; i < JP_CAPTURE_COLUMNS; i++) {
        memcpy(packed + 4 * i, &cf->len[i], 4);
        if (cf->len[i] <= sizeof packed - n && cf->bytes[i]) {
            memcpy(packed + n, cf->bytes[i], cf->len[i]);
            n += cf->len[i];
        }
    }
    uint32_t plen = packed_claim ? packed_claim : (uint32_t)n;
    uint8_t stored[9000];
    uint32_t slen = (uint32_t)n;
    if (zipped) {
        size_t z = ZSTD_compress(stored, sizeof stored, packed, n, 3);
        cr_assert(!ZSTD_isError(z));
        slen = (uint32_t)z;
    }
    if (!zipped || slen >= n) { /* bytes zstd cannot shrink are stored as they are */
        slen = (uint32_t)n;
        memcpy(stored, packed, n);
    }
    uint8_t *file = malloc(f->bounds[0] + JP_CAPTURE_BLOCK_HEADER_SIZE_V3 + slen);
    memcpy(file, f->file, f->bounds[0]);
    uint8_t *b = file + f->bounds[0];
    memcpy(b, "JPBC", 4);
    memcpy(b + 4, &slen, 4);
    memcpy(b + 8, &plen, 4);
    memcpy(b + 12, &raw, 4);
    memcpy(b + 16, &count, 4);
    uint32_t crc = jp_crc32c(jp_crc32c(0, b, 20), stored, slen);
    memcpy(b + 20, &crc, 4);
    memcpy(b + 24, stored, slen);
    struct outcome o = read_bytes(f, file, f->bounds[0] + 24 + slen);
    free(file);
    *verdict = o.verdict;
    return o.reason;
}

/* The fixture's run_start whole in the other column, then one allocation from the columns:
 * the baseline every hostile variant below changes in one place. */
static uint8_t kinds2[2] = {JP_REC_RUN_START, JP_REC_ALLOC};
static uint8_t node1[1] = {2}, id1[1] = {2}, size1[1] = {64}, misc1[1] = {0};

static struct col_forge base_forge(const struct fixture *f)
{
    struct col_forge cf = {{kinds2, f->recs[0], node1, id1, size1, misc1},
                           {2, f->lens[0], 1, 1, 1, 1}};
    return cf;
}

Test(capture, version_3_hostile_blocks_fail_with_a_clear_reason)
{
    static struct fixture f;
    fixture_for(&f, JP_CAPTURE_VERSION, 1, 0, 100);
    const uint32_t raw = f.lens[0] + 32;
    uint32_t v;
    for (int zipped = 0; zipped < 2; zipped++) {
        struct col_forge cf = base_forge(&f);
        /* the baseline is a good block: its run ends without a stop record */
        const char *why = verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v);
        cr_assert_eq(v, JP_CAPI_MISSING_STOP_EVENT, "baseline: %s", why);

        /* a block claiming a huge decoded size, raw or packed */
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, JP_CAPTURE_MAX_BLOCK + 1, 2, &v),
                         "block larger than the maximum", "raw_len past the largest");
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, JP_CAPTURE_MAX_PACKED + 1, raw, 2, &v),
                         "packed block larger than the maximum", "packed_len past the largest");
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, JP_CAPTURE_MAX_BLOCK, 2, &v),
                         "records fall short of the block's size", "raw_len larger than decoded");
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw - 1, 2, &v),
                         "records run past the block's size", "raw_len smaller than decoded");
        cr_assert_eq(v, JP_CAPI_INVALID);

        /* deltas and values that overflow their field */
        static const uint8_t wide[5] = {0x80, 0x80, 0x80, 0x80, 0x20}; /* 2^33 */
        cf = base_forge(&f), cf.bytes[COL_NODE_T] = wide, cf.len[COL_NODE_T] = 5;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "field value wider than its field", "a node delta past 32 bits");
        static const uint8_t longer[11] = {0x81, 0x80, 0x80, 0x80, 0x80, 0x80,
                                           0x80, 0x80, 0x80, 0x80, 0x00};
        cf = base_forge(&f), cf.bytes[COL_ID_T] = longer, cf.len[COL_ID_T] = 11;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "bad varint in a column", "an id delta of 11 bytes");
        static const uint8_t past64[10] = {0x80, 0x80, 0x80, 0x80, 0x80,
                                           0x80, 0x80, 0x80, 0x80, 0x02};
        cf = base_forge(&f), cf.bytes[COL_ID_T] = past64, cf.len[COL_ID_T] = 10;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "bad varint in a column", "an id delta past 64 bits");

        /* fields and records that run past their column or the block */
        static const uint8_t cont[1] = {0x85};
        cf = base_forge(&f), cf.bytes[COL_SIZE_T] = cont;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "field runs past its column", "a varint cut by its column's end");
        cf = base_forge(&f), cf.len[COL_MISC_T] = 0;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "field runs past its column", "an empty column");
        cf = base_forge(&f), cf.len[COL_OTHER_T] = f.lens[0] - 1;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw - 1, 2, &v),
                         "record runs past its column", "a whole record cut");
        cf = base_forge(&f), cf.len[COL_OTHER_T] = 3;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "record runs past its column", "a header cut");
        static const uint8_t two_ids[2] = {2, 2};
        cf = base_forge(&f), cf.bytes[COL_ID_T] = two_ids, cf.len[COL_ID_T] = 2;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "column has bytes left over", "an id too many");
        static const uint8_t wrong_kind[2] = {JP_REC_NODE_DEF, JP_REC_ALLOC};
        cf = base_forge(&f), cf.bytes[COL_KIND_T] = wrong_kind;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "record kind differs from its record", "kind against record");
        cr_assert_str_eq(verdict_of_v3(&f, &(struct col_forge){0}, zipped, 0, raw, 0, &v),
                         "records fall short of the block's size", "no records at all");
        cf = base_forge(&f);
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 3, &v),
                         "block record count mismatch", "a count the kinds do not have");
        /* column lengths that do not add up to the packed bytes */
        cf = base_forge(&f), cf.len[COL_OTHER_T] = UINT32_MAX;
        cr_assert_str_eq(verdict_of_v3(&f, &cf, zipped, 0, raw, 2, &v),
                         "column runs past the packed block", "a 4 GiB column");
        cf = base_forge(&f);
        uint32_t plen = 4u * JP_CAPTURE_COLUMNS + 6 + f.lens[0];
        cr_assert_str_eq(verdict_of_v3(&f, &cf, 0, plen - 1, raw, 2, &v),
                         "bad stored block length", "stored bytes more than packed_len");
        cr_assert_str_eq(verdict_of_v3(&f, &cf, 0, plen + 1, raw, 2, &v),
                         "bad compressed block", "fewer bytes than packed_len, no frame");
        cr_assert_str_eq(verdict_of_v3(&f, &cf, 1, plen + 1, raw, 2, &v),
                         "bad compressed block", "a frame shorter than packed_len");
        cr_assert_eq(v, JP_CAPI_INVALID);
    }
    /* a zstd frame that expands to 64 MiB behind a small packed_len */
    size_t bomb = 64u << 20, cap = ZSTD_compressBound(bomb);
    uint8_t *zeros = calloc(1, bomb), *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, zeros, bomb, 19);
    cr_assert(!ZSTD_isError(zn) && zn < 8192);
    uint8_t *file = malloc(f.bounds[0] + 24 + zn);
    memcpy(file, f.file, f.bounds[0]);
    uint8_t *b = file + f.bounds[0];
    uint32_t hdr[5] = {0, (uint32_t)zn, 65536, 65536, 10};
    memcpy(hdr, "JPBC", 4);
    memcpy(b, hdr, 20);
    uint32_t crc = jp_crc32c(jp_crc32c(0, b, 20), z, zn);
    memcpy(b + 20, &crc, 4);
    memcpy(b + 24, z, zn);
    struct outcome o = read_bytes(&f, file, f.bounds[0] + 24 + zn);
    cr_assert_str_eq(o.reason, "bad compressed block", "the bomb is refused");
    free(file), free(zeros), free(z);
}

/* Records written in place (jp_capture_slots_begin/commit, as the daemon's drain writes event
 * slots): the file is byte for byte the one jp_capture_write makes of the same records; a
 * block ends at its target as with whole writes; a slot that is not a valid one-slot event is
 * refused and none of the run taken. */
Test(capture, slots_written_in_place_make_the_same_file_as_records)
{
    uint8_t *files[2];
    size_t sizes[2];
    for (int way = 0; way < 2; way++) {
        int fd = memfd_create("capture", MFD_CLOEXEC);
        struct jp_capture_meta meta = {JP_MODE_MEMORY, 1, 2, 0};
        struct jp_capture_writer *w;
        cr_assert_eq(jp_capture_writer_new(fd, &meta, &w), 0);
        struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_MEMORY);
        cr_assert_eq(jp_capture_write(w, &rs, sizeof rs), 0);
        uint64_t id = 1;
        while (id <= 30000) {
            uint32_t n = 700;
            uint8_t *d = NULL;
            int err = 0;
            if (way == 1) {
                d = jp_capture_slots_begin(w, &n, &err);
                cr_assert_not_null(d, "begin: %d", err);
                cr_assert(n >= 1 && n <= 700, "n %u", n);
            }
            for (uint32_t i = 0; i < n && id <= 30000; i++, id++) {
                struct jp_rec_alloc a = {{JP_REC_ALLOC, 32}, (uint32_t)(id % 5 + 1), id,
                                         id % 333, 0};
                if (way == 1)
                    memcpy(d + 32 * i, &a, 32);
                else
                    cr_assert_eq(jp_capture_write(w, &a, 32), 0);
                if (way == 1 && id == 30000)
                    n = i + 1;
            }
            if (way == 1)
                cr_assert_eq(jp_capture_slots_commit(w, n), 0);
        }
        /* refused: a PAD slot and a CPU sample with a bad state, none of the run taken */
        uint32_t n = 2;
        int err;
        uint8_t *d = jp_capture_slots_begin(w, &n, &err);
        cr_assert_not_null(d);
        struct jp_rec_alloc ok = {{JP_REC_ALLOC, 32}, 1, 1, 1, 0};
        struct jp_rec_hdr pad = {JP_REC_PAD, 32};
        memcpy(d, &ok, 32);
        memset(d + 32, 0, 32);
        memcpy(d + 32, &pad, sizeof pad);
        cr_assert_eq(jp_capture_slots_commit(w, 2), -EINVAL, "a PAD slot");
        n = 1;
        d = jp_capture_slots_begin(w, &n, &err);
        struct jp_rec_cpu_sample s;
        memset(&s, 0, sizeof s);
        s.h = (struct jp_rec_hdr){JP_REC_CPU_SAMPLE, 32};
        s.state = 200;
        memcpy(d, &s, 32);
        cr_assert_eq(jp_capture_slots_commit(w, 1), -EINVAL, "an invalid sample");
        cr_assert_eq(jp_capture_slots_commit(w, 1), -EINVAL, "no slots open");
        jp_capture_writer_free(w);
        files[way] = NULL;
        off_t end = lseek(fd, 0, SEEK_END);
        files[way] = malloc((size_t)end);
        cr_assert_eq(pread(fd, files[way], (size_t)end, 0), end);
        sizes[way] = (size_t)end;
        close(fd);
    }
    cr_assert(sizes[0] == sizes[1] && memcmp(files[0], files[1], sizes[0]) == 0,
              "in place (%zu bytes) and record by record (%zu bytes) differ", sizes[1],
              sizes[0]);
    free(files[0]);
    free(files[1]);
}
