/* A session's connection: reading the socket with the fds passed along, the control-frame
 * decoder and the bounds on what it may buffer, the output queue and its flushing, and the
 * limits on connections that have not said hello yet.
 *
 * The socket is watched with uv_poll_t and read with recvmsg() because libuv's IPC pipes only
 * accept sockets and pipes as passed handles, never the ring's memfd or a capture file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "session.h"

/* One non-blocking recvmsg (retried on EINTR) that also takes the fds sent with the bytes.
 * Returns the bytes read (0 at EOF) or -errno. The fds are in fds[0..*nfds); *fds_rc < 0 means
 * the peer attached more than JP_CTL_MAX_FDS and jp_ctl_take_fds closed them all. */
static ssize_t recv_some(int fd, uint8_t *buf, size_t len, int *fds, unsigned *nfds, int *fds_rc)
{
    for (;;) {
        union {
            struct cmsghdr align;
            char space[JP_CTL_CMSG_SPACE];
        } cm;
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.space,
                            .msg_controllen = sizeof cm.space};
        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        *nfds = 0;
        *fds_rc = 0;
        if (n < 0)
            return -errno;
        *fds_rc = jp_ctl_take_fds(&mh, fds, JP_CTL_MAX_FDS, nfds);
        return n;
    }
}

/* Reads and drops whatever the peer has queued right now (closing any fds it carried). */
static void discard_input(struct jpd_session *s)
{
    for (int turn = 0; turn < 64; turn++) {
        uint8_t buf[4096];
        int got[JP_CTL_MAX_FDS], fds_rc;
        unsigned k;
        ssize_t n = recv_some(s->fd, buf, sizeof buf, got, &k, &fds_rc);
        if (n <= 0)
            return;
        if (fds_rc == 0)
            for (unsigned i = 0; i < k; i++)
                close(got[i]);
    }
}

uint32_t jpd_export_chunk_bytes = JP_CTL_EXPORT_CHUNK;

/* The queue of s holds delta more bytes (or fewer), counted for the session and its uid. */
static void held(struct jpd_session *s, int64_t delta)
{
    s->out_bytes += (size_t)delta;
    jpd_uid_use(s->d, s->peer.uid, 0, 0, delta);
}

static void out_free(struct jpd_session *s, struct jpd_out *o)
{
    held(s, -(int64_t)(o->len + o->x_len));
    free(o->buf);
    free(o->x_data);
    free(o);
}

void jpd_conn_drop_output(struct jpd_session *s)
{
    while (s->out_head) {
        struct jpd_out *o = s->out_head;
        s->out_head = o->next;
        out_free(s, o);
    }
    s->out_tail = NULL;
}

/* Encodes the export's next piece into o->buf (the one before it written). 0 or -ENOMEM. */
static int next_piece(struct jpd_session *s, struct jpd_out *o)
{
    size_t n = o->x_len - o->x_off;
    if (n > jpd_export_chunk_bytes)
        n = jpd_export_chunk_bytes;
    struct jp_ctl_msg m = {.type = JP_CTL_EXPORT};
    m.u.export_piece.format = o->x_format;
    m.u.export_piece.error = o->x_error;
    m.u.export_piece.total = o->x_len;
    m.u.export_piece.offset = o->x_off;
    m.u.export_piece.data = o->x_data ? o->x_data + o->x_off : "";
    m.u.export_piece.data_len = n;
    uint8_t *buf;
    size_t len;
    int r = jp_ctl_encode(&m, &buf, &len);
    if (r < 0)
        return r;
    held(s, (int64_t)len - (int64_t)o->len);
    free(o->buf);
    o->buf = buf;
    o->len = len;
    o->off = 0;
    o->x_off += n;
    return 0;
}

void jpd_conn_flush(struct jpd_session *s)
{
    int lost = 0;
    while (s->out_head) {
        struct jpd_out *o = s->out_head;
        ssize_t n = send(s->fd, o->buf + o->off, o->len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            /* The peer is gone: whatever it has not read can never arrive. */
            lost = 1;
            jpd_conn_drop_output(s);
            break;
        }
        o->off += (size_t)n;
        if (o->off < o->len)
            continue;
        if (o->x_off < o->x_len) {
            if (next_piece(s, o) == 0)
                continue;
            /* The rest of the export cannot be sent: the peer could only read a cut stream. */
            jpd_log("run %llu: out of memory sending its export; closing the connection",
                    (unsigned long long)s->run_id);
            lost = 1;
            jpd_conn_drop_output(s);
            break;
        }
        s->out_head = o->next;
        if (!s->out_head)
            s->out_tail = NULL;
        out_free(s, o);
    }
    if (lost && !s->eof && s->state != JPD_S_DONE) {
        /* Same as reading EOF: the run still ends with its best-effort profile. */
        jpd_session_eof(s);
        return;
    }
    if (lost)
        s->eof = 1;
    if (!s->out_head && s->state == JPD_S_DONE) {
        /* Closing with the peer's bytes unread would flag its end ECONNRESET, which can hide
         * the ERROR we just sent from it: drop what is queued first (without waiting). */
        if (s->linger && !s->eof)
            discard_input(s);
        jpd_session_close(s);
        return;
    }
    jpd_conn_update_poll(s);
}

