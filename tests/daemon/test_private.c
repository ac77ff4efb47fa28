/* Private mode: `jettprofd --session-fd N` serves one run over an inherited socket pair. */
#include <criterion/criterion.h>
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

struct priv {
    pid_t pid;
    int err_fd;
    struct jpt_client c;
};

static void start_private(struct priv *p, int want_stderr)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    char num[16];
    snprintf(num, sizeof num, "%d", sv[1]);
    char *argv[] = {(char *)jpt_daemon_bin(), "--session-fd", num, NULL};
    p->err_fd = -1;
    p->pid = jpt_spawn(argv, sv[1], want_stderr ? &p->err_fd : NULL);
    cr_assert_gt(p->pid, 0);
    close(sv[1]);
    cr_assert_eq(jpt_client_open_fd(&p->c, sv[0]), 0);
}

static int exit_status_of(pid_t pid)
{
    int st = tl_wait(pid, 10000);
    cr_assert_geq(st, 0, "the private daemon did not exit");
    cr_assert(WIFEXITED(st), "the private daemon died of signal %d", WTERMSIG(st));
    return WEXITSTATUS(st);
}

static void expect_same(struct jpt_result *got, struct jpt_stream *again)
{
    struct jpt_result want;
    cr_assert_eq(jpt_expected(again, &want), 0);
    cr_assert_eq(got->status, want.status);
    cr_assert_str_eq(got->reason, want.reason);
    cr_assert_eq(got->human_len, want.human_len);
    cr_assert_str_eq(got->human, want.human);
    cr_assert_str_eq(got->toon, want.toon);
    jpt_result_free(&want);
}

Test(private, cpu_run_gets_the_engines_profile_and_the_daemon_exits)
{
    struct priv p;
    start_private(&p, 0);
    struct jpt_stream s, again;
    jpt_stream_init(&s, JP_MODE_CPU, 7, 50000);
    again = s;
    struct jpt_result r;
    cr_assert_eq(jpt_run(&p.c, &s, 1024, -1, &r), 0);
    cr_assert_eq(r.error_code, 0, "daemon answered error: %s", r.error);
    cr_assert_eq(r.status, JP_STATUS_COMPLETE);
    cr_assert_gt(r.human_len, 0);
    cr_assert_gt(r.toon_len, 0);
    expect_same(&r, &again);
    jpt_result_free(&r);
    /* The session is over: the daemon closes its end and exits. */
    struct jp_ctl_msg m;
    cr_assert_eq(jpt_client_recv(&p.c, &m, 5000), 0, "expected EOF after the result");
    cr_assert_eq(exit_status_of(p.pid), 0);
    jpt_client_close(&p.c);
}

Test(private, memory_run_gets_the_engines_profile)
{
    struct priv p;
    start_private(&p, 0);
    struct jpt_stream s, again;
    jpt_stream_init(&s, JP_MODE_MEMORY, 11, 50000);
    again = s;
    struct jpt_result r;
    cr_assert_eq(jpt_run(&p.c, &s, 256, -1, &r), 0);
    cr_assert_eq(r.error_code, 0, "daemon answered error: %s", r.error);
    expect_same(&r, &again);
    jpt_result_free(&r);
    cr_assert_eq(exit_status_of(p.pid), 0);
    jpt_client_close(&p.c);
}

Test(private, client_eof_prints_a_partial_profile_naming_the_lost_producer)
{
    struct priv p;
    start_private(&p, 1);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 3, 100000);
    struct jp_ring ring;
    uint64_t run_id;
    cr_assert_eq(jpt_start_run(&p.c, &s, 4096, -1, 20000, &ring, &run_id), 0);
    /* The client dies without finalizing: its socket closes, the ring holds what it pushed. */
    jpt_client_close(&p.c);
    jp_ring_unmap(&ring);
    char *err = jpt_slurp_fd(p.err_fd);
    close(p.err_fd);
    cr_assert_eq(exit_status_of(p.pid), 0);
    cr_assert(strstr(err, "producer_lost") != NULL, "stderr: %s", err);
    cr_assert(strstr(err, "partial") != NULL, "stderr: %s", err);
    free(err);
}

