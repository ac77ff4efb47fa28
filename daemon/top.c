/* `jettprofd top`: a live view of one run, refreshed every interval.
 *
 * It keeps one connection to the daemon (a serving daemon's socket, or a private run's watch
 * socket with --pid) and asks it for a frame (TOP) once an interval. A frame has the run's
 * figures, its timeline and the rows with the most of any value; what changed in the last
 * interval (CPU share of the interval, memory change of live bytes and bytes allocated) is the
 * difference of two frames, worked out here. When the run ends the daemon sends its final
 * profile unasked: top prints it and says so.
 *
 * On a terminal it draws in place (the alternate screen, the cursor hidden, input unbuffered
 * for the keys) and gives the terminal back as it was on every way out: q, SIGINT, SIGTERM,
 * SIGHUP, the run's end, an error. With --batch, or when stdout is not a terminal, it writes
 * one plain frame per interval and no escape code. Every text that came from the daemon (the
 * program, names, paths, the final profile) goes through the one terminal-safe rule
 * (common/text.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/text.h"
#include "commands.h"
#include "jpd.h"
#include "render/report.h"
#include "server.h"
#include "top.h"
#include "util.h"

#define TOP_ROWS 300u         /* rows asked for: any sort's leaders are among them */
#define INTERVAL_MIN_MS 100u
#define INTERVAL_MAX_MS 60000u

/* The intervals + and - step through. */
static const uint32_t steps_ms[] = {100, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000};
#define NSTEPS (sizeof steps_ms / sizeof steps_ms[0])

/* ---- the terminal ---- */

static volatile sig_atomic_t got_signal, got_winch;
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int e = errno;
    if (sig == SIGWINCH)
        got_winch = 1;
    else
        got_signal = sig;
    if (sig_pipe[1] >= 0)
        (void)!write(sig_pipe[1], "", 1);
    errno = e;
}

static struct termios saved_tio;
static int tio_saved;

static void term_enter(void)
{
    if (tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tio_saved = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    static const char enter[] = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
    (void)jpd_write_all(STDOUT_FILENO, enter, sizeof enter - 1);
}

static void term_leave(void)
{
    static const char leave[] = "\x1b[?25h\x1b[?1049l";
    (void)jpd_write_all(STDOUT_FILENO, leave, sizeof leave - 1);
    if (tio_saved)
        (void)tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
    tio_saved = 0;
}

static void term_size(struct view *vw)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        vw->width = ws.ws_col;
        vw->height = ws.ws_row;
    } else {
        vw->width = 120;
        vw->height = 40;
    }
}

/* ---- the connection ---- */


/* The next message on fd, waiting at most until deadline_ms (monotonic) while watching stdin
 * for keys and the signal pipe: 1 with *m, 0 when the wait ended first (a key, a signal or
 * the time), -EPIPE when the daemon closed, -EPROTO with *why. */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct conn {
    int fd;
    struct jp_ctl_decoder *dec;
};

