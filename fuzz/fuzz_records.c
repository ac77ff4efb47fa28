/* libFuzzer harness: jp_rec_validate on arbitrary bytes.
 *
 * Invariants: the answer is 0 or -EPROTO; a failure always names a non-empty reason; a record
 * that validates has a known type, 4 <= size <= len and size <= JP_REC_MAX_SIZE; validation
 * depends only on the record's own bytes (the same bytes, copied to an odd address and cut to
 * exactly size, give the same answer); every string of a valid record is well-formed UTF-8; a
 * valid record is accepted by the capture writer, whose file reads back the same bytes. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "protocol/capture.h"
#include "protocol/records.h"
#include "tests/lib/recbuild.h" /* the suites' RUN_START */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A valid record round-trips through a capture file: written by the writer after a RUN_START
 * (the reader checks that a stream begins with one), read back intact. PAD is dropped by the
 * writer by contract. A second RUN_START makes the stream invalid; a RUN_STOP completes it
 * exactly when its record_count is 1 (the RUN_START). */
static struct jp_rec_run_start first_record(void)
{
    struct jp_rec_run_start r = tl_rec_run_start(JP_MODE_CPU);
    r.rate_hz = 100;
    r.capabilities = JP_CAPS_CPU_REQUIRED;
    r.cpu_budget_bytes = 1u << 20;
    r.retention_budget_bytes = 1u << 20;
    return r;
}

static void roundtrip(const uint8_t *rec, uint32_t len, uint16_t type)
{
    const struct jp_rec_run_start first = first_record();
    int fd = memfd_create("fuzz-records", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create");
    struct jp_capture_meta meta = {.mode = JP_MODE_CPU, .pid = 1, .run_id = 1};
    struct jp_capture_writer *w = NULL;
    FUZZ_CHECK(jp_capture_writer_new(fd, &meta, &w) == 0, "writer_new");
    FUZZ_CHECK(jp_capture_write(w, &first, sizeof first) == 0, "writing RUN_START");
    int r = jp_capture_write(w, rec, len);
    FUZZ_CHECK(r == 0, "the writer refused a valid %s record: %d", jp_rec_type_name(type), r);
    FUZZ_CHECK(jp_capture_flush(w) == 0, "flush");
    jp_capture_writer_free(w);
    FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0, "lseek");

    struct jp_capture_reader *rd = NULL;
    FUZZ_CHECK(jp_capture_open_fd(fd, &rd) == 0, "open_fd");
    const void *got;
    uint32_t got_len;
    const char *reason = NULL;
    uint64_t off = 0;
    if (type == JP_REC_RUN_START || type == JP_REC_RUN_STOP) {
        while ((r = jp_capture_next(rd, &got, &got_len)) == 1)
            ;
        FUZZ_CHECK(r == 0, "next %d", r);
        uint32_t v = jp_capture_verdict(rd, &reason, &off);
        if (type == JP_REC_RUN_START) {
            FUZZ_CHECK(v == JP_CAPI_INVALID, "a second RUN_START judged %s",
                       jp_capture_integrity_name(v));
        } else {
            /* The stop counts every record before it but PAD and EXCERPT: here, one. */
            struct jp_rec_run_stop st;
            memcpy(&st, rec, sizeof st);
            uint32_t want = st.record_count == 1 ? JP_CAPI_COMPLETE : JP_CAPI_INVALID;
            FUZZ_CHECK(v == want, "a stop counting %llu of 1 record judged %s",
                       (unsigned long long)st.record_count, jp_capture_integrity_name(v));
        }
    } else {
        r = jp_capture_next(rd, &got, &got_len);
        FUZZ_CHECK(r == 1 && got_len == sizeof first && memcmp(got, &first, sizeof first) == 0,
                   "the RUN_START did not come back: %d", r);
        r = jp_capture_next(rd, &got, &got_len);
        if (type == JP_REC_PAD) {
            FUZZ_CHECK(r == 0, "a PAD record was stored: %d", r);
        } else {
            FUZZ_CHECK(r == 1, "the written record did not come back: %d", r);
            FUZZ_CHECK(got_len == len && memcmp(got, rec, len) == 0, "the record changed");
            FUZZ_CHECK(jp_capture_next(rd, &got, &got_len) == 0, "a third record appeared");
        }
        uint32_t v = jp_capture_verdict(rd, &reason, &off);
        FUZZ_CHECK(v == JP_CAPI_MISSING_STOP_EVENT, "a run without its stop judged %s",
                   jp_capture_integrity_name(v));
        FUZZ_CHECK(reason != NULL && reason[0] != '\0', "verdict without a reason");
    }
    jp_capture_close(rd);
    close(fd);
}

