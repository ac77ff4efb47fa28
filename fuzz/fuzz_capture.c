/* libFuzzer harness: the capture reader on an arbitrary file (a memfd holding the input).
 *
 * Invariants: any file that can be opened gives a reader; every record handed out is 8-byte
 * aligned, has size == len and validates; records come only from verified blocks, each at
 * most JP_CAPTURE_MAX_BLOCK raw bytes from at least one stored byte after its header, so
 * they never add up to more than that allows (version 1: more than the file holds); the end is stable (next keeps returning 0); the
 * verdict is one of complete / missing_stop_event / invalid, has a reason exactly when it is
 * not complete, and its offset is within the file (the file size when complete); a complete
 * capture starts with RUN_START, ends with a RUN_STOP whose record_count matches, and has its
 * metadata; a capture rewritten from the records read gives the same records and, when the
 * original was complete, is complete too. Each input is also read with its checksums fixed up
 * (fuzz_crc_fix.h), and once more as the packed columns of one version 3 block (its first
 * eight bytes the block's raw_len and record_count, the rest its packed bytes, stored as they
 * are behind a valid header), which takes mutations straight to the column decoder: whatever
 * the columns say, the block gives at most raw_len bytes of valid records or a verdict. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "fuzz_crc_fix.h"
#include "protocol/capture.h"
#include "protocol/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd_with(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-capture", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create");
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        FUZZ_CHECK(w > 0, "write to memfd");
        done += (size_t)w;
    }
    FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0, "lseek");
    return fd;
}

struct seen {
    uint8_t *bytes; /* the records, concatenated */
    size_t len, cap;
    uint64_t count, counted; /* all records; those RUN_STOP counts */
    uint16_t first_type, last_type;
    uint64_t stop_count;
};

static void keep(struct seen *s, const void *rec, uint32_t len)
{
    if (s->len + len > s->cap) {
        s->cap = (s->len + len) * 2;
        s->bytes = realloc(s->bytes, s->cap);
        FUZZ_CHECK(s->bytes != NULL, "realloc");
    }
    memcpy(s->bytes + s->len, rec, len);
    s->len += len;
}

/* Reads the whole capture on fd, checking each record; returns the verdict. */
static uint32_t read_all(int fd, size_t file_size, struct seen *s)
{
    /* what the file's blocks can hold: version 1 stores raw bytes; version 2 and 3 blocks
     * are at least a header and one stored byte, each giving at most JP_CAPTURE_MAX_BLOCK */
    uint8_t version = 0;
    FUZZ_CHECK(file_size < 9 || pread(fd, &version, 1, 8) == 1, "pread");
    size_t most = version == JP_CAPTURE_VERSION_1
                      ? file_size
                      : file_size / (JP_CAPTURE_BLOCK_HEADER_SIZE + 1) * JP_CAPTURE_MAX_BLOCK;
    struct jp_capture_reader *rd = NULL;
    int r = jp_capture_open_fd(fd, &rd);
    FUZZ_CHECK(r == 0 && rd != NULL, "open_fd refused an open file: %d", r);
    const struct jp_capture_meta *meta = jp_capture_meta(rd);
    const char *reason = NULL;
    uint64_t off = 0;
    FUZZ_CHECK(jp_capture_verdict(rd, &reason, &off) == JP_CAPI_NONE,
               "a verdict before the end");

    for (;;) {
        const void *rec;
        uint32_t len;
        r = jp_capture_next(rd, &rec, &len);
        FUZZ_CHECK(r == 0 || r == 1, "next returned %d on a memfd", r);
        if (r == 0)
            break;
        FUZZ_CHECK(((uintptr_t)rec & 7u) == 0, "record not 8-byte aligned");
        const char *why = NULL;
        FUZZ_CHECK(jp_rec_validate(rec, len, &why) == 0, "an invalid record came out: %s", why);
        struct jp_rec_hdr h;
        memcpy(&h, rec, sizeof h);
        FUZZ_CHECK(h.size == len, "record size %u handed out as %u bytes", h.size, len);
        FUZZ_CHECK(h.type != JP_REC_PAD, "a PAD record came out of a capture");
        if (s->count == 0)
            s->first_type = h.type;
        s->last_type = h.type;
        s->count++;
        if (h.type == JP_REC_RUN_STOP) {
            struct jp_rec_run_stop st;
            memcpy(&st, rec, sizeof st);
            s->stop_count = st.record_count;
        } else if (h.type != JP_REC_EXCERPT) {
            s->counted++;
        }
        keep(s, rec, len);
        FUZZ_CHECK(s->len <= most, "%zu bytes of records from a %zu-byte file", s->len,
                   file_size);
    }
    const void *rec;
    uint32_t len;
    FUZZ_CHECK(jp_capture_next(rd, &rec, &len) == 0, "the end is not stable");

    uint32_t v = jp_capture_verdict(rd, &reason, &off);
    FUZZ_CHECK(v == JP_CAPI_COMPLETE || v == JP_CAPI_MISSING_STOP_EVENT || v == JP_CAPI_INVALID,
               "verdict %u for an open file", v);
    FUZZ_CHECK(off <= file_size, "verdict offset %llu past the %zu-byte file",
               (unsigned long long)off, file_size);
    if (v == JP_CAPI_COMPLETE) {
        FUZZ_CHECK(reason == NULL, "a complete capture with reason %s", reason);
        FUZZ_CHECK(off == file_size, "complete at %llu of %zu", (unsigned long long)off,
                   file_size);
        FUZZ_CHECK(meta != NULL, "complete without metadata");
        FUZZ_CHECK(s->count >= 2 && s->first_type == JP_REC_RUN_START &&
                       s->last_type == JP_REC_RUN_STOP,
                   "complete but not RUN_START ... RUN_STOP");
        FUZZ_CHECK(s->stop_count == s->counted, "stop counts %llu of %llu",
                   (unsigned long long)s->stop_count, (unsigned long long)s->counted);
    } else {
        FUZZ_CHECK(reason != NULL && reason[0] != '\0', "verdict %s without a reason",
                   jp_capture_integrity_name(v));
    }
    if (meta)
        FUZZ_CHECK(jp_mode_name(meta->mode) != NULL, "metadata mode %u", meta->mode);
    else
        FUZZ_CHECK(v == JP_CAPI_INVALID && s->count == 0, "records without metadata");
    if (s->count > 0)
        FUZZ_CHECK(s->first_type == JP_REC_RUN_START, "the first record is %s",
                   jp_rec_type_name(s->first_type));
    jp_capture_close(rd);
    return v;
}

