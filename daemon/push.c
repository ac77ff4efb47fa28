/* Fleet push, the sending (push.h): a finished run's profile sent over HTTP(S) with libcurl,
 * in the background for `serve --push URL` and at once for `export CAPTURE --push URL`, in the
 * request push_request.c forms.
 *
 * Delivery: an attempt succeeds on a 2xx status. What another try may mend (no connection, a
 * timeout, 408, 429, 5xx) is tried again up to JPD_PUSH_ATTEMPTS in all, after
 * jpd_push_backoff_ms and then twice that; any other status (a redirect, another 4xx) fails at
 * once, as a retry would get the same answer. An attempt has JPD_PUSH_CONNECT_MS to connect
 * and jpd_push_timeout_ms in all; redirects are not followed; only http and https are spoken.
 * libcurl's proxy variables (http_proxy, https_proxy, no_proxy) apply as for any libcurl
 * program. libcurl is loaded when --push is first checked (push_request.c, lazylib.h), on the
 * main thread before any other starts; every call here goes through its table.
 *
 * Threads: sessions on any loop queue profiles (jpd_push_queue); one push thread sends them.
 * p->mu guards the queue, the counters and the flags, and orders an item's contents, written
 * before it is queued, before the push thread reads them after it dequeues the item. p->abort
 * is also read without the mutex by libcurl's progress callback on the push thread: an atomic
 * flag, relaxed, as it only asks the transfer to stop and publishes nothing (the join that
 * follows orders the rest).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jpd.h"
#include "lazylib.h"
#include "util.h"
#include "push.h"

#ifndef JETTPROF_VERSION
#define JETTPROF_VERSION "unknown"
#endif

uint32_t jpd_push_backoff_ms = JPD_PUSH_BACKOFF_MS;
uint32_t jpd_push_timeout_ms = JPD_PUSH_TIMEOUT_MS;
uint32_t jpd_push_grace_ms = JPD_PUSH_GRACE_MS;

/* ---- sending ---- */

struct push_item {
    struct push_item *next;
    char who[32];   /* "run N", or "export": what the log lines name */
    char *url;
    char *body;
    size_t len;
};

struct jpd_push {
    const struct jpd_push_opts *o;
    char host[256];
    char target[256];
    CURL *h;        /* the push thread's (or jpd_push_now's): its connection is kept */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* to the push thread: a profile, stop, abort */
    pthread_cond_t idle; /* from it: a profile was done with */
    struct push_item *head, *tail;
    uint32_t nqueued;
    size_t qbytes;
    int busy;       /* a profile is being sent */
    int stopping;
    int abort;      /* atomic: see the top of the file */
    uint64_t pushed, failed, retried, dropped, cut;
    char last_error[200];
};

/* libcurl's table; the callers of each function below come after a --push was checked, which
 * loaded it (jpd_push_opt), so here it is there. */
static const struct jpd_curl *curl(void)
{
    return jpd_curl(NULL, 0);
}

