/* The ring's single-process behaviour: geometry, full and empty, batches, PAD at the end,
 * free-running indices past 2^32 and 2^64, header validation of a peer's fd, a hostile head,
 * and the backpressure words (a producer sleeping for room, the release that wakes it). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "protocol/ring.h"

/* Test records: a header, the sequence number, then bytes derived from it. */
static void fill(uint8_t *p, uint32_t bytes, uint64_t seq)
{
    struct jp_rec_hdr h = {JP_REC_NODE_DEF, (uint16_t)bytes};
    memcpy(p, &h, sizeof h);
    for (uint32_t i = 4; i < bytes; i++)
        p[i] = (uint8_t)(seq * 31u + i);
    if (bytes >= 12)
        memcpy(p + 4, &seq, sizeof seq);
}

static int push(struct jp_ring *r, uint32_t bytes, uint64_t seq)
{
    uint8_t *p = jp_ring_reserve(r, bytes);
    if (!p)
        return 0;
    fill(p, bytes, seq);
    return 1;
}

/* Pops one record (skipping PAD), checks its contents; returns its size or 0 if empty. */
static uint32_t pop(struct jp_ring *r, uint64_t seq)
{
    for (;;) {
        const uint8_t *p;
        uint64_t n = jp_ring_peek(r, &p);
        if (n == 0)
            return 0;
        struct jp_rec_hdr h;
        memcpy(&h, p, sizeof h);
        cr_assert(h.size >= 4 && jp_rec_slots(h.size) <= n, "record %u bytes in %llu slots",
                  h.size, (unsigned long long)n);
        if (h.type == JP_REC_PAD) {
            jp_ring_release(r, jp_rec_slots(h.size));
            continue;
        }
        uint8_t want[JP_REC_MAX_SIZE];
        fill(want, h.size, seq);
        cr_assert(memcmp(want, p, h.size) == 0, "record %llu content", (unsigned long long)seq);
        jp_ring_release(r, jp_rec_slots(h.size));
        return h.size;
    }
}

Test(ring, create_rejects_bad_slot_counts)
{
    struct jp_ring r;
    uint32_t bad[] = {0, 1, 32, JP_RING_MIN_SLOTS - 1, JP_RING_MIN_SLOTS + 1, 100, 3u << 10,
                      JP_RING_MAX_SLOTS * 2u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(jp_ring_create(bad[i], &r), -EINVAL, "slot_count %u", bad[i]);
    cr_assert_eq(jp_ring_create(JP_RING_MIN_SLOTS, &r), 0, "minimum");
    cr_assert_eq(r.sh->slot_count, JP_RING_MIN_SLOTS, "header slot count");
    cr_assert_eq(r.sh->data_size, JP_RING_MIN_SLOTS * JP_SLOT_SIZE, "header data size");
    cr_assert_eq(r.sh->magic, JP_RING_MAGIC, "magic");
    jp_ring_unmap(&r);
    jp_ring_unmap(&r); /* idempotent on the zeroed struct */
}

Test(ring, empty_then_closed_is_drained)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0, "create");
    const uint8_t *p = NULL;
    cr_assert_eq(jp_ring_peek(&r, &p), 0, "empty");
    cr_assert_eq(jp_ring_drained(&r), 0, "open ring is not drained");
    cr_assert(push(&r, 32, 1), "push");
    jp_ring_commit(&r);
    jp_ring_close(&r);
    cr_assert_eq(jp_ring_drained(&r), 0, "closed with a record left");
    cr_assert_eq(pop(&r, 1), 32, "pop");
    cr_assert_eq(jp_ring_drained(&r), 1, "closed and read");
    cr_assert_eq(jp_ring_check(&r), 0, "healthy");
    jp_ring_unmap(&r);
}

Test(ring, nothing_visible_before_commit)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0, "create");
    cr_assert(push(&r, 20, 1), "push");
    cr_assert_eq(jp_ring_peek(&r, NULL), 0, "uncommitted record is invisible");
    cr_assert_eq(r.sh->head, 0, "head not yet published");
    jp_ring_commit(&r);
    cr_assert_eq(jp_ring_peek(&r, NULL), 1, "visible after commit");
    jp_ring_unmap(&r);
}

