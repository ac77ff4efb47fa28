/* A session's state machine and lifetime: HELLO, RING, LIVE, FINALIZE, EXCERPTS, EOF and the
 * end of a session (ERROR, DONE, close), for a profiled run or, in long-lived mode, a SHOW
 * request. The states, the lifetime rules and the other files of a session are described in
 * session.h.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

uint32_t jpd_excerpt_timeout_ms = JPD_EXCERPT_MS;
uint32_t jpd_handshake_timeout_ms = JPD_HANDSHAKE_MS;

/* A run or a request stops counting against its uid's caps when its socket is closed, not
 * when it is done: a session that still holds output the peer has not read holds it against
 * its own user (struct jpd_uid_use). */
static void uid_release(struct jpd_session *s)
{
    if (s->counted || s->requested)
        jpd_uid_use(s->d, s->peer.uid, -(int32_t)s->counted, -(int32_t)s->requested, 0);
    s->counted = s->requested = 0;
}

/* Every state change goes through here: each loop counts its live runs, so a run alone on its
 * loop can be drained in larger slices (nobody else waits for that loop). */
static void set_state(struct jpd_session *s, int st)
{
    if (s->state == JPD_S_LIVE && st != JPD_S_LIVE)
        s->lp->live_runs--;
    else if (s->state != JPD_S_LIVE && st == JPD_S_LIVE)
        s->lp->live_runs++;
    s->state = st;
}

static void on_timer(uv_timer_t *t);

void jpd_session_done(struct jpd_session *s)
{
    if (s->closing)
        return;
    set_state(s, JPD_S_DONE);
    /* Nothing is decoded from here on: give back the buffered bytes at once. */
    jpd_conn_end_input(s);
    uv_timer_stop(&s->timer);
    uv_timer_start(&s->timer, on_timer, JPD_FLUSH_MS, 0);
    jpd_conn_flush(s);
}

void jpd_session_unmap_ring(struct jpd_session *s)
{
    jpd_drain_unmap_workers(s);
    if (s->ring_mapped) {
        jp_ring_unmap(&s->ring);
        s->ring_mapped = 0;
    }
}

void jpd_session_fail(struct jpd_session *s, uint32_t code, const char *message)
{
    if (s->state == JPD_S_DONE || s->closing)
        return;
    if (s->run_started && !s->run_finished) {
        struct jp_engine_summary sum;
        memset(&sum, 0, sizeof sum);
        s->run_finished = 1;
        if (s->eng)
            (void)jp_engine_summary(s->eng, &sum);
        if (!s->d->private_mode)
            jpd_log("run %llu ended: %s, %llu records", (unsigned long long)s->run_id,
                    jp_ctl_error_name(code), (unsigned long long)s->fed);
        struct jpd_run_row row;
        jpd_result_row(s, JP_END_COLLECTOR_FAILURE, &sum, jp_ctl_error_name(code), 0, &row);
        jpd_log_run(s->d, &row);
    }
    jpd_capture_close(s);
    jpd_session_unmap_ring(s);
    jp_report_free(s->report);
    s->report = NULL;
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
        (void)jpd_conn_send(s, &m);
    }
    jpd_session_done(s);
}

void jpd_session_drained(struct jpd_session *s)
{
    if (s->stop_held) {
        if (s->eof) {
            /* The stream is whole; only the client that would take the result is gone. */
            jpd_session_feed_stop(s);
        } else if (s->finalize_seen) {
            jpd_session_begin_excerpts(s);
        }
        /* else: RUN_STOP before FINALIZE; wait for it (the timer keeps ticking harmlessly). */
        return;
    }
    if (s->eof) {
        jpd_result_finish(s, JP_END_PRODUCER_LOST, 0);
        return;
    }
    if (s->finalize_seen) {
        /* The agent commits its RUN_STOP before it sends FINALIZE, so an empty ring now means
         * the stop never made it into the ring. */
        jpd_result_finish(s, JP_END_COLLECTOR_FAILURE, 1);
    }
    /* else: live and nothing waiting; the drain timer comes back. */
}