int jpd_push_global_init(void)
{
    const struct jpd_curl *c = curl();
    if (!c)
        return -ELIBACC;
    CURLcode r = c->global_init(CURL_GLOBAL_DEFAULT);
    return r == CURLE_OK ? 0 : r == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

void jpd_push_global_cleanup(void)
{
    curl()->global_cleanup();
}

/* A deadline ms from now on CLOCK_MONOTONIC, the clock the condition variables wait on. */
static struct timespec deadline_in(uint32_t ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000u;
    t.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Everything but the thread. 0 or -ENOMEM (nothing to free). */
static int push_new(const struct jpd_push_opts *o, struct jpd_push **out)
{
    struct jpd_push *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->o = o;
    if (gethostname(p->host, sizeof p->host) < 0 || !p->host[0])
        snprintf(p->host, sizeof p->host, "unknown");
    p->host[sizeof p->host - 1] = '\0';
    jpd_push_redact(o->url, p->target, sizeof p->target);
    p->h = curl()->easy_init();
    pthread_condattr_t ca;
    int r = p->h ? pthread_condattr_init(&ca) : ENOMEM;
    if (r == 0) {
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->wake, &ca);
        pthread_cond_init(&p->idle, &ca);
        pthread_condattr_destroy(&ca);
    } else {
        if (p->h)
            curl()->easy_cleanup(p->h);
        free(p);
        return -r;
    }
    *out = p;
    return 0;
}

static void push_free(struct jpd_push *p)
{
    curl()->easy_cleanup(p->h);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static void item_free(struct push_item *it)
{
    free(it->url);
    free(it->body);
    free(it);
}

/* The first line of an answer's body, up to 96 bytes, kept for the error text. */
struct reply {
    char text[100];
    size_t len;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct reply *r = arg;
    size_t n = size * nmemb, room = sizeof r->text - 1 - r->len;
    memcpy(r->text + r->len, data, n < room ? n : room);
    r->len += n < room ? n : room;
    r->text[r->len] = '\0';
    return n; /* the rest is read and dropped */
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    struct jpd_push *p = arg;
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return __atomic_load_n(&p->abort, __ATOMIC_RELAXED) ? 1 : 0; /* relaxed: see the top */
}

/* Each occurrence of s2[n] in s masked with '*'. */
static void mask(char *s, const char *s2, size_t n)
{
    for (char *hit; n && (hit = memmem(s, strlen(s), s2, n));)
        memset(hit, '*', n);
}

/* A receiver's text or libcurl's in an error line: printable ASCII up to the first line end
 * ('?' for any other byte), and never the URL's user or password. */
static void clean_text(char *s, const char *url)
{
    s[strcspn(s, "\r\n")] = '\0';
    for (char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            *c = '?';
    const char *sep = strstr(url, "://");
    const char *user = sep ? sep + 3 : url;
    size_t auth = strcspn(user, "/?#");
    const char *at = memrchr(user, '@', auth);
    if (!at)
        return;
    const char *colon = memchr(user, ':', (size_t)(at - user));
    const char *user_end = colon ? colon : at;
    mask(s, user, (size_t)(user_end - user));
    if (colon)
        mask(s, colon + 1, (size_t)(at - colon - 1));
}

/* One POST. 0 on a 2xx answer; else why[cap] says what happened and the result says what
 * next: -EAGAIN another try may mend it (no answer, 408, 429, 5xx), -EPROTO it would not
 * (another status), -ECANCELED aborted (shutdown), -ENOMEM. */
static int attempt(struct jpd_push *p, const struct push_item *it, char *why, size_t cap)
{
    const struct jpd_curl *c = curl();
    CURL *h = p->h;
    c->easy_reset(h); /* keeps the connection and DNS caches */
    struct curl_slist *hdr = c->slist_append(NULL, jpd_push_content_type(p->o));
    /* no "Expect: 100-continue": the body goes at once, with no wait on a server that
     * never says 100 */
    struct curl_slist *more = hdr ? c->slist_append(hdr, "Expect:") : NULL;
    if (!more) {
        c->slist_free_all(hdr);
        snprintf(why, cap, "out of memory");
        return -ENOMEM;
    }
    hdr = more;
    struct reply rep = {.len = 0};
    rep.text[0] = '\0';
    char err[CURL_ERROR_SIZE];
    err[0] = '\0';
    long connect_ms = jpd_push_timeout_ms < JPD_PUSH_CONNECT_MS ? (long)jpd_push_timeout_ms
                                                                : (long)JPD_PUSH_CONNECT_MS;
    c->easy_setopt(h, CURLOPT_URL, it->url);
    c->easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    c->easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    c->easy_setopt(h, CURLOPT_POST, 1L);
    c->easy_setopt(h, CURLOPT_POSTFIELDS, it->body);
    c->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->len);
    c->easy_setopt(h, CURLOPT_USERAGENT, "jettprofd/" JETTPROF_VERSION);
    c->easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
    c->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    c->easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)jpd_push_timeout_ms);
    c->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    c->easy_setopt(h, CURLOPT_WRITEDATA, &rep);
    c->easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    c->easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    c->easy_setopt(h, CURLOPT_XFERINFODATA, p);
    c->easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    CURLcode rc = c->easy_perform(h);
    long status = 0;
    (void)c->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    c->easy_setopt(h, CURLOPT_ERRORBUFFER, NULL); /* err is about to go */
    c->slist_free_all(hdr);
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        snprintf(why, cap, "aborted: the daemon is stopping");
        return -ECANCELED;
    }
    if (rc == CURLE_OUT_OF_MEMORY) {
        snprintf(why, cap, "out of memory");
        return -ENOMEM;
    }
    if (rc != CURLE_OK) {
        snprintf(why, cap, "%s", err[0] ? err : c->easy_strerror(rc));
        clean_text(why, p->o->url);
        return -EAGAIN;
    }
    if (status >= 200 && status < 300)
        return 0;
    clean_text(rep.text, p->o->url);
    snprintf(why, cap, "HTTP %ld%s%s", status, rep.text[0] ? ": " : "", rep.text);
    return status == 408 || status == 429 || status >= 500 ? -EAGAIN : -EPROTO;
}

/* Every attempt the policy allows, waiting between them (an abort ends the wait). 0, or the
 * last attempt's result with its why. */
