/* Files the long-lived daemon writes when the disk (here: its file size limit, RLIMIT_FSIZE,
 * which makes writes fail with EFBIG like a full disk fails them with ENOSPC) will not take
 * them: the runs log keeps whole lines only, a capture that cannot be written is removed, and
 * a capture directory given as a symbolic link is refused. And the capture directory's caps
 * (--capture-max-bytes, --capture-max-age): the oldest finished captures go first, at start
 * and after each run, never one still being written, and the log names each. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capfile.h"
#include "support.h"
#include "tests/lib/stop.h"

/* Spawns serve with the soft file size limit at fsize (the daemon inherits it); its stderr
 * into *err_fd when err_fd is not NULL. */
static pid_t serve_limited(const char *sock, const char *const extra[], rlim_t fsize,
                           int *err_fd)
{
    struct rlimit old, lim;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = fsize < old.rlim_max ? fsize : old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    pid_t d = jpt_serve(sock, extra, err_fd);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    cr_assert_gt(d, 0);
    return d;
}

/* A fresh directory (returned) holding a capture directory "caps" (0700); the socket and
 * capture directory paths in sock[600] and caps[600]. */
static char *caps_fixture(char *sock, char *caps)
{
    char *dir = jpt_tmpdir();
    snprintf(sock, 600, "%s/d.sock", dir);
    snprintf(caps, 600, "%s/caps", dir);
    cr_assert_eq(mkdir(caps, 0700), 0);
    return dir;
}

Test(diskfull, the_runs_log_keeps_only_whole_lines)
{
    char *dir = jpt_tmpdir();
    char sock[600], log[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(log, sizeof log, "%s/runs.jsonl", dir);
    const char *extra[] = {"--runs-log", log, NULL};
    pid_t d = serve_limited(sock, extra, 1500, NULL);
    for (uint32_t i = 0; i < 8; i++)
        jpt_run_complete(sock, i + 1, 200);
    tl_stop(d, 20000);
    size_t len;
    char *text = jpt_slurp_file(log, &len);
    cr_assert_not_null(text);
    cr_assert_gt(len, 0, "some rows fit");
    cr_assert_leq(len, 1500);
    cr_assert_eq(text[len - 1], '\n', "the log ends with a whole line: %s", text);
    int rows = 0;
    for (char *p = text; *p; rows++) {
        char *nl = strchr(p, '\n');
        cr_assert_not_null(nl);
        cr_assert_eq(p[0], '{', "row %d starts a JSON object: %.*s", rows, (int)(nl - p), p);
        cr_assert_eq(nl[-1], '}', "row %d ends one", rows);
        char *again = strstr(p + 1, "{\"run_id\"");
        cr_assert(!again || again > nl, "row %d has another row glued to it", rows);
        p = nl + 1;
    }
    cr_assert_lt(rows, 8, "the limit bit");
    free(text);
    unlink(log);
    rmdir(dir);
    free(dir);
}

static int count_files(const char *path)
{
    DIR *dd = opendir(path);
    cr_assert_not_null(dd);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)))
        n += e->d_name[0] != '.';
    closedir(dd);
    return n;
}

Test(diskfull, a_capture_that_cannot_be_written_is_removed)
{
    char sock[600], caps[600];
    char *dir = caps_fixture(sock, caps);
    const char *extra[] = {"--capture-dir", caps, NULL};
    int errfd;
    pid_t d = serve_limited(sock, extra, 16384, &errfd);
    jpt_run_complete(sock, 3, 20000); /* its capture is far past 16 KiB */
    tl_stop(d, 20000);
    cr_assert_eq(count_files(caps), 0, "no empty or cut-short capture is left behind");
    /* the capture was made, failed and was removed: not never made */
    char *err = jpt_slurp_fd(errfd);
    close(errfd);
    char want[160];
    snprintf(want, sizeof want, "run 1: its capture failed (%s); removed the capture file\n",
             strerror(EFBIG));
    cr_expect(strstr(err, want), "want \"%s\" in:\n%s", want, err);
    free(err);
    rmdir(caps);
    rmdir(dir);
    free(dir);
}

Test(diskfull, a_capture_dir_given_as_a_symlink_is_refused)
{
    char *dir = jpt_tmpdir();
    char real[600], link[600], sock[600];
    snprintf(real, sizeof real, "%s/real", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    cr_assert_eq(mkdir(real, 0700), 0);
    cr_assert_eq(symlink(real, link), 0);
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)"serve", (char *)"--socket", sock,
                    (char *)"--capture-dir", link, NULL};
    char *err = NULL;
    int st = jpt_capture_cmd(argv, NULL, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "serve must refuse to start");
    cr_assert(strstr(err, "--capture-dir") && strstr(err, "symbolic link"), "stderr: %s", err);
    free(err);
    unlink(link);
    rmdir(real);
    rmdir(dir);
    free(dir);
}

