/* Capture blocks off the drain: the compressor pool that encodes and writes a capture's
 * finished blocks while the drain goes on emptying the ring.
 *
 * A capture writer (protocol/capture.h) gathers records into a raw block; when one is full it
 * hands the block to its stream here (stream_block, the writer's sink) and takes back an
 * empty buffer. Each stream owns JPD_CAPTURE_IN_FLIGHT buffers: the one the writer fills and
 * the rest free or queued, so a capture holds at most that many blocks of
 * JP_CAPTURE_BLOCK_RAW_MAX bytes however far the compressor falls behind. The drain waits
 * only when every buffer is queued (the compressor is that many blocks behind); each such wait
 * and its time are counted (jpd_cstream_waits) and shown by `status`.
 *
 * The pool: up to JPD_COMPRESS_THREADS threads, started as concurrent streams first need them
 * (one for the first, a second for a second at once) and then kept, idle on W, for the
 * process's life (they hold nothing between blocks). A stream with queued blocks is in the pool's ready list or
 * being worked by exactly one thread, never both, so its blocks are encoded and written in
 * the order the writer ended them, and its encoder and fd are used by one thread at a time.
 *
 * Locking (one mutex, the pool's, guards everything below; no atomics):
 *   P. pool.mu: the ready list, every stream's queue, free list, busy flag, error and wait
 *      counters, the thread count and quit flag.
 *   W. pool.work (cond, with P): a stream became ready, or quit. Threads wait on it.
 *   R. stream.room (cond, with P): a buffer came back or the stream went idle. The drain
 *      waits on it in stream_block (no free buffer) and jpd_cstream_finish (not idle).
 *   The thread takes a block out of the queue under P, encodes and writes it with P released
 *   (the buffer is its own until it gives it back under P), then gives the buffer back and
 *   signals R. Buffers pass between threads only under P, which orders the writer's stores
 *   into a buffer before the thread's reads and the thread's use before the writer's reuse.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compress.h"

#define JPD_COMPRESS_THREADS 2

struct qblock {
    uint8_t *raw;
    uint32_t len, count;
};

struct jpd_cstream {
    int fd;
    struct jp_capture_encoder *enc;
    struct jpd_cstream *next_ready;
    pthread_cond_t room;                    /* R */
    uint8_t *free_bufs[JPD_CAPTURE_IN_FLIGHT];
    unsigned nfree;
    struct qblock q[JPD_CAPTURE_IN_FLIGHT]; /* queued blocks, oldest at q_head */
    unsigned q_head, q_len;
    int busy;  /* a thread is working the stream (it is then not in the ready list) */
    int ready; /* in the ready list */
    int err;   /* first encode or write error, sticky */
    uint64_t waits, wait_ns;
};

static struct {
    pthread_mutex_t mu;   /* P */
    pthread_cond_t work;  /* W */
    struct jpd_cstream *ready_head, *ready_tail;
    unsigned nthreads;
    unsigned streams;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Under P: a stream with queued blocks and no thread joins the ready list. */
static void make_ready(struct jpd_cstream *c)
{
    if (c->busy || c->ready || c->q_len == 0)
        return;
    c->ready = 1;
    c->next_ready = NULL;
    if (pool.ready_tail)
        pool.ready_tail->next_ready = c;
    else
        pool.ready_head = c;
    pool.ready_tail = c;
    pthread_cond_signal(&pool.work); /* W */
}

static void *compress_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool.mu); /* P */
    for (;;) {
        while (!pool.ready_head)
            pthread_cond_wait(&pool.work, &pool.mu); /* W */
        struct jpd_cstream *c = pool.ready_head;
        pool.ready_head = c->next_ready;
        if (!pool.ready_head)
            pool.ready_tail = NULL;
        c->ready = 0;
        c->busy = 1;
        while (c->q_len) {
            struct qblock b = c->q[c->q_head];
            int err = c->err;
            pthread_mutex_unlock(&pool.mu);
            if (!err) {
                const uint8_t *out;
                size_t n;
                err = jp_capture_encode_block(c->enc, b.raw, b.len, b.count, &out, &n);
                if (err == 0)
                    err = jp_capture_write_all(c->fd, out, n);
            }
            pthread_mutex_lock(&pool.mu); /* P */
            if (err && !c->err)
                c->err = err;
            c->q_head = (c->q_head + 1) % JPD_CAPTURE_IN_FLIGHT;
            c->q_len--;
            c->free_bufs[c->nfree++] = b.raw;
            pthread_cond_broadcast(&c->room); /* R */
        }
        c->busy = 0;
        pthread_cond_broadcast(&c->room); /* R: idle */
    }
    return NULL;
}

