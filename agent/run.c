/* A run's life: configuration and capability checks, start (connect, handshake, ring,
 * RUN_START, timer), finish (COUNTERS, RUN_STOP, FINALIZE, excerpts, RESULT), and the local
 * collector-failure profile when the daemon is gone. Plus the stable messages.
 *
 * The program must never be harmed by its profiler: after start succeeded, nothing here fails
 * the program. A daemon that dies, hangs or misbehaves turns the run's profile into the
 * `collector_failure` one, rendered here from what the agent itself sent.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "render/failure.h"

uint64_t jp_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- messages ---- */

static _Thread_local const char *tls_reason = "";

void jp_set_reason(const char *why)
{
    tls_reason = why ? why : "";
}

const char *jettprof_last_reason(void)
{
    return tls_reason;
}

/* X(errno, stable message). The setup codes name the stage that failed; the text is what the
 * runtime prints as its profiler failure, so it never changes. */
#define JP_AGENT_ERRORS(X)                                                                        \
    X(ENOTSUP, "profiler: backend unsupported")                                                   \
    X(EINVAL, "profiler: invalid argument")                                                       \
    X(ENOEXEC, "profiler: setup failure: cannot start jettprofd")                                 \
    X(ECONNREFUSED, "profiler: setup failure: cannot connect to jettprofd")                       \
    X(EPROTO, "profiler: setup failure: jettprofd handshake failed")                              \
    X(ETIMEDOUT, "profiler: setup failure: jettprofd did not answer")                             \
    X(ECONNABORTED, "profiler: setup failure: jettprofd refused the run")                         \
    X(ENOMEM, "profiler: out of memory")                                                          \
    X(ENOBUFS, "profiler: ring full, event dropped")                                              \
    X(ENOSPC, "profiler: agent table full")                                                       \
    X(EEXIST, "profiler: runtime thread already registered")                                      \
    X(EPIPE, "profiler: collector failure")

const char *jettprof_strerror(int err)
{
    switch (-err) {
    case 0:
        return "profiler: no error";
#define JP_X(code, text)                                                                          \
    case code:                                                                                    \
        return text;
        JP_AGENT_ERRORS(JP_X)
#undef JP_X
    default:
        return "profiler: setup failure";
    }
}

/* ---- configuration ---- */

static int tail_zero(const void *p, size_t from, size_t to)
{
    const unsigned char *b = p;
    for (size_t i = from; i < to; i++)
        if (b[i])
            return 0;
    return 1;
}

static int bad(const char *why)
{
    jp_set_reason(why);
    return -EINVAL;
}

/* The stall bound from $JETT_PROFILE_STALL_MS: milliseconds as plain decimal digits in
 * 1..JP_STALL_MAX_MS. 0 with *ms (unchanged when the variable is unset or empty), or -EINVAL. */
static int stall_from_env(uint32_t *ms)
{
    const char *v = getenv("JETT_PROFILE_STALL_MS");
    if (!v || !*v)
        return 0;
    uint64_t n = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9' || n > JP_STALL_MAX_MS)
            return bad("JETT_PROFILE_STALL_MS is not an integer 1..600000 (milliseconds)");
        n = n * 10u + (uint64_t)(*p - '0');
    }
    if (n < 1 || n > JP_STALL_MAX_MS)
        return bad("JETT_PROFILE_STALL_MS is not an integer 1..600000 (milliseconds)");
    *ms = (uint32_t)n;
    return 0;
}

/* Capabilities first (an unsupported mode is a backend verdict, whatever else is wrong), then
 * every field. The struct is size-versioned: a caller's struct may end after any version's last
 * field (the fields it lacks read as 0, their defaults) or carry a longer zero tail. */