void jpd_session_begin_excerpts(struct jpd_session *s)
{
    struct jp_report_opts o = {
        .size = sizeof o, .threshold_bp = -1, .limit = -1, .ending = JP_END_STOP,
        .outputs = JP_OUT_HUMAN | JP_OUT_TOON,
    };
    struct jp_ctl_excerpt_key *keys = NULL;
    uint32_t count = 0;
    struct jp_engine_view v;
    /* The run's one report, built here for its hot lines; jpd_result_finish writes it. */
    int r = jp_engine_view(s->eng, &v);
    if (r == 0)
        r = jp_report_build(&v, &o, &s->report);
    if (r == 0)
        r = jp_report_excerpt_keys(s->report, &keys, &count);
    if (r < 0) {
        jpd_session_fail(s, JP_CTLE_INTERNAL, r == -ENOMEM
                                                  ? "the daemon is out of memory"
                                                  : "the daemon could not list the hot lines");
        return;
    }
    if (count > JP_CTL_MAX_EXCERPT_KEYS)
        count = JP_CTL_MAX_EXCERPT_KEYS;
    /* EXCERPTS is the one large frame a client sends, and only in answer to this request. */
    jpd_conn_allow_excerpts(s);
    struct jp_ctl_msg m = {.type = JP_CTL_EXCERPT_REQUEST};
    m.u.excerpt_request.keys = keys;
    m.u.excerpt_request.count = count;
    r = jpd_conn_send(s, &m);
    free(keys);
    if (r < 0) {
        jpd_session_fail(s, JP_CTLE_INTERNAL, "the daemon could not ask for excerpts");
        return;
    }
    set_state(s, JPD_S_EXCERPTS);
    /* The stream is consumed up to its RUN_STOP: the ring has nothing more to give. */
    jpd_session_unmap_ring(s);
    uv_timer_stop(&s->timer);
    uv_timer_start(&s->timer, on_timer, jpd_excerpt_timeout_ms, 0);
    jpd_conn_flush(s);
}

void jpd_session_feed_stop(struct jpd_session *s)
{
    const char *why = NULL;
    jpd_drain_mark_time(s, 1); /* the run's last stretch ends with its stop */
    if (s->injected && s->stop_len == sizeof(struct jp_rec_run_stop)) {
        /* The EXEC records the merge injected are in the stream the engine and the capture
         * read: RUN_STOP counts them too. */
        struct jp_rec_run_stop stop;
        memcpy(&stop, s->stop_rec, sizeof stop);
        stop.record_count += s->injected;
        memcpy(s->stop_rec, &stop, sizeof stop);
    }
    if (jpd_drain_feed(s, s->stop_rec, s->stop_len, &why) < 0) {
        jpd_session_fail(s, JP_CTLE_PROTOCOL_VIOLATION, why ? why : "bad run_stop record");
        return;
    }
    s->stop_held = 0;
    jpd_result_finish(s, JP_END_STOP, !s->eof);
}

static void on_timer(uv_timer_t *t)
{
    struct jpd_session *s = t->data;
    if (s->closing)
        return;
    switch (s->state) {
    case JPD_S_HELLO:
    case JPD_S_RING:
        /* A daemon that was itself late (stopped, starved of CPU) runs its timers before it
         * polls its sockets: what the client sent in time is taken first. */
        jpd_conn_read(s);
        if (s->closing || s->moving || (s->state != JPD_S_HELLO && s->state != JPD_S_RING))
            return;
        if (!s->d->private_mode)
            jpd_log("closing a connection of uid %u: no hello and ring within %u ms",
                    (unsigned)s->peer.uid, (unsigned)jpd_handshake_timeout_ms);
        jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, "no hello and ring within the handshake time");
        return;
    case JPD_S_LIVE:
        jpd_drain_pump(s);
        return;
    case JPD_S_EXCERPTS:
        /* No answer: the profile goes out without excerpts (they render as unavailable). */
        if (!s->d->private_mode)
            jpd_log("run %llu: no excerpts within %u ms", (unsigned long long)s->run_id,
                    (unsigned)jpd_excerpt_timeout_ms);
        jpd_session_feed_stop(s);
        return;
    case JPD_S_DONE:
        jpd_session_close(s); /* the peer did not take its output in time */
        return;
    case JPD_S_TOP:
        /* A watcher holds one of its uid's requests while it watches: not a silent one. */
        jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, "no top request within " JP_STR(JPD_TOP_IDLE_MS)
                                                 " ms");
        return;
    }
}

