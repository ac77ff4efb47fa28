/* The test's own HTTP receiver (see http_recv.h). */
#include "http_recv.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* What the thread shares with the test: everything past fd and port, under mu. */
struct tl_http_recv {
    int fd, port;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast at each request recorded */
    int codes[TL_HTTP_MAX_CODES], ncodes;
    struct tl_http_req reqs[TL_HTTP_MAX_REQS];
    int nreq;
    int held[TL_HTTP_MAX_REQS], nheld; /* connections left unanswered */
    int stop;
};

/* Some bytes of fd within 10 s: how many, or -1 at its end, an error or the timeout. */
static int read_some(int fd, char *buf, size_t cap)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) <= 0)
        return -1;
    ssize_t n = read(fd, buf, cap);
    return n <= 0 ? -1 : (int)n;
}

/* One request off fd into *q: 0, or -1 when the peer sent no whole request (a head past 64 KiB
 * counts as none). */
static int read_request(int fd, struct tl_http_req *q)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    char *end = NULL;
    if (!buf)
        return -1;
    while (!end) {
        if (len + 1 >= cap)
            return free(buf), -1;
        int n = read_some(fd, buf + len, cap - len - 1);
        if (n < 0)
            return free(buf), -1;
        len += (size_t)n;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    memset(q, 0, sizeof *q);
    char target[8704] = "";
    if (sscanf(buf, "%15s %8703s", q->method, target) != 2)
        return free(buf), -1;
    char *qm = strchr(target, '?');
    if (qm) {
        *qm = '\0';
        snprintf(q->query, sizeof q->query, "%s", qm + 1);
    }
    snprintf(q->path, sizeof q->path, "%s", target);
    size_t clen = 0;
    for (char *line = strstr(buf, "\r\n") + 2; line < end; line = strstr(line, "\r\n") + 2) {
        char *eol = strstr(line, "\r\n");
        *eol = '\0';
        if (!strncasecmp(line, "Content-Length:", 15))
            clen = strtoul(line + 15, NULL, 10);
        else if (!strncasecmp(line, "Content-Type:", 13))
            snprintf(q->ctype, sizeof q->ctype, "%s", line + 14);
        else if (!strncasecmp(line, "Authorization:", 14))
            snprintf(q->auth, sizeof q->auth, "%s", line + 15);
        else if (!strncasecmp(line, "Expect:", 7))
            q->has_expect = 1;
        *eol = '\r';
    }
    size_t have = len - (size_t)(end + 4 - buf);
    q->body = malloc(clen + 1);
    if (!q->body)
        return free(buf), -1;
    memcpy(q->body, end + 4, have < clen ? have : clen);
    while (have < clen) {
        int n = read_some(fd, q->body + have, clen - have);
        if (n < 0)
            return free(buf), free(q->body), -1;
        have += (size_t)n;
    }
    q->body[clen] = '\0';
    q->len = clen;
    free(buf);
    return 0;
}

static void *recv_main(void *arg)
{
    struct tl_http_recv *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            return NULL;
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int c = accept(r->fd, NULL, NULL);
        if (c < 0)
            continue;
        struct tl_http_req q;
        if (read_request(c, &q) < 0) {
            close(c);
            continue;
        }
        pthread_mutex_lock(&r->mu);
        int i = r->nreq < TL_HTTP_MAX_REQS ? r->nreq++ : TL_HTTP_MAX_REQS - 1;
        if (i == TL_HTTP_MAX_REQS - 1)
            free(r->reqs[i].body); /* NULL until the slot was first filled */
        r->reqs[i] = q;
        int code = r->codes[i < r->ncodes ? i : r->ncodes - 1];
        /* past TL_HTTP_MAX_REQS held, one more is closed unanswered */
        int hold = code == 0 && r->nheld < TL_HTTP_MAX_REQS;
        if (hold)
            r->held[r->nheld++] = c;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        if (code) {
            char resp[256], text[32];
            int tl = snprintf(text, sizeof text, "scripted %d", code / 100);
            int n = snprintf(resp, sizeof resp, "HTTP/1.1 %d Scripted\r\nContent-Length: %d\r\n"
                             "Connection: close\r\n\r\n%s", code, tl, text);
            (void)!write(c, resp, (size_t)n);
        }
        if (!hold)
            close(c);
    }
}

int tl_http_start(const int *codes, int ncodes, struct tl_http_recv **out)
{
    if (ncodes < 1 || ncodes > TL_HTTP_MAX_CODES)
        return -EINVAL;
    struct tl_http_recv *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    memcpy(r->codes, codes, (size_t)ncodes * sizeof *codes);
    r->ncodes = ncodes;
    r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (r->fd < 0) {
        int e = errno;
        free(r);
        return -e;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int rc = 0;
    if (bind(r->fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(r->fd, 128) < 0 ||
        getsockname(r->fd, (struct sockaddr *)&a, &al) < 0)
        rc = -errno;
    if (rc == 0) {
        r->port = ntohs(a.sin_port);
        pthread_mutex_init(&r->mu, NULL);
        pthread_cond_init(&r->cv, NULL);
        rc = -pthread_create(&r->thread, NULL, recv_main, r);
        if (rc < 0) {
            pthread_cond_destroy(&r->cv);
            pthread_mutex_destroy(&r->mu);
        }
    }
    if (rc < 0) {
        close(r->fd);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int tl_http_port(const struct tl_http_recv *r)
{
    return r->port;
}

int tl_http_count(struct tl_http_recv *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->nreq;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int tl_http_wait(struct tl_http_recv *r, int n, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (r->nreq < n && pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0) {
    }
    int ok = r->nreq >= n;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

const struct tl_http_req *tl_http_req(struct tl_http_recv *r, int i)
{
    pthread_mutex_lock(&r->mu);
    const struct tl_http_req *q = i >= 0 && i < r->nreq ? &r->reqs[i] : NULL;
    pthread_mutex_unlock(&r->mu);
    return q;
}

void tl_http_stop(struct tl_http_recv *r)
{
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    for (int i = 0; i < r->nheld; i++)
        close(r->held[i]);
    for (int i = 0; i < r->nreq; i++)
        free(r->reqs[i].body);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    close(r->fd);
    free(r);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

char *tl_http_query_get(const char *query, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
        if (strncmp(p, key, kl) || p[kl] != '=')
            continue;
        const char *v = p + kl + 1;
        size_t n = strcspn(v, "&");
        char *out = malloc(n + 1), *o = out;
        if (!out)
            return NULL;
        for (size_t i = 0; i < n; i++) {
            if (v[i] == '%' && i + 2 < n + 1 && hexval(v[i + 1]) >= 0 && hexval(v[i + 2]) >= 0) {
                *o++ = (char)(hexval(v[i + 1]) * 16 + hexval(v[i + 2]));
                i += 2;
            } else {
                *o++ = v[i] == '+' ? ' ' : v[i];
            }
        }
        *o = '\0';
        return out;
    }
    return NULL;
}
