/* One client connection: a profiled run (HELLO, RING, drain, FINALIZE, excerpts, RESULT) or, in
 * long-lived mode, a SHOW request.
 *
 * Lifetime: a session is created on accept (or from --session-fd), owns its socket, its ring
 * mapping, its engine and its capture writers, and is freed only in the close callback of its
 * last libuv handle (a uv_poll_t on the socket and a uv_timer_t). Everything the client sends
 * is untrusted: control frames go through the strict decoder, passed fds are counted and
 * bounded, ring records are copied out and bounded before anything looks at them. A client can
 * end only its own session.
 *
 * The socket is watched with uv_poll_t and read with recvmsg() because libuv's IPC pipes only
 * accept sockets and pipes as passed handles, never the ring's memfd or a capture file.
 *
 * States:
 *   HELLO   -> HELLO accepted, WELCOME sent              -> RING
 *   RING    -> ring mapped (and capture opened)          -> LIVE
 *   LIVE    -> FINALIZE (or EOF, or SIGTERM)             -> draining to RUN_STOP
 *   holding RUN_STOP, EXCERPT_REQUEST sent               -> EXCERPTS
 *   EXCERPTS-> EXCERPTS fed, RUN_STOP fed, RESULT sent   -> DONE (flush, then close)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jpd.h"

uint32_t jpd_excerpt_timeout_ms = JPD_EXCERPT_MS;
uint32_t jpd_handshake_timeout_ms = JPD_HANDSHAKE_MS;

enum {
    S_HELLO,
    S_RING,
    S_LIVE,
    S_EXCERPTS,
    S_DONE,  /* nothing more is read; pending output is flushed, then the session closes */
};

struct jpd_out {
    struct jpd_out *next;
    size_t len, off;
    uint8_t *buf;
};

struct jpd_session {
    struct jpd_daemon *d;
    struct jpd_session *prev, *next;
    uv_poll_t poll;
    uv_timer_t timer;
    uv_idle_t again;    /* "drain again on the next loop turn" (see pump) */
    int fd;
    int state;
    int handles_open;   /* 3 until all close callbacks ran */
    int closing;
    int poll_events;    /* what poll is started with now */
    int eof;            /* the peer is gone (read EOF, reset, or an unrecoverable write) */
    int finalize_seen;
    int stop_held;
    int run_started;    /* ring mapped: the run exists and will be logged */
    int run_finished;
    int linger;         /* after an ERROR: drop unread input before closing */
    struct jpd_peer peer;
    uint64_t run_id;
    struct jp_ctl_decoder *dec; /* NULL once DONE: nothing more is decoded */
    size_t buffered;            /* this decoder's share of d->buffered */
    int fds[JPD_MAX_PENDING_FDS];
    unsigned nfds;
    uint32_t mode, outputs;
    struct jp_ring ring;
    int ring_mapped;
    struct jp_engine *eng;
    struct jp_capture_writer *cap[2]; /* [0] the client's capture fd, [1] the capture dir's */
    int cap_fd[2];
    int cap_errno;        /* why the client's capture ended early (0: it did not); reported
                           * in RESULT, the profile itself is unaffected */
    char cap_name[96];    /* the capture dir's file, removed if its capture fails */
    struct jpd_out *out_head, *out_tail;
    uint64_t fed;
    uint64_t last_found;  /* slots the last drain found waiting in the ring */
    uint32_t period_ms;   /* the drain timer's current repeat, JPD_DRAIN_PERIOD_MS.._MAX_MS */
    uint32_t stop_len;
    uint8_t stop_rec[JP_REC_MAX_SIZE];
    uint8_t rec[JP_REC_MAX_SIZE];
};

/* Every state change goes through here: the daemon counts its live runs, so a lone run can be
 * drained in larger slices (nobody else waits for the loop). */
static void set_state(struct jpd_session *s, int st)
{
    if (s->state == S_LIVE && st != S_LIVE)
        s->d->live_runs--;
    else if (s->state != S_LIVE && st == S_LIVE)
        s->d->live_runs++;
    s->state = st;
}

static void session_close(struct jpd_session *s);
static void session_update_poll(struct jpd_session *s);
static void on_timer(uv_timer_t *t);
static void on_again(uv_idle_t *h);
static void on_eof(struct jpd_session *s);

/* ---- output ---- */

/* One non-blocking recvmsg (retried on EINTR) that also takes the fds sent with the bytes.
 * Returns the bytes read (0 at EOF) or -errno. The fds are in fds[0..*nfds); *fds_rc < 0 means
 * the peer attached more than JP_CTL_MAX_FDS and jp_ctl_take_fds closed them all. */
static ssize_t recv_some(int fd, uint8_t *buf, size_t len, int *fds, unsigned *nfds, int *fds_rc)
{
    for (;;) {
        union {
            struct cmsghdr align;
            char space[JP_CTL_CMSG_SPACE];
        } cm;
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.space,
                            .msg_controllen = sizeof cm.space};
        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        *nfds = 0;
        if (n < 0)
            return -errno;
        *fds_rc = jp_ctl_take_fds(&mh, fds, JP_CTL_MAX_FDS, nfds);
        return n;
    }
}

