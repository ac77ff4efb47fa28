/* Fleet push: `serve --push URL` and `export CAPTURE --push URL` against an HTTP receiver run
 * by the test itself (a thread on 127.0.0.1, port 0) that records every request's method,
 * path, query, headers and body and answers as each case scripts it: the request is Pyroscope's
 * ingest (POST /ingest, name=APP{labels}, from, until, format=pprof), its body the run's pprof,
 * byte-equal to `jettprofd export CAPTURE --format pprof` and read by `go tool pprof`; retries
 * are bounded and counted in `status`; a receiver that never answers delays neither a run's
 * result nor the daemon's exit; bad flags are named; a client's program cannot add a label. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"
#include "capfile.h"
#include "tests/lib/http_recv.h"

/* ---- the receiver (tests/lib/http_recv.h) ---- */

/* A receiver answering the i-th request with codes[i] (the last code for every later one). */
static struct tl_http_recv *receiver_start(const int *codes, int ncodes)
{
    struct tl_http_recv *r = NULL;
    int rc = tl_http_start(codes, ncodes, &r);
    cr_assert_eq(rc, 0, "the test's HTTP receiver: %s", strerror(-rc));
    return r;
}

/* The i-th request rx received (asserts it has one). */
static const struct tl_http_req *received(struct tl_http_recv *rx, int i)
{
    const struct tl_http_req *q = tl_http_req(rx, i);
    cr_assert_not_null(q, "request %d never arrived (%d did)", i, tl_http_count(rx));
    return q;
}

static char *host_name(void)
{
    static char h[256];
    cr_assert_eq(gethostname(h, sizeof h), 0);
    for (char *c = h; *c; c++)
        cr_assert(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_", *c),
                  "this test expects a host name of letters, digits, '.', '-': %s", h);
    return h;
}

/* ---- the daemon and its clients ---- */

static char *url_of(const struct tl_http_recv *r, const char *userinfo)
{
    char *u = malloc(256);
    cr_assert_not_null(u);
    snprintf(u, 256, "http://%s127.0.0.1:%d/ingest", userinfo ? userinfo : "", tl_http_port(r));
    return u;
}

static const char *jett_bin(void)
{
    const char *p = getenv("JETT_BIN");
    cr_assert(p && *p, "JETT_BIN must name the built jett (run through meson test)");
    return p;
}

static char *write_file(const char *dir, const char *name, const char *text)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    cr_assert_not_null(path);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    cr_assert_not_null(f, "%s", path);
    cr_assert_geq(fputs(text, f), 0);
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* The work is in `leaf`, with allocations kept to the end: both modes have something to say. */
static const char program_src[] = "var kept = []\n"
                                  "fn leaf(n: int) -> int {\n"
                                  "  var h = 0\n"
                                  "  for i in 0..n { h = (h * 31 + i) % 1000003 }\n"
                                  "  return h\n"
                                  "}\n"
                                  "fn main() {\n"
                                  "  var t = 0\n"
                                  "  for r in 0..200 {\n"
                                  "    t = t + leaf(3000)\n"
                                  "    push(kept, \"k\" + str(r))\n"
                                  "  }\n"
                                  "  print(str(t))\n"
                                  "}\n";

/* `jett run PROGRAM MODE` against the daemon at sock: asserts it ran and its report came back
 * (the push never changes a run's result). */
static void jett_run(const char *sock, const char *program, const char *mode)
{
    setenv("JETTPROFD_SOCKET", sock, 1);
    char *argv[] = {(char *)jett_bin(), (char *)"run", (char *)program, (char *)mode, NULL};
    char *out, *err;
    size_t len;
    int st = jpt_capture_cmd(argv, &out, &len, &err);
    cr_assert_eq(st, 0, "jett run %s %s: status %d: %s", program, mode, st, err);
    cr_assert(out[0] >= '0' && out[0] <= '9', "the program's own output: %s", out);
    const char *head = !strcmp(mode, "--profile") ? "CPU profile\n" : "Memory profile\n";
    cr_assert(strstr(err, head), "the run's report: %s", err);
    cr_assert(strstr(err, "status: complete"), "%s", err);
    free(out);
    free(err);
}

/* `jettprofd status --format json` of the daemon at sock (malloc'ed). */
static char *status_json(const char *sock)
{
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)"status", (char *)"--socket", (char *)sock,
                    (char *)"--format", (char *)"json", NULL};
    char *out, *err;
    size_t len;
    int st = jpt_capture_cmd(argv, &out, &len, &err);
    cr_assert_eq(st, 0, "status: %s", err);
    free(err);
    return out;
}

/* The figure of key in the status JSON's "push" object; asserts it is there. */
static long long push_figure(const char *json, const char *key)
{
    const char *p = strstr(json, "\"push\":{");
    cr_assert_not_null(p, "no push object in %s", json);
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *at = strstr(p, k);
    cr_assert_not_null(at, "no %s in %s", key, p);
    return strtoll(at + strlen(k), NULL, 10);
}

/* Polls status (up to 30 s) until the push figure key reaches want: the JSON then (malloc'ed). */
static char *status_when(const char *sock, const char *key, long long want)
{
    for (time_t end = time(NULL) + 30; time(NULL) <= end;) {
        char *j = status_json(sock);
        if (push_figure(j, key) >= want)
            return j;
        free(j);
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_fail("the push figure %s never reached %lld", key, want);
    return NULL;
}

/* `jettprofd export CAPTURE --format pprof`'s bytes (malloc'ed, *len). */
static char *export_pprof(const char *capture, size_t *len)
{
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)"export", (char *)capture,
                    (char *)"--format", (char *)"pprof", NULL};
    char *out, *err;
    int st = jpt_capture_cmd(argv, &out, len, &err);
    cr_assert_eq(st, 0, "export %s: %s", capture, err);
    free(err);
    return out;
}

/* The capture of run id in the capture directory (run-TIME-ID.jpcap), malloc'ed. */
static char *capture_of_run(const char *dir, uint64_t id)
{
    char tail[48];
    snprintf(tail, sizeof tail, "-%llu.jpcap", (unsigned long long)id);
    DIR *dh = opendir(dir);
    cr_assert_not_null(dh);
    char *found = NULL;
    for (struct dirent *e; (e = readdir(dh));) {
        size_t n = strlen(e->d_name), t = strlen(tail);
        if (n > t && !strcmp(e->d_name + n - t, tail)) {
            found = malloc(strlen(dir) + n + 2);
            cr_assert_not_null(found);
            sprintf(found, "%s/%s", dir, e->d_name);
        }
    }
    closedir(dh);
    cr_assert_not_null(found, "no capture of run %llu in %s", (unsigned long long)id, dir);
    return found;
}

