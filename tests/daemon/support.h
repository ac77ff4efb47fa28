/* Test support for the daemon suites: known record streams (stream.c), a producer that pushes
 * them through a real ring and a control-socket client that speaks the protocol (client.c), the
 * same stream fed to a local engine for the expected profile (expected.c), and process helpers
 * (procs.c). Nothing here stands in for another part: the ring, control codec, capture format
 * and engine are the real ones. */
#ifndef JETTPROF_TESTS_DAEMON_SUPPORT_H
#define JETTPROF_TESTS_DAEMON_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "render/report.h"
#include "protocol/control.h"
#include "protocol/records.h"
#include "protocol/ring.h"
#include "tests/lib/spawn.h" /* tl_spawn, tl_fork, tl_wait */

/* ---- stream.c ---- */

/* A deterministic record stream: RUN_START, sources, frames, a calling-context tree, one EXEC,
 * `events` hot records (CPU samples or allocation events), COUNTERS, and RUN_STOP unless
 * with_stop is 0. Different seeds give different streams. */
struct jpt_stream {
    uint32_t mode;    /* JP_MODE_* */
    uint32_t seed;
    uint64_t events;
    int with_stop;
    uint32_t threshold_bp, limit;
    uint64_t cpu_budget, retention_budget; /* RUN_START's budgets: the contract's by default */
    uint64_t run_id; /* a serving daemon's id of the run, which its human text names; 0 */
    const char *program; /* the first project source's path (the run's program); NULL:
                          * src/modS_0.jett */
    uint32_t wide; /* 0, or the widest, deepest stack tree a run may have: a chain of
                    * JPT_WIDE_CHAIN frames under which `wide` leaves hang, every frame's name
                    * the longest allowed, every event at a leaf (a CPU run's exports are then
                    * hundreds of times its profile) */
    /* generator state */
    uint32_t phase, i;
    uint64_t emitted;  /* records produced so far (the RUN_STOP's record_count) */
    uint64_t rng;
    uint64_t next_id;
    uint64_t live_id[64], live_size[64];
    uint32_t nlive;
};
#define JPT_WIDE_CHAIN (JP_MAX_DEPTH - 2u) /* the leaves: 127 frames deep */
void jpt_stream_init(struct jpt_stream *s, uint32_t mode, uint32_t seed, uint64_t events);
/* Next record into buf (JP_REC_MAX_SIZE bytes): its length, or 0 at the end. */
uint32_t jpt_stream_next(struct jpt_stream *s, uint8_t *buf);
/* The RUN_STOP record the stream would end with now (with_stop = 0 leaves it to the caller). */
uint32_t jpt_stream_stop(const struct jpt_stream *s, uint8_t *buf);

/* The excerpt a test's "runtime" supplies for a hot line: a pure function of the key. */
void jpt_excerpt_for(const struct jp_ctl_excerpt_key *k, struct jp_ctl_excerpt *x, char *text,
                     size_t cap);

/* ---- client.c ---- */

/* What a run's RESULT (or ERROR) carried back. */
struct jpt_result {
    uint32_t status;
    char reason[64];
    char *human; size_t human_len;
    char *toon; size_t toon_len;
    uint32_t error_code; /* set when the daemon answered ERROR */
    char error[256];
    uint64_t run_id;
    uint32_t capture_errno; /* RESULT's: why the client's capture ended early, 0 if it did not */
    /* the EXPORT pieces that came before RESULT, per format: bytes, pieces, the errno */
    uint64_t export_bytes[JP_EXPORT_FORMAT_COUNT];
    uint32_t export_pieces[JP_EXPORT_FORMAT_COUNT];
    uint32_t export_error[JP_EXPORT_FORMAT_COUNT];
};
void jpt_result_free(struct jpt_result *r);

/* Client side of the control socket (blocking, with timeouts). */
struct jpt_client {
    int fd;
    struct jp_ctl_decoder *dec;
};
int jpt_client_open_fd(struct jpt_client *c, int fd);
int jpt_client_connect(struct jpt_client *c, const char *path);
void jpt_client_close(struct jpt_client *c);
/* Waits up to timeout_ms for the next message: 1 with *m, 0 on EOF, -ETIMEDOUT / -errno. */
int jpt_client_recv(struct jpt_client *c, struct jp_ctl_msg *m, int timeout_ms);
int jpt_client_hello(struct jpt_client *c, const struct jpt_stream *s, uint32_t outputs,
                     uint64_t *run_id, struct jpt_result *err);