/* 0, or -EINVAL with the ERROR the client gets in *code and *msg. */
static int check_hello(const struct jp_ctl_msg *m, uint32_t *code, const char **msg)
{
    *code = JP_CTLE_BAD_MESSAGE;
    if (m->u.hello.version != JP_CTL_VERSION) {
        *code = JP_CTLE_UNSUPPORTED_VERSION;
        *msg = "unsupported control protocol version";
        return -EINVAL;
    }
    uint32_t mode = m->u.hello.mode;
    if (mode != JP_MODE_CPU && mode != JP_MODE_MEMORY) {
        *msg = "hello.mode is neither cpu nor memory";
        return -EINVAL;
    }
    if (mode == JP_MODE_CPU &&
        (m->u.hello.rate_hz < JP_RATE_HZ_MIN || m->u.hello.rate_hz > JP_RATE_HZ_MAX)) {
        *msg = "hello.rate_hz is outside " JP_RATE_HZ_RANGE;
        return -EINVAL;
    }
    if (mode == JP_MODE_MEMORY && m->u.hello.rate_hz != 0) {
        *msg = "hello.rate_hz must be 0 in memory mode";
        return -EINVAL;
    }
    if (m->u.hello.threshold_bp > JP_THRESHOLD_BP_MAX) {
        *msg = "hello.threshold_bp is outside 0.." JP_STR(JP_THRESHOLD_BP_MAX);
        return -EINVAL;
    }
    if (m->u.hello.limit < JP_LIMIT_MIN || m->u.hello.limit > JP_LIMIT_MAX) {
        *msg = "hello.limit is outside " JP_LIMIT_RANGE;
        return -EINVAL;
    }
    if (m->u.hello.outputs & ~(uint32_t)JP_OUT_ALL) {
        *msg = "hello.outputs names an unknown output";
        return -EINVAL;
    }
    uint32_t need = mode == JP_MODE_CPU ? JP_CAPS_CPU_REQUIRED : JP_CAPS_MEMORY_REQUIRED;
    if ((m->u.hello.capabilities & need) != need) {
        *msg = "hello.capabilities lack what the mode requires";
        return -EINVAL;
    }
    return 0;
}

static void on_closed(uv_handle_t *h);
static void on_moved(uv_handle_t *h);

/* serve: after its HELLO the session leaves the main loop for a worker's (session.h, Loops). */
static void begin_move(struct jpd_session *s)
{
    s->moving = 1;
    uv_poll_stop(&s->poll);
    uv_timer_stop(&s->timer);
    uv_idle_stop(&s->again);
    uv_close((uv_handle_t *)&s->poll, on_moved);
    uv_close((uv_handle_t *)&s->timer, on_moved);
    uv_close((uv_handle_t *)&s->again, on_moved);
}

