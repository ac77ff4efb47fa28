/* The agent's side of the daemon connection: attach to a long-lived jettprofd named by
 * $JETTPROFD_SOCKET, or spawn a private one over a socket pair; the HELLO/WELCOME handshake and
 * the ring handoff; bounded receives; reaping.
 *
 * Where a private daemon comes from, in order: $JETTPROFD alone when it is set; else next to
 * the host's executable (/proc/self/exe): DIR/../libexec/jettprofd and DIR/jettprofd (an
 * installed prefix), DIR/../daemon/jettprofd (this project's build tree, where jett lives in
 * runtime/); else the configured install path; else each PATH directory. A setup failure
 * leaves its whole cause in jettprof_last_reason(): every path tried with its errno, the socket
 * path and errno, what the handshake lacked, the daemon's own words for a refusal.
 *
 * The agent is a guest in the host process: it never changes signal dispositions (sends use
 * MSG_NOSIGNAL), never waits for a child other than its own daemon's pid,
 * leaks no descriptor into the daemon but its own end of the pair, and bounds every wait.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"

#ifndef JETTPROF_DAEMON_PATH
#define JETTPROF_DAEMON_PATH "/usr/local/bin/jettprofd"
#endif

extern char **environ;

/* The fd number the private daemon finds its end of the pair at. */
#define SESSION_FD 3

/* The text jettprof_last_reason() returns after a connection-stage failure: it names paths and
 * errno values, so it cannot be a static string. One per thread, like the reason pointer. */
static _Thread_local char tls_detail[1024];

/* Appends to tls_detail (cleared when `fresh`), cutting with "..." when it is full, and makes it
 * the thread's reason. */
__attribute__((format(printf, 2, 3))) static void detail(int fresh, const char *fmt, ...)
{
    size_t n = fresh ? 0 : strnlen(tls_detail, sizeof tls_detail);
    if (fresh)
        tls_detail[0] = '\0';
    if (n + 4 < sizeof tls_detail) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(tls_detail + n, sizeof tls_detail - n, fmt, ap);
        va_end(ap);
        if (w >= 0 && (size_t)w >= sizeof tls_detail - n)
            memcpy(tls_detail + sizeof tls_detail - 4, "...", 4);
    }
    jp_set_reason(tls_detail);
}

/* "ENOENT: No such file or directory". strerror() may share a buffer between threads; the GNU
 * strerror_r returns the text. */
static const char *errtext(int e, char *buf, size_t cap)
{
    char text[96];
    const char *name = strerrorname_np(e);
    snprintf(buf, cap, "%s%s%s", name ? name : "", name ? ": " : "",
             strerror_r(e, text, sizeof text));
    return buf;
}

static void set_timeouts(int fd)
{
    /* Each blocking sendmsg returns within a second on a full socket buffer, so jp_send()
     * (jp_ctl_send_timeout) can keep its overall deadline. */
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int jp_send(struct jettprof_run *run, const struct jp_ctl_msg *m, const int *fds, unsigned nfds)
{
    /* With an overall deadline: a hung daemon must never hold the program. */
    return jp_ctl_send_timeout(run->sock, m, fds, nfds, (int)JP_FINISH_TIMEOUT_MS);
}

static int attach(struct jettprof_run *run, const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path) {
        detail(1, "JETTPROFD_SOCKET=%.200s%s is too long for a unix socket (at most %zu bytes)",
               path, n > 200 ? "..." : "", sizeof sa.sun_path - 1);
        return -ECONNREFUSED;
    }
    memcpy(sa.sun_path, path, n);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char eb[128];
    if (fd < 0) {
        detail(1, "cannot create a unix socket: %s", errtext(errno, eb, sizeof eb));
        return errno == ENOMEM || errno == ENOBUFS ? -ENOMEM : -ECONNREFUSED;
    }
    int r;
    do
        r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        int e = errno;
        close(fd);
        detail(1, "JETTPROFD_SOCKET=%s: %s", path, errtext(e, eb, sizeof eb));
        return -ECONNREFUSED;
    }
    set_timeouts(fd);
    run->sock = fd;
    return 0;
}

/* Tries one candidate: 0 (spawned, *pid set), or a positive errno after noting the path and
 * the error in the reason. */
