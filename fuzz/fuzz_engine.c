/* libFuzzer harness: the daemon's live path into the engine. A ring hands the session records
 * laid out in slots, and nothing like the capture reader's stream checks stands between the
 * producer and the engine; so here arbitrary bytes are cut into records by their own size
 * fields and fed straight to the engine, then the report is checked as in fuzz_replay
 * (fuzz_report_check.h).
 *
 * Cutting: at each position the header's size says how far the record goes; a size below the
 * header or past the end makes the rest a final malformed tail. The whole records are fed one
 * by one through jp_engine_feed (engine A) and, laid out in JP_SLOT_SIZE slots as in the ring,
 * in one jp_engine_feed_batch call (engine B). The ending follows the daemon: STOP once a
 * RUN_STOP was accepted, COLLECTOR_FAILURE when the engine refused the stream, PRODUCER_LOST
 * when the bytes simply ran out.
 *
 * Invariants: as fuzz_replay; nothing is accepted after an accepted RUN_STOP; the malformed
 * tail is refused; and feed_batch does what feeding each record does (engine.h): it stops at
 * the same record with the same code and reason, and both engines render the same bytes. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/engine.h"
#include "render/report.h"
#include "fuzz_check.h"
#include "fuzz_report_check.h"
#include "protocol/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Renders both engines with the same options and compares every byte. */
static void same_report(struct jp_engine *a, struct jp_engine *b, uint32_t ending)
{
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = ending, .outputs = JP_OUT_HUMAN | JP_OUT_TOON};
    struct jp_rendered ra, rb;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    int xa = jp_profile_render(a, &o, &ra), xb = jp_profile_render(b, &o, &rb);
    FUZZ_CHECK(xa == xb, "render: feed %d, feed_batch %d", xa, xb);
    if (xa == 0)
        FUZZ_CHECK(ra.status == rb.status && strcmp(ra.reason, rb.reason) == 0 &&
                       ra.human_len == rb.human_len &&
                       memcmp(ra.human, rb.human, ra.human_len) == 0 &&
                       ra.toon_len == rb.toon_len && memcmp(ra.toon, rb.toon, ra.toon_len) == 0,
                   "feed and feed_batch rendered different reports");
    jp_rendered_free(&ra);
    jp_rendered_free(&rb);
}

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

    struct jp_engine *a = NULL;
    FUZZ_CHECK(jp_engine_new(&a) == 0, "engine_new");
    uint64_t accepted = 0;
    int stopped = 0, refused = 0;
    size_t refused_at = 0; /* index of the refused record */
    const char *refused_why = NULL;
    for (size_t i = 0; i < nrec && !refused; i++) {
        struct jp_rec_hdr h;
        memcpy(&h, data + starts[i], sizeof h);
        /* Each record in its own exact-size heap copy, so ASan sees any read past its end. */
        uint8_t *rec = malloc(h.size);
        FUZZ_CHECK(rec != NULL, "malloc");
        memcpy(rec, data + starts[i], h.size);
        const char *why = NULL;
        int r = jp_engine_feed(a, rec, h.size, &why);
        free(rec);
        FUZZ_CHECK(r == 0 || r == -EPROTO, "feed returned %d", r);
        if (r < 0) {
            FUZZ_CHECK(why != NULL && why[0] != '\0', "a refused stream without a reason");
            refused = 1;
            refused_at = i;
            refused_why = why;
            break;
        }
        FUZZ_CHECK(!stopped, "a record after RUN_STOP was accepted");
        stopped = h.type == JP_REC_RUN_STOP;
        accepted++;
    }

#ifdef JP_ENGINE_FEED_BATCH
    /* The same whole records in ring slots, one batch. */
    size_t slots = 0;
    for (size_t i = 0; i < nrec; i++) {
        struct jp_rec_hdr h;
        memcpy(&h, data + starts[i], sizeof h);
        slots += jp_rec_slots(h.size);
    }
    uint8_t *ring = calloc(slots ? slots : 1, JP_SLOT_SIZE);
    size_t *offs = malloc((nrec + 1) * sizeof *offs);
    FUZZ_CHECK(ring != NULL && offs != NULL, "calloc");
    size_t off = 0;
    for (size_t i = 0; i < nrec; i++) {
        struct jp_rec_hdr h;
        memcpy(&h, data + starts[i], sizeof h);
        offs[i] = off;
        memcpy(ring + off, data + starts[i], h.size);
        off += (size_t)jp_rec_slots(h.size) * JP_SLOT_SIZE;
    }
    offs[nrec] = off;
    struct jp_engine *b = NULL;
    FUZZ_CHECK(jp_engine_new(&b) == 0, "engine_new");
    uint32_t consumed = UINT32_MAX;
    const char *why = NULL;
    int rb = off ? jp_engine_feed_batch(b, ring, (uint32_t)off, &consumed, &why) : 0;
    if (!off)
        consumed = 0;
    if (refused) {
        FUZZ_CHECK(rb == -EPROTO, "feed refused record %zu (%s), feed_batch returned %d",
                   refused_at, refused_why, rb);
        FUZZ_CHECK(consumed == offs[refused_at], "feed_batch stopped at byte %u, not %zu",
                   consumed, offs[refused_at]);
        FUZZ_CHECK(why != NULL && strcmp(why, refused_why) == 0,
                   "feed_batch's reason \"%s\", feed's \"%s\"", why ? why : "(null)",
                   refused_why);
    } else {
        FUZZ_CHECK(rb == 0, "feed took every record, feed_batch returned %d (%s) at byte %u",
                   rb, why ? why : "?", consumed);
        FUZZ_CHECK(consumed == off, "feed_batch consumed %u of %zu bytes", consumed, off);
    }
    uint32_t ending0 = refused ? JP_END_COLLECTOR_FAILURE
                               : stopped ? JP_END_STOP : JP_END_PRODUCER_LOST;
    if (accepted)
        same_report(a, b, ending0);
    jp_engine_free(b);
    free(ring);
    free(offs);
#endif

    if (!refused && tail < size) {
        size_t n = size - tail;
        uint8_t *rec = malloc(n);
        FUZZ_CHECK(rec != NULL, "malloc");
        memcpy(rec, data + tail, n);
        const char *w = NULL;
        int r = jp_engine_feed(a, rec, (uint32_t)n, &w);
        free(rec);
        FUZZ_CHECK(r == -EPROTO, "a malformed tail of %zu bytes was taken: %d", n, r);
        refused = 1;
    }
    free(starts);
    uint32_t ending = refused ? JP_END_COLLECTOR_FAILURE
                              : stopped ? JP_END_STOP : JP_END_PRODUCER_LOST;
    fuzz_check_report(a, accepted, ending);
    return 0;
}
