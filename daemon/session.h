/* What the files of one client session share: the session object, its states, and the calls
 * between the five files that each do one of its jobs:
 *   session.c  the state machine (hello, ring, finalize, excerpts, eof, close) and lifetime
 *   conn.c     the connection: recvmsg with fds, the control-frame decoder and its bounds,
 *              the output queue, the limits on connections before hello
 *   drain.c    ring -> engine: the drain, its slice budgets, the drain timer's period, the
 *              idle handle that brings a busy ring back on the next loop turn
 *   capture.c  the session's capture writers and what happens when one fails
 *   result.c   the end of a run: render, log, keep, deliver
 *   watch.c    answers from a live run's own loop: `show`'s snapshot, `top`'s frames, its end
 *   window.c   serve --push: the run's windows (--push-interval) or its one profile
 * Only these files include this header; the server sees a session through jpd.h, and a
 * session reaches the daemon's services only through the calls jpd.h marks "for sessions".
 *
 * Lifetime: a session is created on accept (or from --session-fd), owns its socket, its ring
 * mapping, its engine and its capture writers, and is freed only in the close callback of its
 * last libuv handle (a uv_poll_t on the socket, a uv_timer_t and a uv_idle_t).
 *
 * Loops: a session lives on one loop at a time (s->lp) and is touched only by that loop's
 * thread. In `serve` it starts on the main loop and, once its HELLO is accepted, moves to a
 * worker's for the rest of its life: its three handles are closed on the main loop (moving),
 * the session queues its own hand-over task to a worker (jpd_workers_hand_over), and the
 * worker runs it: it opens new handles on its own loop (adopt, session.c) and goes on with the
 * frames the main loop had already read. The queue's mutex orders everything the main loop
 * wrote before the hand-over before anything the worker reads after it; the main loop never
 * touches the session again. Everything the client sends is untrusted: control frames go through the strict decoder, passed fds are
 * counted and bounded, ring records are copied out and bounded before anything looks at them.
 * A client can end only its own session.
 *
 * States:
 *   HELLO   -> HELLO accepted, WELCOME sent              -> RING
 *   RING    -> ring mapped (and capture opened)          -> LIVE
 *   LIVE    -> FINALIZE (or EOF, or SIGTERM)             -> draining to RUN_STOP
 *   holding RUN_STOP, EXCERPT_REQUEST sent               -> EXCERPTS
 *   EXCERPTS-> EXCERPTS fed, RUN_STOP fed, RESULT sent   -> DONE (flush, then close)
 *
 * Re-entrancy: sending may find the peer gone and end the run, and a DONE session may close
 * while its output is flushed; so after any call below that sends, fails or finishes, callers
 * look at s->state, s->closing and s->eof before touching the session again.
 */
#ifndef JETTPROF_DAEMON_SESSION_H
#define JETTPROF_DAEMON_SESSION_H

#include "jpd.h"
#include "render/export/export.h"
#include "server.h"
#include "session_api.h"
#include "status.h"
#include "util.h"

enum {
    JPD_S_HELLO,
    JPD_S_RING,
    JPD_S_LIVE,
    JPD_S_EXCERPTS,
    JPD_S_SNAPSHOT, /* a SHOW or TOP of a live run, on its way to the run's loop to be answered there */
    JPD_S_TOP,      /* a watcher of a live run, on its loop: answered, waiting for its next TOP */
    JPD_S_DONE,  /* nothing more is read; pending output is flushed, then the session closes */
};

/* One queued message. An export is queued whole but travels as EXPORT pieces of at most
 * jpd_export_chunk_bytes data bytes, the next piece encoded only once the one before it is
 * written: the daemon holds the rendered export and one piece, never all its pieces at once. */
struct jpd_out {
    struct jpd_out *next;
    size_t len, off;
    uint8_t *buf;         /* the encoded message being written */
    char *x_data;         /* an export's rendered bytes (owned), or NULL */
    size_t x_len, x_off;  /* its size and the bytes already encoded into pieces */
    uint32_t x_format, x_error;
};

/* One of a run's record streams as the merge sees it (drain.c): the main ring (RING), or a
 * registered thread's worker ring (WORKER_RING). */
/* Why a run whose rings together pass --max-run-ring-bytes fails (bad_ring). */
#define JPD_RUN_RING_CAP_REASON "the run's rings exceed this daemon's cap (--max-run-ring-bytes)"

struct jpd_stream {
    struct jp_ring *ring;    /* &s->ring for the main stream, &own for a worker ring */
    struct jp_ring own;
    struct jp_rec_exec exec; /* the identity this stream's next records run under: its last
                              * EXEC, unavailable before any */
    uint64_t limit;          /* slots this pass may take (worker rings: the fill read before
                              * the main ring was drained) */
    uint32_t held;           /* 0, or 1 + the complete passes its next record was handed back
                              * through (JP_ENGINE_HELD) */
    uint64_t held_at;        /* the ring index of that record: held elsewhere starts again */
    uint64_t held_ns;        /* when that record was first handed back (uv_hrtime) */
    int worker;
};

