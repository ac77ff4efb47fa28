/* The capture compressor pool (daemon/compress.c): a capture written through it is byte for
 * byte the file the writer writes by itself, for every version, with several captures at
 * once; the writer waits only when all of a capture's blocks are in flight, and that wait is
 * counted; a write error reaches the writer and then the finish. Built also under TSan (the
 * 'tsan' suite), where a race between the drain's thread and the pool's fails it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/compress.h"
#include "protocol/capture.h"
#include "protocol/records.h"
#include "tests/lib/recbuild.h"

/* A memory run of n allocation/free pairs (with a node definition every 1000), fed to w. */
static void feed(struct jp_capture_writer *w, uint64_t n, uint32_t seed)
{
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_MEMORY);
    cr_assert_eq(jp_capture_write(w, &rs, sizeof rs), 0);
    uint64_t x = seed | 1u;
    for (uint64_t i = 1; i <= n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (i % 1000 == 1) {
            struct jp_rec_node_def nd = {{JP_REC_NODE_DEF, 16}, (uint32_t)(i / 1000 + 1), 0, 1};
            cr_assert_eq(jp_capture_write(w, &nd, 16), 0);
        }
        struct jp_rec_alloc a = {{JP_REC_ALLOC, 32}, (uint32_t)(x % 7 + 1), i, x % 4096, 0};
        cr_assert_eq(jp_capture_write(w, &a, 32), 0);
        struct jp_rec_free f = {{JP_REC_FREE, 32}, a.node, i, a.size, 0};
        cr_assert_eq(jp_capture_write(w, &f, 32), 0);
    }
}

static uint8_t *file_of(int fd, size_t *n)
{
    off_t end = lseek(fd, 0, SEEK_END);
    cr_assert_geq(end, 0);
    uint8_t *b = malloc((size_t)end + 1);
    cr_assert_eq(pread(fd, b, (size_t)end, 0), end);
    *n = (size_t)end;
    return b;
}

/* The same records through the writer alone, in the same version. */
static uint8_t *direct(uint32_t version, uint64_t n, uint32_t seed, size_t *len)
{
    int fd = memfd_create("direct", MFD_CLOEXEC);
    struct jp_capture_meta meta = {JP_MODE_MEMORY, 1, 2, version};
    struct jp_capture_writer *w;
    cr_assert_eq(jp_capture_writer_new(fd, &meta, &w), 0);
    feed(w, n, seed);
    cr_assert_eq(jp_capture_flush(w), 0);
    jp_capture_writer_free(w);
    uint8_t *b = file_of(fd, len);
    close(fd);
    return b;
}

struct job {
    uint32_t version, seed;
    uint64_t n;
    int same; /* the result */
};

static void *through_pool(void *arg)
{
    struct job *j = arg;
    int fd = memfd_create("pooled", MFD_CLOEXEC);
    struct jp_capture_meta meta = {JP_MODE_MEMORY, 1, 2, j->version};
    struct jpd_cstream *c;
    struct jp_capture_writer *w;
    cr_assert_eq(jpd_cstream_new(fd, &meta, &c, &w), 0);
    feed(w, j->n, j->seed);
    cr_assert_eq(jp_capture_flush(w), 0);
    jp_capture_writer_free(w);
    cr_assert_eq(jpd_cstream_finish(c), 0);
    jpd_cstream_free(c);
    size_t n, m;
    uint8_t *got = file_of(fd, &n), *want = direct(j->version, j->n, j->seed, &m);
    j->same = n == m && memcmp(got, want, n) == 0;
    free(got);
    free(want);
    close(fd);
    return NULL;
}

Test(compress, a_pooled_capture_is_the_writers_own_bytes_in_every_version)
{
    static const uint32_t versions[] = {JP_CAPTURE_VERSION_1, JP_CAPTURE_VERSION_2,
                                        JP_CAPTURE_VERSION};
    for (unsigned v = 0; v < 3; v++) {
        struct job j = {versions[v], 5 + v, 40000, 0};
        through_pool(&j);
        cr_assert(j.same, "version %u through the pool differs from the writer's", j.version);
    }
}