Test(ring, full_refuses_then_frees_one_slot)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0, "create");
    for (uint64_t i = 0; i < 64; i++)
        cr_assert(push(&r, 32, i), "slot %llu has room", (unsigned long long)i);
    cr_assert_not(push(&r, 32, 64), "65th record refused");
    cr_assert_not(push(&r, 1, 64), "even a 1-byte record");
    jp_ring_commit(&r);
    cr_assert_not(push(&r, 32, 64), "still full after commit");
    const uint8_t *p;
    cr_assert_eq(jp_ring_peek(&r, &p), 64, "all committed");
    cr_assert_eq(pop(&r, 0), 32, "read the first");
    cr_assert(push(&r, 32, 64), "room for one again");
    cr_assert_not(push(&r, 32, 65), "and only one");
    jp_ring_commit(&r);
    for (uint64_t i = 1; i <= 64; i++)
        cr_assert_eq(pop(&r, i), 32, "record %llu in order", (unsigned long long)i);
    cr_assert_eq(jp_ring_peek(&r, NULL), 0, "empty again");
    jp_ring_unmap(&r);
}

Test(ring, reserve_rejects_sizes_out_of_range)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(256, &r), 0, "create");
    cr_assert_null(jp_ring_reserve(&r, 0), "0 bytes");
    cr_assert_null(jp_ring_reserve(&r, JP_REC_MAX_SIZE + 1), "past the maximum");
    cr_assert_null(jp_ring_reserve(&r, UINT32_MAX), "huge");
    cr_assert_eq(r.p_head, 0, "nothing reserved");
    cr_assert_not_null(jp_ring_reserve(&r, JP_REC_MAX_SIZE), "the maximum fits");
    cr_assert_eq(r.p_head, JP_REC_MAX_SIZE / JP_SLOT_SIZE, "in 64 slots");
    jp_ring_unmap(&r);
}

Test(ring, batch_of_reserves_publishes_at_once)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(128, &r), 0, "create");
    uint32_t sizes[] = {32, 16, 64, 33, 4, 200};
    uint64_t slots = 0;
    for (unsigned i = 0; i < 6; i++) {
        cr_assert(push(&r, sizes[i], i), "reserve %u", i);
        slots += jp_rec_slots(sizes[i]);
        cr_assert_eq(jp_ring_peek(&r, NULL), 0, "nothing before the batch commit");
    }
    jp_ring_commit(&r);
    cr_assert_eq(jp_ring_peek(&r, NULL), slots, "whole batch");
    for (unsigned i = 0; i < 6; i++)
        cr_assert_eq(pop(&r, i), sizes[i], "record %u", i);
    jp_ring_unmap(&r);
}

Test(ring, pads_a_record_that_would_straddle_the_end)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0, "create");
    jp_ring_set_start_index(&r, 60); /* 4 slots to the end */
    cr_assert(push(&r, 5 * JP_SLOT_SIZE, 7), "5-slot record");
    cr_assert_eq(r.p_head, 60 + 4 + 5, "PAD took the 4 tail slots");
    jp_ring_commit(&r);
    const uint8_t *p;
    cr_assert_eq(jp_ring_peek(&r, &p), 4, "peek stops at the end of the ring");
    struct jp_rec_hdr h;
    memcpy(&h, p, sizeof h);
    cr_assert_eq(h.type, JP_REC_PAD, "PAD first");
    cr_assert_eq(h.size, 4 * JP_SLOT_SIZE, "PAD covers the tail");
    jp_ring_release(&r, 4);
    cr_assert_eq(jp_ring_peek(&r, &p), 5, "record at slot 0");
    cr_assert(p == r.data, "contiguous from the start");
    cr_assert_eq(pop(&r, 7), 5 * JP_SLOT_SIZE, "record intact");
    jp_ring_unmap(&r);
}

Test(ring, straddling_record_without_room_for_pad_changes_nothing)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0, "create");
    jp_ring_set_start_index(&r, 60);
    /* 4 tail slots + 61 slots > 64: refused, and no PAD was written. */
    memset(r.data + 60 * JP_SLOT_SIZE, 0xee, 4);
    cr_assert_null(jp_ring_reserve(&r, 61 * JP_SLOT_SIZE), "no room for PAD + record");
    cr_assert_eq(r.p_head, 60, "head unchanged");
    cr_assert_eq(r.data[60 * JP_SLOT_SIZE], 0xee, "no PAD written");
    cr_assert_not_null(jp_ring_reserve(&r, 60 * JP_SLOT_SIZE), "4 + 60 fits exactly");
    jp_ring_unmap(&r);
}

