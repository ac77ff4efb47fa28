/* The server part of jettprofd: the daemon object's services, in the files that define them
 * (server.c, signals.c, workers.c, kept.c, state.c, requests.c, capdir.c).
 */
#ifndef JETTPROF_DAEMON_SERVER_H
#define JETTPROF_DAEMON_SERVER_H

#include "jpd.h"

/* What a session asks of the daemon that holds it, and who owns what:
 *   the server (server.c, workers.c, kept.c, state.c, requests.c, capdir.c) owns the daemon
 *     object, the listener, the signals, the runs log, the store of kept runs for `show`, the
 *     capture directory and the worker pool;
 *   a session (session.c and the files session.h names) owns its socket, ring, engine and
 *     capture writers, and the session lists and counters noted in struct jpd_loop and
 *     struct jpd_daemon.
 * A session calls the server only through the functions marked "for sessions" below, each on
 * the session's loop's thread; none of them calls back into the session. A call made on a
 * worker's thread is safe there: jpd_log_run and jpd_keep_run post their work to the main loop
 * (which owns the runs log and the kept store) before returning, so a run is logged and kept,
 * in the order of the calls, before anything the session sends after them can reach a client;
 * the capture directory's calls only use its fd, which does not change while the daemon runs;
 * jpd_uid_use takes its own lock. The server calls sessions through the jpd_session_*
 * functions. */

/* server.c */
int jpd_run_private(int fd);
int jpd_run_serve(const struct jpd_config *cfg);
/* For sessions: adds the deltas to what uid holds (struct jpd_uid_use) and returns what it
 * holds then; all zero deltas only read it. Any loop. */
struct jpd_uid_use jpd_uid_use(struct jpd_daemon *d, uid_t uid, int32_t runs, int32_t requests,
                               int64_t unread);
/* For sessions: a session's memory was freed, on lp's thread: the daemon may be done (private
 * mode, shutdown). */
void jpd_server_session_gone(struct jpd_daemon *d, struct jpd_loop *lp);
/* The main loop's count of sessions, n of them freed (on the main loop, or as workers
 * posted). */
void jpd_server_sessions_gone(struct jpd_daemon *d, uint32_t n);
/* Stop accepting and deliver every run in flight (SIGTERM); the daemon exits once
 * the last is delivered. */
void jpd_server_stop(struct jpd_daemon *d);
/* The socket `serve` listens on and the clients ask: $JETTPROFD_SOCKET, else
 * $XDG_RUNTIME_DIR/jettprofd.sock when not root, else /run/jettprofd.sock; in buf[cap]. */
const char *jpd_default_socket(char *buf, size_t cap);
/* Where a private daemon lets its own user watch its run (`jettprofd top --pid PID`): the
 * socket PID.sock (PID the program's) in a directory only uid may enter, `where` 0:
 * $XDG_RUNTIME_DIR/jettprof (when that is an absolute path), 1: /tmp/jettprof-UID. With create,
 * the directory is made (0700) when missing. Either way it must be a directory (not a link)
 * owned by uid that no one else may enter: 0 with the socket's path in buf[cap], -ENOENT
 * (no such place: `where` 0 without $XDG_RUNTIME_DIR, or not created), -EPERM (it is there
 * but not private to uid: never used), -ENAMETOOLONG, or -errno. */
int jpd_watch_path(uid_t uid, uint32_t pid, int where, int create, char *buf, size_t cap);

/* signals.c: what each signal does (jettprofd(8), SIGNALS). jpd_signals_start sets every
 * action and starts the main loop's signal handles (0 or -errno); jpd_signals_stop closes the
 * handles so the loop can end. */
int jpd_signals_start(struct jpd_daemon *d);
void jpd_signals_stop(struct jpd_daemon *d);

/* workers.c: the worker pool of `serve` and what is posted to the main loop. */
/* Starts n worker threads, each with its own loop; the main loop learns of sessions freed on
 * them through sessions_gone(d, count). 0 or -errno (nothing left running). */
int jpd_workers_start(struct jpd_daemon *d, uint32_t n,
                      void (*sessions_gone)(struct jpd_daemon *d, uint32_t n));
/* Main loop: SIGTERM reached the daemon; every worker runs fn (the sessions' shutdown of a
 * loop) on its thread, after the tasks queued before. */
void jpd_workers_shutdown(struct jpd_daemon *d, void (*fn)(struct jpd_loop *, struct jpd_task *));
/* Main loop, when no session is left: the workers end their loops; joined in _join. */
void jpd_workers_stop(struct jpd_daemon *d);
void jpd_workers_join(struct jpd_daemon *d);
/* For sessions, on the main loop: queues t (a session that left the main loop, whose fn adopts
 * it) to the worker with the fewest runs. */
void jpd_workers_hand_over(struct jpd_daemon *d, struct jpd_task *t);
/* For sessions, on the main loop: queues t to worker w (a request that must be answered on the
 * loop of the run it asks about). */