Test(private, sigint_is_ignored_and_sigterm_delivers_an_interrupted_profile)
{
    struct priv p;
    start_private(&p, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 5, 100000);
    struct jp_ring ring;
    uint64_t run_id;
    cr_assert_eq(jpt_start_run(&p.c, &s, 4096, -1, 1000, &ring, &run_id), 0);
    kill(p.pid, SIGINT);
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    cr_assert_eq(waitpid(p.pid, NULL, WNOHANG), 0, "SIGINT must not stop the private daemon");
    uint8_t buf[JP_REC_MAX_SIZE];
    for (int i = 0; i < 1000; i++) {
        uint32_t len = jpt_stream_next(&s, buf);
        cr_assert_eq(jpt_push(&ring, buf, len), 0);
    }
    kill(p.pid, SIGTERM);
    struct jpt_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(jpt_finish(&p.c, &r, 10000), 0);
    cr_assert_eq(r.error_code, 0, "error: %s", r.error);
    cr_assert_eq(r.status, JP_STATUS_PARTIAL);
    cr_assert_str_eq(r.reason, "interrupted");
    jpt_result_free(&r);
    cr_assert_eq(exit_status_of(p.pid), 0);
    jp_ring_unmap(&ring);
    jpt_client_close(&p.c);
}

static void expect_refused_hello(void (*tweak)(struct jp_ctl_msg *), uint32_t code,
                                 const char *needle)
{
    struct priv p;
    start_private(&p, 0);
    struct jp_ctl_msg m = {.type = JP_CTL_HELLO};
    m.u.hello.version = JP_CTL_VERSION;
    m.u.hello.mode = JP_MODE_CPU;
    m.u.hello.rate_hz = 1000;
    m.u.hello.threshold_bp = 500;
    m.u.hello.limit = 10;
    m.u.hello.outputs = JP_OUT_HUMAN;
    m.u.hello.capabilities = 0xff;
    tweak(&m);
    cr_assert_eq(jp_ctl_send(p.c.fd, &m, NULL, 0), 0);
    struct jp_ctl_msg a;
    cr_assert_eq(jpt_client_recv(&p.c, &a, 5000), 1);
    cr_assert_eq(a.type, JP_CTL_ERROR);
    cr_assert_eq(a.u.error.code, code, "code %u", a.u.error.code);
    char msg[256];
    snprintf(msg, sizeof msg, "%.*s", (int)a.u.error.message_len, a.u.error.message);
    cr_assert(strstr(msg, needle) != NULL, "message: %s", msg);
    cr_assert_eq(exit_status_of(p.pid), 0);
    jpt_client_close(&p.c);
}

static void v2(struct jp_ctl_msg *m) { m->u.hello.version = 2; }
static void rate0(struct jp_ctl_msg *m) { m->u.hello.rate_hz = 0; }
static void rate1001(struct jp_ctl_msg *m) { m->u.hello.rate_hz = 1001; }
static void thr(struct jp_ctl_msg *m) { m->u.hello.threshold_bp = 10001; }
static void lim0(struct jp_ctl_msg *m) { m->u.hello.limit = 0; }
static void lim101(struct jp_ctl_msg *m) { m->u.hello.limit = 101; }
static void nocaps(struct jp_ctl_msg *m) { m->u.hello.capabilities = JP_CAP_CPU_TICK_SOURCE; }
static void memrate(struct jp_ctl_msg *m)
{
    m->u.hello.mode = JP_MODE_MEMORY;
    m->u.hello.rate_hz = 5;
}

Test(private, out_of_range_hellos_get_a_stable_code_and_a_message)
{
    expect_refused_hello(v2, JP_CTLE_UNSUPPORTED_VERSION, "version");
    expect_refused_hello(rate0, JP_CTLE_BAD_MESSAGE, "rate_hz");
    expect_refused_hello(rate1001, JP_CTLE_BAD_MESSAGE, "rate_hz");
    expect_refused_hello(thr, JP_CTLE_BAD_MESSAGE, "threshold_bp");
    expect_refused_hello(lim0, JP_CTLE_BAD_MESSAGE, "limit");
    expect_refused_hello(lim101, JP_CTLE_BAD_MESSAGE, "limit");
    expect_refused_hello(nocaps, JP_CTLE_BAD_MESSAGE, "capabilities");
    expect_refused_hello(memrate, JP_CTLE_BAD_MESSAGE, "rate_hz");
}