struct jpd_session {
    struct jpd_daemon *d;
    struct jpd_loop *lp;      /* the loop it lives on; NULL while handed over */
    struct jpd_task move;     /* its hand-over to a worker (jpd_workers_hand_over) */
    /* JPD_S_SNAPSHOT: the run whose snapshot was asked for, the outputs asked, and the loop
     * the run lives on (the request moves there to be answered) */
    uint64_t snap_run_id;
    uint32_t snap_outputs;
    uint32_t snap_rows;       /* TOP's rows; 0 for a SHOW */
    int watcher;              /* accepted on a private daemon's watch socket (server.c) */
    struct jpd_loop *snap_to;
    struct jpd_session *prev, *next;
    uv_poll_t poll;
    uv_timer_t timer;
    uv_idle_t again;    /* "drain again on the next loop turn" (see jpd_drain_pump) */
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
    int moving;         /* leaving the main loop for a worker: its handles are closing */
    int counted;        /* counted in its uid's runs (jpd_uid_use) until its socket closes */
    int requested;      /* counted in its uid's requests likewise (SHOW, STATUS, RUNS) */
    uint64_t handshake_deadline_ns; /* uv_hrtime() by which HELLO and RING must be in */
    int64_t start_unix_s;   /* wall clock when the run started (its ring mapped) */
    uint64_t start_ns;      /* uv_hrtime() then */
    uint64_t mark_ns;       /* uv_hrtime() of the last time mark fed (drain.c) */
    struct jpd_live live;   /* what `status` sees of the run while it is live */
    struct jpd_peer peer;
    uint64_t run_id;
    struct jp_ctl_decoder *dec; /* NULL once DONE: nothing more is decoded */
    size_t buffered;            /* this decoder's share of d->buffered */
    int fds[JPD_MAX_PENDING_FDS];
    unsigned nfds;
    uint32_t mode, outputs;
    uint32_t exports;   /* FINALIZE's 1u << JP_EXPORT_*: rendered and sent before RESULT */
    struct jp_ring ring;
    int ring_mapped;
    struct jp_engine *eng;
    /* The run's one report: built when the daemon asks for excerpts (its hot lines are the
     * keys), rebound to the engine's fresh view when the run finishes; NULL before that. */
    struct jp_report *report;
    struct jp_capture_writer *cap[2]; /* [0] the client's capture fd, [1] the capture dir's */
    struct jpd_cstream *cap_out[2];   /* where each writer's blocks go (compress.h) */
    int cap_fd[2];
    uint64_t cap_waits_done, cap_wait_ns_done; /* of the captures already closed */
    int cap_errno;        /* why the client's capture ended early (0: it did not); reported
                           * in RESULT, the profile itself is unaffected */
    char cap_name[96];    /* the capture dir's file, removed if its capture fails */
    struct jpd_out *out_head, *out_tail;
    size_t out_bytes;     /* what the queue holds: encoded messages and exports' rendered bytes */
    uint64_t fed;
    uint64_t last_found;  /* slots the last drain found waiting in the ring */
    uint32_t period_ms;   /* the drain timer's current repeat, JPD_DRAIN_PERIOD_MS.._MAX_MS */
    uint32_t stop_len;
    /* The merge (drain.c): the main stream, the worker rings (index i + 1 is wr[i]), the
     * identity the engine has now, the EXEC records the merge injected (they count in the
     * records, so RUN_STOP's record_count is raised by as many), complete passes in a row that
     * took nothing while a record was held, and the bytes of all the run's rings. */
    struct jpd_stream main_st;
    struct jpd_stream *wr[JP_CTL_MAX_WORKER_RINGS];
    uint32_t nwr, wr_next;
    struct jp_rec_exec eng_exec;
    uint64_t injected;
    uint32_t idle_passes;
    int final_drain;      /* jpd_drain_now: the socket is not waited for (the run is ending) */
    uint64_t ring_bytes;
    uint64_t last_slots;  /* slot_count of the ring last_found was found in */
    /* serve --push (window.c): the window going on (its start on both clocks), the run's
     * counts at the last cut (win_taken: there was one), the next cut's time (0: none), and
     * the wall clock less the monotonic one when it was scheduled. */
    struct jp_export_base win_base;
    int win_taken;
    uint64_t win_from_mono, win_next_mono;
    int64_t win_from_wall, win_offset;
    uint8_t stop_rec[JP_REC_MAX_SIZE];
    uint8_t rec[JP_REC_MAX_SIZE];
};