/* Appends o (already counted by held) and writes what the socket takes. */
static void enqueue(struct jpd_session *s, struct jpd_out *o)
{
    if (s->out_tail)
        s->out_tail->next = o;
    else
        s->out_head = o;
    s->out_tail = o;
    jpd_conn_flush(s); /* may close a DONE session: callers only touch it through guarded paths */
}

int jpd_conn_send(struct jpd_session *s, const struct jp_ctl_msg *m)
{
    uint8_t *buf;
    size_t len;
    int r = jp_ctl_encode(m, &buf, &len);
    if (r < 0)
        return r;
    struct jpd_out *o = calloc(1, sizeof *o);
    if (!o) {
        free(buf);
        return -ENOMEM;
    }
    o->buf = buf;
    o->len = len;
    held(s, (int64_t)len);
    enqueue(s, o);
    return 0;
}

int jpd_conn_send_export(struct jpd_session *s, uint32_t format, uint32_t error, char *data,
                         size_t len)
{
    struct jpd_out *o = calloc(1, sizeof *o);
    if (!o) {
        free(data);
        return -ENOMEM;
    }
    o->x_data = data;
    o->x_len = len;
    o->x_format = format;
    o->x_error = error;
    held(s, (int64_t)len);
    /* The first piece now (an empty or failed export is that one piece alone). */
    int r = next_piece(s, o);
    if (r < 0) {
        out_free(s, o);
        return r;
    }
    enqueue(s, o);
    return 0;
}

/* Brings the daemon's count of buffered frame bytes up to date with this session's decoder.
 * -ENOBUFS when the total is past JPD_MAX_BUFFERED: a partial frame of each of many
 * connections must not add up to an unbounded daemon. */
static int account_buffered(struct jpd_session *s)
{
    size_t now = jp_ctl_decoder_pending(s->dec);
    /* Sessions on every loop add to it: an atomic sum, relaxed (it bounds memory, it orders
     * nothing). */
    size_t total = __atomic_add_fetch(&s->d->buffered, now - s->buffered, __ATOMIC_RELAXED);
    s->buffered = now;
    return total > JPD_MAX_BUFFERED ? -ENOBUFS : 0;
}

void jpd_conn_end_input(struct jpd_session *s)
{
    __atomic_sub_fetch(&s->d->buffered, s->buffered, __ATOMIC_RELAXED);
    s->buffered = 0;
    jp_ctl_decoder_free(s->dec);
    s->dec = NULL;
}

void jpd_conn_allow_excerpts(struct jpd_session *s)
{
    (void)jp_ctl_decoder_set_max_frame(s->dec, JPD_MAX_CLIENT_FRAME);
}

int jpd_conn_take_fd(struct jpd_session *s)
{
    if (s->nfds == 0)
        return -ENOENT;
    int fd = s->fds[0];
    memmove(s->fds, s->fds + 1, (s->nfds - 1) * sizeof s->fds[0]);
    s->nfds--;
    return fd;
}

/* Hands every whole frame the decoder holds to the session. 0 to go on reading, 1 when the
 * session must not be read any further here (done, closing, gone, or moving to a worker). */
static int take_frames(struct jpd_session *s)
{
    for (;;) {
        struct jp_ctl_msg m;
        const char *why = NULL;
        int r = jp_ctl_decoder_next(s->dec, &m, &why);
        if (r == 0)
            break;
        if (r < 0) {
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, why ? why : "malformed control message");
            return 1;
        }
        jpd_session_msg(s, &m);
        if (s->state == JPD_S_DONE || s->closing || s->eof || s->moving)
            return 1;
    }
    (void)account_buffered(s); /* only shrinks here: whole frames were taken */
    return 0;
}

void jpd_conn_resume(struct jpd_session *s)
{
    if (s->dec)
        (void)take_frames(s);
}

int jpd_conn_all_read(const struct jpd_session *s)
{
    if (s->eof || s->finalize_seen)
        return 1;
    /* Frames are taken as they are read (take_frames), so what is unread is in the socket.
     * A socket whose queue cannot be asked counts as read: the merge must stay bounded. */
    int n = 0;
    return ioctl(s->fd, FIONREAD, &n) < 0 || n == 0;
}