/* `go tool pprof -raw` on the bytes: its whole text (malloc'ed). */
static char *go_pprof_raw(const char *dir, const char *body, size_t len)
{
    const char *go = getenv("JETT_TEST_GO");
    cr_assert(go && *go, "JETT_TEST_GO is not set: go (golang-go) is needed for `go tool "
                         "pprof` (scripts/deps.sh installs it)");
    char file[600], home[600];
    snprintf(file, sizeof file, "%s/pushed.pb.gz", dir);
    snprintf(home, sizeof home, "%s/gohome", dir);
    mkdir(home, 0700);
    setenv("HOME", home, 1);
    setenv("GOCACHE", home, 1);
    FILE *f = fopen(file, "we");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(body, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    char *argv[] = {(char *)go, (char *)"tool", (char *)"pprof", (char *)"-raw", file, NULL};
    char *out, *err;
    size_t olen;
    int st = jpt_capture_cmd(argv, &out, &olen, &err);
    cr_assert_eq(st, 0, "go tool pprof -raw: %s", err);
    free(err);
    return out;
}

/* Its sample types line ("Samples:" header's next). */
static char *go_pprof_types(const char *dir, const char *body, size_t len)
{
    char *out = go_pprof_raw(dir, body, len);
    const char *s = strstr(out, "Samples:\n");
    cr_assert_not_null(s, "%s", out);
    s += 9;
    char *types = strndup(s, strcspn(s, "\n"));
    free(out);
    return types;
}

/* The sums of each sample type's values in a `go tool pprof -raw` text, into sum[4]; the
 * samples' lines are "v1 v2 ...: loc loc ...". Returns the count of types. */
static int raw_sums(const char *raw, long long sum[4])
{
    memset(sum, 0, 4 * sizeof sum[0]);
    const char *s = strstr(raw, "Samples:\n");
    cr_assert_not_null(s, "%s", raw);
    s = strchr(s + 9, '\n') + 1; /* past the types line */
    const char *end = strstr(s, "Locations");
    int ntypes = 0;
    while (s < end && *s) {
        const char *eol = strchr(s, '\n');
        const char *colon = memchr(s, ':', (size_t)(eol - s));
        if (colon) {
            int k = 0;
            for (const char *q = s; q < colon && k < 4;) {
                char *after;
                long long v = strtoll(q, &after, 10);
                if (after == q)
                    break;
                sum[k++] += v;
                q = after;
            }
            ntypes = k > ntypes ? k : ntypes;
        }
        s = eol + 1;
    }
    return ntypes;
}

static void set_knob(const char *name, const char *value)
{
    cr_assert_eq(setenv(name, value, 1), 0);
}

/* A daemon serving on dir/d.sock with --push url and the flags in more (NULL-terminated). */
struct pushd {
    char sock[600];
    pid_t pid;
    int errfd; /* its stderr, when kept: read once it has exited (pushd_stop) */
};

static void pushd_start(struct pushd *p, const char *dir, const char *url,
                        const char *const more[], int keep_log)
{
    snprintf(p->sock, sizeof p->sock, "%s/d.sock", dir);
    const char *extra[16] = {"--push", url};
    int n = 2;
    for (int i = 0; more && more[i] && n < 15; i++)
        extra[n++] = more[i];
    extra[n] = NULL;
    p->errfd = -1;
    p->pid = jpt_serve(p->sock, extra, keep_log ? &p->errfd : NULL);
    cr_assert_gt(p->pid, 0);
}

/* SIGTERM: the daemon exits 0 within 20 s, however its pushes stand. Its log (malloc'ed) when
 * it was kept, else NULL. */
static char *pushd_stop(struct pushd *p)
{
    kill(p->pid, SIGTERM);
    cr_assert_eq(tl_wait(p->pid, 20000), 0, "the daemon exits 0 on SIGTERM, in bounded time");
    if (p->errfd < 0)
        return NULL;
    char *log = jpt_slurp_fd(p->errfd);
    close(p->errfd);
    return log;
}

/* A receiver answering as codes say and a daemon in a fresh directory pushing to it (with
 * userinfo, "user:password@", in the URL when not NULL, and the flags in more). */
struct setup {
    struct tl_http_recv *rx;
    char *dir, *url;
    struct pushd d;
};

static void setup_start(struct setup *t, const int *codes, int ncodes, const char *userinfo,
                        const char *const more[], int keep_log)
{
    t->rx = receiver_start(codes, ncodes);
    t->dir = jpt_tmpdir();
    cr_assert_not_null(t->dir);
    t->url = url_of(t->rx, userinfo);
    pushd_start(&t->d, t->dir, t->url, more, keep_log);
}

/* pushd_stop, then the rest goes: the daemon's log (malloc'ed) when it was kept, else NULL. */
static char *setup_stop(struct setup *t)
{
    char *log = pushd_stop(&t->d);
    tl_http_stop(t->rx);
    free(t->url);
    free(t->dir);
    return log;
}

/* A fresh directory with caps[600] (made) in it, for --capture-dir. */
static char *dir_with_captures(char *caps)
{
    char *dir = jpt_tmpdir();
    cr_assert_not_null(dir);
    snprintf(caps, 600, "%s/caps", dir);
    cr_assert_eq(mkdir(caps, 0700), 0);
    return dir;
}

/* ---- the cases ---- */

Test(push, serve_pushes_each_finished_run_as_its_captures_pprof)
{
    static const int ok[] = {200};
    struct tl_http_recv *rx = receiver_start(ok, 1);
    char caps[600];
    char *dir = dir_with_captures(caps);
    char *url = url_of(rx, NULL);
    const char *more[] = {"--capture-dir", caps, "--label", "team=core", "--label", "env=ci",
                          NULL};
    struct pushd d;
    pushd_start(&d, dir, url, more, 0);
    char *prog = write_file(dir, "main.jett", program_src);

    time_t t0 = time(NULL);
    jett_run(d.sock, prog, "--profile");
    jett_run(d.sock, prog, "--profile-memory");
    cr_assert(tl_http_wait(rx, 2, 30000), "two pushes, got %d", tl_http_count(rx));
    time_t t1 = time(NULL);
    char *j = status_when(d.sock, "pushed", 2);
    cr_expect_eq(push_figure(j, "failed"), 0, "%s", j);
    cr_expect_eq(push_figure(j, "retried"), 0, "%s", j);
    cr_expect_eq(push_figure(j, "dropped"), 0, "%s", j);
    cr_expect_eq(push_figure(j, "queued"), 0, "%s", j);
    cr_expect(strstr(j, "\"last_error\":null"), "%s", j);
    free(j);
    pushd_stop(&d);
    cr_expect_eq(tl_http_count(rx), 2, "each run exactly once");

    const char *host = host_name();
    for (int i = 0; i < 2; i++) {
        const struct tl_http_req *q = received(rx, i);
        cr_expect_str_eq(q->method, "POST");
        cr_expect_str_eq(q->path, "/ingest");
        cr_expect_str_eq(q->ctype, "application/octet-stream");
        cr_expect_eq(q->has_expect, 0, "no Expect: 100-continue");
        char *name = tl_http_query_get(q->query, "name");
        char *from = tl_http_query_get(q->query, "from");
        char *until = tl_http_query_get(q->query, "until");
        char *format = tl_http_query_get(q->query, "format");
        char *spy = tl_http_query_get(q->query, "spyName");
        cr_assert(name && from && until && format && spy, "query: %s", q->query);
        /* run 1 is the CPU run, run 2 the memory run: which arrived first does not matter */
        int cpu = strstr(name, "mode=cpu") != NULL;
        char want[512];
        snprintf(want, sizeof want, "main{program=main.jett,mode=%s,host=%s,team=core,env=ci}",
                 cpu ? "cpu" : "memory", host);
        cr_expect_str_eq(name, want);
        long long f = atoll(from), u = atoll(until);
        cr_expect(f <= u, "from %lld until %lld", f, u);
        cr_expect(f >= (long long)t0 - 1 && u <= (long long)t1 + 1,
                  "from %lld until %lld outside the runs' %lld..%lld", f, u, (long long)t0,
                  (long long)t1);
        cr_expect_str_eq(format, "pprof");
        cr_expect_str_eq(spy, "jettprofd");

        /* The pushed profile is the capture's pprof export, stamped with the run's start and
         * length (time_nanos, duration_nanos): the same samples. */
        char *cap = capture_of_run(caps, cpu ? 1 : 2);
        size_t elen;
        char *exported = export_pprof(cap, &elen);
        char *pushed_raw = go_pprof_raw(dir, q->body, q->len);
        char *export_raw = go_pprof_raw(dir, exported, elen);
        cr_expect_str_eq(strstr(pushed_raw, "Samples:"), strstr(export_raw, "Samples:"));
        cr_expect(strstr(pushed_raw, "\nTime: ") && !strstr(export_raw, "\nTime: "),
                  "the push has a time, an export of a capture none:\n%s", pushed_raw);
        free(pushed_raw);
        free(export_raw);
        char *types = go_pprof_types(dir, q->body, q->len);
        cr_expect_str_eq(types, cpu ? "samples/count cpu/nanoseconds[dflt]"
                                    : "alloc_objects/count alloc_space/bytes[dflt] "
                                      "inuse_objects/count inuse_space/bytes");
        free(types);
        free(exported);
        free(cap);
        free(name), free(from), free(until), free(format), free(spy);
    }
    tl_http_stop(rx);
    free(prog);
    free(url);
    free(dir);
}

Test(push, a_push_answered_500_twice_then_200_arrives_once_after_two_retries)
{
    static const int codes[] = {500, 503, 200};
    set_knob("JETTPROFD_PUSH_BACKOFF_MS", "20");
    struct setup t;
    setup_start(&t, codes, 3, NULL, NULL, 0);
    jpt_run_complete(t.d.sock, 3, 500);
    char *j = status_when(t.d.sock, "pushed", 1);
    cr_expect_eq(push_figure(j, "retried"), 2, "%s", j);
    cr_expect_eq(push_figure(j, "failed"), 0, "%s", j);
    cr_expect_eq(push_figure(j, "queued"), 0, "%s", j);
    cr_expect(strstr(j, "\"last_error\":\"run 1: HTTP 503: scripted 5\""), "%s", j);
    free(j);
    cr_expect_eq(tl_http_count(t.rx), 3);
    const struct tl_http_req *q0 = received(t.rx, 0);
    for (int i = 1; i < 3; i++) {
        const struct tl_http_req *q = received(t.rx, i);
        cr_expect_str_eq(q->query, q0->query, "a retry is the same request");
        cr_expect(q->len == q0->len && !memcmp(q->body, q0->body, q0->len));
    }
    setup_stop(&t);
}

Test(push, a_push_that_always_fails_is_counted_and_the_run_is_unaffected)
{
    static const int codes[] = {500};
    set_knob("JETTPROFD_PUSH_BACKOFF_MS", "20");
    struct setup t;
    /* with a user and password: sent as basic auth, never shown */
    setup_start(&t, codes, 1, "ops:s3cr3tpw@", NULL, 1);
    char *prog = write_file(t.dir, "main.jett", program_src);
    jett_run(t.d.sock, prog, "--profile");
    char *j = status_when(t.d.sock, "failed", 1);
    cr_expect_eq(push_figure(j, "pushed"), 0, "%s", j);
    cr_expect_eq(push_figure(j, "retried"), 2, "%s", j);
    cr_expect(strstr(j, "\"last_error\":\"run 1: HTTP 500: scripted 5\""), "%s", j);
    cr_expect(strstr(j, "\"target\":\"http://***@127.0.0.1:"), "%s", j);
    cr_expect(!strstr(j, "s3cr3tpw") && !strstr(j, "ops:"), "%s", j);
    free(j);
    cr_expect_eq(tl_http_count(t.rx), 3, "three attempts, no more");
    /* base64("ops:s3cr3tpw") */
    cr_expect_str_eq(received(t.rx, 0)->auth, "Basic b3BzOnMzY3IzdHB3");
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)"status", (char *)"--socket", t.d.sock,
                    NULL};
    char *human, *err;
    size_t len;
    cr_assert_eq(jpt_capture_cmd(argv, &human, &len, &err), 0);
    cr_expect(strstr(human, "push: 0 pushed, 1 failed, 2 retried, 0 dropped, 0 queued, 0 samples "
                            "cut to the receiver's limits; to http://***@127.0.0.1:"),
              "%s", human);
    cr_expect(strstr(human, "push last error: run 1: HTTP 500: scripted 5\n"), "%s", human);
    cr_expect(!strstr(human, "s3cr3tpw"), "%s", human);
    free(human);
    free(err);
    char *pargv[] = {(char *)jpt_daemon_bin(), (char *)"status", (char *)"--socket", t.d.sock,
                     (char *)"--format", (char *)"prometheus", NULL};
    char *prom;
    cr_assert_eq(jpt_capture_cmd(pargv, &prom, &len, &err), 0);
    static const char *const lines[] = {
        "# TYPE jettprofd_push_pushed_total counter\njettprofd_push_pushed_total 0\n",
        "# TYPE jettprofd_push_failed_total counter\njettprofd_push_failed_total 1\n",
        "# TYPE jettprofd_push_retried_total counter\njettprofd_push_retried_total 2\n",
        "# TYPE jettprofd_push_dropped_total counter\njettprofd_push_dropped_total 0\n",
        "# TYPE jettprofd_push_queued gauge\njettprofd_push_queued 0\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        cr_expect(strstr(prom, lines[i]), "%s in %s", lines[i], prom);
    cr_expect(!strstr(prom, "s3cr3tpw"), "%s", prom);
    free(prom);
    free(err);
    char *log = setup_stop(&t);
    cr_expect(strstr(log, "run 1: push to http://***@127.0.0.1:"), "%s", log);
    cr_expect(strstr(log, "failed after 3 attempts: HTTP 500"), "%s", log);
    cr_expect(!strstr(log, "s3cr3tpw"), "%s", log);
    free(log);
    free(prog);
}

