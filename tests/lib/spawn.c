/* Children of a test that cannot outlive it (see spawn.h). */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The children not yet reaped through tl_wait. A plain waitpid elsewhere leaves its pid here;
 * tl_kill_children tells those apart with waitpid(WNOHANG), which fails with ECHILD for a pid
 * that is no longer our child, so a reused pid is never signalled. */
static pthread_mutex_t kids_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t *kids;
static size_t nkids, capkids;
static int atexit_done;

static int record(pid_t pid)
{
    int r = 0;
    pthread_mutex_lock(&kids_lock);
    if (nkids == capkids) {
        size_t cap = capkids ? capkids * 2 : 16;
        pid_t *p = realloc(kids, cap * sizeof *p);
        if (!p) {
            r = -ENOMEM;
            goto out;
        }
        kids = p;
        capkids = cap;
    }
    kids[nkids++] = pid;
    if (!atexit_done && atexit(tl_kill_children) == 0)
        atexit_done = 1;
out:
    pthread_mutex_unlock(&kids_lock);
    return r;
}

static void forget(pid_t pid)
{
    pthread_mutex_lock(&kids_lock);
    for (size_t i = 0; i < nkids; i++)
        if (kids[i] == pid) {
            kids[i] = kids[--nkids];
            break;
        }
    pthread_mutex_unlock(&kids_lock);
}

/* The pid that forked this process through tl_fork (0: none). */
static pid_t armed_parent;

/* In the child, right after fork: only async-signal-safe calls until exec. */
static void arm_death_signal(pid_t parent)
{
    armed_parent = parent;
    /* Armed after the fork, so the parent may already be gone: then the signal will never
     * come, and getppid() no longer names it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(125);
}

void tl_rearm(void)
{
    if (armed_parent)
        arm_death_signal(armed_parent);
}

pid_t tl_fork(void)
{
    pid_t parent = getpid();
    /* Held across the fork so the child never inherits the lock taken by another thread. */
    pthread_mutex_lock(&kids_lock);
    pid_t pid = fork();
    if (pid == 0) {
        arm_death_signal(parent);
        /* The parent's children are not this process's to kill. */
        nkids = 0;
        pthread_mutex_unlock(&kids_lock);
        return 0;
    }
    int e = errno;
    pthread_mutex_unlock(&kids_lock);
    if (pid < 0)
        return -e;
    int r = record(pid);
    if (r < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return r;
    }
    return pid;
}

/* Reports errno to the parent over the close-on-exec pipe and leaves. */
static void child_fail(int fd)
{
    int e = errno;
    ssize_t w = write(fd, &e, sizeof e);
    (void)w;
    _exit(127);
}

static void child_fd(int from, int to, int report)
{
    if (from >= 0 && from != to && dup2(from, to) < 0)
        child_fail(report);
    if (from == to && fcntl(to, F_SETFD, 0) < 0)
        child_fail(report);
}

pid_t tl_spawn(const char *path, char *const argv[], const struct tl_spawn_opts *o)
{
    static const struct tl_spawn_opts none = TL_SPAWN_OPTS_INIT;
    if (!o)
        o = &none;
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = tl_fork();
    if (pid == 0) {
        close(rp[0]);
        child_fd(o->in_fd, STDIN_FILENO, rp[1]);
        child_fd(o->out_fd, STDOUT_FILENO, rp[1]);
        child_fd(o->err_fd, STDERR_FILENO, rp[1]);
        if (o->keep_fd >= 0 && fcntl(o->keep_fd, F_SETFD, 0) < 0)
            child_fail(rp[1]);
        if (o->cwd && chdir(o->cwd) < 0)
            child_fail(rp[1]);
        if (o->setup) {
            o->setup(o->arg);
            tl_rearm(); /* setup may have changed credentials, which clears the signal */
        }
        execv(path, argv);
        child_fail(rp[1]);
    }
    close(rp[1]);
    if (pid < 0) {
        close(rp[0]);
        return pid;
    }
    /* EOF: the exec succeeded (the pipe closed on exec); an int: the child's errno. */
    int e = 0;
    ssize_t n;
    while ((n = read(rp[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(rp[0]);
    if (n == (ssize_t)sizeof e) {
        tl_wait(pid, -1);
        return e > 0 ? -e : -ECHILD;
    }
    return pid;
}

int tl_wait(pid_t pid, int timeout_ms)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, timeout_ms < 0 ? 0 : WNOHANG);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            forget(pid);
            return -e;
        }
        if (r == pid) {
            forget(pid);
            return st;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long waited = (now.tv_sec - start.tv_sec) * 1000L +
                      (now.tv_nsec - start.tv_nsec) / 1000000L;
        if (waited >= timeout_ms) {
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            forget(pid);
            return -ETIMEDOUT;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

void tl_kill_children(void)
{
    pthread_mutex_lock(&kids_lock);
    for (size_t i = 0; i < nkids; i++) {
        /* 0: still running and ours. pid: it had exited (now reaped). -1: reaped elsewhere. */
        if (waitpid(kids[i], NULL, WNOHANG) == 0) {
            kill(kids[i], SIGKILL);
            while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
                ;
        }
    }
    nkids = 0;
    pthread_mutex_unlock(&kids_lock);
}
