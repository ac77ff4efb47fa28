/* What an operator sees of a serve daemon: `jettprofd status` (its live runs, with what another
 * uid may see of them) and the runs log's row of each finished run. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
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
#include "tests/lib/stop.h"

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

/* m over a fresh connection: the STATUS_REPLY's text (malloc'ed), or NULL. */
static char *reply_to(const char *sock, struct jp_ctl_msg *m)
{
    struct jpt_client c;
    if (jpt_client_connect(&c, sock) < 0)
        return NULL;
    char *text = NULL;
    if (jp_ctl_send(c.fd, m, NULL, 0) == 0 && jpt_client_recv(&c, m, 10000) == 1 &&
        m->type == JP_CTL_STATUS_REPLY) {
        text = malloc(m->u.status_reply.text_len + 1);
        if (text) {
            memcpy(text, m->u.status_reply.text, m->u.status_reply.text_len);
            text[m->u.status_reply.text_len] = '\0';
        }
    }
    jpt_client_close(&c);
    return text;
}

static char *status_of(const char *sock, uint32_t format)
{
    struct jp_ctl_msg m = {.type = JP_CTL_STATUS};
    m.u.status.format = format;
    return reply_to(sock, &m);
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

/* Starts a run over *c that stays live (count records pushed) and waits until the daemon
 * lists it; its run id. */
static uint64_t live_run(const char *sock, struct jpt_client *c, uint32_t mode, uint32_t seed,
                         uint64_t count, struct jp_ring *ring)
{
    cr_assert_eq(jpt_client_connect(c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, mode, seed, 1000000);
    uint64_t id = 0;
    cr_assert_eq(jpt_start_run(c, &s, 4096, -1, count, ring, &id), 0);
    cr_assert(wait_listed(sock, id), "run %llu never listed", (unsigned long long)id);
    return id;
}

Test(status, a_live_run_is_listed_in_human_and_json)
{
    char sock[600];
    pid_t d;
    char *dir = serve_dir(sock, sizeof sock, &d, NULL);
    struct jpt_client c;
    struct jp_ring ring;
    uint64_t id = live_run(sock, &c, JP_MODE_CPU, 3, 500, &ring);

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

    /* The producer's gauges (here the test is the producer) and the program reach the row
     * once the daemon has drained again. */
    __atomic_store_n(&ring.sh->gauge_lost, 7, __ATOMIC_RELAXED);
    __atomic_store_n(&ring.sh->gauge_wait_ns, 2500000, __ATOMIC_RELAXED);
    out = NULL;
    for (int i = 0; i < 1000 && !(out && strstr(out, "\"lost\":7,")); i++) {
        free(out);
        out = status_of(sock, 1);
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    cr_assert(out && strstr(out, "\"waits\":0,\"wait_ns\":2500000,\"lost\":7,"
                                 "\"capture_waits\":0,\"capture_wait_ns\":0,"
                                 "\"program\":\"src/mod3_0.jett\"}"), "%s", out);
    free(out);

    char *hargv[] = {bin, "status", "--socket", sock, NULL};
    st = jpt_capture_cmd(hargv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status: %s", err);
    cr_expect(strstr(out, "live runs: 1\n"), "%s", out);
    snprintf(want, sizeof want, "\n  %llu 0 ", (unsigned long long)id);
    cr_expect(strstr(out, want), "%s", out);
    cr_expect(strstr(out, " RING_FILL WAITS WAIT_MS LOST CAPTURE_WAITS CAPTURE_WAIT_MS PROGRAM\n"),
              "%s", out);
    cr_expect(strstr(out, " 0 2 7 0 0 \"src/mod3_0.jett\"\n"),
              "waits, wait ms, lost, capture waits, capture wait ms, program: %s", out);
    free(out);
    free(err);

    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    tl_stop(d, 10000);
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
    struct jp_ring ring;
    uint64_t root_run = live_run(sock, &c, JP_MODE_CPU, 4, 100, &ring);

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
    tl_stop(d, 10000);
    free(dir);
}

/* ---- a strict reader of the Prometheus text exposition format ---- */

static int metric_name(const char **p)
{
    const char *s = *p;
    if (!(isalpha((unsigned char)*s) || *s == '_' || *s == ':'))
        return 0;
    while (isalnum((unsigned char)*s) || *s == '_' || *s == ':')
        s++;
    *p = s;
    return 1;
}

/* Checks every line of text; returns NULL when it is well formed, else what is wrong (static).
 * Families: one HELP and one TYPE each, TYPE before its samples, samples named as their family,
 * counters ending in _total; labels name="value"; values numbers. */
static const char *prom_check(const char *text, int *samples)
{
    static char why[256];
    char family[128] = "", type[16] = "";
    char seen[64][128];
    int nseen = 0;
    *samples = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            return "the last line has no newline";
        const char *p = line;
        if (!strncmp(p, "# HELP ", 7) || !strncmp(p, "# TYPE ", 7)) {
            int is_type = p[2] == 'T';
            p += 7;
            const char *n0 = p;
            if (!metric_name(&p) || *p != ' ')
                return "a bad metric name after # HELP / # TYPE";
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(p - n0), n0);
            p++;
            if (is_type) {
                if (strcmp(name, family))
                    return "TYPE not right after its family's HELP";
                snprintf(type, sizeof type, "%.*s", (int)(end - p), p);
                if (strcmp(type, "counter") && strcmp(type, "gauge"))
                    return "a TYPE that is neither counter nor gauge";
                size_t nl = strlen(name);
                if (!strcmp(type, "counter") && (nl < 6 || strcmp(name + nl - 6, "_total")))
                    return "a counter not named *_total";
            } else {
                for (int i = 0; i < nseen; i++)
                    if (!strcmp(seen[i], name))
                        return "a family described twice";
                if (nseen < 64)
                    snprintf(seen[nseen++], sizeof seen[0], "%s", name);
                snprintf(family, sizeof family, "%s", name);
                type[0] = '\0';
                if (p >= end)
                    return "an empty HELP";
            }
        } else if (*p == '#') {
            return "a comment that is neither HELP nor TYPE";
        } else {
            const char *n0 = p;
            if (!metric_name(&p))
                return "a sample with a bad metric name";
            if ((size_t)(p - n0) != strlen(family) || strncmp(n0, family, (size_t)(p - n0)))
                return "a sample outside its family";
            if (!type[0])
                return "a sample before its TYPE";
            if (*p == '{') {
                p++;
                for (;;) {
                    if (!(isalpha((unsigned char)*p) || *p == '_'))
                        return "a bad label name";
                    while (isalnum((unsigned char)*p) || *p == '_')
                        p++;
                    if (p[0] != '=' || p[1] != '"')
                        return "a label without =\"";
                    p += 2;
                    while (p < end && *p != '"') {
                        if (*p == '\\' && !(p[1] == '\\' || p[1] == '"' || p[1] == 'n'))
                            return "a bad escape in a label value";
                        p += *p == '\\' ? 2 : 1;
                    }
                    if (p >= end)
                        return "an unterminated label value";
                    p++;
                    if (*p == ',') {
                        p++;
                        continue;
                    }
                    if (*p != '}')
                        return "labels not closed";
                    p++;
                    break;
                }
            }
            if (*p != ' ')
                return "no space before the value";
            p++;
            char num[64];
            snprintf(num, sizeof num, "%.*s", (int)(end - p), p);
            char *e;
            double v = strtod(num, &e);
            if (!num[0] || *e || !isfinite(v))
                return snprintf(why, sizeof why, "a value that is not a number: %s", num), why;
            ++*samples;
        }
        line = end + 1;
    }
    return NULL;
}

Test(status, prometheus_output_is_well_formed_and_written_atomically)
{
    char sock[600];
    pid_t d;
    char *dir = serve_dir(sock, sizeof sock, &d, NULL);
    struct jpt_client c;
    struct jp_ring ring;
    uint64_t id = live_run(sock, &c, JP_MODE_MEMORY, 6, 300, &ring);

    char out_path[700];
    snprintf(out_path, sizeof out_path, "%s/jettprofd.prom", dir);
    char *bin = (char *)jpt_daemon_bin();
    char *argv[] = {bin, "status", "--socket", sock, "--format", "prometheus", "-o", out_path,
                    NULL};
    char *out = NULL, *err = NULL;
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status: %s", err);
    cr_expect_str_empty(out, "-o writes nothing on stdout");
    free(out);
    free(err);
    char *text = jpt_slurp_file(out_path, NULL);
    cr_assert_not_null(text);
    int samples;
    const char *why = prom_check(text, &samples);
    cr_assert_null(why, "%s in:\n%s", why, text);
    cr_expect_geq(samples, 10, "%s", text);
    cr_expect(strstr(text, "\njettprofd_runs_started_total 1\n"), "%s", text);
    cr_expect(strstr(text, "\njettprofd_live_runs 1\n"), "%s", text);
    char want[160];
    /* every per-run series: run id, uid, mode and the program (its label escaped) */
    static const char *const series[] = {"records", "lost_records", "live_bytes", "allocations",
                                         "allocations_per_second", "samples"};
    for (size_t k = 0; k < sizeof series / sizeof series[0]; k++) {
        snprintf(want, sizeof want,
                 "\njettprofd_run_%s{run_id=\"%llu\",uid=\"0\",mode=\"memory\",program=\"",
                 series[k], (unsigned long long)id);
        cr_expect(strstr(text, want), "no %s in:\n%s", want, text);
    }
    cr_expect(strstr(text, "\"} 0\n# HELP jettprofd_run_capture_waits "), "no lost records:\n%s",
              text);
    cr_expect(strstr(text, "\n# TYPE jettprofd_run_producer_wait_seconds gauge\n"), "%s", text);
    free(text);
    /* nothing but the file itself and the socket is left in the directory */
    DIR *dd = opendir(dir);
    cr_assert_not_null(dd);
    int entries = 0;
    for (struct dirent *e; (e = readdir(dd));)
        if (e->d_name[0] != '.')
            entries++;
    closedir(dd);
    cr_expect_eq(entries, 2, "a temp file was left behind");

    /* the reader refuses what is not the format (it can fail) */
    cr_expect_not_null(prom_check("# TYPE x gauge\nx 1\n", &samples), "TYPE without HELP");
    cr_expect_not_null(prom_check("# HELP x h\n# TYPE x counter\nx 1\n", &samples));
    cr_expect_not_null(prom_check("# HELP x h\n# TYPE x gauge\nx one\n", &samples));
    cr_expect_not_null(prom_check("# HELP x h\n# TYPE x gauge\ny 1\n", &samples));

    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    tl_stop(d, 10000);
    unlink(out_path);
    free(dir);
}

static char *runs_of(const char *sock, uint32_t format, uint32_t limit)
{
    struct jp_ctl_msg m = {.type = JP_CTL_RUNS};
    m.u.runs.format = format;
    m.u.runs.limit = limit;
    return reply_to(sock, &m);
}

/* One whole run of mode and seed over a fresh connection; its run id. */
static uint64_t one_run(const char *sock, uint32_t mode, uint32_t seed)
{
    struct jpt_client c;
    if (jpt_client_connect(&c, sock) < 0)
        return 0;
    struct jpt_stream s;
    jpt_stream_init(&s, mode, seed, 500);
    struct jpt_result res;
    int r = jpt_run(&c, &s, 1024, -1, &res);
    uint64_t id = r == 0 && res.error_code == 0 ? res.run_id : 0;
    if (r == 0)
        jpt_result_free(&res);
    jpt_client_close(&c);
    return id;
}

Test(status, runs_lists_the_newest_finished_runs_a_caller_may_see)
{
    char sock[600];
    pid_t d;
    const char *extra[] = {"--allow-group", "4242", NULL};
    char *dir = serve_dir(sock, sizeof sock, &d, extra);
    cr_assert_eq(chmod(sock, 0666), 0);
    uint64_t a = one_run(sock, JP_MODE_CPU, 21), b = one_run(sock, JP_MODE_MEMORY, 22);
    cr_assert(a && b);
    pid_t child = tl_fork();
    if (child == 0) {
        jpt_become(4001, GROUP);
        uint64_t mine = one_run(sock, JP_MODE_CPU, 23);
        if (!mine)
            _exit(90);
        char *t = runs_of(sock, 1, 20);
        char want[64];
        snprintf(want, sizeof want, "[{\"run_id\":%llu,\"uid\":4001,", (unsigned long long)mine);
        if (!t || strncmp(t, want, strlen(want)))
            _exit(91);
        if (strstr(t, "\"uid\":0,"))
            _exit(92); /* root's runs must not be listed */
        free(t);
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(child, &st, 0), child);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit %d", WEXITSTATUS(st));

    char *bin = (char *)jpt_daemon_bin();
    char *argv[] = {bin, "runs", "--socket", sock, "--format", "json", NULL};
    char *out = NULL, *err = NULL;
    st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "runs: %s", err);
    /* root sees all three, newest first: the child's, then b, then a */
    const char *pa = strstr(out, "{\"run_id\":1,\"uid\":0,");
    const char *pb = strstr(out, "{\"run_id\":2,\"uid\":0,");
    const char *pc = strstr(out, "{\"run_id\":3,\"uid\":4001,");
    cr_assert(a == 1 && b == 2 && pa && pb && pc && pc < pb && pb < pa, "%s", out);
    cr_expect(matches(pb, "^\\{\"run_id\":2,\"uid\":0,\"start\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T"
                          "[0-9:]{8}Z\",\"duration_ms\":[0-9]+,\"program\":\"src/mod1_0.jett\","
                          "\"mode\":\"memory\",\"status\":\"complete\",\"reason\":\"\"\\}"),
              "%s", out);
    free(out);
    free(err);

    char *hargv[] = {bin, "runs", "--socket", sock, "--limit", "1", NULL};
    st = jpt_capture_cmd(hargv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "runs: %s", err);
    cr_expect(matches(out, "^RUN_ID START DURATION_MS PROGRAM MODE STATUS REASON\n"
                           "3 [0-9T:Z-]+ [0-9]+ \"src/mod2_0.jett\" cpu complete -\n$"),
              "%s", out);
    free(out);
    free(err);
    tl_stop(d, 10000);
    free(dir);
}

/* SHOW run_id as root: the TOON text (malloc'ed), or NULL with the error code in *code. */
static char *show_toon(const char *sock, uint64_t run_id, uint32_t *code)
{
    struct jpt_client c;
    *code = 0;
    if (jpt_client_connect(&c, sock) < 0)
        return NULL;
    struct jp_ctl_msg m = {.type = JP_CTL_SHOW};
    m.u.show.run_id = run_id;
    m.u.show.outputs = JP_OUT_TOON;
    char *text = NULL;
    if (jp_ctl_send(c.fd, &m, NULL, 0) == 0 && jpt_client_recv(&c, &m, 10000) == 1) {
        if (m.type == JP_CTL_RESULT) {
            text = malloc(m.u.result.toon_len + 1);
            if (text) {
                memcpy(text, m.u.result.toon, m.u.result.toon_len);
                text[m.u.result.toon_len] = '\0';
            }
        } else if (m.type == JP_CTL_ERROR) {
            *code = m.u.error.code;
        }
    }
    jpt_client_close(&c);
    return text;
}

/* A fresh directory with sock[600] and state[600] (made, 0700) in it, for a daemon started
 * with --state-dir state. */
static char *state_dir_daemon(char *sock, char *state)
{
    char *dir = jpt_tmpdir();
    cr_assert_not_null(dir);
    snprintf(sock, 600, "%s/d.sock", dir);
    snprintf(state, 600, "%s/state", dir);
    cr_assert_eq(mkdir(state, 0700), 0);
    return dir;
}

Test(status, show_survives_a_restart_and_run_ids_go_on)
{
    char sock[600], state[600];
    char *dir = state_dir_daemon(sock, state);
    const char *extra[] = {"--state-dir", state, NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    uint64_t a = one_run(sock, JP_MODE_CPU, 31), b = one_run(sock, JP_MODE_MEMORY, 32);
    cr_assert(a == 1 && b == 2);
    uint32_t code;
    char *before = show_toon(sock, b, &code);
    cr_assert_not_null(before, "code %u", code);
    tl_stop(d, 10000);

    d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    char *after = show_toon(sock, b, &code);
    cr_assert_not_null(after, "run %llu not shown after a restart: code %u",
                       (unsigned long long)b, code);
    cr_expect_str_eq(after, before);
    char *first = show_toon(sock, a, &code);
    cr_expect_not_null(first, "code %u", code);
    /* the next run does not take an id a kept run has */
    uint64_t c = one_run(sock, JP_MODE_CPU, 33);
    cr_expect_eq(c, 3, "run id after a restart: %llu", (unsigned long long)c);
    struct stat st;
    char path[700];
    snprintf(path, sizeof path, "%s/run-2.kept", state);
    cr_assert_eq(lstat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    free(before);
    free(after);
    free(first);
    tl_stop(d, 10000);
    free(dir);
}

/* A daemon killed with a run in flight never saved that run (it was never kept), yet the
 * run's program was told its id: after the restart no other run may get it. */
Test(status, a_run_in_flight_when_the_daemon_died_keeps_its_id_to_itself)
{
    char sock[600], state[600];
    char *dir = state_dir_daemon(sock, state);
    const char *extra[] = {"--state-dir", state, NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    uint64_t a = one_run(sock, JP_MODE_CPU, 41);
    struct jpt_client c;
    struct jp_ring ring;
    uint64_t b = live_run(sock, &c, JP_MODE_CPU, 42, 100, &ring);
    cr_assert_gt(b, a);
    kill(d, SIGKILL);
    cr_assert_geq(tl_wait(d, 10000), 0);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);

    d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    uint64_t next = one_run(sock, JP_MODE_CPU, 43);
    cr_expect_gt(next, b, "run %llu was in flight at the crash; the next run got %llu",
                 (unsigned long long)b, (unsigned long long)next);
    tl_stop(d, 10000);
    /* a clean exit saves the exact next id: nothing was in flight */
    d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    uint64_t after = one_run(sock, JP_MODE_CPU, 44);
    cr_expect_eq(after, next + 1, "after a clean exit: %llu then %llu", (unsigned long long)next,
                 (unsigned long long)after);
    tl_stop(d, 10000);
    free(dir);
}

Test(status, a_corrupt_state_file_is_skipped_and_named)
{
    char sock[600], state[600];
    char *dir = state_dir_daemon(sock, state);
    const char *extra[] = {"--state-dir", state, NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    cr_assert_eq(one_run(sock, JP_MODE_CPU, 41), 1);
    cr_assert_eq(one_run(sock, JP_MODE_CPU, 42), 2);
    tl_stop(d, 10000);
    /* run 1's file cut by one byte; run 2's header claims more text than the file holds; a
     * file that claims to be run 7 but names another id; a link planted as run 9 */
    char p1[700], p2[700], p7[700], p9[700];
    snprintf(p1, sizeof p1, "%s/run-1.kept", state);
    snprintf(p2, sizeof p2, "%s/run-2.kept", state);
    snprintf(p7, sizeof p7, "%s/run-7.kept", state);
    snprintf(p9, sizeof p9, "%s/run-9.kept", state);
    struct stat st;
    cr_assert_eq(stat(p1, &st), 0);
    cr_assert_eq(truncate(p1, st.st_size - 1), 0);
    /* run 7: a byte-for-byte copy of run 2's sound file, so that only its header's id (run 2)
     * tells it apart from a kept run 7 */
    cr_assert_eq(stat(p2, &st), 0);
    char *copy = malloc((size_t)st.st_size);
    cr_assert_not_null(copy);
    int fd2 = open(p2, O_RDONLY);
    cr_assert_geq(fd2, 0);
    cr_assert_eq(read(fd2, copy, (size_t)st.st_size), (ssize_t)st.st_size);
    close(fd2);
    int fd7 = open(p7, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd7, 0);
    cr_assert_eq(write(fd7, copy, (size_t)st.st_size), (ssize_t)st.st_size);
    close(fd7);
    free(copy);
    cr_assert_eq(symlink("/etc/passwd", p9), 0);
    int fd = open(p2, O_WRONLY);
    cr_assert_geq(fd, 0);
    uint64_t huge = UINT64_MAX / 2;
    cr_assert_eq(pwrite(fd, &huge, sizeof huge, 64), (ssize_t)sizeof huge); /* human_len */
    close(fd);

    int errfd;
    d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);
    uint32_t code;
    for (uint64_t id = 1; id <= 9; id++) {
        char *t = show_toon(sock, id, &code);
        cr_expect_null(t, "run %llu was trusted", (unsigned long long)id);
        free(t);
    }
    tl_stop(d, 10000);
    char *err = jpt_slurp_fd(errfd);
    close(errfd);
    cr_expect(strstr(err, "run-1.kept is corrupt; skipped"), "%s", err);
    cr_expect(strstr(err, "run-2.kept is corrupt; skipped"), "%s", err);
    cr_expect(strstr(err, "run-7.kept is corrupt; skipped"), "%s", err);
    cr_expect(strstr(err, "run-9.kept cannot be opened; skipped"), "%s", err);
    free(err);
    free(dir);
}

/* `status --format prometheus` lists the first 100 live runs (JPD_PROM_MAX_RUNS) one by one and
 * adds up the rest as run_id="other" in the figures that add up (records), not in those that do
 * not (age, ring fill). */
Test(status, prometheus_lists_a_hundred_runs_and_adds_up_the_rest, .timeout = 120)
{
    enum { RUNS = 102 };
    char sock[600];
    pid_t d;
    const char *extra[] = {"--max-runs-per-uid", "200", NULL};
    char *dir = serve_dir(sock, sizeof sock, &d, extra);
    static struct jpt_client c[RUNS];
    static struct jp_ring ring[RUNS];
    for (uint32_t i = 0; i < RUNS; i++) {
        cr_assert_eq(jpt_client_connect(&c[i], sock), 0);
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_MEMORY, 100 + i, 1000000);
        uint64_t id;
        cr_assert_eq(jpt_start_run(&c[i], &s, JP_RING_MIN_SLOTS, -1, 40, &ring[i], &id), 0);
    }
    char *bin = (char *)jpt_daemon_bin();
    char *argv[] = {bin, "status", "--socket", sock, "--format", "prometheus", NULL};
    char *text = NULL;
    for (int tries = 0;; tries++) {
        char *err = NULL;
        free(text);
        int st = jpt_capture_cmd(argv, &text, NULL, &err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status: %s", err);
        free(err);
        if (strstr(text, "\njettprofd_live_runs 102\n") &&
            !strstr(text, "jettprofd_run_records{run_id=\"other\",uid=\"\",mode=\"\",program=\"\"} 0\n"))
            break;
        cr_assert_lt(tries, 1000, "never saw the runs and their records:\n%s", text);
        usleep(10000);
    }
    int listed = 0;
    for (const char *p = text; (p = strstr(p, "\njettprofd_run_records{run_id=\"")); p++)
        listed += p[strlen("\njettprofd_run_records{run_id=\"")] != 'o';
    cr_expect_eq(listed, 100, "one by one: the first hundred\n%s", text);
    cr_expect(strstr(text, "\njettprofd_run_records{run_id=\"other\",uid=\"\",mode=\"\",program=\"\"} "),
              "%s", text);
    cr_expect_null(strstr(text, "jettprofd_run_age_seconds{run_id=\"other\""),
                   "ages do not add up");
    int samples;
    const char *why = prom_check(text, &samples);
    cr_expect_null(why, "%s in:\n%s", why, text);
    free(text);
    for (uint32_t i = 0; i < RUNS; i++) {
        jp_ring_unmap(&ring[i]);
        jpt_client_close(&c[i]);
    }
    tl_stop(d, 20000);
    rmdir(dir);
    free(dir);
}