static void ring_msg_then_expect(struct priv *p, int fd, uint32_t slots, uint32_t code)
{
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 1, 10);
    uint64_t id;
    cr_assert_eq(jpt_client_hello(&p->c, &s, JP_OUT_HUMAN, &id, NULL), 0);
    struct jp_ctl_msg m = {.type = JP_CTL_RING};
    m.u.ring.slot_count = slots;
    cr_assert_eq(jp_ctl_send(p->c.fd, &m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1u : 0u), 0);
    struct jp_ctl_msg a;
    cr_assert_eq(jpt_client_recv(&p->c, &a, 5000), 1);
    cr_assert_eq(a.type, JP_CTL_ERROR);
    cr_assert_eq(a.u.error.code, code, "code %u: %.*s", a.u.error.code,
                 (int)a.u.error.message_len, a.u.error.message);
    cr_assert_eq(exit_status_of(p->pid), 0);
    jpt_client_close(&p->c);
}

Test(private, a_ring_without_fd_or_with_a_plain_file_is_refused)
{
    struct priv p;
    start_private(&p, 0);
    ring_msg_then_expect(&p, -1, 1024, JP_CTLE_BAD_RING);

    start_private(&p, 0);
    char path[] = "/tmp/jpd-notring-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(ftruncate(fd, JP_RING_HEADER_SIZE + 1024 * JP_SLOT_SIZE), 0);
    ring_msg_then_expect(&p, fd, 1024, JP_CTLE_BAD_RING);
    close(fd);

    /* A real ring whose size disagrees with the message. */
    start_private(&p, 0);
    struct jp_ring ring;
    cr_assert_eq(jp_ring_create(1024, &ring), 0);
    ring_msg_then_expect(&p, ring.fd, 2048, JP_CTLE_BAD_RING);
    jp_ring_unmap(&ring);
}

static void hostile_record_ends_the_session(uint16_t type, uint16_t size)
{
    struct priv p;
    start_private(&p, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 2, 100);
    struct jp_ring ring;
    uint64_t id;
    cr_assert_eq(jpt_start_run(&p.c, &s, 256, -1, 10, &ring, &id), 0);
    /* Write a bad header straight into the ring, bypassing every producer check. */
    uint8_t *slot = jp_ring_reserve(&ring, 32);
    cr_assert_not_null(slot);
    struct jp_rec_hdr h = {type, size};
    memset(slot, 0xab, 32);
    memcpy(slot, &h, sizeof h);
    jp_ring_commit(&ring);
    struct jp_ctl_msg a;
    cr_assert_eq(jpt_client_recv(&p.c, &a, 5000), 1);
    cr_assert_eq(a.type, JP_CTL_ERROR);
    cr_assert_eq(a.u.error.code, JP_CTLE_PROTOCOL_VIOLATION);
    cr_assert_eq(exit_status_of(p.pid), 0);
    jp_ring_unmap(&ring);
    jpt_client_close(&p.c);
}

Test(private, hostile_ring_records_end_only_that_session)
{
    hostile_record_ends_the_session(JP_REC_CPU_SAMPLE, 0);      /* size below the header */
    hostile_record_ends_the_session(JP_REC_CPU_SAMPLE, 60000);  /* past the committed slots */
    hostile_record_ends_the_session(200, 32);                   /* unknown type */
    hostile_record_ends_the_session(JP_REC_RUN_START, 64);      /* claims two slots, one committed */
}

Test(private, a_second_run_start_with_another_mode_is_refused)
{
    /* (covered above for type checks; here: the first record's mode must match the hello) */
    struct priv p;
    start_private(&p, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 2, 100);
    uint64_t id;
    cr_assert_eq(jpt_client_hello(&p.c, &s, JP_OUT_HUMAN, &id, NULL), 0);
    struct jp_ring ring;
    cr_assert_eq(jp_ring_create(256, &ring), 0);
    struct jp_ctl_msg m = {.type = JP_CTL_RING};
    m.u.ring.slot_count = 256;
    cr_assert_eq(jp_ctl_send(p.c.fd, &m, &ring.fd, 1), 0);
    struct jpt_stream mem;
    jpt_stream_init(&mem, JP_MODE_MEMORY, 2, 100);
    uint8_t buf[JP_REC_MAX_SIZE];
    uint32_t len = jpt_stream_next(&mem, buf);
    cr_assert_eq(jpt_push(&ring, buf, len), 0);
    struct jp_ctl_msg a;
    cr_assert_eq(jpt_client_recv(&p.c, &a, 5000), 1);
    cr_assert_eq(a.type, JP_CTL_ERROR);
    cr_assert_eq(a.u.error.code, JP_CTLE_PROTOCOL_VIOLATION);
    cr_assert_eq(exit_status_of(p.pid), 0);
    jp_ring_unmap(&ring);
    jpt_client_close(&p.c);
}