static int config_check(const struct jettprof_config *cfg, struct jettprof_config *out)
{
    if (!cfg)
        return bad("no configuration");
    if (cfg->size != JETTPROF_CONFIG_SIZE_V1 && cfg->size != JETTPROF_CONFIG_SIZE_V2 &&
        cfg->size < sizeof *cfg)
        return bad("configuration size is none of this library's versions");
    if (cfg->size > sizeof *cfg && !tail_zero(cfg, sizeof *cfg, cfg->size))
        return bad("configuration uses fields this library does not know");
    struct jettprof_config c;
    memset(&c, 0, sizeof c);
    memcpy(&c, cfg, cfg->size < sizeof c ? cfg->size : sizeof c);
    c.size = sizeof c;
    if (c.mode != JETTPROF_MODE_CPU && c.mode != JETTPROF_MODE_MEMORY)
        return bad("mode is neither cpu nor memory");
    uint32_t need = c.mode == JETTPROF_MODE_CPU ? JP_CAPS_CPU_REQUIRED : JP_CAPS_MEMORY_REQUIRED;
    if ((c.capabilities & need) != need) {
        jp_set_reason(c.mode == JETTPROF_MODE_CPU
                          ? "cpu profiling needs cpu_tick_source and safe_stack_capture"
                          : "memory profiling needs jett_heap_allocation_hooks and "
                            "free_and_resize_events");
        return -ENOTSUP;
    }
    if (c.capabilities & ~JP_CAPS_KNOWN)
        return bad("capabilities has bits this library does not know");
    if (c.mode == JETTPROF_MODE_CPU && (c.rate_hz < JP_RATE_HZ_MIN || c.rate_hz > JP_RATE_HZ_MAX))
        return bad("rate_hz is outside " JP_RATE_HZ_RANGE);
    if (c.mode == JETTPROF_MODE_MEMORY && c.rate_hz != 0)
        return bad("rate_hz is set in memory mode");
    if (c.threshold_bp > JP_THRESHOLD_BP_MAX)
        return bad("threshold_bp is above " JP_STR(JP_THRESHOLD_BP_MAX));
    if (c.limit < JP_LIMIT_MIN || c.limit > JP_LIMIT_MAX)
        return bad("limit is outside " JP_LIMIT_RANGE);
    if (c.outputs & ~(JETTPROF_OUT_HUMAN | JETTPROF_OUT_TOON | JETTPROF_OUT_VERBOSE))
        return bad("outputs has bits this library does not know");
    if (c.exports >> JETTPROF_EXPORT_COUNT)
        return bad("exports has bits this library does not know");
    if (!jp_backend_name(c.backend))
        return bad("backend is neither the interpreter nor the vm");
    if (c.capture_fd < -1)
        return bad("capture_fd is neither -1 nor a descriptor");
    if (c.capture_fd >= 0) {
        int fl = fcntl(c.capture_fd, F_GETFL);
        if (fl < 0)
            return bad("capture_fd is not an open descriptor");
        if ((fl & O_ACCMODE) == O_RDONLY)
            return bad("capture_fd is not open for writing");
    }
    if (c.ring_slots) {
        if (c.ring_slots & (c.ring_slots - 1u))
            return bad("ring_slots is not a power of two");
        if (c.ring_slots < JP_RING_MIN_SLOTS || c.ring_slots > JP_RING_MAX_SLOTS)
            return bad("ring_slots is outside the ring's limits");
    }
    if (!c.cpu_budget_bytes)
        c.cpu_budget_bytes = JP_DEFAULT_CPU_BUDGET;
    if (!c.retention_budget_bytes)
        c.retention_budget_bytes = JP_DEFAULT_RETENTION_BUDGET;
    if (c.stall_ms > JP_STALL_MAX_MS)
        return bad("stall_ms is above 600000");
    if (!c.stall_ms) {
        c.stall_ms = JP_STALL_DEFAULT_MS;
        int r = stall_from_env(&c.stall_ms);
        if (r < 0)
            return r;
    }
    *out = c;
    return 0;
}

static uint64_t run_serial;

/* Runs alive in this process, for the fork handler. A child of fork() inherits the ring mapping,
 * which is shared with the daemon through the parent: were the child to go on producing, it
 * would corrupt the parent's stream. So in the child each run is marked collector-failed, its
 * daemon forgotten (not the child's to reap or talk to) and its ring replaced, at the same
 * address, by private zero pages, which read as a full ring: the child's pushes drop at once,
 * and the hot paths need no check of their own. (Child processes are outside what a run
 * profiles.) */
static pthread_mutex_t runs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct jettprof_run *runs_head;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
    pthread_mutex_lock(&runs_mu);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&runs_mu);
}

