/* A run's worker rings (WORKER_RING): the daemon's merge of several rings, pinned against the
 * same records on one ring in the order the program made them; the capture of a merged run;
 * and what a client may not do with worker rings (more than allowed, past the byte cap, a
 * definition on a worker ring, a ring that stops with an event it can never give).
 *
 * Every fixture is a memory run with two frames (m.f calls m.g: nodes 1 and 2) whose events
 * are spread over worker rings the way a runtime with migrating actors spreads them: an
 * allocation on one worker's ring, its resize or free on another's. The rings are written in
 * an order that makes the daemon see a free before its allocation (the later ring first), so
 * the merge must hold it back; the reference is one ring with the same records in program
 * order, and the two profiles must be the same bytes.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol/control.h"
#include "protocol/ring.h"
#include "support.h"
#include "tests/lib/recbuild.h"
#include "tests/lib/stop.h"

#define MAX_RINGS 70

/* A fixture: records per ring (0: the main ring, i >= 1: worker ring i), in the order each ring
 * gets them, and the program order of all of them for the reference. */
struct rec {
    uint8_t ring;
    uint8_t bytes[64];
    uint32_t len;
};
struct fixture {
    struct rec *r;
    uint32_t n, cap;
    uint32_t rings;            /* worker rings */
    uint32_t slots[MAX_RINGS]; /* each worker ring's slot count */
};

/* RUN_START as a runtime sends it: the contract's budgets, a 5% threshold. */
static struct jp_rec_run_start run_start(void)
{
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_MEMORY);
    rs.threshold_bp = 500;
    rs.cpu_budget_bytes = JP_DEFAULT_CPU_BUDGET;
    rs.retention_budget_bytes = JP_DEFAULT_RETENTION_BUDGET;
    return rs;
}

static void add(struct fixture *f, uint32_t ring, const void *rec, uint32_t len)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 256;
        f->r = realloc(f->r, f->cap * sizeof *f->r);
        cr_assert_not_null(f->r);
    }
    cr_assert_leq(len, sizeof f->r[0].bytes);
    f->r[f->n].ring = (uint8_t)ring;
    memcpy(f->r[f->n].bytes, rec, len);
    f->r[f->n].len = len;
    f->n++;
}

static void add_exec(struct fixture *f, uint32_t ring, uint32_t thread, uint32_t actor)
{
    struct jp_rec_exec e = {.h = {JP_REC_EXEC, sizeof e}, .runtime_thread_id = thread,
                            .task_id = actor, .actor_id = actor};
    add(f, ring, &e, sizeof e);
}

static void add_mem(struct fixture *f, uint32_t ring, uint16_t type, uint32_t node, uint64_t id,
                    uint64_t a, uint64_t b)
{
    struct jp_rec_alloc r = {.h = {type, 32}, .node = node, .allocation_id = id, .size = a};
    memcpy((char *)&r + 24, &b, sizeof b); /* resize: new_size; the others: reserved, 0 */
    add(f, ring, &r, sizeof r);
}

/* RUN_START and the definitions, on the main ring. */
static void fixture_begin(struct fixture *f, uint32_t rings, const uint32_t *slots)
{
    memset(f, 0, sizeof *f);
    f->rings = rings;
    for (uint32_t i = 0; i < rings; i++)
        f->slots[i] = slots ? slots[i] : 1024;
    uint8_t buf[JP_REC_MAX_SIZE];
    struct jp_rec_run_start rs = run_start();
    add(f, 0, &rs, sizeof rs);
    struct jp_rec_source_def sd = {.source_id = 1, .origin = JP_ORIGIN_PROJECT};
    add(f, 0, buf, tl_rec_source(buf, &sd, "src/m.jett", 10));
    for (uint32_t i = 1; i <= 2; i++) {
        struct jp_rec_frame_def fd = {.frame_id = i, .source_id = 1, .decl_start = 10 * i,
                                      .decl_end = 10 * i + 5, .decl_line = i, .decl_col = 1};
        add(f, 0, buf, tl_rec_frame(buf, &fd, "m", 1, i == 1 ? "f" : "g", 1));
    }
    struct jp_rec_node_def n1 = {.h = {JP_REC_NODE_DEF, sizeof n1}, .node_id = 1, .frame_id = 1};
    struct jp_rec_node_def n2 = {.h = {JP_REC_NODE_DEF, sizeof n2}, .node_id = 2, .parent = 1,
                                 .frame_id = 2};
    add(f, 0, &n1, sizeof n1);
    add(f, 0, &n2, sizeof n2);
}

