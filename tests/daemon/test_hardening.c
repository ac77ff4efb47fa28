/* A shared daemon no user can lock out, flood or kill: what a hostile client or a careless
 * operator tries against `jettprofd serve`, each tried the way it was first found to work.
 *   - a program path with C0, DEL and C1 controls reaches no human output raw;
 *   - every catchable signal but SIGTERM/SIGINT leaves the daemon serving, the run in flight
 *     delivered complete; SIGHUP reopens the runs log;
 *   - a run's exports stay within the daemon's export cap, the profile still delivered;
 *   - one uid's unread results count against its caps until their sockets close, and another
 *     uid's runs all complete meanwhile. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/utf8.h"
#include "support.h"
#include "tests/lib/clock.h"

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* `jettprofd CMD --socket sock [args]`'s stdout (exit 0 asserted). */
static char *daemon_cmd(const char *sock, const char *cmd, const char *arg1, const char *arg2)
{
    char *argv[] = {(char *)jpt_daemon_bin(), (char *)cmd, "--socket", (char *)sock,
                    (char *)arg1, (char *)arg2, NULL};
    char *out = NULL, *err = NULL;
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "jettprofd %s: %s", cmd, err);
    free(err);
    return out;
}

/* The first byte of text[len] that could drive a terminal (a C0 control other than the line
 * end, DEL, a C1 control, a byte that is not well-formed UTF-8), or -1. */
static long raw_control_at(const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        if (p[i] < 0x80) {
            if ((p[i] < 0x20 && p[i] != '\n') || p[i] == 0x7f)
                return (long)i;
            i++;
            continue;
        }
        size_t k = jp_utf8_seq_len(p + i, len - i);
        if (k == 0 || (k == 2 && p[i] == 0xc2 && p[i + 1] <= 0x9f))
            return (long)i;
        i += k;
    }
    return -1;
}

static void expect_no_raw_control(const char *what, const char *text)
{
    cr_assert(text, "%s: no text", what);
    long at = raw_control_at(text, strlen(text));
    cr_expect_eq(at, -1, "%s has a raw control byte at %ld: %s", what, at, text);
}

/* `jettprofd serve` with a runs log, both in dir: sock and log get their paths (600 bytes). */
static pid_t serve_with_log(const char *dir, char *sock, char *log, int *errfd)
{
    snprintf(sock, 600, "%s/d.sock", dir);
    snprintf(log, 600, "%s/runs.jsonl", dir);
    const char *extra[] = {"--runs-log", log, NULL};
    pid_t d = jpt_serve(sock, extra, errfd);
    cr_assert_gt(d, 0);
    return d;
}

/* Pushes the rest of s, finalizes and waits for the result. */
static void finish_run(struct jpt_client *c, struct jpt_stream *s, struct jp_ring *ring,
                       struct jpt_result *res)
{
    memset(res, 0, sizeof *res);
    for (;;) {
        uint8_t rec[JP_REC_MAX_SIZE];
        uint32_t len = jpt_stream_next(s, rec);
        if (!len)
            break;
        cr_assert_eq(jpt_push(ring, rec, len), 0);
    }
    jp_ring_close(ring);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(c->fd, &f, NULL, 0), 0);
    cr_assert_eq(jpt_finish(c, res, 60000), 0);
    jp_ring_unmap(ring);
}

/* A path the engine accepts as a logical path (relative, no C0 or DEL) but carrying every C1
 * control a terminal might act on: CSI, OSC, DCS, ST, NEL. */
#define HOSTILE_PROGRAM "src/\xc2\x9b" "2J\xc2\x9d" "0;owned\xc2\x9c\xc2\x90x\xc2\x85.jett"