static void run_across(uint64_t start, unsigned count)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0, "create");
    jp_ring_set_start_index(&r, start);
    uint64_t pushed = 0, popped = 0;
    static const uint32_t sizes[] = {32, 12, 64, 100, 32, 7, 160};
    while (popped < count) {
        /* Fill as far as it goes in batches, then drain a little: exercises both caches. */
        while (pushed < count && push(&r, sizes[pushed % 7], pushed))
            pushed++;
        jp_ring_commit(&r);
        for (int k = 0; k < 3 && popped < pushed; k++, popped++)
            cr_assert_eq(pop(&r, popped), sizes[popped % 7], "record %llu",
                         (unsigned long long)popped);
    }
    cr_assert_eq(jp_ring_peek(&r, NULL), 0, "empty at the end");
    cr_assert(r.c_tail - start > 64 * 10, "went round the ring many times");
    cr_assert_eq(jp_ring_check(&r), 0, "never looked corrupt");
    jp_ring_unmap(&r);
}

Test(ring, wraps_past_u32_max)
{
    run_across(UINT32_MAX - 100u, 2000);
}

Test(ring, wraps_past_u64_max)
{
    run_across(UINT64_MAX - 100u, 2000);
}

Test(ring, start_index_is_seen_by_a_later_mapping)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(64, &prod), 0, "create");
    jp_ring_set_start_index(&prod, (uint64_t)1 << 32);
    cr_assert_eq(jp_ring_map(dup(prod.fd), &cons), 0, "map");
    cr_assert(push(&prod, 32, 5), "push");
    jp_ring_commit(&prod);
    cr_assert_eq(pop(&cons, 5), 32, "consumer view reads it");
    cr_assert_eq(prod.sh->tail, ((uint64_t)1 << 32) + 1, "tail published");
    jp_ring_unmap(&cons);
    jp_ring_unmap(&prod);
}

Test(ring, release_is_clamped_to_what_was_peeked)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0, "create");
    cr_assert(push(&r, 32, 0), "push");
    jp_ring_commit(&r);
    cr_assert_eq(jp_ring_peek(&r, NULL), 1, "one");
    jp_ring_release(&r, 50);
    cr_assert_eq(r.sh->tail, 1, "tail moved by one only");
    jp_ring_release(&r, 1);
    cr_assert_eq(r.sh->tail, 1, "nothing more to release");
    jp_ring_unmap(&r);
}

/* The fill level counts committed slots only, across the ring's end (where peek's count stops)
 * and across the free-running indices' wrap, PAD slots included, and shrinks only on release. */
static void fill_across(uint64_t start)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0, "create");
    jp_ring_set_start_index(&r, start);
    cr_assert_eq(jp_ring_fill(&r), 0, "empty");
    for (uint64_t i = 0; i < 50; i++)
        cr_assert(push(&r, 32, i), "push %llu", (unsigned long long)i);
    cr_assert_eq(jp_ring_fill(&r), 0, "reserved, not committed");
    jp_ring_commit(&r);
    cr_assert_eq(jp_ring_fill(&r), 50, "committed");
    for (uint64_t i = 0; i < 40; i++)
        cr_assert_eq(pop(&r, i), 32, "pop %llu", (unsigned long long)i);
    cr_assert_eq(jp_ring_fill(&r), 10, "released slots are not counted");
    /* Four 3-slot records end at slot 62; the fifth needs a 2-slot PAD before it. */
    for (uint64_t i = 0; i < 5; i++)
        cr_assert(push(&r, 3 * JP_SLOT_SIZE, 100 + i), "push %llu", (unsigned long long)i);
    jp_ring_commit(&r);
    cr_assert_eq(jp_ring_fill(&r), 10 + 4 * 3 + 2 + 3, "PAD slots and the wrap counted");
    /* peek still hands out the 10 slots of the head it cached; fill loads the head anew */
    cr_assert_eq(jp_ring_peek(&r, NULL), 10, "peek's cached head");
    cr_assert_eq(jp_ring_fill(&r), 27, "peek changes nothing");
    for (uint64_t i = 40; i < 50; i++)
        cr_assert_eq(pop(&r, i), 32, "pop %llu", (unsigned long long)i);
    cr_assert_eq(jp_ring_peek(&r, NULL), 4 * 3 + 2, "peek stops at the end");
    cr_assert_eq(jp_ring_fill(&r), 4 * 3 + 2 + 3, "fill does not");
    jp_ring_unmap(&r);
}