static void unlink_session(struct jpd_session *s)
{
    struct jpd_loop *lp = s->lp;
    if (s->prev)
        s->prev->next = s->next;
    else
        lp->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void link_session(struct jpd_loop *lp, struct jpd_session *s)
{
    s->lp = lp;
    s->prev = NULL;
    s->next = lp->sessions;
    if (lp->sessions)
        lp->sessions->prev = s;
    lp->sessions = s;
}

static void adopt(struct jpd_loop *lp, struct jpd_task *t);
static void session_shutdown(struct jpd_session *s);
static void answer_snapshot(struct jpd_session *s);

static void on_moved(uv_handle_t *h)
{
    struct jpd_session *s = h->data;
    if (--s->handles_open > 0)
        return;
    unlink_session(s);
    s->lp = NULL;
    s->move.fn = adopt;
    /* the last the main loop does with it */
    if (s->snap_to)
        jpd_workers_hand_to(s->snap_to, &s->move);
    else
        jpd_workers_hand_over(s->d, &s->move);
}

/* On the worker's thread: the session handed over joins lp and goes on where the main loop
 * left it (frames it already buffered, the rest of its handshake time); shut down at once when
 * the loop is shutting down. */
static void adopt(struct jpd_loop *lp, struct jpd_task *t)
{
    struct jpd_session *s = (struct jpd_session *)(void *)((char *)t -
                                                           offsetof(struct jpd_session, move));
    link_session(lp, s);
    s->moving = 0;
    s->poll_events = 0;
    uv_timer_init(lp->uv, &s->timer);
    uv_idle_init(lp->uv, &s->again);
    s->timer.data = s;
    s->again.data = s;
    if (jpd_conn_attach(s) < 0) {
        /* No way to watch its socket on this loop: it ends here, unanswered. */
        jpd_log("run %llu: cannot watch its connection on a worker",
                (unsigned long long)s->run_id);
        s->handles_open = 2;
        s->closing = 1;
        uid_release(s);
        uv_close((uv_handle_t *)&s->timer, on_closed);
        uv_close((uv_handle_t *)&s->again, on_closed);
        return;
    }
    s->handles_open = 3;
    /* What is left of its handshake time, on the same clock as the main loop's. */
    uint64_t now = uv_hrtime();
    uint64_t left = s->handshake_deadline_ns > now ? s->handshake_deadline_ns - now : 0;
    uv_timer_start(&s->timer, on_timer, (left + 999999u) / 1000000u, 0);
    jpd_conn_resume(s);
    if (s->closing || s->state == JPD_S_DONE)
        return;
    jpd_conn_update_poll(s);
    if (s->state == JPD_S_SNAPSHOT)
        answer_snapshot(s);
    else if (lp->shutting_down)
        session_shutdown(s);
}

static void on_hello(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    uint32_t code;
    const char *msg;
    if (check_hello(m, &code, &msg) < 0) {
        jpd_session_fail(s, code, msg);
        return;
    }
    if (s->d->shutting_down) {
        jpd_session_fail(s, JP_CTLE_SHUTTING_DOWN, "the daemon is shutting down");
        return;
    }
    /* root is capped like any uid: a runaway root job must not take every run slot. */
    if (!s->d->private_mode) {
        struct jpd_uid_use u = jpd_uid_use(s->d, s->peer.uid, 0, 0, 0);
        if (u.runs >= s->d->cfg->max_runs_per_uid) {
            jpd_session_fail(s, JP_CTLE_TOO_MANY_RUNS, "too many concurrent runs for this user");
            return;
        }
        if (u.unread > JPD_MAX_UNREAD_PER_UID) {
            jpd_session_fail(s, JP_CTLE_TOO_MANY_RUNS,
                             "this user's earlier runs left too much output unread");
            return;
        }
    }
    s->mode = m->u.hello.mode;
    s->outputs = m->u.hello.outputs;
    s->run_id = jpd_state_take_run_id(s->d);
    struct jp_ctl_msg w = {.type = JP_CTL_WELCOME};
    w.u.welcome.run_id = s->run_id;
    w.u.welcome.ring_bytes = s->d->private_mode ? UINT64_MAX : s->d->cfg->max_run_ring_bytes;
    if (jpd_conn_send(s, &w) < 0) {
        jpd_session_fail(s, JP_CTLE_INTERNAL, "the daemon could not answer");
        return;
    }
    if (s->closing || s->state == JPD_S_DONE)
        return; /* the peer went away while it was answered: nothing to hand over */
    set_state(s, JPD_S_RING);
    s->counted = 1;
    jpd_uid_use(s->d, s->peer.uid, 1, 0, 0);
    if (s->d->nworkers)
        begin_move(s); /* RING and everything after it is a worker's */
}

static void on_ring(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    uint32_t want = m->u.ring.has_capture ? 2u : 1u;
    if (m->u.ring.has_capture > 1) {
        jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, "ring.has_capture is neither 0 nor 1");
        return;
    }
    if (s->nfds != want) {
        jpd_session_fail(s, JP_CTLE_BAD_RING,
                         s->nfds < want ? "the ring message lacks its file descriptors"
                                        : "more file descriptors than the ring message announces");
        return;
    }
    int ring_fd = jpd_conn_take_fd(s);
    int cap_fd = want == 2 ? jpd_conn_take_fd(s) : -1;
    s->cap_fd[0] = cap_fd;

    uint64_t bytes = (uint64_t)JP_RING_HEADER_SIZE + (uint64_t)m->u.ring.slot_count * JP_SLOT_SIZE;
    const char *bad = NULL;
    if (!s->d->private_mode && bytes > s->d->cfg->max_ring_bytes)
        bad = "the ring is larger than this daemon allows";
    else if (!s->d->private_mode && bytes > s->d->cfg->max_run_ring_bytes)
        bad = JPD_RUN_RING_CAP_REASON; /* the main ring counts toward the run's rings */
    if (bad) {
        close(ring_fd);
        jpd_session_fail(s, JP_CTLE_BAD_RING, bad);
        return;
    }
    const char *why;
    if (jpd_ring_adopt(ring_fd, m->u.ring.slot_count, 0, &s->ring, &why) < 0) {
        jpd_session_fail(s, JP_CTLE_BAD_RING, why);
        return;
    }
    s->ring_mapped = 1;
    jpd_drain_init(s);
    jpd_capture_open(s);
    int r = jp_engine_new(&s->eng);
    if (r < 0) {
        jpd_session_fail(s, JP_CTLE_INTERNAL, "the daemon could not start an engine");
        return;
    }
    /* Hold mode from the first record: a worker ring the client announces may come after the
     * drain met what depends on it (drain.c, the merge). */
    jp_engine_set_hold(s->eng, 1);
    s->run_started = 1;
    s->start_unix_s = (int64_t)time(NULL);
    s->start_ns = uv_hrtime();
    jpd_window_begin(s);
    s->live = (struct jpd_live){.run_id = s->run_id, .uid = s->peer.uid, .pid = s->peer.pid,
                                .mode = s->mode, .start_ns = s->start_ns, .lp = s->lp,
                                .slots = s->ring.slot_count};
    jpd_live_begin(s->d, &s->live);
    set_state(s, JPD_S_LIVE);
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
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE,
                             "an excerpt is longer than 160 bytes or has bad flags");
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
        int r = jpd_drain_feed(s, s->rec, e.h.size, &why);
        if (r == -ENOMEM) { /* the host, not the client: never called a violation */
            jpd_session_fail(s, JP_CTLE_INTERNAL, "the daemon is out of memory");
            return;
        }
        if (r < 0) {
            jpd_session_fail(s, JP_CTLE_PROTOCOL_VIOLATION, why ? why : "bad excerpt");
            return;
        }
    }
    jpd_session_feed_stop(s);
}