static int next_message(struct conn *c, struct jp_ctl_msg *m, const char **why, int keys,
                        uint64_t deadline, int *key)
{
    *key = -1;
    for (;;) {
        int r = jp_ctl_decoder_next(c->dec, m, why);
        if (r != 0)
            return r < 0 ? -EPROTO : 1;
        uint64_t now = now_ms();
        if (now >= deadline || got_signal || got_winch)
            return 0;
        struct pollfd p[3] = {{.fd = c->fd, .events = POLLIN},
                              {.fd = sig_pipe[0], .events = POLLIN},
                              {.fd = keys ? STDIN_FILENO : -1, .events = POLLIN}};
        int n = poll(p, 3, (int)(deadline - now));
        if (n < 0 && errno != EINTR)
            return -errno;
        if (n <= 0)
            continue;
        if (p[1].revents) {
            char drain[64];
            (void)!read(sig_pipe[0], drain, sizeof drain);
        }
        if (p[2].revents & POLLIN) {
            unsigned char ch;
            if (read(STDIN_FILENO, &ch, 1) == 1) {
                *key = ch;
                return 0;
            }
        }
        if (p[0].revents) {
            uint8_t buf[65536];
            ssize_t got = read(c->fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return -EPIPE;
            if (jp_ctl_decoder_feed(c->dec, buf, (size_t)got) < 0) {
                *why = "the daemon's answer is too large";
                return -EPROTO;
            }
        }
    }
}

/* Prints text (the final profile) line by line through the terminal-safe rule. */
static void print_safe_lines(const char *s, size_t n)
{
    struct jp_buf b = {0};
    size_t from = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '\n') {
            if (i > from || i < n) {
                jp_text_safe(&b, s + from, i - from);
                if (i < n)
                    jp_buf_put(&b, "\n", 1);
            }
            from = i + 1;
        }
    if (b.p)
        (void)jpd_write_all(STDOUT_FILENO, b.p, b.len);
    jp_buf_free(&b);
}

struct top_args {
    const char *socket_path;
    uint64_t run_id;
    int have_run, have_pid;
    uint32_t pid;
    uint32_t interval_ms;
    int batch;
    uint64_t frames; /* 0: until the run ends or q */
};

