/* The ring under real concurrency: a producer and a consumer in two processes (fork, one memfd
 * mapped by both) and in two threads (so ThreadSanitizer can check the acquire/release pairs).
 * Every record carries its sequence number and payload derived from it; the consumer checks each
 * arrives once and in order, and both sides fold what they wrote / read into a checksum that
 * must agree at the end. Sizes vary so batches, multi-slot records and PAD at the end all occur
 * many times in a small ring. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol/ring.h"

#define STRESS_SLOTS 1024u
#define STRESS_BATCH 16u

static uint32_t size_of(uint64_t seq)
{
    if (seq % 1009u == 0)
        return 10 * JP_SLOT_SIZE - 3; /* 10 slots: straddles the end now and then */
    if (seq % 61u == 0)
        return 3 * JP_SLOT_SIZE;
    return seq % 3u ? JP_SLOT_SIZE : 24u;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static void backoff(unsigned *spins)
{
    if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

/* Writes count records; returns the checksum of what it wrote. A sleeping producer waits for
 * room on the ring's futex (jp_ring_wait) instead of spinning; its timeout is long, so a lost
 * wake-up would show as a stall of seconds per full ring. */
static uint64_t produce_as(struct jp_ring *r, uint64_t count, int sleeping)
{
    uint64_t sum = 1;
    unsigned spins = 0;
    for (uint64_t seq = 0; seq < count;) {
        uint32_t bytes = size_of(seq);
        uint8_t *p = jp_ring_reserve(r, bytes);
        if (!p) {
            jp_ring_commit(r);
            if (sleeping)
                (void)jp_ring_wait(r, bytes, 5000000000u);
            else
                backoff(&spins);
            continue;
        }
        spins = 0;
        struct jp_rec_hdr h = {JP_REC_ALLOC, (uint16_t)bytes};
        memcpy(p, &h, sizeof h);
        uint64_t word = mix(seq, 77);
        memcpy(p + 4, &seq, 8);
        memcpy(p + 12, &word, 8);
        p[bytes - 1] = (uint8_t)seq;
        sum = mix(mix(mix(sum, seq), word), (uint8_t)seq);
        if (++seq % STRESS_BATCH == 0)
            jp_ring_commit(r);
    }
    jp_ring_commit(r);
    jp_ring_close(r);
    return sum;
}

static uint64_t produce(struct jp_ring *r, uint64_t count)
{
    return produce_as(r, count, 0);
}

struct consumed {
    uint64_t records, pads, sum;
};

/* Reads until the producer closed and everything is read; asserts order and contents. */
static struct consumed consume(struct jp_ring *r)
{
    struct consumed c = {0, 0, 1};
    unsigned spins = 0;
    for (;;) {
        const uint8_t *p;
        uint64_t n = jp_ring_peek(r, &p);
        if (n == 0) {
            int d = jp_ring_drained(r);
            cr_assert_geq(d, 0, "ring reported corrupt");
            if (d == 1)
                break;
            backoff(&spins);
            continue;
        }
        spins = 0;
        uint64_t i = 0;
        while (i < n) {
            const uint8_t *rec = p + i * JP_SLOT_SIZE;
            struct jp_rec_hdr h;
            memcpy(&h, rec, sizeof h);
            uint64_t slots = jp_rec_slots(h.size);
            if (h.size < 4 || slots > n - i)
                cr_assert_fail("record of %u bytes at slot %llu of %llu", h.size,
                               (unsigned long long)i, (unsigned long long)n);
            i += slots;
            if (h.type == JP_REC_PAD) {
                c.pads++;
                continue;
            }
            uint64_t seq, word;
            memcpy(&seq, rec + 4, 8);
            memcpy(&word, rec + 12, 8);
            if (h.type != JP_REC_ALLOC || seq != c.records || h.size != size_of(seq))
                cr_assert_fail("expected record %llu, got type %u seq %llu size %u",
                               (unsigned long long)c.records, h.type, (unsigned long long)seq,
                               h.size);
            c.sum = mix(mix(mix(c.sum, seq), word), rec[h.size - 1]);
            c.records++;
        }
        jp_ring_release(r, n);
    }
    return c;
}

#define PROCESS_RECORDS 10000000ull

/* A producer process (fork) and this consumer over their own mappings of one memfd, starting at
 * free-running index `start`. Returns the consumer's view's wakes issued. */
static uint64_t two_processes(uint32_t slots, uint64_t start, uint64_t records, int sleeping)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(slots, &prod), 0, "create");
    jp_ring_set_start_index(&prod, start);
    cr_assert_eq(jp_ring_map(dup(prod.fd), &cons), 0, "consumer maps its own view");
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0, "pipe");
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        /* Producer: if the consumer's test fails and exits, do not spin on a full ring. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pfd[0]);
        uint64_t sum = produce_as(&prod, records, sleeping);
        _exit(write(pfd[1], &sum, sizeof sum) == (ssize_t)sizeof sum ? 0 : 1);
    }
    close(pfd[1]);
    struct consumed c = consume(&cons);
    uint64_t want;
    cr_assert_eq(read(pfd[0], &want, sizeof want), (ssize_t)sizeof want, "producer checksum");
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid, "wait");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "producer exited cleanly");
    cr_assert_eq(c.records, records, "every record arrived");
    cr_assert_eq(c.sum, want, "checksums agree: each record once, in order, intact");
    cr_assert_gt(c.pads, 0, "PAD records occurred");
    if (start > (uint64_t)UINT32_MAX - records)
        cr_assert_gt(cons.c_tail, (uint64_t)UINT32_MAX, "indices crossed 2^32");
    uint64_t wakes = cons.c_wakes;
    close(pfd[0]);
    jp_ring_unmap(&cons);
    jp_ring_unmap(&prod);
    return wakes;
}

Test(ring_stress, two_processes_move_10m_records_in_order)
{
    two_processes(STRESS_SLOTS, UINT32_MAX - 5000u, PROCESS_RECORDS, 0); /* cross 2^32 */
}