/* Reads and drops whatever the peer has queued right now (closing any fds it carried). */
static void discard_input(struct jpd_session *s)
{
    for (int turn = 0; turn < 64; turn++) {
        uint8_t buf[4096];
        int got[JP_CTL_MAX_FDS], fds_rc;
        unsigned k;
        ssize_t n = recv_some(s->fd, buf, sizeof buf, got, &k, &fds_rc);
        if (n <= 0)
            return;
        if (fds_rc == 0)
            for (unsigned i = 0; i < k; i++)
                close(got[i]);
    }
}

static void flush_out(struct jpd_session *s)
{
    int lost = 0;
    while (s->out_head) {
        struct jpd_out *o = s->out_head;
        ssize_t n = send(s->fd, o->buf + o->off, o->len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            /* The peer is gone: whatever it has not read can never arrive. */
            lost = 1;
            while (s->out_head) {
                o = s->out_head;
                s->out_head = o->next;
                free(o->buf);
                free(o);
            }
            s->out_tail = NULL;
            break;
        }
        o->off += (size_t)n;
        if (o->off == o->len) {
            s->out_head = o->next;
            if (!s->out_head)
                s->out_tail = NULL;
            free(o->buf);
            free(o);
        }
    }
    if (lost && !s->eof && s->state != S_DONE) {
        /* Same as reading EOF: the run still ends with its best-effort profile. */
        on_eof(s);
        return;
    }
    if (lost)
        s->eof = 1;
    if (!s->out_head && s->state == S_DONE) {
        /* Closing with the peer's bytes unread would flag its end ECONNRESET, which can hide
         * the ERROR we just sent from it: drop what is queued first (without waiting). */
        if (s->linger && !s->eof)
            discard_input(s);
        session_close(s);
        return;
    }
    session_update_poll(s);
}

static int send_msg(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    uint8_t *buf;
    size_t len;
    int r = jp_ctl_encode(m, &buf, &len);
    if (r < 0)
        return r;
    struct jpd_out *o = calloc(1, sizeof *o);
    if (!o) {
        free(buf);
        return -ENOMEM;
    }
    o->buf = buf;
    o->len = len;
    if (s->out_tail)
        s->out_tail->next = o;
    else
        s->out_head = o;
    s->out_tail = o;
    flush_out(s); /* may close a DONE session: callers only touch it through guarded paths */
    return 0;
}

/* Puts the session in DONE: no more input is read; it closes once its output is written or
 * JPD_FLUSH_MS passed, whichever comes first. */
static void session_done(struct jpd_session *s)
{
    if (s->closing)
        return;
    set_state(s, S_DONE);
    /* Nothing is decoded from here on: give back the buffered bytes at once. */
    s->d->buffered -= s->buffered;
    s->buffered = 0;
    jp_ctl_decoder_free(s->dec);
    s->dec = NULL;
    uv_timer_stop(&s->timer);
    uv_timer_start(&s->timer, on_timer, JPD_FLUSH_MS, 0);
    flush_out(s);
}

static void release_ring(struct jpd_session *s)
{
    if (s->ring_mapped) {
        jp_ring_unmap(&s->ring);
        s->ring_mapped = 0;
    }
}

/* A capture could not be written (err < 0): it stops here and the run goes on. The client's
 * capture is reported to it in RESULT; a capture-dir file is removed rather than left empty
 * or cut short, and the log says so. */
static void capture_failed(struct jpd_session *s, int i, int err)
{
    if (s->cap[i]) {
        jp_capture_writer_free(s->cap[i]);
        s->cap[i] = NULL;
    }
    if (s->cap_fd[i] >= 0) {
        close(s->cap_fd[i]);
        s->cap_fd[i] = -1;
    }
    if (i == 0) {
        if (!s->cap_errno)
            s->cap_errno = -err;
        if (!s->d->private_mode)
            jpd_log("run %llu: the client's capture failed (%s); profiling goes on",
                    (unsigned long long)s->run_id, strerror(-err));
        return;
    }
    int gone = unlinkat(s->d->capture_dir_fd, s->cap_name, 0) == 0;
    jpd_log("run %llu: its capture failed (%s); %s", (unsigned long long)s->run_id,
            strerror(-err), gone ? "removed the capture file" : "cannot remove the capture file");
}

static void free_captures(struct jpd_session *s)
{
    for (int i = 0; i < 2; i++) {
        if (s->cap[i]) {
            /* a stream without RUN_STOP reads as missing_stop_event */
            int r = jp_capture_flush(s->cap[i]);
            if (r < 0) {
                capture_failed(s, i, r);
                continue;
            }
            jp_capture_writer_free(s->cap[i]);
            s->cap[i] = NULL;
        }
        if (s->cap_fd[i] >= 0) {
            close(s->cap_fd[i]);
            s->cap_fd[i] = -1;
        }
    }
}

static const char *status_word(uint32_t st)
{
    switch (st) {
    case JP_STATUS_COMPLETE: return "complete";
    case JP_STATUS_PARTIAL: return "partial";
    case JP_STATUS_UNAVAILABLE: return "unavailable";
    default: return "error";
    }
}

/* Ends a run that has an engine: render, account, hand the profile to whoever can still take
 * it. deliver: the client is there and gets a RESULT. Otherwise the profile goes to the place
 * the contract promises a lost producer: stderr in private mode (the user's terminal), the runs
 * log and the `show` store in long-lived mode. */