static void atfork_child(void)
{
    for (struct jettprof_run *run = runs_head; run; run = run->next_run) {
        jp_store_relaxed32(&run->failed, 1u);
        jp_store_relaxed32(&run->daemon_gone, 1u);
        run->timer_running = 0; /* threads do not survive fork */
        run->daemon_pid = 0;
        if (run->main.ring.sh)
            mmap(run->main.ring.sh, run->main.ring.map_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        jp_streams_forget(run);
    }
    pthread_mutex_unlock(&runs_mu);
}

static void atfork_init(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void runs_add(struct jettprof_run *run)
{
    pthread_once(&atfork_once, atfork_init);
    pthread_mutex_lock(&runs_mu);
    run->next_run = runs_head;
    runs_head = run;
    pthread_mutex_unlock(&runs_mu);
}

static void runs_remove(struct jettprof_run *run)
{
    pthread_mutex_lock(&runs_mu);
    for (struct jettprof_run **p = &runs_head; *p; p = &(*p)->next_run) {
        if (*p == run) {
            *p = run->next_run;
            break;
        }
    }
    pthread_mutex_unlock(&runs_mu);
}

static int run_new(const struct jettprof_config *cfg, jettprof_run **out)
{
    struct jettprof_config c;
    int r = config_check(cfg, &c);
    if (r < 0)
        return r;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof(struct jettprof_run)) != 0)
        return -ENOMEM;
    struct jettprof_run *run = mem;
    memset(run, 0, sizeof *run);
    run->cfg = c;
    run->mode = c.mode;
    run->caps = c.capabilities;
    run->serial = __atomic_add_fetch(&run_serial, 1u, __ATOMIC_RELAXED);
    run->sock = -1;
    run->main.ring.fd = -1;
    if (pthread_mutex_init(&run->reg_mu, NULL) != 0) {
        free(run);
        return -ENOMEM;
    }
    run->stall_ns = (uint64_t)c.stall_ms * 1000000u;
    jp_stream_init_main(run);
    run->slot_count = c.ring_slots ? c.ring_slots
                      : c.mode == JETTPROF_MODE_CPU ? JP_DEFAULT_SLOTS_CPU
                                                    : JP_DEFAULT_SLOTS_MEMORY;
    r = jp_intern_init(run);
    if (r < 0) {
        free(run);
        return r;
    }
    *out = run;
    return 0;
}

static void run_free(struct jettprof_run *run)
{
    runs_remove(run);
    jp_timer_stop(run);
    jp_daemon_close(run);
    if (run->main.ring.sh)
        jp_ring_unmap(&run->main.ring);
    jp_streams_free(run);
    jp_intern_free(run);
    pthread_mutex_destroy(&run->reg_mu);
    free(run);
}

static int push_run_start(struct jettprof_run *run)
{
    run->start_ns = jp_mono_ns();
    run->rs = (struct jp_rec_run_start){
        .h = {JP_REC_RUN_START, sizeof run->rs},
        .format_version = run->caps & JETTPROF_CAP_RESIZE_SEQUENCE ? JP_FORMAT_VERSION_SEQ
                                                                   : JP_FORMAT_VERSION,
        .mode = (uint8_t)run->mode,
        .backend = (uint8_t)run->cfg.backend,
        .rate_hz = run->mode == JETTPROF_MODE_CPU ? run->cfg.rate_hz : 0,
        .threshold_bp = run->cfg.threshold_bp,
        .limit = run->cfg.limit,
        .capabilities = run->caps,
        .pid = (uint32_t)getpid(),
        .cpu_budget_bytes = run->cfg.cpu_budget_bytes,
        .retention_budget_bytes = run->cfg.retention_budget_bytes,
        .start_mono_ns = run->start_ns,
    };
    /* The ring is fresh and at least JP_RING_MIN_SLOTS long: this cannot find it full. */
    void *p = jp_ring_reserve(&run->main.ring, sizeof run->rs);
    if (!p)
        return -ENOBUFS;
    memcpy(p, &run->rs, sizeof run->rs);
    jp_push_commit(run, 1);
    return 0;
}