/* Four captures from four threads at once (more than the pool's threads): each file is its
 * own, its blocks in order. */
Test(compress, concurrent_captures_keep_their_blocks_apart_and_in_order)
{
    pthread_t t[4];
    struct job j[4];
    for (unsigned i = 0; i < 4; i++) {
        j[i] = (struct job){i % 2 ? JP_CAPTURE_VERSION : JP_CAPTURE_VERSION_1, 11 + i, 30000, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, through_pool, &j[i]), 0);
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert(j[i].same, "capture %u differs from the writer's", i);
    }
}

/* A pipe that takes nothing until its reader sees the writer waiting: the pool's thread is
 * stuck writing the first block, the writer hands over the rest until none is free, and the
 * next hand-over must wait; that wait is counted (as it starts, so the reader can see it). */
struct drainer {
    int fd;
    struct jpd_cstream *c;
    size_t got;
};

static void *drain_when_waiting(void *arg)
{
    struct drainer *d = arg;
    uint64_t waits = 0, ns;
    while (waits == 0) {
        jpd_cstream_waits(d->c, &waits, &ns);
        sched_yield();
    }
    uint8_t buf[65536];
    ssize_t r;
    while ((r = read(d->fd, buf, sizeof buf)) > 0)
        d->got += (size_t)r;
    return NULL;
}

Test(compress, the_writer_waits_only_with_every_block_in_flight_and_counts_it)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    cr_assert_geq(fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
    struct jp_capture_meta meta = {JP_MODE_MEMORY, 1, 2, JP_CAPTURE_VERSION_1};
    struct jpd_cstream *c;
    struct jp_capture_writer *w;
    cr_assert_eq(jpd_cstream_new(p[1], &meta, &c, &w), 0);
    struct drainer d = {p[0], c, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, drain_when_waiting, &d), 0);
    /* version 1 blocks of 64 KiB: the first alone fills the pipe */
    feed(w, 20000, 3);
    cr_assert_eq(jp_capture_flush(w), 0);
    jp_capture_writer_free(w);
    cr_assert_eq(jpd_cstream_finish(c), 0);
    uint64_t waits, ns;
    jpd_cstream_waits(c, &waits, &ns);
    cr_assert_geq(waits, 1, "the writer waited for a free block");
    jpd_cstream_free(c);
    close(p[1]);
    pthread_join(t, NULL);
    close(p[0]);
    size_t m;
    uint8_t *want = direct(JP_CAPTURE_VERSION_1, 20000, 3, &m);
    free(want);
    cr_assert_eq(d.got, m, "every byte came through the pipe");
}

/* A capture whose fd cannot be written: the error comes back to the writer at a later hand
 * over (sticky) and from the finish, and nothing is left in flight. */
Test(compress, a_write_error_reaches_the_writer_and_the_finish)
{
    signal(SIGPIPE, SIG_IGN);
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    struct jp_capture_meta meta = {JP_MODE_MEMORY, 1, 2, 0};
    struct jpd_cstream *c;
    struct jp_capture_writer *w;
    cr_assert_eq(jpd_cstream_new(p[1], &meta, &c, &w), 0);
    close(p[0]); /* every block write now fails with EPIPE */
    int r = 0;
    for (int i = 0; i < 64 && r == 0; i++) {
        struct jp_rec_alloc a = {{JP_REC_ALLOC, 32}, 1, (uint64_t)i + 1, 64, 0};
        for (int k = 0; k < 10000 && r == 0; k++)
            r = jp_capture_write(w, &a, 32);
        if (r == 0)
            r = jp_capture_flush(w);
    }
    cr_assert_eq(r, -EPIPE, "the writer learns of the failed write: %d", r);
    cr_assert_eq(jp_capture_write(w, &(struct jp_rec_alloc){{JP_REC_ALLOC, 32}, 1, 1, 1, 0}, 32),
                 -EPIPE, "sticky");
    jp_capture_writer_free(w);
    cr_assert_eq(jpd_cstream_finish(c), -EPIPE);
    jpd_cstream_free(c);
    close(p[1]);
}