/* RUN_STOP on the main ring, counting every record of every ring before it. */
static void fixture_end(struct fixture *f)
{
    struct jp_rec_run_stop st = {.h = {JP_REC_RUN_STOP, sizeof st}, .termination = JP_TERM_RETURNED,
                                 .wall_ns = 1000000000u, .process_cpu_ns = JP_NS_UNAVAILABLE,
                                 .record_count = f->n};
    add(f, 0, &st, sizeof st);
}

static void fixture_free(struct fixture *f)
{
    free(f->r);
}

static pid_t private_daemon(struct jpt_client *c)
{
    pid_t pid = jpt_private(c, NULL);
    cr_assert_gt(pid, 0);
    return pid;
}

static void hello(struct jpt_client *c, uint64_t *ring_bytes)
{
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 1, 0);
    struct jp_ctl_msg m = {.type = JP_CTL_HELLO};
    m.u.hello.version = JP_CTL_VERSION;
    m.u.hello.pid = (uint32_t)getpid();
    m.u.hello.mode = JP_MODE_MEMORY;
    m.u.hello.threshold_bp = 500;
    m.u.hello.limit = 10;
    m.u.hello.outputs = JP_OUT_HUMAN | JP_OUT_TOON;
    m.u.hello.capabilities = 0xffu;
    cr_assert_eq(jp_ctl_send(c->fd, &m, NULL, 0), 0);
    struct jp_ctl_msg a;
    cr_assert_eq(jpt_client_recv(c, &a, 10000), 1);
    cr_assert_eq(a.type, JP_CTL_WELCOME);
    if (ring_bytes)
        *ring_bytes = a.u.welcome.ring_bytes;
}

static void send_ring(struct jpt_client *c, uint32_t type, struct jp_ring *ring, uint32_t slots,
                      int cap_fd)
{
    cr_assert_eq(jp_ring_create(slots, ring), 0);
    struct jp_ctl_msg m = {.type = type};
    int fds[2] = {ring->fd, cap_fd};
    unsigned nfds = 1;
    if (type == JP_CTL_RING) {
        m.u.ring.slot_count = slots;
        m.u.ring.has_capture = cap_fd >= 0;
        nfds += cap_fd >= 0;
    } else {
        m.u.worker_ring.slot_count = slots;
    }
    cr_assert_eq(jp_ctl_send(c->fd, &m, fds, nfds), 0);
}

static void finalize(struct jpt_client *c, struct jpt_result *out)
{
    struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE};
    m.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(c->fd, &m, NULL, 0), 0);
    memset(out, 0, sizeof *out);
    cr_assert_eq(jpt_finish(c, out, 20000), 0);
}

/* The fixture as the program would stream it over its rings: every record is published in
 * program order on its ring (a runtime publishes an allocation before the event that moves the
 * object to another worker), the stop last. The daemon drains while they are written, in its
 * own order; where a free's ring comes before its allocation's in that order it must hold the
 * free back. */
