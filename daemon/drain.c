/* Ring -> engine for one session: the drain (records copied out of the client's rings,
 * bounded, fed), the merge of a run's rings into one stream, the budget of each drain, the drain
 * timer's adaptive period, and the idle handle that brings a busy ring back on the next loop
 * turn.
 *
 * The merge. A run has its main ring and one worker ring per registered runtime thread
 * (protocol/ring.h, "A run's rings"), each with one producer. The engine reads one stream, and
 * a capture keeps exactly that stream, so `jettprofd replay` gives the live profile's bytes.
 * One pass of the merge:
 *   1. reads every worker ring's fill (an acquire load of its head, ring.h C): the pass takes at
 *      most that many slots of it;
 *   2. drains the main ring: every definition a worker record in those slots names was
 *      committed there before the worker committed the record, so it is fed first;
 *   3. drains each worker ring up to its limit, starting after the one the last drain's
 *      budget ran out in (so a busy ring cannot starve the others). Before the first record it takes
 *      from a ring, the merge feeds an EXEC with that ring's identity if the engine's differs
 *      (an injected EXEC: counted in the records, so the held RUN_STOP's record_count is raised
 *      by as many before it is fed).
 * The engine is in hold mode (engine.h) from the run's first record, before any worker ring is
 * known (the first may be announced while a drain of the main ring is under way): an event that
 * names an id not live (or live with another size or resize sequence) or a node not defined is
 * handed back, and its ring stops there for this pass while the others go on. A run with only
 * its main ring takes the same passes (one ring each). The producer committed
 * whatever that event depends on (an allocation made on another worker before the object
 * moved, a definition) before it committed the event, and announced every ring on the socket
 * before it wrote to that ring; so once the socket has been read to its end after the event
 * was seen (jpd_conn_all_read: every ring announced before it is known), a later pass, whose
 * fills are read after the event was seen, finds what it depends on.
 *
 * A held record is fed without hold, and so counted as the violation it then is, only when the
 * socket has been read to its end (else the drain ends its slice and comes back after the loop
 * has read it) and one of: two complete passes in a row took nothing from any ring; it was held
 * through JPD_HOLD_PASSES complete passes whatever the others did; or it was held through more
 * passes than the run has rings (a legitimate chain resolves a link a pass) and for
 * JPD_HOLD_MS. The held counts live in the streams, so they carry over from one drain to the
 * next. Every pass is charged to the drain's slice (a unit for each ring it visits), and so is
 * the record a release feeds: a run whose rings hold records costs its own slice and no more,
 * and its worker goes on to its other sessions, timers and signals on time. A ring that names
 * ids that never existed, or that stops, holds only itself, and never longer than that.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session.h"

/* Complete passes a record may stay held while other rings make progress: a legitimate
 * dependency chain has at most one link per ring and each pass resolves its oldest link. */
#define JPD_HOLD_PASSES (2u * JP_CTL_MAX_WORKER_RINGS + 4u)

static const struct jp_rec_exec no_identity = {
    .h = {JP_REC_EXEC, sizeof(struct jp_rec_exec)},
    .runtime_thread_id = JP_ID_UNAVAILABLE,
    .task_id = JP_ID_UNAVAILABLE,
    .actor_id = JP_ID_UNAVAILABLE,
};

static int same_identity(const struct jp_rec_exec *a, const struct jp_rec_exec *b)
{
    return a->runtime_thread_id == b->runtime_thread_id && a->task_id == b->task_id &&
           a->actor_id == b->actor_id;
}

int jpd_drain_feed(struct jpd_session *s, const void *rec, uint32_t len, const char **why)
{
    int r = jp_engine_feed(s->eng, rec, len, why);
    if (r != 0)
        return r; /* an error, or JP_ENGINE_HELD: nothing taken */
    s->fed++;
    jpd_capture_write(s, rec, len); /* a full disk loses the capture, not the profile */
    return 0;
}