Test(push, a_closed_port_fails_the_push_and_counts_it)
{
    /* a port nobody listens on: bound, then closed */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ingest", ntohs(a.sin_port));
    set_knob("JETTPROFD_PUSH_BACKOFF_MS", "20");
    char *dir = jpt_tmpdir();
    struct pushd d;
    pushd_start(&d, dir, url, NULL, 0);
    jpt_run_complete(d.sock, 4, 500);
    char *j = status_when(d.sock, "failed", 1);
    cr_expect_eq(push_figure(j, "pushed"), 0, "%s", j);
    cr_expect_eq(push_figure(j, "retried"), 2, "%s", j);
    cr_expect(strstr(j, "\"last_error\":\"run 1: ") && strstr(j, "onnect"),
              "libcurl's connection error: %s", j);
    free(j);
    pushd_stop(&d);
    free(dir);
}

Test(push, an_attempt_that_gets_no_answer_times_out_and_is_tried_again)
{
    static const int never[] = {0};
    set_knob("JETTPROFD_PUSH_TIMEOUT_MS", "200");
    set_knob("JETTPROFD_PUSH_BACKOFF_MS", "20");
    struct setup t;
    setup_start(&t, never, 1, NULL, NULL, 0);
    jpt_run_complete(t.d.sock, 8, 500);
    char *j = status_when(t.d.sock, "failed", 1);
    cr_expect_eq(push_figure(j, "retried"), 2, "%s", j);
    cr_expect_eq(push_figure(j, "pushed"), 0, "%s", j);
    cr_expect(strstr(j, "\"last_error\":\"run 1: ") && strstr(j, "timed out"),
              "libcurl's timeout: %s", j);
    free(j);
    cr_expect_eq(tl_http_count(t.rx), 3, "each attempt reached the receiver");
    setup_stop(&t);
}

