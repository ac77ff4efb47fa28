/* Files the long-lived daemon writes when the disk (here: its file size limit, RLIMIT_FSIZE,
 * which makes writes fail with EFBIG like a full disk fails them with ENOSPC) will not take
 * them: the runs log keeps whole lines only, a capture that cannot be written is removed, and
 * a capture directory given as a symbolic link is refused. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

/* Spawns serve with the soft file size limit at fsize (the daemon inherits it). */
static pid_t serve_limited(const char *sock, const char *const extra[], rlim_t fsize)
{
    struct rlimit old, lim;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = fsize < old.rlim_max ? fsize : old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    cr_assert_gt(d, 0);
    return d;
}

static void stop(pid_t d)
{
    kill(d, SIGTERM);
    int st = tl_wait(d, 20000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon exit %d", st);
}

static void one_run(const char *sock, uint32_t seed, uint64_t events)
{
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, seed, events);
    struct jpt_result r;
    cr_assert_eq(jpt_run(&c, &s, 4096, -1, &r), 0);
    cr_assert_eq(r.error_code, 0, "%s", r.error);
    cr_assert_eq(r.status, JP_STATUS_COMPLETE, "the profile survives the full disk");
    jpt_result_free(&r);
    jpt_client_close(&c);
}

Test(diskfull, the_runs_log_keeps_only_whole_lines)
{
    char *dir = jpt_tmpdir();
    char sock[600], log[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(log, sizeof log, "%s/runs.jsonl", dir);
    const char *extra[] = {"--runs-log", log, NULL};
    pid_t d = serve_limited(sock, extra, 1500);
    for (uint32_t i = 0; i < 8; i++)
        one_run(sock, i + 1, 200);
    stop(d);
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
    char *dir = jpt_tmpdir();
    char sock[600], caps[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(caps, sizeof caps, "%s/caps", dir);
    cr_assert_eq(mkdir(caps, 0700), 0);
    const char *extra[] = {"--capture-dir", caps, NULL};
    pid_t d = serve_limited(sock, extra, 16384);
    one_run(sock, 3, 20000); /* its capture is far past 16 KiB */
    stop(d);
    cr_assert_eq(count_files(caps), 0, "no empty or cut-short capture is left behind");
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
