/* tests/lib/http_recv.h: an HTTP/1.1 receiver run by the test itself, for code that sends
 * requests (the daemon's --push). One thread on 127.0.0.1, an ephemeral port, one request per
 * connection: it records each request's method, path, raw query, the headers a sender is
 * checked on, and its body, then answers as the test scripted it, or holds the connection open
 * without a word until the receiver stops.
 *
 * Nothing here calls Criterion: the benches may use it too. Errors are negative errno. */
#ifndef JETTPROF_TESTS_LIB_HTTP_RECV_H
#define JETTPROF_TESTS_LIB_HTTP_RECV_H

#include <stddef.h>

/* Requests kept; past this many the last one is replaced by each newer one. */
#define TL_HTTP_MAX_REQS 160
/* Scripted answers at most (tl_http_start). */
#define TL_HTTP_MAX_CODES 8

struct tl_http_req {
    char method[16];
    char path[512];   /* the target up to '?' */
    char query[8192]; /* after '?', raw, as sent; "" when none */
    char ctype[128];  /* Content-Type */
    char auth[256];   /* Authorization */
    int has_expect;   /* an Expect: header was sent */
    char *body;       /* Content-Length bytes (NUL-terminated past len) */
    size_t len;
};

struct tl_http_recv;

/* Starts a receiver that answers its i-th request with the status codes[i], or codes[ncodes-1]
 * for every later one (a body `scripted N`, N the code's first digit, then close); a code of 0
 * holds that connection open, unanswered, until tl_http_stop. 0 with *out set; -EINVAL (ncodes
 * outside 1..TL_HTTP_MAX_CODES), -ENOMEM, or the socket's or thread's errno. */
int tl_http_start(const int *codes, int ncodes, struct tl_http_recv **out);
/* The port it listens on (127.0.0.1). */
int tl_http_port(const struct tl_http_recv *r);
/* How many requests it has received whole so far. */
int tl_http_count(struct tl_http_recv *r);
/* Waits at most timeout_ms until it has received n requests: 1 when it has, else 0. */
int tl_http_wait(struct tl_http_recv *r, int n, int timeout_ms);
/* The i-th request received (from 0), or NULL while there is none; valid until tl_http_stop. */
const struct tl_http_req *tl_http_req(struct tl_http_recv *r, int i);
/* Stops the thread, closes the held connections and frees every request. */
void tl_http_stop(struct tl_http_recv *r);

/* The value of key in a raw query, %XX and '+' decoded (malloc'ed), or NULL when key has none
 * (or memory ran out). */
char *tl_http_query_get(const char *query, const char *key);

#endif
