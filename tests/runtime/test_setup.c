/* Where `jett run --profile` finds its daemon, and what a setup failure says: the build-tree
 * jett finds the build-tree jettprofd with $JETTPROFD unset; every failure names its cause
 * (the paths tried with their errors, the socket and its error, how the handshake failed, the
 * daemon's own reason for a refusal) after the stable message, and runs no user code. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol/control.h"
#include "support.h"

static char fixture[4096];

static const char *hello_jett(void)
{
    snprintf(fixture, sizeof fixture, "%s/tests/runtime/fixtures/hello.jett",
             jtt_source_root());
    return fixture;
}

/* Each test runs in its own process: the environment it changes is its own. */
static void no_daemon_env(void)
{
    unsetenv("JETTPROFD");
    unsetenv("JETTPROFD_SOCKET");
}

Test(setup, build_tree_jett_finds_build_tree_daemon)
{
    no_daemon_env();
    setenv("PATH", "/nonexistent-jett-test-dir", 1); /* not found through PATH either */
    const char *argv[] = {"run", hello_jett(), "--profile", NULL};
    struct jt_run r;
    jtt_run(NULL, argv, &r);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "user code ran"), "%s", r.out);
    cr_expect(strstr(r.err, "profile"), "no profile on stderr: %s", r.err);
    cr_expect(!strstr(r.err, "setup failure"), "%s", r.err);
    jtt_run_free(&r);
}

/* A copy of jett elsewhere has no daemon next to it: the message lists each place. */
Test(setup, failed_start_names_every_path_tried)
{
    no_daemon_env();
    char *dir = jtt_tmpdir();
    char bin[4200], exe[4300], cmd[9000];
    snprintf(bin, sizeof bin, "%s/bin", dir);
    cr_assert_eq(mkdir(bin, 0755), 0);
    snprintf(exe, sizeof exe, "%s/jett", bin);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", jtt_jett(), exe);
    cr_assert_eq(system(cmd), 0);
    setenv("PATH", "/nonexistent-jett-test-dir", 1);
    const char *argv[] = {"run", hello_jett(), "--profile", NULL};
    struct jt_run r;
    jtt_run_exe(exe, NULL, argv, &r);
    cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "profiler: setup failure: cannot start jettprofd: tried "), "%s",
              r.err);
    static const char *const rel[] = {"/../libexec/jettprofd", "/jettprofd",
                                      "/../daemon/jettprofd"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char want[4400];
        snprintf(want, sizeof want, "%s%s (ENOENT: No such file or directory)", bin, rel[i]);
        cr_expect(strstr(r.err, want), "missing '%s' in: %s", want, r.err);
    }
    cr_expect(strstr(r.err, "PATH: /nonexistent-jett-test-dir/jettprofd (ENOENT"), "%s", r.err);
    cr_expect(!strstr(r.out, "user code ran"), "user code ran: %s", r.out);
    jtt_run_free(&r);
    setenv("PATH", "/usr/bin:/bin", 1); /* for the clean-up's rm */
    jtt_rmtree(dir);
    free(dir);
}

/* Runs hello.jett in `mode` with env=value: a setup failure (exit 4, no user code) whose
 * message holds each of want[]. */
static void expect_setup_failure(const char *env, const char *value, const char *mode,
                                 const char *const *want)
{
    no_daemon_env();
    setenv(env, value, 1);
    const char *argv[] = {"run", hello_jett(), mode, NULL};
    struct jt_run r;
    jtt_run(NULL, argv, &r);
    cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
    for (size_t i = 0; want[i]; i++)
        cr_expect(strstr(r.err, want[i]), "no '%s' in: %s", want[i], r.err);
    cr_expect(!strstr(r.out, "user code ran"), "user code ran: %s", r.out);
    jtt_run_free(&r);
}

Test(setup, failed_start_names_JETTPROFD)
{
    expect_setup_failure("JETTPROFD", "/nonexistent-jett-test-dir/jettprofd", "--profile",
                         (const char *[]){"cannot start jettprofd: tried JETTPROFD=/nonexistent-"
                                          "jett-test-dir/jettprofd (ENOENT: No such file or "
                                          "directory)", NULL});
}

/* The hello may meet a closed socket or the close may come as the answer: either way the
 * daemon's exit status is named. */
Test(setup, handshake_failure_says_the_daemon_exited)
{
    expect_setup_failure("JETTPROFD", "/bin/false", "--profile-memory",
                         (const char *[]){"profiler: setup failure: jettprofd handshake failed: ",
                                          "jettprofd exited with status 1", NULL});
}

Test(setup, unreachable_socket_names_path_and_errno)
{
    expect_setup_failure("JETTPROFD_SOCKET", "/nonexistent-jett-test-dir/d.sock", "--profile",
                         (const char *[]){"profiler: setup failure: cannot connect to jettprofd: "
                                          "JETTPROFD_SOCKET=/nonexistent-jett-test-dir/d.sock: "
                                          "ENOENT", NULL});
}

/* A long-lived daemon stand-in that answers the first hello with a refusal. */
struct refuser {
    int listen_fd;
    uint8_t *frame;
    size_t len;
    pthread_t th;
};

static void *refuser_main(void *arg)
{
    struct refuser *p = arg;
    int c = accept(p->listen_fd, NULL, NULL);
    if (c < 0)
        return NULL;
    char buf[4096];
    (void)!read(c, buf, sizeof buf); /* the hello; its content does not matter here */
    (void)!write(c, p->frame, p->len);
    /* Keep the connection until the runtime hangs up, so the refusal is what it reads. */
    while (read(c, buf, sizeof buf) > 0) {
    }
    close(c);
    return NULL;
}

Test(setup, refusal_carries_the_daemons_reason)
{
    no_daemon_env();
    char *dir = jtt_tmpdir();
    char path[200];
    snprintf(path, sizeof path, "%s/d.sock", dir);
    struct jp_ctl_msg m = {.type = JP_CTL_ERROR};
    m.u.error.code = JP_CTLE_TOO_MANY_RUNS;
    m.u.error.message = "uid 0 already has 16 runs";
    m.u.error.message_len = strlen(m.u.error.message);
    struct refuser p;
    cr_assert_eq(jp_ctl_encode(&m, &p.frame, &p.len), 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    p.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_eq(bind(p.listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(p.listen_fd, 1), 0);
    cr_assert_eq(pthread_create(&p.th, NULL, refuser_main, &p), 0);
    setenv("JETTPROFD_SOCKET", path, 1);
    const char *argv[] = {"run", hello_jett(), "--profile", NULL};
    struct jt_run r;
    jtt_run(NULL, argv, &r);
    pthread_join(p.th, NULL);
    close(p.listen_fd);
    free(p.frame);
    cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "profiler: setup failure: jettprofd refused the run: jettprofd said: "
                            "uid 0 already has 16 runs (too_many_runs)"), "%s", r.err);
    cr_expect(!strstr(r.out, "user code ran"), "user code ran: %s", r.out);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}
