/* Test support for the daemon suites (see support.h). */
#include "support.h"
#include "tests/lib/recbuild.h" /* tests/lib */

#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSRC 3u
#define NFRAME 8u
#define NNODE 24u

enum { PH_START, PH_SRC, PH_FRAME, PH_NODE, PH_EXEC, PH_EVENTS, PH_COUNTERS, PH_STOP, PH_END };

static uint64_t rnd(struct jpt_stream *s)
{
    /* xorshift64*: deterministic per seed, good enough to spread events over sites */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 2685821657736338717ull;
}

void jpt_stream_init(struct jpt_stream *s, uint32_t mode, uint32_t seed, uint64_t events)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->seed = seed;
    s->events = events;
    s->with_stop = 1;
    s->threshold_bp = 500;
    s->limit = 10;
    s->cpu_budget = 33554432u;
    s->retention_budget = 67108864u;
    s->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed * 0x100000001b3ull) ^ mode;
    if (!s->rng)
        s->rng = 1;
}

static uint32_t nframes(const struct jpt_stream *s)
{
    return s->wide ? JPT_WIDE_CHAIN + s->wide : NFRAME;
}

/* A node skewed toward low ids so profiles have a clear order of bottlenecks; in a wide
 * stream, a leaf. */
static uint32_t pick_node(struct jpt_stream *s)
{
    if (s->wide)
        return JPT_WIDE_CHAIN + 1u + (uint32_t)(rnd(s) % s->wide);
    uint64_t a = rnd(s);
    uint32_t span = (uint32_t)(a % NNODE) + 1u;
    return 1u + (uint32_t)((a >> 32) % span);
}

uint32_t jpt_stream_stop(const struct jpt_stream *s, uint8_t *buf)
{
    struct jp_rec_run_stop r;
    memset(&r, 0, sizeof r);
    r.h.type = JP_REC_RUN_STOP;
    r.h.size = sizeof r;
    r.termination = JP_TERM_RETURNED;
    r.wall_ns = s->events * 1000u + 1u;
    r.process_cpu_ns = JP_NS_UNAVAILABLE;
    r.record_count = s->emitted;
    memcpy(buf, &r, sizeof r);
    return sizeof r;
}