Test(ring, fill_counts_committed_unreleased_slots)
{
    fill_across(0);
}

Test(ring, fill_counts_across_u64_max)
{
    fill_across(UINT64_MAX - 63u); /* slot 0, and the indices wrap */
}

Test(ring_consumer, fill_reads_a_bad_head_as_empty)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(64, &prod), 0, "create");
    cr_assert_eq(jp_ring_map(dup(prod.fd), &cons), 0, "map");
    cr_assert(push(&prod, 32, 1), "push");
    jp_ring_commit(&prod);
    cr_assert_eq(jp_ring_fill(&cons), 1, "honest head");
    prod.sh->head = 65;
    cr_assert_eq(jp_ring_fill(&cons), 0, "65 slots in a 64-slot ring is no count");
    cr_assert_eq(cons.c_corrupt, 0, "fill latches nothing");
    cr_assert_eq(jp_ring_check(&cons), -EPROTO, "check reports it");
    prod.sh->head = 1;
    cr_assert_eq(jp_ring_fill(&cons), 0, "latched corrupt stays empty");
    jp_ring_unmap(&cons);
    jp_ring_unmap(&prod);
}

/* Header validation: each field tampered in a fresh ring's fd must be refused with -EPROTO, and
 * the fd stays the caller's. */
typedef void (*tamper_fn)(struct jp_ring_shared *h);
static void t_magic(struct jp_ring_shared *h) { h->magic ^= 1u; }
static void t_version(struct jp_ring_shared *h) { h->version = JP_RING_VERSION + 1u; }
static void t_version0(struct jp_ring_shared *h) { h->version = 0; }
static void t_header_size(struct jp_ring_shared *h) { h->header_size = 128; }
static void t_slot_size(struct jp_ring_shared *h) { h->slot_size = 64; }
static void t_slot_count_npot(struct jp_ring_shared *h) { h->slot_count = 96; }
static void t_slot_count_zero(struct jp_ring_shared *h) { h->slot_count = 0; }
static void t_slot_count_small(struct jp_ring_shared *h) { h->slot_count = 32; h->data_size = 32 * 32; }
static void t_slot_count_half(struct jp_ring_shared *h)
{
    /* self-consistent, but the mapping is bigger than it says */
    h->slot_count /= 2;
    h->data_size /= 2;
}
static void t_slot_count_huge(struct jp_ring_shared *h) { h->slot_count = 1u << 31; }
static void t_data_size(struct jp_ring_shared *h) { h->data_size += JP_SLOT_SIZE; }
static void t_data_size_wrap(struct jp_ring_shared *h) { h->data_size = UINT64_MAX - 255u; }
static void t_closed(struct jp_ring_shared *h) { h->closed = 2; }
static void t_head_ahead(struct jp_ring_shared *h) { h->head = h->tail + h->slot_count + 1u; }
static void t_head_behind(struct jp_ring_shared *h) { h->head = h->tail - 1u; }
static void t_reserved0(struct jp_ring_shared *h) { h->reserved0[39] = 1; }
static void t_reserved1(struct jp_ring_shared *h) { h->reserved1[0] = 1; }
static void t_reserved1_end(struct jp_ring_shared *h) { h->reserved1[31] = 1; }
static void t_reserved2(struct jp_ring_shared *h) { h->reserved2[17] = 1; }
static void t_reserved3(struct jp_ring_shared *h) { h->reserved3[63] = 1; }

Test(ring_map, accepts_a_valid_ring)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(128, &prod), 0, "create");
    prod.sh->head = 128; /* a full ring with tail 0 is fine */
    prod.sh->closed = 1;
    prod.sh->gauge_lost = 3; /* a producer that already lost and waited: gauges, not checked */
    prod.sh->gauge_wait_ns = 5000;
    int fd = dup(prod.fd);
    cr_assert_eq(jp_ring_map(fd, &cons), 0, "valid ring maps");
    cr_assert_eq(cons.fd, fd, "owns the fd");
    cr_assert_eq(cons.slot_count, 128, "geometry");
    cr_assert_eq(jp_ring_peek(&cons, NULL), 128, "sees the full ring");
    uint64_t lost, wait_ns;
    jp_ring_gauges(&cons, &lost, &wait_ns);
    cr_expect(lost == 3 && wait_ns == 5000, "the consumer reads the gauges: %llu %llu",
              (unsigned long long)lost, (unsigned long long)wait_ns);
    jp_ring_unmap(&cons);
    jp_ring_unmap(&prod);
}