static void expect_cli_error(char *const argv[], const char *needle)
{
    char *out = NULL, *err = NULL;
    int st = jpt_capture_cmd(argv, &out, NULL, &err);
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 2, "%s: exit %d, stderr %s", argv[1], WEXITSTATUS(st), err);
    cr_assert(strstr(err, needle) != NULL, "stderr should name %s: %s", needle, err);
    free(out);
    free(err);
}

Test(private, bad_command_lines_name_the_flag_and_exit_2)
{
    char *bin = (char *)jpt_daemon_bin();
    expect_cli_error((char *[]){bin, "--session-fd", NULL}, "--session-fd");
    expect_cli_error((char *[]){bin, "--session-fd", "x1", NULL}, "--session-fd");
    expect_cli_error((char *[]){bin, "--session-fd", "987", NULL}, "--session-fd");
    expect_cli_error((char *[]){bin, "serve", "--bogus", NULL}, "--bogus");
    expect_cli_error((char *[]){bin, "serve", "--max-runs-per-uid", "0", NULL},
                     "--max-runs-per-uid");
    expect_cli_error((char *[]){bin, "serve", "--socket", NULL}, "--socket");
    expect_cli_error((char *[]){bin, "serve", "--workers", "0", NULL}, "--workers");
    expect_cli_error((char *[]){bin, "serve", "--workers", "257", NULL}, "--workers");
    expect_cli_error((char *[]){bin, "serve", "--workers", "2x", NULL}, "--workers");
    expect_cli_error((char *[]){bin, "replay", NULL}, "FILE");
    expect_cli_error((char *[]){bin, "replay", "x", "--profile-threshold", "100.01", NULL},
                     "--profile-threshold");
    expect_cli_error((char *[]){bin, "replay", "x", "--profile-threshold", "5.123", NULL},
                     "--profile-threshold");
    expect_cli_error((char *[]){bin, "replay", "x", "--profile-limit", "101", NULL},
                     "--profile-limit");
    expect_cli_error((char *[]){bin, "replay", "x", "--format", "json", NULL}, "--format");
    expect_cli_error((char *[]){bin, "show", "abc", NULL}, "RUN_ID");
    expect_cli_error((char *[]){bin, "summarize", "--exit-code", "x", "c", NULL}, "--exit-code");
    expect_cli_error((char *[]){bin, "summarize", NULL}, "CAPTURE");
    expect_cli_error((char *[]){bin, "frobnicate", NULL}, "frobnicate");
}

Test(private, a_client_gone_during_the_excerpt_exchange_still_gets_its_profile_on_stderr)
{
    struct priv p;
    start_private(&p, 1);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 9, 5000);
    struct jp_ring ring;
    uint64_t id;
    cr_assert_eq(jpt_start_run(&p.c, &s, 1024, -1, UINT64_MAX, &ring, &id), 0);
    jp_ring_close(&ring);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(p.c.fd, &f, NULL, 0), 0);
    struct jp_ctl_msg m;
    cr_assert_eq(jpt_client_recv(&p.c, &m, 5000), 1);
    cr_assert_eq(m.type, JP_CTL_EXCERPT_REQUEST);
    /* The runtime dies instead of answering. The stream was whole: the profile is complete. */
    jpt_client_close(&p.c);
    jp_ring_unmap(&ring);
    char *err = jpt_slurp_fd(p.err_fd);
    close(p.err_fd);
    cr_assert_eq(exit_status_of(p.pid), 0);
    cr_assert(strstr(err, "status: complete") != NULL, "stderr: %s", err);
    free(err);
}

static uint32_t first_error_code(struct priv *p)
{
    struct jp_ctl_msg a;
    cr_assert_eq(jpt_client_recv(&p->c, &a, 5000), 1);
    cr_assert_eq(a.type, JP_CTL_ERROR, "got %s", jp_ctl_type_name(a.type));
    uint32_t code = a.u.error.code;
    cr_assert_eq(exit_status_of(p->pid), 0);
    jpt_client_close(&p->c);
    return code;
}