/* session.c */
/* Puts the session in DONE: no more input is read; it closes once its output is written or
 * JPD_FLUSH_MS passed, whichever comes first. */
void jpd_session_done(struct jpd_session *s);
/* Ends the session with ERROR{code, message}. A run that already started is logged. */
void jpd_session_fail(struct jpd_session *s, uint32_t code, const char *message);
/* The peer is gone (EOF, reset, a write that cannot arrive, or its ERROR). */
void jpd_session_eof(struct jpd_session *s);
/* Closes the handles now; the session is freed in the last close callback. */
void jpd_session_close(struct jpd_session *s);
/* One decoded control message from the peer. */
void jpd_session_msg(struct jpd_session *s, const struct jp_ctl_msg *m);
/* The drain found the ring empty, or holds the stream's RUN_STOP: the run goes on, asks for
 * excerpts, is fed its stop, or ends (its producer lost, or its RUN_STOP never came). */
void jpd_session_drained(struct jpd_session *s);
/* RUN_STOP is held and FINALIZE seen: ask the runtime for the hot lines' excerpts. */
void jpd_session_begin_excerpts(struct jpd_session *s);
/* Feeds the held RUN_STOP and finishes the run. */
void jpd_session_feed_stop(struct jpd_session *s);
void jpd_session_unmap_ring(struct jpd_session *s);

/* window.c */
/* The run started: its first window starts now (and, with --push-interval, the schedule). */
void jpd_window_begin(struct jpd_session *s);
/* After a drain: the window is cut and pushed when its time has come. */
void jpd_window_tick(struct jpd_session *s);
/* The run has its final report (s->report): its last window, or its one profile, pushed. */
void jpd_window_end(struct jpd_session *s);

/* watch.c */
/* On s's loop: the live run there whose snapshot s asks for (s->snap_run_id), or NULL when it
 * has ended (or is not on this loop). */
struct jpd_session *jpd_watch_run_of(struct jpd_session *s);
/* On run's loop: the snapshot of run (its profile of the records its engine has taken, with
 * s->snap_outputs) sent to s as RESULT, and s is done; or s failed with why it cannot have one. */
void jpd_watch_snapshot(struct jpd_session *s, struct jpd_session *run);
/* On run's loop: the frame of run for watcher w (TOP_FRAME, w->snap_rows rows), sent: 0, and
 * w waits in JPD_S_TOP for its next TOP; -1 when w was failed instead (out of memory fails the
 * watcher, never the run). */
int jpd_watch_answer(struct jpd_session *w, struct jpd_session *run);
/* The run has its final profile (out): each of its watchers gets it as RESULT (the human
 * text) and is done. */
void jpd_watch_run_ended(struct jpd_session *run, const struct jp_rendered *out);

/* conn.c */
/* The decoder (bounded to JPD_MAX_SMALL_FRAME until excerpts are asked for) and the poll
 * handle on s->fd. 0 or -errno; on failure nothing is left to free (s->fd is the caller's). */
int jpd_conn_open(struct jpd_session *s);
/* The poll handle on s->fd on the session's (new) loop, for an adopted session. 0 or -errno. */
int jpd_conn_attach(struct jpd_session *s);
/* Reads what the socket holds now (non-blocking) and handles every whole frame. */
void jpd_conn_read(struct jpd_session *s);
/* Handles the frames the decoder already holds (read on the loop the session came from). */
void jpd_conn_resume(struct jpd_session *s);
/* 1 when every byte the client sent so far has been read and its whole frames taken: the
 * socket holds nothing unread, or it reached its end, or FINALIZE came (after which no frame
 * can add a ring). The merge asks before it takes a held record for a violation: a worker
 * ring announced before the record was written is then known. */
int jpd_conn_all_read(const struct jpd_session *s);
/* Frees what jpd_conn_open made and closes s->fd, pending fds and queued output. */
void jpd_conn_free(struct jpd_session *s);
/* Watches the socket for what the session wants now (input until DONE, output while queued). */
void jpd_conn_update_poll(struct jpd_session *s);
/* Queues one message and writes what the socket takes. 0 or -errno (-ENOMEM). May end the
 * run (the peer is gone) or close a DONE session: see Re-entrancy above. */
int jpd_conn_send(struct jpd_session *s, const struct jp_ctl_msg *m);
/* Queues export `format`: its rendered bytes data[len] (taken, freed by the queue; NULL with
 * len 0 for a failed or empty export, error the errno that kept it from being rendered), sent
 * as EXPORT pieces as the socket takes them. 0 or -errno (-ENOMEM: data freed). */
int jpd_conn_send_export(struct jpd_session *s, uint32_t format, uint32_t error, char *data,
                         size_t len);