Test(ring_map, rejects_each_tampered_field)
{
    static const struct {
        const char *name;
        tamper_fn fn;
    } cases[] = {
        {"magic", t_magic},
        {"version", t_version},
        {"version 0", t_version0},
        {"header_size", t_header_size},
        {"slot_size", t_slot_size},
        {"slot_count not a power of two", t_slot_count_npot},
        {"slot_count zero", t_slot_count_zero},
        {"slot_count below minimum", t_slot_count_small},
        {"slot_count smaller than the mapping", t_slot_count_half},
        {"slot_count above maximum", t_slot_count_huge},
        {"data_size", t_data_size},
        {"data_size near overflow", t_data_size_wrap},
        {"closed", t_closed},
        {"head past tail + slot_count", t_head_ahead},
        {"head behind tail", t_head_behind},
        {"reserved0", t_reserved0},
        {"reserved1", t_reserved1},
        {"reserved1 end", t_reserved1_end},
        {"reserved2", t_reserved2},
        {"reserved3", t_reserved3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jp_ring prod, cons;
        cr_assert_eq(jp_ring_create(128, &prod), 0, "create");
        jp_ring_set_start_index(&prod, 1000);
        struct jp_ring_shared before = *prod.sh;
        cases[i].fn(prod.sh);
        cr_assert(memcmp(&before, prod.sh, sizeof before) != 0, "%s: tampered", cases[i].name);
        int fd = dup(prod.fd);
        cr_assert_eq(jp_ring_map(fd, &cons), -EPROTO, "%s: refused", cases[i].name);
        cr_assert_neq(fcntl(fd, F_GETFD), -1, "%s: fd left open for the caller", cases[i].name);
        *prod.sh = before;
        cr_assert_eq(jp_ring_map(fd, &cons), 0, "%s: restored header maps", cases[i].name);
        jp_ring_unmap(&cons);
        jp_ring_unmap(&prod);
    }
}

static int make_memfd(uint64_t size, int seal)
{
    int fd = memfd_create("test-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert_geq(fd, 0, "memfd");
    cr_assert_eq(ftruncate(fd, (off_t)size), 0, "ftruncate");
    if (seal)
        cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0,
                     "seal");
    return fd;
}

static void write_header(int fd, uint32_t slots)
{
    struct jp_ring_shared h;
    memset(&h, 0, sizeof h);
    h.magic = JP_RING_MAGIC;
    h.version = JP_RING_VERSION;
    h.header_size = JP_RING_HEADER_SIZE;
    h.slot_size = JP_SLOT_SIZE;
    h.slot_count = slots;
    h.data_size = (uint64_t)slots * JP_SLOT_SIZE;
    cr_assert_eq(pwrite(fd, &h, sizeof h, 0), (ssize_t)sizeof h, "write header");
}

Test(ring_map, checks_the_real_size_and_seals)
{
    struct jp_ring cons;
    uint64_t good = JP_RING_HEADER_SIZE + 128u * JP_SLOT_SIZE;

    int fd = make_memfd(good, 1);
    write_header(fd, 128);
    cr_assert_eq(jp_ring_map(fd, &cons), 0, "hand-made valid ring");
    jp_ring_unmap(&cons);

    fd = make_memfd(good, 0);
    write_header(fd, 128);
    cr_assert_eq(jp_ring_map(fd, &cons), -EPROTO, "unsealed: could be truncated under us");
    close(fd);

    fd = make_memfd(good - JP_SLOT_SIZE, 1);
    write_header(fd, 128);
    cr_assert_eq(jp_ring_map(fd, &cons), -EPROTO, "file shorter than the header says");
    close(fd);

    fd = make_memfd(good + 4096, 1);
    write_header(fd, 128);
    cr_assert_eq(jp_ring_map(fd, &cons), -EPROTO, "file longer than the header says");
    close(fd);

    fd = make_memfd(100, 1);
    cr_assert_eq(jp_ring_map(fd, &cons), -EPROTO, "shorter than a header");
    close(fd);

    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0, "pipe");
    cr_assert_eq(jp_ring_map(pipefd[0], &cons), -EPROTO, "not a regular file");
    close(pipefd[0]);
    close(pipefd[1]);

    cr_assert_eq(jp_ring_map(-1, &cons), -EINVAL, "no fd");
    cr_assert_eq(jp_ring_map(12345, &cons), -EBADF, "closed fd");
}