Test(hardening, control_bytes_of_a_program_reach_no_human_output_raw)
{
    char *dir = jpt_tmpdir();
    char sock[600], log[600];
    int errfd;
    pid_t d = serve_with_log(dir, sock, log, &errfd);

    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 4, 200000);
    s.program = HOSTILE_PROGRAM;
    struct jp_ring ring;
    uint64_t id = 0;
    cr_assert_eq(jpt_start_run(&c, &s, 4096, -1, 400, &ring, &id), 0);

    /* status, while the run is live: the program is listed once the daemon drained it */
    char *out = NULL;
    for (int i = 0; i < 500 && !(out && strstr(out, "owned")); i++) {
        free(out);
        nap_ms(10);
        out = daemon_cmd(sock, "status", NULL, NULL);
    }
    cr_assert(out && strstr(out, "owned"), "the program never reached status: %s", out);
    expect_no_raw_control("status", out);
    cr_expect(strstr(out, "\"src/\\u009b2J\\u009d0;owned\\u009c\\u0090x\\u0085.jett\"\n"),
              "the program, escaped, ends the run's row: %s", out);
    free(out);

    /* the run ends; `runs` lists it */
    struct jpt_result res;
    finish_run(&c, &s, &ring, &res);
    cr_assert_eq(res.status, JP_STATUS_COMPLETE, "%s %s", res.reason, res.error);
    jpt_client_close(&c);
    expect_no_raw_control("the run's human profile", res.human);
    jpt_result_free(&res);

    out = daemon_cmd(sock, "runs", NULL, NULL);
    cr_assert(strstr(out, "owned"), "%s", out);
    expect_no_raw_control("runs", out);
    cr_expect(strstr(out, " \"src/\\u009b2J\\u009d0;owned\\u009c\\u0090x\\u0085.jett\" memory "
                          "complete -\n"), "%s", out);
    free(out);
    char idtext[32];
    snprintf(idtext, sizeof idtext, "%llu", (unsigned long long)id);
    out = daemon_cmd(sock, "show", idtext, NULL);
    expect_no_raw_control("show", out);
    free(out);

    kill(d, SIGTERM);
    cr_assert_eq(tl_wait(d, 10000), 0);
    char *log_lines = jpt_slurp_fd(errfd);
    close(errfd);
    expect_no_raw_control("the daemon's log", log_lines);
    free(log_lines);
    free(dir);
}

/* The runtime's own messages follow the same rule: a runtime error quoting the program's text
 * reaches the user's terminal escaped. */
Test(hardening, a_runtime_error_quoting_program_text_is_escaped_on_stderr)
{
    char *dir = jpt_tmpdir();
    char prog[600];
    snprintf(prog, sizeof prog, "%s/main.jett", dir);
    FILE *f = fopen(prog, "w");
    cr_assert(f);
    fputs("fn main() {\n  fail(\"bad \xc2\x9b" "31m \x1b[2J \x07 end\")\n}\n", f);
    fclose(f);
    char *argv[] = {(char *)getenv("JETT_BIN"), "run", prog, NULL};
    cr_assert(argv[0], "JETT_BIN is not set");
    char *out = NULL, *err = NULL;
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "the program must fail: %s", err);
    expect_no_raw_control("jett's stderr", err);
    cr_expect(strstr(err, "runtime error: bad \\u009b31m \\x1b[2J \\x07 end\n"), "%s", err);
    free(out);
    free(err);
    free(dir);
}

/* ---- signals ---------------------------------------------------------------------------- */

static int alive(pid_t pid)
{
    int st;
    return waitpid(pid, &st, WNOHANG) == 0;
}