Test(push, a_receiver_that_never_answers_delays_neither_the_result_nor_the_exit)
{
    static const int never[] = {0};
    set_knob("JETTPROFD_PUSH_GRACE_MS", "300");
    struct setup t;
    setup_start(&t, never, 1, NULL, NULL, 1);
    jpt_run_complete(t.d.sock, 5, 500); /* its result arrives: the push is the push thread's */
    cr_assert(tl_http_wait(t.rx, 1, 30000));
    jpt_run_complete(t.d.sock, 6, 500); /* and again while the first push hangs */
    char *j = status_when(t.d.sock, "queued", 2);
    cr_expect_eq(push_figure(j, "queued"), 2, "one in flight, one waiting: %s", j);
    cr_expect_eq(push_figure(j, "pushed"), 0, "%s", j);
    free(j);
    /* the default per-attempt timeout is 30 s: the exit does not wait for it */
    char *log = setup_stop(&t);
    cr_expect(strstr(log, "stopping: 2 profile(s) still to push"), "%s", log);
    cr_expect(strstr(log, "run 1: its profile was not pushed to http://127.0.0.1:"), "%s", log);
    cr_expect(strstr(log, "run 2: its profile was not pushed to http://127.0.0.1:"), "%s", log);
    free(log);
}

Test(push, a_full_queue_drops_its_oldest_profile_and_counts_it)
{
    static const int never[] = {0};
    set_knob("JETTPROFD_PUSH_GRACE_MS", "100");
    struct setup t;
    setup_start(&t, never, 1, NULL, NULL, 1);
    jpt_run_complete(t.d.sock, 7, 500);
    cr_assert(tl_http_wait(t.rx, 1, 30000)); /* run 1 in flight, held by the receiver */
    for (uint32_t i = 0; i < 65; i++)
        jpt_run_complete(t.d.sock, 100 + i, 500); /* runs 2..66: 64 fit, run 2 makes room */
    char *j = status_when(t.d.sock, "dropped", 1);
    cr_expect_eq(push_figure(j, "dropped"), 1, "%s", j);
    cr_expect_eq(push_figure(j, "queued"), 65, "64 waiting and one in flight: %s", j);
    free(j);
    char *log = setup_stop(&t);
    cr_expect(strstr(log, "run 2: its profile (") && strstr(log, " bytes) was dropped unpushed: "
              "the push queue holds at most 64 profiles and 64 MiB\n"), "%s", log);
    const char *first = strstr(log, "was dropped unpushed");
    cr_expect(first && !strstr(first + 1, "was dropped unpushed"), "one drop: %s", log);
    cr_expect(strstr(log, "run 66: its profile was not pushed"), "%s", log);
    free(log);
}

/* argv's wait status, stderr in *err. */
static int run_cmd(char *const argv[], char **err)
{
    char *out;
    size_t len;
    int st = jpt_capture_cmd(argv, &out, &len, err);
    free(out);
    return st;
}