Test(private, hostile_control_traffic_ends_the_session_with_a_stable_code)
{
    /* A frame header announcing more than the limit. */
    struct priv p;
    start_private(&p, 0);
    uint8_t big[4] = {0xff, 0xff, 0xff, 0x7f};
    cr_assert_eq(write(p.c.fd, big, 4), 4);
    cr_assert_eq(first_error_code(&p), JP_CTLE_BAD_MESSAGE);

    /* Bytes that are not msgpack. */
    start_private(&p, 0);
    uint8_t junk[12] = {8, 0, 0, 0, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1};
    cr_assert_eq(write(p.c.fd, junk, sizeof junk), (ssize_t)sizeof junk);
    cr_assert_eq(first_error_code(&p), JP_CTLE_BAD_MESSAGE);

    /* A message out of order. */
    start_private(&p, 0);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(p.c.fd, &f, NULL, 0), 0);
    cr_assert_eq(first_error_code(&p), JP_CTLE_BAD_MESSAGE);

    /* More fds than the ring message announces. */
    start_private(&p, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 1, 10);
    uint64_t id;
    cr_assert_eq(jpt_client_hello(&p.c, &s, JP_OUT_HUMAN, &id, NULL), 0);
    struct jp_ring ring;
    cr_assert_eq(jp_ring_create(256, &ring), 0);
    int fds[2] = {ring.fd, ring.fd};
    struct jp_ctl_msg m = {.type = JP_CTL_RING};
    m.u.ring.slot_count = 256;
    cr_assert_eq(jp_ctl_send(p.c.fd, &m, fds, 2), 0);
    cr_assert_eq(first_error_code(&p), JP_CTLE_BAD_RING);
    jp_ring_unmap(&ring);
}

/* A capture fd the daemon cannot write loses the capture, not the run: the profile comes back
 * complete and the result names why the capture failed. */
Test(private, a_read_only_capture_fd_is_reported_and_the_run_goes_on)
{
    struct priv p;
    start_private(&p, 0);
    char path[] = "/tmp/jpd-rocap-XXXXXX";
    int w = mkstemp(path);
    cr_assert_geq(w, 0);
    int ro = open(path, O_RDONLY | O_CLOEXEC);
    unlink(path);
    close(w);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 1, 10);
    struct jpt_result r;
    cr_assert_eq(jpt_run(&p.c, &s, 256, ro, &r), 0);
    cr_assert_eq(r.error_code, 0, "%s", r.error);
    cr_assert_eq(r.status, JP_STATUS_COMPLETE);
    cr_assert_eq(r.capture_errno, EINVAL);
    jpt_result_free(&r);
    jpt_client_close(&p.c);
    cr_assert_eq(exit_status_of(p.pid), 0);
    close(ro);
}

Test(private, finalize_without_a_stop_record_is_a_collector_failure)
{
    struct priv p;
    start_private(&p, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 12, 3000);
    s.with_stop = 0; /* the agent could not push its RUN_STOP */
    struct jp_ring ring;
    uint64_t id;
    cr_assert_eq(jpt_start_run(&p.c, &s, 1024, -1, UINT64_MAX, &ring, &id), 0);
    jp_ring_close(&ring);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(p.c.fd, &f, NULL, 0), 0);
    struct jpt_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(jpt_finish(&p.c, &r, 5000), 0);
    cr_assert_eq(r.error_code, 0, "%s", r.error);
    cr_assert_neq(r.status, JP_STATUS_COMPLETE);
    cr_assert_str_eq(r.reason, "collector_failure");
    jpt_result_free(&r);
    cr_assert_eq(exit_status_of(p.pid), 0);
    jp_ring_unmap(&ring);
    jpt_client_close(&p.c);
}

/* Where a private daemon whose program is pid lets its user watch it: the rule jettprofd(8)
 * states ($XDG_RUNTIME_DIR/jettprof when that is set, else /tmp/jettprof-UID). */
static void watch_socket(pid_t pid, char *dir, size_t dcap, char *path, size_t pcap)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (rt && rt[0] == '/')
        snprintf(dir, dcap, "%s/jettprof", rt);
    else
        snprintf(dir, dcap, "/tmp/jettprof-%u", (unsigned)getuid());
    snprintf(path, pcap, "%s/%d.sock", dir, (int)pid);
}

