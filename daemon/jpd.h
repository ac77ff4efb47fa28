/* jettprofd internals: the types and limits of the daemon object shared by private and
 * long-lived mode. The functions are declared by part, each with the file that defines it:
 * server.h (server.c, signals.c, workers.c, kept.c, state.c), session_api.h (the session part
 * as the server sees it) and session.h (its inside), status.h, commands.h (the client and
 * offline commands), util.h, push.h, systemd.h. Nothing here is an interface to another part;
 * the wire and the files the daemon writes are (protocol/, the runs log and summary rows
 * documented in kept.c and offline.c).
 */
#ifndef JETTPROF_DAEMON_JPD_H
#define JETTPROF_DAEMON_JPD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "common/buf.h"
#include "common/json.h"
#include "engine/engine.h"
#include "protocol/capture.h"
#include "protocol/control.h"
#include "protocol/records.h"
#include "protocol/ring.h"
#include "render/report.h"

#define JPD_MAX_PENDING_FDS 4u    /* fds received but not yet claimed by a RING message */
#define JPD_HANDSHAKE_MS 3000u    /* HELLO + RING must arrive within this (an agent sends both
                                   * at once): a silent connection holds a slot no longer */
#define JPD_FLUSH_MS 5000u        /* a peer that does not read its RESULT is dropped after */
#define JPD_TOP_IDLE_MS 120000u   /* a watcher (top) that asks nothing for this long is dropped
                                   * (top asks at least once a minute) */
#define JPD_EXCERPT_MS 10000u     /* a runtime that does not answer EXCERPT_REQUEST: render
                                   * without excerpts after this */
#define JPD_MAX_CLIENT_FRAME (1u << 21) /* clients send small frames (the largest: EXCERPTS of
                                         * 4096 items of <= 160 bytes); a hostile one cannot
                                         * make us buffer the 16 MiB protocol maximum */
#define JPD_MAX_SMALL_FRAME 4096u /* every frame but EXCERPTS (HELLO, SHOW, RING, FINALIZE) is
                                   * a few dozen bytes: the bound until EXCERPT_REQUEST */
#define JPD_MAX_BUFFERED (64u << 20) /* bytes of unfinished frames over all connections; past
                                      * it the connection that adds more is closed */
#define JPD_DRAIN_PERIOD_MS 1u
#define JPD_DRAIN_PERIOD_MAX_MS 16u /* a nearly idle ring (a CPU run at <= 1000 Hz) backs off
                                    * to this */