Test(push, bad_push_flags_exit_2_naming_the_flag_and_the_value)
{
    char *dir = jpt_tmpdir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    char cap[600];
    snprintf(cap, sizeof cap, "%s/c.jpcap", dir);
    jpt_capfile_write(cap, JP_MODE_CPU, 1, 100);
    static const struct {
        const char *flag, *value, *label, *want;
    } cases[] = {
        {"--push", "ftp://x", NULL, "--push needs an http:// or https:// URL, not: ftp://x"},
        {"--push", "ftp://ops:s3cr3tpw@x/", NULL, "not: ftp://***@x/"},
        {"--push", "http://[::1", NULL, "--push is not a URL libcurl can use"},
        {"--label", "bad-key=1", "http://127.0.0.1:1/ingest",
         "--label KEY must match [A-Za-z_][A-Za-z0-9_]*, not: bad-key=1"},
        {"--label", "program=x", "http://127.0.0.1:1/ingest",
         "--label cannot set program, mode or host (the daemon sets them from the run), "
         "not: program=x"},
        {"--label", "k", "http://127.0.0.1:1/ingest", "--label needs KEY=VALUE, not: k"},
        {"--label", "__name__=x", "http://127.0.0.1:1/ingest", "not: __name__=x"},
        {"--label", "k=a,b", "http://127.0.0.1:1/ingest",
         "--label VALUE must be non-empty UTF-8 without control characters, ',', '{', '}' or "
         "'=', not: k=a,b"},
        {"--label", "k=", "http://127.0.0.1:1/ingest", "not: k="},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int exp = 0; exp < 2; exp++) {
            char *argv[12];
            int n = 0;
            argv[n++] = (char *)jpt_daemon_bin();
            if (exp) {
                argv[n++] = (char *)"export";
                argv[n++] = cap;
            } else {
                argv[n++] = (char *)"serve";
                argv[n++] = (char *)"--socket";
                argv[n++] = sock;
            }
            if (cases[i].label) {
                argv[n++] = (char *)"--push";
                argv[n++] = (char *)cases[i].label;
            }
            argv[n++] = (char *)cases[i].flag;
            argv[n++] = (char *)cases[i].value;
            argv[n] = NULL;
            char *err;
            int st = run_cmd(argv, &err);
            cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s %s %s: status %d: %s",
                      argv[1], cases[i].flag, cases[i].value, st, err);
            cr_expect(strstr(err, cases[i].want), "%s %s %s: %s", argv[1], cases[i].flag,
                      cases[i].value, err);
            cr_expect(!strstr(err, "s3cr3tpw"), "%s", err);
            free(err);
        }
    }
    /* once only, twice the same key, a label without a push, 17 labels */
    char *twice[] = {(char *)jpt_daemon_bin(), (char *)"serve", (char *)"--socket", sock,
                     (char *)"--push", (char *)"http://a/", (char *)"--push",
                     (char *)"http://b/", NULL};
    char *same[] = {(char *)jpt_daemon_bin(), (char *)"export", cap, (char *)"--push",
                    (char *)"http://a/", (char *)"--label", (char *)"k=1", (char *)"--label",
                    (char *)"k=2", NULL};
    char *alone[] = {(char *)jpt_daemon_bin(), (char *)"serve", (char *)"--socket", sock,
                     (char *)"--label", (char *)"k=1", NULL};
    char *shaped[] = {(char *)jpt_daemon_bin(), (char *)"export", cap, (char *)"--push",
                      (char *)"http://a/", (char *)"--format", (char *)"svg", NULL};
    struct {
        char **argv;
        const char *want;
    } more[] = {
        {twice, "--push may be given once; again: http://b/"},
        {same, "--label names the same KEY twice: k=2"},
        {alone, "--label needs --push: k=1"},
        {shaped, "--push sends the pprof export with its default value; it takes no --format"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        char *err;
        int st = run_cmd(more[i].argv, &err);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d: %s", st, err);
        cr_expect(strstr(err, more[i].want), "%s", err);
        free(err);
    }
    char *many[48] = {(char *)jpt_daemon_bin(), (char *)"serve", (char *)"--socket", sock,
                      (char *)"--push", (char *)"http://a/"};
    char labels[17][16];
    int n = 6;
    for (int i = 0; i < 17; i++) {
        snprintf(labels[i], sizeof labels[i], "k%d=v", i);
        many[n++] = (char *)"--label";
        many[n++] = labels[i];
    }
    many[n] = NULL;
    char *err;
    int st = run_cmd(many, &err);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d: %s", st, err);
    cr_expect(strstr(err, "--label may be given at most 16 times; once more: k16=v"), "%s", err);
    free(err);
    free(dir);
}

Test(push, export_push_exits_0_when_accepted_and_1_naming_the_status)
{
    static const int codes[] = {200, 404};
    struct tl_http_recv *rx = receiver_start(codes, 2);
    char *dir = jpt_tmpdir();
    char cap[600];
    snprintf(cap, sizeof cap, "%s/c.jpcap", dir);
    jpt_capfile_write(cap, JP_MODE_MEMORY, 12, 800);
    struct stat st;
    cr_assert_eq(stat(cap, &st), 0);
    char *url = url_of(rx, NULL);
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)"export", cap, (char *)"--push", url,
                    (char *)"--label", (char *)"team=core", NULL};
    char *err;
    int s = run_cmd(argv, &err);
    cr_expect_eq(s, 0, "accepted: %s", err);
    cr_expect(strstr(err, "pushed ") && strstr(err, " bytes of pprof) to http://127.0.0.1:"),
              "%s", err);
    free(err);
    cr_assert_eq(tl_http_count(rx), 1);
    const struct tl_http_req *q = received(rx, 0);
    cr_expect_str_eq(q->method, "POST");
    cr_expect_str_eq(q->path, "/ingest");
    char *name = tl_http_query_get(q->query, "name");
    char *from = tl_http_query_get(q->query, "from");
    char *until = tl_http_query_get(q->query, "until");
    char want[512];
    /* support.c's stream of seed 12 names src/mod5_0.jett its first project source */
    snprintf(want, sizeof want, "mod5_0{program=src/mod5_0.jett,mode=memory,host=%s,"
             "team=core}", host_name());
    cr_expect_str_eq(name, want);
    cr_expect_eq(atoll(until), (long long)st.st_mtime, "until: the capture's last write");
    cr_expect(atoll(from) <= atoll(until));
    size_t elen;
    char *exported = export_pprof(cap, &elen);
    cr_expect(q->len == elen && !memcmp(q->body, exported, elen), "the capture's pprof");
    free(exported);
    free(name), free(from), free(until);

    s = run_cmd(argv, &err);
    cr_expect(WIFEXITED(s) && WEXITSTATUS(s) == 1, "refused: status %d: %s", s, err);
    cr_expect(strstr(err, "jettprofd export: --push http://127.0.0.1:"), "%s", err);
    cr_expect(strstr(err, "/ingest: HTTP 404: scripted 4\n"), "%s", err);
    free(err);
    cr_expect_eq(tl_http_count(rx), 2, "a 404 is not tried again");
    tl_http_stop(rx);
    free(url);
    free(dir);
}

