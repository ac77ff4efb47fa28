/* ring_bench: what a push costs the producer when the ring has room, and how many records per
 * second cross between two processes (fork, one memfd mapped by both), for the record sizes the
 * agent writes (16-byte EXEC, 32-byte samples and allocation events, 64-byte COUNTERS).
 *
 * Every figure is the median of several runs and is printed with its unit on its own line,
 * next to a baseline measured in the same run: a plain 32-byte store into a local array for the
 * push, and one thread alternating between producing and consuming (no second core, no cache
 * line transfer) for the cross-process rate. Nothing here asserts a time.
 *
 *   ring_bench [--quick]
 */
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/lib/stats.h"
#include "protocol/ring.h"

#define RUNS 7

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A record of `bytes` the way the agent fills one: header, then fields. */
static inline void fill(uint8_t *p, uint32_t bytes, uint64_t i)
{
    struct jp_rec_hdr h = {JP_REC_CPU_SAMPLE, (uint16_t)bytes};
    memcpy(p, &h, sizeof h);
    memcpy(p + 8, &i, sizeof i);
    if (bytes >= 32) {
        memcpy(p + 16, &i, sizeof i);
        memcpy(p + 24, &i, sizeof i);
    }
    if (bytes >= 64) {
        memcpy(p + 32, &i, sizeof i);
        memcpy(p + 56, &i, sizeof i);
    }
}

/* ns per push with room: fill a big ring to 7/8 without a consumer, rewind, repeat. */
static double push_ns(struct jp_ring *r, uint32_t bytes, unsigned batch, uint64_t total)
{
    uint64_t per_fill = (uint64_t)r->slot_count / jp_rec_slots(bytes) * 7 / 8;
    double t0 = now_ns();
    uint64_t done = 0;
    while (done < total) {
        jp_ring_set_start_index(r, 0);
        for (uint64_t i = 0; i < per_fill; i++) {
            uint8_t *p = jp_ring_reserve(r, bytes);
            if (!p) {
                fprintf(stderr, "ring_bench: unexpected full ring\n");
                exit(1);
            }
            fill(p, bytes, i);
            if ((i + 1) % batch == 0)
                jp_ring_commit(r);
        }
        jp_ring_commit(r);
        done += per_fill;
    }
    return (now_ns() - t0) / (double)done;
}

/* Baseline: the same stores into a local array that stays in cache like the ring does. */
static double store_ns(uint8_t *arena, size_t arena_size, uint32_t bytes, uint64_t total)
{
    uint64_t per_fill = arena_size / bytes * 7 / 8;
    double t0 = now_ns();
    uint64_t done = 0;
    while (done < total) {
        uint8_t *p = arena;
        for (uint64_t i = 0; i < per_fill; i++, p += bytes) {
            fill(p, bytes, i);
            __asm__ volatile("" : : "r"(p) : "memory"); /* keep every store */
        }
        done += per_fill;
    }
    return (now_ns() - t0) / (double)done;
}

static void backoff(unsigned *spins)
{
    if (++*spins < 128) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

static void produce(struct jp_ring *r, uint32_t bytes, uint64_t n)
{
    unsigned spins = 0;
    for (uint64_t i = 0; i < n;) {
        uint8_t *p = jp_ring_reserve(r, bytes);
        if (!p) {
            jp_ring_commit(r);
            backoff(&spins);
            continue;
        }
        spins = 0;
        fill(p, bytes, i);
        if (++i % 16 == 0)
            jp_ring_commit(r);
    }
    jp_ring_commit(r);
    jp_ring_close(r);
}

/* Reads whatever is committed now (copying each record out, as the daemon does), returns the
 * records seen and folds their payload into *sum. */
static uint64_t consume_avail(struct jp_ring *r, uint64_t *sum)
{
    uint64_t n = 0, s = 0, avail;
    const uint8_t *p;
    while ((avail = jp_ring_peek(r, &p)) != 0) {
        uint64_t i = 0;
        while (i < avail) {
            uint8_t rec[64];
            struct jp_rec_hdr h;
            memcpy(&h, p + i * JP_SLOT_SIZE, sizeof h);
            uint32_t slots = jp_rec_slots(h.size);
            if (h.size < 4 || h.size > sizeof rec || slots > avail - i) {
                fprintf(stderr, "ring_bench: bad record\n");
                exit(1);
            }
            memcpy(rec, p + i * JP_SLOT_SIZE, h.size);
            i += slots;
            if (h.type == JP_REC_PAD)
                continue;
            uint64_t v;
            memcpy(&v, rec + 8, sizeof v);
            s += v;
            n++;
        }
        jp_ring_release(r, avail);
    }
    *sum += s;
    return n;
}

static uint64_t consume(struct jp_ring *r, uint64_t *sum)
{
    uint64_t n = 0;
    unsigned spins = 0;
    for (;;) {
        uint64_t k = consume_avail(r, sum);
        n += k;
        if (k) {
            spins = 0;
            continue;
        }
        if (jp_ring_drained(r))
            return n;
        backoff(&spins);
    }
}

/* Records per second from a forked producer to this process. */
static double cross_rate(uint32_t bytes, uint32_t slots, uint64_t n)
{
    struct jp_ring prod, cons;
    if (jp_ring_create(slots, &prod) < 0 || jp_ring_map(dup(prod.fd), &cons) < 0) {
        fprintf(stderr, "ring_bench: cannot create ring\n");
        exit(1);
    }
    int go[2];
    if (pipe(go) < 0)
        exit(1);
    pid_t pid = fork();
    if (pid < 0)
        exit(1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(1);
        produce(&prod, bytes, n);
        _exit(0);
    }
    uint64_t sum = 0;
    double t0 = now_ns();
    if (write(go[1], "g", 1) != 1)
        exit(1);
    uint64_t got = consume(&cons, &sum);
    double t = now_ns() - t0;
    int status;
    waitpid(pid, &status, 0);
    close(go[0]);
    close(go[1]);
    jp_ring_unmap(&cons);
    jp_ring_unmap(&prod);
    uint64_t want = n * (n - 1) / 2;
    if (got != n || sum != want || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "ring_bench: lost records (%llu of %llu)\n", (unsigned long long)got,
                (unsigned long long)n);
        exit(1);
    }
    return (double)n / (t / 1e9);
}