static void finish_run(struct jpd_session *s, uint32_t ending, int deliver)
{
    struct jp_report_opts o = {
        .size = sizeof o, .threshold_bp = -1, .limit = -1, .ending = ending,
        .outputs = JP_OUT_HUMAN | JP_OUT_TOON,
    };
    struct jp_rendered out;
    memset(&out, 0, sizeof out);
    struct jp_engine_summary sum;
    memset(&sum, 0, sizeof sum);
    s->run_finished = 1;
    int r = jp_engine_render(s->eng, &o, &out);
    (void)jp_engine_summary(s->eng, ending, &sum);
    free_captures(s);
    release_ring(s);

    if (r < 0) {
        jpd_log("run %llu: cannot render its profile (%s)", (unsigned long long)s->run_id,
                strerror(-r));
        jpd_daemon_log_run(s->d, s->run_id, s->peer.pid, s->peer.uid, ending, &sum, "internal",
                           0);
        if (deliver) {
            struct jp_ctl_msg m = {.type = JP_CTL_ERROR};
            m.u.error.code = JP_CTLE_INTERNAL;
            m.u.error.message = "the daemon could not render the profile";
            m.u.error.message_len = strlen(m.u.error.message);
            (void)send_msg(s, &m);
        }
        session_done(s);
        return;
    }

    /* Private mode's stderr is the user's terminal: run bookkeeping stays out of it. */
    if (!s->d->private_mode)
        jpd_log("run %llu finished: %s%s%s, %llu records, ending %s",
                (unsigned long long)s->run_id, status_word(out.status), out.reason[0] ? " " : "",
                out.reason, (unsigned long long)s->fed, jpd_ending_word(ending));
    jpd_daemon_log_run(s->d, s->run_id, s->peer.pid, s->peer.uid, ending, &sum, out.reason,
                       out.status);
    if (!s->d->private_mode)
        jpd_daemon_keep(s->d, s->run_id, s->peer.uid, &out);

    if (deliver && !s->eof) {
        struct jp_ctl_msg m = {.type = JP_CTL_RESULT};
        m.u.result.status = out.status;
        m.u.result.reason = out.reason;
        m.u.result.reason_len = strlen(out.reason);
        m.u.result.human = (s->outputs & JP_OUT_HUMAN) && out.human ? out.human : "";
        m.u.result.human_len = (s->outputs & JP_OUT_HUMAN) && out.human ? out.human_len : 0;
        m.u.result.toon = (s->outputs & JP_OUT_TOON) && out.toon ? out.toon : "";
        m.u.result.toon_len = (s->outputs & JP_OUT_TOON) && out.toon ? out.toon_len : 0;
        m.u.result.capture_errno = (uint32_t)s->cap_errno;
        r = send_msg(s, &m);
        if (r < 0)
            jpd_log("run %llu: cannot send its result (%s)", (unsigned long long)s->run_id,
                    strerror(-r));
    } else if (s->d->private_mode && out.human) {
        /* Private mode's stderr is the user's terminal: the best-effort profile of a run whose
         * process vanished lands there. */
        (void)jpd_write_all(STDERR_FILENO, out.human, out.human_len);
    }
    jp_rendered_free(&out);
    jp_engine_free(s->eng);
    s->eng = NULL;
    session_done(s);
}

/* Ends the session with ERROR{code, message}. A run that already started is logged. */
static void fail(struct jpd_session *s, uint32_t code, const char *message)
{
    if (s->state == S_DONE || s->closing)
        return;
    if (s->run_started && !s->run_finished) {
        struct jp_engine_summary sum;
        memset(&sum, 0, sizeof sum);
        s->run_finished = 1;
        if (s->eng)
            (void)jp_engine_summary(s->eng, JP_END_COLLECTOR_FAILURE, &sum);
        if (!s->d->private_mode)
            jpd_log("run %llu ended: %s, %llu records", (unsigned long long)s->run_id,
                    jp_ctl_error_name(code), (unsigned long long)s->fed);
        jpd_daemon_log_run(s->d, s->run_id, s->peer.pid, s->peer.uid, JP_END_COLLECTOR_FAILURE,
                           &sum, jp_ctl_error_name(code), 0);
    }
    free_captures(s);
    release_ring(s);
    if (s->eng) {
        jp_engine_free(s->eng);
        s->eng = NULL;
    }
    if (!s->eof) {
        s->linger = 1;
        struct jp_ctl_msg m = {.type = JP_CTL_ERROR};
        m.u.error.code = code;
        m.u.error.message = message;
        m.u.error.message_len = strlen(message);
        (void)send_msg(s, &m);
    }
    session_done(s);
}

/* ---- the ring ---- */

static int feed(struct jpd_session *s, const void *rec, uint32_t len, const char **why)
{
    int r = jp_engine_feed(s->eng, rec, len, why);
    if (r < 0)
        return r;
    s->fed++;
    for (int i = 0; i < 2; i++) {
        if (!s->cap[i])
            continue;
        int w = jp_capture_write(s->cap[i], rec, len);
        if (w < 0)
            capture_failed(s, i, w); /* a full disk loses the capture, not the profile */
    }
    return 0;
}

/* Consumes up to `budget` records (PAD included). Returns 1 when the budget ran out (more may
 * be there), 0 when the ring is empty or RUN_STOP is held, -EPROTO with *why on a record that
 * ends the session.
 *
 * The ring stays writable by the client, so nothing is trusted in place: the header is read
 * once, and the record is copied into s->rec before anything else looks at it. s->rec is one
 * small buffer reused for every record, so it stays in L1 next to the engine's tables. Copying
 * whole runs of slots (16 KiB to 1 MiB) out first and walking and feeding from there, one
 * record at a time or through jp_engine_feed_batch, measured slower: 22-27 ns of daemon CPU
 * per record against 19-20 ns (bench/daemon, 4 runs): the run streams through L1 and evicts
 * the engine's tables, and the walk's loads wait on the copy's stores. Slots are released
 * every JPD_RELEASE_SLOTS, so a producer waiting for room gets it while we are still
 * draining. */