/* Every seal the protocol requires, each one missing in turn: a file that can still grow, or
 * whose seals can still change, is refused like one that can shrink. */
Test(ring_map, refuses_a_memfd_missing_a_seal)
{
    static const int partial[] = {0, F_SEAL_SHRINK, F_SEAL_SHRINK | F_SEAL_GROW,
                                  F_SEAL_SHRINK | F_SEAL_SEAL, F_SEAL_GROW | F_SEAL_SEAL};
    uint64_t good = JP_RING_HEADER_SIZE + 128u * JP_SLOT_SIZE;
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
        struct jp_ring cons;
        int fd = make_memfd(good, 0);
        write_header(fd, 128);
        if (partial[i])
            cr_assert_eq(fcntl(fd, F_ADD_SEALS, partial[i]), 0, "seal");
        cr_assert_eq(jp_ring_map(fd, &cons), -EPROTO, "seals 0x%x refused", partial[i]);
        close(fd);
    }
}

Test(ring_consumer, survives_a_producer_rewriting_head)
{
    static const uint64_t heads[] = {1001 + 129, 999, 0, UINT64_MAX, 1000 + (1ull << 40)};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        struct jp_ring prod, cons;
        cr_assert_eq(jp_ring_create(128, &prod), 0, "create");
        jp_ring_set_start_index(&prod, 1000);
        cr_assert_eq(jp_ring_map(dup(prod.fd), &cons), 0, "map");
        cr_assert(push(&prod, 32, 1), "push");
        jp_ring_commit(&prod);
        cr_assert_eq(pop(&cons, 1), 32, "honest record"); /* tail is now 1001 */
        __atomic_store_n(&prod.sh->head, heads[i], __ATOMIC_RELEASE);
        const uint8_t *p = NULL;
        cr_assert_eq(jp_ring_peek(&cons, &p), 0, "head %llu: no slots handed out",
                     (unsigned long long)heads[i]);
        cr_assert_eq(jp_ring_check(&cons), -EPROTO, "head %llu: reported",
                     (unsigned long long)heads[i]);
        cr_assert_eq(jp_ring_drained(&cons), -EPROTO, "drained reports it too");
        /* Latched: a producer putting head back does not make the ring trusted again. */
        __atomic_store_n(&prod.sh->head, 1001, __ATOMIC_RELEASE);
        cr_assert_eq(jp_ring_peek(&cons, &p), 0, "still refused");
        cr_assert_eq(jp_ring_check(&cons), -EPROTO, "still reported");
        jp_ring_unmap(&cons);
        jp_ring_unmap(&prod);
    }
}

Test(ring_consumer, check_notices_a_bad_head_before_peek)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(64, &prod), 0, "create");
    cr_assert_eq(jp_ring_map(dup(prod.fd), &cons), 0, "map");
    cr_assert_eq(jp_ring_check(&cons), 0, "healthy");
    prod.sh->head = 65;
    cr_assert_eq(jp_ring_check(&cons), -EPROTO, "65 committed slots in a 64-slot ring");
    jp_ring_unmap(&cons);
    jp_ring_unmap(&prod);
}

Test(ring_consumer, drained_sees_head_bad_after_close)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(64, &prod), 0, "create");
    cr_assert_eq(jp_ring_map(dup(prod.fd), &cons), 0, "map");
    prod.sh->head = 1000;
    jp_ring_close(&prod);
    cr_assert_eq(jp_ring_drained(&cons), -EPROTO, "closed with an impossible head");
    jp_ring_unmap(&cons);
    jp_ring_unmap(&prod);
}

Test(ring_producer, nonsense_tail_reads_as_no_room)
{
    struct jp_ring prod;
    cr_assert_eq(jp_ring_create(64, &prod), 0, "create");
    for (int i = 0; i < 64; i++)
        cr_assert(push(&prod, 32, (uint64_t)i), "fill");
    jp_ring_commit(&prod);
    prod.sh->tail = 1000; /* ahead of head: a broken consumer */
    cr_assert_not(push(&prod, 32, 0), "no room invented");
    prod.sh->tail = UINT64_MAX - 5;
    cr_assert_not(push(&prod, 32, 0), "no room invented");
    jp_ring_unmap(&prod);
}

/* ---- backpressure: the waiting flag and the wake word ---- */