/* What a connection may ask instead of starting a run: SHOW, STATUS, RUNS and TOP of a serving
 * daemon; SHOW and TOP of the run of a private daemon, on its watch socket. */
static int may_ask(const struct jpd_session *s, uint32_t type)
{
    if (s->d->private_mode)
        return s->watcher && (type == JP_CTL_SHOW || type == JP_CTL_TOP);
    return type == JP_CTL_SHOW || type == JP_CTL_STATUS || type == JP_CTL_RUNS ||
           type == JP_CTL_TOP;
}

/* SHOW, STATUS and RUNS count against their uid's requests from here until the socket closes:
 * 1 to answer, 0 when the session was failed instead (too many of this uid's requests, or of
 * its output, are waiting to be read). */
static int admit_request(struct jpd_session *s)
{
    s->requested = 1;
    struct jpd_uid_use u = jpd_uid_use(s->d, s->peer.uid, 0, 1, 0);
    if (u.requests > JPD_MAX_REQUESTS_PER_UID) {
        jpd_session_fail(s, JP_CTLE_TOO_MANY_RUNS,
                         "too many requests of this user wait to be read");
        return 0;
    }
    if (u.unread > JPD_MAX_UNREAD_PER_UID) {
        jpd_session_fail(s, JP_CTLE_TOO_MANY_RUNS,
                         "this user's earlier runs left too much output unread");
        return 0;
    }
    return 1;
}

/* SHOW, STATUS or RUNS, admitted: the server's answer, sent, or the error it gave; a SHOW of
 * a run in flight moves to the run's loop to be answered there (answer_snapshot). */
