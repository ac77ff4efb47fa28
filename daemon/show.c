/* The clients of a long-lived daemon: `jettprofd show RUN_ID` (a run it kept, printed on
 * stdout), `jettprofd status` and `jettprofd runs`; each prints the daemon's refusal on
 * stderr. Each returns the exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "jpd.h"
#include "commands.h"
#include "util.h"

int jpd_ask(const char *cmd, const char *socket_path, const struct jp_ctl_msg *m,
            int (*answer)(const struct jp_ctl_msg *a, void *arg), void *arg)
{
    int fd = jpd_connect_unix(socket_path);
    if (fd == -ENAMETOOLONG) {
        fprintf(stderr, "jettprofd: %s: --socket path is too long\n", cmd);
        return 2;
    }
    if (fd < 0) {
        fprintf(stderr, "jettprofd: %s: cannot reach the daemon at %s: %s\n", cmd, socket_path,
                strerror(-fd));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    int r = jp_ctl_send(fd, m, NULL, 0);
    /* A daemon that refuses us answers ERROR and closes, maybe before the request is written:
     * its answer is still to be read, and says more than the broken pipe. */
    if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
        fprintf(stderr, "jettprofd: %s: cannot send the request: %s\n", cmd, strerror(-r));
        close(fd);
        return 1;
    }
    struct jp_ctl_decoder *dec;
    if (jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &dec) < 0) {
        fprintf(stderr, "jettprofd: %s: out of memory\n", cmd);
        close(fd);
        return 1;
    }
    int rc = 1;
    for (;;) {
        uint8_t buf[65536];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (r < 0)
                fprintf(stderr, "jettprofd: %s: cannot send the request: %s\n", cmd,
                        strerror(-r));
            else
                fprintf(stderr, "jettprofd: %s: the daemon closed the connection without "
                                "an answer\n", cmd);
            break;
        }
        if (jp_ctl_decoder_feed(dec, buf, (size_t)n) < 0) {
            fprintf(stderr, "jettprofd: %s: the daemon's answer is too large\n", cmd);
            break;
        }
        struct jp_ctl_msg a;
        const char *why = NULL;
        r = jp_ctl_decoder_next(dec, &a, &why);
        if (r == 0)
            continue;
        if (r < 0) {
            fprintf(stderr, "jettprofd: %s: malformed answer: %s\n", cmd, why ? why : "?");
        } else if (a.type == JP_CTL_ERROR) {
            fprintf(stderr, "jettprofd: %s: %s: %.*s\n", cmd, jp_ctl_error_name(a.u.error.code),
                    (int)a.u.error.message_len, a.u.error.message);
        } else if ((rc = answer(&a, arg)) < 0) {
            rc = 1;
            fprintf(stderr, "jettprofd: %s: unexpected %s message\n", cmd,
                    jp_ctl_type_name(a.type));
        }
        break;
    }
    jp_ctl_decoder_free(dec);
    close(fd);
    return rc;
}

static int show_answer(const struct jp_ctl_msg *a, void *arg)
{
    uint32_t outputs = *(const uint32_t *)arg;
    if (a->type != JP_CTL_RESULT)
        return -1;
    const char *text = outputs == JP_OUT_TOON ? a->u.result.toon : a->u.result.human;
    size_t len = outputs == JP_OUT_TOON ? a->u.result.toon_len : a->u.result.human_len;
    return jpd_write_all(STDOUT_FILENO, text, len) < 0 ? 1 : 0;
}

int jpd_show(const char *socket_path, uint64_t run_id, uint32_t outputs)
{
    struct jp_ctl_msg m = {.type = JP_CTL_SHOW};
    m.u.show.run_id = run_id;
    m.u.show.outputs = outputs;
    return jpd_ask("show", socket_path, &m, show_answer, &outputs);
}

/* Writes text to path atomically: a temp file beside it (0644: a textfile collector reads it),
 * then rename. 0 or -errno. */
static int write_atomic(const char *path, const char *text, size_t len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int r = jpd_write_all(fd, text, len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    return r;
}

/* A STATUS_REPLY's text to arg's path (NULL: stdout). */
static int reply_answer(const struct jp_ctl_msg *a, void *arg)
{
    const char *out_path = arg;
    if (a->type != JP_CTL_STATUS_REPLY)
        return -1;
    const char *t = a->u.status_reply.text;
    size_t len = a->u.status_reply.text_len;
    int r = out_path ? write_atomic(out_path, t, len) : jpd_write_all(STDOUT_FILENO, t, len);
    if (r < 0)
        fprintf(stderr, "jettprofd: cannot write %s: %s\n",
                out_path ? out_path : "standard output", jpd_error_text(r));
    return r < 0 ? 1 : 0;
}

int jpd_status(const char *socket_path, uint32_t format, const char *out_path)
{
    struct jp_ctl_msg m = {.type = JP_CTL_STATUS};
    m.u.status.format = format;
    return jpd_ask("status", socket_path, &m, reply_answer, (void *)out_path);
}

int jpd_runs(const char *socket_path, uint32_t format, uint32_t limit)
{
    struct jp_ctl_msg m = {.type = JP_CTL_RUNS};
    m.u.runs.format = format;
    m.u.runs.limit = limit;
    return jpd_ask("runs", socket_path, &m, reply_answer, NULL);
}