Test(hardening, every_catchable_signal_leaves_a_run_in_flight_delivered)
{
    static const int sigs[] = {SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
                               SIGPOLL, SIGPWR, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGPIPE, SIGSEGV,
                               SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};
    int nsig = (int)(sizeof sigs / sizeof sigs[0]);
    int total = nsig + 2; /* and the first and last real-time signals */
    char *dir = jpt_tmpdir();
    char sock[600], log[600];
    int errfd;
    pid_t d = serve_with_log(dir, sock, log, &errfd);

    for (int i = 0; i < total; i++) {
        int sig = i < nsig ? sigs[i] : i == nsig ? SIGRTMIN : SIGRTMAX;
        struct jpt_client c;
        cr_assert_eq(jpt_client_connect(&c, sock), 0);
        struct jpt_stream s;
        jpt_stream_init(&s, i % 2 ? JP_MODE_CPU : JP_MODE_MEMORY, 40u + (uint32_t)i, 20000);
        struct jp_ring ring;
        uint64_t id = 0;
        cr_assert_eq(jpt_start_run(&c, &s, 4096, -1, 2000, &ring, &id), 0);
        cr_assert_eq(kill(d, sig), 0);
        nap_ms(50);
        cr_assert(alive(d), "signal %d (%s) ended the daemon", sig, strsignal(sig));
        struct jpt_result res;
        finish_run(&c, &s, &ring, &res);
        jpt_client_close(&c);
        cr_assert_eq(res.error_code, 0, "signal %d: %s", sig, res.error);
        struct jpt_stream again;
        jpt_stream_init(&again, s.mode, s.seed, s.events);
        again.run_id = id;
        struct jpt_result want;
        cr_assert_eq(jpt_expected(&again, &want), 0);
        cr_expect_eq(res.status, JP_STATUS_COMPLETE, "signal %d (%s): %s", sig, strsignal(sig),
                     res.reason);
        cr_expect_str_eq(res.toon, want.toon, "signal %d (%s): the profile differs", sig,
                         strsignal(sig));
        jpt_result_free(&res);
        jpt_result_free(&want);
    }
    cr_assert(alive(d));
    /* The runs log holds every run, one row each (written on the main loop once a worker
     * posts it, so perhaps just after its client had its result). */
    for (int i = 0; i < 500 && jpt_count_lines(log, "\"status\":\"complete\"") < total; i++)
        nap_ms(10);
    cr_expect_eq(jpt_count_lines(log, "\"status\":\"complete\""), total);

    /* SIGHUP after a rotation: the rows go to the new file, the old one keeps what it had. */
    char rotated[700];
    snprintf(rotated, sizeof rotated, "%s.1", log);
    cr_assert_eq(rename(log, rotated), 0);
    cr_assert_eq(kill(d, SIGHUP), 0);
    for (int i = 0; i < 500 && access(log, F_OK) != 0; i++)
        nap_ms(10);
    cr_assert_eq(access(log, F_OK), 0, "SIGHUP did not reopen the runs log by its name");
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 99, 500);
    struct jpt_result res;
    cr_assert_eq(jpt_run(&c, &s, 1024, -1, &res), 0);
    cr_assert_eq(res.status, JP_STATUS_COMPLETE);
    jpt_client_close(&c);
    jpt_result_free(&res);
    for (int i = 0; i < 500 && jpt_count_lines(log, "\"status\":\"complete\"") < 1; i++)
        nap_ms(10);
    cr_expect_eq(jpt_count_lines(log, "\"status\":\"complete\""), 1);
    cr_expect_eq(jpt_count_lines(rotated, "\"status\":\"complete\""), total);

    kill(d, SIGTERM);
    cr_assert_eq(tl_wait(d, 10000), 0, "SIGTERM still stops the daemon with exit 0");
    char *lines = jpt_slurp_fd(errfd);
    close(errfd);
    cr_expect(strstr(lines, "SIGHUP: reopened the runs log"), "%s", lines);
    free(lines);
    free(dir);
}

/* ---- exports ---------------------------------------------------------------------------- */

/* The daemon's resident memory is a bound only in a plain build: under AddressSanitizer its
 * shadow memory and its quarantine of freed blocks (hundreds of MiB by design) are resident
 * too, so the sanitizer builds check everything but that figure. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_IS_A_BOUND 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_IS_A_BOUND 0
#endif
#endif
#ifndef RSS_IS_A_BOUND
#define RSS_IS_A_BOUND 1
#endif

/* The most the daemon's memory grew to, from /proc: VmHWM in KiB. */
static long peak_rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    cr_assert_gt(kib, 0);
    return kib;
}

