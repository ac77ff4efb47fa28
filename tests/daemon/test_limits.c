/* What one client may ask of a long-lived daemon: budgets it can lower but never raise, and
 * connections that cannot lock other users out or make the daemon buffer without bound. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"
#include "tests/lib/stop.h"

static char *sock_in(char **dir)
{
    *dir = jpt_tmpdir();
    cr_assert_not_null(*dir);
    char *sock = malloc(600);
    snprintf(sock, 600, "%s/d.sock", *dir);
    return sock;
}

/* After an attack: an ordinary run still gets its complete profile. */
static void still_serves_a_run(const char *sock)
{
    struct jpt_client ok;
    cr_assert_eq(jpt_client_connect(&ok, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 3, 2000);
    struct jpt_result r;
    cr_assert_eq(jpt_run(&ok, &s, 256, -1, &r), 0);
    cr_assert_eq(r.error_code, 0, "%s", r.error);
    cr_assert_eq(r.status, JP_STATUS_COMPLETE);
    jpt_result_free(&r);
    jpt_client_close(&ok);
}

/* A client asking for UINT64_MAX of both budgets runs under the operator's caps: the profile is
 * the one the engine gives the same stream at the capped budgets, byte for byte. */
Test(limits, a_client_cannot_raise_the_budgets_past_the_operator_cap)
{
    char *dir, *sock = sock_in(&dir);
    const char *extra[] = {"--max-cpu-budget", "3000", "--max-retention-budget", "3000", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    static const uint32_t modes[] = {JP_MODE_CPU, JP_MODE_MEMORY};
    for (int i = 0; i < 2; i++) {
        struct jpt_client c;
        cr_assert_eq(jpt_client_connect(&c, sock), 0);
        struct jpt_stream s;
        jpt_stream_init(&s, modes[i], 11, 20000);
        s.cpu_budget = s.retention_budget = UINT64_MAX;
        struct jpt_result got;
        cr_assert_eq(jpt_run(&c, &s, 4096, -1, &got), 0);
        cr_assert_eq(got.error_code, 0, "%s", got.error);
        jpt_client_close(&c);

        struct jpt_result want;
        jpt_stream_init(&s, modes[i], 11, 20000);
        s.cpu_budget = s.retention_budget = 3000;
        cr_assert_eq(jpt_expected(&s, &want), 0);
        cr_assert_eq(want.status, JP_STATUS_PARTIAL, "the cap is small enough to bite");
        cr_assert_str_eq(got.reason, want.reason);
        cr_assert_str_eq(got.reason, modes[i] == JP_MODE_CPU ? "cpu_metadata_limit"
                                                             : "retention_metadata_limit");
        cr_assert_eq(got.toon_len, want.toon_len);
        cr_assert(memcmp(got.toon, want.toon, want.toon_len) == 0, "%s", got.toon);
        jpt_result_free(&got);
        jpt_result_free(&want);
    }
    tl_stop(d, 20000);
    free(sock);
    rmdir(dir);
    free(dir);
}

/* Without an operator option the cap is the contract's 32 MiB / 64 MiB; a client asking for
 * less still gets less. */
Test(limits, default_caps_are_the_contract_budgets_and_a_client_may_lower_them)
{
    char *dir, *sock = sock_in(&dir);
    pid_t d = jpt_serve(sock, NULL, NULL);
    cr_assert_gt(d, 0);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 12, 5000);
    s.cpu_budget = UINT64_MAX;
    struct jpt_result got, want;
    cr_assert_eq(jpt_run(&c, &s, 4096, -1, &got), 0);
    jpt_client_close(&c);
    jpt_stream_init(&s, JP_MODE_CPU, 12, 5000);
    cr_assert_eq(jpt_expected(&s, &want), 0);
    cr_assert_str_eq(got.toon, want.toon, "UINT64_MAX runs as 33554432");
    cr_assert(strstr(got.toon, "cpu_metadata_budget_bytes: 33554432") != NULL, "%s", got.toon);
    jpt_result_free(&got);
    jpt_result_free(&want);

    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    jpt_stream_init(&s, JP_MODE_CPU, 12, 5000);
    s.cpu_budget = 3000;
    cr_assert_eq(jpt_run(&c, &s, 4096, -1, &got), 0);
    jpt_client_close(&c);
    cr_assert_eq(got.status, JP_STATUS_PARTIAL);
    cr_assert_str_eq(got.reason, "cpu_metadata_limit");
    jpt_result_free(&got);
    tl_stop(d, 20000);
    free(sock);
    rmdir(dir);
    free(dir);
}

#define GROUP 4242u
#define SILENT 1100 /* more than the daemon's 1024 connections */

static void raise_fd_limit(rlim_t want)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max < want)
        rl.rlim_max = want; /* the suite runs as root */
    if (rl.rlim_cur < want)
        rl.rlim_cur = want;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "the test needs %lu fds", (unsigned long)want);
}