static void fill_up(struct jp_ring *r)
{
    uint64_t seq = 0;
    while (push(r, JP_SLOT_SIZE, seq))
        seq++;
    jp_ring_commit(r);
}

Test(ring_wait, a_release_with_nobody_waiting_wakes_nobody)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0);
    for (int round = 0; round < 10; round++) {
        fill_up(&r);
        for (uint64_t i = 0; pop(&r, i); i++)
            ;
    }
    cr_assert_eq(r.c_wakes, 0, "no waiter flagged: no futex wake");
    cr_assert_eq(r.sh->wake, 0, "the wake word moves only for a waiter");
    jp_ring_release(&r, 0);
    cr_assert_eq(r.c_wakes, 0);
    jp_ring_unmap(&r);
}

Test(ring_wait, returns_at_once_when_there_is_room)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0);
    cr_assert_eq(jp_ring_wait(&r, JP_SLOT_SIZE, 60000000000u), 1, "room: no sleep");
    cr_assert_eq(r.sh->waiting, 0);
    cr_assert_eq(jp_ring_room(&r, JP_REC_MAX_SIZE + 1u), 0, "an impossible size has no room");
    jp_ring_unmap(&r);
}

Test(ring_wait, times_out_without_a_consumer_and_lowers_its_flag)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(64, &r), 0);
    fill_up(&r);
    cr_assert_eq(jp_ring_wait(&r, JP_SLOT_SIZE, 1000000u), 0, "full, nobody releases");
    cr_assert_eq(r.sh->waiting, 0, "not waiting any more: the flag is down");
    cr_assert_eq(jp_ring_wait(&r, JP_SLOT_SIZE, 0), 0, "a zero timeout only checks");
    jp_ring_unmap(&r);
}

Test(ring_wait, a_raised_flag_gets_one_wake_per_release_and_bumps_the_word)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(64, &prod), 0);
    fill_up(&prod);
    /* A waiter flagged at map time (or a hostile producer's garbage) maps fine. */
    prod.sh->waiting = 0xdeadbeefu;
    prod.sh->wake = 77;
    cr_assert_eq(jp_ring_map(dup(prod.fd), &cons), 0, "waiting and wake are not validated");
    uint32_t w0 = cons.sh->wake;
    for (uint64_t i = 0; i < 3; i++)
        cr_assert_gt(pop(&cons, i), 0);
    cr_assert_eq(cons.c_wakes, 3, "one wake per release while the flag is raised");
    cr_assert_neq(cons.sh->wake, w0, "each wake moves the word a sleeper compares");
    prod.sh->waiting = 0;
    cr_assert_gt(pop(&cons, 3), 0);
    cr_assert_eq(cons.c_wakes, 3, "flag down: no more wakes");
    cr_assert_eq(jp_ring_fill(&cons), 60, "the flag changed nothing the consumer reads");
    jp_ring_unmap(&cons);
    jp_ring_unmap(&prod);
}

struct sleeper {
    struct jp_ring *r;
    int room;
};

static void *sleep_for_room(void *p)
{
    struct sleeper *s = p;
    s->room = jp_ring_wait(s->r, JP_SLOT_SIZE, 60000000000u);
    return NULL;
}

Test(ring_wait, a_sleeping_producer_is_woken_by_the_release)
{
    struct jp_ring prod, cons;
    cr_assert_eq(jp_ring_create(64, &prod), 0);
    fill_up(&prod);
    cons = prod; /* one mapping: the threads share it, as ThreadSanitizer needs */
    struct sleeper s = {&prod, -1};
    pthread_t t;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(pthread_create(&t, NULL, sleep_for_room, &s), 0);
    while (!__atomic_load_n(&prod.sh->waiting, __ATOMIC_ACQUIRE))
        sched_yield();
    cr_assert_gt(pop(&cons, 0), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_assert_eq(s.room, 1, "woken with room");
    cr_assert_geq(cons.c_wakes, 1, "the release saw the flag and woke it");
    /* Its timeout is 60 s: only a lost wake-up takes anywhere near that long. */
    cr_assert_lt(t1.tv_sec - t0.tv_sec, 30, "woken by the release, not by its timeout");
    jp_ring_unmap(&prod);
}

/* ---- the first lap faulted in by demand (jp_ring_populate) ---- */

/* Pages of the ring's data in the page cache (a memfd's pages exist once faulted in). */
static uint64_t resident_pages(const struct jp_ring *r)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t n = (r->map_size + (size_t)pg - 1u) / (size_t)pg;
    unsigned char *v = malloc(n);
    cr_assert(v && mincore(r->sh, r->map_size, v) == 0);
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += v[i] & 1u;
    free(v);
    return k;
}

