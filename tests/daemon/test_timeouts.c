/* The excerpt exchange's timeout: a runtime that never answers EXCERPT_REQUEST still gets its
 * profile, rendered without excerpts, once the timeout passed. The 10 s default is shortened
 * with the test knob JETTPROFD_EXCERPT_TIMEOUT_MS (read by the daemon at start). */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

#define TIMEOUT_MS 500

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static pid_t start_private(struct jpt_client *c, int *err_fd)
{
    pid_t pid = jpt_private(c, err_fd);
    cr_assert_gt(pid, 0);
    return pid;
}

/* The engine's profile of the stream with no excerpts fed: what the daemon must send when the
 * runtime never answers. */
static void render_without_excerpts(struct jpt_stream *s, char **human, char **toon)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    uint8_t buf[JP_REC_MAX_SIZE];
    const char *why = NULL;
    for (uint32_t len; (len = jpt_stream_next(s, buf));)
        cr_assert_eq(jp_engine_feed(e, buf, len, &why), 0, "%s", why ? why : "?");
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_STOP, .outputs = JP_OUT_HUMAN | JP_OUT_TOON};
    struct jp_rendered r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(jp_profile_render(e, &o, &r), 0);
    *human = strdup(r.human);
    *toon = strdup(r.toon);
    jp_rendered_free(&r);
    jp_engine_free(e);
}

Test(timeouts, an_unanswered_excerpt_request_times_out_into_a_profile_without_excerpts)
{
    char ms[16];
    snprintf(ms, sizeof ms, "%d", TIMEOUT_MS);
    cr_assert_eq(setenv("JETTPROFD_EXCERPT_TIMEOUT_MS", ms, 1), 0);
    struct jpt_client c;
    pid_t pid = start_private(&c, NULL);
    unsetenv("JETTPROFD_EXCERPT_TIMEOUT_MS");

    struct jpt_stream s, again, with;
    jpt_stream_init(&s, JP_MODE_CPU, 9, 20000);
    again = with = s;
    struct jp_ring ring;
    uint64_t id;
    cr_assert_eq(jpt_start_run(&c, &s, 1024, -1, UINT64_MAX, &ring, &id), 0);
    jp_ring_close(&ring);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(c.fd, &f, NULL, 0), 0);

    struct jp_ctl_msg m;
    cr_assert_eq(jpt_client_recv(&c, &m, 10000), 1);
    cr_assert_eq(m.type, JP_CTL_EXCERPT_REQUEST, "got %s", jp_ctl_type_name(m.type));
    cr_assert_gt(m.u.excerpt_request.count, 0, "the stream must have hot lines to ask for");
    double t0 = now_ms();
    /* No answer. The result must come after the knob's timeout, long before the default. */
    cr_assert_eq(jpt_client_recv(&c, &m, 8000), 1, "no result after the excerpt timeout");
    double waited = now_ms() - t0;
    cr_assert_eq(m.type, JP_CTL_RESULT, "got %s", jp_ctl_type_name(m.type));
    cr_assert_geq(waited, TIMEOUT_MS - 100, "the result came %.0f ms after the request", waited);
    cr_assert_lt(waited, 8000.0);
    cr_assert_eq(m.u.result.status, JP_STATUS_COMPLETE);

    char *human, *toon;
    render_without_excerpts(&again, &human, &toon);
    cr_assert_eq(m.u.result.human_len, strlen(human));
    cr_assert(memcmp(m.u.result.human, human, strlen(human)) == 0, "human profile differs");
    cr_assert_eq(m.u.result.toon_len, strlen(toon));
    cr_assert(memcmp(m.u.result.toon, toon, strlen(toon)) == 0, "toon profile differs");
    /* And it is not the profile with excerpts: the comparison above could tell them apart. */
    struct jpt_result want;
    cr_assert_eq(jpt_expected(&with, &want), 0);
    cr_assert_str_neq(want.toon, toon);
    jpt_result_free(&want);
    free(human);
    free(toon);

    cr_assert_eq(jpt_client_recv(&c, &m, 5000), 0, "expected EOF after the result");
    int st = tl_wait(pid, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
}