void jpd_drain_init(struct jpd_session *s)
{
    s->main_st = (struct jpd_stream){.ring = &s->ring, .exec = no_identity};
    s->eng_exec = no_identity;
    s->ring_bytes = s->ring.map_size;
    s->last_slots = s->ring.slot_count;
}

/* Record types a worker ring may carry: a thread's own events and identity. */
#define WORKER_TYPES                                                                             \
    ((UINT32_C(1) << JP_REC_PAD) | (UINT32_C(1) << JP_REC_EXEC) |                                 \
     (UINT32_C(1) << JP_REC_CPU_SAMPLE) | (UINT32_C(1) << JP_REC_ALLOC) |                          \
     (UINT32_C(1) << JP_REC_RESIZE) | (UINT32_C(1) << JP_REC_FREE) |                           \
     (UINT32_C(1) << JP_REC_RESIZE_SEQ))
_Static_assert(JP_REC_TYPE_LIMIT <= 32, "a type is a bit of WORKER_TYPES");

/* The engine's identity becomes st's before st's records are fed. */
static int enter_stream(struct jpd_session *s, struct jpd_stream *st, const char **why)
{
    if (same_identity(&s->eng_exec, &st->exec))
        return 0;
    int r = jpd_drain_feed(s, &st->exec, sizeof st->exec, why);
    if (r < 0)
        return r;
    s->eng_exec = st->exec;
    s->injected++;
    return 0;
}

/* Consumes up to *budget records (PAD included) of one stream, and at most st->limit slots.
 * Returns 1 when the budget ran out (more may be there), 0 when the stream is empty up to its
 * limit or RUN_STOP is held, JP_ENGINE_HELD when its next record was handed back, -EPROTO with
 * *why on a record that ends the session, -ENOMEM.
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
static int drain_stream(struct jpd_session *s, struct jpd_stream *st, uint32_t *budgetp,
                        const char **why)
{
    struct jp_ring *ring = st->ring;
    uint32_t budget = *budgetp;
    int entered = 0;
    const int capturing = s->cap[0] || s->cap[1];
    int r = 0;
    while (!(st == &s->main_st && s->stop_held)) {
        const uint8_t *first;
        uint64_t avail = jp_ring_peek(ring, &first);
        if (avail > st->limit)
            avail = st->limit;
        if (avail == 0) {
            if (jp_ring_check(ring) < 0) {
                *why = "the producer's ring head is out of bounds";
                r = -EPROTO;
            }
            break;
        }
        if (budget == 0) {
            r = 1;
            break;
        }
        if (!entered) {
            if ((r = enter_stream(s, st, why)) < 0)
                break;
            entered = 1;
        }
        uint64_t used = 0, released = 0;
        while (used < avail && budget > 0) {
            if (used - released >= JPD_RELEASE_SLOTS) {
                jp_ring_release(ring, used - released);
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
            if (r < 0 || r == JP_ENGINE_HELD)
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
            if (h.type == JP_REC_TIME) {
                *why = "a ring carries a time mark, which only the daemon writes";
                r = -EPROTO;
                break;
            }
            if (h.type == JP_REC_PAD) {
                used += slots;
                budget--; /* PAD too: a producer committing nothing but PADs must not keep us */
                continue;
            }
            if (h.size > JP_REC_MAX_SIZE) {
                *why = "record larger than the largest record type";
                r = -EPROTO;
                break;
            }
            if (st->worker && (h.type >= JP_REC_TYPE_LIMIT || !((WORKER_TYPES >> h.type) & 1u))) {
                *why = "a worker ring carries a record only the main ring may carry";
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
                used += slots;
                budget--;
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
            if (capturing) {
                r = jpd_drain_feed(s, s->rec, h.size, why);
            } else {
                r = jp_engine_feed(s->eng, s->rec, h.size, why);
                s->fed += r == 0;
            }
            if (r < 0 || r == JP_ENGINE_HELD)
                break;
            if (h.type == JP_REC_EXEC && h.size == sizeof(struct jp_rec_exec)) {
                memcpy(&st->exec, s->rec, sizeof st->exec);
                s->eng_exec = st->exec;
            }
            used += slots;
            budget--;
        }
        jp_ring_release(ring, used - released);
        if (st->limit != UINT64_MAX)
            st->limit -= used;
        if (r != 0)
            break;
    }
    *budgetp = budget;
    return r;
}