static void answer_request(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    struct jp_ctl_msg r;
    struct jp_buf text = {0};
    const char *why = NULL;
    struct jpd_loop *on = NULL;
    uint64_t run_id = 0;
    uint32_t code = jpd_server_answer(s->d, s->peer.uid, m, &r, &text, &why, &on, &run_id);
    if (!code && on) {
        s->snap_run_id = run_id;
        s->snap_outputs = m->type == JP_CTL_TOP ? 0 : m->u.show.outputs;
        s->snap_rows = m->type == JP_CTL_TOP ? m->u.top.rows : 0;
        s->snap_to = on;
        set_state(s, JPD_S_SNAPSHOT);
        if (on == s->lp)
            answer_snapshot(s);
        else
            begin_move(s);
    } else if (code)
        jpd_session_fail(s, code, why);
    else if (jpd_conn_send(s, &r) < 0)
        jpd_session_fail(s, JP_CTLE_INTERNAL, "the daemon could not answer");
    else
        jpd_session_done(s);
    jp_buf_free(&text);
}

/* On the run's loop, between its drains: the snapshot of the run asked for (watch.c), or a
 * `top` watcher's first frame. The run may have ended on the way here: then the client is
 * told so, and `show` again finds its final profile. */
static void answer_snapshot(struct jpd_session *s)
{
    struct jpd_session *run = jpd_watch_run_of(s);
    if (!run) {
        jpd_session_fail(s, JP_CTLE_NO_SUCH_RUN,
                         "the run ended while its snapshot was asked for: show it again for "
                         "its profile");
        return;
    }
    if (!s->snap_rows) {
        jpd_watch_snapshot(s, run);
        return;
    }
    if (jpd_watch_answer(s, run) == 0) {
        set_state(s, JPD_S_TOP);
        uv_timer_stop(&s->timer);
        uv_timer_start(&s->timer, on_timer, JPD_TOP_IDLE_MS, 0);
    }
}

void jpd_session_msg(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    if (m->type == JP_CTL_ERROR) {
        /* The client gave up: it will not read a result. */
        jpd_session_eof(s);
        return;
    }
    switch (s->state) {
    case JPD_S_HELLO:
        if (m->type == JP_CTL_HELLO && !s->watcher) /* a watcher starts no run */
            on_hello(s, m);
        else if (may_ask(s, m->type) && admit_request(s))
            answer_request(s, m);
        else if (s->requested)
            return; /* refused: admit_request failed the session */
        else
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE,
                             s->watcher ? "a watch connection may ask show or top, nothing else"
                                        : "expected hello");
        return;
    case JPD_S_TOP:
        if (m->type != JP_CTL_TOP || (m->u.top.run_id && m->u.top.run_id != s->snap_run_id)) {
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, "a top connection asks for its run's frames only");
            return;
        }
        s->snap_rows = m->u.top.rows;
        set_state(s, JPD_S_SNAPSHOT);
        answer_snapshot(s); /* on the run's loop already */
        return;
    case JPD_S_RING:
        if (m->type == JP_CTL_RING)
            on_ring(s, m);
        else
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, "expected ring");
        return;
    case JPD_S_LIVE:
        if (s->nfds && m->type != JP_CTL_WORKER_RING) {
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE,
                             "file descriptors sent where none are expected");
            return;
        }
        if (m->type == JP_CTL_FINALIZE && !s->finalize_seen) {
            uint32_t t = m->u.finalize.termination;
            if (t < JP_TERM_RETURNED || t > JP_TERM_INTERRUPTED) {
                jpd_session_fail(s, JP_CTLE_BAD_MESSAGE,
                                 "finalize.termination is out of range");
                return;
            }
            s->finalize_seen = 1;
            s->exports = m->u.finalize.exports;
            uv_timer_start(&s->timer, on_timer, 0, JPD_DRAIN_PERIOD_MS);
        } else if (m->type == JP_CTL_WORKER_RING && !s->finalize_seen) {
            if (s->nfds != 1) {
                jpd_session_fail(s, JP_CTLE_BAD_RING,
                                 s->nfds == 0 ? "the worker_ring message lacks its file descriptor"
                                              : "more file descriptors than worker_ring announces");
                return;
            }
            jpd_drain_add_ring(s, m->u.worker_ring.slot_count, jpd_conn_take_fd(s));
        } else {
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, "expected finalize");
        }
        return;
    case JPD_S_EXCERPTS:
        if (m->type == JP_CTL_EXCERPTS)
            on_excerpts(s, m);
        else
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, "expected excerpts");
        return;
    default:
        return;
    }
}

