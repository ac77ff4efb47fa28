/* libFuzzer harness: the replay pipeline. The capture reader feeds every record of an
 * arbitrary file into the profile engine, which then gives its excerpt keys, summary and the
 * report in both outputs: no bytes on disk may crash the daemon's engine or its writers.
 *
 * The ending passed to render follows the daemon: STOP when the capture is complete,
 * TRUNCATED when it was cut (or is invalid after good records), COLLECTOR_FAILURE when the
 * engine refused the stream.
 *
 * Checksums are fixed up first (fuzz_crc_fix.h) so that mutations reach the engine.
 *
 * Invariants: feed returns 0 or -EPROTO (with a reason; nothing after it is fed); -ENOMEM
 * never happens at these sizes; render succeeds with a status 1..3 whose reason is empty
 * exactly when complete; both texts are NUL-terminated at their length with no NUL inside;
 * rendering is deterministic (same opts twice: same bytes); asking for one output gives only
 * that one. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/engine/engine.h"
#include "fuzz_check.h"
#include "fuzz_crc_fix.h"
#include "protocol/capture.h"
#include "protocol/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *what, const char *s, size_t len)
{
    FUZZ_CHECK(s != NULL, "%s output missing", what);
    FUZZ_CHECK(s[len] == '\0', "%s output not NUL-terminated at its length %zu", what, len);
    FUZZ_CHECK(strlen(s) == len, "%s output has a NUL at %zu of %zu", what, strlen(s), len);
}

static void render_checked(struct jp_engine *e, const struct jp_report_opts *o,
                           struct jp_rendered *out)
{
    memset(out, 0, sizeof *out);
    int r = jp_engine_render(e, o, out);
    FUZZ_CHECK(r == 0, "render failed: %d", r);
    FUZZ_CHECK(out->status >= JP_STATUS_COMPLETE && out->status <= JP_STATUS_UNAVAILABLE,
               "status %u", out->status);
    FUZZ_CHECK(memchr(out->reason, '\0', sizeof out->reason) != NULL, "reason unterminated");
    FUZZ_CHECK((out->status == JP_STATUS_COMPLETE) == (out->reason[0] == '\0'),
               "status %u with reason \"%s\"", out->status, out->reason);
    if (o->outputs & JP_OUT_HUMAN)
        check_text("human", out->human, out->human_len);
    else
        FUZZ_CHECK(out->human == NULL, "human output not requested but given");
    if (o->outputs & JP_OUT_TOON)
        check_text("toon", out->toon, out->toon_len);
    else
        FUZZ_CHECK(out->toon == NULL, "toon output not requested but given");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Checksums made to match (fuzz_crc_fix.h): mutations must reach the engine, not stop
     * at the crc check, which fuzz_capture covers. */
    uint8_t *fixed = malloc(size ? size : 1);
    FUZZ_CHECK(fixed != NULL, "malloc");
    memcpy(fixed, data, size);
    fuzz_fix_crcs(fixed, size);
    int fd = memfd_create("fuzz-replay", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create");
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, fixed + done, size - done);
        FUZZ_CHECK(w > 0, "write to memfd");
        done += (size_t)w;
    }
    free(fixed);
    FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0, "lseek");
    struct jp_capture_reader *rd = NULL;
    FUZZ_CHECK(jp_capture_open_fd(fd, &rd) == 0, "open_fd");
    struct jp_engine *e = NULL;
    FUZZ_CHECK(jp_engine_new(&e) == 0, "engine_new");

    int refused = 0;
    uint64_t accepted = 0;
    for (;;) {
        const void *rec;
        uint32_t len;
        int r = jp_capture_next(rd, &rec, &len);
        FUZZ_CHECK(r == 0 || r == 1, "capture next %d", r);
        if (r == 0)
            break;
        const char *why = NULL;
        r = jp_engine_feed(e, rec, len, &why);
        FUZZ_CHECK(r == 0 || r == -EPROTO, "feed returned %d", r);
        if (r < 0) {
            FUZZ_CHECK(why != NULL && why[0] != '\0', "a refused stream without a reason");
            refused = 1;
            break;
        }
        accepted++;
    }
    uint32_t ending = JP_END_COLLECTOR_FAILURE;
    if (!refused) {
        const char *reason;
        uint64_t off;
        uint32_t v = jp_capture_verdict(rd, &reason, &off);
        ending = v == JP_CAPI_COMPLETE ? JP_END_STOP : JP_END_TRUNCATED;
    }
    jp_capture_close(rd);
    close(fd);

    if (accepted == 0) {
        /* Nothing began a run (the engine accepts nothing before RUN_START): there is no mode
         * and no report; the daemon never renders such a stream (offline.c calls it invalid). */
        struct jp_rendered none;
        struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                                   .ending = ending, .outputs = JP_OUT_HUMAN | JP_OUT_TOON};
        FUZZ_CHECK(jp_engine_render(e, &o, &none) == -ENODATA, "a report without RUN_START");
        jp_engine_free(e);
        return 0;
    }

    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = ending, .outputs = JP_OUT_HUMAN | JP_OUT_TOON};
    struct jp_ctl_excerpt_key *keys = NULL;
    uint32_t nkeys = 0;
    int r = jp_engine_excerpt_keys(e, &o, &keys, &nkeys);
    FUZZ_CHECK(r == 0, "excerpt_keys failed: %d", r);
    FUZZ_CHECK(nkeys == 0 || keys != NULL, "%u keys at NULL", nkeys);
    free(keys);

    struct jp_engine_summary sum;
    FUZZ_CHECK(jp_engine_summary(e, ending, &sum) == 0, "summary failed");
    FUZZ_CHECK(sum.status >= JP_STATUS_COMPLETE && sum.status <= JP_STATUS_UNAVAILABLE,
               "summary status %u", sum.status);

    struct jp_rendered a, b;
    render_checked(e, &o, &a);
    render_checked(e, &o, &b);
    FUZZ_CHECK(a.status == b.status && strcmp(a.reason, b.reason) == 0 &&
                   a.human_len == b.human_len && memcmp(a.human, b.human, a.human_len) == 0 &&
                   a.toon_len == b.toon_len && memcmp(a.toon, b.toon, a.toon_len) == 0,
               "rendering twice gave different bytes");
    FUZZ_CHECK(sum.status == a.status, "summary status %u, report status %u", sum.status,
               a.status);
    jp_rendered_free(&a);
    jp_rendered_free(&b);

    /* Everything shown, TOON alone. */
    struct jp_report_opts all = {.size = sizeof all, .threshold_bp = 0, .limit = 100,
                                 .ending = ending, .outputs = JP_OUT_TOON};
    render_checked(e, &all, &a);
    jp_rendered_free(&a);
    jp_engine_free(e);
    return 0;
}
