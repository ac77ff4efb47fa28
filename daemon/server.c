/* The daemon object: private mode (one run on an inherited socket, on one loop), long-lived
 * mode (a listening unix socket, created or handed over by systemd; runs drained by the worker
 * pool of workers.c), signals, the runs in flight per uid and the capture directory (the runs
 * log and the `show` store are kept.c's). All of it is the main loop's, but the per-uid counts
 * (their own lock) and the capture directory's fd (fixed while the daemon runs).
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "jpd.h"
#include "server.h"
#include "session_api.h"
#include "status.h"
#include "util.h"
#include "push.h"
#include "systemd.h"

/* ---- what each uid holds (struct jpd_uid_use) ---- */

static struct jpd_flight *flight_of(struct jpd_daemon *d, uid_t uid)
{
    for (uint32_t i = 0; i < d->nflights; i++)
        if (d->flights[i].uid == uid)
            return &d->flights[i];
    return NULL;
}

struct jpd_uid_use jpd_uid_use(struct jpd_daemon *d, uid_t uid, int32_t runs, int32_t requests,
                               int64_t unread)
{
    pthread_mutex_lock(&d->flights_mu);
    struct jpd_flight *f = flight_of(d, uid);
    if (!f && d->nflights < JPD_MAX_SESSIONS) {
        f = &d->flights[d->nflights++];
        *f = (struct jpd_flight){.uid = uid};
    }
    struct jpd_uid_use now = {0};
    if (f) {
        f->use.runs += (uint32_t)runs;
        f->use.requests += (uint32_t)requests;
        f->use.unread += (uint64_t)unread;
        now = f->use;
        if (!now.runs && !now.requests && !now.unread)
            *f = d->flights[--d->nflights];
    }
    pthread_mutex_unlock(&d->flights_mu);
    return now;
}

/* ---- loop plumbing ---- */

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

static void stop_listening(struct jpd_daemon *d)
{
    if (d->listen_active) {
        d->listen_active = 0;
        uv_close((uv_handle_t *)&d->listen, on_handle_closed);
        close(d->listen_fd);
        d->listen_fd = -1;
    }
    if (d->accept_retry_active) {
        d->accept_retry_active = 0;
        uv_close((uv_handle_t *)&d->accept_retry, on_handle_closed);
    }
    if (d->created_socket) {
        unlink(d->created_socket);
        free(d->created_socket);
        d->created_socket = NULL;
    }
}

/* n sessions were freed (on the main loop, or on workers as their posts say). Private mode
 * serves exactly one run; long-lived mode ends when it was told to and the last in-flight run is
 * delivered: the workers stop, and with no handle left, uv_run returns. */
void jpd_server_sessions_gone(struct jpd_daemon *d, uint32_t n)
{
    d->nsessions -= n;
    if (d->private_mode && d->private_run_gone) {
        /* The watch socket goes with the run; its watchers were given the run's end. */
        stop_listening(d);
        if (d->nsessions)
            jpd_session_shutdown_loop(&d->main, NULL);
    }
    if ((d->private_mode && d->private_run_gone && d->nsessions == 0) ||
        (d->shutting_down && d->nsessions == 0)) {
        stop_listening(d);
        jpd_signals_stop(d);
        jpd_workers_stop(d);
    }
}

void jpd_server_session_gone(struct jpd_daemon *d, struct jpd_loop *lp)
{
    if (lp == &d->main)
        jpd_server_sessions_gone(d, 1);
    else
        jpd_post_gone(d, lp);
}

void jpd_server_stop(struct jpd_daemon *d)
{
    if (d->shutting_down)
        return;
    d->shutting_down = 1;
    d->stop_drain_until_ns = uv_hrtime() + (uint64_t)JPD_STOP_DRAIN_MS * 1000000u;
    stop_listening(d);
    if (!d->private_mode) {
        jpd_sd_notify("STOPPING=1");
        jpd_log("stopping: %u session(s) in flight", (unsigned)d->nsessions);
    }
    jpd_session_shutdown_loop(&d->main, NULL);
    jpd_workers_shutdown(d, jpd_session_shutdown_loop);
    jpd_workers_absorb(d);
    if (d->nsessions == 0)
        jpd_server_sessions_gone(d, 0);
}