/* The peer is gone. What happens depends on how far the run got. */
void jpd_session_eof(struct jpd_session *s)
{
    s->eof = 1;
    /* Whatever we still wanted to say can no longer arrive. */
    jpd_conn_drop_output(s);
    switch (s->state) {
    case JPD_S_LIVE:
        /* Drain what the producer left, then a partial profile naming the lost producer. */
        uv_timer_start(&s->timer, on_timer, 0, JPD_DRAIN_PERIOD_MS);
        jpd_conn_update_poll(s);
        return;
    case JPD_S_EXCERPTS:
        jpd_session_feed_stop(s);
        return;
    default:
        jpd_session_close(s);
        return;
    }
}

/* ---- lifetime ---- */

static void on_closed(uv_handle_t *h)
{
    struct jpd_session *s = h->data;
    if (--s->handles_open > 0)
        return;
    struct jpd_daemon *d = s->d;
    struct jpd_loop *lp = s->lp;
    jpd_conn_free(s);
    jpd_capture_close(s);
    jpd_session_unmap_ring(s);
    jpd_live_end(d, &s->live); /* a run ends before its session; this is for safety only */
    jp_report_free(s->report);
    jp_engine_free(s->eng);
    jp_export_base_free(&s->win_base);
    unlink_session(s);
    if (d->private_mode && !s->watcher)
        d->private_run_gone = 1; /* the one run: its daemon ends once its watchers are gone */
    free(s);
    jpd_server_session_gone(d, lp);
}

void jpd_session_close(struct jpd_session *s)
{
    if (s->closing || s->moving)
        return;
    s->closing = 1;
    uid_release(s);
    if (s->state == JPD_S_LIVE)
        set_state(s, JPD_S_DONE);
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
    s->lp = &d->main;
    s->fd = fd;
    s->peer = *peer;
    s->cap_fd[0] = s->cap_fd[1] = -1;
    int r = jpd_conn_open(s);
    if (r < 0) {
        close(fd);
        free(s);
        return r;
    }
    uv_timer_init(d->main.uv, &s->timer);
    uv_idle_init(d->main.uv, &s->again);
    s->timer.data = s;
    s->again.data = s;
    s->handles_open = 3;
    link_session(&d->main, s);
    d->nsessions++;
    *out = s;
    return 0;
}

int jpd_session_start(struct jpd_daemon *d, int fd, const struct jpd_peer *peer, int watcher)
{
    struct jpd_session *s;
    int r = session_new(d, fd, peer, &s);
    if (r < 0)
        return r;
    s->watcher = watcher;
    s->state = JPD_S_HELLO;
    s->handshake_deadline_ns = uv_hrtime() + (uint64_t)jpd_handshake_timeout_ms * 1000000u;
    uv_timer_start(&s->timer, on_timer, jpd_handshake_timeout_ms, 0);
    jpd_conn_update_poll(s);
    return 0;
}

int jpd_session_refuse(struct jpd_daemon *d, int fd, const struct jpd_peer *peer, uint32_t code,
                       const char *message)
{
    struct jpd_session *s;
    int r = session_new(d, fd, peer, &s);
    if (r < 0)
        return r;
    s->watcher = d->private_mode; /* a private daemon refuses only would-be watchers */
    s->state = JPD_S_HELLO;
    jpd_session_fail(s, code, message);
    return 0;
}

/* SIGTERM: the session ends now; a run in flight is delivered as partial `interrupted`. */
static void session_shutdown(struct jpd_session *s)
{
    if (s->closing || s->moving || s->state == JPD_S_DONE)
        return; /* a moving session is shut down by the worker that adopts it */
    if (s->state == JPD_S_LIVE || s->state == JPD_S_EXCERPTS) {
        /* Drain what is in the ring now, then deliver the run as interrupted. */
        if (jpd_drain_now(s) < 0)
            return;
        jpd_result_finish(s, JP_END_SHUTDOWN, !s->eof);
        return;
    }
    jpd_session_fail(s, JP_CTLE_SHUTTING_DOWN, "the daemon is shutting down");
}

void jpd_session_shutdown_loop(struct jpd_loop *lp, struct jpd_task *t)
{
    (void)t;
    lp->shutting_down = 1;
    /* session_shutdown never frees (only close callbacks do), so next stays valid. */
    for (struct jpd_session *it = lp->sessions; it;) {
        struct jpd_session *next = it->next;
        session_shutdown(it);
        it = next;
    }
}