/* A complete pass left the stream held (r == JP_ENGINE_HELD) or not: a record's count of passes
 * held is its own, so a ring that is held at a new record each pass (a chain of frees across
 * rings that each pass advances) starts again at 1. */
static void note_held(struct jpd_stream *st, int r)
{
    if (r != JP_ENGINE_HELD) {
        st->held = 0;
        return;
    }
    if (st->held == 0 || st->held_at != st->ring->c_tail) {
        st->held = 1;
        st->held_at = st->ring->c_tail;
        st->held_ns = uv_hrtime();
        return;
    }
    st->held++;
}

/* Feeds the next record of a held stream without hold: the violation it is now. The record is
 * charged to *budget (at least 1 is left there). */
static int release_held(struct jpd_session *s, struct jpd_stream *st, uint32_t *budget,
                        const char **why)
{
    uint32_t one = 1; /* the held record is within the stream's limit: it was seen there */
    jp_engine_set_hold(s->eng, 0);
    int r = drain_stream(s, st, &one, why);
    jp_engine_set_hold(s->eng, 1);
    st->held = 0;
    *budget -= 1u - one;
    return r < 0 ? r : 0;
}

/* Whether the oldest held record of the run is now taken for a violation (see the top). */
static int hold_expired(const struct jpd_session *s, const struct jpd_stream *oldest)
{
    if (s->idle_passes >= 2 || oldest->held > JPD_HOLD_PASSES)
        return 1;
    return oldest->held > s->nwr + 2u &&
           uv_hrtime() - oldest->held_ns >= (uint64_t)JPD_HOLD_MS * 1000000u;
}

/* Notes a ring's fill for the drain timer and `status`: the fullest ring, as a share of its
 * own slots, is the one the period follows. */
static void note_fill(struct jpd_session *s, const struct jp_ring *ring, uint64_t fill)
{
    if (fill * s->last_slots > s->last_found * ring->slot_count) {
        s->last_found = fill;
        s->last_slots = ring->slot_count;
    }
}