static int daemon_init(struct jpd_daemon *d, uv_loop_t *loop, const struct jpd_config *cfg,
                       int private_mode)
{
    memset(d, 0, sizeof *d);
    d->loop = loop;
    d->main.d = d;
    d->main.uv = loop;
    d->main_thread = pthread_self();
    pthread_mutex_init(&d->post_mu, NULL);
    pthread_mutex_init(&d->flights_mu, NULL);
    pthread_mutex_init(&d->live_mu, NULL);
    d->start_ns = uv_hrtime();
    d->cfg = cfg;
    d->private_mode = private_mode;
    d->listen_fd = -1;
    d->runs_log_fd = -1;
    d->capture_dir_fd = -1;
    d->state_dir_fd = -1;
    d->next_run_id = 1;
    d->self_uid = geteuid();
    return jpd_signals_start(d);
}

/* The loop and the daemon on it. 0, or -errno with the reason logged (and nothing left to
 * free). */
static int start_loop(uv_loop_t *loop, struct jpd_daemon *d, const struct jpd_config *cfg,
                      int private_mode)
{
    int r = uv_loop_init(loop);
    if (r == 0) {
        r = daemon_init(d, loop, cfg, private_mode);
        if (r < 0)
            (void)uv_loop_close(loop); /* nothing was registered on it */
    }
    if (r < 0)
        jpd_log("cannot start the event loop: %s", uv_strerror(r));
    return r;
}

static int daemon_run(struct jpd_daemon *d)
{
    uv_run(d->loop, UV_RUN_DEFAULT);
    jpd_workers_join(d);
    /* Every run is delivered and queued: the queued pushes get their bounded moment. */
    jpd_push_stop(d->push);
    d->push = NULL;
    for (uint32_t i = 0; i < JPD_KEEP_RUNS; i++)
        jpd_kept_clear(&d->kept[i]);
    if (d->runs_log_fd >= 0)
        close(d->runs_log_fd);
    if (d->capture_dir_fd >= 0)
        close(d->capture_dir_fd);
    if (d->state_dir_fd >= 0) {
        d->run_id_saved = 0; /* every run has ended: the exact next id */
        jpd_state_save_next_id(d);
        close(d->state_dir_fd);
    }
    int r = uv_loop_close(d->loop);
    pthread_mutex_destroy(&d->post_mu);
    pthread_mutex_destroy(&d->flights_mu);
    pthread_mutex_destroy(&d->live_mu);
    if (r < 0) {
        jpd_log("internal: handles left open at exit");
        return 1;
    }
    return d->exit_code;
}

/* Opens --runs-log and --capture-dir. 0 or -errno, with the command-line error (naming the
 * option and its path) on stderr. */
static int open_dirs(struct jpd_daemon *d, const struct jpd_config *cfg)
{
    if (cfg->runs_log) {
        d->runs_log_fd = open(cfg->runs_log,
                              O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (d->runs_log_fd < 0) {
            int e = errno;
            fprintf(stderr, "jettprofd: --runs-log: cannot open %s: %s\n", cfg->runs_log,
                    strerror(e));
            return -e;
        }
    }
    int r = jpd_capture_dir_open(d, cfg->capture_dir);
    if (r < 0)
        return r;
    if (cfg->state_dir) {
        d->state_dir_fd = open(cfg->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d->state_dir_fd < 0) {
            int e = errno;
            fprintf(stderr, "jettprofd: --state-dir: cannot open %s: %s\n", cfg->state_dir,
                    e == ENOTDIR ? "not a directory (or a symbolic link to one)" : strerror(e));
            return -e;
        }
    }
    return 0;
}

/* The poll on d->listen_fd (and the timer that retries accept): 0, or a libuv error with the
 * fd closed. Accepting starts with uv_poll_start(on_accept). */
static int watch_listener(struct jpd_daemon *d)
{
    int r = uv_poll_init(d->loop, &d->listen, d->listen_fd);
    if (r < 0) {
        close(d->listen_fd);
        d->listen_fd = -1;
        return r;
    }
    d->listen.data = d;
    d->listen_active = 1;
    uv_timer_init(d->loop, &d->accept_retry);
    d->accept_retry.data = d;
    d->accept_retry_active = 1;
    return 0;
}

static int bind_socket(struct jpd_daemon *d, const char *path, int quiet);
static void on_accept(uv_poll_t *h, int status, int events);

int jpd_watch_path(uid_t uid, uint32_t pid, int where, int create, char *buf, size_t cap)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    const char *rt = getenv("XDG_RUNTIME_DIR");
    int n;
    if (where == 0) {
        if (!rt || rt[0] != '/')
            return -ENOENT;
        n = snprintf(dir, sizeof dir, "%s/jettprof", rt);
    } else {
        n = snprintf(dir, sizeof dir, "/tmp/jettprof-%u", (unsigned)uid);
    }
    if (n < 0 || (size_t)n >= sizeof dir)
        return -ENAMETOOLONG;
    if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    struct stat st;
    if (lstat(dir, &st) < 0)
        return -errno;
    /* /tmp is everyone's: a directory someone else made, or one others may enter, is not
     * where this user's run is watched. */
    if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077))
        return -EPERM;
    n = snprintf(buf, cap, "%s/%u.sock", dir, (unsigned)pid);
    return n < 0 || (size_t)n >= cap || (size_t)n >= sizeof dir ? -ENAMETOOLONG : 0;
}

