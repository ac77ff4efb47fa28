/* Control messages over a unix stream socket: blocking send with an overall deadline, the
 * SCM_RIGHTS descriptors that travel with a frame, and receive into a decoder. The codec
 * itself (schema, encoding, strict decoding) is protocol/control.c.
 */
#include "protocol/control.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Waits until fd is ready for `events`, at most timeout_ms (-1: without bound). 0 when ready,
 * -ETIMEDOUT, or -errno. */
static int wait_fd(int fd, short events, int timeout_ms)
{
    struct pollfd p = {fd, events, 0};
    for (;;) {
        int r = poll(&p, 1, timeout_ms);
        if (r > 0)
            return 0;
        if (r == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int jp_ctl_send(int sock, const struct jp_ctl_msg *m, const int *fds, unsigned nfds)
{
    return jp_ctl_send_timeout(sock, m, fds, nfds, -1);
}

int jp_ctl_send_timeout(int sock, const struct jp_ctl_msg *m, const int *fds, unsigned nfds,
                        int timeout_ms)
{
    if (nfds > JP_CTL_MAX_FDS || (nfds && !fds))
        return -EINVAL;
    uint8_t *buf;
    size_t len;
    int r = jp_ctl_encode(m, &buf, &len);
    if (r < 0)
        return r;
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof(int) * JP_CTL_MAX_FDS)];
    } ctl;
    const int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : 0;
    size_t done = 0;
    r = 0;
    while (done < len) {
        struct iovec iov = {buf + done, len - done};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        if (done == 0 && nfds) {
            memset(&ctl, 0, sizeof ctl);
            msg.msg_control = ctl.b;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
            memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        ssize_t w = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                /* A full socket buffer (a non-blocking socket, or SO_SNDTIMEO expiring on a
                 * blocking one): wait for room, within what is left of the deadline. */
                int left = -1;
                if (timeout_ms >= 0) {
                    int64_t rest = deadline - mono_ms();
                    if (rest <= 0) {
                        r = -ETIMEDOUT;
                        break;
                    }
                    left = rest > INT32_MAX ? INT32_MAX : (int)rest;
                }
                r = wait_fd(sock, POLLOUT, left);
                if (r < 0)
                    break;
                continue;
            }
            r = -errno;
            break;
        }
        done += (size_t)w; /* the fds went with the first byte that was accepted */
    }
    free(buf);
    return r;
}

int jp_ctl_take_fds(struct msghdr *msg, int *fds, unsigned max_fds, unsigned *nfds)
{
    unsigned n = 0;
    int over = 0;
    *nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t bytes = c->cmsg_len > CMSG_LEN(0) ? c->cmsg_len - CMSG_LEN(0) : 0;
        const unsigned char *data = CMSG_DATA(c);
        for (size_t k = 0; k + sizeof(int) <= bytes; k += sizeof(int)) {
            int fd;
            memcpy(&fd, data + k, sizeof fd);
            if (n < max_fds && fds)
                fds[n++] = fd;
            else {
                over = 1;
                close(fd);
            }
        }
    }
    if (over || (msg->msg_flags & MSG_CTRUNC)) {
        for (unsigned i = 0; i < n; i++)
            close(fds[i]);
        return -EPROTO;
    }
    *nfds = n;
    return 0;
}

int jp_ctl_recv(int sock, struct jp_ctl_decoder *d, int *fds, unsigned max_fds, unsigned *nfds)
{
    if (!d || !nfds)
        return -EINVAL;
    *nfds = 0;
    uint8_t buf[16384];
    union {
        struct cmsghdr align;
        char b[JP_CTL_CMSG_SPACE];
    } ctl;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.b;
    msg.msg_controllen = sizeof ctl.b;
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    int r = jp_ctl_take_fds(&msg, fds, max_fds, nfds);
    if (r < 0)
        return r;
    r = jp_ctl_decoder_feed(d, buf, (size_t)n);
    if (r < 0) {
        for (unsigned i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
        return r;
    }
    return (int)n;
}