uint32_t jpt_stream_next(struct jpt_stream *s, uint8_t *buf)
{
    for (;;) {
        switch (s->phase) {
        case PH_START: {
            struct jp_rec_run_start r = tl_rec_run_start(s->mode);
            r.threshold_bp = s->threshold_bp;
            r.limit = s->limit;
            r.capabilities = 0xffu;
            r.pid = 4242;
            r.cpu_budget_bytes = s->cpu_budget;
            r.retention_budget_bytes = s->retention_budget;
            memcpy(buf, &r, sizeof r);
            s->phase = PH_SRC;
            s->i = 0;
            s->emitted++;
            return sizeof r;
        }
        case PH_SRC: {
            if (s->i == NSRC) {
                s->phase = PH_FRAME;
                s->i = 0;
                continue;
            }
            char path[256];
            int n = s->i == 0 && s->program ? snprintf(path, sizeof path, "%s", s->program)
                    : s->i < 2 ? snprintf(path, sizeof path, "src/mod%u_%u.jett", s->seed % 7u, s->i)
                               : snprintf(path, sizeof path, "stdlib/core.jett");
            struct jp_rec_source_def r;
            memset(&r, 0, sizeof r);
            r.source_id = s->i + 1;
            r.origin = s->i < 2 ? JP_ORIGIN_PROJECT : JP_ORIGIN_STDLIB;
            s->i++;
            s->emitted++;
            return tl_rec_source(buf, &r, path, (size_t)n);
        }
        case PH_FRAME: {
            if (s->i == nframes(s)) {
                s->phase = PH_NODE;
                s->i = 0;
                continue;
            }
            uint32_t id = s->i + 1;
            char ns[JP_NAME_MAX + 1], fn[JP_NAME_MAX + 1];
            int nl = snprintf(ns, sizeof ns, "app.m%u", id % 3u);
            int fl = snprintf(fn, sizeof fn, "f%u_%u", id, s->seed % 5u);
            if (s->wide) { /* names of the longest length allowed, told apart by their ends */
                memset(ns, 'n', JP_NAME_MAX);
                memset(fn, 'f', JP_NAME_MAX);
                nl = fl = (int)JP_NAME_MAX;
                snprintf(fn + JP_NAME_MAX - 12, 13, "_%011u", id);
            }
            struct jp_rec_frame_def r;
            memset(&r, 0, sizeof r);
            r.frame_id = id;
            r.kind = JP_FRAME_FUNCTION;
            if (id != nframes(s)) { /* the last frame has no source: unavailable */
                r.source_id = (id % NSRC) + 1;
                r.decl_start = id * 100u;
                r.decl_end = id * 100u + 50u;
                r.decl_line = id * 10u + 1u;
                r.decl_col = 1;
            }
            s->i++;
            s->emitted++;
            return tl_rec_frame(buf, &r, ns, (size_t)nl, fn, (size_t)fl);
        }
        case PH_NODE: {
            if (s->i == (s->wide ? nframes(s) : NNODE)) {
                s->phase = PH_EXEC;
                continue;
            }
            uint32_t id = s->i + 1;
            struct jp_rec_node_def r;
            memset(&r, 0, sizeof r);
            r.h.type = JP_REC_NODE_DEF;
            r.h.size = sizeof r;
            r.node_id = id;
            if (s->wide) { /* node k is frame k: a chain, then the leaves under its end */
                r.parent = id == 1 ? JP_ID_NONE : id <= JPT_WIDE_CHAIN ? id - 1 : JPT_WIDE_CHAIN;
                r.frame_id = id;
            } else {
                r.parent = id <= 3 ? JP_ID_NONE : 1u + (uint32_t)(rnd(s) % (id - 1));
                r.frame_id = id <= 3 ? id : 1u + (uint32_t)(rnd(s) % NFRAME);
            }
            memcpy(buf, &r, sizeof r);
            s->i++;
            s->emitted++;
            return sizeof r;
        }
        case PH_EXEC: {
            struct jp_rec_exec r;
            memset(&r, 0, sizeof r);
            r.h.type = JP_REC_EXEC;
            r.h.size = sizeof r;
            r.runtime_thread_id = 1;
            r.task_id = JP_ID_UNAVAILABLE;
            r.actor_id = JP_ID_UNAVAILABLE;
            memcpy(buf, &r, sizeof r);
            s->phase = PH_EVENTS;
            s->i = 0;
            s->emitted++;
            return sizeof r;
        }
        case PH_EVENTS: {
            if (s->i == s->events) {
                s->phase = PH_COUNTERS;
                continue;
            }
            uint64_t seq = s->i++;
            s->emitted++;
            if (s->mode == JP_MODE_CPU) {
                struct jp_rec_cpu_sample r;
                memset(&r, 0, sizeof r);
                r.h.type = JP_REC_CPU_SAMPLE;
                r.h.size = sizeof r;
                uint64_t x = rnd(s);
                r.state = (x % 16) == 0 ? JP_STATE_RUNTIME : (x % 16) == 1 ? JP_STATE_WAITING
                                                                            : JP_STATE_JETT;
                if (r.state == JP_STATE_JETT) {
                    r.node = pick_node(s);
                    r.flags = JP_SAMPLE_HAS_STMT;
                    r.stmt_line = 1u + (r.node * 7u) % 40u;
                    r.stmt_col = 1u + r.node % 3u;
                }
                r.requested_tick = seq;
                memcpy(buf, &r, sizeof r);
                return sizeof r;
            }
            uint64_t x = rnd(s);
            if (s->nlive == 0 || (s->nlive < 64 && x % 3 != 0)) {
                struct jp_rec_alloc r;
                memset(&r, 0, sizeof r);
                r.h.type = JP_REC_ALLOC;
                r.h.size = sizeof r;
                r.node = pick_node(s);
                r.allocation_id = ++s->next_id;
                r.size = 16u + (x >> 20) % 4096u;
                s->live_id[s->nlive] = r.allocation_id;
                s->live_size[s->nlive] = r.size;
                s->nlive++;
                memcpy(buf, &r, sizeof r);
                return sizeof r;
            }
            uint32_t k = (uint32_t)((x >> 8) % s->nlive);
            if ((x >> 40) & 1) {
                struct jp_rec_resize r;
                memset(&r, 0, sizeof r);
                r.h.type = JP_REC_RESIZE;
                r.h.size = sizeof r;
                r.node = pick_node(s);
                r.allocation_id = s->live_id[k];
                r.old_size = s->live_size[k];
                uint64_t delta = (x >> 24) % 512u;
                r.new_size = r.old_size + delta >= 200u ? r.old_size + delta - 200u : 0u;
                s->live_size[k] = r.new_size;
                memcpy(buf, &r, sizeof r);
                return sizeof r;
            }
            struct jp_rec_free r;
            memset(&r, 0, sizeof r);
            r.h.type = JP_REC_FREE;
            r.h.size = sizeof r;
            r.node = pick_node(s);
            r.allocation_id = s->live_id[k];
            r.old_size = s->live_size[k];
            s->nlive--;
            s->live_id[k] = s->live_id[s->nlive];
            s->live_size[k] = s->live_size[s->nlive];
            memcpy(buf, &r, sizeof r);
            return sizeof r;
        }
        case PH_COUNTERS: {
            struct jp_rec_counters r;
            memset(&r, 0, sizeof r);
            r.h.type = JP_REC_COUNTERS;
            r.h.size = sizeof r;
            if (s->mode == JP_MODE_CPU) {
                r.requested_ticks = s->events + s->events / 10u;
                r.coalesced_ticks = s->events / 20u;
            }
            memcpy(buf, &r, sizeof r);
            s->phase = s->with_stop ? PH_STOP : PH_END;
            s->emitted++;
            return sizeof r;
        }
        case PH_STOP:
            s->phase = PH_END;
            return jpt_stream_stop(s, buf);
        default:
            return 0;
        }
    }
}