static void run_rings(const struct fixture *f, int cap_fd, struct jpt_result *out)
{
    struct jpt_client c;
    pid_t pid = private_daemon(&c);
    hello(&c, NULL);
    static struct jp_ring rings[MAX_RINGS + 1];
    send_ring(&c, JP_CTL_RING, &rings[0], 1024, cap_fd);
    for (uint32_t i = 1; i <= f->rings; i++)
        send_ring(&c, JP_CTL_WORKER_RING, &rings[i], f->slots[i - 1], -1);
    for (uint32_t i = 0; i < f->n; i++)
        cr_assert_eq(jpt_push(&rings[f->r[i].ring], f->r[i].bytes, f->r[i].len), 0);
    finalize(&c, out);
    cr_assert_eq(out->error_code, 0, "daemon error: %s", out->error);
    jpt_client_close(&c);
    for (uint32_t i = 0; i <= f->rings; i++)
        jp_ring_unmap(&rings[i]);
    int st = tl_wait(pid, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The reference: every record on the main ring, in program order, each event under its own
 * worker's identity (the EXEC of its ring, written again where the order moves to another
 * worker's event), the stop counting what was written. */
static void run_one_ring(const struct fixture *f, struct jpt_result *out)
{
    struct jpt_client c;
    pid_t pid = private_daemon(&c);
    hello(&c, NULL);
    struct jp_ring ring;
    send_ring(&c, JP_CTL_RING, &ring, 1024, -1);
    struct jp_rec_exec exec[MAX_RINGS + 1], cur;
    for (uint32_t i = 0; i <= MAX_RINGS; i++)
        exec[i] = (struct jp_rec_exec){.h = {JP_REC_EXEC, sizeof cur}, JP_ID_UNAVAILABLE,
                                       JP_ID_UNAVAILABLE, JP_ID_UNAVAILABLE};
    cur = exec[0];
    uint64_t written = 0;
    for (uint32_t i = 0; i + 1 < f->n; i++) {
        const struct rec *r = &f->r[i];
        struct jp_rec_hdr h;
        memcpy(&h, r->bytes, sizeof h);
        if (h.type == JP_REC_EXEC) {
            memcpy(&exec[r->ring], r->bytes, sizeof cur);
            continue;
        }
        if (r->ring && memcmp(&exec[r->ring], &cur, sizeof cur)) {
            cur = exec[r->ring];
            cr_assert_eq(jpt_push(&ring, &cur, sizeof cur), 0);
            written++;
        }
        cr_assert_eq(jpt_push(&ring, r->bytes, r->len), 0);
        written++;
    }
    struct jp_rec_run_stop stop;
    memcpy(&stop, f->r[f->n - 1].bytes, sizeof stop);
    stop.record_count = written;
    cr_assert_eq(jpt_push(&ring, &stop, sizeof stop), 0);
    finalize(&c, out);
    cr_assert_eq(out->error_code, 0, "daemon error: %s", out->error);
    jpt_client_close(&c);
    jp_ring_unmap(&ring);
    int st = tl_wait(pid, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The TOON profile without its peak lines. The peak is of the order the daemon merged the
 * rings in, one of the orders the program allows (a free on worker 3 may come before worker 4's
 * allocations), and the daemon drains while the fixture is written: everything else is the
 * same whatever that order was. */
static char *unpeaked(const char *toon)
{
    char *t = strdup(toon), *o = t;
    cr_assert_not_null(t);
    for (const char *p = toon; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(n < 255 ? n : 255), p);
        if (!strstr(line, "peak")) {
            memmove(o, p, n);
            o += n;
        }
        p += n;
    }
    *o = '\0';
    return t;
}

static void expect_same_as_one_ring(const struct fixture *f, struct jpt_result *got)
{
    struct jpt_result want;
    run_one_ring(f, &want);
    char *g = unpeaked(got->toon), *w = unpeaked(want.toon);
    cr_assert_str_eq(g, w, "merged rings differ from one ring:\n%s\none ring:\n%s", g, w);
    free(g);
    free(w);
    jpt_result_free(&want);
}

/* Actor 7 allocates 200 blocks in m.g on worker 2, migrates to worker 1 in the middle of the
 * chain (same nodes), grows half of them there and frees them all: the daemon reads worker 1's
 * ring before worker 2's. */
static void migration_fixture(struct fixture *f)
{
    fixture_begin(f, 2, NULL);
    add_exec(f, 2, 2, 7);
    for (uint64_t id = 1; id <= 200; id++)
        add_mem(f, 2, JP_REC_ALLOC, 2, id, 16 + id % 5, 0);
    add_exec(f, 1, 1, 7);
    for (uint64_t id = 1; id <= 200; id += 2)
        add_mem(f, 1, JP_REC_RESIZE, 2, id, 16 + id % 5, 64);
    for (uint64_t id = 1; id <= 200; id++)
        add_mem(f, 1, JP_REC_FREE, 1, id, id % 2 ? 64 : 16 + id % 5, 0);
    fixture_end(f);
}

Test(rings, a_migration_mid_chain_frees_on_another_ring_after_the_allocations)
{
    struct fixture f;
    migration_fixture(&f);
    struct jpt_result got;
    run_rings(&f, -1, &got);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    allocation_count: 200\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    resize_count: 100\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    retained_bytes: 0\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    protocol_violations: 0\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    runtime_threads: 2\n"), "%s", got.toon);
    expect_same_as_one_ring(&f, &got);
    jpt_result_free(&got);
    fixture_free(&f);
}

/* Four workers of mixed ring sizes, each allocating a block of ids; each block is resized on
 * the next worker's ring and freed on the one after (for worker 4's block: workers 1 and 2,
 * read before it), a third of it kept to the end. */
static void four_fixture(struct fixture *f)
{
    static const uint32_t slots[4] = {64, 1024, 4096, 65536};
    fixture_begin(f, 4, slots);
    for (uint32_t w = 1; w <= 4; w++) {
        add_exec(f, w, w, 10 + w);
        for (uint64_t k = 0; k < 300; k++)
            add_mem(f, w, JP_REC_ALLOC, w % 2 ? 1 : 2, w * 1000 + k, 8 * w, 0);
    }
    for (uint32_t w = 1; w <= 4; w++) {
        uint32_t r = w % 4 + 1;
        add_exec(f, r, r, 20 + r);
        for (uint64_t k = 0; k < 300; k += 3)
            add_mem(f, r, JP_REC_RESIZE, 2, w * 1000 + k, 8 * w, 8 * w + 24);
    }
    for (uint32_t w = 1; w <= 4; w++) {
        uint32_t r = (w + 1) % 4 + 1;
        add_exec(f, r, r, 30 + r);
        for (uint64_t k = 0; k < 300; k++)
            if (k % 3 != 1)
                add_mem(f, r, JP_REC_FREE, 0, w * 1000 + k, k % 3 ? 8 * w : 8 * w + 24, 0);
    }
    fixture_end(f);
}

Test(rings, four_workers_of_mixed_ring_sizes_equal_one_ring)
{
    struct fixture f;
    four_fixture(&f);
    struct jpt_result got;
    run_rings(&f, -1, &got);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    allocation_count: 1200\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    protocol_violations: 0\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    runtime_threads: 4\n"), "%s", got.toon);
    expect_same_as_one_ring(&f, &got);
    jpt_result_free(&got);
    fixture_free(&f);
}

/* f run over its rings with a capture, whose replay must give the live profile's bytes in both
 * formats; the live result in *got. */
static void run_rings_captured(const struct fixture *f, struct jpt_result *got)
{
    char *dir = jpt_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/rings.jpcap", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    run_rings(f, fd, got);
    close(fd);
    for (int i = 0; i < 2; i++) {
        char *out = NULL, *err = NULL;
        size_t len = 0;
        char *argv[] = {(char *)jpt_daemon_bin(), "replay", path, "--format",
                        i ? "toon" : "human", NULL};
        int st = jpt_capture_cmd(argv, &out, &len, &err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay failed: %s", err);
        const char *want = i ? got->toon : got->human;
        cr_assert_eq(len, strlen(want));
        cr_assert_eq(memcmp(out, want, len), 0, "replay differs:\n%s\nlive:\n%s", out, want);
        free(out);
        free(err);
    }
    unlink(path);
    rmdir(dir);
    free(dir);
}

Test(rings, a_capture_of_several_rings_replays_byte_identical)
{
    struct fixture f;
    four_fixture(&f);
    struct jpt_result got;
    run_rings_captured(&f, &got);
    jpt_result_free(&got);
    fixture_free(&f);
}

/* Every allocation freed on the previous worker's ring (worker 1: worker 4's), 300 rounds of 8
 * per worker: the merge reads worker w's ring before worker w + 1's, so each pass takes about
 * one round per ring and three rings are held (each at a new free) on every pass for hundreds
 * of passes; none of those frees may be taken as a violation. */
Test(rings, a_long_chain_of_frees_across_rings_is_exact)
{
    struct fixture f;
    fixture_begin(&f, 4, NULL);
    for (uint32_t w = 1; w <= 4; w++)
        add_exec(&f, w, w, w);
    for (uint64_t c = 0; c < 300; c++)
        for (uint32_t w = 1; w <= 4; w++)
            for (uint64_t k = 0; k < 8; k++) {
                uint64_t id = w * 100000u + c * 8u + k;
                add_mem(&f, w, JP_REC_ALLOC, 1, id, 24, 0);
                add_mem(&f, (w + 2) % 4 + 1, JP_REC_FREE, 1, id, 24, 0);
            }
    fixture_end(&f);
    struct jpt_result got;
    run_rings(&f, -1, &got);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    allocation_count: 9600\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    retained_bytes: 0\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    protocol_violations: 0\n"), "%s", got.toon);
    expect_same_as_one_ring(&f, &got);
    jpt_result_free(&got);
    fixture_free(&f);
}

/* Worker 2 frees an id nobody allocated, then goes on; worker 1 keeps allocating. The bad free
 * holds only worker 2's ring, and only until the merge's bound: the run ends with it counted
 * as the one violation and every other event accounted. */
Test(rings, a_ring_that_names_an_id_that_never_comes_holds_only_itself)
{
    struct fixture f;
    fixture_begin(&f, 2, NULL);
    add_exec(&f, 1, 1, 1);
    add_exec(&f, 2, 2, 2);
    add_mem(&f, 2, JP_REC_FREE, 0, 999999, 16, 0);
    for (uint64_t id = 1; id <= 100; id++)
        add_mem(&f, 1, JP_REC_ALLOC, 2, id, 16, 0);
    for (uint64_t id = 101; id <= 150; id++)
        add_mem(&f, 2, JP_REC_ALLOC, 1, id, 32, 0);
    fixture_end(&f);
    struct jpt_result got;
    run_rings(&f, -1, &got);
    cr_assert(strstr(got.toon, "\n    allocation_count: 150\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    allocated_bytes: 3200\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    protocol_violations: 1\n"), "%s", got.toon);
    jpt_result_free(&got);
    fixture_free(&f);
}

/* The ERROR the daemon ends c's run with: its code and reason. */
static void expect_error(struct jpt_client *c, uint32_t code, const char *reason)
{
    struct jp_ctl_msg m;
    int r;
    while ((r = jpt_client_recv(c, &m, 20000)) == 1 && m.type != JP_CTL_ERROR) {
    }
    cr_assert_eq(r, 1, "no error came");
    cr_assert_eq(m.u.error.code, code);
    cr_assert(m.u.error.message_len == strlen(reason) &&
                  !memcmp(m.u.error.message, reason, m.u.error.message_len),
              "reason: %.*s", (int)m.u.error.message_len, m.u.error.message);
}

/* What a client may not do fails its own run, with the reason. */
static void expect_refused(void (*send_bad)(struct jpt_client *c), uint32_t code,
                           const char *reason)
{
    struct jpt_client c;
    pid_t pid = private_daemon(&c);
    hello(&c, NULL);
    struct jp_ring main_ring;
    send_ring(&c, JP_CTL_RING, &main_ring, 1024, -1);
    struct jp_rec_run_start rs = run_start();
    cr_assert_eq(jpt_push(&main_ring, &rs, sizeof rs), 0);
    send_bad(&c);
    expect_error(&c, code, reason);
    jpt_client_close(&c);
    jp_ring_unmap(&main_ring);
    int st = tl_wait(pid, 10000);
    cr_assert(st >= 0 && WIFEXITED(st));
}

static void too_many_rings(struct jpt_client *c)
{
    for (uint32_t i = 0; i <= JP_CTL_MAX_WORKER_RINGS; i++) {
        struct jp_ring r;
        send_ring(c, JP_CTL_WORKER_RING, &r, 64, -1);
        jp_ring_unmap(&r);
    }
}

Test(rings, more_worker_rings_than_allowed_fail_the_run)
{
    expect_refused(too_many_rings, JP_CTLE_BAD_RING,
                   "the run handed over more than 64 worker rings");
}

static void definition_on_a_worker_ring(struct jpt_client *c)
{
    static struct jp_ring r; /* stays mapped until the daemon has read it */
    send_ring(c, JP_CTL_WORKER_RING, &r, 64, -1);
    struct jp_rec_node_def n = {.h = {JP_REC_NODE_DEF, sizeof n}, .node_id = 1, .frame_id = 1};
    cr_assert_eq(jpt_push(&r, &n, sizeof n), 0);
}

Test(rings, a_definition_on_a_worker_ring_fails_the_run)
{
    expect_refused(definition_on_a_worker_ring, JP_CTLE_PROTOCOL_VIOLATION,
                   "a worker ring carries a record only the main ring may carry");
}

static void worker_ring_without_fd(struct jpt_client *c)
{
    struct jp_ctl_msg m = {.type = JP_CTL_WORKER_RING};
    m.u.worker_ring.slot_count = 64;
    cr_assert_eq(jp_ctl_send(c->fd, &m, NULL, 0), 0);
}

Test(rings, a_worker_ring_message_without_its_fd_fails_the_run)
{
    expect_refused(worker_ring_without_fd, JP_CTLE_BAD_RING,
                   "the worker_ring message lacks its file descriptor");
}

/* A serving daemon's byte cap: WELCOME states it; a client past it fails its own run while
 * another client's run on the same daemon completes. */
/* A serving daemon whose --max-run-ring-bytes is cap, and a client of it that said HELLO and
 * saw WELCOME state the cap. */
static void serve_capped(struct jpt_served *sv, uint64_t cap, int *errfd, struct jpt_client *c)
{
    char capstr[32];
    snprintf(capstr, sizeof capstr, "%llu", (unsigned long long)cap);
    const char *extra[] = {"--max-run-ring-bytes", capstr, NULL};
    cr_assert_eq(jpt_serve_tmp(sv, extra, errfd), 0);
    cr_assert_eq(jpt_client_connect(c, sv->sock), 0);
    uint64_t stated = 0;
    hello(c, &stated);
    cr_assert_eq(stated, cap, "WELCOME states the cap");
}

static void serve_capped_end(struct jpt_served *sv, int errfd)
{
    tl_stop(sv->pid, 30000);
    close(errfd);
    jpt_served_clean(sv);
}

Test(rings, the_run_ring_byte_cap_is_stated_and_enforced_per_run)
{
    struct jpt_served sv;
    int errfd;
    struct jpt_client bad, good;
    serve_capped(&sv, 2u * (JP_RING_HEADER_SIZE + 1024u * JP_SLOT_SIZE), &errfd, &bad);
    struct jp_ring r0, r1, r2;
    send_ring(&bad, JP_CTL_RING, &r0, 1024, -1);
    send_ring(&bad, JP_CTL_WORKER_RING, &r1, 1024, -1); /* exactly at the cap */

    struct fixture f;
    migration_fixture(&f);
    f.rings = 0; /* the good run: everything on its main ring */
    for (uint32_t i = 0; i < f.n; i++)
        f.r[i].ring = 0;
    cr_assert_eq(jpt_client_connect(&good, sv.sock), 0);
    hello(&good, NULL);
    struct jp_ring g0;
    send_ring(&good, JP_CTL_RING, &g0, 1024, -1);

    send_ring(&bad, JP_CTL_WORKER_RING, &r2, 64, -1); /* past it */
    expect_error(&bad, JP_CTLE_BAD_RING,
                 "the run's rings exceed this daemon's cap (--max-run-ring-bytes)");

    for (uint32_t i = 0; i < f.n; i++)
        cr_assert_eq(jpt_push(&g0, f.r[i].bytes, f.r[i].len), 0);
    struct jpt_result got;
    finalize(&good, &got);
    cr_assert_eq(got.error_code, 0, "%s", got.error);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE);
    cr_assert(strstr(got.toon, "\n    allocation_count: 200\n"), "%s", got.toon);
    jpt_result_free(&got);
    jpt_client_close(&bad);
    jpt_client_close(&good);
    jp_ring_unmap(&r0);
    jp_ring_unmap(&r1);
    jp_ring_unmap(&r2);
    jp_ring_unmap(&g0);
    fixture_free(&f);
    serve_capped_end(&sv, errfd);
}

/* The order protocol/ring.h gives a runtime thread that registers while the run goes on: it
 * announces its worker ring (WORKER_RING, never answered), allocates on it at once, and the
 * block is freed on another ring afterwards. The daemon may see the free before it has read
 * the announcement from the socket; it must read the socket before it calls the free a
 * violation. 31 threads, each one block. */
Test(rings, a_ring_announced_then_used_at_once_is_read_before_a_free_elsewhere_is_judged)
{
    struct jpt_client c;
    pid_t pid = private_daemon(&c);
    hello(&c, NULL);
    static struct jp_ring rings[32];
    send_ring(&c, JP_CTL_RING, &rings[0], 1024, -1);
    struct fixture f;
    fixture_begin(&f, 0, NULL);
    for (uint32_t i = 0; i < f.n; i++)
        cr_assert_eq(jpt_push(&rings[0], f.r[i].bytes, f.r[i].len), 0);
    uint64_t written = f.n;
    for (uint32_t k = 1; k <= 31; k++) {
        send_ring(&c, JP_CTL_WORKER_RING, &rings[k], 64, -1);
        struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, 32}, .node = 2, .allocation_id = k,
                                 .size = 16 * k};
        struct jp_rec_free fr = {.h = {JP_REC_FREE, 32}, .node = 1, .allocation_id = k,
                                 .old_size = 16 * k};
        cr_assert_eq(jpt_push(&rings[k], &a, sizeof a), 0);
        cr_assert_eq(jpt_push(&rings[0], &fr, sizeof fr), 0);
        written += 2;
    }
    struct jp_rec_run_stop st = {.h = {JP_REC_RUN_STOP, sizeof st}, .termination = JP_TERM_RETURNED,
                                 .wall_ns = 1000000000u, .process_cpu_ns = JP_NS_UNAVAILABLE,
                                 .record_count = written};
    cr_assert_eq(jpt_push(&rings[0], &st, sizeof st), 0);
    struct jpt_result got;
    finalize(&c, &got);
    cr_assert_eq(got.error_code, 0, "daemon error: %s", got.error);
    cr_assert(strstr(got.toon, "\n    protocol_violations: 0\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    allocation_count: 31\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    retained_bytes: 0\n"), "%s", got.toon);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s", got.toon);
    jpt_result_free(&got);
    jpt_client_close(&c);
    for (uint32_t k = 0; k < 32; k++)
        jp_ring_unmap(&rings[k]);
    fixture_free(&f);
    int w = tl_wait(pid, 10000);
    cr_assert(w >= 0 && WIFEXITED(w) && WEXITSTATUS(w) == 0);
}

/* The first worker ring, announced while the daemon drains: a runtime sends WORKER_RING, its
 * thread allocates, and the object is freed on the main thread. The daemon is stopped in a
 * drain of several slices of the main ring (a burst the program wrote while it was stopped
 * before) and the three happen then; when it goes on, its drain meets the free before its loop
 * reads the socket again. The free names a block of a ring the daemon does not know yet: no
 * violation, the socket holds the ring that has the allocation. (Were the daemon stopped
 * between two slices instead, it would read the socket first: the test then shows nothing,
 * and never fails wrongly.) */
Test(rings, the_first_worker_ring_is_read_before_a_free_on_the_main_ring_is_judged)
{
    struct jpt_client c;
    pid_t pid = private_daemon(&c);
    hello(&c, NULL);
    static struct jp_ring rings[2];
    /* Allocations kept live (the engine's slowest common record) to within one slice of a
     * drain: milliseconds. */
    const uint32_t slots = 1u << 18, burst = slots - 1024u;
    send_ring(&c, JP_CTL_RING, &rings[0], slots, -1);
    struct fixture f;
    fixture_begin(&f, 0, NULL);
    for (uint32_t i = 0; i < f.n; i++)
        cr_assert_eq(jpt_push(&rings[0], f.r[i].bytes, f.r[i].len), 0);
    usleep(50 * 1000);
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    for (uint32_t i = 0; i < burst; i++) {
        struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, 32}, .node = 2, .allocation_id = 100 + i,
                                 .size = 16};
        cr_assert_eq(jpt_push(&rings[0], &a, sizeof a), 0);
    }
    usleep(50 * 1000); /* its drain timer (16 ms at the most) is due when it goes on */
    cr_assert_eq(kill(pid, SIGCONT), 0);
    usleep(1000); /* within the drain of the burst */
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    send_ring(&c, JP_CTL_WORKER_RING, &rings[1], 64, -1);
    struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, 32}, .node = 2, .allocation_id = 1, .size = 16};
    struct jp_rec_free fr = {.h = {JP_REC_FREE, 32}, .node = 1, .allocation_id = 1,
                             .old_size = 16};
    cr_assert_eq(jpt_push(&rings[1], &a, sizeof a), 0);
    cr_assert_eq(jpt_push(&rings[0], &fr, sizeof fr), 0);
    cr_assert_eq(kill(pid, SIGCONT), 0);
    struct jp_rec_run_stop st = {.h = {JP_REC_RUN_STOP, sizeof st}, .termination = JP_TERM_RETURNED,
                                 .wall_ns = 1000000000u, .process_cpu_ns = JP_NS_UNAVAILABLE,
                                 .record_count = f.n + burst + 2u};
    cr_assert_eq(jpt_push(&rings[0], &st, sizeof st), 0);
    struct jpt_result got;
    finalize(&c, &got);
    cr_assert_eq(got.error_code, 0, "daemon error: %s", got.error);
    cr_assert(strstr(got.toon, "\n    protocol_violations: 0\n"), "%s", got.toon);
    char retained[64]; /* the burst's, and the worker's block freed */
    snprintf(retained, sizeof retained, "\n    retained_bytes: %u\n", 16u * burst);
    cr_assert(strstr(got.toon, retained), "%s", got.toon);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s", got.toon);
    jpt_result_free(&got);
    jpt_client_close(&c);
    for (uint32_t k = 0; k < 2; k++)
        jp_ring_unmap(&rings[k]);
    fixture_free(&f);
    int w = tl_wait(pid, 10000);
    cr_assert(w >= 0 && WIFEXITED(w) && WEXITSTATUS(w) == 0);
}

