/* Small helpers of the daemon: strict integer parsing for the CLI, the summary row as JSON, whole
 * writes, and the one-line stderr log (with journal priorities under systemd). */
#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "engine/view.h"
#include "jpd.h"
#include "util.h"
#include "systemd.h"

int jpd_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    if (v < lo || v > hi)
        return -ERANGE;
    *out = v;
    return 0;
}

int jpd_parse_scaled(const char *s, const struct jpd_unit *units, size_t nunits, uint64_t *out)
{
    if (!s || !*s)
        return -EINVAL;
    size_t n = strlen(s);
    uint64_t times = 1;
    for (size_t i = 0; i < nunits; i++)
        if (s[n - 1] == units[i].letter) {
            times = units[i].times;
            n--;
            break;
        }
    char digits[24];
    if (n == 0 || n >= sizeof digits)
        return n == 0 ? -EINVAL : -ERANGE;
    memcpy(digits, s, n);
    digits[n] = '\0';
    uint64_t v;
    int r = jpd_parse_u64(digits, 1, UINT64_MAX, &v);
    if (r < 0)
        return r;
    if (v > UINT64_MAX / times)
        return -ERANGE;
    *out = v * times;
    return 0;
}

int jpd_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A log line quotes what clients sent (programs, reasons, a receiver's text): the whole
 * message goes through the one rule for human text (common/text.h), so no byte of it can
 * drive the operator's terminal or split the journal's line. */
__attribute__((format(printf, 2, 0)))
static void vlog(int priority, const char *fmt, va_list ap)
{
    char msg[512];
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
        return;
    struct jp_buf line = {0};
    if (jpd_sd_stderr_is_journal())
        jp_buf_printf(&line, "<%d>", priority & 7);
    JP_BUF_LIT(&line, "jettprofd: ");
    jp_text_safe_str(&line, msg);
    JP_BUF_LIT(&line, "\n");
    /* One write per line so concurrent writers to the same terminal do not interleave it. */
    if (!line.failed)
        (void)jpd_write_all(STDERR_FILENO, line.p, line.len);
    else
        (void)jpd_write_all(STDERR_FILENO, "jettprofd: out of memory writing a log line\n", 44);
    jp_buf_free(&line);
}

void jpd_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(JPD_LOG_INFO, fmt, ap);
    va_end(ap);
}

void jpd_log_at(int priority, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(priority, fmt, ap);
    va_end(ap);
}

void jpd_summary_json(struct jp_buf *b, const struct jp_engine_summary *s)
{
    JP_BUF_LIT(b, "{\"mode\":");
    jp_json_str_or_null(b, jp_mode_name(s->mode));
    jp_buf_printf(b, ",\"records\":%llu,\"violations\":%llu", (unsigned long long)s->records,
                   (unsigned long long)s->violations);
    if (s->mode == JP_MODE_CPU)
        jp_buf_printf(b, ",\"requested_ticks\":%llu,\"recorded_samples\":%llu,"
                          "\"attributed_samples\":%llu",
                       (unsigned long long)s->requested_ticks,
                       (unsigned long long)s->recorded_samples,
                       (unsigned long long)s->attributed_samples);
    /* The repetition rows' names (allocations, resizes, bytes, peak) are kept for every mode so
     * rows of different runs line up; a CPU run simply has zeros there. Values the retention
     * budget made inexact are null, never a lower bound presented as exact. */
    jp_buf_printf(b, ",\"allocations\":%llu,\"resizes\":%llu,\"bytes\":%llu",
                   (unsigned long long)s->allocation_count, (unsigned long long)s->resize_count,
                   (unsigned long long)s->allocated_bytes);
    if (s->live_exact || s->mode != JP_MODE_MEMORY)
        jp_buf_printf(b, ",\"freed\":%llu,\"peak\":%llu,\"retained\":%llu",
                       (unsigned long long)s->freed_bytes,
                       (unsigned long long)s->peak_live_bytes,
                       (unsigned long long)s->retained_bytes);
    else
        JP_BUF_LIT(b, ",\"freed\":null,\"peak\":null,\"retained\":null");
    jp_buf_put(b, "}", 1);
}

const char *jpd_ending_word(uint32_t ending)
{
    const char *w = jp_ending_word(ending); /* protocol/records.h: the one list */
    return w ? w : "unknown";
}

const char *jpd_status_word(uint32_t status)
{
    const char *w = jp_status_word(status); /* protocol/records.h: the one list */
    return w ? w : "error";
}

int jpd_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &block, &old); /* the new thread inherits the mask */
    int r = -pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

int jpd_program_of(const struct jp_engine *eng, uint32_t *from, char *buf)
{
    uint32_t n;
    const struct jp_source *src = jp_engine_sources(eng, &n);
    buf[0] = '\0';
    for (uint32_t i = *from > 1 ? *from : 1; i < n; i++) {
        if (src[i].origin != JP_ORIGIN_PROJECT || src[i].path_len >= JPD_PROGRAM_MAX)
            continue;
        memcpy(buf, src[i].path, src[i].path_len);
        buf[src[i].path_len] = '\0';
        *from = i + 1;
        return 0;
    }
    *from = n > *from ? n : *from;
    return -ENOENT;
}

int jpd_rfc3339(int64_t unix_s, char *buf, size_t cap)
{
    if (unix_s <= 0)
        return -EINVAL;
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (!gmtime_r(&t, &tm))
        return -ERANGE;
    if (strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return -ENOSPC;
    return 0;
}

const char *jpd_error_text(int r)
{
    return r == -ENOMEM ? "out of memory" : strerror(-r);
}

int jpd_connect_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}
