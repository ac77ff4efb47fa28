/* systemd units: `systemd-analyze verify` accepts them and the service has the directives it
 * is meant to run under; the daemon serves a run when started through socket activation
 * (LISTEN_FDS/LISTEN_PID from systemd-socket-activate, read with sd_listen_fds), tells a
 * NOTIFY_SOCKET READY=1 once it serves and STOPPING=1 on SIGTERM, and prefixes its log lines
 * with journal priorities when its stderr is the journal stream. Root is held to the run cap
 * like any uid. The tools are required: a missing tool fails the test loudly, it is never
 * skipped. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capfile.h"
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
    /* The socket file appears at bind(), a moment before listen(): wait until it accepts
     * (systemd-socket-activate starts the daemon on that first connection). */
    struct jpt_client c;
    int connected = -1;
    for (int i = 0; i < 1000 && (connected = jpt_client_connect(&c, sock)) != 0; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_eq(connected, 0, "systemd-socket-activate never listened on %s", sock);
    for (int run = 0; run < 2; run++) {
        if (run > 0)
            cr_assert_eq(jpt_client_connect(&c, sock), 0, "the daemon listens on");
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

/* The value of the last `key=` line of the unit's [Service] section (a copy), or NULL. */
static char *service_value(const char *unit, const char *key)
{
    char *found = NULL;
    int in_service = 0;
    size_t kl = strlen(key);
    for (const char *p = unit; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len && p[0] == '[')
            in_service = len == 9 && !strncmp(p, "[Service]", 9);
        else if (in_service && len > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            free(found);
            found = strndup(p + kl + 1, len - kl - 1);
        }
        p += len + (nl != NULL);
    }
    return found;
}

static uint64_t mib(const char *v)
{
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    cr_assert(!strcmp(end, "M") || !strcmp(end, "G"), "a size in M or G: %s", v);
    return *end == 'G' ? n * 1024 : n;
}

Test(systemd, the_service_is_a_notify_service_of_its_own_user_within_budgets)
{
    const char *svc = getenv("JETTPROFD_SERVICE_UNIT");
    cr_assert(svc, "the build passes the unit path");
    char *unit = jpt_slurp_file(svc, NULL);
    cr_assert_not_null(unit);
    static const char *const want[][2] = {
        {"Type", "notify"},          {"DynamicUser", "yes"},   {"PrivateUsers", "no"},
        {"StateDirectoryMode", "0700"}, {"LogsDirectoryMode", "0700"}, {"TasksMax", "256"},
        {"LimitNOFILE", "5184"},     {"NoNewPrivileges", "yes"}, {"ProtectSystem", "strict"},
        {"PrivateTmp", "yes"},       {"RestrictAddressFamilies", "AF_UNIX"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char *v = service_value(unit, want[i][0]);
        cr_assert(v && !strcmp(v, want[i][1]), "%s=%s, not %s", want[i][0], want[i][1],
                  v ? v : "(missing)");
        free(v);
    }
    char *user = service_value(unit, "User");
    cr_assert_null(user, "no fixed User= beside DynamicUser=");
    char *state = service_value(unit, "StateDirectory");
    cr_assert(state && !strcmp(state, "jettprofd jettprofd/captures jettprofd/kept"), "%s", state);
    char *exec = service_value(unit, "ExecStart");
    cr_assert_not_null(exec);
    cr_assert(strstr(exec, " serve ") && strstr(exec, "--capture-dir %S/jettprofd/captures") &&
                  strstr(exec, "--capture-max-bytes ") && strstr(exec, "--capture-max-age "),
              "captures in the state directory, capped: %s", exec);
    cr_assert(strstr(exec, "--state-dir %S/jettprofd/kept"), "kept runs persist: %s", exec);
    /* The memory cap covers 16 runs at full budgets (the unit's arithmetic). */
    char *high = service_value(unit, "MemoryHigh"), *max = service_value(unit, "MemoryMax");
    cr_assert(high && max, "MemoryHigh= and MemoryMax=");
    cr_assert_geq(mib(high), 16 * (64 + 3) + 8, "MemoryHigh=%s", high);
    cr_assert_gt(mib(max), mib(high), "MemoryMax=%s above MemoryHigh=%s", max, high);
    free(high);
    free(max);
    free(exec);
    free(state);
    free(unit);
}

/* A unix datagram socket at path, as systemd's notify socket is. */
static int notify_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(path), sizeof sa.sun_path);
    strcpy(sa.sun_path, path);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0, "bind %s", path);
    return fd;
}

/* The next datagram on fd as a string (fails the test after a generous wait). */
static char *next_notice(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    cr_assert_eq(poll(&p, 1, 30000), 1, "no notification within 30 s");
    static char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    return buf;
}

