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

#include "engine/engine.h"
#include "render/report.h"
#include "fuzz_check.h"
#include "fuzz_crc_fix.h"
#include "fuzz_report_check.h"
#include "protocol/capture.h"
#include "protocol/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

    fuzz_check_report(e, accepted, ending);
    return 0;
}
