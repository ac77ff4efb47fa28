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
/* Takes ownership of fd (a connected, non-blocking stream socket). watcher: it came to a
 * private daemon's watch socket (it may ask SHOW and TOP of the run, nothing else). 0 or
 * -errno. */
int jpd_session_start(struct jpd_daemon *d, int fd, const struct jpd_peer *peer, int watcher);
/* Sends ERROR{code, message} and closes once it is written. Takes ownership of fd. */
int jpd_session_refuse(struct jpd_daemon *d, int fd, const struct jpd_peer *peer, uint32_t code,
                       const char *message);
/* SIGTERM, on lp's thread: every session of lp ends now (runs in flight are delivered as
 * partial `interrupted`), and so does any handed to lp from now on. A task function
 * (jpd_workers_shutdown); t is not used. */
void jpd_session_shutdown_loop(struct jpd_loop *lp, struct jpd_task *t);


/* window.c: the test knobs of the windows' clocks (main.c reads them once at start):
 * JETTPROFD_TEST_TIME_SCALE=N runs them N times as fast (a two-hour run in seconds), and
 * JETTPROFD_TEST_WALL_FILE=PATH moves the wall clock by the whole seconds PATH holds, read at
 * every cut (a clock step). jpd_window_clock_init marks their origin. */
extern uint32_t jpd_time_scale;
extern const char *jpd_wall_step_file;
void jpd_window_clock_init(void);

/* conn.c */
/* Data bytes per EXPORT message: JP_CTL_EXPORT_CHUNK, or the test knob
 * JETTPROFD_EXPORT_CHUNK_BYTES, so a test can see an export travel in many pieces. */
extern uint32_t jpd_export_chunk_bytes;
/* 1 (and a log line) when a new connection of uid must be refused because too many
 * connections, of uid or in all, have not said HELLO yet; else 0. */
int jpd_prehello_full(const struct jpd_daemon *d, uid_t uid);


#endif