static int drain(struct jpd_session *s, uint32_t budget, const char **why)
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
            r = capturing ? feed(s, s->rec, h.size, why)
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

static void begin_excerpts(struct jpd_session *s)
{
    struct jp_report_opts o = {
        .size = sizeof o, .threshold_bp = -1, .limit = -1, .ending = JP_END_STOP,
        .outputs = JP_OUT_HUMAN | JP_OUT_TOON,
    };
    struct jp_ctl_excerpt_key *keys = NULL;
    uint32_t count = 0;
    int r = jp_engine_excerpt_keys(s->eng, &o, &keys, &count);
    if (r < 0) {
        fail(s, JP_CTLE_INTERNAL, "the daemon could not list the hot lines");
        return;
    }
    if (count > JP_CTL_MAX_EXCERPT_KEYS)
        count = JP_CTL_MAX_EXCERPT_KEYS;
    /* EXCERPTS is the one large frame a client sends, and only in answer to this request. */
    (void)jp_ctl_decoder_set_max_frame(s->dec, JPD_MAX_CLIENT_FRAME);
    struct jp_ctl_msg m = {.type = JP_CTL_EXCERPT_REQUEST};
    m.u.excerpt_request.keys = keys;
    m.u.excerpt_request.count = count;
    r = send_msg(s, &m);
    free(keys);
    if (r < 0) {
        fail(s, JP_CTLE_INTERNAL, "the daemon could not ask for excerpts");
        return;
    }
    set_state(s, S_EXCERPTS);
    /* The stream is consumed up to its RUN_STOP: the ring has nothing more to give. */
    release_ring(s);
    uv_timer_stop(&s->timer);
    uv_timer_start(&s->timer, on_timer, jpd_excerpt_timeout_ms, 0);
    flush_out(s);
}

static void feed_held_stop(struct jpd_session *s)
{
    const char *why = NULL;
    if (feed(s, s->stop_rec, s->stop_len, &why) < 0) {
        fail(s, JP_CTLE_PROTOCOL_VIOLATION, why ? why : "bad run_stop record");
        return;
    }
    s->stop_held = 0;
    finish_run(s, JP_END_STOP, !s->eof);
}