void jpt_excerpt_for(const struct jp_ctl_excerpt_key *k, struct jp_ctl_excerpt *x, char *text,
                     size_t cap)
{
    memset(x, 0, sizeof *x);
    x->source_id = k->source_id;
    x->line = k->line;
    x->col = k->col;
    if (k->line % 5 == 0) {
        x->flags = JP_EXCERPT_UNAVAILABLE;
        x->text = "";
        return;
    }
    int n = snprintf(text, cap, "let v%u = work(<redacted-literal>, %u)", k->line, k->col);
    x->flags = JP_EXCERPT_REDACTED;
    x->text = text;
    x->text_len = (size_t)n;
}

void jpt_result_free(struct jpt_result *r)
{
    free(r->human);
    free(r->toon);
    memset(r, 0, sizeof *r);
}

/* ---- client ---- */

int jpt_client_open_fd(struct jpt_client *c, int fd)
{
    c->fd = fd;
    return jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &c->dec);
}

int jpt_client_connect(struct jpt_client *c, const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return jpt_client_open_fd(c, fd);
}

void jpt_client_close(struct jpt_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    jp_ctl_decoder_free(c->dec);
    c->dec = NULL;
}

int jpt_client_recv(struct jpt_client *c, struct jp_ctl_msg *m, int timeout_ms)
{
    for (;;) {
        const char *why = NULL;
        int r = jp_ctl_decoder_next(c->dec, m, &why);
        if (r != 0)
            return r < 0 ? -EPROTO : 1;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        r = poll(&p, 1, timeout_ms);
        if (r == 0)
            return -ETIMEDOUT;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        uint8_t buf[65536];
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ECONNRESET)
                return 0;
            return -errno;
        }
        if (n == 0)
            return 0;
        r = jp_ctl_decoder_feed(c->dec, buf, (size_t)n);
        if (r < 0)
            return r;
    }
}

