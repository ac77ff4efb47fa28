/* The shared-memory record ring: single producer (the agent, inside the profiled process),
 * single consumer (jettprofd), over one memfd mapped MAP_SHARED by both.
 *
 * Geometry: a JP_RING_HEADER_SIZE-byte header, then slot_count slots of JP_SLOT_SIZE bytes
 * (slot_count a power of two). Indices count slots and run free as uint64_t; the slot of index i
 * is i & (slot_count - 1); fill level is head - tail. The producer owns head, the closed flag
 * and the waiting flag, the consumer owns tail and the wake word; each side's words sit on its
 * own cache line. Memory ordering is documented in ring.c at the top and labelled at each
 * atomic.
 *
 * Backpressure: a producer that finds the ring full may sleep until the consumer releases slots
 * (jp_ring_wait: it raises `waiting`, then sleeps on the futex word `wake`); a consumer that
 * releases slots while `waiting` is raised bumps `wake` and wakes it (jp_ring_release). With
 * nobody waiting a release costs a seq_cst store and one load, never a system call. To the
 * consumer `waiting` is a hint only: a hostile producer that keeps it raised buys itself at
 * most one futex wake per release, and no size or index is ever taken from it.
 *
 * The consumer side never trusts the mapping: jp_ring_map() validates the whole header against
 * the real mapping size, and consumers copy each record out before looking at it.
 *
 * A run's rings. A run has one main ring (the control message RING) and up to
 * JP_CTL_MAX_WORKER_RINGS worker rings (WORKER_RING, not answered: the agent keeps within the
 * caps WELCOME states, and a run past them fails), one per runtime thread slot. Each ring has
 * one producer, so no two runtime threads share a ring, a lock or a read-modify-write on their
 * hot paths. The main ring carries RUN_START first, every definition (SOURCE_DEF, FRAME_DEF,
 * NODE_DEF), COUNTERS and RUN_STOP, and the events of any thread without a worker ring; a
 * worker ring carries only PAD, EXEC, CPU_SAMPLE, ALLOC, RESIZE and FREE (anything else there
 * is a protocol violation that fails the run). Each ring's identity starts unavailable and its
 * EXEC records apply to its own later records.
 *
 * The ordering contract. A producer
 *   1. sends WORKER_RING, whole, before it writes the first record to that ring;
 *   2. publishes whatever an event names before it publishes the event: a definition on the
 *      main ring before any ring names it, an allocation (or resize) on its ring before the
 *      program moves the object to another thread (a send and a receive, a migration, a lock
 *      order them);
 *   3. in a stream of format 2 (records.h), names with every RESIZE (RESIZE_SEQ) and FREE how
 *      many resizes of the block came before it, so a block whose size comes back to an
 *      earlier value while it moves between rings is still placed by more than its size.
 * So the daemon builds one consistent order (daemon/drain.c): it reads the worker rings' heads,
 * drains the main ring, then the worker rings up to those heads, and holds back a ring whose
 * next event names an id or node it has not been given yet (or a block of another size or
 * resize count), until a later pass finds it. A held event is taken as the violation it is only
 * once the daemon has read the socket to its end after seeing it (so every ring announced
 * before it is known) and two passes in a row could not place it, or it stayed held through
 * 2 * JP_CTL_MAX_WORKER_RINGS + 4 passes, or through more passes than the run has rings and a
 * second. RUN_STOP.record_count counts the records of all the run's rings; the EXEC records the
 * daemon injects where it switches rings are added to it. The merged order is what the engine
 * reads and what a capture stores, so a replay (one stream) gives the same bytes.
 */
#ifndef JETTPROF_PROTOCOL_RING_H
#define JETTPROF_PROTOCOL_RING_H

#include <stdint.h>

#include "protocol/records.h"

#define JP_RING_MAGIC 0x474e5250u /* "PRNG" little-endian */
#define JP_RING_VERSION 2u /* 2: the waiting flag and the wake word */
#define JP_RING_HEADER_SIZE 256u
#define JP_RING_MIN_SLOTS 64u
#define JP_RING_MAX_SLOTS (1u << 24) /* 512 MiB of slots */
#define JP_RING_DEFAULT_SLOTS (1u << 16) /* 2 MiB */