#define THREAD_RECORDS 2000000ull

struct prod_arg {
    struct jp_ring *r;
    uint64_t sum;
};

static void *producer_thread(void *p)
{
    struct prod_arg *a = p;
    a->sum = produce(a->r, THREAD_RECORDS);
    return NULL;
}

static void *sleeping_producer_thread(void *p)
{
    struct prod_arg *a = p;
    a->sum = produce_as(a->r, THREAD_RECORDS, 1);
    return NULL;
}

Test(ring_stress, two_threads_move_records_in_order)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(64, &prod), 0, "smallest ring: wraps constantly");
    jp_ring_set_start_index(&prod, UINT64_MAX - 3000u); /* cross 2^64 on the way */
    /* The consumer's view shares the producer's mapping rather than mapping the fd again:
     * ThreadSanitizer tracks addresses, and through a second mapping it could not see the two
     * threads touch the same slots. */
    cons = prod;
    struct prod_arg a = {&prod, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, producer_thread, &a), 0, "thread");
    struct consumed c = consume(&cons);
    cr_assert_eq(pthread_join(t, NULL), 0, "join");
    cr_assert_eq(c.records, THREAD_RECORDS, "every record arrived");
    cr_assert_eq(c.sum, a.sum, "checksums agree");
    cr_assert_gt(c.pads, 0, "PAD records occurred");
    jp_ring_unmap(&prod); /* cons shares the mapping */
}

/* Backpressure: the producer sleeps on the ring's futex whenever the ring is full and the
 * consumer wakes it from jp_ring_release. Under ThreadSanitizer the wait/wake protocol's atomics
 * are checked; everywhere, every record must arrive once and in order, and the consumer must
 * have woken the producer (the sleeping path really ran). Each wait has a 5 s timeout: a lost
 * wake-up would cost seconds per full ring, and this 64-slot ring fills tens of thousands of
 * times, so the test's deadline would end it. */
Test(ring_stress, a_sleeping_producer_is_woken_by_every_release_it_waits_for)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(64, &prod), 0, "smallest ring: full constantly");
    jp_ring_set_start_index(&prod, UINT32_MAX - 3000u);
    cons = prod; /* one mapping, as above, so ThreadSanitizer sees both sides */
    struct prod_arg a = {&prod, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, sleeping_producer_thread, &a), 0, "thread");
    struct consumed c = consume(&cons);
    cr_assert_eq(pthread_join(t, NULL), 0, "join");
    cr_assert_eq(c.records, THREAD_RECORDS, "every record arrived");
    cr_assert_eq(c.sum, a.sum, "checksums agree");
    cr_assert_gt(cons.c_wakes, 0, "the producer slept and was woken");
    cr_assert_eq(__atomic_load_n(&prod.sh->waiting, __ATOMIC_RELAXED), 0,
                 "a producer that is not waiting leaves the flag down");
    jp_ring_unmap(&prod);
}