/* A file of size bytes at dir/name, last modified age seconds ago. */
static void old_file(const char *dir, const char *name, size_t size, time_t age)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0, "create %s", path);
    static const char zeros[4096];
    cr_assert_leq(size, sizeof zeros);
    cr_assert_eq(write(fd, zeros, size), (ssize_t)size);
    struct timespec t[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
    cr_assert_eq(futimens(fd, t), 0);
    close(fd);
}

static int exists(const char *dir, const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The one file in dir whose name ends with suffix, into name (0 if none, -1 if several). */
static int find_suffix(const char *dir, const char *suffix, char *name, size_t cap)
{
    DIR *dd = opendir(dir);
    cr_assert_not_null(dd);
    int n = 0;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while ((e = readdir(dd))) {
        size_t l = strlen(e->d_name);
        if (l >= sl && !strcmp(e->d_name + l - sl, suffix)) {
            snprintf(name, cap, "%s", e->d_name);
            n++;
        }
    }
    closedir(dd);
    return n > 1 ? -1 : n;
}

static uint64_t dir_bytes(const char *dir)
{
    DIR *dd = opendir(dir);
    cr_assert_not_null(dd);
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(dd))) {
        struct stat st;
        if (e->d_name[0] != '.' && fstatat(dirfd(dd), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            total += (uint64_t)st.st_size;
    }
    closedir(dd);
    return total;
}

/* Removes dir and everything in it (files only). */
static void remove_dir(const char *dir)
{
    DIR *dd = opendir(dir);
    cr_assert_not_null(dd);
    for (struct dirent *e; (e = readdir(dd));)
        if (e->d_name[0] != '.')
            unlinkat(dirfd(dd), e->d_name, 0);
    closedir(dd);
    rmdir(dir);
}

/* Reads the daemon's stderr into *log (growing, NUL-terminated) until it holds needle; fails
 * the test after a generous wait. */
static void wait_log(int fd, char **log, size_t *len, const char *needle)
{
    for (int waited = 0; !(*log && strstr(*log, needle)); waited++) {
        cr_assert_lt(waited, 600, "the daemon never logged \"%s\": %s", needle,
                     *log ? *log : "");
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof buf);
        cr_assert_gt(n, 0, "the daemon's stderr closed before \"%s\": %s", needle,
                     *log ? *log : "");
        *log = realloc(*log, *len + (size_t)n + 1);
        memcpy(*log + *len, buf, (size_t)n);
        *len += (size_t)n;
        (*log)[*len] = '\0';
    }
}

/* Serves with extra, runs one complete run, stops: the daemon's stderr (malloc'ed). */
static char *serve_one_run(const char *sock, const char *const extra[], uint32_t seed,
                           uint64_t events)
{
    int errfd;
    pid_t d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);
    jpt_run_complete(sock, seed, events);
    tl_stop(d, 20000);
    char *log = jpt_slurp_fd(errfd);
    close(errfd);
    return log;
}

/* Where needle first is in log (fails the test when it is not there). */
static size_t at(const char *log, const char *needle)
{
    const char *p = strstr(log, needle);
    cr_assert_not_null(p, "the log lacks \"%s\": %s", needle, log);
    return (size_t)(p - log);
}

Test(diskfull, capture_max_bytes_removes_the_oldest_captures_first)
{
    char sock[600], caps[600];
    char *dir = caps_fixture(sock, caps);
    old_file(caps, "run-100-1.jpcap", 600, 300);
    old_file(caps, "run-200-2.jpcap", 600, 200);
    old_file(caps, "run-300-3.jpcap", 600, 100);
    old_file(caps, "notes.txt", 3000, 400); /* not a capture: never counted or removed */
    const char *extra[] = {"--capture-dir", caps, "--capture-max-bytes", "1500", NULL};
    char *log = serve_one_run(sock, extra, 5, 20000);
    /* At start: 1800 bytes, the oldest goes and 1200 fit. After the run, its capture is the
     * newest: older ones go first until the rest fit. */
    size_t started = at(log, "run 1 started");
    cr_assert_lt(at(log, "removed capture run-100-1.jpcap (600 bytes): the captures took more "
                         "than --capture-max-bytes 1500"), started, "removed at start: %s", log);
    const char *two = strstr(log, "removed capture run-200-2.jpcap");
    cr_assert(!two || (size_t)(two - log) > started, "kept at start: %s", log);
    cr_assert(!exists(caps, "run-100-1.jpcap") && exists(caps, "notes.txt"));
    cr_assert_leq(dir_bytes(caps) - 3000, 1500, "the captures fit: %s", log);
    char name[300];
    int run = find_suffix(caps, "-1.jpcap", name, sizeof name);
    if (exists(caps, "run-300-3.jpcap") || exists(caps, "run-200-2.jpcap"))
        cr_assert_eq(run, 1, "an older capture outlived the newest: %s", log);
    free(log);
    remove_dir(caps);
    rmdir(dir);
    free(dir);
}