/* The shared header, as laid out in the mapping. */
struct jp_ring_shared {
    /* line 0: geometry, written once by the creator before the fd is shared */
    uint32_t magic;
    uint16_t version;
    uint16_t header_size; /* JP_RING_HEADER_SIZE */
    uint32_t slot_size;   /* JP_SLOT_SIZE */
    uint32_t slot_count;  /* power of two */
    uint64_t data_size;   /* slot_size * slot_count */
    uint8_t reserved0[40];
    /* line 1: producer-owned */
    uint64_t head;        /* next slot the producer will write */
    uint32_t closed;      /* 1 once the producer is done; no further commits */
    uint32_t waiting;     /* 1 while the producer sleeps (or is about to) for room: a hint */
    /* Gauges for an operator's view (`jettprofd status`), stored relaxed by the producer's slow
     * paths only: records it lost so far and nanoseconds it waited for room. Advisory and
     * untrusted: a profile's figures come from the COUNTERS records, never from these. */
    uint64_t gauge_lost;
    uint64_t gauge_wait_ns;
    uint8_t reserved1[32];
    /* line 2: consumer-owned */
    uint64_t tail;        /* next slot the consumer will read */
    uint32_t wake;        /* futex word: bumped by a release that found `waiting` raised */
    uint8_t reserved2[52];
    uint8_t reserved3[64];
};
_Static_assert(sizeof(struct jp_ring_shared) == JP_RING_HEADER_SIZE, "ring header is an ABI");

/* A process-local view of a mapped ring. Producer and consumer each hold their own (one
 * struct may also play both roles in a single thread, as the tests do). */
struct jp_ring {
    struct jp_ring_shared *sh;
    uint8_t *data;
    uint64_t mask;
    uint32_t slot_count;
    uint64_t map_size;
    int fd;
    /* producer side */
    uint64_t p_head;        /* local copy of head, published on commit */
    uint64_t p_tail_cache;  /* last tail seen; refreshed only when the ring looks full. While
                               the first lap is faulted in by demand it may lag the real tail
                               (never lead it), so the room check stops at p_ready too. */
    uint64_t p_ready;       /* first lap: slots before this index are faulted in */
    uint64_t p_lap_end;     /* first lap: the index where it ends (then every slot was) */
    uint32_t p_chunk;       /* first lap: slots faulted in by the next step (doubles) */
    uint32_t p_lazy;        /* 1 while the first lap is faulted in by demand */
    /* consumer side */
    uint64_t c_tail;
    uint64_t c_head_cache;
    uint32_t c_corrupt;     /* latched once the producer's head was seen out of bounds */
    uint32_t c_wake;        /* the last value this consumer stored in `wake` */
    uint64_t c_wakes;       /* futex wakes this consumer issued (tests, statistics) */
};

/* Creates a memfd of the right size, maps it and writes the header. The memfd is sealed against
 * shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) so a peer that maps it can
 * never be made to fault by a later ftruncate. slot_count: a power of two in
 * [JP_RING_MIN_SLOTS, JP_RING_MAX_SLOTS]. 0 or -errno (-EINVAL for a bad slot_count). */
int jp_ring_create(uint32_t slot_count, struct jp_ring *out);
/* Maps a ring from an fd received from an untrusted peer: validates magic, version,
 * header_size, slot_size, power-of-two slot_count within limits, data_size, that the fd is
 * sealed with F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL (checked before the size is read: else
 * the peer could truncate it under us and turn our next read into SIGBUS), that its real size
 * (fstat, read after the seals) equals header + data, that closed is 0 or 1, that
 * head - tail <= slot_count and that the reserved bytes are zero. -EPROTO (bad field) / -errno.
 * Takes ownership of fd only on success. */
int jp_ring_map(int fd, struct jp_ring *out);
/* Unmaps and closes. Safe on a zeroed struct. */
void jp_ring_unmap(struct jp_ring *r);
/* Producer: faults the ring's first lap in by demand, writable (MADV_POPULATE_WRITE), a step
 * ahead of the head: 64 KiB now, then a step (twice the last, up to 1 MiB) each time the head
 * reaches the faulted-in end, from the room check's slow path (below). So a ring costs the
 * memory its records have used (plus one step), not its size, and the producer's first lap
 * takes no page fault on its hot path (a memory-mode worker ring is 4096 pages: in a VM,
 * several nanoseconds on every event of that lap) but one system call a step. Pages once
 * faulted in stay committed for the ring's life.
 * 0, or -errno where the kernel cannot (older than 5.14): then the producer faults its pages
 * in as it writes them, as any mapping does, and the ring works the same. */
