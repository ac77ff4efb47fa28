/* jettprofd internals: the daemon object shared by private and long-lived mode, sessions, the
 * offline commands, and small helpers. Nothing here is an interface to another part; the wire
 * and the files the daemon writes are (protocol/, the runs log and summary rows documented in
 * offline.c and server.c).
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
#include "daemon/engine/engine.h"
#include "protocol/capture.h"
#include "protocol/control.h"
#include "protocol/records.h"
#include "protocol/ring.h"
#include "render/report.h"

#define JPD_MAX_PENDING_FDS 4u    /* fds received but not yet claimed by a RING message */
#define JPD_HANDSHAKE_MS 3000u    /* HELLO + RING must arrive within this (an agent sends both
                                   * at once): a silent connection holds a slot no longer */
#define JPD_FLUSH_MS 5000u        /* a peer that does not read its RESULT is dropped after */
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
/* The contract's metadata budgets per run: the most a run gets unless the operator of `serve`
 * sets a lower or higher ceiling. A client's RUN_START may only lower them. */
#define JPD_DEFAULT_CPU_BUDGET (32ull << 20)
#define JPD_DEFAULT_RETENTION_BUDGET (64ull << 20)
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
    uint64_t max_ring_bytes;
    uint64_t max_cpu_budget;       /* ceiling on a run's cpu_budget_bytes */
    uint64_t max_retention_budget; /* ceiling on a run's retention_budget_bytes */
    uint64_t max_export_bytes;     /* all of one run's exports together, > 0 (result.c) */
    const struct jpd_push_opts *push; /* serve --push and --label (push.h); NULL: none */
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
    uint64_t records;   /* fed to the engine so far */
    uint64_t fill, slots; /* the ring's fill level at the last drain, of slot_count */
    uint64_t waits;     /* times the drain woke the producer sleeping for room */
    uint64_t lost, wait_ns; /* the producer's gauges at the last drain (ring.h: advisory) */
    uint64_t cap_waits, cap_wait_ns; /* the drain's waits for the capture compressor */
    uint32_t sources_seen;  /* engine sources looked at for the program so far */
    char program[JPD_PROGRAM_MAX]; /* the run's first project source, "" until one is known */
};

struct jpd_session;
struct jpd_session_ops;
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
    pthread_mutex_t mu;           /* guards inbox, shutdown and quit */
    struct jpd_session *inbox;    /* handed over by the main loop, not adopted yet */
    int shutdown, quit;
    int shut_done;                /* the worker's own: its sessions were shut down */
    uint32_t assigned;            /* atomic: runs handed here and not yet freed (balancing) */
};

struct jpd_daemon {
    uv_loop_t *loop;       /* the main loop (main.uv) */
    struct jpd_loop main;
    const struct jpd_config *cfg;
    const struct jpd_session_ops *ops; /* what sessions may ask of the daemon (server.c) */
    int private_mode;
    int shutting_down;
    int exit_code;
    uid_t self_uid;

