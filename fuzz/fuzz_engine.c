/* libFuzzer harness: the daemon's live path into the engine. A ring hands the session records
 * laid out in slots, and nothing like the capture reader's stream checks stands between the
 * producer and the engine; so here arbitrary bytes are cut into records by their own size
 * fields and fed straight to the engine, then the report is checked as in fuzz_replay
 * (fuzz_report_check.h).
 *
 * Cutting: at each position the header's size says how far the record goes; a size below the
 * header or past the end makes the rest a final malformed tail. The whole records are fed one
 * by one through jp_engine_feed. The ending follows the daemon: STOP once a RUN_STOP was
 * accepted, COLLECTOR_FAILURE when the engine refused the stream, PRODUCER_LOST when the
 * bytes simply ran out.
 *
 * Invariants: as fuzz_replay; nothing is accepted after an accepted RUN_STOP; the malformed
 * tail is refused. A second engine takes the same records as the daemon's drain gives them:
 * each slot-sized record through jp_engine_feed_slot first (from a copy of the slot), and
 * through jp_engine_feed only when that returned 1; every record's result and the rendered
 * profile must be the same as the first engine's. (jp_engine_feed tries the slot entry itself,
 * so a record the slot entry declines meets it twice in the second engine: any trace a
 * decline left would show as a difference.) The second engine also has the one-pass
 * allocation, free and sample paths turned off (jp_engine_set_event_fast_paths), so every
 * event the first takes through them it takes through the general ones: the results must not
 * differ. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "render/report.h"
#include "fuzz_check.h"
#include "fuzz_report_check.h"
#include "protocol/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The whole records: where each starts in data, and its size. */
    size_t nrec = 0, at = 0;
    size_t *starts = malloc((size / sizeof(struct jp_rec_hdr) + 1) * sizeof *starts);
    FUZZ_CHECK(starts != NULL, "malloc");
    while (size - at >= sizeof(struct jp_rec_hdr)) {
        struct jp_rec_hdr h;
        memcpy(&h, data + at, sizeof h);
        if (h.size < sizeof h || h.size > size - at)
            break;
        starts[nrec++] = at;
        at += h.size;
    }
    size_t tail = at; /* data[tail..size) is the malformed tail, possibly empty */

    struct jp_engine *a = NULL, *b = NULL;
    FUZZ_CHECK(jp_engine_new(&a) == 0 && jp_engine_new(&b) == 0, "engine_new");
    FUZZ_CHECK(jp_engine_set_hash_seed(a, 7) == 0 && jp_engine_set_hash_seed(b, 7) == 0,
               "seed");
    FUZZ_CHECK(jp_engine_set_event_fast_paths(b, false) == 0, "general event paths");
    uint64_t accepted = 0;
    int stopped = 0, refused = 0;
    for (size_t i = 0; i < nrec && !refused; i++) {
        struct jp_rec_hdr h;
        memcpy(&h, data + starts[i], sizeof h);
        /* Each record in its own exact-size heap copy, so ASan sees any read past its end. */
        uint8_t *rec = malloc(h.size);
        FUZZ_CHECK(rec != NULL, "malloc");
        memcpy(rec, data + starts[i], h.size);
        const char *why = NULL;
        int r = jp_engine_feed(a, rec, h.size, &why);
        int rb = 1;
        if (h.size == JP_SLOT_SIZE) {
            uint8_t slot[JP_SLOT_SIZE];
            memcpy(slot, rec, sizeof slot);
            rb = jp_engine_feed_slot(b, slot);
            FUZZ_CHECK(rb == 1 || rb == r, "feed_slot %d where feed gave %d", rb, r);
        }
        if (rb == 1) {
            const char *wb = NULL;
            rb = jp_engine_feed(b, rec, h.size, &wb);
            FUZZ_CHECK(rb == r, "after feed_slot declined, feed gave %d where it gave %d", rb, r);
        }
        free(rec);
        FUZZ_CHECK(r == 0 || r == -EPROTO, "feed returned %d", r);
        if (r < 0) {
            FUZZ_CHECK(why != NULL && why[0] != '\0', "a refused stream without a reason");
            refused = 1;
            break;
        }
        FUZZ_CHECK(!stopped, "a record after RUN_STOP was accepted");
        stopped = h.type == JP_REC_RUN_STOP;
        accepted++;
    }

    if (!refused && tail < size) {
        size_t n = size - tail;
        uint8_t *rec = malloc(n);
        FUZZ_CHECK(rec != NULL, "malloc");
        memcpy(rec, data + tail, n);
        const char *w = NULL;
        int r = jp_engine_feed(a, rec, (uint32_t)n, &w);
        FUZZ_CHECK(jp_engine_feed(b, rec, (uint32_t)n, &w) == r, "the tail differs");
        free(rec);
        FUZZ_CHECK(r == -EPROTO, "a malformed tail of %zu bytes was taken: %d", n, r);
        refused = 1;
    }
    free(starts);
    uint32_t ending = refused ? JP_END_COLLECTOR_FAILURE
                              : stopped ? JP_END_STOP : JP_END_PRODUCER_LOST;
    if (accepted) {
        /* The drain's way and the plain feed built the same profile. */
        struct jp_report_opts o = {.size = sizeof o, .threshold_bp = 0, .limit = 100,
                                   .ending = ending, .outputs = JP_OUT_TOON};
        struct jp_rendered ra, rb;
        render_checked(a, &o, &ra);
        render_checked(b, &o, &rb);
        FUZZ_CHECK(ra.toon_len == rb.toon_len && memcmp(ra.toon, rb.toon, ra.toon_len) == 0,
                   "the profile fed slot by slot differs from the one fed record by record");
        jp_rendered_free(&ra);
        jp_rendered_free(&rb);
    }
    jp_engine_free(b);
    fuzz_check_report(a, accepted, ending);
    return 0;
}