Test(push, a_hostile_program_name_arrives_encoded_and_adds_no_label)
{
    static const int ok[] = {200};
    const char *more[] = {"--label", "team=core", NULL};
    struct setup t;
    setup_start(&t, ok, 1, NULL, more, 0);
    /* '%' and '+' would be misread if sent raw, '#' and '?' would cut the URL; the runtime
     * refuses control characters in a source path itself */
    char *prog = write_file(t.dir, "we}i&rd,na=me \xc3\xa9%2C+x#?.jett", program_src);
    jett_run(t.d.sock, prog, "--profile");
    cr_assert(tl_http_wait(t.rx, 1, 30000));
    const struct tl_http_req *q = received(t.rx, 0);
    /* on the wire: five parameters, every byte of them unreserved or %XX */
    int params = 1;
    for (const char *c = q->query; *c; c++) {
        params += *c == '&';
        cr_expect(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%=&",
                         *c), "raw %c in %s", *c, q->query);
    }
    cr_expect_eq(params, 5, "%s", q->query);
    char *name = tl_http_query_get(q->query, "name");
    char want[512];
    snprintf(want, sizeof want, "we_i_rd_na_me___2C_x__{program=we_i&rd_na_me \xc3\xa9%%2C+x#?"
             ".jett,mode=cpu,host=%s,team=core}", host_name());
    cr_expect_str_eq(name, want);
    /* decoded, the set still splits into exactly its four labels */
    const char *set = strchr(name, '{');
    int commas = 0, eqs = 0;
    for (const char *c = set; c && *c; c++)
        commas += *c == ',', eqs += *c == '=';
    cr_expect(commas == 3 && eqs == 4 && !strchr(set + 1, '{') && strchr(set, '}') ==
              name + strlen(name) - 1, "%s", name);
    free(name);
    setup_stop(&t);
    free(prog);
}

/* The rawProfile of a Parca WriteRaw JSON body whose text up to the profile is want_head,
 * decoded (by coreutils' base64, not by the code under test); its length in *len. */
static char *parca_profile(const char *dir, const struct tl_http_req *q,
                           const char *want_head, size_t *len)
{
    static const char tail[] = "\"}]}],\"normalized\":true}";
    size_t hl = strlen(want_head), tl = sizeof tail - 1u;
    cr_assert(q->len > hl + tl, "a short body: %.*s", (int)q->len, q->body);
    cr_assert(!memcmp(q->body, want_head, hl), "the body starts\n%.*s\nnot\n%s",
              (int)(hl < q->len ? hl : q->len), q->body, want_head);
    cr_assert(!memcmp(q->body + q->len - tl, tail, tl), "the body ends %.*s", (int)tl,
              q->body + q->len - tl);
    char *b64 = write_file(dir, "raw.b64", "");
    FILE *f = fopen(b64, "we");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(q->body + hl, 1, q->len - hl - tl, f), q->len - hl - tl);
    cr_assert_eq(fclose(f), 0);
    char *argv[] = {(char *)"/usr/bin/base64", (char *)"-d", b64, NULL};
    char *out, *err;
    int st = jpt_capture_cmd(argv, &out, len, &err);
    cr_assert_eq(st, 0, "base64 -d: %s", err);
    free(err);
    free(b64);
    return out;
}

/* A URL whose path is Parca's /profiles/writeraw gets WriteRaw's JSON instead: the labels as a
 * label set (__name__ from the mode), the same pprof as base64; from serve and from export. */
Test(push, a_parca_writeraw_url_gets_the_same_pprof_as_a_label_set_in_json)
{
    static const int ok[] = {200};
    struct tl_http_recv *rx = receiver_start(ok, 1);
    char caps[600];
    char *dir = dir_with_captures(caps);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/profiles/writeraw", tl_http_port(rx));
    const char *more[] = {"--capture-dir", caps, "--label", "team=core", NULL};
    struct pushd d;
    pushd_start(&d, dir, url, more, 0);
    char *prog = write_file(dir, "main.jett", program_src);
    jett_run(d.sock, prog, "--profile");
    cr_assert(tl_http_wait(rx, 1, 30000), "one push, got %d", tl_http_count(rx));
    char *j = status_when(d.sock, "pushed", 1);
    free(j);
    pushd_stop(&d);

    const struct tl_http_req *q = received(rx, 0);
    cr_expect_str_eq(q->method, "POST");
    cr_expect_str_eq(q->path, "/profiles/writeraw");
    cr_expect_str_eq(q->query, "", "no Pyroscope query");
    cr_expect_str_eq(q->ctype, "application/json");
    char head[1024];
    snprintf(head, sizeof head,
             "{\"series\":[{\"labels\":{\"labels\":[{\"name\":\"__name__\",\"value\":"
             "\"jett_cpu\"},{\"name\":\"program\",\"value\":\"main.jett\"},{\"name\":\"mode\","
             "\"value\":\"cpu\"},{\"name\":\"host\",\"value\":\"%s\"},{\"name\":\"team\","
             "\"value\":\"core\"}]},\"samples\":[{\"rawProfile\":\"", host_name());
    size_t plen, elen;
    char *pprof = parca_profile(dir, q, head, &plen);
    char *cap = capture_of_run(caps, 1);
    char *exported = export_pprof(cap, &elen);
    char *pushed_raw = go_pprof_raw(dir, pprof, plen), *export_raw = go_pprof_raw(dir, exported,
                                                                                  elen);
    cr_expect_str_eq(strstr(pushed_raw, "Samples:"), strstr(export_raw, "Samples:"),
                     "rawProfile holds the samples of the capture's pprof export");
    free(pushed_raw);
    free(export_raw);
    char *types = go_pprof_types(dir, pprof, plen);
    cr_expect_str_eq(types, "samples/count cpu/nanoseconds[dflt]");
    free(types);
    free(pprof);

    /* export --push to the same kind of URL sends the same request */
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)"export", cap, (char *)"--push", url,
                    (char *)"--label", (char *)"team=core", NULL};
    char *err;
    int s = run_cmd(argv, &err);
    cr_expect_eq(s, 0, "accepted: %s", err);
    free(err);
    cr_assert_eq(tl_http_count(rx), 2);
    q = received(rx, 1);
    cr_expect_str_eq(q->path, "/profiles/writeraw");
    pprof = parca_profile(dir, q, head, &plen);
    cr_expect(plen == elen && !memcmp(pprof, exported, elen), "export --push: the same pprof");
    free(pprof);
    free(exported);
    free(cap);
    tl_http_stop(rx);
    free(prog);
    free(dir);
}