Test(systemd, tells_the_notify_socket_ready_then_stopping_on_sigterm)
{
    char *dir = jpt_tmpdir();
    char sock[600], notify[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(notify, sizeof notify, "%s/notify", dir);
    int nfd = notify_socket(notify);
    cr_assert_eq(setenv("NOTIFY_SOCKET", notify, 1), 0);
    int errfd;
    pid_t d = jpt_serve(sock, NULL, &errfd);
    unsetenv("NOTIFY_SOCKET");
    cr_assert_gt(d, 0);
    cr_assert_str_eq(next_notice(nfd), "READY=1");
    jpt_run_complete(sock, 9, 2000); /* ready means serving */
    kill(d, SIGTERM);
    cr_assert_str_eq(next_notice(nfd), "STOPPING=1");
    int ws = tl_wait(d, 20000);
    char *err = jpt_slurp_fd(errfd);
    close(errfd);
    cr_assert(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "exit: %s", err);
    struct pollfd p = {nfd, POLLIN, 0};
    cr_assert_eq(poll(&p, 1, 0), 0, "nothing more than the two notices");
    free(err);
    close(nfd);
    unlink(notify);
    rmdir(dir);
    free(dir);
}

/* Spawns `serve --socket sock extra...` with stderr on the file at log and JOURNAL_STREAM
 * naming that file (journal: the file's own device and inode) or another one. */
static pid_t serve_logging_to(const char *sock, const char *const extra[], const char *log,
                              int journal)
{
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    char v[64];
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + (journal ? 0 : 1));
    cr_assert_eq(setenv("JOURNAL_STREAM", v, 1), 0);
    int saved = dup(STDERR_FILENO);
    cr_assert_geq(saved, 0);
    cr_assert_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    pid_t d = jpt_serve(sock, extra, NULL);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    unsetenv("JOURNAL_STREAM");
    cr_assert_gt(d, 0);
    return d;
}

Test(systemd, log_lines_carry_journal_priorities_when_stderr_is_the_journal)
{
    char *dir = jpt_tmpdir();
    char sock[600], log[600], caps[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(log, sizeof log, "%s/stderr.log", dir);
    snprintf(caps, sizeof caps, "%s/caps", dir);
    cr_assert_eq(mkdir(caps, 0700), 0);
    for (int journal = 1; journal >= 0; journal--) {
        /* a file size limit the run's capture passes: a warning */
        const char *extra[] = {"--capture-dir", caps, NULL};
        struct rlimit old, lim;
        cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
        lim = old;
        lim.rlim_cur = 16384 < old.rlim_max ? 16384 : old.rlim_max;
        signal(SIGXFSZ, SIG_IGN);
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
        pid_t d = serve_logging_to(sock, extra, log, journal);
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
        jpt_run_complete(sock, 10, 60000);
        kill(d, SIGTERM);
        int ws = tl_wait(d, 20000);
        cr_assert(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
        char *text = jpt_slurp_file(log, NULL);
        cr_assert_not_null(text);
        const char *p = journal ? "<6>" : "", *w = journal ? "<4>" : "";
        char serving[700], failed[64];
        snprintf(serving, sizeof serving, "%sjettprofd: serving on %s with ", p, sock);
        snprintf(failed, sizeof failed, "%sjettprofd: run 1: its capture failed", w);
        cr_assert(!strncmp(text, serving, strlen(serving)), "first line: %s", text);
        cr_assert(strstr(text, failed) != NULL, "a warning: %s", text);
        for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
            cr_assert_eq(l[0] == '<', journal, "every line prefixed or none: %s", text);
            cr_assert_not_null(strchr(l, '\n'));
        }
        free(text);
    }
    unlink(log);
    rmdir(caps);
    rmdir(dir);
    free(dir);
}

/* Root (these tests' uid) gets no more concurrent runs than --max-runs-per-uid allows. */
Test(systemd, root_is_held_to_the_run_cap_like_any_uid)
{
    cr_assert_eq(geteuid(), 0, "the suite runs as root");
    char *dir = jpt_tmpdir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    const char *extra[] = {"--max-runs-per-uid", "1", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    struct jpt_client a, b;
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 11, 10);
    uint64_t id;
    cr_assert_eq(jpt_client_connect(&a, sock), 0);
    cr_assert_eq(jpt_client_hello(&a, &s, JP_OUT_HUMAN, &id, NULL), 0, "the first run");
    struct jpt_result err;
    memset(&err, 0, sizeof err);
    cr_assert_eq(jpt_client_connect(&b, sock), 0);
    cr_assert_lt(jpt_client_hello(&b, &s, JP_OUT_HUMAN, &id, &err), 0, "a second one");
    cr_assert_eq(err.error_code, JP_CTLE_TOO_MANY_RUNS, "refused for the cap: %u",
                 err.error_code);
    jpt_result_free(&err);
    jpt_client_close(&b);
    jpt_client_close(&a);
    kill(d, SIGTERM);
    int ws = tl_wait(d, 20000);
    cr_assert(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    rmdir(dir);
    free(dir);
}
