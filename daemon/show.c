/* `jettprofd show RUN_ID`: the client that asks a long-lived daemon for a run it kept and
 * prints the profile on stdout, or the daemon's refusal on stderr. Returns the exit status.
 */
#include <errno.h>
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
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof sa.sun_path) {
        fprintf(stderr, "jettprofd: %s: --socket path is too long\n", cmd);
        return 2;
    }
    strcpy(sa.sun_path, socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        fprintf(stderr, "jettprofd: %s: cannot reach the daemon at %s: %s\n", cmd, socket_path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
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
