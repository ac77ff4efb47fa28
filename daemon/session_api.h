/* The session part as the rest of the daemon sees it: what the server calls to start, refuse,
 * shut down and hand over sessions, and the knobs main.c sets, in the files that define them
 * (session.c, conn.c, capture.c). session.h is the part's inside.
 */
#ifndef JETTPROF_DAEMON_SESSION_API_H
#define JETTPROF_DAEMON_SESSION_API_H

#include "jpd.h"

/* session.c */
/* How long a session waits for EXCERPTS: JPD_EXCERPT_MS, or the test knob
 * JETTPROFD_EXCERPT_TIMEOUT_MS read once at start (main.c). */
extern uint32_t jpd_excerpt_timeout_ms;
/* How long a connection may take to send HELLO and RING: JPD_HANDSHAKE_MS, or the test knob
 * JETTPROFD_HANDSHAKE_TIMEOUT_MS read once at start (main.c). */
extern uint32_t jpd_handshake_timeout_ms;
/* Takes ownership of fd (a connected, non-blocking stream socket). 0 or -errno. */
int jpd_session_start(struct jpd_daemon *d, int fd, const struct jpd_peer *peer);
/* Sends ERROR{code, message} and closes once it is written. Takes ownership of fd. */
int jpd_session_refuse(struct jpd_daemon *d, int fd, const struct jpd_peer *peer, uint32_t code,
                       const char *message);
/* SIGTERM: every session ends now; runs in flight are delivered as partial `interrupted`. */
void jpd_session_shutdown(struct jpd_session *s);
struct jpd_session *jpd_session_next(struct jpd_session *s);
/* On a worker's thread: a session handed over (jpd_workers_hand_over) joins lp and goes on where the
 * main loop left it (frames it already buffered, the rest of its handshake time); shut down at
 * once when shutting_down. */
void jpd_session_adopt(struct jpd_loop *lp, struct jpd_session *s, int shutting_down);
/* The link a session is queued by while it is on no loop (workers.c's inbox). */
struct jpd_session **jpd_session_link(struct jpd_session *s);


/* conn.c */
/* Data bytes per EXPORT message: JP_CTL_EXPORT_CHUNK, or the test knob
 * JETTPROFD_EXPORT_CHUNK_BYTES, so a test can see an export travel in many pieces. */
extern uint32_t jpd_export_chunk_bytes;
/* 1 (and a log line) when a new connection of uid must be refused because too many
 * connections, of uid or in all, have not said HELLO yet; else 0. */
int jpd_prehello_full(const struct jpd_daemon *d, uid_t uid);


/* capture.c, the capture directory (--capture-dir). _open opens it (dir NULL: none): 0, or
 * -errno with the command-line error on stderr. For sessions: _create makes a run's capture
 * file there under a name the daemon chooses: 1 with its fd in *fd (the caller's now) and its
 * name in name[cap], 0 when the daemon keeps no capture directory, or -errno; _remove removes
 * one _create made, by its name: 0 or -errno. */
int jpd_capture_dir_open(struct jpd_daemon *d, const char *dir);
int jpd_capture_dir_create(struct jpd_daemon *d, uint64_t run_id, int *fd, char *name,
                           size_t cap);
int jpd_capture_dir_remove(struct jpd_daemon *d, const char *name);
/* capture.c: applies --capture-max-bytes and --capture-max-age to the capture directory:
 * removes (and logs) the oldest finished captures, never one still being written. */
void jpd_capture_prune(struct jpd_daemon *d);

#endif