static int try_spawn(const char *label, const char *exe, posix_spawn_file_actions_t *fa,
                     posix_spawnattr_t *at, char **argv, pid_t *pid)
{
    /* A path already in the list (PATH repeats an entry, or names the install path) failed
     * already: once is enough, for the run and for the message. */
    size_t n = strlen(exe);
    for (const char *h = tls_detail; (h = strstr(h, exe)) != NULL; h += n)
        if (h > tls_detail && (h[-1] == ' ' || h[-1] == '=') && strncmp(h + n, " (", 2) == 0)
            return ENOENT;
    /* A candidate that is not there (the build tree has no libexec/) costs a whole spawn to
     * find out, a fork of this process included: ask the file system first. */
    int r = access(exe, X_OK) == 0 ? 0 : errno;
    if (r == 0)
        r = posix_spawn(pid, exe, fa, at, argv, environ); /* no shell, no PATH search */
    if (r != 0) {
        char eb[128];
        detail(0, "%s%s%s (%s)", tls_detail[0] ? ", " : "tried ", label, exe,
               errtext(r, eb, sizeof eb));
    }
    return r;
}

/* The candidates after $JETTPROFD, in order (file comment). Returns 0 when one started. */
static int spawn_search(posix_spawn_file_actions_t *fa, posix_spawnattr_t *at, char **argv,
                        pid_t *pid)
{
    char self[4096], cand[4096 + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = n > 0 ? memrchr(self, '/', (size_t)n) : NULL;
    if (slash) {
        *slash = '\0';
        static const char *const rel[] = {"/../libexec/jettprofd", "/jettprofd",
                                          "/../daemon/jettprofd"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(cand, sizeof cand, "%s%s", self, rel[i]);
            if (try_spawn("", cand, fa, at, argv, pid) == 0)
                return 0;
        }
    } else {
        detail(0, "%s/proc/self/exe (unreadable)", tls_detail[0] ? ", " : "tried ");
    }
    if (try_spawn("", JETTPROF_DAEMON_PATH, fa, at, argv, pid) == 0)
        return 0;
    /* PATH, but only absolute entries: an empty or relative one would run whatever the
     * current directory holds. */
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && p[0] == '/' && len < 4096) {
            snprintf(cand, sizeof cand, "%.*s/jettprofd", (int)len, p);
            if (try_spawn("PATH: ", cand, fa, at, argv, pid) == 0)
                return 0;
        }
        p += len + (end != NULL);
    }
    return -ENOENT;
}

static int spawn(struct jettprof_run *run)
{
    detail(1, "%s", "");
    int sv[2];
    char eb[128];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        detail(1, "cannot create a socket pair for jettprofd: %s", errtext(errno, eb, sizeof eb));
        return -ENOEXEC;
    }
    /* Move the child's end above the stdio and SESSION_FD numbers so the dup2 below always
     * copies (a dup2 onto itself would keep FD_CLOEXEC on older C libraries). */
    int child = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    close(sv[1]);
    if (child < 0) {
        detail(1, "cannot create a socket pair for jettprofd: %s", errtext(errno, eb, sizeof eb));
        close(sv[0]);
        return -ENOEXEC;
    }

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int fa_ok = posix_spawn_file_actions_init(&fa) == 0;
    int at_ok = posix_spawnattr_init(&at) == 0;
    int r = fa_ok && at_ok ? 0 : ENOMEM;
    /* The daemon's only inherited descriptors: its end of the pair (dup2 clears close-on-exec
     * on the copy), /dev/null for stdin and stdout (the program's output stays the
     * program's), and stderr, where a private daemon reports a run whose program vanished. */
    if (!r)
        r = posix_spawn_file_actions_adddup2(&fa, child, SESSION_FD);
    if (!r)
        r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!r)
        r = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    /* Host descriptors opened without O_CLOEXEC stay out of the daemon too. */
    if (!r)
        r = posix_spawn_file_actions_addclosefrom_np(&fa, SESSION_FD + 1);
#endif
    /* Its own process group, so a terminal's Ctrl-C reaches the runtime (which finalizes) and
     * not the daemon; a clean signal state whatever the host blocked or ignored. */
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    static const int reset[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD,
                                SIGUSR1, SIGUSR2, SIGALRM};
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
        sigaddset(&dfl, reset[i]);
    if (!r)
        r = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETSIGDEF);
    if (!r)
        r = posix_spawnattr_setpgroup(&at, 0);
    if (!r)
        r = posix_spawnattr_setsigmask(&at, &none);
    if (!r)
        r = posix_spawnattr_setsigdefault(&at, &dfl);
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", SESSION_FD);
    char *argv[] = {(char *)"jettprofd", (char *)"--session-fd", fdarg, NULL};
    pid_t pid = -1;
    if (r) {
        detail(1, "cannot prepare to start jettprofd: %s", errtext(r, eb, sizeof eb));
    } else {
        const char *exe = getenv("JETTPROFD");
        if (exe && *exe)
            r = try_spawn("JETTPROFD=", exe, &fa, &at, argv, &pid);
        else
            r = spawn_search(&fa, &at, argv, &pid);
    }
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    if (at_ok)
        posix_spawnattr_destroy(&at);
    close(child);
    if (r != 0) {
        close(sv[0]);
        return r == ENOMEM ? -ENOMEM : -ENOEXEC;
    }
    /* A started daemon clears the list of what was tried before it. */
    detail(1, "%s", "");
    set_timeouts(sv[0]);
    run->sock = sv[0];
    run->daemon_pid = pid;
    return 0;
}