void jpd_conn_read(struct jpd_session *s)
{
    uint8_t buf[65536];
    for (int turn = 0;
         turn < 16 && s->state != JPD_S_DONE && !s->closing && !s->eof && !s->moving; turn++) {
        int got[JP_CTL_MAX_FDS], fds_rc;
        unsigned k;
        ssize_t n = recv_some(s->fd, buf, sizeof buf, got, &k, &fds_rc);
        if (n < 0) {
            if (n == -EAGAIN || n == -EWOULDBLOCK)
                return;
            jpd_session_eof(s);
            return;
        }
        if (fds_rc < 0) {
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE, "too many file descriptors in one message");
            return;
        }
        /* fds are only ever expected next to the RING and WORKER_RING frames; a client cannot
         * park more than JPD_MAX_PENDING_FDS of them with us. */
        int unexpected = 0;
        for (unsigned i = 0; i < k; i++) {
            if (s->nfds < JPD_MAX_PENDING_FDS &&
                (s->state <= JPD_S_RING || (s->state == JPD_S_LIVE && !s->finalize_seen)))
                s->fds[s->nfds++] = got[i];
            else {
                close(got[i]);
                unexpected = 1;
            }
        }
        if (unexpected) {
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE,
                             "file descriptors sent where none are expected");
            return;
        }
        if (n == 0) {
            jpd_session_eof(s);
            return;
        }
        int r = jp_ctl_decoder_feed(s->dec, buf, (size_t)n);
        if (r < 0) {
            if (!s->d->private_mode)
                jpd_log("closing a connection of uid %u: %s", (unsigned)s->peer.uid,
                        r == -EMSGSIZE ? "control frame larger than allowed"
                                       : "out of memory buffering a control frame");
            jpd_session_fail(s, r == -ENOMEM ? JP_CTLE_INTERNAL : JP_CTLE_BAD_MESSAGE,
                             r == -EMSGSIZE ? "control frame larger than allowed"
                                            : "the daemon is out of memory");
            return;
        }
        if (account_buffered(s) < 0) {
            jpd_log("closing a connection of uid %u: the daemon holds %zu bytes of unfinished "
                    "control frames, its limit", (unsigned)s->peer.uid, (size_t)JPD_MAX_BUFFERED);
            jpd_session_fail(s, JP_CTLE_BAD_MESSAGE,
                             "the daemon holds too many unfinished control frames");
            return;
        }
        if (take_frames(s))
            return;
    }
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct jpd_session *s = h->data;
    if (s->closing || s->moving)
        return;
    if (status < 0) {
        jpd_session_eof(s);
        return;
    }
    if (events & UV_WRITABLE)
        jpd_conn_flush(s);
    if (s->closing || s->moving)
        return;
    if (events & (UV_READABLE | UV_DISCONNECT))
        jpd_conn_read(s);
}

void jpd_conn_update_poll(struct jpd_session *s)
{
    if (s->closing || s->moving)
        return;
    int ev = 0;
    if (!s->eof && s->state != JPD_S_DONE)
        ev |= UV_READABLE | UV_DISCONNECT;
    if (s->out_head)
        ev |= UV_WRITABLE;
    if (ev == s->poll_events)
        return;
    s->poll_events = ev;
    if (ev)
        uv_poll_start(&s->poll, ev, on_poll);
    else
        uv_poll_stop(&s->poll);
}

int jpd_conn_open(struct jpd_session *s)
{
    int r = jp_ctl_decoder_new(JPD_MAX_SMALL_FRAME, &s->dec);
    if (r < 0)
        return r;
    r = jpd_conn_attach(s);
    if (r < 0) {
        jp_ctl_decoder_free(s->dec);
        s->dec = NULL;
        return r;
    }
    return 0;
}

int jpd_conn_attach(struct jpd_session *s)
{
    int r = uv_poll_init(s->lp->uv, &s->poll, s->fd);
    if (r < 0)
        return r;
    s->poll.data = s;
    return 0;
}

void jpd_conn_free(struct jpd_session *s)
{
    close(s->fd);
    while (s->nfds)
        close(jpd_conn_take_fd(s));
    jpd_conn_end_input(s);
    jpd_conn_drop_output(s);
}

/* Connections that have not said hello are capped per uid and in all, and each lives at most
 * the handshake time: one user's silent connections cannot hold the slots others need. */
int jpd_prehello_full(const struct jpd_daemon *d, uid_t uid)
{
    uint32_t all = 0, mine = 0;
    for (const struct jpd_session *s = d->main.sessions; s; s = s->next) /* HELLO: main's */
        if (s->state == JPD_S_HELLO && !s->closing) {
            all++;
            mine += s->peer.uid == uid;
        }
    if (all < JPD_MAX_PREHELLO && mine < JPD_MAX_PREHELLO_PER_UID)
        return 0;
    jpd_log("refused a connection from uid %u: %u of its and %u in all wait for their hello",
            (unsigned)uid, (unsigned)mine, (unsigned)all);
    return 1;
}