/* The private run's watch socket (jpd_watch_path): its own user may ask it for the run's
 * snapshot and frames while it runs. Best effort and silent: a run that cannot be watched
 * runs the same. */
static void listen_for_watchers(struct jpd_daemon *d, uint32_t pid)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int fd = -1;
    for (int where = 0; where < 2 && fd < 0; where++)
        if (jpd_watch_path(d->self_uid, pid, where, 1, path, sizeof path) == 0)
            fd = bind_socket(d, path, 1);
    if (fd < 0)
        return;
    d->listen_fd = fd;
    if (watch_listener(d) == 0)
        uv_poll_start(&d->listen, UV_READABLE, on_accept);
    else
        stop_listening(d); /* unlinks it */
}

/* ---- private mode ---- */

int jpd_run_private(int fd)
{
    static const struct jpd_config cfg = {.allow_group = -1, .max_runs_per_uid = 1,
                                          .max_ring_bytes = UINT64_MAX,
                                          .max_run_ring_bytes = UINT64_MAX,
                                          .max_cpu_budget = JP_DEFAULT_CPU_BUDGET,
                                          .max_retention_budget = JP_DEFAULT_RETENTION_BUDGET,
                                          .max_export_bytes = JP_CTL_MAX_EXPORT};
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        fprintf(stderr, "jettprofd: --session-fd: %d is not an open socket\n", fd);
        return 2;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        fprintf(stderr, "jettprofd: --session-fd: cannot configure fd %d: %s\n", fd,
                strerror(errno));
        return 1;
    }
    struct ucred uc;
    socklen_t ul = sizeof uc;
    struct jpd_peer peer = {.pid = 0, .uid = getuid(), .gid = getgid()};
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0) {
        peer.pid = uc.pid;
        peer.uid = uc.uid;
        peer.gid = uc.gid;
    }
    uv_loop_t loop;
    struct jpd_daemon d;
    int r = start_loop(&loop, &d, &cfg, 1);
    if (r < 0) {
        close(fd);
        return 1;
    }
    r = jpd_session_start(&d, fd, &peer, 0);
    if (r < 0) {
        jpd_log("cannot serve the session: %s", strerror(-r));
        jpd_signals_stop(&d);
        d.exit_code = 1;
    } else if (peer.pid > 0) {
        listen_for_watchers(&d, (uint32_t)peer.pid);
    }
    return daemon_run(&d);
}

/* ---- long-lived mode ---- */

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux 4.13 */
#endif

/* 1 when the peer is a member of gid through its supplementary groups (SO_PEERGROUPS: the
 * groups at connect time, as SO_PEERCRED's ids), 0 when not, -errno when the kernel cannot
 * say (too old for SO_PEERGROUPS: -ENOPROTOOPT). */
static int peer_in_group(int fd, gid_t gid)
{
    gid_t small[64], *g = small;
    socklen_t len = sizeof small;
    int r = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len);
    if (r < 0 && errno == ERANGE && len <= 65536u * sizeof(gid_t)) {
        /* len is now what the kernel needs; NGROUPS_MAX (65536) bounds it */
        g = malloc(len);
        if (!g)
            return -ENOMEM;
        r = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len);
    }
    int found = r < 0 ? -errno : 0;
    for (socklen_t i = 0; r == 0 && i < len / sizeof(gid_t); i++)
        found |= g[i] == gid;
    if (g != small)
        free(g);
    return found;
}