/* The same across two processes: the futex word lives in the shared memfd, so the wait and the
 * wake must be the shared (not process-private) futex operations. */
Test(ring_stress, a_sleeping_producer_in_another_process_is_woken)
{
    cr_assert_gt(two_processes(STRESS_SLOTS, 0, THREAD_RECORDS, 1), 0,
                 "the producer slept and was woken");
}

/* The seal race: a hostile peer hands over an unsealed memfd of the right size and, while the
 * consumer is mapping it, shrinks it to one page and then seals it. A consumer that read the
 * size before confirming the seals would map the old size and take SIGBUS on the first slot past
 * the new end. Tried for a bounded number of rounds and at most a few seconds: every round must
 * be refused (a shrunk or unsealed file is never a ring) and nothing may fault.
 *
 * Left to timing, the shrink and seal seldom land between two of the map's looks at the file
 * (one round in thousands), the only place a reader that takes the size first can be caught.
 * So the map's looks (fcntl for the seals, fstat for the size: the executable is linked with
 * --wrap for both) pass through race_look: when the map's first look in a round comes before
 * the attacker began to shrink the file, it waits there, with what it read, until the file is
 * shrunk and sealed. Those rounds are counted, and some are required. On a busy machine the
 * attacker may run its whole round before the consumer gets a turn, so every other round it
 * waits (briefly, bounded) for the map's first look before it shrinks: those rounds reach the
 * dangerous state whatever the scheduler does, the others keep the timing random. */
#define RACE_SLOTS 1024u /* 32 KiB of slots: many pages past the one the file shrinks to */
#define RACE_ROUNDS 200000u
#define RACE_SECONDS 3

struct race {
    int fd;          /* the round's memfd; -1 while none is offered */
    uint32_t round;  /* the round the consumer has finished */
    uint32_t stop;
    uint32_t phase;  /* the attacker's step in the current round: RACE_* below */
    uint32_t looked; /* the round whose first look of the map is waiting in race_look */
};
/* Stored before the shrink begins (SHRINKING) and once the seal is on (SEALED). */
enum { RACE_OFFERED = 1, RACE_SHRINKING = 2, RACE_SEALED = 3 };

/* The consumer's fd under test (-1: none) and the round's state; the attacker's own fcntl
 * calls pass through the wrapper too, and only read `looked_fd`. */
static struct race *race_now;
static int looked_fd = -1;
static uint32_t race_looked, race_held;

/* After one of the map's looks at fd: the first of the round, made before the shrink began,
 * waits until the file is shrunk and sealed, so what it read is stale when the map goes on. */
static void race_look(int fd)
{
    if (fd < 0 || fd != __atomic_load_n(&looked_fd, __ATOMIC_RELAXED) || race_looked)
        return;
    race_looked = 1;
    if (__atomic_load_n(&race_now->phase, __ATOMIC_SEQ_CST) != RACE_OFFERED)
        return;
    __atomic_store_n(&race_now->looked, __atomic_load_n(&race_now->round, __ATOMIC_RELAXED) + 1u,
                     __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&race_now->phase, __ATOMIC_SEQ_CST) != RACE_SEALED)
        sched_yield();
    race_held++;
}

int __real_fcntl64(int fd, int cmd, ...);
int __wrap_fcntl64(int fd, int cmd, ...);
int __real_fstat64(int fd, struct stat *st);
int __wrap_fstat64(int fd, struct stat *st);

int __wrap_fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long); /* every command's argument fits a long, or is unused */
    va_end(ap);
    int r = __real_fcntl64(fd, cmd, arg);
    int e = errno;
    race_look(fd);
    errno = e;
    return r;
}

int __wrap_fstat64(int fd, struct stat *st)
{
    int r = __real_fstat64(fd, st);
    int e = errno;
    race_look(fd);
    errno = e;
    return r;
}