int jp_ring_populate(struct jp_ring *r);
/* Producer, the slow path of the room check (jp_ring_reserve's, and jp_ring_room's): reloads
 * the tail (B) and, in a first lap faulted in by demand, faults in the step `end` (an index past
 * the head) reaches. 1 when the slots before `end` are free and faulted in, 0 when the ring has
 * no room. */
int jp_ring__room(struct jp_ring *r, uint64_t end);

/* Memory ordering of the ring (the full table is at the top of ring.c):
 *   A  producer: store-release head (commit)          pairs with C
 *   B  producer: load-acquire tail (room check)        pairs with D
 *   C  consumer: load-acquire head (peek, fill)        pairs with A
 *   D  consumer: store-release tail (release)          pairs with B
 *   E  producer: store-release closed (close)          pairs with F
 *   F  consumer: load-acquire closed (drained)         pairs with E
 *   W1 producer: load-acquire wake, then W2 a seq_cst store waiting = 1, then W3 a
 *      seq_cst load of tail (B)                        pairs with K1, K2
 *   K1 consumer: D as a seq_cst store of tail, then K2 a seq_cst load of waiting; if
 *      raised, K3 store-release wake + 1 and FUTEX_WAKE pairs with W3, W2
 * The helpers below and jp_ring_wait/jp_ring_release are the only atomics on the header. */