static int run_top(const struct top_args *a, const char *where)
{
    struct view vw = {.interval_ms = a->interval_ms};
    vw.tty = !a->batch && isatty(STDOUT_FILENO);
    int keys = vw.tty && isatty(STDIN_FILENO);
    if (vw.tty)
        term_size(&vw);
    int fd = jpd_connect_unix(where);
    if (fd < 0) {
        if (a->have_pid)
            fprintf(stderr, "jettprofd: top: no run of pid %u that you may watch (%s: %s)\n",
                    (unsigned)a->pid, where, strerror(-fd));
        else
            fprintf(stderr, "jettprofd: top: cannot reach the daemon at %s: %s\n", where,
                    strerror(-fd));
        return 1;
    }
    struct conn c = {.fd = fd};
    if (jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &c.dec) < 0 || pipe2(sig_pipe, O_CLOEXEC) < 0) {
        fprintf(stderr, "jettprofd: top: out of memory\n");
        close(fd);
        jp_ctl_decoder_free(c.dec);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (vw.tty)
        term_enter();

    struct frame cur = {0}, prev = {0}, frozen = {0};
    int have_cur = 0, have_prev = 0, rc = 0, quit = 0, ended = 0;
    uint64_t shown = 0;
    struct jp_buf err = {0}, final_text = {0};
    uint64_t next_ask = now_ms();
    int asked = 0;
    while (!quit) {
        if (!asked && now_ms() >= next_ask) {
            struct jp_ctl_msg q = {.type = JP_CTL_TOP};
            q.u.top.run_id = a->have_pid ? 0 : a->run_id;
            q.u.top.rows = TOP_ROWS;
            int r = jp_ctl_send(fd, &q, NULL, 0);
            if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
                jp_buf_printf(&err, "cannot ask the daemon: %s", strerror(-r));
                rc = 1;
                break;
            }
            asked = 1;
            next_ask = now_ms() + vw.interval_ms;
        }
        struct jp_ctl_msg m;
        const char *why = NULL;
        int key = -1;
        int r = next_message(&c, &m, &why, keys, asked ? now_ms() + 60000u : next_ask, &key);
        if (got_signal) {
            quit = 1;
            break;
        }
        int redraw = 0;
        if (got_winch) {
            got_winch = 0;
            term_size(&vw);
            redraw = have_cur;
        }
        if (key >= 0) {
            uint32_t i = 0;
            while (i + 1 < NSTEPS && steps_ms[i] < vw.interval_ms)
                i++;
            if (key == 'q' || key == 'Q')
                quit = 1;
            else if (key == ' ') {
                /* Paused, the table stays as it is while the header keeps running. */
                vw.paused = !vw.paused;
                jpd_top_frame_free(&frozen);
                vw.table = NULL;
                if (vw.paused && have_cur && jpd_top_frame_copy(&cur, &frozen) == 0)
                    vw.table = &frozen;
            } else if (key == 's' || key == 'S') {
                vw.sort++;
            } else if (key == '+') {
                vw.interval_ms = i + 1 < NSTEPS ? steps_ms[i + 1] : steps_ms[NSTEPS - 1];
            } else if (key == '-') {
                vw.interval_ms = i > 0 && steps_ms[i] >= vw.interval_ms ? steps_ms[i - 1]
                                                                         : steps_ms[0];
            }
            redraw = !quit;
        }
        if (r < 0) {
            if (r == -EPIPE)
                jp_buf_printf(&err, "the daemon closed the connection%s",
                              a->have_pid ? ": the run is gone" : "");
            else
                jp_buf_printf(&err, "malformed answer: %s", why ? why : strerror(-r));
            rc = 1;
            break;
        }
        if (r == 1) {
            if (m.type == JP_CTL_TOP_FRAME) {
                asked = 0;
                if (have_cur) {
                    jpd_top_frame_free(&prev);
                    prev = cur;
                    have_prev = 1;
                    memset(&cur, 0, sizeof cur);
                }
                if (jpd_top_frame_take(&m, have_prev ? &prev : NULL, &cur) < 0) {
                    JP_BUF_LIT(&err, "out of memory");
                    rc = 1;
                    break;
                }
                have_cur = 1;
                redraw = 1;
            } else if (m.type == JP_CTL_RESULT) {
                ended = 1;
                jp_buf_put(&final_text, m.u.result.human, m.u.result.human_len);
                break;
            } else if (m.type == JP_CTL_ERROR) {
                if (m.u.error.code == JP_CTLE_NO_SUCH_RUN && have_cur)
                    ended = 2; /* it ended between two frames */
                jp_buf_printf(&err, "%s: ", jp_ctl_error_name(m.u.error.code));
                jp_text_safe(&err, m.u.error.message, m.u.error.message_len);
                rc = ended ? 0 : 1;
                break;
            } else {
                jp_buf_printf(&err, "unexpected %s message", jp_ctl_type_name(m.type));
                rc = 1;
                break;
            }
        }
        if (redraw && have_cur) {
            struct jp_buf b = {0};
            if (vw.tty)
                JP_BUF_LIT(&b, "\x1b[H");
            else if (shown)
                JP_BUF_LIT(&b, "\n");
            jpd_top_draw(&b, &cur, have_prev ? &prev : NULL, &vw, 0);
            if (vw.tty)
                JP_BUF_LIT(&b, "\x1b[J");
            if (b.p && !b.failed)
                (void)jpd_write_all(STDOUT_FILENO, b.p, b.len);
            jp_buf_free(&b);
            if (r == 1 && m.type == JP_CTL_TOP_FRAME && ++shown == a->frames)
                quit = 1; /* --frames N: the N-th frame drawn */
        }
    }
    if (vw.tty)
        term_leave();
    if (ended == 1) {
        printf("jettprofd top: run %" PRIu64 " has ended; its final profile:\n\n",
               have_cur ? cur.run_id : a->run_id);
        fflush(stdout);
        print_safe_lines(final_text.p ? final_text.p : "", final_text.len);
    } else if (ended == 2) {
        printf("jettprofd top: run %" PRIu64 " has ended", cur.run_id);
        if (!a->have_pid)
            printf("; its final profile: jettprofd show %" PRIu64, cur.run_id);
        printf("\n");
    } else if (err.p) {
        fprintf(stderr, "jettprofd: top: %s\n", err.p);
    } else if (got_signal) {
        rc = 128 + got_signal;
    }
    jp_buf_free(&err);
    jp_buf_free(&final_text);
    jpd_top_frame_free(&cur);
    jpd_top_frame_free(&prev);
    jpd_top_frame_free(&frozen);
    jp_ctl_decoder_free(c.dec);
    close(fd);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    sig_pipe[0] = sig_pipe[1] = -1;
    return rc;
}