/* The strings of a record that validated, each checked on its own. */
static void utf8_strings(const uint8_t *rec, uint16_t type)
{
    size_t bad = 0;
    if (type == JP_REC_SOURCE_DEF) {
        struct jp_rec_source_def r;
        memcpy(&r, rec, sizeof r);
        FUZZ_CHECK(jp_utf8_validate(rec + sizeof r, r.path_len, &bad) == 0,
                   "a source path with bad UTF-8 at %zu validated", bad);
    } else if (type == JP_REC_FRAME_DEF) {
        struct jp_rec_frame_def r;
        memcpy(&r, rec, sizeof r);
        FUZZ_CHECK(jp_utf8_validate(rec + sizeof r, r.ns_len, &bad) == 0,
                   "a namespace with bad UTF-8 at %zu validated", bad);
        FUZZ_CHECK(jp_utf8_validate(rec + sizeof r + r.ns_len, r.fn_len, &bad) == 0,
                   "a function name with bad UTF-8 at %zu validated", bad);
    } else if (type == JP_REC_EXCERPT) {
        struct jp_rec_excerpt r;
        memcpy(&r, rec, sizeof r);
        FUZZ_CHECK(jp_utf8_validate(rec + sizeof r, r.text_len, &bad) == 0,
                   "an excerpt with bad UTF-8 at %zu validated", bad);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > UINT32_MAX)
        return 0;
    uint32_t len = (uint32_t)size;
    const char *why = NULL;
    int r = jp_rec_validate(data, len, &why);
    FUZZ_CHECK(r == 0 || r == -EPROTO, "unexpected result %d", r);
    if (r < 0) {
        FUZZ_CHECK(why != NULL && why[0] != '\0', "a refusal without a reason");
        return 0;
    }

    struct jp_rec_hdr h;
    FUZZ_CHECK(len >= sizeof h, "a record shorter than its header validated");
    memcpy(&h, data, sizeof h);
    FUZZ_CHECK(jp_rec_type_name(h.type) != NULL, "unknown type %u validated", h.type);
    FUZZ_CHECK(h.size >= sizeof h && h.size <= len, "size %u for %u bytes", h.size, len);
    FUZZ_CHECK(h.size <= JP_REC_MAX_SIZE, "size %u over the maximum", h.size);

    /* The same record alone, at an odd address: the buffer's alignment and the bytes after the
     * record must not matter. */
    uint8_t *copy = malloc((size_t)h.size + 1);
    FUZZ_CHECK(copy != NULL, "malloc");
    memcpy(copy + 1, data, h.size);
    why = NULL;
    r = jp_rec_validate(copy + 1, h.size, &why);
    FUZZ_CHECK(r == 0, "the record alone does not validate: %s", why ? why : "?");
    /* One byte short is never valid: size must then point past the end. */
    FUZZ_CHECK(jp_rec_validate(copy + 1, h.size - 1u, &why) == -EPROTO,
               "a record cut by one byte validated");
    utf8_strings(copy + 1, h.type);
    roundtrip(copy + 1, h.size, h.type);
    free(copy);
    return 0;
}