Test(hardening, a_runs_exports_stay_within_the_export_cap_and_the_profile_is_delivered)
{
    char *dir = jpt_tmpdir();
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    int errfd;
    pid_t d = jpt_serve(sock, NULL, &errfd); /* the default cap: 16 MiB a run */
    cr_assert_gt(d, 0);
    long before_kib = peak_rss_kib(d);

    /* 127 frames of 511-byte names above each of 4,000 leaves: the folded export alone would
     * be about 260 MB, its profile a few hundred KiB. */
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 7, 40000);
    s.wide = 4000;
    struct jp_ring ring;
    uint64_t id = 0;
    cr_assert_eq(jpt_start_run(&c, &s, 4096, -1, UINT64_MAX, &ring, &id), 0);
    jp_ring_close(&ring);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    f.u.finalize.exports = (1u << JP_EXPORT_FORMAT_COUNT) - 1u;
    cr_assert_eq(jp_ctl_send(c.fd, &f, NULL, 0), 0);
    struct jpt_result res;
    memset(&res, 0, sizeof res);
    cr_assert_eq(jpt_finish(&c, &res, 60000), 0);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);

    /* the profile itself, complete and the engine's */
    struct jpt_stream again;
    jpt_stream_init(&again, JP_MODE_CPU, 7, 40000);
    again.wide = 4000;
    again.run_id = id;
    struct jpt_result want;
    cr_assert_eq(jpt_expected(&again, &want), 0);
    cr_assert_eq(res.error_code, 0, "%s", res.error);
    cr_expect_eq(res.status, JP_STATUS_COMPLETE, "%s", res.reason);
    cr_expect_str_eq(res.toon, want.toon);

    /* folded is refused with its stable errno, in one empty piece; what was sent fits the cap */
    cr_expect_eq(res.export_error[JP_EXPORT_FOLDED], EFBIG);
    cr_expect_eq(res.export_bytes[JP_EXPORT_FOLDED], 0);
    cr_expect_eq(res.export_pieces[JP_EXPORT_FOLDED], 1);
    uint64_t sent = 0;
    for (unsigned k = 0; k < JP_EXPORT_FORMAT_COUNT; k++) {
        cr_expect(res.export_pieces[k] >= 1, "format %u: no piece", k);
        cr_expect(res.export_error[k] == 0 || res.export_error[k] == EFBIG,
                  "format %u: errno %u", k, res.export_error[k]);
        if (!res.export_error[k])
            sent += res.export_bytes[k];
    }
    cr_expect_leq(sent, 16u << 20, "%llu bytes of exports", (unsigned long long)sent);
    cr_expect_gt(res.export_bytes[JP_EXPORT_PPROF], 0, "pprof, compressed, fits the cap");

    /* The daemon grew by at most the run's documented worst case: its ring (256 KiB here),
     * the CPU budget, the export cap and one 4 MiB piece in flight, and 16 MiB for the
     * report and the rest of the daemon's own. */
    long grew_kib = peak_rss_kib(d) - before_kib;
    if (RSS_IS_A_BOUND)
        cr_expect_lt(grew_kib, (32 + 16 + 4 + 16) * 1024 + 256, "the daemon grew by %ld KiB",
                     grew_kib);
    jpt_result_free(&res);
    jpt_result_free(&want);

    kill(d, SIGTERM);
    cr_assert_eq(tl_wait(d, 10000), 0);
    char *lines = jpt_slurp_fd(errfd);
    close(errfd);
    cr_expect(strstr(lines, "its folded export refused: it passes the export cap of 16777216"),
              "%s", lines);
    free(lines);
    free(dir);
}

/* What `jett run` prints for a refused export: the stable reason, the profile still there and
 * no file left behind. */
Test(hardening, jett_run_names_an_export_the_cap_refused)
{
    char *dir = jpt_tmpdir();
    char sock[600], out_path[600], prog[1200], spec[700];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(out_path, sizeof out_path, "%s/hot.svg", dir);
    snprintf(spec, sizeof spec, "svg:%s", out_path);
    const char *root = getenv("JETTPROF_SOURCE_ROOT");
    cr_assert(root && getenv("JETT_BIN"));
    snprintf(prog, sizeof prog, "%s/examples/cpu_hotspot/src/main.jett", root);
    const char *extra[] = {"--max-export-bytes", "1K", NULL};
    int errfd;
    pid_t d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);
    setenv("JETTPROFD_SOCKET", sock, 1);
    char *argv[] = {getenv("JETT_BIN"), "run", prog, "--profile", "--profile-export", spec, NULL};
    char *out = NULL, *err = NULL;
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    unsetenv("JETTPROFD_SOCKET");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "jett run: %s", err);
    cr_expect(strstr(err, "CPU profile\nstatus: complete\n"), "%s", err);
    cr_expect(strstr(err, "profiler: export '"), "%s", err);
    cr_expect(strstr(err, "' not written: export_too_large: it passes the daemon's cap on the "
                          "export bytes of one run (jettprofd --max-export-bytes)\n"), "%s", err);
    cr_expect_neq(access(out_path, F_OK), 0, "no export file is left behind");
    free(out);
    free(err);
    kill(d, SIGTERM);
    cr_assert_eq(tl_wait(d, 10000), 0);
    close(errfd);
    free(dir);
}