void jpd_workers_hand_to(struct jpd_loop *w, struct jpd_task *t);
/* Main loop: runs what was posted and hands on the sessions freed on workers, so what follows
 * sees every post made before it. Called from the post handle and before anything that reads
 * the state the posts change. */
void jpd_workers_absorb(struct jpd_daemon *d);
/* 1 on the main loop's thread. */
int jpd_on_main(const struct jpd_daemon *d);
/* From any thread: fn(d, copy) runs on the main loop after everything posted before it, with a
 * copy of payload[size] that lives until fn returns (whatever the bytes own, fn takes). 0, or
 * -ENOMEM with nothing posted. */
typedef void jpd_post_fn(struct jpd_daemon *d, void *payload);
int jpd_post(struct jpd_daemon *d, jpd_post_fn *fn, const void *payload, size_t size);
/* From a worker: one of its sessions was freed (counted, never lost to a failed allocation). */
void jpd_post_gone(struct jpd_daemon *d, struct jpd_loop *lp);

/* requests.c. For sessions, on the main loop: the answer to a SHOW, STATUS, RUNS or TOP
 * request of a client of uid: 0 with *reply filled (its strings point into the kept store or
 * *text, which the caller frees, and stay valid until the main loop's next turn), else the
 * JP_CTLE_* code that ends the session, with *why. A SHOW or TOP of a run in flight the client
 * may see is answered with 0, *snapshot_on set to the loop the run lives on and *run_id to the
 * run (TOP's run 0 on a private daemon: its run) (*reply untouched): the snapshot or frame is
 * built there, on the run's own thread, between its drains. A TOP of a run that has ended and
 * is kept is answered like SHOW with its human text. */
uint32_t jpd_server_answer(struct jpd_daemon *d, uid_t uid, const struct jp_ctl_msg *m,
                           struct jp_ctl_msg *reply, struct jp_buf *text, const char **why,
                           struct jpd_loop **snapshot_on, uint64_t *run_id);

/* kept.c. For sessions, on any loop: the store given one finished run (copied), and a
 * runs-log row written, each posted to the main loop from a worker. */
void jpd_keep_run(struct jpd_daemon *d, uint64_t run_id, uid_t uid, const struct jp_rendered *r);
void jpd_log_run(struct jpd_daemon *d, const struct jpd_run_row *row);
/* The `show` store's slot cleared; on the main loop, a kept run by id (NULL: none; absorb the
 * workers' posts first). */
void jpd_kept_clear(struct jpd_kept *k);
const struct jpd_kept *jpd_find_kept(struct jpd_daemon *d, uint64_t run_id);
/* A copy of a rendered profile's texts in *out: 0, or -ENOMEM with *out holding nothing. */
int jpd_rendered_copy(const struct jp_rendered *r, struct jp_rendered *out);

/* Keeps a run loaded from the state directory (takes its texts): jpd_state_load's keep. */
void jpd_kept_load(struct jpd_daemon *d, struct jpd_kept *k);

/* capdir.c, the capture directory (--capture-dir): opens it (dir NULL: none): 0, or -errno
 * with the command-line error on stderr. */
int jpd_capture_dir_open(struct jpd_daemon *d, const char *dir);
/* For sessions, on any loop (they use only the directory's fd): _create makes a run's capture
 * file there under a name the daemon chooses: 1 with its fd in *fd (the caller's now) and its
 * name in name[cap], 0 when the daemon keeps no capture directory, or -errno; _remove removes
 * one _create made, by its name: 0 or -errno; _prune applies --capture-max-bytes and
 * --capture-max-age: removes (and logs) the oldest finished captures, never one still being
 * written. */
int jpd_capture_dir_create(struct jpd_daemon *d, uint64_t run_id, int *fd, char *name,
                           size_t cap);
int jpd_capture_dir_remove(struct jpd_daemon *d, const char *name);
void jpd_capture_prune(struct jpd_daemon *d);

/* state.c: the state directory (--state-dir), main loop only; each does nothing without one.
 * It reads and writes files and calls nothing of the server's: load hands each kept run found
 * there (a file that fails its checks is skipped with a log line naming it), oldest first, to
 * keep, which takes its texts, and reads the next run id. Save / forget: one kept run's file;
 * the next run id. */
void jpd_state_load(struct jpd_daemon *d, void (*keep)(struct jpd_daemon *d, struct jpd_kept *k));
void jpd_state_save_kept(struct jpd_daemon *d, const struct jpd_kept *k);
void jpd_state_forget(struct jpd_daemon *d, uint64_t run_id);
void jpd_state_save_next_id(struct jpd_daemon *d);
/* For sessions, on the main loop: the id for a new run. With a state directory, ids come from a block whose end is saved
 * before the block's first id is handed out, so a daemon that dies with runs in flight (never
 * kept, never saved) never gives their ids again after a restart: it starts past the block. */
uint64_t jpd_state_take_run_id(struct jpd_daemon *d);

#endif