static int drain_slots(struct jpd_session *s, uint32_t budget, const char **why)
{
    s->last_found = 0;
    s->last_slots = s->ring.slot_count;
    note_fill(s, &s->ring, jp_ring_fill(&s->ring));
    for (;;) {
        /* A pass costs a unit of the slice for each ring it visits, whatever it takes. */
        uint32_t cost = s->nwr + 1u;
        if (budget <= cost)
            return 1;
        budget -= cost;
        /* 1: the worker rings' fills first (acquire), 2: the main ring, 3: the workers. */
        for (uint32_t i = 0; i < s->nwr; i++) {
            struct jpd_stream *w = s->wr[i];
            w->limit = jp_ring_fill(w->ring);
            note_fill(s, w->ring, w->limit);
        }
        uint64_t fed_before = s->fed, injected_before = s->injected;
        int stop_before = s->stop_held;
        s->main_st.limit = UINT64_MAX;
        int r = drain_stream(s, &s->main_st, &budget, why);
        if (r < 0 || r == 1)
            return r;
        note_held(&s->main_st, r);
        int held = s->main_st.held != 0;
        /* From the ring after the one the last slice ran out in: a busy ring cannot starve
         * those after it. */
        for (uint32_t j = 0; j < s->nwr; j++) {
            uint32_t i = (s->wr_next + j) % s->nwr;
            struct jpd_stream *w = s->wr[i];
            r = drain_stream(s, w, &budget, why);
            if (r < 0)
                return r;
            if (r == 1) {
                s->wr_next = (i + 1u) % s->nwr; /* the cut ring goes last next time */
                return 1;
            }
            note_held(w, r);
            held |= w->held != 0;
        }
        int progress = s->fed - (s->injected - injected_before) != fed_before;
        if (!held) {
            /* Another pass while the rings keep giving and the budget lasts, as one ring's
             * drain goes on while its producer keeps up. Done when a pass took nothing - but
             * not the pass that found RUN_STOP: its fills were read before, and RUN_STOP is
             * the producer's last record, so only fills read after it are final. */
            s->idle_passes = 0;
            if (!progress && (stop_before || !s->stop_held))
                return 0;
            continue;
        }
        s->idle_passes = progress ? 0 : s->idle_passes + 1u;
        struct jpd_stream *oldest = NULL;
        struct jpd_stream *all[JP_CTL_MAX_WORKER_RINGS + 1];
        all[0] = &s->main_st;
        for (uint32_t i = 0; i < s->nwr; i++)
            all[i + 1] = s->wr[i];
        for (uint32_t i = 0; i <= s->nwr; i++)
            if (all[i]->held && (!oldest || all[i]->held > oldest->held))
                oldest = all[i];
        if (budget == 0)
            return 1;
        if (hold_expired(s, oldest)) {
            /* Only once everything the client sent before the record has been read: a ring
             * it announced may hold what the record depends on. Until then the slice ends
             * here and the loop reads the socket before the next one. */
            if (!s->final_drain && !jpd_conn_all_read(s))
                return 1;
            s->idle_passes = 0;
            if ((r = release_held(s, oldest, &budget, why)) < 0)
                return r;
        }
        if (budget == 0)
            return 1;
    }
}

void jpd_drain_mark_time(struct jpd_session *s, int always)
{
    uint64_t now = uv_hrtime();
    /* After RUN_START (the engine takes nothing before it); RUN_STOP, held until the run's
     * excerpts are in, is fed after every mark. */
    if (!s->fed || !s->eng ||
        (!always && now - s->mark_ns < (uint64_t)JPD_TIME_MARK_MS * 1000000u))
        return;
    struct jp_rec_time t = {.h = {JP_REC_TIME, sizeof t}, .ns = now - s->start_ns};
    const char *why;
    if (jpd_drain_feed(s, &t, sizeof t, &why) == 0) {
        s->mark_ns = now;
        s->injected++; /* RUN_STOP counts it, as it counts the EXECs the merge injects */
    }
}

/* One drain, and what `status` shows of the run after it (an empty ring included: its fill
 * and the producer's gauges move without records). */
static int drain(struct jpd_session *s, uint32_t budget, const char **why)
{
    int r = drain_slots(s, budget, why);
    if (r >= 0) {
        jpd_drain_mark_time(s, 0);
        jpd_window_tick(s); /* between drains: a window's cut sees whole records only */
    }
    const struct jp_ring *rings[JP_CTL_MAX_WORKER_RINGS + 1];
    rings[0] = &s->ring;
    for (uint32_t i = 0; i < s->nwr; i++)
        rings[i + 1] = s->wr[i]->ring;
    jpd_live_update(s->d, &s->live, s->fed, s->last_found, s->last_slots, rings, s->nwr + 1u,
                    s->eng);
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
        if (s->last_found > s->last_slots / 8)
            p = JPD_DRAIN_PERIOD_MS;
        else if (s->last_found < s->last_slots / 64 && p < JPD_DRAIN_PERIOD_MAX_MS)
            p *= 2;
        if (p != s->period_ms) {
            s->period_ms = p;
            uv_timer_set_repeat(&s->timer, p);
        }
    }
    if (r == 1 ||
        (!s->stop_held && !s->eof && !s->finalize_seen && s->last_found > s->last_slots / 2)) {
        /* More is waiting (with RUN_STOP held: in the worker rings, which are drained before
         * it), or the producer filled more than half the ring within one period
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
    for (uint32_t i = 0; i < s->nwr; i++)
        budget += s->wr[i]->ring->slot_count;
    /* The run is ending: a held record waits for no more socket reads, and after SIGTERM the
     * drains of all runs together stop at the daemon's deadline. */
    s->final_drain = 1;
    uint64_t until = s->d->stop_drain_until_ns;
    int r = 0;
    while (s->ring_mapped && budget > 0 && !(until && uv_hrtime() >= until)) {
        uint32_t slice = budget > JPD_DRAIN_SLICE ? JPD_DRAIN_SLICE : (uint32_t)budget;
        r = drain(s, slice, &why);
        if (r < 0) {
            drain_failed(s, r, why);
            break;
        }
        if (r == 0)
            break;
        budget -= slice;
    }
    s->final_drain = 0;
    return r < 0 ? r : 0;
}