static int deliver(struct jpd_push *p, const struct push_item *it, char *why, size_t cap)
{
    uint32_t wait_ms = jpd_push_backoff_ms;
    for (uint32_t n = 1;; n++) {
        int r = attempt(p, it, why, cap);
        if (r != -EAGAIN || n == JPD_PUSH_ATTEMPTS)
            return r;
        jpd_log_at(JPD_LOG_WARNING, "%s: push attempt %u of %u to %s failed (%s); trying again "
                   "in %u ms", it->who, (unsigned)n, JPD_PUSH_ATTEMPTS, p->target, why,
                   (unsigned)wait_ms);
        pthread_mutex_lock(&p->mu);
        p->retried++;
        snprintf(p->last_error, sizeof p->last_error, "%s: %s", it->who, why);
        struct timespec until = deadline_in(wait_ms);
        while (!__atomic_load_n(&p->abort, __ATOMIC_RELAXED) &&
               pthread_cond_timedwait(&p->wake, &p->mu, &until) != ETIMEDOUT) {
        }
        int stop = __atomic_load_n(&p->abort, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&p->mu);
        if (stop) {
            snprintf(why, cap, "aborted: the daemon is stopping");
            return -ECANCELED;
        }
        wait_ms = wait_ms > UINT32_MAX / 2 ? UINT32_MAX : wait_ms * 2;
    }
}

static void *push_main(void *arg)
{
    struct jpd_push *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->wake, &p->mu);
        struct push_item *it = p->head;
        if (!it || __atomic_load_n(&p->abort, __ATOMIC_RELAXED))
            break; /* stopping with nothing left, or aborted: jpd_push_stop drops the rest */
        p->head = it->next;
        if (!p->head)
            p->tail = NULL;
        p->nqueued--;
        p->qbytes -= it->len;
        p->busy = 1;
        pthread_mutex_unlock(&p->mu);

        char why[160];
        int r = deliver(p, it, why, sizeof why);
        if (r == 0)
            jpd_log("%s: pushed its profile (%zu bytes) to %s", it->who, it->len, p->target);
        else if (r == -ECANCELED)
            jpd_log_at(JPD_LOG_WARNING, "%s: its profile was not pushed to %s: the daemon is "
                       "stopping", it->who, p->target);
        else if (r == -EAGAIN)
            jpd_log_at(JPD_LOG_WARNING, "%s: push to %s failed after %u attempts: %s",
                       it->who, p->target, JPD_PUSH_ATTEMPTS, why);
        else
            jpd_log_at(JPD_LOG_WARNING, "%s: push to %s failed: %s", it->who, p->target, why);

        pthread_mutex_lock(&p->mu);
        p->busy = 0;
        if (r == 0) {
            p->pushed++;
        } else if (r == -ECANCELED) {
            p->dropped++;
        } else {
            p->failed++;
            snprintf(p->last_error, sizeof p->last_error, "%s: %s", it->who, why);
        }
        pthread_cond_broadcast(&p->idle);
        item_free(it);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int jpd_push_start(const struct jpd_push_opts *o, struct jpd_push **out)
{
    struct jpd_push *p;
    int r = push_new(o, &p);
    if (r < 0)
        return r;
    r = jpd_thread_start(&p->thread, push_main, p);
    if (r < 0) {
        push_free(p);
        return r;
    }
    p->started = 1;
    *out = p;
    return 0;
}

void jpd_push_queue(struct jpd_push *p, uint64_t run_id, const struct jpd_push_meta *m,
                    char *body, size_t len)
{
    if (!p) {
        free(body);
        return;
    }
    struct push_item *it = calloc(1, sizeof *it);
    char *json = NULL;
    size_t jlen = 0;
    int r = it ? jpd_push_url(p->o, p->host, m, &it->url) : -ENOMEM;
    if (r == 0)
        r = jpd_push_body(p->o, p->host, m, body, len, &json, &jlen);
    if (r < 0) {
        if (it)
            free(it->url);
        free(it);
        free(body);
        jpd_push_render_failed(p, run_id, "out of memory");
        return;
    }
    if (json) { /* Parca: the JSON request carries the profile */
        free(body);
        body = json;
        len = jlen;
    }
    snprintf(it->who, sizeof it->who, "run %llu", (unsigned long long)run_id);
    it->body = body;
    it->len = len;
    struct push_item *gone = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
        /* Sessions are all done before jpd_push_stop; should one still come, it is dropped
         * (the thread may be gone), never left in a queue nobody frees. */
        p->dropped++;
        pthread_mutex_unlock(&p->mu);
        jpd_log_at(JPD_LOG_WARNING, "%s: its profile was not pushed to %s: the daemon is "
                   "stopping", it->who, p->target);
        item_free(it);
        return;
    }
    if (len > JPD_PUSH_QUEUE_BYTES) {
        gone = it; /* larger than the whole queue may hold */
        it = NULL;
        p->dropped++;
    }
    while (it && p->head && (p->nqueued >= JPD_PUSH_QUEUE_MAX ||
                             p->qbytes + len > JPD_PUSH_QUEUE_BYTES)) {
        struct push_item *old = p->head;
        p->head = old->next;
        if (!p->head)
            p->tail = NULL;
        p->nqueued--;
        p->qbytes -= old->len;
        p->dropped++;
        old->next = gone;
        gone = old;
    }
    if (it) {
        if (p->tail)
            p->tail->next = it;
        else
            p->head = it;
        p->tail = it;
        p->nqueued++;
        p->qbytes += len;
        pthread_cond_signal(&p->wake);
    }
    pthread_mutex_unlock(&p->mu);
    while (gone) {
        struct push_item *next = gone->next;
        jpd_log_at(JPD_LOG_WARNING, "%s: its profile (%zu bytes) was dropped unpushed: the push "
                   "queue holds at most %u profiles and %u MiB", gone->who, gone->len,
                   JPD_PUSH_QUEUE_MAX, JPD_PUSH_QUEUE_BYTES >> 20);
        item_free(gone);
        gone = next;
    }
}