/* argv run as uid (0: as we are), stdout and stderr captured: its exit status. */
static int run_as(uid_t uid, char *const argv[], char **out, char **err)
{
    int op[2], ep[2];
    cr_assert_eq(pipe(op), 0);
    cr_assert_eq(pipe(ep), 0);
    pid_t pid = tl_fork();
    if (pid == 0) {
        if (uid)
            jpt_become(uid, uid);
        dup2(op[1], STDOUT_FILENO);
        dup2(ep[1], STDERR_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(op[1]);
    close(ep[1]);
    *out = jpt_slurp_fd(op[0]);
    *err = jpt_slurp_fd(ep[0]);
    close(op[0]);
    close(ep[0]);
    int st = tl_wait(pid, 20000);
    cr_assert(st >= 0 && WIFEXITED(st), "%s did not exit", argv[1]);
    return WEXITSTATUS(st);
}

/* `jettprofd top --pid PID` reaches a private run for its own user, through a socket in a
 * directory only that user may enter; another user finds nothing, and one let through the
 * directory and the socket's mode is still refused by the daemon, which checks the peer on the
 * connection. The socket goes when the run ends. */
Test(private, a_private_run_is_watched_by_its_user_only_and_its_socket_goes_with_it)
{
    struct priv p;
    start_private(&p, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 12, 5000);
    struct jp_ring ring;
    uint64_t run_id;
    cr_assert_eq(jpt_start_run(&p.c, &s, 4096, -1, 5000, &ring, &run_id), 0);
    char dir[600], path[700];
    watch_socket(getpid(), dir, sizeof dir, path, sizeof path); /* its program: us */
    struct stat st;
    for (int i = 0; stat(path, &st) != 0; i++) {
        cr_assert_lt(i, 500, "no watch socket at %s", path);
        usleep(10000);
    }
    cr_assert_eq(st.st_mode & 0777, 0600, "socket mode %o", st.st_mode & 0777);
    cr_assert_eq(lstat(dir, &st), 0);
    cr_assert(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 && st.st_uid == getuid());

    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    char *argv[] = {(char *)jpt_daemon_bin(), "top", "--pid", pid, "--batch", "--frames", "2",
                    "--interval", "0.1", NULL};
    char *out, *err;
    cr_assert_eq(run_as(0, argv, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "jettprofd top - run ") && strstr(out, " - memory - "), "%s", out);
    cr_assert(strstr(out, "LIVE NOW"), "%s", out);
    cr_assert_null(strchr(out, '\x1b'), "a batch frame has no escape code:\n%s", out);
    free(out);
    free(err);
    cr_assert_eq(run_as(4002, argv, &out, &err), 1, "another user watched the run: %s", out);
    cr_assert(strstr(err, "no run of pid"), "%s", err);
    free(out);
    free(err);

    /* Its own user may watch, not start a second run there. */
    struct jpt_client h;
    cr_assert_eq(jpt_client_connect(&h, path), 0);
    struct jpt_stream other;
    jpt_stream_init(&other, JP_MODE_MEMORY, 13, 10);
    uint64_t other_id;
    struct jpt_result refused;
    memset(&refused, 0, sizeof refused);
    cr_assert_neq(jpt_client_hello(&h, &other, JP_OUT_TOON, &other_id, &refused), 0);
    cr_assert_eq(refused.error_code, JP_CTLE_BAD_MESSAGE, "%s", refused.error);
    jpt_client_close(&h);

    /* Let 4002 through the directory and the socket's mode: the daemon itself refuses it. */
    cr_assert_eq(chmod(dir, 0711), 0);
    cr_assert_eq(chmod(path, 0666), 0);
    pid_t child = tl_fork();
    if (child == 0) {
        jpt_become(4002, 4002);
        struct jpt_client w;
        if (jpt_client_connect(&w, path) < 0)
            _exit(98);
        struct jp_ctl_msg q = {.type = JP_CTL_TOP};
        q.u.top.rows = 10;
        (void)jp_ctl_send(w.fd, &q, NULL, 0);
        struct jp_ctl_msg a;
        if (jpt_client_recv(&w, &a, 5000) != 1)
            _exit(96);
        _exit(a.type == JP_CTL_ERROR ? 10 + (int)a.u.error.code : 94);
    }
    int ws = tl_wait(child, 10000);
    chmod(dir, 0700);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 10 + JP_CTLE_PERMISSION_DENIED,
              "another uid on the socket: %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);

    uint8_t buf[JP_REC_MAX_SIZE];
    uint32_t len = jpt_stream_stop(&s, buf);
    cr_assert_eq(jpt_push(&ring, buf, len), 0);
    struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE};
    m.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(p.c.fd, &m, NULL, 0), 0);
    struct jpt_result r;
    cr_assert_eq(jpt_finish(&p.c, &r, 30000), 0);
    cr_assert_eq(r.error_code, 0, "%s", r.error);
    jpt_result_free(&r);
    cr_assert_eq(exit_status_of(p.pid), 0);
    cr_assert_neq(stat(path, &st), 0, "the watch socket outlived its run");
    cr_assert_eq(errno, ENOENT);
    jpt_client_close(&p.c);
    jp_ring_unmap(&ring);
}