/* Pushes one record, waiting while the ring is full and the daemon drains it: -ETIMEDOUT after
 * about 10 s without the daemon moving, else 0. */
int jpt_push(struct jp_ring *r, const void *rec, uint32_t len);

/* A whole run over an open client: HELLO, RING (+capture fd if >= 0), the stream, FINALIZE,
 * excerpts, RESULT. 0 with *out filled (ERROR answers are in out->error_code), or -errno. */
int jpt_run(struct jpt_client *c, struct jpt_stream *s, uint32_t slots, int capture_fd,
            struct jpt_result *out);
/* HELLO + RING + `count` records (no FINALIZE): leaves the run live. The ring stays mapped in
 * *ring for the caller. */
int jpt_start_run(struct jpt_client *c, struct jpt_stream *s, uint32_t slots, int capture_fd,
                  uint64_t count, struct jp_ring *ring, uint64_t *run_id);
/* After FINALIZE: waits for the EXCERPT_REQUEST and answers it, reading nothing after it (a
 * client that leaves its result unread). 0, -EPROTO for another message, or -errno. */
int jpt_answer_excerpts(struct jpt_client *c, int timeout_ms);
/* After FINALIZE or a shutdown: answers EXCERPT_REQUESTs and waits for RESULT or ERROR. */
int jpt_finish(struct jpt_client *c, struct jpt_result *out, int timeout_ms);

/* ---- expected.c ---- */

/* The profile the engine gives for the same stream, with the same excerpts: what the daemon
 * must deliver. */
int jpt_expected(struct jpt_stream *s, struct jpt_result *out);

/* ---- procs.c ---- */

/* In a child of tl_fork: become uid with gid as the primary and only group (exits 99 on
 * failure), the death signal armed again. */
void jpt_become(uid_t uid, gid_t gid);

/* Processes. */
const char *jpt_daemon_bin(void);
/* Spawns argv with keep_fd inherited (-1: none), stderr into *err_fd when err_fd is not NULL,
 * through tl_spawn: the child cannot outlive the test. Reap it with tl_wait. */
pid_t jpt_spawn(char *const argv[], int keep_fd, int *err_fd);
/* Spawns `jettprofd serve --socket PATH extra...` and waits until it accepts. */
pid_t jpt_serve(const char *sock, const char *const extra[], int *err_fd);
/* A serving daemon (jpt_serve) listening in a fresh temporary directory. */
struct jpt_served {
    pid_t pid;
    char *dir;     /* malloc'ed */
    char sock[600];
};
/* 0, or -errno with nothing left behind. */
int jpt_serve_tmp(struct jpt_served *s, const char *const extra[], int *err_fd);
/* Its directory removed and freed, once the daemon was stopped (tl_stop). */
void jpt_served_clean(struct jpt_served *s);
/* A private daemon (jettprofd --session-fd) on one end of a socketpair, c open on the other:
 * its pid, or -errno. err_fd as jpt_spawn's. */
pid_t jpt_private(struct jpt_client *c, int *err_fd);
/* Reads all of fd into a malloc'ed NUL-terminated string. */
char *jpt_slurp_fd(int fd);
char *jpt_slurp_file(const char *path, size_t *len);
/* Runs argv, capturing stdout and stderr; returns the wait status. */
int jpt_capture_cmd(char *const argv[], char **out, size_t *out_len, char **err);
/* A fresh temporary directory (under $TMPDIR or /tmp). */
char *jpt_tmpdir(void);
/* Count of open fds of pid, and its RSS in KiB, from /proc. */
int jpt_fd_count(pid_t pid);
/* Entries of a directory but . and .. (e.g. /proc/PID/task), or -errno. */
int jpt_count_entries(const char *path);
long jpt_rss_kib(pid_t pid);
/* Count of lines in a file that contain needle. */
int jpt_count_lines(const char *path, const char *needle);

#endif