#define JPD_DRAIN_SLICE 32768u    /* records per session per loop turn: fairness between runs */
#define JPD_DRAIN_SLICE_ALONE 262144u /* ... when only one run is live */
#define JPD_RELEASE_SLOTS 2048u   /* a drain releases the slots it consumed at least this often */
#define JPD_TIME_MARK_MS 10u      /* the daemon marks time in a run's stream at most this often
                                   * (the timeline's first stretch: engine/timeline.c) */
#define JPD_HOLD_MS 1000u         /* a held record is judged after this long, once enough passes
                                   * went by (daemon/drain.c, "The merge") */
#define JPD_STOP_DRAIN_MS 2000u   /* after SIGTERM, the runs in flight are drained for at most
                                   * this long together, then delivered with what they have */
#define JPD_KEEP_RUNS 64u         /* finished runs kept for `show` in long-lived mode */
#define JPD_KEEP_BYTES (8u << 20) /* ... and the most bytes of rendered text they may hold */
#define JPD_MAX_SESSIONS 1024u    /* connections of all users, counted at accept */
#define JPD_MAX_PREHELLO 256u     /* connections that have not said HELLO (or SHOW) yet */
#define JPD_MAX_PREHELLO_PER_UID 32u /* ... of one uid: a user holding silent connections can
                                      * take neither every slot nor another user's place */
#define JPD_MAX_REQUESTS_PER_UID 16u /* SHOW, STATUS and RUNS of one uid until their sockets
                                      * close: unread answers hold no one else's slot */
#define JPD_MAX_UNREAD_PER_UID (64ull << 20) /* output bytes one uid may leave unread before
                                              * its new runs and requests are refused */
/* All exports of one run together (serve --max-export-bytes): a deep, wide stack tree can
 * make a folded or SVG export hundreds of times its profile. The private daemon serves only
 * its own user and takes what the agent accepts of one export. */
#define JPD_DEFAULT_MAX_EXPORT_BYTES (16ull << 20)

#define JPD_MAX_WORKERS 256u       /* --workers N: 1..this; default the online CPUs */

struct jpd_push;
struct jpd_push_opts;

struct jpd_config {
    const char *socket_path;  /* serve: NULL = default */
    uint32_t workers;         /* serve: drain threads, 0 = one per online CPU */
    const char *capture_dir;  /* NULL: capture only when the client passes a capture fd */
    const char *state_dir;    /* NULL: kept runs and run ids live in memory only */
    uint64_t capture_max_bytes; /* capture dir: most bytes of captures kept; 0: no cap */
    uint64_t capture_max_age_s; /* capture dir: oldest capture kept, seconds; 0: no cap */
    const char *runs_log;     /* NULL: no runs log */
    int allow_group;          /* -1: none */
    uint32_t max_runs_per_uid;
    uint64_t max_ring_bytes;      /* the largest one ring (main or worker) may be */
    uint64_t max_run_ring_bytes;  /* all of one run's rings together (serve; private: none) */
    uint64_t max_cpu_budget;       /* ceiling on a run's cpu_budget_bytes */
    uint64_t max_retention_budget; /* ceiling on a run's retention_budget_bytes */
    uint64_t max_export_bytes;     /* all of one run's exports together, > 0 (result.c) */
    const struct jpd_push_opts *push; /* serve --push and --label (push.h); NULL: none */
    uint32_t push_interval_s;      /* serve --push-interval: windows of runs in flight; 0: one
                                    * push per finished run (window.c) */
};

struct jpd_kept {
    uint64_t run_id;
    uid_t uid;
    uint32_t status;
    char reason[40];
    char *human; size_t human_len;
    char *toon; size_t toon_len;
};

/* One finished run as the runs log has it (a row of --runs-log). Built on the run's loop, posted
 * by value to the main loop, which writes it. */
#define JPD_PROGRAM_MAX 256u
struct jpd_run_row {
    uint64_t run_id;
    pid_t pid;
    uid_t uid;
    uint32_t ending, status;
    struct jp_engine_summary sum;
    int64_t start_unix_s; /* wall clock (CLOCK_REALTIME) when the ring was mapped; 0: unknown */
    uint64_t duration_ms; /* monotonic, from then to the run's end */
    char reason[64];
    /* The run's program: the logical path (relative, as the report prints paths) of the first
     * project source the runtime defined; "" when it defined none. */
    char program[JPD_PROGRAM_MAX];
};

/* One live run as `jettprofd status` sees it (status.c). The run's loop writes the figures
 * and the main loop reads them, each only under d->live_mu: the mutex orders every write
 * before every later read (release on unlock, acquire on lock), so a reader never sees a torn
 * or stale-beyond-one-drain figure. Listed from the ring's mapping to the run's end. */
struct jpd_live {
    struct jpd_live *prev, *next;
    int listed;
    uint64_t run_id;
    uid_t uid;
    pid_t pid;
    uint32_t mode;
    uint64_t start_ns;  /* uv_hrtime() */
    struct jpd_loop *lp; /* the loop the run is drained on: where its snapshot is built */
    uint64_t records;   /* fed to the engine so far */
    uint64_t fill, slots; /* the fullest ring's fill at the last drain, of its slot_count */
    uint64_t waits;     /* times the drain woke the producer sleeping for room */
    uint64_t lost, wait_ns; /* the producer's gauges at the last drain (ring.h: advisory) */
    uint64_t cap_waits, cap_wait_ns; /* the drain's waits for the capture compressor */
    uint64_t live_bytes, allocations, samples; /* the engine's at the last drain (memory:
                                                * bytes live now, allocations; CPU: samples) */
    uint32_t sources_seen;  /* engine sources looked at for the program so far */
    char program[JPD_PROGRAM_MAX]; /* the run's first project source, "" until one is known */
};

struct jpd_session;
struct jpd_post;

/* What one uid holds of a serving daemon, each counted until the socket it belongs to is
 * closed (not merely until the run or request is over), so a user who never reads its results
 * holds them against its own caps and no one else's:
 *   runs      from an accepted HELLO (--max-runs-per-uid);
 *   requests  SHOW, STATUS and RUNS from the request (JPD_MAX_REQUESTS_PER_UID);
 *   unread    bytes queued for its sessions and not yet taken by the socket: encoded messages
 *             and the rendered exports being sent (a new run or request is refused while it is
 *             past JPD_MAX_UNREAD_PER_UID). */
struct jpd_uid_use {
    uint32_t runs, requests;
    uint64_t unread;
};

/* One event loop and the sessions on it. The main loop (accept, signals, every connection until
 * its HELLO is accepted, SHOW, and in private mode the one run) is the daemon's; in `serve` each
 * worker thread runs its own loop, and a run belongs to one worker for its life (workers.c).
 * Everything here but the fields marked otherwise is touched only by the loop's own thread. */
/* Work handed to a worker's loop (workers.c): fn runs on that loop's thread, in the order the
 * tasks were queued. A task is embedded in what it concerns (a session's hand-over, a loop's
 * shutdown), so queueing one never allocates and never fails. */
struct jpd_loop;
struct jpd_task {
    struct jpd_task *next;
    void (*fn)(struct jpd_loop *lp, struct jpd_task *t);
};

struct jpd_loop {
    struct jpd_daemon *d;
    uv_loop_t *uv;
    struct jpd_session *sessions; /* this loop's sessions, doubly linked (session.c) */
    uint32_t live_runs;           /* of them, in the live (draining) state */
    /* Workers only (workers.c). */
    uv_loop_t own;
    pthread_t thread;
    int started;                  /* the thread runs (joined at exit) */
    uv_async_t wake;              /* main -> worker: look at the fields under mu */
    pthread_mutex_t mu;           /* guards inbox and quit */
    struct jpd_task *inbox, *inbox_tail; /* queued by the main loop, not run yet */
    int quit;
    struct jpd_task stop;         /* SIGTERM's task for this worker (jpd_workers_shutdown) */
    int shutting_down;            /* the loop's own: its sessions were shut down (session.c) */
    uint32_t assigned;            /* atomic: runs handed here and not yet freed (balancing) */
};

struct jpd_daemon {
    uv_loop_t *loop;       /* the main loop (main.uv) */
    struct jpd_loop main;
    const struct jpd_config *cfg;
    int private_mode;
    int shutting_down;
    uint64_t stop_drain_until_ns; /* set by jpd_server_stop before any session is shut down
                                   * (workers read it after their shutdown ask, under w->mu) */
    int exit_code;
    uid_t self_uid;

    uv_poll_t listen;
    int listen_fd;
    int listen_active;     /* poll handle initialised and not yet closed */
    uv_timer_t accept_retry; /* after EMFILE: stop polling the listener for a moment */
    int accept_retry_active;
    char *created_socket;  /* a path we bound and must unlink at exit */
    int private_run_gone;  /* private mode: the run's session is freed (watchers may remain) */

    uv_signal_t sigterm, sigint, sighup; /* signals.c */
    int signals_active;

    /* Sessions of every loop, counted at accept on the main loop (session.c) and off when one
     * is freed: on the main loop at once, on a worker through the post below. Main loop only. */
    uint32_t nsessions;
    uint64_t next_run_id; /* the run id the next HELLO gets (main loop) */
    uint64_t run_id_saved; /* with --state-dir: every id handed out is below the saved id */
    size_t buffered;      /* bytes of unfinished frames in every session's decoder: atomic
                           * (relaxed: a bound, not a synchronisation) */

    /* serve: the worker pool and what workers post back to the main loop (workers.c). */
    pthread_t main_thread;
    struct jpd_loop *workers;
    uint32_t nworkers;    /* 0: everything on the main loop (private mode) */
    uv_async_t post;      /* worker -> main: look at the fields under post_mu */
    int post_active;
    pthread_mutex_t post_mu; /* guards posts and gone */
    struct jpd_post *posts, *posts_tail; /* what was posted to the main loop, in order */
    uint32_t gone;        /* sessions freed on workers, not yet counted off nsessions */
    void (*sessions_gone)(struct jpd_daemon *d, uint32_t n); /* where gone goes (server.c) */
    int workers_stopping; /* main loop: the workers were told to quit */
    /* What each uid holds of the daemon (struct jpd_uid_use), for its caps: an entry per uid
     * with a run, a request or unread output, on whichever loop; guarded by flights_mu. Each
     * entry has at least one session, and sessions are capped at JPD_MAX_SESSIONS. */
    pthread_mutex_t flights_mu;
    struct jpd_flight { uid_t uid; struct jpd_uid_use use; } flights[JPD_MAX_SESSIONS];
    uint32_t nflights;

    /* What `jettprofd status` reports (status.c), all guarded by live_mu. */
    pthread_mutex_t live_mu;
    struct jpd_live *live;  /* runs in flight, on any loop */
    uint64_t start_ns;      /* uv_hrtime() at start (main loop, set once before workers) */
    uint64_t runs_started, runs_finished, runs_refused, records_total;

    /* The last JPD_KEEP_RUNS finished runs' rows, for `jettprofd runs` (main loop only):
     * recent[(nrecent - 1) % JPD_KEEP_RUNS] is the newest. */
    struct jpd_run_row recent[JPD_KEEP_RUNS];
    uint64_t nrecent;

    int runs_log_fd;      /* -1 when none */
    int capture_dir_fd;   /* -1 when none */
    int state_dir_fd;     /* --state-dir, -1 when none (state.c) */

    struct jpd_kept kept[JPD_KEEP_RUNS];
    uint32_t kept_next;

    /* serve --push: the push thread and its queue (push.h; its own lock), NULL without. */
    struct jpd_push *push;
};

/* Who is at the other end of a session's socket (SO_PEERCRED). */
struct jpd_peer {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};

#endif