static int peer_allowed(const struct jpd_daemon *d, int fd, const struct ucred *uc)
{
    if (d->private_mode)
        return uc->uid == d->self_uid; /* a private run is its own user's, root's neither */
    if (uc->uid == 0 || uc->uid == d->self_uid)
        return 1;
    if (d->cfg->allow_group < 0)
        return 0;
    gid_t want = (gid_t)d->cfg->allow_group;
    if (uc->gid == want)
        return 1;
    /* A user added to the group the usual way (useradd -G) has it as a supplementary one. */
    int r = peer_in_group(fd, want);
    if (r < 0)
        jpd_log("cannot read the supplementary groups of uid %u (%s): only its primary group "
                "counts for --allow-group", (unsigned)uc->uid, strerror(-r));
    return r > 0;
}

static void on_accept(uv_poll_t *h, int status, int events);

static void on_accept_retry(uv_timer_t *t)
{
    struct jpd_daemon *d = t->data;
    if (d->listen_active)
        uv_poll_start(&d->listen, UV_READABLE, on_accept);
}

static void on_accept(uv_poll_t *h, int status, int events)
{
    struct jpd_daemon *d = h->data;
    (void)events;
    if (status < 0 || d->shutting_down)
        return;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Level-triggered: pause instead of spinning on a full fd table. */
                jpd_log("cannot accept: %s; pausing", strerror(errno));
                uv_poll_stop(&d->listen);
                uv_timer_start(&d->accept_retry, on_accept_retry, 100, 0);
            }
            return;
        }
        struct ucred uc;
        socklen_t ul = sizeof uc;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0) {
            close(fd);
            continue;
        }
        struct jpd_peer peer = {.pid = uc.pid, .uid = uc.uid, .gid = uc.gid};
        int r;
        jpd_workers_absorb(d); /* sessions freed on workers no longer count */
        int allowed = peer_allowed(d, fd, &uc);
        if (!allowed || d->nsessions >= JPD_MAX_SESSIONS || jpd_prehello_full(d, uc.uid))
            jpd_live_refused(d);
        if (!allowed) {
            if (!d->private_mode) /* private: stderr is the program's user's terminal */
                jpd_log("refused a connection from uid %u", (unsigned)uc.uid);
            r = jpd_session_refuse(d, fd, &peer, JP_CTLE_PERMISSION_DENIED,
                                   "this user may not attach to this daemon");
        } else if (d->nsessions >= JPD_MAX_SESSIONS) {
            r = jpd_session_refuse(d, fd, &peer, JP_CTLE_TOO_MANY_RUNS,
                                   "the daemon serves too many connections");
        } else if (jpd_prehello_full(d, uc.uid)) {
            r = jpd_session_refuse(d, fd, &peer, JP_CTLE_TOO_MANY_RUNS,
                                   "too many connections waiting for their hello");
        } else {
            r = jpd_session_start(d, fd, &peer, d->private_mode);
        }
        if (r < 0 && !d->private_mode)
            jpd_log("cannot start a session: %s", strerror(-r));
    }
}

const char *jpd_default_socket(char *buf, size_t cap)
{
    const char *env = getenv("JETTPROFD_SOCKET");
    if (env && *env)
        return env;
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (geteuid() != 0 && rt && *rt) {
        snprintf(buf, cap, "%s/jettprofd.sock", rt);
        return buf;
    }
    return "/run/jettprofd.sock";
}

static int check_listener(int fd)
{
    int type = 0, acc = 0;
    socklen_t l = sizeof type;
    struct sockaddr_un sa;
    socklen_t sl = sizeof sa;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM)
        return -ENOTSOCK;
    l = sizeof acc;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) < 0 || !acc)
        return -EINVAL;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) < 0 || sa.sun_family != AF_UNIX)
        return -EAFNOSUPPORT;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -errno;
    return 0;
}

/* Binds and listens on path (--socket or the default; a private daemon's watch socket). The
 * fd, or -errno with the command-line error (naming the option and the path) on stderr unless
 * quiet (a private daemon's stderr is its program's). */
