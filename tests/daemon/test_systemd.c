/* systemd units: `systemd-analyze verify` accepts them, and the daemon serves a run when started
 * through socket activation (LISTEN_FDS/LISTEN_PID from systemd-socket-activate). The tools are
 * required: a missing tool fails the test loudly, it is never skipped. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

static const char *tool(const char *name)
{
    static char path[256];
    const char *dirs[] = {"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/lib/systemd", NULL};
    for (int i = 0; dirs[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dirs[i], name);
        if (access(path, X_OK) == 0)
            return path;
    }
    cr_assert_fail("%s is required for this test (install systemd)", name);
    return NULL;
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    char *b = jpt_slurp_file(from, &n);
    cr_assert_not_null(b, "cannot read %s", from);
    FILE *f = fopen(to, "we");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
    free(b);
}

Test(systemd, units_pass_systemd_analyze_verify)
{
    const char *svc = getenv("JETTPROFD_SERVICE_UNIT");
    const char *skt = getenv("JETTPROFD_SOCKET_UNIT");
    cr_assert(svc && skt, "the build passes the unit paths");
    char *dir = jpt_tmpdir();
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/jettprofd.service", dir);
    snprintf(b, sizeof b, "%s/jettprofd.socket", dir);
    copy_file(svc, a);
    copy_file(skt, b);
    char *out, *err;
    char *argv[] = {(char *)tool("systemd-analyze"), "verify", "--man=no", b, a, NULL};
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "verify failed: %s%s", out, err);
    cr_assert_str_eq(err, "", "verify warned: %s", err);
    free(out);
    free(err);
    /* The hardening the daemon is promised to run under is really there. */
    char *unit = jpt_slurp_file(a, NULL);
    const char *must[] = {"NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes",
                          "RestrictAddressFamilies=AF_UNIX", "ExecStart=", " serve", NULL};
    for (int i = 0; must[i]; i++)
        cr_assert(strstr(unit, must[i]) != NULL, "service lacks %s", must[i]);
    free(unit);
    unlink(a);
    unlink(b);
    rmdir(dir);
    free(dir);
}

Test(systemd, socket_activation_serves_a_run)
{
    char *dir = jpt_tmpdir();
    char sock[600], log[600];
    snprintf(sock, sizeof sock, "%s/act.sock", dir);
    snprintf(log, sizeof log, "%s/runs.jsonl", dir);
    char *argv[] = {(char *)tool("systemd-socket-activate"), "-l", sock,
                    (char *)jpt_daemon_bin(), "serve", "--runs-log", log, NULL};
    int errfd;
    pid_t pid = jpt_spawn(argv, -1, &errfd);
    cr_assert_gt(pid, 0);
    struct stat st;
    for (int i = 0; i < 500 && stat(sock, &st) != 0; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_eq(stat(sock, &st), 0, "systemd-socket-activate did not create the socket");
    for (int run = 0; run < 2; run++) {
        struct jpt_client c;
        cr_assert_eq(jpt_client_connect(&c, sock), 0);
        struct jpt_stream s, again;
        jpt_stream_init(&s, JP_MODE_CPU, 123u + (uint32_t)run, 20000);
        again = s;
        struct jpt_result r, want;
        cr_assert_eq(jpt_run(&c, &s, 1024, -1, &r), 0);
        cr_assert_eq(r.error_code, 0, "%s", r.error);
        cr_assert_eq(jpt_expected(&again, &want), 0);
        cr_assert_str_eq(r.toon, want.toon);
        jpt_result_free(&r);
        jpt_result_free(&want);
        jpt_client_close(&c);
    }
    /* systemd-socket-activate execs the daemon in place: same pid, so SIGTERM reaches it. */
    kill(pid, SIGTERM);
    int ws = tl_wait(pid, 10000);
    char *err = jpt_slurp_fd(errfd);
    close(errfd);
    cr_assert(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "exit: %s", err);
    cr_assert(strstr(err, "serving") != NULL, "the daemon never ran: %s", err);
    cr_assert_eq(jpt_count_lines(log, "\"status\":\"complete\""), 2);
    free(err);
    unlink(log);
    unlink(sock);
    rmdir(dir);
    free(dir);
}
