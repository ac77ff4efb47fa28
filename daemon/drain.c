/* Ring -> engine for one session: the drain (records copied out of the client's ring, bounded,
 * fed), the budget of each drain, the drain timer's adaptive period, and the idle handle that
 * brings a busy ring back on the next loop turn.
 */
#include <errno.h>
#include <string.h>

#include "session.h"

int jpd_drain_feed(struct jpd_session *s, const void *rec, uint32_t len, const char **why)
{
    int r = jp_engine_feed(s->eng, rec, len, why);
    if (r < 0)
        return r;
    s->fed++;
    jpd_capture_write(s, rec, len); /* a full disk loses the capture, not the profile */
    return 0;
}

/* Consumes up to `budget` records (PAD included). Returns 1 when the budget ran out (more may
 * be there), 0 when the ring is empty or RUN_STOP is held, -EPROTO with *why on a record that
 * ends the session.
 *
 * The ring stays writable by the client, so nothing is trusted in place. A sample or
 * allocation event (nearly every record) goes to the engine's slot entry, which copies the slot
 * once and reads only its copy: a run of them at a time through jp_engine_feed_slots (no call
 * per slot); for a captured run the run is first copied once into the capture's pending block
 * and fed from there (jpd_capture_feed_slots), so the capture keeps exactly the bytes the
 * engine read and the drain adds one copy and a check a record, never compression (the
 * compressor pool does that, compress.c). Any other record: the header is read once, and the
 * record is copied into s->rec before anything else looks at it. s->rec is one small buffer
 * reused for every record, so it stays in L1 next to the engine's tables. Copying whole runs
 * of slots out first and feeding from the copy when no capture needs it measured slower
 * (bench/RESULTS.md has the figures): the run streams through L1 and evicts the engine's
 * tables, and the walk's loads wait on the copy's stores. Slots are released every
 * JPD_RELEASE_SLOTS, so a producer waiting for room gets it while we are still draining. */
static int drain_slots(struct jpd_session *s, uint32_t budget, const char **why)
{
    s->last_found = 0;
    int first_step = 1;
    const int capturing = s->cap[0] || s->cap[1];
    while (!s->stop_held) {
        const uint8_t *first;
        uint64_t avail = jp_ring_peek(&s->ring, &first);
        if (avail == 0) {
            if (jp_ring_check(&s->ring) < 0) {
                *why = "the producer's ring head is out of bounds";
                return -EPROTO;
            }
            return 0;
        }
        if (first_step) {
            /* peek's count stops at the ring's end; the timer policy wants the fill level. */
            s->last_found = jp_ring_fill(&s->ring);
            first_step = 0;
        }
        if (budget == 0)
            return 1;
        uint64_t used = 0, released = 0;
        int r = 0;
        while (used < avail && budget > 0) {
            if (used - released >= JPD_RELEASE_SLOTS) {
                jp_ring_release(&s->ring, used - released);
                released = used;
            }
            /* Samples and allocation events (nearly every record) go to the engine straight
             * from their slots, which the engine copies once and checks, a run of them at a
             * time up to the next release point or the budget's end (a captured run's through
             * its capture's block, the bytes the capture gets); the first slot the engine
             * declines (1) takes the checks and the copy below. */
            uint64_t n = avail - used, k = 0;
            if (n > JPD_RELEASE_SLOTS - (used - released))
                n = JPD_RELEASE_SLOTS - (used - released);
            if (n > budget)
                n = budget;
            const uint8_t *q = first + used * JP_SLOT_SIZE;
            r = 2;
            if (capturing && (s->cap[0] || s->cap[1]))
                r = jpd_capture_feed_slots(s, q, n, &k);
            if (r == 2) /* not captured, or the capture just failed */
                r = jp_engine_feed_slots(s->eng, q, n, &k);
            used += k;
            budget -= (uint32_t)k;
            s->fed += k;
            if (r < 0)
                break;
            if (r == 0)
                continue; /* all n fed */
            r = 0;
            const uint8_t *p = first + used * JP_SLOT_SIZE;
            struct jp_rec_hdr h;
            memcpy(&h, p, sizeof h);
            if (h.size < sizeof h) {
                *why = "record size smaller than its header";
                r = -EPROTO;
                break;
            }
            uint32_t slots = jp_rec_slots(h.size);
            if (slots > avail - used) {
                *why = "record runs past the committed slots";
                r = -EPROTO;
                break;
            }
            used += slots;
            budget--; /* PAD too: a producer committing nothing but PADs must not keep us */
            if (h.type == JP_REC_PAD)
                continue;
            if (h.size > JP_REC_MAX_SIZE) {
                *why = "record larger than the largest record type";
                r = -EPROTO;
                break;
            }
            /* Hot records are one slot: a constant-size copy of the whole slot (it lies inside
             * the mapping) compiles to two vector moves instead of a rep movs. */
            if (slots == 1)
                memcpy(s->rec, p, JP_SLOT_SIZE);
            else
                memcpy(s->rec, p, h.size);
            memcpy(s->rec, &h, sizeof h); /* the header we checked, whatever the slot says now */
            if (h.type == JP_REC_RUN_STOP) {
                /* Held back: the excerpts come between the producer's last record and it. */
                memcpy(s->stop_rec, s->rec, h.size);
                s->stop_len = h.size;
                s->stop_held = 1;
                break;
            }
            if (h.type == JP_REC_RUN_START && h.size == sizeof(struct jp_rec_run_start)) {
                struct jp_rec_run_start rs;
                memcpy(&rs, s->rec, sizeof rs);
                if (rs.mode != s->mode) {
                    *why = "the ring's run_start mode differs from the hello";
                    r = -EPROTO;
                    break;
                }
                /* The budgets are the daemon's: a client may lower them, never raise them.
                 * The capped record is what both the engine and the capture see, so the
                 * replay of the capture runs under the same budgets as the live profile. */
                const struct jpd_config *cfg = s->d->cfg;
                if (rs.cpu_budget_bytes > cfg->max_cpu_budget)
                    rs.cpu_budget_bytes = cfg->max_cpu_budget;
                if (rs.retention_budget_bytes > cfg->max_retention_budget)
                    rs.retention_budget_bytes = cfg->max_retention_budget;
                memcpy(s->rec, &rs, sizeof rs);
            }
            r = capturing ? jpd_drain_feed(s, s->rec, h.size, why)
                          : jp_engine_feed(s->eng, s->rec, h.size, why);
            if (r < 0)
                break;
            if (!capturing)
                s->fed++;
        }
        jp_ring_release(&s->ring, used - released);
        if (r != 0)
            return r;
    }
    return 0;
}