/* A block allocated on worker 1, grown and shrunk back to its first size on worker 2, then
 * freed on worker 1 again: worker 1's free matches the block's size before worker 2's resizes
 * as well as after them, so the sizes alone cannot order it. The runtime passes each event's
 * resize sequence (a stream of format 2): the merge puts both resizes before the free. 50
 * blocks, the rings written in program order. */
static void add_seq(struct fixture *f, uint32_t ring, uint16_t type, uint32_t node, uint64_t id,
                    uint64_t seq, uint64_t a, uint64_t b)
{
    if (type == JP_REC_RESIZE && seq) {
        struct jp_rec_resize_seq r = {.h = {JP_REC_RESIZE_SEQ, sizeof r}, .node = node,
                                      .allocation_id = id, .old_size = a, .new_size = b,
                                      .seq = seq};
        add(f, ring, &r, sizeof r);
        return;
    }
    add_mem(f, ring, type, node, id, a, type == JP_REC_FREE ? seq : b);
}

/* fixture_begin for a stream of format 2 over two worker rings, each with its identity. */
static void fixture_begin_seq(struct fixture *f)
{
    fixture_begin(f, 2, NULL);
    struct jp_rec_run_start rs;
    memcpy(&rs, f->r[0].bytes, sizeof rs); /* the bytes of a record are not aligned */
    rs.format_version = JP_FORMAT_VERSION_SEQ;
    memcpy(f->r[0].bytes, &rs, sizeof rs);
    add_exec(f, 1, 1, 1);
    add_exec(f, 2, 2, 2);
}