/* ---- windows (serve --push-interval) ---- */

/* A program that allocates for about 3 s, keeping some of it; and one that computes as long. */
static const char growing_src[] = "var kept = []\n"
                                  "fn grow(i: int) -> str {\n"
                                  "  return \"item \" + str(i)\n"
                                  "}\n"
                                  "fn main() {\n"
                                  "  var t = 0\n"
                                  "  for r in 0..30 {\n"
                                  "    for i in 0..40 { push(kept, grow(r * 40 + i)) }\n"
                                  "    t = t + len(grow(r))\n"
                                  "    sleep(100)\n"
                                  "  }\n"
                                  "  print(str(t))\n"
                                  "}\n";
static const char busy_src[] = "fn leaf(n: int) -> int {\n"
                               "  var h = 0\n"
                               "  for i in 0..n { h = (h * 31 + i) % 1000003 }\n"
                               "  return h\n"
                               "}\n"
                               "fn main() {\n"
                               "  var t = 0\n"
                               "  for r in 0..30 { t = t + leaf(20000)\n sleep(60) }\n"
                               "  print(str(t))\n"
                               "}\n";

/* One pushed window as the receiver got it: its query's from and until, the pprof's time and
 * duration (ns, from `go tool pprof -raw`'s Time and the query), and its sums by type. */
struct window {
    long long from, until;
    long long sum[4];
    int ntypes;
    int has_time;
};

static void read_window(const char *dir, const struct tl_http_req *q, struct window *w)
{
    char *from = tl_http_query_get(q->query, "from");
    char *until = tl_http_query_get(q->query, "until");
    cr_assert(from && until, "query: %s", q->query);
    w->from = atoll(from);
    w->until = atoll(until);
    free(from);
    free(until);
    char *raw = go_pprof_raw(dir, q->body, q->len);
    w->ntypes = raw_sums(raw, w->sum);
    w->has_time = strstr(raw, "\nTime: ") != NULL;
    free(raw);
}

static int by_from(const void *a, const void *b)
{
    const struct window *x = a, *y = b;
    return x->from != y->from ? (x->from < y->from ? -1 : 1) : (x->until > y->until) - (x->until < y->until);
}

/* The TOON total key of run id's final profile (`jettprofd show`). */
static long long final_total(const char *sock, uint64_t id, const char *key)
{
    char ids[32];
    snprintf(ids, sizeof ids, "%llu", (unsigned long long)id);
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)"show", ids, (char *)"--socket",
                    (char *)sock, (char *)"--format", (char *)"toon", NULL};
    char *out, *err;
    size_t len;
    cr_assert_eq(jpt_capture_cmd(argv, &out, &len, &err), 0, "show: %s", err);
    char pat[96];
    snprintf(pat, sizeof pat, "\n    %s: ", key);
    const char *p = strstr(out, pat);
    cr_assert_not_null(p, "no %s in\n%s", key, out);
    long long v = atoll(p + strlen(pat));
    free(out);
    free(err);
    return v;
}

/* All of the run's windows, once the daemon has pushed them (status: nothing queued, and the
 * run over): sorted by time; *n of them (malloc'ed). */
static struct window *windows_of(struct setup *t, int *n)
{
    char *j = status_when(t->d.sock, "pushed", 1);
    free(j);
    for (int i = 0;; i++) {
        j = status_json(t->d.sock);
        int idle = push_figure(j, "queued") == 0 && strstr(j, "\"live\":[]");
        free(j);
        if (idle)
            break;
        cr_assert_lt(i, 3000, "the pushes never settled");
        usleep(10000);
    }
    *n = tl_http_count(t->rx);
    struct window *w = calloc((size_t)*n, sizeof *w);
    for (int i = 0; i < *n; i++)
        read_window(t->dir, received(t->rx, i), &w[i]);
    qsort(w, (size_t)*n, sizeof *w, by_from);
    return w;
}

/* Windows tile the run: each begins where the one before ended, none longer than `longest`
 * seconds. */
static void expect_tiled(const struct window *w, int n, long long longest)
{
    for (int i = 0; i < n; i++) {
        cr_expect(w[i].has_time, "window %d has no time_nanos", i);
        cr_expect(w[i].until >= w[i].from && w[i].until - w[i].from <= longest,
                  "window %d: %lld..%lld", i, w[i].from, w[i].until);
        if (i)
            cr_expect_eq(w[i].from, w[i - 1].until, "window %d starts at %lld, the one before "
                         "ended at %lld", i, w[i].from, w[i - 1].until);
    }
}

/* A daemon pushing to an accepting receiver with --push-interval every (its clocks scale
 * times as fast), one run of src in mode through it: its windows, *n of them. */
static struct window *run_in_windows(struct setup *t, const char *every, const char *scale,
                                     const char *src, const char *mode, int *n)
{
    static const int ok[] = {200};
    const char *more[] = {"--push-interval", every, NULL};
    set_knob("JETTPROFD_TEST_TIME_SCALE", scale);
    setup_start(t, ok, 1, NULL, more, 0);
    unsetenv("JETTPROFD_TEST_TIME_SCALE");
    char *prog = write_file(t->dir, "prog.jett", src);
    jett_run(t->d.sock, prog, mode);
    free(prog);
    return windows_of(t, n);
}

Test(push, windows_of_a_memory_run_tile_it_and_add_up_to_its_profile, .timeout = 120)
{
    struct setup t;
    int n;
    struct window *w = run_in_windows(&t, "1", "1", growing_src, "--profile-memory", &n);
    cr_assert_geq(n, 3, "a run of about 3 s in 1 s windows: %d", n);
    expect_tiled(w, n, 1);
    long long objects = 0, bytes = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(w[i].ntypes, 4, "alloc_objects alloc_space inuse_objects inuse_space");
        objects += w[i].sum[0];
        bytes += w[i].sum[1];
    }
    cr_expect_eq(objects, final_total(t.d.sock, 1, "allocation_count"));
    cr_expect_eq(bytes, final_total(t.d.sock, 1, "allocated_bytes"));
    cr_expect_eq(w[n - 1].sum[3], final_total(t.d.sock, 1, "retained_bytes"),
                 "the last window's in-use bytes are what the run retained");
    free(w);
    setup_stop(&t);
}