/* One input, as given. */
static void check_file(const uint8_t *data, size_t size)
{
    int fd = memfd_with(data, size);
    struct seen s = {0};
    uint32_t v = read_all(fd, size, &s);
    close(fd);

    /* Rewrite what was read with the writer, in the file's version, and read it back. A run
     * that did not end with RUN_STOP reads back as missing_stop_event (the records are all
     * valid and in order). */
    uint8_t version = size > 8 ? data[8] : 0;
    if (s.count == 0) {
        free(s.bytes);
        return;
    }
    struct jp_capture_meta meta = {.mode = JP_MODE_CPU, .pid = 7, .run_id = 9,
                                   .format = jp_capture_block_header_size(version) ? version : 0};
    fd = memfd_create("fuzz-capture-rewrite", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create");
    struct jp_capture_writer *w = NULL;
    FUZZ_CHECK(jp_capture_writer_new(fd, &meta, &w) == 0, "writer_new");
    for (size_t at = 0; at < s.len;) {
        struct jp_rec_hdr h;
        memcpy(&h, s.bytes + at, sizeof h);
        int r = jp_capture_write(w, s.bytes + at, h.size);
        FUZZ_CHECK(r == 0, "the writer refused a record the reader gave: %d", r);
        at += h.size;
    }
    FUZZ_CHECK(jp_capture_flush(w) == 0, "flush");
    jp_capture_writer_free(w);
    off_t end = lseek(fd, 0, SEEK_END);
    FUZZ_CHECK(end > 0 && lseek(fd, 0, SEEK_SET) == 0, "lseek");
    struct seen again = {0};
    uint32_t v2 = read_all(fd, (size_t)end, &again);
    close(fd);
    FUZZ_CHECK(again.len == s.len && memcmp(again.bytes, s.bytes, s.len) == 0,
               "the rewritten capture holds other records");
    if (v == JP_CAPI_COMPLETE)
        FUZZ_CHECK(v2 == JP_CAPI_COMPLETE, "a complete run rewritten reads as %s",
                   jp_capture_integrity_name(v2));
    free(s.bytes);
    free(again.bytes);
}

/* A version 3 file whose one block holds data[8..] as its packed bytes. */
static void check_packed(const uint8_t *data, size_t size)
{
    if (size < 8 || size - 8 > JP_CAPTURE_MAX_PACKED)
        return;
    static const uint8_t head[] = {'J', 'P', 'C', 'A', 'P', 'T', '\r', '\n', 3, 0, 20, 0};
    /* {"format": 3, "mode": 1, "pid": 7, "run_id": 9} */
    static const uint8_t meta[] = {0x84, 0xa6, 'f', 'o', 'r', 'm', 'a', 't', 3,
                                   0xa4, 'm', 'o', 'd', 'e', 1, 0xa3, 'p', 'i', 'd', 7,
                                   0xa6, 'r', 'u', 'n', '_', 'i', 'd', 9};
    size_t n = sizeof head + 8 + sizeof meta + JP_CAPTURE_BLOCK_HEADER_SIZE_V3 + size - 8;
    uint8_t *f = malloc(n), *p = f;
    FUZZ_CHECK(f != NULL, "malloc");
    memcpy(p, head, sizeof head), p += sizeof head;
    fuzz_put32(p, sizeof meta), fuzz_put32(p + 4, jp_crc32c(0, meta, sizeof meta)), p += 8;
    memcpy(p, meta, sizeof meta), p += sizeof meta;
    uint32_t packed = (uint32_t)(size - 8);
    memcpy(p, "JPBC", 4);
    fuzz_put32(p + 4, packed);
    fuzz_put32(p + 8, packed);
    memcpy(p + 12, data, 8); /* raw_len, record_count */
    memcpy(p + JP_CAPTURE_BLOCK_HEADER_SIZE_V3, data + 8, packed);
    fuzz_put32(p + 20, jp_crc32c(jp_crc32c(0, p, 20), data + 8, packed));
    check_file(f, n);
    free(f);
}

/* Each input is read as given (checksum checks, damage detection) and once more with its
 * checksums made to match, which is how mutated lengths, counts and records reach the block
 * and record checks behind the crc. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_file(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    FUZZ_CHECK(fixed != NULL, "malloc");
    memcpy(fixed, data, size);
    fuzz_fix_crcs(fixed, size);
    if (memcmp(fixed, data, size) != 0)
        check_file(fixed, size);
    free(fixed);
    check_packed(data, size);
    return 0;
}