static inline uint64_t jp_ring__load_acquire(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void jp_ring__store_release(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* The producer asks for the slot JP_RING_WRITE_AHEAD past its head in writable state: the
 * consumer, on another core, read that line a lap ago, and a store that finds the line
 * elsewhere holds up the stores after it until the line arrives (alloc_builder in memory mode:
 * the runtime's CPU, bench/RESULTS.md). A hint: no fault, no effect on what either side reads.
 * The inline hooks of the public header do the same (JETTPROF_RING_AHEAD_, the same distance). */
#define JP_RING_WRITE_AHEAD 16u
static inline void jp_ring__prefetch_w(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

/* Producer. Reserve space for a record of `bytes` (1..JP_REC_MAX_SIZE); returns a pointer to
 * contiguous slots, or NULL when the ring has no room (nothing is changed). When the record
 * would straddle the end, a JP_REC_PAD record fills the tail first (that needs room too: a
 * record of n slots may need up to 2n - 1 free slots). No system call, no allocation, no lock.
 * Several reserves may precede one commit (a batch); nothing is visible to the consumer before
 * the commit. The caller writes the whole record, header included, before committing.
 * A tail value that makes no sense (a misbehaving consumer) reads as "no room", never as room. */
static inline void *jp_ring_reserve(struct jp_ring *r, uint32_t bytes)
{
    if (bytes - 1u >= JP_REC_MAX_SIZE) /* 0 wraps to UINT32_MAX */
        return (void *)0;
    uint64_t n = jp_rec_slots(bytes);
    uint64_t head = r->p_head;
    uint64_t off = head & r->mask;
    uint64_t to_end = r->slot_count - off;
    uint64_t need = n <= to_end ? n : to_end + n;
    /* Unsigned fill level: head - tail is right across any wrap of the free-running indices. */
    if (head + need - r->p_tail_cache > r->slot_count && !jp_ring__room(r, head + need))
        return (void *)0; /* B in jp_ring__room */
    if (n > to_end) {
        struct jp_rec_hdr pad = {JP_REC_PAD, (uint16_t)(to_end * JP_SLOT_SIZE)};
        __builtin_memcpy(r->data + off * JP_SLOT_SIZE, &pad, sizeof pad);
        head += to_end;
        off = 0;
    }
    r->p_head = head + n;
    jp_ring__prefetch_w(r->data + ((head + n + JP_RING_WRITE_AHEAD) & r->mask) * JP_SLOT_SIZE);
    return r->data + off * JP_SLOT_SIZE;
}
/* Publishes every record reserved since the last commit. */
static inline void jp_ring_commit(struct jp_ring *r)
{
    jp_ring__store_release(&r->sh->head, r->p_head); /* A: pairs with C */
}
/* Marks the producer closed (after a final commit). */
void jp_ring_close(struct jp_ring *r);
/* Producer: 1 when a reserve of `bytes` would find room now (reloads the tail, B), else 0.
 * Changes nothing but the cached tail. */
int jp_ring_room(struct jp_ring *r, uint32_t bytes);
/* Producer, ring full: sleeps until the consumer releases slots, at most timeout_ns (a futex
 * wait on `wake`, shared between the two processes). Returns 1 when a reserve of `bytes` finds
 * room now, 0 otherwise (the timeout passed, a signal, or a release too small for `bytes`): the
 * caller decides whether to wait again. Raises `waiting` only for the sleep and lowers it
 * before returning, so a consumer never pays a wake for a producer that is not waiting. No
 * wake-up is lost: see the ordering table in ring.c (W1-W3 against K1-K3). */
int jp_ring_wait(struct jp_ring *r, uint32_t bytes, uint64_t timeout_ns);

/* Consumer. Returns the number of committed, unread slots (0 if empty) and a pointer to the
 * first; the slots are contiguous up to the end of the ring (the count is capped there). The
 * memory stays writable by the producer: copy before validating.
 * If the producer's head is out of bounds (head - tail > slot_count: a hostile or broken
 * producer), peek returns 0, never a count past the mapping, and latches the ring corrupt:
 * jp_ring_check() and jp_ring_drained() then report -EPROTO. A consumer loop therefore ends on
 * `jp_ring_drained(r) != 0` and tells a clean end (1) from a broken ring (< 0).
 * Records never straddle the end and commits publish whole records, so every record that starts
 * inside the returned slots also ends inside them: a header whose jp_rec_slots(size) runs past
 * the returned count (or a size below 4) is a producer violation, not "wait for more". */
uint64_t jp_ring_peek(struct jp_ring *r, const uint8_t **first);
/* Releases `slots` slots (<= what peek returned) back to the producer. Releasing more than was
 * peeked is clamped to what was peeked. When the producer has raised `waiting`, bumps `wake`
 * and wakes it (one system call); otherwise no system call. Releasing 0 slots does nothing. */
void jp_ring_release(struct jp_ring *r, uint64_t slots);
/* 1 when the producer has closed and every committed slot has been read, 0 while more may
 * come, -EPROTO once the ring was found corrupt. */
int jp_ring_drained(struct jp_ring *r);
/* 0, or -EPROTO when the producer's head is (or was once seen) out of bounds. */
int jp_ring_check(struct jp_ring *r);
/* Consumer. The fill level: slots committed by the producer and not yet released by this
 * consumer (head - tail as free-running indices), counted across the end of the ring (peek's
 * count stops there), PAD slots included. Changes nothing, latches nothing: a head out of
 * bounds (or a ring already latched corrupt) reads as 0, as peek does, and jp_ring_check() is
 * what reports it. For policy (how soon to drain again), never for reading slots: that is
 * peek's job.
 * Ordering: head is loaded with acquire (C, pairs with A), the same load as peek's, so a count
 * this thread acts on never runs ahead of the slots it covers: each one counted is complete for
 * this thread. The tail is the consumer's own copy (c_tail, published by D), read plainly. */
uint64_t jp_ring_fill(const struct jp_ring *r);

/* The producer's gauges as last stored (relaxed loads: a display, not a synchronisation). */
static inline void jp_ring_gauges(const struct jp_ring *r, uint64_t *lost, uint64_t *wait_ns)
{
    *lost = __atomic_load_n(&r->sh->gauge_lost, __ATOMIC_RELAXED);
    *wait_ns = __atomic_load_n(&r->sh->gauge_wait_ns, __ATOMIC_RELAXED);
}

/* Test hook: start a fresh ring's free-running indices at `index` (both sides), e.g. just below
 * 2^32 or 2^64 - n, to prove wrap-around is handled. Writes the shared header too, so a view
 * mapped afterwards starts there as well. */
void jp_ring_set_start_index(struct jp_ring *r, uint64_t index);

#endif