int jpd_ring_adopt(int fd, uint32_t slot_count, int worker, struct jp_ring *out, const char **why)
{
    static const char *const msgs[2][4] = {
        {"the ring fd's size does not match ring.slot_count", "the ring header is invalid",
         "the ring cannot be mapped", "the ring header's slot_count differs from ring.slot_count"},
        {"the worker ring fd's size does not match worker_ring.slot_count",
         "the worker ring header is invalid", "the worker ring cannot be mapped",
         "the worker ring header's slot_count differs from worker_ring.slot_count"},
    };
    const char *const *m = msgs[worker != 0];
    uint64_t bytes = (uint64_t)JP_RING_HEADER_SIZE + (uint64_t)slot_count * JP_SLOT_SIZE;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != bytes) {
        close(fd);
        *why = m[0];
        return -EPROTO;
    }
    int r = jp_ring_map(fd, out);
    if (r < 0) {
        close(fd);
        *why = m[r == -EPROTO ? 1 : 2];
        return -EPROTO;
    }
    if (out->slot_count != slot_count) {
        jp_ring_unmap(out);
        *why = m[3];
        return -EPROTO;
    }
    return 0;
}

void jpd_drain_add_ring(struct jpd_session *s, uint32_t slot_count, int ring_fd)
{
    uint64_t bytes = (uint64_t)JP_RING_HEADER_SIZE + (uint64_t)slot_count * JP_SLOT_SIZE;
    const struct jpd_config *cfg = s->d->cfg;
    /* The caps WELCOME gave: a client that passes them fails its own run. */
    const char *bad = NULL;
    if (s->nwr == JP_CTL_MAX_WORKER_RINGS)
        bad = "the run handed over more than 64 worker rings";
    else if (!s->d->private_mode && bytes > cfg->max_ring_bytes)
        bad = "a worker ring is larger than this daemon allows (--max-ring-bytes)";
    else if (!s->d->private_mode && s->ring_bytes + bytes > cfg->max_run_ring_bytes)
        bad = JPD_RUN_RING_CAP_REASON;
    if (bad) {
        close(ring_fd);
        jpd_session_fail(s, JP_CTLE_BAD_RING, bad);
        return;
    }
    struct jpd_stream *w = calloc(1, sizeof *w);
    if (!w) {
        close(ring_fd);
        jpd_session_fail(s, JP_CTLE_INTERNAL, "the daemon is out of memory");
        return;
    }
    const char *why;
    if (jpd_ring_adopt(ring_fd, slot_count, 1, &w->own, &why) < 0) {
        free(w);
        jpd_session_fail(s, JP_CTLE_BAD_RING, why);
        return;
    }
    w->ring = &w->own;
    w->exec = no_identity;
    w->worker = 1;
    s->wr[s->nwr++] = w;
    s->ring_bytes += bytes;
}

void jpd_drain_unmap_workers(struct jpd_session *s)
{
    for (uint32_t i = 0; i < s->nwr; i++) {
        jp_ring_unmap(&s->wr[i]->own);
        free(s->wr[i]);
        s->wr[i] = NULL;
    }
    s->nwr = 0;
}