Test(push, windows_of_a_cpu_run_add_up_to_its_samples, .timeout = 120)
{
    struct setup t;
    int n;
    struct window *w = run_in_windows(&t, "1", "1", busy_src, "--profile", &n);
    cr_assert_geq(n, 2, "%d windows", n);
    expect_tiled(w, n, 1);
    long long samples = 0;
    for (int i = 0; i < n; i++)
        samples += w[i].sum[0]; /* samples/count (a window may have none) */
    cr_expect_eq(samples, final_total(t.d.sock, 1, "attributed_samples"));
    free(w);
    setup_stop(&t);
}

/* Two hours of a run in seconds (the windows' clocks 3600 times as fast): windows of five
 * minutes, so at the time each is pushed it began five minutes ago, well inside Pyroscope's
 * one-hour limit on a profile's age (a run pushed whole would be three hours old); and they
 * still tile the run. */
Test(push, a_two_hour_run_is_pushed_in_windows_no_older_than_the_interval, .timeout = 120)
{
    struct setup t;
    int n;
    struct window *w = run_in_windows(&t, "300", "3600", growing_src, "--profile-memory", &n);
    cr_assert_geq(n, 24, "3 s at 3600 times: some 3 hours in 5-minute windows: %d", n);
    /* A cut comes with the drain after its time (within 16 ms, a minute at this speed). */
    expect_tiled(w, n, 300 + 120);
    for (int i = 0; i < n; i++)
        cr_expect_lt(w[i].until - w[i].from, 3600, "window %d is older than an hour", i);
    long long objects = 0;
    for (int i = 0; i < n; i++)
        objects += w[i].sum[0];
    cr_expect_eq(objects, final_total(t.d.sock, 1, "allocation_count"));
    cr_expect_geq(w[n - 1].until - w[0].from, 7200, "it ran past two hours of its clock");
    free(w);
    setup_stop(&t);
}

/* The wall clock steps an hour forward in the middle of the run: the window that sees it ends
 * at the new time and the schedule goes on from there, with no window for the hour skipped. */
Test(push, a_clock_step_starts_a_new_schedule_without_catch_up_windows, .timeout = 120)
{
    static const int ok[] = {200};
    struct setup t;
    char step[700];
    const char *more[] = {"--push-interval", "1", NULL};
    char *dir = jpt_tmpdir();
    snprintf(step, sizeof step, "%s/step", dir);
    FILE *f = fopen(step, "we");
    cr_assert_not_null(f);
    fputs("0\n", f);
    fclose(f);
    set_knob("JETTPROFD_TEST_WALL_FILE", step);
    setup_start(&t, ok, 1, NULL, more, 0);
    unsetenv("JETTPROFD_TEST_WALL_FILE");
    char *prog = write_file(t.dir, "grow.jett", growing_src);
    pid_t run = tl_fork();
    if (run == 0) {
        setenv("JETTPROFD_SOCKET", t.d.sock, 1);
        char *argv[] = {(char *)jett_bin(), (char *)"run", prog, (char *)"--profile-memory",
                        NULL};
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    cr_assert(tl_http_wait(t.rx, 1, 30000), "a first window");
    f = fopen(step, "we");
    cr_assert_not_null(f);
    fputs("3600\n", f);
    fclose(f);
    int st = tl_wait(run, 60000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the run");
    int n;
    struct window *w = windows_of(&t, &n);
    cr_assert_leq(n, 8, "no catch-up windows for the hour skipped: %d windows", n);
    int steps = 0;
    for (int i = 1; i < n; i++) {
        cr_expect(w[i].until - w[i].from <= 1, "window %d: %lld..%lld", i, w[i].from, w[i].until);
        if (w[i].from - w[i - 1].until >= 3590)
            steps++; /* the window that saw the step begins an hour after the one before */
        else
            cr_expect_eq(w[i].from, w[i - 1].until, "window %d", i);
    }
    cr_expect_eq(steps, 1, "one step seen");
    long long objects = 0;
    for (int i = 0; i < n; i++)
        objects += w[i].sum[0];
    cr_expect_eq(objects, final_total(t.d.sock, 1, "allocation_count"));
    free(w);
    free(prog);
    setup_stop(&t);
    unlink(step);
    rmdir(dir);
    free(dir);
}

/* A receiver that never answers while windows keep coming (a minute's windows each second):
 * the queue stays within its bound, the windows past it are dropped and counted, and the run's
 * own result is untouched. */
Test(push, windows_to_a_receiver_that_hangs_are_dropped_and_counted, .timeout = 120)
{
    static const int never[] = {0};
    set_knob("JETTPROFD_PUSH_GRACE_MS", "100");
    set_knob("JETTPROFD_TEST_TIME_SCALE", "60");
    const char *more[] = {"--push-interval", "1", NULL};
    struct setup t;
    setup_start(&t, never, 1, NULL, more, 0);
    unsetenv("JETTPROFD_TEST_TIME_SCALE");
    char *prog = write_file(t.dir, "grow.jett", growing_src);
    jett_run(t.d.sock, prog, "--profile-memory"); /* asserts the run's report came back */
    char *j = status_when(t.d.sock, "dropped", 1);
    cr_expect_leq(push_figure(j, "queued"), 65, "64 waiting and one in flight at most: %s", j);
    free(j);
    free(prog);
    setup_stop(&t);
}

/* A run whose stream has not started (no RUN_START in its ring yet) has nothing to cut: its
 * windows wait, and nothing is counted as failed. */
Test(push, a_run_not_started_yet_pushes_and_fails_nothing, .timeout = 60)
{
    static const int ok[] = {200};
    const char *more[] = {"--push-interval", "1", NULL};
    struct setup t;
    setup_start(&t, ok, 1, NULL, more, 0);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, t.d.sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 7, 1000);
    struct jp_ring ring;
    uint64_t id;
    cr_assert_eq(jpt_start_run(&c, &s, JP_RING_MIN_SLOTS, -1, 0, &ring, &id), 0);
    usleep(2500 * 1000); /* two cut times and more */
    char *j = status_json(t.d.sock);
    cr_expect_eq(push_figure(j, "failed"), 0, "%s", j);
    cr_expect_eq(push_figure(j, "pushed"), 0, "%s", j);
    free(j);
    cr_expect_eq(tl_http_count(t.rx), 0);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    setup_stop(&t);
}
