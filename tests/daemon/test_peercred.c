/* Peer credentials: by default only the daemon's own uid and root may attach; --allow-group
 * admits a group; `show` shows a run only to its uid or root; per-uid caps on concurrent runs
 * and ring size. The test runs as root and drops to other uids in forked children. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"
#include "tests/lib/stop.h"

#define GROUP 4242u

/* In a child as uid/gid: connect and say hello. Exit 0 on WELCOME, 10 + code on ERROR. */
/* A HELLO from a child running as uid/gid; with groups (ngroups > 0) those are its
 * supplementary groups, else only gid. The child's exit status: 0 welcomed, 10 + the error
 * code when refused, 9x on a harness failure. */
static int hello_with(const char *sock, uid_t uid, gid_t gid, size_t ngroups,
                      const gid_t *groups)
{
    pid_t pid = tl_fork();
    if (pid == 0) {
        if (ngroups) {
            if (setgroups(ngroups, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
                setresuid(uid, uid, uid) < 0)
                _exit(99);
            tl_rearm(); /* a credential change clears the death signal */
        } else {
            jpt_become(uid, gid);
        }
        struct jpt_client c;
        if (jpt_client_connect(&c, sock) < 0)
            _exit(98);
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_CPU, 1, 10);
        uint64_t id;
        struct jpt_result err;
        memset(&err, 0, sizeof err);
        int r = jpt_client_hello(&c, &s, JP_OUT_HUMAN, &id, &err);
        _exit(r == 0 ? 0 : err.error_code ? 10 + (int)err.error_code : 97);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int hello_as(const char *sock, uid_t uid, gid_t gid)
{
    return hello_with(sock, uid, gid, 0, NULL);
}

/* In a child as uid/gid: a small memory run, its id written to *run_id. live: the run is left
 * in flight (200 records, no stop) and the child, returned, holds it until killed; else the
 * run is whole and the child has exited 0 when this returns (0 is returned then). */
static pid_t start_as(const char *sock, uid_t uid, gid_t gid, int live, uint64_t *run_id)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = tl_fork();
    if (pid == 0) {
        jpt_become(uid, gid);
        struct jpt_client c;
        if (jpt_client_connect(&c, sock) < 0)
            _exit(98);
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_MEMORY, uid, 2000);
        struct jpt_result r;
        struct jp_ring ring;
        if (live ? jpt_start_run(&c, &s, 256, -1, 200, &ring, &r.run_id) < 0
                 : jpt_run(&c, &s, 256, -1, &r) < 0 || r.error_code)
            _exit(97);
        if (write(p[1], &r.run_id, sizeof r.run_id) != sizeof r.run_id)
            _exit(96);
        if (!live)
            _exit(0);
        for (;;)
            pause();
    }
    close(p[1]);
    ssize_t n = read(p[0], run_id, sizeof *run_id);
    close(p[0]);
    if (!live) {
        int st;
        waitpid(pid, &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run as %u failed: %d",
                  (unsigned)uid, WEXITSTATUS(st));
        pid = 0;
    }
    cr_assert_eq(n, (ssize_t)sizeof *run_id);
    return pid;
}

/* A whole small run as uid/gid: its id. */
static uint64_t run_as(const char *sock, uid_t uid, gid_t gid)
{
    uint64_t id = 0;
    start_as(sock, uid, gid, 0, &id);
    return id;
}