/* The writer's sink: queue the full block, give back a free buffer, waiting for one only
 * when all are queued. Runs on the drain's thread. */
static int stream_block(void *ctx, uint8_t **raw, uint32_t len, uint32_t count)
{
    struct jpd_cstream *c = ctx;
    pthread_mutex_lock(&pool.mu); /* P */
    if (!c->err && c->nfree == 0) {
        uint64_t t0 = mono_ns();
        c->waits++; /* counted as it starts, so a wait in progress is seen */
        while (!c->err && c->nfree == 0)
            pthread_cond_wait(&c->room, &pool.mu); /* R */
        c->wait_ns += mono_ns() - t0;
    }
    int err = c->err;
    if (!err) {
        unsigned tail = (c->q_head + c->q_len) % JPD_CAPTURE_IN_FLIGHT;
        c->q[tail] = (struct qblock){*raw, len, count};
        c->q_len++;
        *raw = c->free_bufs[--c->nfree];
        make_ready(c);
    }
    pthread_mutex_unlock(&pool.mu);
    return err;
}

static void stream_free(struct jpd_cstream *c)
{
    for (unsigned i = 0; i < c->nfree; i++)
        free(c->free_bufs[i]);
    jp_capture_encoder_free(c->enc);
    pthread_cond_destroy(&c->room);
    free(c);
}

int jpd_cstream_new(int fd, const struct jp_capture_meta *meta, struct jpd_cstream **out,
                    struct jp_capture_writer **w)
{
    struct jpd_cstream *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->fd = fd;
    pthread_cond_init(&c->room, NULL);
    uint32_t version = meta->format ? meta->format : JP_CAPTURE_VERSION;
    int r = jp_capture_encoder_new(version, 0, &c->enc);
    /* one buffer stays with the writer (its own, from jp_capture_writer_new_opts) */
    for (unsigned i = 0; r == 0 && i < JPD_CAPTURE_IN_FLIGHT - 1; i++) {
        if (!(c->free_bufs[i] = malloc(JP_CAPTURE_BLOCK_RAW_MAX)))
            r = -ENOMEM;
        else
            c->nfree++;
    }
    if (r < 0) {
        stream_free(c);
        return r;
    }
    pthread_mutex_lock(&pool.mu); /* P */
    /* Threads are started as streams need them, up to the pool's size. */
    if (pool.nthreads < JPD_COMPRESS_THREADS && pool.nthreads <= pool.streams) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, compress_main, NULL) == 0)
            pool.nthreads++;
        else if (pool.nthreads == 0)
            r = -EAGAIN;
        pthread_attr_destroy(&a);
    }
    if (r == 0)
        pool.streams++;
    pthread_mutex_unlock(&pool.mu);
    if (r < 0) {
        stream_free(c);
        return r;
    }
    struct jp_capture_sink sink = {stream_block, c};
    struct jp_capture_options opt = {.sink = &sink};
    r = jp_capture_writer_new_opts(fd, meta, &opt, w);
    if (r < 0) {
        jpd_cstream_free(c);
        return r;
    }
    *out = c;
    return 0;
}

int jpd_cstream_finish(struct jpd_cstream *c)
{
    pthread_mutex_lock(&pool.mu); /* P */
    while (c->q_len || c->busy)
        pthread_cond_wait(&c->room, &pool.mu); /* R */
    int err = c->err;
    pthread_mutex_unlock(&pool.mu);
    return err;
}

void jpd_cstream_waits(struct jpd_cstream *c, uint64_t *waits, uint64_t *wait_ns)
{
    pthread_mutex_lock(&pool.mu); /* P */
    *waits = c->waits;
    *wait_ns = c->wait_ns;
    pthread_mutex_unlock(&pool.mu);
}

void jpd_cstream_free(struct jpd_cstream *c)
{
    if (!c)
        return;
    jpd_cstream_finish(c);
    pthread_mutex_lock(&pool.mu); /* P */
    pool.streams--;
    pthread_mutex_unlock(&pool.mu);
    stream_free(c);
}