static int start(const struct jettprof_config *cfg, int connect, int with_timer,
                 jettprof_run **out)
{
    if (!out)
        return bad("no place for the run handle");
    *out = NULL;
    jettprof_run *run;
    int r = run_new(cfg, &run);
    if (r < 0)
        return r;
    if (connect) {
        r = jp_daemon_connect(run);
        if (r == 0)
            r = jp_daemon_handshake(run);
    }
    if (r == 0) {
        r = jp_ring_create(run->slot_count, &run->main.ring);
        if (r < 0)
            jp_set_reason("cannot create the record ring");
        else
            (void)jp_ring_populate(&run->main.ring); /* by demand: 64 KiB now */
    }
    if (r == 0 && connect)
        r = jp_daemon_send_ring(run);
    if (r == 0)
        r = push_run_start(run);
    if (r == 0)
        runs_add(run);
    if (r == 0 && with_timer && run->mode == JETTPROF_MODE_CPU) {
        r = jp_timer_start(run);
        if (r < 0)
            jp_set_reason("cannot start the tick timer thread");
    }
    if (r < 0) {
        run_free(run); /* closes the socket and reaps a private daemon */
        return r;
    }
    *out = run;
    return 0;
}

int jettprof_start(const struct jettprof_config *cfg, jettprof_run **out)
{
    return start(cfg, 1, 1, out);
}

int jp_agent_start_local(const struct jettprof_config *cfg, int with_timer, jettprof_run **out)
{
    return start(cfg, 0, with_timer, out);
}

int jp_agent_ring_fd(jettprof_run *run)
{
    return run->main.ring.fd;
}

/* ---- finish ---- */

/* Builds the COUNTERS record from what the timer and producers counted. In-section; while the
 * timer runs its counters are a relaxed snapshot (they only grow). */
/* Sums every stream's gauges (G in produce.c: relaxed, a snapshot while producers run, exact
 * once they stopped). In a main section. */
void jp_counters_fill(struct jettprof_run *run, struct jp_rec_counters *c)
{
    uint64_t dropped = jp_load_relaxed64(&run->main.dropped_ticks);
    uint64_t lost = jp_load_relaxed64(&run->main.lost_records);
    uint64_t wait = jp_load_relaxed64(&run->main.producer_wait_ns);
    for (uint32_t i = 0; i < JP_AGENT_MAX_THREADS; i++) {
        const struct jp_stream *st = &run->threads[i].own;
        dropped += jp_load_relaxed64(&st->dropped_ticks);
        lost += jp_load_relaxed64(&st->lost_records);
        wait += jp_load_relaxed64(&st->producer_wait_ns);
    }
    *c = (struct jp_rec_counters){
        .h = {JP_REC_COUNTERS, sizeof *c},
        .requested_ticks = jp_load_relaxed64(&run->requested_ticks) - run->withdrawn_ticks,
        .coalesced_ticks = jp_load_relaxed64(&run->coalesced_ticks),
        .dropped_ticks = dropped,
        .waiting_ticks = jp_load_relaxed64(&run->waiting_ticks),
        .runtime_ticks = jp_load_relaxed64(&run->runtime_ticks),
        .lost_records = lost,
        .producer_wait_ns = wait,
    };
}

void jp_agent_counters(jettprof_run *run, struct jp_rec_counters *out)
{
    enum jp_sect s = jp_sect_enter(run, NULL);
    jp_counters_fill(run, out);
    jp_sect_leave(run, s);
}

/* Stops the producers' side: timer joined, pending ticks counted as dropped, COUNTERS and
 * RUN_STOP pushed, ring closed. Keeps the COUNTERS record for a local render. */