/* ---- one uid's unread results ------------------------------------------------------------ */

#define FLOOD_UID 4002
#define FLOOD_GID 4242
#define FLOOD_HELD 600 /* sockets the flooding client keeps open, unread, at once */

/* In a child, as FLOOD_UID: for `seconds`, starts runs that ask for every export, answers the
 * daemon's excerpt request and never reads its result, keeping the sockets open. Writes to fd
 * how many runs the daemon let it start and how many it refused; exits 0. */
static void flood_unread(const char *sock, double seconds, int fd)
{
    jpt_become(FLOOD_UID, FLOOD_GID);
    if (!freopen("/dev/null", "w", stderr)) /* a line for each refused run */
        _exit(93);
    static struct jpt_client held[FLOOD_HELD];
    uint32_t nheld = 0, next = 0, counts[2] = {0, 0};
    double end = tl_now_s() + seconds;
    for (uint32_t i = 0; tl_now_s() < end; i++) {
        struct jpt_client c;
        if (jpt_client_connect(&c, sock) < 0)
            _exit(90);
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_CPU, 100u + i, 400);
        s.wide = 20; /* a few MB of exports a run */
        struct jp_ring ring;
        memset(&ring, 0, sizeof ring);
        uint64_t id;
        int r = jpt_start_run(&c, &s, 1024, -1, UINT64_MAX, &ring, &id);
        if (r < 0) {
            counts[1]++;
            jp_ring_unmap(&ring);
            jpt_client_close(&c);
            continue;
        }
        jp_ring_close(&ring);
        struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
        f.u.finalize.termination = JP_TERM_RETURNED;
        f.u.finalize.exports = (1u << JP_EXPORT_FORMAT_COUNT) - 1u;
        if (jp_ctl_send(c.fd, &f, NULL, 0) < 0 || jpt_answer_excerpts(&c, 10000) < 0)
            _exit(91);
        jp_ring_unmap(&ring);
        counts[0]++;
        if (nheld == FLOOD_HELD)
            jpt_client_close(&held[next]);
        else
            nheld++;
        held[next] = c;
        next = (next + 1) % FLOOD_HELD;
    }
    if (write(fd, counts, sizeof counts) != sizeof counts)
        _exit(92);
    _exit(0);
}

/* Reads the daemon's log until it closes, so a run's log lines never fill the pipe. */
static void *discard_log(void *arg)
{
    int fd = *(int *)arg;
    char buf[4096];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    return NULL;
}

Test(hardening, unread_results_of_one_uid_lock_no_other_uid_out)
{
    char *dir = jpt_tmpdir();
    cr_assert_eq(chmod(dir, 0755), 0);
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    const char *extra[] = {"--allow-group", "4242", "--max-runs-per-uid", "4", NULL};
    int errfd;
    pid_t d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);
    pthread_t logger;
    cr_assert_eq(pthread_create(&logger, NULL, discard_log, &errfd), 0);
    long before_kib = peak_rss_kib(d);

    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t child = tl_fork();
    if (child == 0) {
        close(p[0]);
        flood_unread(sock, 3.0, p[1]);
    }
    close(p[1]);

    /* Another uid (root here) runs while the flood goes on: every run completes. */
    nap_ms(300);
    int refused = 0, runs = 0;
    for (double end = tl_now_s() + 2.5; tl_now_s() < end; runs++) {
        struct jpt_client c;
        cr_assert_eq(jpt_client_connect(&c, sock), 0);
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_MEMORY, 500u + (uint32_t)runs, 2000);
        struct jpt_result res;
        int r = jpt_run(&c, &s, 1024, -1, &res);
        cr_assert_eq(r, 0, "run %d of another uid: %s", runs, strerror(-r));
        if (res.error_code) {
            refused++;
            cr_log_error("run %d refused: %s", runs, res.error);
        } else {
            cr_expect_eq(res.status, JP_STATUS_COMPLETE, "run %d: %s", runs, res.reason);
        }
        jpt_result_free(&res);
        jpt_client_close(&c);
    }
    uint32_t counts[2];
    cr_assert_eq(read(p[0], counts, sizeof counts), (ssize_t)sizeof counts);
    close(p[0]);
    int st;
    cr_assert_eq(waitpid(child, &st, 0), child);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the flood ended with %d", st);

    cr_log_info("another uid: %d runs, %d refused; the flood: %u started, %u refused; the "
                "daemon grew by %ld KiB", runs, refused, counts[0], counts[1],
                peak_rss_kib(d) - before_kib);
    cr_expect_eq(refused, 0, "%d of %d runs of another uid refused", refused, runs);
    cr_expect_gt(runs, 5);
    /* The flood's unread runs hold its 4 slots until their sockets close: within the 3 s of
     * the flood (less than the 5 s flush deadline) it starts no more than 4. */
    cr_expect_gt(counts[1], 0, "the flood was never refused");
    cr_expect_leq(counts[0], 4, "the flood started %u runs (%u refused)", counts[0], counts[1]);
    /* The daemon grew by at most the flooding uid's worst case, 4 runs of (ring, budget,
     * export cap, a piece in flight), and a little for the other uid's runs. */
    long grew_kib = peak_rss_kib(d) - before_kib;
    if (RSS_IS_A_BOUND)
        cr_expect_lt(grew_kib, 4 * (32 + 16 + 4) * 1024 + 32 * 1024,
                     "the daemon grew by %ld KiB", grew_kib);

    kill(d, SIGTERM);
    cr_assert_eq(tl_wait(d, 20000), 0);
    pthread_join(logger, NULL);
    close(errfd);
    free(dir);
}

