/* What an operator sees of a serve daemon: `jettprofd status` (its live runs, with what another
 * uid may see of them) and the runs log's row of each finished run. */
#include <criterion/criterion.h>
#include <regex.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

/* 1 when s matches the extended regular expression re. */
static int matches(const char *s, const char *re)
{
    regex_t rx;
    cr_assert_eq(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0, "%s", re);
    int ok = regexec(&rx, s, 0, NULL, 0) == 0;
    regfree(&rx);
    return ok;
}

Test(status, runs_log_row_names_start_duration_program_mode_status)
{
    char *dir = jpt_tmpdir();
    char sock[600], log[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(log, sizeof log, "%s/runs.jsonl", dir);
    const char *extra[] = {"--runs-log", log, NULL};
    int errfd;
    pid_t d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);

    time_t before = time(NULL);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 12, 2000);
    struct jpt_result res;
    cr_assert_eq(jpt_run(&c, &s, 1024, -1, &res), 0);
    cr_assert_eq(res.error_code, 0, "%s", res.error);
    jpt_client_close(&c);
    jpt_result_free(&res);

    kill(d, SIGTERM);
    cr_assert_eq(tl_wait(d, 10000), 0);
    close(errfd);
    char *row = jpt_slurp_file(log, NULL);
    cr_assert(row && row[0], "no runs log row");
    /* the existing fields stay */
    cr_expect(matches(row, "^\\{\"run_id\":1,\"pid\":[0-9]+,\"uid\":0,\"ending\":\"stop\","), "%s",
              row);
    cr_expect(strstr(row, "\"mode\":\"memory\""), "%s", row);
    cr_expect(strstr(row, "\"status\":\"complete\""), "%s", row);
    cr_expect(strstr(row, "\"totals\":{"), "%s", row);
    /* the new ones: the program is the stream's first project source (support.c) */
    cr_expect(matches(row, "\"start\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:"
                           "[0-9]{2}Z\""), "%s", row);
    cr_expect(matches(row, "\"duration_ms\":[0-9]+,"), "%s", row);
    cr_expect(strstr(row, "\"program\":\"src/mod5_0.jett\""), "%s", row);
    /* the start is this run's: between the second before it and the one after the daemon ended */
    time_t after = time(NULL);
    int found = 0;
    for (time_t t = before; t <= after && !found; t++) {
        char when[48];
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "\"start\":\"%Y-%m-%dT%H:%M:%SZ\"", &tm);
        found = strstr(row, when) != NULL;
    }
    cr_expect(found, "no start between %lld and %lld in %s", (long long)before,
              (long long)after, row);
    free(row);
    free(dir);
}

#define GROUP 4242

/* STATUS{format} over a fresh connection: the reply's text (malloc'ed), or NULL. */
static char *status_of(const char *sock, uint32_t format)
{
    struct jpt_client c;
    if (jpt_client_connect(&c, sock) < 0)
        return NULL;
    struct jp_ctl_msg m = {.type = JP_CTL_STATUS};
    m.u.status.format = format;
    char *text = NULL;
    if (jp_ctl_send(c.fd, &m, NULL, 0) == 0 && jpt_client_recv(&c, &m, 10000) == 1 &&
        m.type == JP_CTL_STATUS_REPLY) {
        text = malloc(m.u.status_reply.text_len + 1);
        if (text) {
            memcpy(text, m.u.status_reply.text, m.u.status_reply.text_len);
            text[m.u.status_reply.text_len] = '\0';
        }
    }
    jpt_client_close(&c);
    return text;
}

/* Waits (up to 10 s) until the daemon lists run id as live, which it does once a worker has
 * mapped the run's ring: 1, or 0 when it never did. */
