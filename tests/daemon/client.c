/* The daemon suites' client: the control socket spoken as the agent speaks it, and a
 * producer pushing a jpt_stream through a real ring (see support.h). */
#include "support.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

void jpt_result_free(struct jpt_result *r)
{
    free(r->human);
    free(r->toon);
    memset(r, 0, sizeof *r);
}

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