/* `jettprofd diff`'s human text names functions and paths from two captures: the same rule. */
Test(hardening, control_bytes_of_a_capture_reach_no_diff_text_raw)
{
    char *dir = jpt_tmpdir();
    char sock[600], caps[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(caps, sizeof caps, "%s/caps", dir);
    cr_assert_eq(mkdir(caps, 0700), 0);
    const char *extra[] = {"--capture-dir", caps, NULL};
    int errfd;
    pid_t d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);
    for (uint32_t seed = 1; seed <= 2; seed++) {
        struct jpt_client c;
        cr_assert_eq(jpt_client_connect(&c, sock), 0);
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_CPU, seed, 3000);
        s.program = HOSTILE_PROGRAM;
        s.threshold_bp = 0;
        struct jpt_result res;
        cr_assert_eq(jpt_run(&c, &s, 1024, -1, &res), 0);
        cr_assert_eq(res.status, JP_STATUS_COMPLETE, "%s", res.reason);
        jpt_result_free(&res);
        jpt_client_close(&c);
    }
    kill(d, SIGTERM);
    cr_assert_eq(tl_wait(d, 10000), 0);
    close(errfd);
    char *names[2];
    int n = 0;
    DIR *dd = opendir(caps);
    cr_assert(dd);
    for (struct dirent *e; (e = readdir(dd)) && n < 2;)
        if (strstr(e->d_name, ".jpcap")) {
            names[n] = malloc(strlen(caps) + strlen(e->d_name) + 2);
            sprintf(names[n++], "%s/%s", caps, e->d_name);
        }
    closedir(dd);
    cr_assert_eq(n, 2, "two captures in %s", caps);
    char *argv[] = {(char *)jpt_daemon_bin(), "diff", names[0], names[1], NULL};
    char *out = NULL, *err = NULL;
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "diff: %s", err);
    cr_assert(strstr(out, "owned"), "the hostile path is in the diff: %s", out);
    expect_no_raw_control("diff", out);
    cr_expect(strstr(out, "src/\\u009b2J\\u009d0;owned\\u009c\\u0090x\\u0085.jett"), "%s", out);
    free(out);
    free(err);
    free(names[0]);
    free(names[1]);
    free(dir);
}

/* A flag's value is quoted in the runtime's usage error by the same rule. */
Test(hardening, a_bad_flag_value_is_escaped_in_the_runtime_error)
{
    char *argv[] = {getenv("JETT_BIN"), "run", "main.jett", "--profile-export",
                    "bad:\xc2\x9b" "1m\x1b[2J\xc3\xa9", NULL};
    cr_assert(argv[0], "JETT_BIN is not set");
    char *out = NULL, *err = NULL;
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "a usage error: %s", err);
    expect_no_raw_control("jett's usage error", err);
    cr_expect(strstr(err, "got 'bad:\\u009b1m\\x1b[2J\xc3\xa9'\n"), "%s", err);
    free(out);
    free(err);
}