/* In a child as uid 4002: a whole run. 0 when it got its profile. */
static int run_as_other(const char *sock)
{
    pid_t pid = tl_fork();
    if (pid == 0) {
        jpt_become(4002, GROUP);
        struct jpt_client c;
        if (jpt_client_connect(&c, sock) < 0)
            _exit(98);
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_MEMORY, 5, 2000);
        struct jpt_result r;
        if (jpt_run(&c, &s, 256, -1, &r) < 0)
            _exit(97);
        _exit(r.error_code ? 10 + (int)r.error_code : 0);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* One uid opens more silent connections than the daemon has slots. Only a few of them get a
 * slot (the pre-hello cap per uid), the rest are refused at once; another uid still gets its
 * run through; and the silent ones are closed at the handshake deadline. */
Test(limits, silent_connections_of_one_uid_do_not_lock_others_out)
{
    raise_fd_limit(4 * SILENT);
    char *dir, *sock = sock_in(&dir);
    cr_assert_eq(chmod(dir, 0755), 0);
    cr_assert_eq(setenv("JETTPROFD_HANDSHAKE_TIMEOUT_MS", "1500", 1), 0);
    const char *extra[] = {"--allow-group", "4242", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    unsetenv("JETTPROFD_HANDSHAKE_TIMEOUT_MS");
    cr_assert_gt(d, 0);

    int ready[2], go[2], report[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(report), 0);
    pid_t attacker = tl_fork();
    if (attacker == 0) {
        jpt_become(4001, GROUP);
        static struct jpt_client c[SILENT];
        for (int i = 0; i < SILENT; i++)
            if (jpt_client_connect(&c[i], sock) < 0)
                _exit(90);
        char b = 1;
        if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
            _exit(91);
        /* Every connection ends: refused at accept, or closed at the deadline. */
        int counts[3] = {0, 0, 0}; /* handshake deadline, refused for the cap, other */
        for (int i = 0; i < SILENT; i++) {
            struct jp_ctl_msg m;
            int r = jpt_client_recv(&c[i], &m, 30000);
            if (r == 1 && m.type == JP_CTL_ERROR && m.u.error.code == JP_CTLE_BAD_MESSAGE)
                counts[0]++;
            else if (r == 1 && m.type == JP_CTL_ERROR && m.u.error.code == JP_CTLE_TOO_MANY_RUNS)
                counts[1]++;
            else
                counts[2]++;
        }
        _exit(write(report[1], counts, sizeof counts) == sizeof counts ? 0 : 92);
    }
    char b;
    cr_assert_eq(read(ready[0], &b, 1), 1, "the attacker connected");
    cr_assert_eq(run_as_other(sock), 0, "another user's run was locked out");
    cr_assert_eq(write(go[1], &b, 1), 1);
    int counts[3];
    cr_assert_eq(read(report[0], counts, sizeof counts), (ssize_t)sizeof counts);
    int st;
    waitpid(attacker, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "attacker exit %d", WEXITSTATUS(st));
    cr_assert_leq(counts[0], 32, "%d silent connections got a slot", counts[0]);
    cr_assert_gt(counts[0], 0, "the ones with a slot are closed at the deadline");
    cr_assert_eq(counts[2], 0, "%d connections ended otherwise", counts[2]);
    cr_assert_eq(counts[0] + counts[1], SILENT);
    tl_stop(d, 20000);
    free(sock);
    rmdir(dir);
    free(dir);
}

/* Sends a frame header announcing `announce` bytes, then `body` bytes of it, and keeps the
 * connection open. Errors are ignored: the daemon may close it at once. */
static void send_partial(int fd, uint32_t announce, size_t body)
{
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    uint8_t hdr[4] = {(uint8_t)announce, (uint8_t)(announce >> 8), (uint8_t)(announce >> 16),
                      (uint8_t)(announce >> 24)};
    if (send(fd, hdr, 4, MSG_NOSIGNAL) != 4)
        return;
    static uint8_t zeros[1 << 16];
    while (body > 0) {
        size_t n = body < sizeof zeros ? body : sizeof zeros;
        ssize_t k = send(fd, zeros, n, MSG_NOSIGNAL);
        if (k <= 0)
            return;
        body -= (size_t)k;
    }
}

#define PARTIAL_CONNS 200
#define PARTIAL_BYTES (1u << 20)

/* Before hello a frame is a few bytes: a connection that announces a large one is closed at
 * once, so 200 connections each sending 1 MiB of an unfinished frame cost the daemon nothing
 * lasting, and it still serves a run. */
Test(limits, large_partial_frames_before_hello_are_not_buffered)
{
    raise_fd_limit(4096);
    char *dir, *sock = sock_in(&dir);
    pid_t d = jpt_serve(sock, NULL, NULL);
    cr_assert_gt(d, 0);
    long before = jpt_rss_kib(d);
    static struct jpt_client c[PARTIAL_CONNS];
    for (int i = 0; i < PARTIAL_CONNS; i++) {
        cr_assert_eq(jpt_client_connect(&c[i], sock), 0);
        send_partial(c[i].fd, 2u << 20, PARTIAL_BYTES);
    }
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    long after = jpt_rss_kib(d);
    cr_log_info("daemon RSS %ld KiB -> %ld KiB", before, after);
    cr_assert_lt(after - before, 32 * 1024, "RSS grew by %ld KiB", after - before);
    for (int i = 0; i < PARTIAL_CONNS; i++)
        jpt_client_close(&c[i]);

    still_serves_a_run(sock);
    tl_stop(d, 20000);
    free(sock);
    rmdir(dir);
    free(dir);
}

#define EXCERPT_CONNS 120
#define EXCERPT_PARTIAL (1900u * 1024u)

/* EXCERPTS may be large (up to 2 MiB), but the bytes of unfinished frames over all connections
 * are bounded: 120 runs each sending 1.9 MiB of an unfinished EXCERPTS frame do not take the
 * daemon past that bound (64 MiB) by much; the connections past it are closed with an ERROR,
 * and the daemon still serves a run. */
Test(limits, unfinished_frames_of_all_connections_are_bounded_together)
{
    raise_fd_limit(4096);
    char *dir, *sock = sock_in(&dir);
    /* Under AddressSanitizer freed memory sits in quarantine and would count as RSS. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL, opts[1024];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0", asan ? asan : "", asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    const char *many_runs[] = {"--max-runs-per-uid", "1000", NULL}; /* root is capped too */
    pid_t d = jpt_serve(sock, many_runs, NULL);
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    cr_assert_gt(d, 0);
    static struct jpt_client c[EXCERPT_CONNS];
    static struct jp_ring ring[EXCERPT_CONNS];
    for (int i = 0; i < EXCERPT_CONNS; i++) {
        cr_assert_eq(jpt_client_connect(&c[i], sock), 0);
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_CPU, 40u + (uint32_t)i, 100);
        uint64_t id;
        cr_assert_eq(jpt_start_run(&c[i], &s, 256, -1, UINT64_MAX, &ring[i], &id), 0);
        jp_ring_close(&ring[i]);
        struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
        f.u.finalize.termination = JP_TERM_RETURNED;
        cr_assert_eq(jp_ctl_send(c[i].fd, &f, NULL, 0), 0);
        struct jp_ctl_msg m;
        cr_assert_eq(jpt_client_recv(&c[i], &m, 20000), 1);
        cr_assert_eq(m.type, JP_CTL_EXCERPT_REQUEST, "run %d", i);
    }
    long before = jpt_rss_kib(d);
    for (int i = 0; i < EXCERPT_CONNS; i++)
        send_partial(c[i].fd, 2u << 20, EXCERPT_PARTIAL);
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    long after = jpt_rss_kib(d);
    cr_log_info("daemon RSS %ld KiB -> %ld KiB", before, after);
    /* 120 x 1.9 MiB is 223 MiB; the bound is 64 MiB, plus what one read may add. */
    cr_assert_lt(after - before, 128 * 1024, "RSS grew by %ld KiB", after - before);
    int closed = 0;
    for (int i = 0; i < EXCERPT_CONNS; i++) {
        struct jp_ctl_msg m;
        if (jpt_client_recv(&c[i], &m, 100) == 1 && m.type == JP_CTL_ERROR)
            closed++;
    }
    cr_assert_gt(closed, EXCERPT_CONNS / 3, "only %d connections were closed", closed);
    for (int i = 0; i < EXCERPT_CONNS; i++) {
        jp_ring_unmap(&ring[i]);
        jpt_client_close(&c[i]);
    }

    still_serves_a_run(sock);
    tl_stop(d, 20000);
    free(sock);
    rmdir(dir);
    free(dir);
}