/* One drain, and what `status` shows of the run after it (an empty ring included: its fill
 * and the producer's gauges move without records). */
static int drain(struct jpd_session *s, uint32_t budget, const char **why)
{
    int r = drain_slots(s, budget, why);
    jpd_live_update(s->d, &s->live, s->fed, s->last_found, &s->ring, s->eng);
    if (s->cap[0] || s->cap[1]) {
        uint64_t w, ns;
        jpd_capture_waits(s, &w, &ns);
        jpd_live_capture(s->d, &s->live, w, ns);
    }
    return r;
}

/* A drain that ended the session (r < 0): out of memory is said as such, anything else is the
 * producer's violation. */
static void drain_failed(struct jpd_session *s, int r, const char *why)
{
    if (r == -ENOMEM)
        jpd_session_fail(s, JP_CTLE_INTERNAL, "the daemon is out of memory");
    else
        jpd_session_fail(s, JP_CTLE_PROTOCOL_VIOLATION, why ? why : "bad record in the ring");
}

static void on_again(uv_idle_t *h)
{
    struct jpd_session *s = h->data;
    uv_idle_stop(h);
    if (!s->closing && s->state == JPD_S_LIVE)
        jpd_drain_pump(s);
}

void jpd_drain_pump(struct jpd_session *s)
{
    const char *why = NULL;
    /* A run alone on its loop has no one to be fair to: larger slices, fewer loop turns. */
    int r = drain(s, s->lp->live_runs > 1 ? JPD_DRAIN_SLICE : JPD_DRAIN_SLICE_ALONE, &why);
    if (r < 0) {
        drain_failed(s, r, why);
        return;
    }
    if (!s->eof && !s->finalize_seen) {
        /* Adapt the poll to the producer: a ring that filled by more than an eighth within one
         * period is polled every millisecond, one that stays nearly empty (a CPU run makes at
         * most 1000 samples a second into 65536 slots) backs off to JPD_DRAIN_PERIOD_MAX_MS,
         * so an idle-ish run does not wake the daemon a thousand times a second. A burst after
         * a back-off finds room for far more than one long period of samples, and a memory run
         * that fills the ring makes the producer wait (bounded), never lose events; FINALIZE
         * and EOF restart the timer at once. */
        uint32_t p = s->period_ms;
        if (s->last_found > s->ring.slot_count / 8)
            p = JPD_DRAIN_PERIOD_MS;
        else if (s->last_found < s->ring.slot_count / 64 && p < JPD_DRAIN_PERIOD_MAX_MS)
            p *= 2;
        if (p != s->period_ms) {
            s->period_ms = p;
            uv_timer_set_repeat(&s->timer, p);
        }
    }
    if (!s->stop_held &&
        (r == 1 || (!s->eof && !s->finalize_seen && s->last_found > s->ring.slot_count / 2))) {
        /* More is waiting, or the producer filled more than half the ring within one period
         * (it may be waiting for room now, and the timer cannot tick faster than 1 ms): come
         * back on the next loop turn, after the other sessions and the sockets had theirs.
         * Not with a 0 ms timer: re-armed from a timer callback, libuv before 1.48 runs it
         * again in the same pass, so a flooding run would starve all I/O (FINALIZE of other
         * runs, SIGTERM). An active idle handle makes the next poll not block instead. */
        uv_idle_start(&s->again, on_again);
        return;
    }
    /* The ring is empty for now, or the stream's RUN_STOP is held: what that means for the run
     * is the session's to decide. */
    jpd_session_drained(s);
}

int jpd_drain_now(struct jpd_session *s)
{
    const char *why = NULL;
    uint64_t budget = s->ring.slot_count;
    while (s->ring_mapped && !s->stop_held && budget > 0) {
        uint32_t slice = budget > JPD_DRAIN_SLICE ? JPD_DRAIN_SLICE : (uint32_t)budget;
        int r = drain(s, slice, &why);
        if (r < 0) {
            drain_failed(s, r, why);
            return r;
        }
        if (r == 0)
            break;
        budget -= slice;
    }
    return 0;
}