void jpd_push_render_failed(struct jpd_push *p, uint64_t run_id, const char *why)
{
    if (!p)
        return;
    jpd_log_at(JPD_LOG_WARNING, "run %llu: no profile to push: %s", (unsigned long long)run_id,
               why);
    pthread_mutex_lock(&p->mu);
    p->failed++;
    snprintf(p->last_error, sizeof p->last_error, "run %llu: no profile to push: %s",
             (unsigned long long)run_id, why);
    pthread_mutex_unlock(&p->mu);
}

void jpd_push_stop(struct jpd_push *p)
{
    if (!p)
        return;
    struct timespec until = deadline_in(jpd_push_grace_ms);
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->wake);
    if (p->head || p->busy)
        jpd_log("stopping: %u profile(s) still to push to %s; waiting at most %u ms",
                (unsigned)(p->nqueued + (uint32_t)p->busy), p->target,
                (unsigned)jpd_push_grace_ms);
    while ((p->head || p->busy) && pthread_cond_timedwait(&p->idle, &p->mu, &until) != ETIMEDOUT) {
    }
    __atomic_store_n(&p->abort, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&p->wake);
    struct push_item *left = p->head;
    p->dropped += p->nqueued;
    p->head = p->tail = NULL;
    p->nqueued = 0;
    p->qbytes = 0;
    pthread_mutex_unlock(&p->mu);
    while (left) {
        struct push_item *next = left->next;
        jpd_log_at(JPD_LOG_WARNING, "%s: its profile was not pushed to %s: the daemon is "
                   "stopping", left->who, p->target);
        item_free(left);
        left = next;
    }
    if (p->started)
        pthread_join(p->thread, NULL);
    push_free(p);
}

void jpd_push_note_cut(struct jpd_push *p, uint64_t n)
{
    if (!p || !n)
        return;
    pthread_mutex_lock(&p->mu);
    p->cut += n;
    pthread_mutex_unlock(&p->mu);
}

int jpd_push_stats(struct jpd_push *p, struct jpd_push_stats *out)
{
    if (!p)
        return 0;
    memset(out, 0, sizeof *out);
    snprintf(out->target, sizeof out->target, "%s", p->target);
    pthread_mutex_lock(&p->mu);
    out->pushed = p->pushed;
    out->failed = p->failed;
    out->retried = p->retried;
    out->dropped = p->dropped;
    out->queued = p->nqueued + (uint32_t)p->busy;
    out->cut = p->cut;
    snprintf(out->last_error, sizeof out->last_error, "%s", p->last_error);
    pthread_mutex_unlock(&p->mu);
    return 1;
}

int jpd_push_now(const struct jpd_push_opts *o, const struct jpd_push_meta *m,
                 const void *body, size_t len, char *why, size_t cap)
{
    struct jpd_push *p;
    int r = push_new(o, &p);
    if (r < 0) {
        snprintf(why, cap, "out of memory");
        return r;
    }
    struct push_item it = {.body = (char *)body, .len = len};
    snprintf(it.who, sizeof it.who, "export");
    char *json = NULL;
    size_t jlen = 0;
    r = jpd_push_url(o, p->host, m, &it.url);
    if (r == 0)
        r = jpd_push_body(o, p->host, m, body, len, &json, &jlen);
    if (json) {
        it.body = json;
        it.len = jlen;
    }
    if (r < 0)
        snprintf(why, cap, "out of memory");
    else
        r = deliver(p, &it, why, cap);
    free(json);
    free(it.url);
    push_free(p);
    return r;
}