static void copy_error(struct jpt_result *out, const struct jp_ctl_msg *m)
{
    out->error_code = m->u.error.code;
    size_t n = m->u.error.message_len < sizeof out->error - 1 ? m->u.error.message_len
                                                               : sizeof out->error - 1;
    memcpy(out->error, m->u.error.message, n);
    out->error[n] = '\0';
}

static char *dup_n(const char *p, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}

int jpt_client_hello(struct jpt_client *c, const struct jpt_stream *s, uint32_t outputs,
                     uint64_t *run_id, struct jpt_result *err)
{
    struct jp_ctl_msg m = {.type = JP_CTL_HELLO};
    m.u.hello.version = JP_CTL_VERSION;
    m.u.hello.pid = (uint32_t)getpid();
    m.u.hello.mode = s->mode;
    m.u.hello.rate_hz = s->mode == JP_MODE_CPU ? 1000u : 0u;
    m.u.hello.threshold_bp = s->threshold_bp;
    m.u.hello.limit = s->limit;
    m.u.hello.outputs = outputs;
    m.u.hello.capabilities = 0xffu;
    /* A refusing daemon may answer and close before the hello is written: read anyway. */
    int sent = jp_ctl_send(c->fd, &m, NULL, 0);
    struct jp_ctl_msg a;
    int r = jpt_client_recv(c, &a, 10000);
    if (r <= 0 && sent < 0)
        return sent;
    if (r <= 0)
        return r == 0 ? -EPIPE : r;
    if (a.type == JP_CTL_ERROR) {
        if (err)
            copy_error(err, &a);
        return -EACCES;
    }
    if (a.type != JP_CTL_WELCOME)
        return -EPROTO;
    *run_id = a.u.welcome.run_id;
    return 0;
}