/* Baseline: one thread fills a quarter of the ring, drains it, repeats. */
static double alternating_rate(uint32_t bytes, uint32_t slots, uint64_t n)
{
    struct jp_ring r;
    if (jp_ring_create(slots, &r) < 0)
        exit(1);
    uint64_t chunk = slots / 4 / jp_rec_slots(bytes), sum = 0, got = 0;
    double t0 = now_ns();
    for (uint64_t i = 0; i < n;) {
        for (uint64_t k = 0; k < chunk && i < n; k++, i++) {
            uint8_t *p = jp_ring_reserve(&r, bytes);
            if (!p)
                exit(1);
            fill(p, bytes, i);
            if ((k + 1) % 16 == 0)
                jp_ring_commit(&r);
        }
        jp_ring_commit(&r);
        got += consume_avail(&r, &sum);
    }
    double t = now_ns() - t0;
    jp_ring_unmap(&r);
    if (got != n || sum != n * (n - 1) / 2) {
        fprintf(stderr, "ring_bench: baseline lost records\n");
        exit(1);
    }
    return (double)n / (t / 1e9);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    uint64_t push_total = quick ? 500000 : 20000000;
    uint64_t cross_n = quick ? 500000 : 20000000;
    int runs = quick ? 3 : RUNS;
    static const uint32_t sizes[] = {16, 32, 64};
    double v[RUNS], b[RUNS];

    struct jp_ring big;
    if (jp_ring_create(JP_RING_DEFAULT_SLOTS, &big) < 0) {
        fprintf(stderr, "ring_bench: cannot create ring\n");
        return 1;
    }
    size_t arena_size = (size_t)JP_RING_DEFAULT_SLOTS * JP_SLOT_SIZE;
    uint8_t *arena = malloc(arena_size);
    if (!arena)
        return 1;
    memset(arena, 0, arena_size);
    printf("ring_bench: %d runs each, median; ring of %u slots of %u bytes\n", runs,
           JP_RING_DEFAULT_SLOTS, JP_SLOT_SIZE);
    for (unsigned s = 0; s < 3; s++) {
        uint32_t bytes = sizes[s];
        uint32_t stride = jp_rec_slots(bytes) * JP_SLOT_SIZE;
        for (int i = 0; i < runs; i++) {
            v[i] = push_ns(&big, bytes, 1, push_total);
            b[i] = store_ns(arena, arena_size, stride, push_total);
        }
        double push1 = bench_median(v, runs), base = bench_median(b, runs);
        for (int i = 0; i < runs; i++)
            v[i] = push_ns(&big, bytes, 16, push_total);
        double push16 = bench_median(v, runs);
        printf("push %2u-byte record, commit each: %.2f ns/record\n", bytes, push1);
        printf("push %2u-byte record, commit per 16: %.2f ns/record\n", bytes, push16);
        printf("baseline plain %2u-byte store: %.2f ns/record (push/baseline %.2fx)\n", stride,
               base, push1 / base);
    }
    jp_ring_unmap(&big);
    free(arena);

    const uint32_t slots = 1u << 14; /* 512 KiB: fits in L2, like a busy agent's ring */
    for (unsigned s = 0; s < 3; s++) {
        uint32_t bytes = sizes[s];
        for (int i = 0; i < runs; i++) {
            v[i] = cross_rate(bytes, slots, cross_n);
            b[i] = alternating_rate(bytes, slots, cross_n);
        }
        double rate = bench_median(v, runs), base = bench_median(b, runs);
        printf("two processes, %2u-byte records: %.1f M records/s\n", bytes, rate / 1e6);
        printf("baseline one thread alternating, %2u-byte records: %.1f M records/s "
               "(two processes/baseline %.2fx)\n", bytes, base / 1e6, rate / base);
    }
    return 0;
}