    uv_poll_t listen;
    int listen_fd;
    int listen_active;     /* poll handle initialised and not yet closed */
    uv_timer_t accept_retry; /* after EMFILE: stop polling the listener for a moment */
    int accept_retry_active;
    char *created_socket;  /* a path we bound and must unlink at exit */

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
    struct jpd_post *posts, *posts_tail; /* runs-log rows and kept profiles, in order */
    uint32_t gone;        /* sessions freed on workers, not yet counted off nsessions */
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

/* What a session asks of the daemon that holds it. The two sides and what each owns:
 *   the server (server.c, workers.c) owns the daemon object, the listener, the signals, the
 *     runs log, the store of kept runs for `show`, the capture directory and the worker pool,
 *     and implements these calls;
 *   a session (session.c and the files session.h names) owns its socket, ring, engine and
 *     capture writers, and the session lists and counters noted in struct jpd_loop and
 *     struct jpd_daemon.
 * A session never calls into server.c: only through d->ops. The server calls sessions through
 * the jpd_session_* functions below. Each call is made on the session's loop's thread and
 * returns before the session goes on; none of them calls back into the session. A call made on
 * a worker's thread is safe there: log_run and keep post their work to the main loop (which
 * owns the runs log and the kept store) before returning, so a run is logged and kept, in the
 * order of the calls, before anything the session sends after them can reach a client;
 * open_capture and remove_capture only use the capture directory's fd, which does not change
 * while the daemon runs. */
struct jpd_session_ops {
    /* One row in the runs log for a finished run (nothing without a runs log). */
    void (*log_run)(struct jpd_daemon *d, const struct jpd_run_row *row);
    /* Keeps a copy of a finished run's rendered profile for `show` (long-lived mode). */
    void (*keep)(struct jpd_daemon *d, uint64_t run_id, uid_t uid, const struct jp_rendered *r);
    /* A kept run, or NULL; valid until the next keep. Main loop only (SHOW). */
    const struct jpd_kept *(*find_kept)(struct jpd_daemon *d, uint64_t run_id);
    /* Creates the run's capture file in the capture directory: 1 with its fd in *fd (the
     * session's now) and its name in name[cap], 0 when the daemon keeps no capture directory,
     * or -errno. */
    int (*open_capture)(struct jpd_daemon *d, uint64_t run_id, int *fd, char *name, size_t cap);
    /* Removes a capture file open_capture made (by its name). 0 or -errno. */
    int (*remove_capture)(struct jpd_daemon *d, const char *name);
    /* The session's memory is freed, on lp's thread: the daemon may be done (private mode,
     * shutdown). */
    void (*session_gone)(struct jpd_daemon *d, struct jpd_loop *lp);
    /* Adds the deltas to what uid holds (struct jpd_uid_use) and returns what it holds then;
     * all zero deltas only read it. Any loop. */
    struct jpd_uid_use (*uid_use)(struct jpd_daemon *d, uid_t uid, int32_t runs,
                                  int32_t requests, int64_t unread);
    /* serve (d->nworkers > 0): the session has left the main loop after its HELLO (its handles
     * are closed, it is on no loop's list); a worker adopts it (jpd_session_adopt). */
    void (*hand_over)(struct jpd_daemon *d, struct jpd_session *s);
};

/* session.c */
/* How long a session waits for EXCERPTS: JPD_EXCERPT_MS, or the test knob
 * JETTPROFD_EXCERPT_TIMEOUT_MS read once at start (main.c). */
extern uint32_t jpd_excerpt_timeout_ms;
/* Data bytes per EXPORT message (result.c): JP_CTL_EXPORT_CHUNK, or the test knob
 * JETTPROFD_EXPORT_CHUNK_BYTES, so a test can see an export travel in many pieces. */
extern uint32_t jpd_export_chunk_bytes;
/* How long a connection may take to send HELLO and RING: JPD_HANDSHAKE_MS, or the test knob
 * JETTPROFD_HANDSHAKE_TIMEOUT_MS read once at start (main.c). */
extern uint32_t jpd_handshake_timeout_ms;
struct jpd_peer {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};
/* Takes ownership of fd (a connected, non-blocking stream socket). 0 or -errno. */
int jpd_session_start(struct jpd_daemon *d, int fd, const struct jpd_peer *peer);
/* Sends ERROR{code, message} and closes once it is written. Takes ownership of fd. */
int jpd_session_refuse(struct jpd_daemon *d, int fd, const struct jpd_peer *peer, uint32_t code,
                       const char *message);
/* SIGTERM: every session ends now; runs in flight are delivered as partial `interrupted`. */
void jpd_session_shutdown(struct jpd_session *s);
struct jpd_session *jpd_session_next(struct jpd_session *s);
/* On a worker's thread: a session handed over (ops->hand_over) joins lp and goes on where the
 * main loop left it (frames it already buffered, the rest of its handshake time); shut down at
 * once when shutting_down. */
void jpd_session_adopt(struct jpd_loop *lp, struct jpd_session *s, int shutting_down);
/* The link a session is queued by while it is on no loop (workers.c's inbox). */
struct jpd_session **jpd_session_link(struct jpd_session *s);

/* conn.c */
/* 1 (and a log line) when a new connection of uid must be refused because too many
 * connections, of uid or in all, have not said HELLO yet; else 0. */
int jpd_prehello_full(const struct jpd_daemon *d, uid_t uid);

/* workers.c: the worker pool of `serve` and the posts from workers to the main loop. */
/* Starts n worker threads, each with its own loop. 0 or -errno (nothing left running). */
int jpd_workers_start(struct jpd_daemon *d, uint32_t n);
/* Main loop: SIGTERM reached the daemon; every worker shuts its sessions down. */
void jpd_workers_shutdown(struct jpd_daemon *d);
/* Main loop, when no session is left: the workers end their loops; joined in _join. */
void jpd_workers_stop(struct jpd_daemon *d);
void jpd_workers_join(struct jpd_daemon *d);
/* Main loop (ops->hand_over): queues a session that left the main loop to the worker with the
 * fewest runs. */
void jpd_workers_hand_over(struct jpd_daemon *d, struct jpd_session *s);
/* Main loop: applies what workers posted (runs-log rows, kept profiles, freed sessions), so
 * what follows sees every post made before it. Called from the post handle and before anything
 * that reads the state the posts change. */
void jpd_workers_absorb(struct jpd_daemon *d);
/* 1 on the main loop's thread. */
int jpd_on_main(const struct jpd_daemon *d);
/* From a worker: a runs-log row (copied) / a kept profile (its texts taken: *r keeps none) for
 * the main loop. */
void jpd_post_log(struct jpd_daemon *d, const struct jpd_run_row *row);
void jpd_post_keep(struct jpd_daemon *d, uint64_t run_id, uid_t uid, struct jp_rendered *r);
void jpd_post_gone(struct jpd_daemon *d, struct jpd_loop *lp);
/* What the main loop does with them (server.c). */
/* daemon/kept.c, for server.c: the `show` store's slot cleared, the store given one finished
 * run (copied), a kept run by id (NULL: none), a runs-log row written. */
void jpd_kept_clear(struct jpd_kept *k);
void jpd_keep_run(struct jpd_daemon *d, uint64_t run_id, uid_t uid, const struct jp_rendered *r);
const struct jpd_kept *jpd_find_kept(struct jpd_daemon *d, uint64_t run_id);
void jpd_log_run(struct jpd_daemon *d, const struct jpd_run_row *row);
void jpd_server_log_run(struct jpd_daemon *d, const struct jpd_run_row *row);
void jpd_server_keep(struct jpd_daemon *d, uint64_t run_id, uid_t uid, struct jp_rendered *r);
/* A copy of a rendered profile's texts in *out: 0, or -ENOMEM with *out holding nothing. */
int jpd_rendered_copy(const struct jp_rendered *r, struct jp_rendered *out);
void jpd_server_sessions_gone(struct jpd_daemon *d, uint32_t n);

/* server.c */
int jpd_run_private(int fd);
int jpd_run_serve(const struct jpd_config *cfg);
/* capture.c: applies --capture-max-bytes and --capture-max-age to the capture directory:
 * removes (and logs) the oldest finished captures, never one still being written. */
void jpd_capture_prune(struct jpd_daemon *d);
const char *jpd_default_socket(char *buf, size_t cap);
/* The run's program as the runs log and status name it: its engine's first project source's
 * relative path, copied into buf (cap JPD_PROGRAM_MAX); 0, or -ENOENT when there is none yet
 * (buf is then ""). Sources from index *from on are looked at; *from is moved past them. */
int jpd_program_of(const struct jp_engine *eng, uint32_t *from, char *buf);

/* status.c: the live runs, the totals and `jettprofd status`. */
enum { JPD_STATUS_HUMAN, JPD_STATUS_JSON, JPD_STATUS_PROMETHEUS };
/* On the run's loop: the run started (lists l) / drained (its figures) / ended (unlists l,
 * counts it finished with its records). _end on a run never begun does nothing. */
void jpd_live_begin(struct jpd_daemon *d, struct jpd_live *l);
/* _update reads the ring's fill, wakes and gauges and, until it is known, the program. */
void jpd_live_update(struct jpd_daemon *d, struct jpd_live *l, uint64_t records, uint64_t fill,
                     const struct jp_ring *ring, const struct jp_engine *eng);
/* The drain's waits for its capture compressor (compress.h), shown with the run. */
void jpd_live_capture(struct jpd_daemon *d, struct jpd_live *l, uint64_t waits, uint64_t wait_ns);
void jpd_live_end(struct jpd_daemon *d, struct jpd_live *l);
/* Main loop: a connection was refused (permission, too many runs). */
void jpd_live_refused(struct jpd_daemon *d);
/* The status text for a caller of uid viewer in format JPD_STATUS_*, appended to b. A viewer
 * that is root or the daemon's own uid sees every live run; any other sees its own runs in
 * full and others' only as a count. */
void jpd_status_text(struct jpd_daemon *d, uid_t viewer, uint32_t format, struct jp_buf *b);
/* Main loop: the newest `limit` finished runs (d->recent) a caller of uid viewer may see (the
 * same rule as status, but others' runs are left out), format JPD_STATUS_HUMAN or _JSON. */
void jpd_runs_text(struct jpd_daemon *d, uid_t viewer, uint32_t format, uint32_t limit,
                   struct jp_buf *b);
/* `jettprofd runs`: asks the daemon at socket_path for them. Returns the exit status. */
int jpd_runs(const char *socket_path, uint32_t format, uint32_t limit);
/* `jettprofd status`: asks the daemon at socket_path and writes its answer to out_path (NULL:
 * stdout; else atomically, temp + rename). Returns the exit status. */
int jpd_status(const char *socket_path, uint32_t format, const char *out_path);

/* state.c: the state directory (--state-dir), main loop only; each does nothing without one.
 * Load: the kept runs found there (a file that fails its checks is skipped with a log line
 * naming it) and the next run id. Save / forget: one kept run's file; the next run id. */
void jpd_state_load(struct jpd_daemon *d);
void jpd_state_save_kept(struct jpd_daemon *d, const struct jpd_kept *k);
void jpd_state_forget(struct jpd_daemon *d, uint64_t run_id);
void jpd_state_save_next_id(struct jpd_daemon *d);
/* The id for a new run. With a state directory, ids come from a block whose end is saved
 * before the block's first id is handed out, so a daemon that dies with runs in flight (never
 * kept, never saved) never gives their ids again after a restart: it starts past the block. */
uint64_t jpd_state_take_run_id(struct jpd_daemon *d);
/* server.c: keeps a run loaded from the state directory (takes its texts). */
void jpd_server_keep_loaded(struct jpd_daemon *d, struct jpd_kept *k);

/* show.c: the clients of a serving daemon. jpd_ask sends m to the daemon at socket_path and
 * reads one answer: an ERROR is printed (named after cmd), anything else goes to answer, which
 * returns the exit status or -1 for a message it did not expect. Returns the exit status. */
int jpd_ask(const char *cmd, const char *socket_path, const struct jp_ctl_msg *m,
            int (*answer)(const struct jp_ctl_msg *a, void *arg), void *arg);
int jpd_show(const char *socket_path, uint64_t run_id, uint32_t outputs);

/* offline.c */
struct jpd_loaded {
    struct jp_engine *eng;
    uint32_t integrity;     /* JP_CAPI_* */
    const char *reason;     /* static: capture reader's or engine's reason */
    uint64_t offset;
    uint32_t ending;        /* JP_END_STOP or JP_END_TRUNCATED when usable */
    uint64_t records;
};
/* Reads a capture into a fresh engine. 0 with the verdict in *out (the engine is usable unless
 * integrity is INVALID or MISSING), or -errno for I/O trouble other than a missing file. */
int jpd_load_capture(const char *path, struct jpd_loaded *out);
void jpd_loaded_free(struct jpd_loaded *l);
/* What is wrong with a capture that is not complete: its reason, and the byte offset when one
 * is known. */
void jpd_loaded_describe(char *buf, size_t cap, const struct jpd_loaded *l);
/* The one wording of an error code in the offline commands' messages ("out of memory" for
 * -ENOMEM, else strerror). */
const char *jpd_error_text(int r);
int jpd_cmd_replay(int argc, char **argv);
int jpd_cmd_summarize(int argc, char **argv);

/* export.c */
int jpd_cmd_export(int argc, char **argv);
int jpd_cmd_diff(int argc, char **argv);

/* util.c */
/* Decimal integer in [lo, hi], nothing else. -EINVAL / -ERANGE. */
int jpd_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* A positive decimal integer, then at most one of the unit letters in units[i].letter, which
 * multiplies it by units[i].times (none: 1): "64M", "7d". -EINVAL / -ERANGE (0, or past
 * UINT64_MAX once multiplied). */
struct jpd_unit {
    char letter;
    uint64_t times;
};
int jpd_parse_scaled(const char *s, const struct jpd_unit *units, size_t nunits, uint64_t *out);
/* Text is built in the common buffer (common/buf.h) with the common JSON string writer
 * (common/json.h). */
/* Writes all of buf or fails: 0 or -errno. */
int jpd_write_all(int fd, const void *buf, size_t len);
/* One line to stderr, prefixed "jettprofd: ", the message written by the one rule for human
 * text (common/text.h): a client's program or reason in it cannot drive a terminal. */
void jpd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same at a syslog priority (JPD_LOG_*, <syslog.h>'s values); jpd_log is JPD_LOG_INFO.
 * When stderr is the journal's stream (systemd.h) the line starts with "<N>", which the
 * journal takes as its priority; elsewhere the line is the same as jpd_log's. */
#define JPD_LOG_ERR 3
#define JPD_LOG_WARNING 4
#define JPD_LOG_INFO 6
void jpd_log_at(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "stop", "producer_lost", "shutdown", "truncated", "collector_failure". */
const char *jpd_ending_word(uint32_t ending);
/* "complete", "partial", "unavailable" (JP_STATUS_*), or "error" for anything else (a run that
 * has no profile): the runs log and the stderr lines use the same words. */
const char *jpd_status_word(uint32_t status);
/* signals.c: what each signal does (jettprofd(8), SIGNALS). jpd_signals_start sets every
 * action and starts the main loop's signal handles (0 or -errno); jpd_signals_stop closes the
 * handles so the loop can end. */
int jpd_signals_start(struct jpd_daemon *d);
void jpd_signals_stop(struct jpd_daemon *d);
/* server.c: stop accepting and deliver every run in flight (SIGTERM); the daemon exits once
 * the last is delivered. */
void jpd_server_stop(struct jpd_daemon *d);
/* Starts a thread that never takes SIGTERM, SIGINT or SIGHUP: they are the main loop's
 * (uv_signal).
 * 0 or -errno. */
int jpd_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* A wall-clock second (> 0) as RFC 3339 UTC, "2026-12-01T22:33:14Z", in buf. 0 or -EINVAL
 * (unknown), -ERANGE, -ENOSPC (cap under 21). */
int jpd_rfc3339(int64_t unix_s, char *buf, size_t cap);
/* The summary totals as a JSON object (appended to b): shared by the runs log and the rows. */
void jpd_summary_json(struct jp_buf *b, const struct jp_engine_summary *s);

#endif