int jpt_push(struct jp_ring *r, const void *rec, uint32_t len)
{
    uint64_t tail = r->p_tail_cache;
    for (int spins = 0;; spins++) {
        void *p = jp_ring_reserve(r, len);
        if (p) {
            memcpy(p, rec, len);
            jp_ring_commit(r);
            return 0;
        }
        if (r->p_tail_cache != tail) { /* the daemon is draining: keep waiting */
            tail = r->p_tail_cache;
            spins = 0;
        }
        if (spins > 200000) /* ~10 s of 50 us naps without the daemon moving */
            return -ETIMEDOUT;
        if (spins > 64) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

int jpt_start_run(struct jpt_client *c, struct jpt_stream *s, uint32_t slots, int capture_fd,
                  uint64_t count, struct jp_ring *ring, uint64_t *run_id)
{
    struct jpt_result err;
    memset(&err, 0, sizeof err);
    int r = jpt_client_hello(c, s, JP_OUT_HUMAN | JP_OUT_TOON, run_id, &err);
    if (r < 0) {
        /* the suite's assertion shows only the code: say which step failed and why */
        fprintf(stderr, "jpt_start_run: hello failed: %s%s%s\n", strerror(-r),
                err.error[0] ? "; the daemon said: " : "", err.error);
        return r;
    }
    r = jp_ring_create(slots, ring);
    if (r < 0)
        return r;
    struct jp_ctl_msg m = {.type = JP_CTL_RING};
    m.u.ring.slot_count = slots;
    m.u.ring.has_capture = capture_fd >= 0;
    int fds[2] = {ring->fd, capture_fd};
    r = jp_ctl_send(c->fd, &m, fds, capture_fd >= 0 ? 2u : 1u);
    if (r < 0) {
        fprintf(stderr, "jpt_start_run: sending RING failed: %s\n", strerror(-r));
        return r;
    }
    uint8_t buf[JP_REC_MAX_SIZE];
    for (uint64_t i = 0; i < count; i++) {
        uint32_t len = jpt_stream_next(s, buf);
        if (len == 0)
            break;
        r = jpt_push(ring, buf, len);
        if (r < 0) {
            fprintf(stderr, "jpt_start_run: record %llu not pushed: %s\n",
                    (unsigned long long)i, strerror(-r));
            return r;
        }
    }
    return 0;
}

/* Answers an EXCERPT_REQUEST m the way the test's runtime does. 0 or -errno. */
static int answer_excerpts(struct jpt_client *c, const struct jp_ctl_msg *m)
{
    uint32_t n = m->u.excerpt_request.count;
    struct jp_ctl_excerpt *xs = calloc(n ? n : 1, sizeof *xs);
    char (*texts)[200] = calloc(n ? n : 1, sizeof *texts);
    if (!xs || !texts) {
        free(xs);
        free(texts);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        jpt_excerpt_for(&m->u.excerpt_request.keys[i], &xs[i], texts[i], sizeof texts[i]);
    struct jp_ctl_msg a = {.type = JP_CTL_EXCERPTS};
    a.u.excerpts.items = xs;
    a.u.excerpts.count = n;
    int r = jp_ctl_send(c->fd, &a, NULL, 0);
    free(xs);
    free(texts);
    return r;
}

int jpt_answer_excerpts(struct jpt_client *c, int timeout_ms)
{
    struct jp_ctl_msg m;
    int r = jpt_client_recv(c, &m, timeout_ms);
    if (r <= 0)
        return r == 0 ? -EPIPE : r;
    return m.type == JP_CTL_EXCERPT_REQUEST ? answer_excerpts(c, &m) : -EPROTO;
}

int jpt_finish(struct jpt_client *c, struct jpt_result *out, int timeout_ms)
{
    memset(out->export_bytes, 0, sizeof out->export_bytes);
    memset(out->export_pieces, 0, sizeof out->export_pieces);
    memset(out->export_error, 0, sizeof out->export_error);
    for (;;) {
        struct jp_ctl_msg m;
        int r = jpt_client_recv(c, &m, timeout_ms);
        if (r <= 0)
            return r == 0 ? -EPIPE : r;
        if (m.type == JP_CTL_EXCERPT_REQUEST) {
            r = answer_excerpts(c, &m);
            if (r < 0)
                return r;
            continue;
        }
        if (m.type == JP_CTL_RESULT) {
            out->status = m.u.result.status;
            size_t n = m.u.result.reason_len < sizeof out->reason - 1 ? m.u.result.reason_len
                                                                       : sizeof out->reason - 1;
            memcpy(out->reason, m.u.result.reason, n);
            out->reason[n] = '\0';
            out->human = dup_n(m.u.result.human, m.u.result.human_len);
            out->human_len = m.u.result.human_len;
            out->toon = dup_n(m.u.result.toon, m.u.result.toon_len);
            out->toon_len = m.u.result.toon_len;
            out->capture_errno = m.u.result.capture_errno;
            return 0;
        }
        if (m.type == JP_CTL_ERROR) {
            copy_error(out, &m);
            return 0;
        }
        if (m.type == JP_CTL_EXPORT && m.u.export_piece.format < JP_EXPORT_FORMAT_COUNT) {
            uint32_t f = m.u.export_piece.format;
            if (m.u.export_piece.offset != out->export_bytes[f])
                return -EPROTO; /* pieces come in order */
            out->export_bytes[f] += m.u.export_piece.data_len;
            out->export_pieces[f]++;
            out->export_error[f] = m.u.export_piece.error;
            continue;
        }
        return -EPROTO;
    }
}

int jpt_run(struct jpt_client *c, struct jpt_stream *s, uint32_t slots, int capture_fd,
            struct jpt_result *out)
{
    memset(out, 0, sizeof *out);
    struct jp_ring ring;
    memset(&ring, 0, sizeof ring);
    int r = jpt_start_run(c, s, slots, capture_fd, UINT64_MAX, &ring, &out->run_id);
    if (r < 0) {
        jp_ring_unmap(&ring);
        return r;
    }
    jp_ring_close(&ring);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    r = jp_ctl_send(c->fd, &f, NULL, 0);
    if (r == 0)
        r = jpt_finish(c, out, 60000);
    jp_ring_unmap(&ring);
    return r;
}

int jpt_expected(struct jpt_stream *s, struct jpt_result *out)
{
    memset(out, 0, sizeof *out);
    struct jp_engine *e;
    int r = jp_engine_new(&e);
    if (r < 0)
        return r;
    uint8_t buf[JP_REC_MAX_SIZE], stop[JP_REC_MAX_SIZE];
    uint32_t stop_len = 0;
    const char *why = NULL;
    struct jp_report *rep = NULL;
    for (;;) {
        uint32_t len = jpt_stream_next(s, buf);
        if (len == 0)
            break;
        struct jp_rec_hdr h;
        memcpy(&h, buf, sizeof h);
        if (h.type == JP_REC_RUN_STOP) {
            memcpy(stop, buf, len);
            stop_len = len;
            continue;
        }
        r = jp_engine_feed(e, buf, len, &why);
        if (r < 0)
            goto out;
    }
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_STOP, .outputs = JP_OUT_HUMAN | JP_OUT_TOON,
                               .run_id = s->run_id};
    /* As the daemon does it: one report, built before the excerpts, written after the stop. */
    struct jp_ctl_excerpt_key *keys = NULL;
    uint32_t n = 0;
    struct jp_engine_view v;
    if ((r = jp_engine_view(e, &v)) < 0 || (r = jp_report_build(&v, &o, &rep)) < 0 ||
        (r = jp_report_excerpt_keys(rep, &keys, &n)) < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        struct jp_ctl_excerpt x;
        char text[200];
        jpt_excerpt_for(&keys[i], &x, text, sizeof text);
        struct jp_rec_excerpt rec;
        memset(&rec, 0, sizeof rec);
        rec.source_id = x.source_id;
        rec.line = x.line;
        rec.col = x.col;
        rec.flags = (uint8_t)x.flags;
        r = jp_engine_feed(e, buf, tl_rec_excerpt(buf, &rec, x.text, x.text_len), &why);
        if (r < 0) {
            free(keys);
            goto out;
        }
    }
    free(keys);
    if (stop_len) {
        r = jp_engine_feed(e, stop, stop_len, &why);
        if (r < 0)
            goto out;
    }
    struct jp_rendered rd;
    memset(&rd, 0, sizeof rd);
    if ((r = jp_engine_view(e, &v)) == 0) {
        jp_report_rebind(rep, &v, stop_len ? JP_END_STOP : JP_END_PRODUCER_LOST);
        r = jp_report_write(rep, &o, &rd);
    }
    if (r == 0) {
        out->status = rd.status;
        snprintf(out->reason, sizeof out->reason, "%s", rd.reason);
        out->human = rd.human;
        out->human_len = rd.human_len;
        out->toon = rd.toon;
        out->toon_len = rd.toon_len;
        rd.human = rd.toon = NULL;
        jp_rendered_free(&rd);
    }
out:
    if (r < 0 && why)
        fprintf(stderr, "expected: engine refused the stream: %s\n", why);
    jp_report_free(rep);
    jp_engine_free(e);
    return r;
}

/* ---- processes ---- */

void jpt_become(uid_t uid, gid_t gid)
{
    gid_t only[1] = {gid};
    if (setgroups(1, only) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
        _exit(99);
    tl_rearm(); /* a credential change clears the parent-death signal */
}

const char *jpt_daemon_bin(void)
{
    const char *p = getenv("JETTPROFD_BIN");
    return p ? p : "jettprofd";
}

pid_t jpt_spawn(char *const argv[], int keep_fd, int *err_fd)
{
    int ep[2] = {-1, -1};
    if (err_fd && pipe2(ep, O_CLOEXEC) < 0)
        return -errno;
    struct tl_spawn_opts o = TL_SPAWN_OPTS_INIT;
    o.keep_fd = keep_fd;
    o.err_fd = ep[1];
    pid_t pid = tl_spawn(argv[0], argv, &o);
    if (err_fd) {
        close(ep[1]);
        if (pid < 0)
            close(ep[0]);
        else
            *err_fd = ep[0];
    }
    return pid;
}

pid_t jpt_private(struct jpt_client *c, int *err_fd)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    char num[16];
    snprintf(num, sizeof num, "%d", sv[1]);
    char *argv[] = {(char *)jpt_daemon_bin(), "--session-fd", num, NULL};
    pid_t pid = jpt_spawn(argv, sv[1], err_fd);
    close(sv[1]);
    int r = pid < 0 ? (int)pid : jpt_client_open_fd(c, sv[0]);
    if (r < 0) {
        close(sv[0]);
        if (pid > 0) {
            kill(pid, SIGKILL);
            tl_wait(pid, 10000);
        }
        return r;
    }
    return pid;
}

pid_t jpt_serve(const char *sock, const char *const extra[], int *err_fd)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)jpt_daemon_bin();
    argv[n++] = (char *)"serve";
    argv[n++] = (char *)"--socket";
    argv[n++] = (char *)sock;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    pid_t pid = jpt_spawn(argv, -1, err_fd);
    if (pid < 0)
        return pid;
    for (int i = 0; i < 500; i++) {
        struct jpt_client c;
        if (jpt_client_connect(&c, sock) == 0) {
            jpt_client_close(&c);
            return pid;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return -ECHILD;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    tl_wait(pid, -1);
    return -ETIMEDOUT;
}

char *jpt_slurp_fd(int fd)
{
    size_t cap = 4096, len = 0;
    char *p = malloc(cap);
    for (;;) {
        if (len + 1 >= cap)
            p = realloc(p, cap *= 2);
        ssize_t n = read(fd, p + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    p[len] = '\0';
    return p;
}

char *jpt_slurp_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *p = jpt_slurp_fd(fd);
    close(fd);
    if (len)
        *len = strlen(p);
    return p;
}

int jpt_capture_cmd(char *const argv[], char **out, size_t *out_len, char **err)
{
    int op[2], ep[2];
    if (pipe2(op, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
        return -errno;
    struct tl_spawn_opts o = TL_SPAWN_OPTS_INIT;
    o.out_fd = op[1];
    o.err_fd = ep[1];
    pid_t pid = tl_spawn(argv[0], argv, &o);
    close(op[1]);
    close(ep[1]);
    if (pid < 0) {
        close(op[0]);
        close(ep[0]);
        return pid;
    }
    size_t cap[2] = {4096, 4096}, len[2] = {0, 0};
    char *buf[2] = {malloc(cap[0]), malloc(cap[1])};
    struct pollfd p[2] = {{.fd = op[0], .events = POLLIN}, {.fd = ep[0], .events = POLLIN}};
    int open_n = 2;
    while (open_n > 0) {
        if (poll(p, 2, 30000) <= 0)
            break;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (len[i] + 1 >= cap[i])
                buf[i] = realloc(buf[i], cap[i] *= 2);
            ssize_t n = read(p[i].fd, buf[i] + len[i], cap[i] - len[i] - 1);
            if (n <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                open_n--;
            } else {
                len[i] += (size_t)n;
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        if (p[i].fd >= 0)
            close(p[i].fd);
        buf[i][len[i]] = '\0';
    }
    int st = tl_wait(pid, 30000);
    if (out) {
        *out = buf[0];
        if (out_len)
            *out_len = len[0];
    } else {
        free(buf[0]);
    }
    if (err)
        *err = buf[1];
    else
        free(buf[1]);
    return st;
}

char *jpt_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/jpd-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

int jpt_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    return jpt_count_entries(path);
}

int jpt_count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

long jpt_rss_kib(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
            break;
    fclose(f);
    return v;
}

int jpt_count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0)
        if (strstr(line, needle))
            n++;
    free(line);
    fclose(f);
    return n;
}
