/* Small helpers every file of the daemon uses (util.c). */
#ifndef JETTPROF_DAEMON_UTIL_H
#define JETTPROF_DAEMON_UTIL_H

#include "jpd.h"

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
/* A blocking unix stream socket connected to path (close-on-exec): the fd, or -ENAMETOOLONG
 * (path past sun_path) or the -errno of socket or connect. The clients' one way in. */
int jpd_connect_unix(const char *path);
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
/* Starts a thread that never takes SIGTERM, SIGINT or SIGHUP: they are the main loop's
 * (uv_signal).
 * 0 or -errno. */
int jpd_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* A wall-clock second (> 0) as RFC 3339 UTC, "2026-12-01T22:33:14Z", in buf. 0 or -EINVAL
 * (unknown), -ERANGE, -ENOSPC (cap under 21). */
int jpd_rfc3339(int64_t unix_s, char *buf, size_t cap);
/* The summary totals as a JSON object (appended to b): shared by the runs log and the rows. */
void jpd_summary_json(struct jp_buf *b, const struct jp_engine_summary *s);

/* The run's program as the runs log and status name it: its engine's first project source's
 * relative path, copied into buf (cap JPD_PROGRAM_MAX); 0, or -ENOENT when there is none yet
 * (buf is then ""). Sources from index *from on are looked at; *from is moved past them. */
int jpd_program_of(const struct jp_engine *eng, uint32_t *from, char *buf);

/* The one wording of an error code in messages ("out of memory" for
 * -ENOMEM, else strerror). */
const char *jpd_error_text(int r);

#endif