/* Drains one slice and decides what comes next. */
static void pump(struct jpd_session *s)
{
    const char *why = NULL;
    /* A lone run has no one to be fair to: larger slices, fewer loop turns. */
    int r = drain(s, s->d->live_runs > 1 ? JPD_DRAIN_SLICE : JPD_DRAIN_SLICE_ALONE, &why);
    if (r < 0) {
        if (r == -ENOMEM)
            fail(s, JP_CTLE_INTERNAL, "the daemon is out of memory");
        else
            fail(s, JP_CTLE_PROTOCOL_VIOLATION, why ? why : "bad record in the ring");
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
    if (s->stop_held) {
        if (s->eof) {
            /* The stream is whole; only the client that would take the result is gone. */
            feed_held_stop(s);
        } else if (s->finalize_seen) {
            begin_excerpts(s);
        }
        /* else: RUN_STOP before FINALIZE; wait for it (the timer keeps ticking harmlessly). */
        return;
    }
    if (r == 1 || (!s->eof && !s->finalize_seen && s->last_found > s->ring.slot_count / 2)) {
        /* More is waiting, or the producer filled more than half the ring within one period
         * (it may be waiting for room now, and the timer cannot tick faster than 1 ms): come
         * back on the next loop turn, after the other sessions and the sockets had theirs.
         * Not with a 0 ms timer: re-armed from a timer callback, libuv before 1.48 runs it
         * again in the same pass, so a flooding run would starve all I/O (FINALIZE of other
         * runs, SIGTERM). An active idle handle makes the next poll not block instead. */
        uv_idle_start(&s->again, on_again);
        return;
    }
    if (s->eof) {
        finish_run(s, JP_END_PRODUCER_LOST, 0);
        return;
    }
    if (s->finalize_seen) {
        /* The agent commits its RUN_STOP before it sends FINALIZE, so an empty ring now means
         * the stop never made it into the ring. */
        finish_run(s, JP_END_COLLECTOR_FAILURE, 1);
        return;
    }
}

static void on_again(uv_idle_t *h)
{
    struct jpd_session *s = h->data;
    uv_idle_stop(h);
    if (!s->closing && s->state == S_LIVE)
        pump(s);
}

static void on_timer(uv_timer_t *t)
{
    struct jpd_session *s = t->data;
    if (s->closing)
        return;
    switch (s->state) {
    case S_HELLO:
    case S_RING:
        if (!s->d->private_mode)
            jpd_log("closing a connection of uid %u: no hello and ring within %u ms",
                    (unsigned)s->peer.uid, (unsigned)jpd_handshake_timeout_ms);
        fail(s, JP_CTLE_BAD_MESSAGE, "no hello and ring within the handshake time");
        return;
    case S_LIVE:
        pump(s);
        return;
    case S_EXCERPTS:
        /* No answer: the profile goes out without excerpts (they render as unavailable). */
        if (!s->d->private_mode)
            jpd_log("run %llu: no excerpts within %u ms", (unsigned long long)s->run_id,
                    (unsigned)jpd_excerpt_timeout_ms);
        feed_held_stop(s);
        return;
    case S_DONE:
        session_close(s); /* the peer did not take its output in time */
        return;
    }
}

/* ---- messages ---- */

static int check_hello(const struct jp_ctl_msg *m, uint32_t *code, const char **msg)
{
    *code = JP_CTLE_BAD_MESSAGE;
    if (m->u.hello.version != JP_CTL_VERSION) {
        *code = JP_CTLE_UNSUPPORTED_VERSION;
        *msg = "unsupported control protocol version";
        return -1;
    }
    uint32_t mode = m->u.hello.mode;
    if (mode != JP_MODE_CPU && mode != JP_MODE_MEMORY) {
        *msg = "hello.mode is neither cpu nor memory";
        return -1;
    }
    if (mode == JP_MODE_CPU && (m->u.hello.rate_hz < 1 || m->u.hello.rate_hz > 1000)) {
        *msg = "hello.rate_hz is outside 1..1000";
        return -1;
    }
    if (mode == JP_MODE_MEMORY && m->u.hello.rate_hz != 0) {
        *msg = "hello.rate_hz must be 0 in memory mode";
        return -1;
    }
    if (m->u.hello.threshold_bp > 10000) {
        *msg = "hello.threshold_bp is outside 0..10000";
        return -1;
    }
    if (m->u.hello.limit < 1 || m->u.hello.limit > 100) {
        *msg = "hello.limit is outside 1..100";
        return -1;
    }
    if (m->u.hello.outputs & ~(uint32_t)(JP_OUT_HUMAN | JP_OUT_TOON)) {
        *msg = "hello.outputs names an unknown output";
        return -1;
    }
    uint32_t need = mode == JP_MODE_CPU ? JP_CAPS_CPU_REQUIRED : JP_CAPS_MEMORY_REQUIRED;
    if ((m->u.hello.capabilities & need) != need) {
        *msg = "hello.capabilities lack what the mode requires";
        return -1;
    }
    return 0;
}

static void on_hello(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    uint32_t code;
    const char *msg;
    if (check_hello(m, &code, &msg) < 0) {
        fail(s, code, msg);
        return;
    }
    if (s->d->shutting_down) {
        fail(s, JP_CTLE_SHUTTING_DOWN, "the daemon is shutting down");
        return;
    }
    /* root is not capped: it is the host's own tooling (and could lift the cap anyway). */
    if (!s->d->private_mode && s->peer.uid != 0 &&
        jpd_live_runs_of(s->d, s->peer.uid) >= s->d->cfg->max_runs_per_uid) {
        fail(s, JP_CTLE_TOO_MANY_RUNS, "too many concurrent runs for this user");
        return;
    }
    s->mode = m->u.hello.mode;
    s->outputs = m->u.hello.outputs;
    s->run_id = s->d->next_run_id++;
    struct jp_ctl_msg w = {.type = JP_CTL_WELCOME};
    w.u.welcome.run_id = s->run_id;
    if (send_msg(s, &w) < 0) {
        fail(s, JP_CTLE_INTERNAL, "the daemon could not answer");
        return;
    }
    set_state(s, S_RING);
}

static int take_fd(struct jpd_session *s)
{
    if (s->nfds == 0)
        return -1;
    int fd = s->fds[0];
    memmove(s->fds, s->fds + 1, (s->nfds - 1) * sizeof s->fds[0]);
    s->nfds--;
    return fd;
}

static void on_ring(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    uint32_t want = m->u.ring.has_capture ? 2u : 1u;
    if (m->u.ring.has_capture > 1) {
        fail(s, JP_CTLE_BAD_MESSAGE, "ring.has_capture is neither 0 nor 1");
        return;
    }
    if (s->nfds != want) {
        fail(s, JP_CTLE_BAD_RING, s->nfds < want ? "the ring message lacks its file descriptors"
                                                 : "more file descriptors than the ring message "
                                                   "announces");
        return;
    }
    int ring_fd = take_fd(s);
    int cap_fd = want == 2 ? take_fd(s) : -1;
    s->cap_fd[0] = cap_fd;

    uint64_t bytes = (uint64_t)JP_RING_HEADER_SIZE + (uint64_t)m->u.ring.slot_count * JP_SLOT_SIZE;
    struct stat st;
    if (!s->d->private_mode && bytes > s->d->cfg->max_ring_bytes) {
        close(ring_fd);
        fail(s, JP_CTLE_BAD_RING, "the ring is larger than this daemon allows");
        return;
    }
    if (fstat(ring_fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != bytes) {
        close(ring_fd);
        fail(s, JP_CTLE_BAD_RING, "the ring fd's size does not match ring.slot_count");
        return;
    }
    int r = jp_ring_map(ring_fd, &s->ring);
    if (r < 0) {
        close(ring_fd);
        fail(s, JP_CTLE_BAD_RING, r == -EPROTO ? "the ring header is invalid"
                                               : "the ring cannot be mapped");
        return;
    }
    s->ring_mapped = 1;
    if (s->ring.slot_count != m->u.ring.slot_count) {
        fail(s, JP_CTLE_BAD_RING, "the ring header's slot_count differs from ring.slot_count");
        return;
    }
    struct jp_capture_meta meta = {.mode = s->mode, .pid = (uint32_t)s->peer.pid,
                                   .run_id = s->run_id};
    if (cap_fd >= 0) {
        /* Only a regular file: writing to a pipe, socket or terminal could block the loop.
         * A capture that cannot be had is reported with the result; the run goes on. */
        int fl = fcntl(cap_fd, F_GETFL);
        if (fstat(cap_fd, &st) < 0 || !S_ISREG(st.st_mode) || fl < 0 ||
            (fl & O_ACCMODE) == O_RDONLY) {
            capture_failed(s, 0, -EINVAL);
        } else {
            int w = jp_capture_writer_new(cap_fd, &meta, &s->cap[0]);
            if (w < 0)
                capture_failed(s, 0, w);
        }
    }
    if (s->d->capture_dir_fd >= 0) {
        int fd = jpd_daemon_open_capture(s->d, s->run_id, s->cap_name, sizeof s->cap_name);
        if (fd >= 0) {
            s->cap_fd[1] = fd;
            int w = jp_capture_writer_new(fd, &meta, &s->cap[1]);
            if (w < 0)
                capture_failed(s, 1, w);
        } else {
            jpd_log("run %llu: cannot create its capture file (%s)",
                    (unsigned long long)s->run_id, strerror(-fd));
        }
    }
    r = jp_engine_new(&s->eng);
    if (r < 0) {
        fail(s, JP_CTLE_INTERNAL, "the daemon could not start an engine");
        return;
    }
    s->run_started = 1;
    set_state(s, S_LIVE);
    if (!s->d->private_mode)
        jpd_log("run %llu started: uid %u, mode %s, %u slots", (unsigned long long)s->run_id,
                (unsigned)s->peer.uid, jp_mode_name(s->mode), (unsigned)s->ring.slot_count);
    uv_timer_stop(&s->timer);
    s->period_ms = JPD_DRAIN_PERIOD_MS;
    uv_timer_start(&s->timer, on_timer, JPD_DRAIN_PERIOD_MS, JPD_DRAIN_PERIOD_MS);
}

static void on_excerpts(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    for (uint32_t i = 0; i < m->u.excerpts.count; i++) {
        const struct jp_ctl_excerpt *x = &m->u.excerpts.items[i];
        if (x->text_len > JP_EXCERPT_MAX || x->flags > 0xffu) {
            fail(s, JP_CTLE_BAD_MESSAGE, "an excerpt is longer than 160 bytes or has bad flags");
            return;
        }
        struct jp_rec_excerpt e;
        memset(&e, 0, sizeof e);
        e.h.type = JP_REC_EXCERPT;
        e.h.size = (uint16_t)(sizeof e + x->text_len);
        e.source_id = x->source_id;
        e.line = x->line;
        e.col = x->col;
        e.flags = (uint8_t)x->flags;
        e.text_len = (uint16_t)x->text_len;
        memcpy(s->rec, &e, sizeof e);
        if (x->text_len)
            memcpy(s->rec + sizeof e, x->text, x->text_len);
        const char *why = NULL;
        if (feed(s, s->rec, e.h.size, &why) < 0) {
            fail(s, JP_CTLE_PROTOCOL_VIOLATION, why ? why : "bad excerpt");
            return;
        }
    }
    feed_held_stop(s);
}

static void on_show(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    const struct jpd_kept *k = jpd_daemon_find_kept(s->d, m->u.show.run_id);
    if (m->u.show.outputs & ~(uint32_t)(JP_OUT_HUMAN | JP_OUT_TOON)) {
        fail(s, JP_CTLE_BAD_MESSAGE, "show.outputs names an unknown output");
        return;
    }
    /* One answer for a run that is not kept and one of another user: telling them apart
     * would tell other users which run ids exist. */
    if (!k || (s->peer.uid != 0 && s->peer.uid != k->uid)) {
        fail(s, JP_CTLE_NO_SUCH_RUN, "no such run visible to you");
        return;
    }
    struct jp_ctl_msg r = {.type = JP_CTL_RESULT};
    r.u.result.status = k->status;
    r.u.result.reason = k->reason;
    r.u.result.reason_len = strlen(k->reason);
    int h = (m->u.show.outputs & JP_OUT_HUMAN) && k->human;
    int t = (m->u.show.outputs & JP_OUT_TOON) && k->toon;
    r.u.result.human = h ? k->human : "";
    r.u.result.human_len = h ? k->human_len : 0;
    r.u.result.toon = t ? k->toon : "";
    r.u.result.toon_len = t ? k->toon_len : 0;
    if (send_msg(s, &r) < 0) {
        fail(s, JP_CTLE_INTERNAL, "the daemon could not answer");
        return;
    }
    session_done(s);
}

static void on_msg(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    if (m->type == JP_CTL_ERROR) {
        /* The client gave up: it will not read a result. */
        on_eof(s);
        return;
    }
    switch (s->state) {
    case S_HELLO:
        if (m->type == JP_CTL_HELLO)
            on_hello(s, m);
        else if (m->type == JP_CTL_SHOW && !s->d->private_mode)
            on_show(s, m);
        else
            fail(s, JP_CTLE_BAD_MESSAGE, "expected hello");
        return;
    case S_RING:
        if (m->type == JP_CTL_RING)
            on_ring(s, m);
        else
            fail(s, JP_CTLE_BAD_MESSAGE, "expected ring");
        return;
    case S_LIVE:
        if (m->type == JP_CTL_FINALIZE && !s->finalize_seen) {
            uint32_t t = m->u.finalize.termination;
            if (t < JP_TERM_RETURNED || t > JP_TERM_INTERRUPTED) {
                fail(s, JP_CTLE_BAD_MESSAGE, "finalize.termination is out of range");
                return;
            }
            s->finalize_seen = 1;
            uv_timer_start(&s->timer, on_timer, 0, JPD_DRAIN_PERIOD_MS);
        } else {
            fail(s, JP_CTLE_BAD_MESSAGE, "expected finalize");
        }
        return;
    case S_EXCERPTS:
        if (m->type == JP_CTL_EXCERPTS)
            on_excerpts(s, m);
        else
            fail(s, JP_CTLE_BAD_MESSAGE, "expected excerpts");
        return;
    default:
        return;
    }
}

/* The peer is gone. What happens depends on how far the run got. */
static void on_eof(struct jpd_session *s)
{
    s->eof = 1;
    /* Whatever we still wanted to say can no longer arrive. */
    while (s->out_head) {
        struct jpd_out *o = s->out_head;
        s->out_head = o->next;
        free(o->buf);
        free(o);
    }
    s->out_tail = NULL;
    switch (s->state) {
    case S_LIVE:
        /* Drain what the producer left, then a partial profile naming the lost producer. */
        uv_timer_start(&s->timer, on_timer, 0, JPD_DRAIN_PERIOD_MS);
        session_update_poll(s);
        return;
    case S_EXCERPTS:
        feed_held_stop(s);
        return;
    default:
        session_close(s);
        return;
    }
}

/* Brings the daemon's count of buffered frame bytes up to date with this session's decoder.
 * -ENOBUFS when the total is past JPD_MAX_BUFFERED: a partial frame of each of many
 * connections must not add up to an unbounded daemon. */
static int account_buffered(struct jpd_session *s)
{
    size_t now = jp_ctl_decoder_pending(s->dec);
    s->d->buffered = s->d->buffered - s->buffered + now;
    s->buffered = now;
    return s->d->buffered > JPD_MAX_BUFFERED ? -ENOBUFS : 0;
}

static void read_input(struct jpd_session *s)
{
    uint8_t buf[65536];
    for (int turn = 0; turn < 16 && s->state != S_DONE && !s->closing && !s->eof; turn++) {
        int got[JP_CTL_MAX_FDS], fds_rc;
        unsigned k;
        ssize_t n = recv_some(s->fd, buf, sizeof buf, got, &k, &fds_rc);
        if (n < 0) {
            if (n == -EAGAIN || n == -EWOULDBLOCK)
                return;
            on_eof(s);
            return;
        }
        if (fds_rc < 0) {
            fail(s, JP_CTLE_BAD_MESSAGE, "too many file descriptors in one message");
            return;
        }
        /* fds are only ever expected next to the RING frame; a client cannot park more than
         * JPD_MAX_PENDING_FDS of them with us. */
        int unexpected = 0;
        for (unsigned i = 0; i < k; i++) {
            if (s->nfds < JPD_MAX_PENDING_FDS && s->state <= S_RING)
                s->fds[s->nfds++] = got[i];
            else {
                close(got[i]);
                unexpected = 1;
            }
        }
        if (unexpected) {
            fail(s, JP_CTLE_BAD_MESSAGE, "file descriptors sent where none are expected");
            return;
        }
        if (n == 0) {
            on_eof(s);
            return;
        }
        int r = jp_ctl_decoder_feed(s->dec, buf, (size_t)n);
        if (r < 0) {
            if (!s->d->private_mode)
                jpd_log("closing a connection of uid %u: %s", (unsigned)s->peer.uid,
                        r == -EMSGSIZE ? "control frame larger than allowed"
                                       : "out of memory buffering a control frame");
            fail(s, r == -ENOMEM ? JP_CTLE_INTERNAL : JP_CTLE_BAD_MESSAGE,
                 r == -EMSGSIZE ? "control frame larger than allowed"
                                : "the daemon is out of memory");
            return;
        }
        if (account_buffered(s) < 0) {
            jpd_log("closing a connection of uid %u: the daemon holds %zu bytes of unfinished "
                    "control frames, its limit", (unsigned)s->peer.uid, (size_t)JPD_MAX_BUFFERED);
            fail(s, JP_CTLE_BAD_MESSAGE, "the daemon holds too many unfinished control frames");
            return;
        }
        for (;;) {
            struct jp_ctl_msg m;
            const char *why = NULL;
            r = jp_ctl_decoder_next(s->dec, &m, &why);
            if (r == 0)
                break;
            if (r < 0) {
                fail(s, JP_CTLE_BAD_MESSAGE, why ? why : "malformed control message");
                return;
            }
            on_msg(s, &m);
            if (s->state == S_DONE || s->closing || s->eof)
                return;
        }
        (void)account_buffered(s); /* only shrinks here: whole frames were taken */
    }
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct jpd_session *s = h->data;
    if (s->closing)
        return;
    if (status < 0) {
        on_eof(s);
        return;
    }
    if (events & UV_WRITABLE)
        flush_out(s);
    if (s->closing)
        return;
    if (events & (UV_READABLE | UV_DISCONNECT))
        read_input(s);
}

static void session_update_poll(struct jpd_session *s)
{
    if (s->closing)
        return;
    int ev = 0;
    if (!s->eof && s->state != S_DONE)
        ev |= UV_READABLE | UV_DISCONNECT;
    if (s->out_head)
        ev |= UV_WRITABLE;
    if (ev == s->poll_events)
        return;
    s->poll_events = ev;
    if (ev)
        uv_poll_start(&s->poll, ev, on_poll);
    else
        uv_poll_stop(&s->poll);
}

/* ---- lifetime ---- */

static void on_closed(uv_handle_t *h)
{
    struct jpd_session *s = h->data;
    if (--s->handles_open > 0)
        return;
    struct jpd_daemon *d = s->d;
    close(s->fd);
    while (s->nfds)
        close(take_fd(s));
    free_captures(s);
    release_ring(s);
    jp_engine_free(s->eng);
    jp_ctl_decoder_free(s->dec);
    while (s->out_head) {
        struct jpd_out *o = s->out_head;
        s->out_head = o->next;
        free(o->buf);
        free(o);
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        d->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    d->nsessions--;
    d->buffered -= s->buffered;
    free(s);
    jpd_daemon_session_gone(d);
}

static void session_close(struct jpd_session *s)
{
    if (s->closing)
        return;
    s->closing = 1;
    if (s->state == S_LIVE)
        set_state(s, S_DONE);
    uv_poll_stop(&s->poll);
    uv_timer_stop(&s->timer);
    uv_idle_stop(&s->again);
    uv_close((uv_handle_t *)&s->poll, on_closed);
    uv_close((uv_handle_t *)&s->timer, on_closed);
    uv_close((uv_handle_t *)&s->again, on_closed);
}

static int session_new(struct jpd_daemon *d, int fd, const struct jpd_peer *peer,
                       struct jpd_session **out)
{
    struct jpd_session *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return -ENOMEM;
    }
    s->d = d;
    s->fd = fd;
    s->peer = *peer;
    s->cap_fd[0] = s->cap_fd[1] = -1;
    int r = jp_ctl_decoder_new(JPD_MAX_SMALL_FRAME, &s->dec);
    if (r < 0) {
        close(fd);
        free(s);
        return r;
    }
    r = uv_poll_init(d->loop, &s->poll, fd);
    if (r < 0) {
        jp_ctl_decoder_free(s->dec);
        close(fd);
        free(s);
        return r;
    }
    uv_timer_init(d->loop, &s->timer);
    uv_idle_init(d->loop, &s->again);
    s->poll.data = s;
    s->timer.data = s;
    s->again.data = s;
    s->handles_open = 3;
    s->next = d->sessions;
    if (d->sessions)
        d->sessions->prev = s;
    d->sessions = s;
    d->nsessions++;
    *out = s;
    return 0;
}

int jpd_session_start(struct jpd_daemon *d, int fd, const struct jpd_peer *peer)
{
    struct jpd_session *s;
    int r = session_new(d, fd, peer, &s);
    if (r < 0)
        return r;
    s->state = S_HELLO;
    uv_timer_start(&s->timer, on_timer, jpd_handshake_timeout_ms, 0);
    session_update_poll(s);
    return 0;
}

int jpd_session_refuse(struct jpd_daemon *d, int fd, const struct jpd_peer *peer, uint32_t code,
                       const char *message)
{
    struct jpd_session *s;
    int r = session_new(d, fd, peer, &s);
    if (r < 0)
        return r;
    s->state = S_HELLO;
    fail(s, code, message);
    return 0;
}

void jpd_session_shutdown(struct jpd_session *s)
{
    if (s->closing || s->state == S_DONE)
        return;
    if (s->state == S_LIVE || s->state == S_EXCERPTS) {
        /* Drain what is in the ring now (bounded by its size: a live producer cannot keep us
         * here), then deliver the run as interrupted. */
        const char *why = NULL;
        uint64_t budget = s->ring.slot_count;
        while (s->ring_mapped && !s->stop_held && budget > 0) {
            uint32_t slice = budget > JPD_DRAIN_SLICE ? JPD_DRAIN_SLICE : (uint32_t)budget;
            int r = drain(s, slice, &why);
            if (r < 0) {
                if (r == -ENOMEM)
                    fail(s, JP_CTLE_INTERNAL, "the daemon is out of memory");
                else
                    fail(s, JP_CTLE_PROTOCOL_VIOLATION, why ? why : "bad record in the ring");
                return;
            }
            if (r == 0)
                break;
            budget -= slice;
        }
        finish_run(s, JP_END_SHUTDOWN, !s->eof);
        return;
    }
    fail(s, JP_CTLE_SHUTTING_DOWN, "the daemon is shutting down");
}

uint32_t jpd_live_runs_of(const struct jpd_daemon *d, uid_t uid)
{
    uint32_t n = 0;
    for (const struct jpd_session *s = d->sessions; s; s = s->next)
        if (s->peer.uid == uid && s->run_id != 0 && !s->run_finished && !s->closing &&
            s->state != S_DONE)
            n++;
    return n;
}

uint32_t jpd_prehello_count(const struct jpd_daemon *d, uid_t uid, uint32_t *mine)
{
    uint32_t n = 0, m = 0;
    for (const struct jpd_session *s = d->sessions; s; s = s->next)
        if (s->state == S_HELLO && !s->closing) {
            n++;
            m += s->peer.uid == uid;
        }
    *mine = m;
    return n;
}

struct jpd_session *jpd_session_next(struct jpd_session *s)
{
    return s->next;
}