int jp_daemon_connect(struct jettprof_run *run)
{
    int r = jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &run->dec);
    if (r < 0)
        return r;
    const char *path = getenv("JETTPROFD_SOCKET");
    if (path && *path)
        return attach(run, path);
    return spawn(run);
}

int jp_daemon_recv(struct jettprof_run *run, int timeout_ms, struct jp_ctl_msg *m,
                   const char **why)
{
    uint64_t deadline = jp_mono_ns() + (uint64_t)timeout_ms * 1000000u;
    *why = "";
    for (;;) {
        int r = jp_ctl_decoder_next(run->dec, m, why);
        if (r == 1)
            return 0;
        if (r < 0)
            return -EPROTO;
        uint64_t now = jp_mono_ns();
        if (now >= deadline) {
            *why = "jettprofd did not answer in time";
            return -ETIMEDOUT;
        }
        struct pollfd p = {.fd = run->sock, .events = POLLIN};
        int left = (int)((deadline - now + 999999u) / 1000000u);
        r = poll(&p, 1, left);
        if (r < 0 && errno != EINTR)
            return -errno;
        if (r <= 0)
            continue;
        int fds[JP_CTL_MAX_FDS];
        unsigned nfds = 0;
        /* The daemon never passes descriptors to the agent: any is a protocol error. */
        ssize_t n = jp_ctl_recv(run->sock, run->dec, fds, 0, &nfds);
        if (n == 0) {
            *why = "jettprofd closed the connection";
            return -EPIPE;
        }
        if (n < 0) {
            if (n == -ECONNRESET || n == -EPIPE) {
                *why = "jettprofd closed the connection";
                return -EPIPE;
            }
            *why = "bad control data from jettprofd";
            return n == -EMSGSIZE ? -EPROTO : (int)n;
        }
    }
}

/* Waits until `deadline` (jp_mono_ns) for our child `pid` to end and reaps it: 1 reaped (its
 * status in *st when st is not NULL), 0 still running at the deadline, -1 no longer ours to
 * wait for (a host SIGCHLD handler reaped it: ECHILD). Our child only, never waitpid(-1). It
 * sleeps on a pidfd where the kernel has them (5.3), so the wait ends when the daemon does
 * (a profiled run waits for its daemon's exit at every finish), else in naps from 50 us
 * growing to 5 ms. */
static int reap_by(pid_t pid, uint64_t deadline, int *st)
{
#ifdef SYS_pidfd_open
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0); /* close-on-exec by definition */
#else
    int pfd = -1;
#endif
    uint64_t nap = 50000u;
    int r;
    for (;;) {
        int s = 0;
        pid_t w = waitpid(pid, &s, WNOHANG);
        if (w == pid) {
            if (st)
                *st = s;
            r = 1;
            break;
        }
        if (w < 0 && errno != EINTR) {
            r = -1;
            break;
        }
        uint64_t now = jp_mono_ns();
        if (now >= deadline) {
            r = 0;
            break;
        }
        uint64_t left = deadline - now;
        if (pfd >= 0) {
            struct pollfd p = {pfd, POLLIN, 0};
            (void)poll(&p, 1, (int)((left + 999999u) / 1000000u)); /* readable: it ended */
        } else {
            uint64_t ns = nap < left ? nap : left;
            struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
            nanosleep(&ts, NULL);
            nap = nap < 2500000u ? nap * 2u : 5000000u;
        }
    }
    if (pfd >= 0)
        close(pfd);
    return r;
}

/* After the daemon hung up during the handshake: how a private daemon ended, if it has within
 * a short bound (it is reaped here then), appended to the reason. */