/* In a child as uid/gid: SHOW run_id. Exit 0 on RESULT, 10 + code on ERROR. */
static int show_as(const char *sock, uid_t uid, gid_t gid, uint64_t run_id)
{
    pid_t pid = tl_fork();
    if (pid == 0) {
        if (uid != 0)
            jpt_become(uid, gid);
        struct jpt_client c;
        if (jpt_client_connect(&c, sock) < 0)
            _exit(98);
        struct jp_ctl_msg m = {.type = JP_CTL_SHOW};
        m.u.show.run_id = run_id;
        m.u.show.outputs = JP_OUT_TOON;
        if (jp_ctl_send(c.fd, &m, NULL, 0) < 0)
            _exit(97);
        struct jp_ctl_msg a;
        if (jpt_client_recv(&c, &a, 5000) != 1)
            _exit(96);
        if (a.type == JP_CTL_RESULT)
            _exit(a.u.result.toon_len > 0 ? 0 : 95);
        _exit(a.type == JP_CTL_ERROR ? 10 + (int)a.u.error.code : 94);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static char *open_dir(void)
{
    char *dir = jpt_tmpdir();
    cr_assert_not_null(dir);
    cr_assert_eq(chmod(dir, 0755), 0);
    return dir;
}

Test(peercred, other_uids_are_refused_even_when_the_socket_mode_lets_them_in)
{
    char *dir = open_dir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    pid_t d = jpt_serve(sock, NULL, NULL);
    cr_assert_gt(d, 0);
    struct stat st;
    cr_assert_eq(stat(sock, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "socket mode %o", st.st_mode & 0777);
    /* The file mode alone keeps uid 4001 out; open it up to prove SO_PEERCRED does too. */
    cr_assert_eq(hello_as(sock, 4001, 4001), 98, "connect should fail on a 0600 socket");
    cr_assert_eq(chmod(sock, 0666), 0);
    cr_assert_eq(hello_as(sock, 4001, 4001), 10 + JP_CTLE_PERMISSION_DENIED);
    cr_assert_eq(hello_as(sock, 4001, GROUP), 10 + JP_CTLE_PERMISSION_DENIED);
    /* root may attach */
    cr_assert_eq(hello_as(sock, 0, 0), 0);
    tl_stop(d, 10000);
    rmdir(dir);
    free(dir);
}

Test(peercred, an_allowed_group_attaches_and_show_is_for_the_owner_only)
{
    char *dir = open_dir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    const char *extra[] = {"--allow-group", "4242", "--max-runs-per-uid", "2", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    struct stat st;
    cr_assert_eq(stat(sock, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0660);
    cr_assert_eq(st.st_gid, GROUP);

    uint64_t id = run_as(sock, 4001, GROUP);
    cr_assert_gt(id, 0);
    cr_assert_eq(show_as(sock, 4001, GROUP, id), 0);
    cr_assert_eq(show_as(sock, 4002, GROUP, id), 10 + JP_CTLE_NO_SUCH_RUN,
                 "another user's run reads as no such run");
    cr_assert_eq(show_as(sock, 0, 0, id), 0);
    cr_assert_eq(show_as(sock, 4001, GROUP, id + 1000), 10 + JP_CTLE_NO_SUCH_RUN);
    /* Not in the group: refused before anything else. */
    cr_assert_eq(hello_as(sock, 4003, 4003), 98, "0660 socket keeps others out");
    tl_stop(d, 10000);
    rmdir(dir);
    free(dir);
}

Test(peercred, per_uid_caps_on_concurrent_runs_and_ring_size)
{
    char *dir = open_dir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    const char *extra[] = {"--allow-group", "4242", "--max-runs-per-uid", "2",
                           "--max-ring-bytes", "100000", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);

    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t child = tl_fork();
    if (child == 0) {
        jpt_become(4001, GROUP);
        struct jpt_client c[3];
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_CPU, 1, 10);
        uint64_t id;
        for (int i = 0; i < 2; i++)
            if (jpt_client_connect(&c[i], sock) < 0 ||
                jpt_client_hello(&c[i], &s, JP_OUT_HUMAN, &id, NULL) < 0)
                _exit(90 + i);
        struct jpt_result err;
        memset(&err, 0, sizeof err);
        if (jpt_client_connect(&c[2], sock) < 0)
            _exit(93);
        int r = jpt_client_hello(&c[2], &s, JP_OUT_HUMAN, &id, &err);
        _exit(r == 0 ? 0 : 10 + (int)err.error_code);
    }
    close(p[0]);
    close(p[1]);
    int st;
    waitpid(child, &st, 0);
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 10 + JP_CTLE_TOO_MANY_RUNS, "exit %d", WEXITSTATUS(st));

    /* A ring above --max-ring-bytes is refused. */
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 1, 10);
    struct jp_ring ring;
    uint64_t id;
    cr_assert_eq(jpt_start_run(&c, &s, 4096, -1, 0, &ring, &id), 0);
    struct jp_ctl_msg a;
    cr_assert_eq(jpt_client_recv(&c, &a, 5000), 1);
    cr_assert_eq(a.type, JP_CTL_ERROR);
    cr_assert_eq(a.u.error.code, JP_CTLE_BAD_RING);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    tl_stop(d, 10000);
    rmdir(dir);
    free(dir);
}

/* `jettprofd show` as uid/gid: its exit status, stderr in *err. */
static int show_cmd_as(const char *sock, uid_t uid, gid_t gid, const char *id, char **err)
{
    int ep[2];
    cr_assert_eq(pipe(ep), 0);
    pid_t pid = tl_fork();
    if (pid == 0) {
        jpt_become(uid, gid);
        dup2(ep[1], STDERR_FILENO);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, STDOUT_FILENO);
        char *argv[] = {(char *)jpt_daemon_bin(), (char *)"show", (char *)id,
                        (char *)"--socket", (char *)sock, NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    close(ep[1]);
    *err = jpt_slurp_fd(ep[0]);
    close(ep[0]);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

Test(peercred, show_refused_prints_the_daemons_reason)
{
    char *dir = open_dir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    pid_t d = jpt_serve(sock, NULL, NULL);
    cr_assert_gt(d, 0);
    cr_assert_eq(chmod(sock, 0666), 0);
    /* The daemon may close before the request is written (then the send fails with EPIPE):
     * whichever way each attempt races, the reason must be printed. */
    for (int i = 0; i < 40; i++) {
        char *err;
        cr_assert_eq(show_cmd_as(sock, 4001, 4001, "1", &err), 1);
        cr_assert(strstr(err, "permission_denied") && strstr(err, "may not attach"),
                  "attempt %d: stderr: %s", i, err);
        free(err);
    }
    tl_stop(d, 10000);
    rmdir(dir);
    free(dir);
}

/* Another user (4002) asking for run `id` gets, byte for byte, the answer for a run that does
 * not exist. */
static void expect_foreign_like_missing(const char *sock, uint64_t id)
{
    char ids[2][32];
    snprintf(ids[0], sizeof ids[0], "%llu", (unsigned long long)id);
    snprintf(ids[1], sizeof ids[1], "%llu", (unsigned long long)id + 1000);
    char *foreign, *missing;
    cr_assert_eq(show_cmd_as(sock, 4002, GROUP, ids[0], &foreign), 1);
    cr_assert_eq(show_cmd_as(sock, 4002, GROUP, ids[1], &missing), 1);
    cr_assert_str_eq(foreign, missing, "the answers must not tell the two apart");
    cr_assert(strstr(missing, "no such run visible to you"), "stderr: %s", missing);
    free(foreign);
    free(missing);
}

Test(peercred, show_answers_a_foreign_run_like_a_missing_one)
{
    char *dir = open_dir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    const char *extra[] = {"--allow-group", "4242", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    expect_foreign_like_missing(sock, run_as(sock, 4001, GROUP));
    tl_stop(d, 10000);
    rmdir(dir);
    free(dir);
}

/* A user in the allowed group as a supplementary group (useradd -G), not its primary one, is
 * admitted; one in neither is not. */
Test(peercred, a_supplementary_member_of_the_allowed_group_attaches)
{
    char *dir = open_dir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    const char *extra[] = {"--allow-group", "4242", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    cr_assert_eq(chmod(sock, 0666), 0); /* the file mode is not what is tested */
    static const gid_t sets[2][3] = {{4001, 4300, GROUP}, {4001, 4300, 4301}};
    for (int k = 0; k < 2; k++) {
        int st = hello_with(sock, 4001, 4001, 3, sets[k]);
        if (k == 0)
            cr_assert_eq(st, 0, "supplementary member refused: %d", st);
        else
            cr_assert_eq(st, 10 + JP_CTLE_PERMISSION_DENIED);
    }
    tl_stop(d, 10000);
    rmdir(dir);
    free(dir);
}

/* A daemon allowing group GROUP serving in a fresh directory (sock[600], *d), and a run of
 * uid 4001 live in it (its id in idstr[32]), once its owner can see it: the run's client. */
static pid_t live_run_of_4001(char **dir, char *sock, pid_t *d, uint64_t *id, char *idstr)
{
    *dir = open_dir();
    snprintf(sock, 600, "%s/d.sock", *dir);
    const char *extra[] = {"--allow-group", "4242", NULL};
    *d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(*d, 0);
    pid_t run = start_as(sock, 4001, GROUP, 1, id);
    snprintf(idstr, 32, "%llu", (unsigned long long)*id);
    /* the run is live once its worker has taken its ring: the owner sees it then */
    char *own;
    for (int i = 0; show_cmd_as(sock, 4001, GROUP, idstr, &own) != 0; i++) {
        cr_assert_lt(i, 500, "the owner never saw its run: %s", own);
        free(own);
        usleep(10000);
    }
    free(own);
    return run;
}

static void live_run_end(char *dir, pid_t d, pid_t run)
{
    kill(run, SIGKILL);
    tl_wait(run, 10000);
    tl_stop(d, 20000);
    rmdir(dir);
    free(dir);
}

/* A run in flight is seen by its owner (a snapshot) and root, and by no other user: the same
 * answer as for a run that does not exist. */
Test(peercred, a_live_runs_snapshot_is_for_its_owner_only)
{
    char *dir, sock[600], idstr[32];
    pid_t d;
    uint64_t id;
    pid_t run = live_run_of_4001(&dir, sock, &d, &id, idstr);
    expect_foreign_like_missing(sock, id);
    cr_assert_eq(show_as(sock, 0, 0, id), 0, "root sees every run");
    live_run_end(dir, d, run);
}

/* `jettprofd top RUN_ID` of a run in flight: its owner watches it, another user gets the answer
 * a run that does not exist gets. */
Test(peercred, a_live_run_is_watched_by_its_owner_only)
{
    char *dir, sock[600], idstr[32];
    pid_t d;
    uint64_t id;
    pid_t run = live_run_of_4001(&dir, sock, &d, &id, idstr);
    const char *top[] = {"top", idstr, "--socket", sock, "--batch", "--frames", "1"};
    for (uid_t uid = 4001; uid <= 4002; uid++) {
        int ep[2], op[2];
        cr_assert_eq(pipe(ep), 0);
        cr_assert_eq(pipe(op), 0);
        pid_t pid = tl_fork();
        if (pid == 0) {
            jpt_become(uid, GROUP);
            dup2(op[1], STDOUT_FILENO);
            dup2(ep[1], STDERR_FILENO);
            char *argv[9] = {(char *)jpt_daemon_bin()};
            for (int i = 0; i < 7; i++)
                argv[i + 1] = (char *)top[i];
            execv(argv[0], argv);
            _exit(127);
        }
        close(ep[1]);
        close(op[1]);
        char *out = jpt_slurp_fd(op[0]), *err = jpt_slurp_fd(ep[0]);
        close(op[0]);
        close(ep[0]);
        int st = tl_wait(pid, 20000);
        cr_assert(st >= 0 && WIFEXITED(st));
        if (uid == 4001) {
            cr_assert_eq(WEXITSTATUS(st), 0, "%s", err);
            cr_assert(strstr(out, "jettprofd top - run "), "%s", out);
        } else {
            cr_assert_eq(WEXITSTATUS(st), 1, "another user watched the run: %s", out);
            cr_assert(strstr(err, "no such run visible to you"), "%s", err);
        }
        free(out);
        free(err);
    }
    live_run_end(dir, d, run);
}