Test(rings, a_resize_back_to_an_earlier_size_on_another_ring_stays_before_the_free)
{
    struct fixture f;
    fixture_begin_seq(&f);
    for (uint64_t id = 1; id <= 50; id++) {
        add_seq(&f, 1, JP_REC_ALLOC, 2, id, 0, 16, 0);
        add_seq(&f, 2, JP_REC_RESIZE, 1, id, 0, 16, 48);
        add_seq(&f, 2, JP_REC_RESIZE, 1, id, 1, 48, 16);
        add_seq(&f, 1, JP_REC_FREE, 1, id, 2, 16, 0);
    }
    fixture_end(&f);
    struct jpt_result got;
    run_rings_captured(&f, &got); /* and its capture replays to the same bytes */
    cr_assert(strstr(got.toon, "\n    protocol_violations: 0\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    resize_count: 100\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    retained_bytes: 0\n"), "%s", got.toon);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s", got.toon);
    expect_same_as_one_ring(&f, &got);
    jpt_result_free(&got);
    fixture_free(&f);
}

/* The same stream with a wrong sequence is a violation, not a hang: a free that names one
 * resize too many is held until the merge's bound, then counted; a RESIZE_SEQ in a stream of
 * format 1 names nothing that stream has. */
Test(rings, a_resize_sequence_that_never_comes_is_one_violation)
{
    struct fixture f;
    fixture_begin_seq(&f);
    add_seq(&f, 1, JP_REC_ALLOC, 2, 1, 0, 16, 0);
    add_seq(&f, 2, JP_REC_RESIZE, 1, 1, 0, 16, 48);
    add_seq(&f, 1, JP_REC_FREE, 1, 1, 2, 48, 0); /* one resize, not two, came before */
    fixture_end(&f);
    struct jpt_result got;
    run_rings(&f, -1, &got);
    cr_assert(strstr(got.toon, "\n    protocol_violations: 1\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    retained_bytes: 48\n"), "%s", got.toon);
    jpt_result_free(&got);
    fixture_free(&f);

    fixture_begin(&f, 1, NULL);
    add_seq(&f, 1, JP_REC_ALLOC, 2, 1, 0, 16, 0);
    add_seq(&f, 1, JP_REC_RESIZE, 1, 1, 3, 16, 48);
    fixture_end(&f);
    run_rings(&f, -1, &got);
    cr_assert(strstr(got.toon, "\n    protocol_violations: 1\n"), "%s", got.toon);
    cr_assert(strstr(got.toon, "\n    retained_bytes: 16\n"), "%s", got.toon);
    jpt_result_free(&got);
    fixture_free(&f);
}

/* The main ring counts toward --max-run-ring-bytes like any worker ring: a main ring alone past
 * the cap WELCOME states is refused as bad_ring, with the reason. */
Test(rings, a_main_ring_past_the_run_ring_byte_cap_is_refused)
{
    struct jpt_served sv;
    int errfd;
    struct jpt_client bad;
    serve_capped(&sv, JP_RING_HEADER_SIZE + 4096u * JP_SLOT_SIZE, &errfd, &bad);
    struct jp_ring r0;
    send_ring(&bad, JP_CTL_RING, &r0, 8192, -1); /* twice the cap */
    expect_error(&bad, JP_CTLE_BAD_RING,
                 "the run's rings exceed this daemon's cap (--max-run-ring-bytes)");
    jpt_client_close(&bad);
    jp_ring_unmap(&r0);
    serve_capped_end(&sv, errfd);
}