static void note_daemon_exit(struct jettprof_run *run)
{
    if (run->daemon_pid <= 0)
        return;
    int st = 0;
    if (reap_by(run->daemon_pid, jp_mono_ns() + 1000000000ull, &st) <= 0)
        return; /* still running (reaped later), or reaped by a host handler */
    run->daemon_pid = 0;
    if (WIFEXITED(st))
        detail(0, "; jettprofd exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        detail(0, "; jettprofd was killed by signal %d", WTERMSIG(st));
}

/* The daemon's refusal text, its first 200 bytes, is shown to the user: written by the one
 * rule for human text (common/text.h), so a daemon cannot drive the user's terminal. */
static void note_refusal(const struct jp_ctl_msg *a)
{
    size_t n = a->u.error.message_len < 200 ? a->u.error.message_len : 200;
    struct jp_buf msg = {0};
    jp_text_safe(&msg, a->u.error.message, n);
    const char *code = jp_ctl_error_name(a->u.error.code);
    detail(1, "jettprofd said: %s%s (%s)",
           !n ? "no reason given" : msg.failed ? "(out of memory)" : msg.p,
           a->u.error.message_len > n ? "..." : "", code ? code : "unknown code");
    jp_buf_free(&msg);
}

int jp_daemon_handshake(struct jettprof_run *run)
{
    struct jp_ctl_msg m = {.type = JP_CTL_HELLO};
    m.u.hello.version = JP_CTL_VERSION;
    m.u.hello.pid = (uint32_t)getpid();
    m.u.hello.mode = run->mode;
    m.u.hello.rate_hz = run->mode == JETTPROF_MODE_CPU ? run->cfg.rate_hz : 0;
    m.u.hello.threshold_bp = run->cfg.threshold_bp;
    m.u.hello.limit = run->cfg.limit;
    m.u.hello.outputs = run->cfg.outputs;
    m.u.hello.capabilities = run->caps;
    char eb[128];
    int r = jp_send(run, &m, NULL, 0);
    if (r < 0) {
        detail(1, "cannot send the hello: %s", errtext(-r, eb, sizeof eb));
        note_daemon_exit(run);
        return -EPROTO;
    }
    const char *why;
    struct jp_ctl_msg a;
    r = jp_daemon_recv(run, JP_HANDSHAKE_TIMEOUT_MS, &a, &why);
    if (r == -ETIMEDOUT) {
        detail(1, "no answer to the hello within %d ms", JP_HANDSHAKE_TIMEOUT_MS);
        return -ETIMEDOUT;
    }
    if (r == -EPIPE) {
        detail(1, "jettprofd closed the connection before answering the hello");
        note_daemon_exit(run);
        return -EPROTO;
    }
    if (r < 0) {
        detail(1, "bad answer to the hello: %s", why && *why ? why : errtext(-r, eb, sizeof eb));
        return -EPROTO;
    }
    if (a.type == JP_CTL_ERROR) {
        note_refusal(&a);
        return -ECONNABORTED;
    }
    if (a.type != JP_CTL_WELCOME) {
        const char *t = jp_ctl_type_name(a.type);
        detail(1, "jettprofd answered the hello with a %s message, not welcome",
               t ? t : "unknown");
        return -EPROTO;
    }
    /* A private daemon numbers its one run too; only a long-lived one's id means anything to
     * the user (`jettprofd show`). */
    if (run->daemon_pid <= 0)
        run->run_id = a.u.welcome.run_id;
    run->ring_cap = a.u.welcome.ring_bytes;
    return 0;
}

int jp_daemon_send_ring(struct jettprof_run *run)
{
    struct jp_ctl_msg m = {.type = JP_CTL_RING};
    m.u.ring.slot_count = run->slot_count;
    int fds[2] = {run->main.ring.fd, run->cfg.capture_fd};
    m.u.ring.has_capture = run->cfg.capture_fd >= 0;
    int r = jp_send(run, &m, fds, m.u.ring.has_capture ? 2u : 1u);
    if (r < 0) {
        jp_set_reason("jettprofd went away before taking the ring");
        return -EPROTO;
    }
    return 0;
}

int jp_daemon_worker_ring(struct jettprof_run *run, struct jp_stream *st)
{
    struct jp_ctl_msg m = {.type = JP_CTL_WORKER_RING};
    m.u.worker_ring.slot_count = st->ring.slot_count;
    int fd = st->ring.fd;
    return jp_send(run, &m, &fd, 1u);
}

void jp_daemon_close(struct jettprof_run *run)
{
    if (run->sock >= 0) {
        close(run->sock); /* a private daemon exits on EOF */
        run->sock = -1;
    }
    if (run->dec) {
        jp_ctl_decoder_free(run->dec);
        run->dec = NULL;
    }
    pid_t pid = run->daemon_pid;
    if (pid <= 0)
        return;
    run->daemon_pid = 0;
    /* Our child only, never waitpid(-1): the host's other children are not ours to reap. A
     * daemon that does not exit within the bound is killed, so no zombie outlives the run. */
    if (reap_by(pid, jp_mono_ns() + (uint64_t)JP_REAP_TIMEOUT_MS * 1000000u, NULL) != 0)
        return; /* reaped, or already reaped by a host SIGCHLD handler (ECHILD) */
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}
