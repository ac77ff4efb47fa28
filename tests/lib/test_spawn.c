/* tests/lib/spawn.c: a daemon started through tl_spawn never outlives the test that started
 * it, whether that test dies on the spot (abort, as a failed assertion does) or ends. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"

static const char *daemon_bin(void)
{
    const char *p = getenv("JETTPROFD_BIN");
    cr_assert(p && *p, "JETTPROFD_BIN must name the built jettprofd (run through meson test)");
    return p;
}

/* 1 once something accepts on the socket at path. */
static int accepts(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts `jettprofd serve` on sock through tl_spawn and waits (bounded) until it accepts. */
static pid_t serve(const char *sock)
{
    char *argv[] = {(char *)daemon_bin(), (char *)"serve", (char *)"--socket", (char *)sock,
                    NULL};
    pid_t d = tl_spawn(argv[0], argv, NULL);
    if (d < 0)
        return d;
    for (int i = 0; i < 3000 && !accepts(sock); i++)
        nap_ms(10);
    return accepts(sock) ? d : -ETIMEDOUT;
}

/* Reaps pid, which the test process adopted as subreaper, within a generous bound: its wait
 * status, or -ETIMEDOUT (then it is killed, so the test fails instead of hanging). */
static int reap_adopted(pid_t pid)
{
    for (int i = 0; i < 2000; i++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0)
            return -errno;
        nap_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -ETIMEDOUT;
}

/* A "test process" starts a daemon, reports its pid on fd and then ends the way
 * `how` says; this process, subreaper of the orphans, then reaps the daemon: it must have been
 * killed with SIGKILL, not left serving. */
static void daemon_goes_with_its_test(void (*how)(void))
{
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    char dir[] = "/tmp/jp_spawnXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char sock[128];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t t = fork();
    cr_assert_geq(t, 0);
    if (t == 0) {
        close(p[0]);
        pid_t d = serve(sock);
        ssize_t w = write(p[1], &d, sizeof d);
        (void)w;
        how();
        _exit(0);
    }
    close(p[1]);
    pid_t d = -1;
    ssize_t n = read(p[0], &d, sizeof d);
    close(p[0]);
    int tst;
    cr_assert_eq(waitpid(t, &tst, 0), t);
    cr_assert_eq(n, (ssize_t)sizeof d, "the test process reported no daemon");
    cr_assert_gt(d, 0, "the daemon did not start: %s", strerror((int)-d));
    int st = reap_adopted(d);
    /* Reaped by the test process itself (its teardown) is gone too: then it is not our child
     * and no process has its pid. */
    int reaped_there = st == -ECHILD && kill(d, 0) < 0 && errno == ESRCH;
    unlink(sock);
    rmdir(dir);
    cr_assert_neq(st, -ETIMEDOUT, "the daemon %d outlived the test process that started it",
                  (int)d);
    cr_assert(reaped_there || (st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL),
              "the daemon ended with status %d, not killed", st);
}

static void die_at_once(void)
{
    abort(); /* what a failed assertion does: no atexit, no teardown */
}

static void return_normally(void)
{
    exit(0); /* atexit runs: the recorded children are killed and reaped */
}

Test(spawn, daemon_dies_with_a_test_that_aborts)
{
    daemon_goes_with_its_test(die_at_once);
}

Test(spawn, daemon_is_gone_when_the_test_exits)
{
    daemon_goes_with_its_test(return_normally);
}

/* The teardown kills and reaps what is still running; what was reaped already is left alone. */
Test(spawn, kill_children_reaps_the_running_ones)
{
    char *sleeper[] = {(char *)"/bin/sleep", (char *)"600", NULL};
    char *quick[] = {(char *)"/bin/true", NULL};
    pid_t a = tl_spawn(sleeper[0], sleeper, NULL);
    pid_t b = tl_spawn(quick[0], quick, NULL);
    cr_assert_gt(a, 0);
    cr_assert_gt(b, 0);
    int st;
    cr_assert_eq(waitpid(b, &st, 0), b, "reaped outside the helper");
    tl_kill_children();
    cr_assert_eq(waitpid(a, &st, WNOHANG), -1, "the running child was not reaped");
    cr_assert_eq(errno, ECHILD);
}

Test(spawn, exec_failure_is_reported_with_its_errno)
{
    char *argv[] = {(char *)"/nonexistent/jettprofd", NULL};
    cr_assert_eq(tl_spawn(argv[0], argv, NULL), -ENOENT);
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "the failed child was not reaped");
}

Test(spawn, wait_past_its_bound_kills_the_child)
{
    char *sleeper[] = {(char *)"/bin/sleep", (char *)"600", NULL};
    pid_t a = tl_spawn(sleeper[0], sleeper, NULL);
    cr_assert_gt(a, 0);
    cr_assert_eq(tl_wait(a, 50), -ETIMEDOUT);
    cr_assert_eq(waitpid(a, NULL, WNOHANG), -1, "the timed-out child was not reaped");
}