/* Writes queued output; closes a DONE session once all of it is out. */
void jpd_conn_flush(struct jpd_session *s);
/* Drops queued output: it can never arrive. */
void jpd_conn_drop_output(struct jpd_session *s);
/* Nothing more is decoded: frees the decoder and gives back its buffered bytes. */
void jpd_conn_end_input(struct jpd_session *s);
/* EXCERPTS, the one large frame a client sends, may come now (up to JPD_MAX_CLIENT_FRAME). */
void jpd_conn_allow_excerpts(struct jpd_session *s);
/* The oldest fd the peer passed and the session has not claimed: the session owns it now.
 * -ENOENT when there is none. */
int jpd_conn_take_fd(struct jpd_session *s);

/* drain.c */
/* Drains one slice from the ring and decides what comes next (on the drain timer). */
void jpd_drain_pump(struct jpd_session *s);
/* Drains what is in the ring now, bounded by its size (a live producer cannot keep us here).
 * 0, or -errno after the session was failed for it. */
int jpd_drain_now(struct jpd_session *s);
/* Feeds a time mark (JP_REC_TIME) when JPD_TIME_MARK_MS have passed since the last (always:
 * whenever the engine may take one), counted as injected. */
void jpd_drain_mark_time(struct jpd_session *s, int always);
/* The main stream's merge state, once its ring is mapped. */
void jpd_drain_init(struct jpd_session *s);
/* WORKER_RING: maps a registered thread's own ring into the run (ring_fd is taken); a ring
 * past the caps WELCOME gave, or a bad one, fails the run. */
void jpd_drain_add_ring(struct jpd_session *s, uint32_t slot_count, int ring_fd);
/* Maps a ring fd a client handed over (taken: closed on failure) after checking it against
 * the slot count its message announced (worker: a WORKER_RING's, else RING's). 0, or -EPROTO
 * with *why the reason the run ends with. */
int jpd_ring_adopt(int fd, uint32_t slot_count, int worker, struct jp_ring *out, const char **why);
/* Unmaps and frees the worker rings (jpd_session_unmap_ring calls it). */
void jpd_drain_unmap_workers(struct jpd_session *s);
/* One record (a copy the daemon owns) into the engine and the captures. 0 or the engine's
 * -errno with *why. */
int jpd_drain_feed(struct jpd_session *s, const void *rec, uint32_t len, const char **why);

/* capture.c */
/* Starts the run's captures: on the client's fd in s->cap_fd[0] (if it passed one) and in
 * the daemon's capture directory (if it keeps one). One that cannot be had is reported (in
 * RESULT or the log); the run goes on either way. */
void jpd_capture_open(struct jpd_session *s);
/* Writes one record to each capture still going; one that fails stops alone. */
void jpd_capture_write(struct jpd_session *s, const void *rec, uint32_t len);
/* Flushes and closes the captures (a stream without RUN_STOP reads as missing_stop_event). */
void jpd_capture_close(struct jpd_session *s);
/* Feeds up to n event slots of the ring at q (n >= 1) to the engine through the run's capture:
 * they are copied once into the capture's pending block, the engine is fed from that copy
 * (jp_engine_feed_slots) and the ones it took are the capture's next records, in each of the
 * run's captures. *fed: slots fed (it may stop before n at the block's end: call again).
 * Returns the engine's result (0, 1: it declined slot *fed, -ENOMEM), or 2 when no slot was
 * fed because the capture failed (capture_failed has run: feed them without it). */
int jpd_capture_feed_slots(struct jpd_session *s, const uint8_t *q, uint64_t n, uint64_t *fed);
/* How often and how long in all the drain waited for the compressor (both captures). */
void jpd_capture_waits(struct jpd_session *s, uint64_t *waits, uint64_t *wait_ns);

/* result.c */
/* Ends a run that has an engine: render, account, hand the profile to whoever can still take
 * it. deliver: the client is there and gets a RESULT. */
void jpd_result_finish(struct jpd_session *s, uint32_t ending, int deliver);
/* The run ends now: it leaves the live runs (jpd_live_end) and its runs-log row is made in
 * *row: the session's identity and times, the program from its engine's sources (when it has
 * an engine). */
void jpd_result_row(struct jpd_session *s, uint32_t ending, const struct jp_engine_summary *sum,
                    const char *reason, uint32_t status, struct jpd_run_row *row);
/* The RESULT message of a rendered profile: its status and reason, and of its texts the ones
 * outputs (JP_OUT_HUMAN, JP_OUT_TOON) names, "" for the others; m points into out. */
void jpd_result_msg(const struct jp_rendered *out, uint32_t outputs, struct jp_ctl_msg *m);

#endif
