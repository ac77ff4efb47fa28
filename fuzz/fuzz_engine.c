/* libFuzzer harness: the daemon's live path into the engine. A ring hands the session records
 * one by one, each copied out with its header's size, and nothing like the capture reader's
 * stream checks stands between the producer and the engine; so here arbitrary bytes are cut
 * into records by their own size fields and fed straight to jp_engine_feed, then the report is
 * checked as in fuzz_replay (fuzz_report_check.h).
 *
 * Cutting: at each position the header's size says how far the record goes; a size below the
 * header or past the end makes the rest one final record (the engine must refuse it). The
 * ending follows the daemon: STOP once a RUN_STOP was accepted, COLLECTOR_FAILURE when the
 * engine refused the stream (the session ends it), PRODUCER_LOST when the bytes simply ran out.
 *
 * Invariants: as fuzz_replay; and the engine refuses everything after a refusal with -EPROTO,
 * and anything after an accepted RUN_STOP. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine.h"
#include "fuzz_check.h"
#include "fuzz_report_check.h"
#include "protocol/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jp_engine *e = NULL;
    FUZZ_CHECK(jp_engine_new(&e) == 0, "engine_new");
    /* Each record in its own exact-size heap copy, so ASan sees any read past its end. */
    uint64_t accepted = 0;
    int stopped = 0, refused = 0;
    for (size_t at = 0; at < size;) {
        size_t n = size - at;
        if (n >= sizeof(struct jp_rec_hdr)) {
            struct jp_rec_hdr h;
            memcpy(&h, data + at, sizeof h);
            if (h.size >= sizeof h && h.size <= n)
                n = h.size;
        }
        if (n > UINT32_MAX)
            n = UINT32_MAX;
        uint8_t *rec = malloc(n);
        FUZZ_CHECK(rec != NULL, "malloc");
        memcpy(rec, data + at, n);
        const char *why = NULL;
        int r = jp_engine_feed(e, rec, (uint32_t)n, &why);
        free(rec);
        FUZZ_CHECK(r == 0 || r == -EPROTO, "feed returned %d", r);
        if (r < 0) {
            FUZZ_CHECK(why != NULL && why[0] != '\0', "a refused stream without a reason");
            refused = 1;
            break;
        }
        FUZZ_CHECK(!stopped, "a record after RUN_STOP was accepted");
        struct jp_rec_hdr h;
        memcpy(&h, data + at, sizeof h);
        stopped = h.type == JP_REC_RUN_STOP;
        accepted++;
        at += n;
    }
    uint32_t ending = refused ? JP_END_COLLECTOR_FAILURE
                              : stopped ? JP_END_STOP : JP_END_PRODUCER_LOST;
    fuzz_check_report(e, accepted, ending);
    return 0;
}