static void end_stream(struct jettprof_run *run, uint32_t termination,
                       struct jp_rec_counters *c)
{
    jp_timer_stop(run);
    jp_answer_own_tick(run); /* finishing is a safe point for a still-registered caller */
    enum jp_sect s = jp_sect_enter(run, NULL);
    uint32_t n = jp_load_acquire32(&run->nslots);
    for (uint32_t i = 0; i < n; i++) {
        struct jettprof_thread *t = &run->threads[i];
        if (!jp_load_acquire32(&t->pending))
            continue;
        jp_store_release32(&t->pending, 0);
        /* Another thread still registered never reached a safe point: a dropped tick. An
         * unregistered slot holds one raised just as its thread left: withdrawn. */
        if (jp_load_acquire32(&t->active))
            jp_store_relaxed64(&run->main.dropped_ticks, run->main.dropped_ticks + 1u);
        else
            run->withdrawn_ticks++;
    }
    jp_counters_fill(run, c);
    void *p = jp_push_reserve(run, sizeof *c, JP_WAIT_META);
    if (p) {
        memcpy(p, c, sizeof *c);
        jp_push_commit(run, 1);
    }
    struct jp_rec_run_stop st = {
        .h = {JP_REC_RUN_STOP, sizeof st},
        .termination = (uint8_t)termination,
        .wall_ns = jp_mono_ns() - run->start_ns,
        .process_cpu_ns = JP_NS_UNAVAILABLE,
        .record_count = jp_record_total(run), /* every record of every stream before this
                                                * one, PAD excluded */
    };
    if (run->caps & JETTPROF_CAP_PROCESS_CPU_TIME) {
        struct timespec ts;
        if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
            st.process_cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    p = jp_push_reserve(run, sizeof st, JP_WAIT_META);
    if (p) {
        memcpy(p, &st, sizeof st);
        jp_push_commit(run, 1);
    }
    jp_ring_close(&run->main.ring);
    jp_sect_leave(run, s);
}

void jp_agent_local_end(jettprof_run *run, uint32_t termination)
{
    struct jp_rec_counters c;
    end_stream(run, termination, &c);
    run_free(run);
}

/* Only what a safe excerpt can be: UTF-8, no raw control characters (the runtime escapes
 * them), within the cap. */
static int excerpt_ok(const char *s, int len)
{
    if (len < 0 || len > (int)JP_EXCERPT_MAX || jp_utf8_check(s, (size_t)len) < 0)
        return 0;
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

static int answer_excerpts(struct jettprof_run *run, const struct jp_ctl_msg *req)
{
    uint32_t n = req->u.excerpt_request.count;
    const struct jp_ctl_excerpt_key *keys = req->u.excerpt_request.keys;
    struct jp_ctl_excerpt *items = n ? calloc(n, sizeof *items) : NULL;
    char *texts = n ? malloc((size_t)n * JP_EXCERPT_MAX) : NULL;
    if (n && (!items || !texts)) {
        free(items);
        free(texts);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        char *buf = texts + (size_t)i * JP_EXCERPT_MAX;
        int redacted = 0, len = -1;
        if (run->cfg.excerpt)
            len = run->cfg.excerpt(run->cfg.excerpt_user, keys[i].source_id, keys[i].line,
                                   keys[i].col, buf, JP_EXCERPT_MAX, &redacted);
        items[i] = (struct jp_ctl_excerpt){keys[i].source_id, keys[i].line, keys[i].col, 0,
                                           buf, 0};
        if (excerpt_ok(buf, len)) {
            items[i].text_len = (size_t)len;
            items[i].flags = redacted ? JP_EXCERPT_REDACTED : 0;
        } else {
            items[i].flags = JP_EXCERPT_UNAVAILABLE; /* never a raw or oversized line */
        }
    }
    struct jp_ctl_msg m = {.type = JP_CTL_EXCERPTS};
    m.u.excerpts.items = items;
    m.u.excerpts.count = n;
    int r = jp_send(run, &m, NULL, 0);
    free(items);
    free(texts);
    return r;
}

static char *dup_text(const char *s, size_t len)
{
    char *d = malloc(len + 1u);
    if (d) {
        if (len)
            memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

static void copy_reason(char dst[40], const char *s, size_t len)
{
    if (len > 39)
        len = 39;
    memcpy(dst, s, len);
    dst[len] = '\0';
}

/* Whether the caller's result struct (its size) covers export f: the exports array grew with
 * the formats, and a caller compiled before a format passes the smaller size. */
#define RESULT_HAS_EXPORT(r, f)                                                                   \
    ((r)->size >= offsetof(struct jettprof_result, exports) + ((f) + 1u) * sizeof((r)->exports[0]))

_Static_assert(JETTPROF_EXPORT_FOLDED == JP_EXPORT_FOLDED &&
               JETTPROF_EXPORT_PPROF == JP_EXPORT_PPROF &&
               JETTPROF_EXPORT_SPEEDSCOPE == JP_EXPORT_SPEEDSCOPE &&
               JETTPROF_EXPORT_SVG == JP_EXPORT_SVG && JETTPROF_EXPORT_HTML == JP_EXPORT_HTML &&
               JETTPROF_EXPORT_COUNT == JP_EXPORT_FORMAT_COUNT,
               "the public export formats are the wire's");

/* One EXPORT piece into out->exports: the pieces of an export come in order, each at the end
 * of what came before, within the size the first one announced (at most JP_CTL_MAX_EXPORT),
 * only for a format this run asked for. 0, -EPROTO (out of place), -ENOMEM. */
static int take_export(struct jettprof_run *run, const struct jp_ctl_msg *m,
                       struct jettprof_result *out, size_t *have)
{
    uint32_t f = m->u.export_piece.format;
    uint64_t total = m->u.export_piece.total, off = m->u.export_piece.offset;
    size_t n = m->u.export_piece.data_len;
    if (f >= JETTPROF_EXPORT_COUNT || !(run->cfg.exports & (1u << f)) ||
        !RESULT_HAS_EXPORT(out, f))
        return -EPROTO;
    struct jettprof_export *x = &out->exports[f];
    if (m->u.export_piece.error) {
        if (x->data || total || n)
            return -EPROTO;
        x->error = (int)m->u.export_piece.error;
        return 0;
    }
    if (!x->data) {
        if (off || total > JP_CTL_MAX_EXPORT || x->error)
            return -EPROTO;
        x->data = malloc((size_t)total + 1u);
        if (!x->data)
            return -ENOMEM;
        x->len = (size_t)total;
        have[f] = 0;
    }
    if (total != x->len || off != have[f] || n > x->len - have[f])
        return -EPROTO;
    if (n)
        memcpy(x->data + have[f], m->u.export_piece.data, n);
    have[f] += n;
    x->data[have[f]] = '\0';
    return 0;
}

/* How long to look for a RESULT a closing daemon already queued: it is either there or the
 * socket reads EOF at once, so this only bounds a pathological case. */
#define JP_QUEUED_RESULT_MS 200u

/* Excerpts on request, then the RESULT, within timeout_ms. 0 with *out filled, or < 0: the
 * daemon is gone or misbehaved (the caller renders the collector-failure profile). */
static int take_result(struct jettprof_run *run, uint32_t timeout_ms, struct jettprof_result *out)
{
    int r;
    uint64_t deadline = jp_mono_ns() + (uint64_t)timeout_ms * 1000000u;
    size_t have[JETTPROF_EXPORT_COUNT] = {0}; /* bytes of each export received so far */
    for (;;) {
        uint64_t now = jp_mono_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        const char *why;
        struct jp_ctl_msg a;
        r = jp_daemon_recv(run, (int)((deadline - now) / 1000000u) + 1, &a, &why);
        if (r < 0)
            return r;
        if (a.type == JP_CTL_EXCERPT_REQUEST) {
            r = answer_excerpts(run, &a);
            if (r < 0)
                return r;
            continue;
        }
        if (a.type == JP_CTL_EXPORT) {
            if ((r = take_export(run, &a, out, have)) < 0)
                return r;
            continue;
        }
        if (a.type != JP_CTL_RESULT)
            return -EPROTO; /* ERROR, or anything out of place */
        uint32_t st = a.u.result.status;
        if (st < JETTPROF_STATUS_COMPLETE || st > JETTPROF_STATUS_UNAVAILABLE)
            return -EPROTO;
        out->status = st;
        copy_reason(out->reason, a.u.result.reason, a.u.result.reason_len);
        out->collector_failed = 0;
        out->capture_errno = (int)a.u.result.capture_errno;
        for (uint32_t f = 0; run->cfg.exports && f < JETTPROF_EXPORT_COUNT; f++)
            if (RESULT_HAS_EXPORT(out, f) && out->exports[f].data &&
                have[f] != out->exports[f].len)
                return -EPROTO; /* RESULT before the last piece of an export */
        if (run->cfg.outputs & JETTPROF_OUT_HUMAN) {
            out->human = dup_text(a.u.result.human, a.u.result.human_len);
            out->human_len = out->human ? a.u.result.human_len : 0;
        }
        if (run->cfg.outputs & JETTPROF_OUT_TOON) {
            out->toon = dup_text(a.u.result.toon, a.u.result.toon_len);
            out->toon_len = out->toon ? a.u.result.toon_len : 0;
        }
        return 0;
    }
}

/* FINALIZE, then take_result. A daemon told to stop (SIGTERM on `jettprofd serve`) delivers
 * each run in flight as a partial `interrupted` profile before it closes, unasked: then the
 * RESULT is already waiting, FINALIZE may find the socket closed, and that RESULT is the
 * run's profile all the same. */
static int finalize_exchange(struct jettprof_run *run, uint32_t termination,
                             struct jettprof_result *out)
{
    struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE};
    m.u.finalize.termination = termination;
    m.u.finalize.exports = run->cfg.exports;
    int r = jp_send(run, &m, NULL, 0);
    if (r < 0)
        return take_result(run, JP_QUEUED_RESULT_MS, out) == 0 ? 0 : r;
    return take_result(run, JP_FINISH_TIMEOUT_MS, out);
}

/* The profile when collection failed after user code started: render's collector-failure
 * profile over the RUN_START and COUNTERS records this agent produced (render/failure.h;
 * tests/agent/test_local.c pins the bytes). */
static void render_failure(struct jettprof_run *run, const struct jp_rec_counters *c,
                           struct jettprof_result *out)
{
    out->status = JETTPROF_STATUS_UNAVAILABLE;
    copy_reason(out->reason, "collector_failure", strlen("collector_failure"));
    out->collector_failed = 1;
    struct jp_rendered rd;
    if (jp_render_failure(&run->rs, c, run->cfg.outputs, run->run_id, &rd) == 0) {
        out->status = rd.status;
        copy_reason(out->reason, rd.reason, strnlen(rd.reason, sizeof rd.reason));
        if (rd.human) {
            out->human = rd.human;
            out->human_len = rd.human_len;
            rd.human = NULL;
        }
        if (rd.toon) {
            out->toon = rd.toon;
            out->toon_len = rd.toon_len;
            rd.toon = NULL;
        }
        jp_rendered_free(&rd);
    }
}

/* struct jettprof_result grows at its end: the first version ends before run_id, and a caller
 * compiled against it passes that size. Only the fields its size covers are written. */
#define JP_RESULT_V1_SIZE offsetof(struct jettprof_result, run_id)
/* Whether the caller's result struct (its size) covers field f. */
#define RESULT_HAS(r, f) ((r)->size >= offsetof(struct jettprof_result, f) + sizeof((r)->f))
static size_t result_size(const struct jettprof_result *r)
{
    return r->size < sizeof *r ? r->size : sizeof *r;
}

int jettprof_finish(jettprof_run *run, uint32_t termination, struct jettprof_result *out)
{
    if (!run)
        return bad("finish needs a run");
    if (termination < JETTPROF_TERM_RETURNED || termination > JETTPROF_TERM_INTERRUPTED)
        return bad("termination is not returned, runtime_error or interrupted");
    if (!out || out->size < JP_RESULT_V1_SIZE)
        return bad("result size is smaller than this library's");
    for (uint32_t f = 0; f < JETTPROF_EXPORT_COUNT; f++)
        if ((run->cfg.exports & (1u << f)) && !RESULT_HAS_EXPORT(out, f))
            return bad("result size does not cover the exports the configuration asks for");
    uint32_t size = out->size;
    memset(out, 0, result_size(out));
    out->size = size;

    struct jp_rec_counters c;
    end_stream(run, termination, &c);
    int failed = jp_load_relaxed32(&run->failed) != 0;
    if (!jp_daemon_alive(run)) {
        /* Gone, or it spoke first: only a daemon that stopped sends a RESULT unasked, and
         * that partial profile of what it consumed is the run's, even if records we pushed
         * after it stopped were lost. */
        failed = take_result(run, JP_QUEUED_RESULT_MS, out) < 0;
        if (failed) {
            jettprof_result_release(out);
            out->size = size;
        }
    } else if (finalize_exchange(run, termination, out) < 0 || failed) {
        /* A daemon that is still there is always finalized, even when collection failed on
         * our side (a lost definition), so it never reports a vanished producer; its profile
         * of an incomplete stream is then not the run's. */
        jettprof_result_release(out);
        out->size = size;
        failed = 1;
    }
    jp_daemon_close(run);
    if (failed)
        render_failure(run, &c, out);
    if (RESULT_HAS(out, run_id))
        out->run_id = run->run_id;
    run_free(run);
    return 0;
}

void jettprof_result_release(struct jettprof_result *r)
{
    if (!r)
        return;
    free(r->human);
    free(r->toon);
    for (uint32_t f = 0; f < JETTPROF_EXPORT_COUNT && RESULT_HAS_EXPORT(r, f); f++)
        free(r->exports[f].data);
    uint32_t size = r->size;
    memset(r, 0, result_size(r));
    r->size = size;
}