#define say(...) (quiet ? (void)0 : (void)fprintf(stderr, __VA_ARGS__))
static int bind_socket(struct jpd_daemon *d, const char *path, int quiet)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        say("jettprofd: --socket: path is too long for a unix socket\n");
        return -ENAMETOOLONG;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        if (!quiet)
            jpd_log("cannot create a socket: %s", strerror(e));
        return -e;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            say("jettprofd: --socket: %s exists and is not a socket\n", path);
            close(fd);
            return -EEXIST;
        }
        /* A socket nobody listens on is what a crashed daemon leaves; a live one is not ours. */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            say("jettprofd: --socket: another daemon listens on %s\n", path);
            close(fd);
            return -EADDRINUSE;
        }
        unlink(path);
    }
    /* Restrictive from the first instant: the umask covers the window before chmod. */
    mode_t mode = d->cfg->allow_group >= 0 ? 0660 : 0600;
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    umask(old);
    if (r < 0) {
        say("jettprofd: --socket: cannot bind %s: %s\n", path, strerror(e));
        close(fd);
        return -e;
    }
    if (d->cfg->allow_group >= 0 && chown(path, (uid_t)-1, (gid_t)d->cfg->allow_group) < 0) {
        e = errno;
        say("jettprofd: --allow-group: cannot give the socket to group %d: %s\n",
                d->cfg->allow_group, strerror(e));
        unlink(path);
        close(fd);
        return -e;
    }
    if (chmod(path, mode) < 0 || listen(fd, 128) < 0) {
        e = errno;
        say("jettprofd: --socket: cannot listen on %s: %s\n", path, strerror(e));
        unlink(path);
        close(fd);
        return -e;
    }
    d->created_socket = strdup(path);
    if (!d->created_socket) {
        if (!quiet)
            jpd_log("out of memory");
        unlink(path);
        close(fd);
        return -ENOMEM;
    }
    return fd;
}
#undef say

int jpd_run_serve(const struct jpd_config *cfg)
{
    uv_loop_t loop;
    struct jpd_daemon d;
    int r = start_loop(&loop, &d, cfg, 0);
    if (r < 0)
        return 1;
    int fd = jpd_sd_listen_socket();
    if (fd >= 0) {
        r = check_listener(fd);
        if (r < 0) {
            jpd_log("the socket systemd passed is not a listening unix stream socket");
            close(fd);
            goto fail;
        }
    } else {
        char buf[sizeof(((struct sockaddr_un *)0)->sun_path) + 32];
        const char *path = cfg->socket_path ? cfg->socket_path
                                            : jpd_default_socket(buf, sizeof buf);
        fd = bind_socket(&d, path, 0);
        if (fd < 0)
            goto fail;
    }
    d.listen_fd = fd;
    if (open_dirs(&d, cfg) < 0) {
        close(fd);
        d.listen_fd = -1;
        goto fail;
    }
    jpd_capture_prune(&d);
    jpd_state_load(&d, jpd_kept_load);
    r = watch_listener(&d);
    if (r < 0) {
        jpd_log("cannot watch the listening socket: %s", uv_strerror(r));
        goto fail;
    }
    if (cfg->push && (r = jpd_push_start(cfg->push, &d.push)) < 0) {
        jpd_log("cannot start the push thread: %s", jpd_error_text(r));
        stop_listening(&d);
        goto fail;
    }
    r = jpd_workers_start(&d, cfg->workers, jpd_server_sessions_gone);
    if (r < 0) {
        jpd_log("cannot start the worker threads: %s", strerror(-r));
        stop_listening(&d);
        goto fail;
    }
    uv_poll_start(&d.listen, UV_READABLE, on_accept);
    /* The operator's first question is where: the socket's own name, whoever bound it. */
    struct sockaddr_un self = {0};
    socklen_t self_len = sizeof self;
    if (getsockname(fd, (struct sockaddr *)&self, &self_len) < 0 || !self.sun_path[0] ||
        self_len <= offsetof(struct sockaddr_un, sun_path))
        strcpy(self.sun_path, "an unnamed socket");
    self.sun_path[sizeof self.sun_path - 1] = '\0';
    jpd_log("serving on %s with %u worker(s)", self.sun_path, (unsigned)d.nworkers);
    struct jpd_push_stats ps;
    if (jpd_push_stats(d.push, &ps))
        jpd_log("pushing each finished run's pprof to %s", ps.target);
    jpd_sd_notify("READY=1");
    return daemon_run(&d);
fail:
    if (d.created_socket) {
        unlink(d.created_socket);
        free(d.created_socket);
        d.created_socket = NULL;
    }
    jpd_signals_stop(&d);
    d.exit_code = 1;
    return daemon_run(&d);
}