Test(diskfull, capture_max_age_removes_old_captures_at_start_and_after_runs)
{
    char sock[600], caps[600];
    char *dir = caps_fixture(sock, caps);
    old_file(caps, "run-100-1.jpcap", 100, 3 * 86400);
    old_file(caps, "run-200-2.jpcap", 100, 600);
    old_file(caps, "run-old.txt", 100, 3 * 86400);
    const char *extra[] = {"--capture-dir", caps, "--capture-max-age", "1d", NULL};
    char *log = serve_one_run(sock, extra, 6, 2000);
    cr_assert_lt(at(log, "removed capture run-100-1.jpcap (100 bytes): older than "
                         "--capture-max-age 86400s"), at(log, "run 1 started"), "%s", log);
    cr_assert_null(strstr(log, "run-200-2"), "a capture younger than a day stays: %s", log);
    cr_assert(!exists(caps, "run-100-1.jpcap") && exists(caps, "run-200-2.jpcap") &&
              exists(caps, "run-old.txt"));
    char name[300];
    cr_assert_eq(find_suffix(caps, "-1.jpcap", name, sizeof name), 1, "the run's capture");
    free(log);
    remove_dir(caps);
    rmdir(dir);
    free(dir);
}

/* With a cap every finished capture is over, the capture of a run still going survives the
 * prune after another run, and goes once its run has ended. */
Test(diskfull, a_capture_being_written_survives_the_caps)
{
    char sock[600], caps[600];
    char *dir = caps_fixture(sock, caps);
    const char *extra[] = {"--capture-dir", caps, "--capture-max-bytes", "1", NULL};
    int errfd;
    pid_t d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);
    struct jpt_client a;
    cr_assert_eq(jpt_client_connect(&a, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 7, 100000);
    struct jp_ring ring;
    uint64_t id_a;
    cr_assert_eq(jpt_start_run(&a, &s, 1024, -1, 3000, &ring, &id_a), 0);
    char *log = NULL;
    size_t len = 0;
    wait_log(errfd, &log, &len, "run 1 started");
    jpt_run_complete(sock, 8, 2000); /* run 2: its capture is over the cap once it ends */
    wait_log(errfd, &log, &len, "-2.jpcap (");
    cr_assert(strstr(log, "removed capture run-") != NULL, "%s", log);
    char name[300];
    cr_assert_eq(find_suffix(caps, "-2.jpcap", name, sizeof name), 0, "run 2's capture went");
    cr_assert_eq(find_suffix(caps, "-1.jpcap", name, sizeof name), 1,
                 "run 1's capture, being written, stays: %s", log);
    cr_assert_null(strstr(log, "-1.jpcap ("), "%s", log);
    /* run 1 ends (its producer goes away): then its capture is finished and over the cap */
    jpt_client_close(&a);
    jp_ring_unmap(&ring);
    wait_log(errfd, &log, &len, "-1.jpcap (");
    cr_assert_lt(at(log, "-2.jpcap ("), at(log, "-1.jpcap ("), "%s", log);
    tl_stop(d, 20000);
    close(errfd);
    cr_assert_eq(count_files(caps), 0);
    free(log);
    rmdir(caps);
    rmdir(dir);
    free(dir);
}

Test(diskfull, capture_caps_need_a_capture_dir_and_valid_values)
{
    static const char *const bad[][3] = {
        {"--capture-max-bytes", "10X", "--capture-max-bytes must be"},
        {"--capture-max-bytes", "0", "--capture-max-bytes must be"},
        {"--capture-max-bytes", "M", "--capture-max-bytes must be"},
        {"--capture-max-bytes", "99999999999G", "--capture-max-bytes must be"},
        {"--capture-max-age", "1w", "--capture-max-age must be"},
        {"--capture-max-age", "-1d", "--capture-max-age must be"},
        {"--capture-max-age", "1000000000d", "--capture-max-age must be"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)jpt_daemon_bin(), (char *)"serve", (char *)"--capture-dir",
                        (char *)"/tmp", (char *)bad[i][0], (char *)bad[i][1], NULL};
        char *err = NULL;
        int st = jpt_capture_cmd(argv, NULL, NULL, &err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s %s: exit %d", bad[i][0],
                  bad[i][1], st);
        cr_assert(strstr(err, bad[i][2]) && strstr(err, bad[i][1]), "stderr: %s", err);
        free(err);
    }
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)"serve", (char *)"--capture-max-age",
                    (char *)"7d", NULL};
    char *err = NULL;
    int st = jpt_capture_cmd(argv, NULL, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    cr_assert(strstr(err, "--capture-max-age needs --capture-dir"), "stderr: %s", err);
    free(err);
}