Test(timeouts, a_bad_excerpt_timeout_knob_is_refused_naming_it)
{
    static const char *const bad[] = {"0", "600001", "abc", "", "-5", "10ms"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(setenv("JETTPROFD_EXCERPT_TIMEOUT_MS", bad[i], 1), 0);
        char *argv[] = {(char *)jpt_daemon_bin(), "--session-fd", "0", NULL};
        char *out = NULL, *err = NULL;
        int st = jpt_capture_cmd(argv, &out, NULL, &err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "value '%s': status %d", bad[i], st);
        cr_assert(strstr(err, "JETTPROFD_EXCERPT_TIMEOUT_MS") != NULL, "stderr: %s", err);
        free(out);
        free(err);
    }
    unsetenv("JETTPROFD_EXCERPT_TIMEOUT_MS");
}

/* A daemon that is itself late: stopped (SIGSTOP) with a connection accepted, while the client
 * sends its HELLO and RING well within the handshake time, and continued only after that time.
 * Its expired timer runs before it polls the socket; the HELLO and RING that were sent in time
 * are taken first, so the run goes on and ends with its profile instead of a handshake error. */
Test(timeouts, a_late_daemon_takes_the_hello_and_ring_sent_in_time)
{
    char *dir = jpt_tmpdir();
    cr_assert_not_null(dir);
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    setenv("JETTPROFD_HANDSHAKE_TIMEOUT_MS", "300", 1);
    const char *extra[] = {"--workers", "1", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    unsetenv("JETTPROFD_HANDSHAKE_TIMEOUT_MS");
    cr_assert_gt(d, 0);
    /* The worker's loop adds fds of its own: count from when it is up (two threads). */
    char task[64];
    snprintf(task, sizeof task, "/proc/%d/task", (int)d);
    for (int i = 0; i < 1000 && jpt_count_entries(task) < 2; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    nanosleep(&(struct timespec){0, 100000000}, NULL);
    int fds0 = jpt_fd_count(d);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    /* Accepted: the daemon holds one more fd (the connection), its handshake timer runs. */
    for (int i = 0; i < 1000 && jpt_fd_count(d) <= fds0; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    cr_assert_gt(jpt_fd_count(d), fds0, "the daemon never accepted");
    cr_assert_eq(kill(d, SIGSTOP), 0);
    /* HELLO, then RING with its memfd, written while the daemon cannot read them. */
    struct jpt_stream s, again;
    jpt_stream_init(&s, JP_MODE_CPU, 41, 2000);
    again = s;
    struct jp_ctl_msg m = {.type = JP_CTL_HELLO};
    m.u.hello.version = JP_CTL_VERSION;
    m.u.hello.mode = JP_MODE_CPU;
    m.u.hello.rate_hz = 1000;
    m.u.hello.threshold_bp = s.threshold_bp;
    m.u.hello.limit = s.limit;
    m.u.hello.outputs = JP_OUT_HUMAN | JP_OUT_TOON;
    m.u.hello.capabilities = 0xffu;
    cr_assert_eq(jp_ctl_send(c.fd, &m, NULL, 0), 0);
    struct jp_ring ring;
    cr_assert_eq(jp_ring_create(4096, &ring), 0);
    struct jp_ctl_msg rm = {.type = JP_CTL_RING};
    rm.u.ring.slot_count = 4096;
    cr_assert_eq(jp_ctl_send(c.fd, &rm, &ring.fd, 1), 0);
    uint8_t buf[JP_REC_MAX_SIZE];
    for (uint32_t len; (len = jpt_stream_next(&s, buf));)
        cr_assert_eq(jpt_push(&ring, buf, len), 0);
    /* Three handshake times pass, then the daemon goes on. */
    nanosleep(&(struct timespec){0, 900000000}, NULL);
    cr_assert_eq(kill(d, SIGCONT), 0);
    struct jp_ctl_msg w;
    cr_assert_eq(jpt_client_recv(&c, &w, 10000), 1);
    cr_assert_eq(w.type, JP_CTL_WELCOME, "got %s (%.*s)", jp_ctl_type_name(w.type),
                 w.type == JP_CTL_ERROR ? (int)w.u.error.message_len : 0,
                 w.type == JP_CTL_ERROR ? w.u.error.message : "");
    jp_ring_close(&ring);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(c.fd, &f, NULL, 0), 0);
    struct jpt_result got;
    memset(&got, 0, sizeof got);
    cr_assert_eq(jpt_finish(&c, &got, 30000), 0);
    cr_assert_eq(got.error_code, 0, "daemon error: %s", got.error);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s", got.reason);
    struct jpt_result want;
    cr_assert_eq(jpt_expected(&again, &want), 0);
    cr_assert_str_eq(got.toon, want.toon);
    jpt_result_free(&want);
    jpt_result_free(&got);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    kill(d, SIGTERM);
    int st = tl_wait(d, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    rmdir(dir);
    free(dir);
}