static int bad(const char *what, const char *arg)
{
    fprintf(stderr, "jettprofd: top: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "usage: jettprofd top [RUN_ID] [--socket PATH | --pid PID] "
                    "[--interval SECONDS] [--batch] [--frames N]\n");
    return 2;
}

static int list_answer(const struct jp_ctl_msg *a, void *arg)
{
    (void)arg;
    if (a->type != JP_CTL_STATUS_REPLY)
        return -1;
    printf("Name a run: jettprofd top RUN_ID. The daemon's runs in flight that you may see:\n\n");
    fflush(stdout);
    print_safe_lines(a->u.status_reply.text, a->u.status_reply.text_len);
    return 0;
}

int jpd_cmd_top(int argc, char **argv)
{
    struct top_args a = {.interval_ms = 1000};
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--batch")) {
            a.batch = 1;
        } else if (!strcmp(s, "--socket") || !strcmp(s, "--pid") || !strcmp(s, "--interval") ||
                   !strcmp(s, "--frames")) {
            if (i + 1 >= argc)
                return bad("missing value for", s);
            const char *v = argv[++i];
            uint64_t n;
            if (!strcmp(s, "--socket")) {
                a.socket_path = v;
            } else if (!strcmp(s, "--pid")) {
                if (jpd_parse_u64(v, 1, INT32_MAX, &n) < 0)
                    return bad("--pid must be a process id, not", v);
                a.pid = (uint32_t)n;
                a.have_pid = 1;
            } else if (!strcmp(s, "--frames")) {
                if (jpd_parse_u64(v, 1, UINT32_MAX, &n) < 0)
                    return bad("--frames must be a positive integer, not", v);
                a.frames = n;
            } else {
                char *end = NULL;
                errno = 0;
                double sec = strtod(v, &end);
                if (errno || end == v || *end || !(sec >= INTERVAL_MIN_MS / 1000.0) ||
                    sec > INTERVAL_MAX_MS / 1000.0)
                    return bad("--interval must be seconds from 0.1 to 60, not", v);
                a.interval_ms = (uint32_t)jpd_top_round(sec * 1000.0);
            }
        } else if (s[0] == '-') {
            return bad("unknown option", s);
        } else if (a.have_run) {
            return bad("more than one RUN_ID given", s);
        } else {
            if (jpd_parse_u64(s, 1, UINT64_MAX, &a.run_id) < 0)
                return bad("RUN_ID must be a positive integer, not", s);
            a.have_run = 1;
        }
    }
    if (a.have_pid && (a.socket_path || a.have_run))
        return bad("--pid watches a private run: it takes neither --socket nor a RUN_ID", NULL);
    if (a.have_pid) {
        char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
        char first[sizeof path] = "";
        int r = -ENOENT;
        for (int where = 0; where < 2; where++) {
            r = jpd_watch_path(getuid(), a.pid, where, 0, path, sizeof path);
            if (r == 0 && !first[0])
                memcpy(first, path, sizeof path);
            if (r == 0 && access(path, F_OK) == 0)
                return run_top(&a, path);
        }
        fprintf(stderr, "jettprofd: top: no run of pid %u that you may watch (%s)\n",
                (unsigned)a.pid,
                first[0] ? "no watch socket of that pid" : "no private directory to look in");
        return 1;
    }
    char buf[160];
    const char *sock = a.socket_path ? a.socket_path : jpd_default_socket(buf, sizeof buf);
    if (!a.have_run) {
        struct jp_ctl_msg m = {.type = JP_CTL_STATUS};
        m.u.status.format = JP_STATUS_FMT_HUMAN;
        return jpd_ask("top", sock, &m, list_answer, NULL);
    }
    return run_top(&a, sock);
}
