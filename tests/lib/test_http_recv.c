/* tests/lib/http_recv.c: the receiver answers as scripted, records what a sender sent even when
 * it arrives in pieces, holds a connection scripted 0 until it stops, and decodes a query. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/http_recv.h"

static struct tl_http_recv *start(const int *codes, int ncodes)
{
    struct tl_http_recv *r = NULL;
    int rc = tl_http_start(codes, ncodes, &r);
    cr_assert_eq(rc, 0, "tl_http_start: %s", strerror(-rc));
    return r;
}

static int dial(const struct tl_http_recv *r)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tl_http_port(r)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    cr_assert_eq(write(fd, s, n), (ssize_t)n);
}

/* Everything the receiver writes until it closes (within 10 s), NUL-terminated in buf. */
static void read_to_close(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        cr_assert_eq(poll(&p, 1, 10000), 1, "the receiver neither answered nor closed");
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        cr_assert_geq(n, 0);
        if (n == 0)
            break;
        len += (size_t)n;
        cr_assert_lt(len, cap - 1);
    }
    buf[len] = '\0';
}

static const char get[] = "GET /x HTTP/1.1\r\nHost: here\r\n\r\n";

Test(http_recv, answers_each_request_as_scripted_then_repeats_the_last_code)
{
    static const int codes[] = {503, 200};
    struct tl_http_recv *r = start(codes, 2);
    static const char *const want[] = {"HTTP/1.1 503 ", "HTTP/1.1 200 ", "HTTP/1.1 200 "};
    static const char *const body[] = {"scripted 5", "scripted 2", "scripted 2"};
    for (int i = 0; i < 3; i++) {
        int fd = dial(r);
        send_all(fd, get);
        char resp[512];
        read_to_close(fd, resp, sizeof resp);
        close(fd);
        cr_expect(!strncmp(resp, want[i], strlen(want[i])), "answer %d: %s", i, resp);
        const char *b = strstr(resp, "\r\n\r\n");
        cr_expect(b && !strcmp(b + 4, body[i]), "answer %d: %s", i, resp);
    }
    cr_expect(tl_http_wait(r, 3, 1000));
    cr_expect_eq(tl_http_count(r), 3);
    cr_expect_null(tl_http_req(r, 3));
    tl_http_stop(r);
}

Test(http_recv, records_a_request_sent_in_pieces)
{
    static const int ok[] = {200};
    struct tl_http_recv *r = start(ok, 1);
    int fd = dial(r);
    send_all(fd, "POST /ingest?name=a%2Cb&from=1 HTTP/1.1\r\ncontent-type: text/plain\r\n");
    usleep(20000);
    send_all(fd, "Authorization: Basic eDp5\r\nContent-Length: 11\r\nExpect: 100-continue\r\n"
                 "\r\nhello");
    usleep(20000);
    send_all(fd, " world");
    char resp[512];
    read_to_close(fd, resp, sizeof resp);
    close(fd);
    cr_assert(tl_http_wait(r, 1, 1000));
    const struct tl_http_req *q = tl_http_req(r, 0);
    cr_assert_not_null(q);
    cr_expect_str_eq(q->method, "POST");
    cr_expect_str_eq(q->path, "/ingest");
    cr_expect_str_eq(q->query, "name=a%2Cb&from=1");
    cr_expect_str_eq(q->ctype, "text/plain");
    cr_expect_str_eq(q->auth, "Basic eDp5");
    cr_expect_eq(q->has_expect, 1);
    cr_expect_eq(q->len, 11);
    cr_expect_str_eq(q->body, "hello world");
    tl_http_stop(r);
}

Test(http_recv, holds_a_connection_scripted_0_until_it_stops)
{
    static const int never[] = {0};
    struct tl_http_recv *r = start(never, 1);
    int fd = dial(r);
    send_all(fd, get);
    cr_assert(tl_http_wait(r, 1, 10000));
    struct pollfd p = {.fd = fd, .events = POLLIN};
    cr_expect_eq(poll(&p, 1, 200), 0, "no answer while the receiver runs");
    tl_http_stop(r);
    char resp[64];
    read_to_close(fd, resp, sizeof resp);
    cr_expect_str_eq(resp, "", "closed without a word");
    close(fd);
}

Test(http_recv, refuses_a_script_it_cannot_hold)
{
    int codes[TL_HTTP_MAX_CODES + 1] = {200};
    struct tl_http_recv *r = NULL;
    cr_expect_eq(tl_http_start(codes, 0, &r), -EINVAL);
    cr_expect_eq(tl_http_start(codes, TL_HTTP_MAX_CODES + 1, &r), -EINVAL);
    cr_expect_null(r);
}

Test(http_recv, query_values_are_decoded_and_keys_match_whole)
{
    const char *q = "nam=x&name=a%2Cb+c%zz%41&from=&until=9";
    char *v = tl_http_query_get(q, "name");
    cr_expect_str_eq(v, "a,b c%zzA");
    free(v);
    v = tl_http_query_get(q, "from");
    cr_expect_str_eq(v, "");
    free(v);
    v = tl_http_query_get(q, "until");
    cr_expect_str_eq(v, "9");
    free(v);
    cr_expect_null(tl_http_query_get(q, "na"));
    cr_expect_null(tl_http_query_get(q, "format"));
    cr_expect_null(tl_http_query_get("", "name"));
}