static int wait_listed(const char *sock, uint64_t id)
{
    char want[64];
    snprintf(want, sizeof want, "{\"run_id\":%llu,", (unsigned long long)id);
    for (int i = 0; i < 1000; i++) {
        char *t = status_of(sock, 1);
        int found = t && strstr(t, want);
        free(t);
        if (found)
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static char *serve_dir(char *sock, size_t cap, pid_t *d, const char *const extra[])
{
    char *dir = jpt_tmpdir();
    cr_assert_not_null(dir);
    cr_assert_eq(chmod(dir, 0755), 0);
    snprintf(sock, cap, "%s/d.sock", dir);
    *d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(*d, 0);
    return dir;
}

static void stop(pid_t d)
{
    kill(d, SIGTERM);
    int st = tl_wait(d, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon exit %d", st);
}

Test(status, a_live_run_is_listed_in_human_and_json)
{
    char sock[600];
    pid_t d;
    char *dir = serve_dir(sock, sizeof sock, &d, NULL);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 3, 1000000);
    struct jp_ring ring;
    uint64_t id = 0;
    cr_assert_eq(jpt_start_run(&c, &s, 4096, -1, 500, &ring, &id), 0);
    cr_assert(wait_listed(sock, id), "run %llu never listed", (unsigned long long)id);

    char *bin = (char *)jpt_daemon_bin();
    char *argv[] = {bin, "status", "--socket", sock, "--format", "json", NULL};
    char *out = NULL, *err = NULL;
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status: %s", err);
    char want[128];
    snprintf(want, sizeof want, "\"live\":[{\"run_id\":%llu,\"uid\":0,", (unsigned long long)id);
    cr_expect(strstr(out, want), "%s", out);
    cr_expect(strstr(out, "\"mode\":\"cpu\""), "%s", out);
    cr_expect(matches(out, "^\\{\"uptime_ms\":[0-9]+,\"workers\":[1-9][0-9]*,\"rss_bytes\":[1-9]"),
              "%s", out);
    cr_expect(strstr(out, "\"runs_started\":1,\"runs_finished\":0,"), "%s", out);
    cr_expect(strstr(out, "\"live_hidden\":0}"), "%s", out);
    free(out);
    free(err);

    char *hargv[] = {bin, "status", "--socket", sock, NULL};
    st = jpt_capture_cmd(hargv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status: %s", err);
    cr_expect(strstr(out, "live runs: 1\n"), "%s", out);
    snprintf(want, sizeof want, "\n  %llu 0 ", (unsigned long long)id);
    cr_expect(strstr(out, want), "%s", out);
    free(out);
    free(err);

    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    stop(d);
    free(dir);
}

Test(status, another_uid_sees_its_own_runs_and_only_a_count_of_others)
{
    char sock[600];
    pid_t d;
    const char *extra[] = {"--allow-group", "4242", NULL};
    char *dir = serve_dir(sock, sizeof sock, &d, extra);
    cr_assert_eq(chmod(sock, 0666), 0);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 4, 1000000);
    struct jp_ring ring;
    uint64_t root_run = 0;
    cr_assert_eq(jpt_start_run(&c, &s, 4096, -1, 100, &ring, &root_run), 0);
    cr_assert(wait_listed(sock, root_run));

    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t child = tl_fork();
    if (child == 0) {
        close(p[0]);
        jpt_become(4001, GROUP);
        struct jpt_client k;
        if (jpt_client_connect(&k, sock) < 0)
            _exit(90);
        struct jpt_stream ks;
        jpt_stream_init(&ks, JP_MODE_MEMORY, 5, 1000000);
        struct jp_ring kr;
        uint64_t mine = 0;
        if (jpt_start_run(&k, &ks, 4096, -1, 100, &kr, &mine) < 0)
            _exit(91);
        if (!wait_listed(sock, mine))
            _exit(93);
        char *text = status_of(sock, 1);
        if (!text)
            _exit(92);
        dprintf(p[1], "%llu\n%s", (unsigned long long)mine, text);
        _exit(0);
    }
    close(p[1]);
    char *got = jpt_slurp_fd(p[0]);
    close(p[0]);
    int st;
    cr_assert_eq(waitpid(child, &st, 0), child);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit %d", WEXITSTATUS(st));
    unsigned long long mine = strtoull(got, NULL, 10);
    const char *text = strchr(got, '\n');
    cr_assert(text && mine > 0, "%s", got);
    char want[128];
    snprintf(want, sizeof want, "{\"run_id\":%llu,\"uid\":4001,", mine);
    cr_expect(strstr(text, want), "its own run in full: %s", text);
    snprintf(want, sizeof want, "\"run_id\":%llu,", (unsigned long long)root_run);
    cr_expect(!strstr(text, want), "root's run must not show: %s", text);
    cr_expect(!strstr(text, "\"uid\":0,"), "%s", text);
    cr_expect(strstr(text, "\"live_hidden\":1}"), "%s", text);
    free(got);

    /* root sees both in full (the child's run may have ended with the child; its own stays) */
    char *all = status_of(sock, 1);
    cr_assert_not_null(all);
    snprintf(want, sizeof want, "{\"run_id\":%llu,\"uid\":0,", (unsigned long long)root_run);
    cr_expect(strstr(all, want), "%s", all);
    cr_expect(strstr(all, "\"live_hidden\":0}"), "%s", all);
    free(all);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    stop(d);
    free(dir);
}