static void *race_attacker(void *p)
{
    struct race *rc = p;
    uint64_t map_size = JP_RING_HEADER_SIZE + (uint64_t)RACE_SLOTS * JP_SLOT_SIZE;
    uint32_t x = 2463534242u;
    for (uint32_t round = 1; !__atomic_load_n(&rc->stop, __ATOMIC_ACQUIRE); round++) {
        int fd = memfd_create("race-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)map_size) < 0)
            abort();
        struct jp_ring_shared h;
        memset(&h, 0, sizeof h);
        h.magic = JP_RING_MAGIC;
        h.version = JP_RING_VERSION;
        h.header_size = JP_RING_HEADER_SIZE;
        h.slot_size = JP_SLOT_SIZE;
        h.slot_count = RACE_SLOTS;
        h.data_size = (uint64_t)RACE_SLOTS * JP_SLOT_SIZE;
        if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
            abort();
        __atomic_store_n(&rc->phase, RACE_OFFERED, __ATOMIC_SEQ_CST);
        /* Release: the header written above is in the file before the consumer sees the fd. */
        __atomic_store_n(&rc->fd, fd, __ATOMIC_RELEASE);
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        for (volatile uint32_t spin = x % 4096u; spin; spin--)
            ;
        if (round % 2 == 0) { /* wait for the map's first look, 20 ms at most */
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            do {
                sched_yield();
                clock_gettime(CLOCK_MONOTONIC, &t1);
            } while (__atomic_load_n(&rc->looked, __ATOMIC_SEQ_CST) != round &&
                     (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) <
                         20000000L);
        }
        __atomic_store_n(&rc->phase, RACE_SHRINKING, __ATOMIC_SEQ_CST);
        if (ftruncate(fd, 4096) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
            abort();
        __atomic_store_n(&rc->phase, RACE_SEALED, __ATOMIC_SEQ_CST);
        /* Acquire: pairs with the consumer's release of `round` once it is done with fd. */
        while (__atomic_load_n(&rc->round, __ATOMIC_ACQUIRE) != round &&
               !__atomic_load_n(&rc->stop, __ATOMIC_ACQUIRE))
            sched_yield();
        close(fd);
    }
    return NULL;
}

Test(ring_stress, shrink_then_seal_race_never_maps_a_stale_size)
{
    struct race rc = {-1, 0, 0, 0, 0};
    race_now = &rc;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, race_attacker, &rc), 0, "thread");
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    uint32_t mapped = 0, rounds = 0;
    for (uint32_t round = 1; round <= RACE_ROUNDS; round++) {
        int fd;
        while ((fd = __atomic_exchange_n(&rc.fd, -1, __ATOMIC_ACQUIRE)) < 0)
            ;
        struct jp_ring cons;
        int mine = dup(fd);
        cr_assert_geq(mine, 0, "dup");
        race_looked = 0;
        __atomic_store_n(&looked_fd, mine, __ATOMIC_RELAXED);
        int r = jp_ring_map(mine, &cons);
        __atomic_store_n(&looked_fd, -1, __ATOMIC_RELAXED);
        if (r == 0) {
            /* Read every slot: past the shrunk end this is where SIGBUS would strike. */
            volatile const uint8_t *p = cons.data;
            uint32_t sum = 0;
            for (uint64_t i = 0; i < (uint64_t)RACE_SLOTS * JP_SLOT_SIZE; i += JP_SLOT_SIZE)
                sum += p[i];
            (void)sum;
            jp_ring_unmap(&cons);
            mapped++;
        } else {
            close(mine); /* the map takes the fd only on success */
            cr_assert_eq(r, -EPROTO, "round %u: refused as a protocol error, got %d", round, r);
        }
        rounds = round;
        __atomic_store_n(&rc.round, round, __ATOMIC_RELEASE);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= RACE_SECONDS)
            break;
    }
    __atomic_store_n(&rc.stop, 1u, __ATOMIC_RELEASE);
    cr_assert_eq(pthread_join(t, NULL), 0, "join");
    cr_log_info("%u rounds, %u shrunk and sealed between two looks of the map", rounds,
                race_held);
    cr_assert_eq(mapped, 0, "%u of %u rounds mapped a file that was shrunk or unsealed", mapped,
                 rounds);
    cr_assert_gt(race_held, 0, "in none of %u rounds did the map look at the file before it "
                 "was shrunk and sealed", rounds);
}