/* Whether the page holding slot index i is resident. */
static int slot_resident(const struct jp_ring *r, uint64_t i)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)(r->data + (i & r->mask) * JP_SLOT_SIZE) & ~((uintptr_t)pg - 1u);
    unsigned char v = 0;
    cr_assert(mincore((void *)a, (size_t)pg, &v) == 0);
    return v & 1u;
}

/* A 16 MiB ring (a memory-mode worker's) commits what its records use, not its size: 64 KiB
 * when made, and about what was written (plus one step of at most 1 MiB) after 1 MiB of
 * records. A ring faulted in whole when made holds 4097 pages from the start. */
Test(ring_demand, a_ring_commits_what_its_records_use)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(1u << 19, &r), 0);
    /* a kernel without MADV_POPULATE_WRITE (before 5.14) faults the pages as they are
     * written: the same bounds hold */
    int e = jp_ring_populate(&r);
    cr_assert(e == 0 || e == -EINVAL || e == -ENOSYS, "populate: %d", e);
    uint64_t made = resident_pages(&r);
    cr_assert(made <= 64u * 1024u / 4096u + 2u, "%llu pages resident once made",
              (unsigned long long)made);
    uint64_t n = (1u << 20) / JP_SLOT_SIZE; /* 1 MiB of one-slot records */
    for (uint64_t i = 0; i < n; i++) {
        cr_assert(push(&r, JP_SLOT_SIZE, i), "record %llu found no room", (unsigned long long)i);
        jp_ring_commit(&r);
        cr_assert_eq(pop(&r, i), JP_SLOT_SIZE);
    }
    uint64_t used = resident_pages(&r);
    cr_assert(used >= (1u << 20) / 4096u && used <= (2u << 20) / 4096u + 2u,
              "%llu pages resident after 1 MiB of records", (unsigned long long)used);
    jp_ring_unmap(&r);
}

/* The room the producer's check sees (what the public header's inline hooks use: p_head and
 * p_tail_cache alone) never runs past the slots faulted in, nor past the real tail; records
 * of every size read back in order across three laps and the end of the ring. */
Test(ring_demand, the_room_a_producer_sees_is_faulted_in_and_free)
{
    struct jp_ring r;
    cr_assert_eq(jp_ring_create(1u << 14, &r), 0); /* 512 KiB: steps of 64, 128, 256 KiB */
    int e = jp_ring_populate(&r); /* 0, or the kernel cannot: then nothing is faulted ahead */
    cr_assert(e == 0 || e == -EINVAL || e == -ENOSYS, "populate: %d", e);
    uint64_t seq_in = 0, seq_out = 0;
    for (int round = 0; round < 4000; round++) {
        /* the consumer lags: it reads one record for every two written, then catches up */
        for (int k = 0; k < 40; k++) {
            uint32_t bytes = JP_SLOT_SIZE * (1u + (uint32_t)((seq_in * 7u) % 3u));
            if (!push(&r, bytes, seq_in))
                break;
            jp_ring_commit(&r);
            seq_in++;
            uint64_t tail = __atomic_load_n(&r.sh->tail, __ATOMIC_RELAXED);
            cr_assert(r.p_head - r.p_tail_cache >= r.p_head - tail,
                      "the cached tail leads the real one");
            uint64_t last = r.p_tail_cache + r.slot_count - 1u; /* the last slot it may fill */
            cr_assert(e != 0 || slot_resident(&r, last) ||
                          r.p_head - r.p_tail_cache == r.slot_count,
                      "slot %llu is within the room but not faulted in",
                      (unsigned long long)last);
            if (k % 2)
                cr_assert(pop(&r, seq_out++) != 0);
        }
        if (round % 3 == 0)
            while (seq_out < seq_in)
                cr_assert(pop(&r, seq_out++) != 0);
    }
    while (seq_out < seq_in)
        cr_assert(pop(&r, seq_out++) != 0);
    cr_assert(seq_in * JP_SLOT_SIZE > 3u * (512u << 10), "only %llu records: not three laps",
              (unsigned long long)seq_in);
    cr_assert_eq(resident_pages(&r), r.map_size / 4096u + 1u, "a lap later, every page is in");
    jp_ring_unmap(&r);
}
