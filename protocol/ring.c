/* The shared-memory SPSC record ring: creation, validation of a peer's mapping, the consumer.
 * The producer's hot path (reserve/commit) is inline in ring.h.
 *
 * Memory ordering. Two indices cross the process boundary, each written by one side only:
 *
 *   label  side      operation                       pairs with  what it guarantees
 *   A      producer  store-release head (commit)     C           the slots written before A are
 *                                                                 complete when the consumer
 *                                                                 sees the new head at C
 *   B      producer  load-acquire tail (room check)  D           the consumer has finished
 *                                                                 reading slots it released at D
 *                                                                 before the producer reuses them
 *   C      consumer  load-acquire head (peek, fill)  A
 *   D      consumer  store-release tail (release)    B
 *   E      producer  store-release closed (close)    F           the final head (A, program
 *                                                                 order before E) is visible to
 *                                                                 a consumer that saw closed
 *   F      consumer  load-acquire closed (drained)   E
 *
 * Backpressure adds a sleeping producer and a consumer that wakes it only when asked:
 *
 *   W1     producer  load-acquire wake (seq0)        K3          a wake bumped after W1 makes
 *                                                                 the futex wait return at once
 *   W2     producer  seq_cst store waiting = 1       K2
 *   W3     producer  seq_cst load of tail (B)        K1          Dekker: the producer's load
 *                                                                 of tail after W2, or the
 *                                                                 consumer's load of waiting
 *                                                                 (K2) after K1, sees the other
 *                                                                 side's store
 *          producer  FUTEX_WAIT(wake, seq0) if W3 still finds no room
 *   K1     consumer  D as a seq_cst store of tail    W3
 *   K2     consumer  seq_cst load of waiting         W2
 *   K3     consumer  if raised: store-release wake = c_wake + 1, then FUTEX_WAKE
 *
 * Why no wake-up is lost. Either the producer's W3 sees the tail of the release (then
 * it does not sleep), or the consumer's K2 after K1 sees waiting = 1 (the four operations are
 * seq_cst, so they have one total order and both loads cannot miss both stores; seq_cst
 * operations rather than fences, which ThreadSanitizer does not model). In the second case K2
 * reads W2's store, so W1, which is sequenced before W2, happens before K3: W1 cannot have
 * read K3's value, seq0 differs from
 * the word once K3 stored it, and the kernel's FUTEX_WAIT, which compares the word and queues
 * the waiter atomically against FUTEX_WAKE, either returns at once (it sees the bump) or is
 * queued before the wake and woken by it. The producer never trusts being woken either: it
 * re-checks the room and waits with a timeout, so a consumer that never wakes it (an old or a
 * hostile one) slows it down, never hangs it.
 *
 * Each side keeps a cached copy of the other's index and reloads it only when the cached value
 * says "full" (producer) or "empty" (consumer), so in steady state a push touches only the
 * producer's own cache line. Indices are free-running uint64_t; the fill level is the unsigned
 * difference head - tail and a slot is index & mask, so no index is ever wrapped by hand.
 *
 * The geometry line is written once by the creator before the fd is shared; passing the fd
 * (sendmsg, fork) orders those plain stores before the peer's first read.
 */
#include "protocol/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint32_t load_acquire32(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static void store_release32(uint32_t *p, uint32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
static int is_pow2(uint32_t v)
{
    return v && !(v & (v - 1u));
}

static void view_init(struct jp_ring *r, void *base, uint64_t map_size, int fd,
                      uint32_t slot_count)
{
    memset(r, 0, sizeof *r);
    r->sh = base;
    r->data = (uint8_t *)base + JP_RING_HEADER_SIZE;
    r->slot_count = slot_count;
    r->mask = (uint64_t)slot_count - 1u;
    r->map_size = map_size;
    r->fd = fd;
}

int jp_ring_create(uint32_t slot_count, struct jp_ring *out)
{
    if (!out || !is_pow2(slot_count) || slot_count < JP_RING_MIN_SLOTS ||
        slot_count > JP_RING_MAX_SLOTS)
        return -EINVAL;
    uint64_t data_size = (uint64_t)slot_count * JP_SLOT_SIZE;
    uint64_t map_size = JP_RING_HEADER_SIZE + data_size;
    int fd = memfd_create("jettprof-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int r;
    if (ftruncate(fd, (off_t)map_size) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    void *base = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        r = -errno;
        close(fd);
        return r;
    }
    /* A fresh memfd reads as zeros: indices, closed and reserved space start at 0. */
    struct jp_ring_shared *sh = base;
    sh->magic = JP_RING_MAGIC;
    sh->version = JP_RING_VERSION;
    sh->header_size = JP_RING_HEADER_SIZE;
    sh->slot_size = JP_SLOT_SIZE;
    sh->slot_count = slot_count;
    sh->data_size = data_size;
    view_init(out, base, map_size, fd, slot_count);
    return 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* Checks a private snapshot of the header; the peer may keep writing the shared one. */
static int header_valid(const struct jp_ring_shared *h, uint64_t real_size)
{
    if (h->magic != JP_RING_MAGIC || h->version != JP_RING_VERSION ||
        h->header_size != JP_RING_HEADER_SIZE || h->slot_size != JP_SLOT_SIZE)
        return 0;
    if (!is_pow2(h->slot_count) || h->slot_count < JP_RING_MIN_SLOTS ||
        h->slot_count > JP_RING_MAX_SLOTS)
        return 0;
    if (h->data_size != (uint64_t)h->slot_count * JP_SLOT_SIZE)
        return 0;
    if (real_size != JP_RING_HEADER_SIZE + h->data_size)
        return 0;
    if (h->closed > 1u || h->head - h->tail > h->slot_count)
        return 0;
    /* waiting, wake and the gauges are not checked: a producer may already wait or have lost
     * records, and none of them is trusted. */
    return all_zero(h->reserved0, sizeof h->reserved0) &&
           all_zero(h->reserved1, sizeof h->reserved1) &&
           all_zero(h->reserved2, sizeof h->reserved2) &&
           all_zero(h->reserved3, sizeof h->reserved3);
}

/* The seals every ring fd must carry before its size means anything: without SHRINK the peer
 * can truncate the file under our mapping (SIGBUS on the next read), without GROW the size we
 * checked is not the size that stays, and without SEAL it could still change either. */
#define RING_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

int jp_ring_map(int fd, struct jp_ring *out)
{
    if (!out || fd < 0)
        return -EINVAL;
    /* Seals first, size second: a size read before the seals were confirmed may already be
     * stale (the peer shrinks the file, then seals it). Once all three seals are set the size
     * can never change again, so the fstat below reads the size we map. */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return errno == EBADF ? -EBADF : -EPROTO; /* EINVAL: a file that cannot be sealed */
    if ((seals & RING_SEALS) != RING_SEALS)
        return -EPROTO;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)JP_RING_HEADER_SIZE)
        return -EPROTO;
    uint64_t real_size = (uint64_t)st.st_size;
    if (real_size > JP_RING_HEADER_SIZE + (uint64_t)JP_RING_MAX_SLOTS * JP_SLOT_SIZE)
        return -EPROTO;

    void *base = mmap(NULL, real_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return -errno;
    struct jp_ring_shared snap;
    memcpy(&snap, base, sizeof snap);
    if (!header_valid(&snap, real_size)) {
        munmap(base, real_size);
        return -EPROTO;
    }
    view_init(out, base, real_size, fd, snap.slot_count);
    /* Both sides start from the snapshot; the consumer owns tail from here on. */
    out->p_head = snap.head;
    out->p_tail_cache = snap.tail;
    out->c_tail = snap.tail;
    out->c_head_cache = snap.tail;
    out->c_wake = snap.wake;
    return 0;
}

/* The first lap faulted in by demand (jp_ring_populate). Producer-local state only: the
 * consumer never sees p_ready, and a slot it reads was written, so faulted in, by then. */
#define RING_STEP_FIRST (64u * 1024u / JP_SLOT_SIZE)  /* slots: 64 KiB */
#define RING_STEP_MAX (1024u * 1024u / JP_SLOT_SIZE)  /* slots: 1 MiB */

/* Faults in the slots [from, to) of the first lap (indices; at most one lap, so the range
 * wraps the end of the data at most once). 0 or -errno. */
static int fault_in(struct jp_ring *r, uint64_t from, uint64_t to)
{
#ifdef MADV_POPULATE_WRITE
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t pg = page > 0 ? (uintptr_t)page : 4096u;
    while (from != to) {
        uint64_t off = from & r->mask, n = to - from;
        if (n > r->slot_count - off)
            n = r->slot_count - off;
        uintptr_t a = (uintptr_t)(r->data + off * JP_SLOT_SIZE) & ~(pg - 1u);
        uintptr_t b = ((uintptr_t)(r->data + (off + n) * JP_SLOT_SIZE) + pg - 1u) & ~(pg - 1u);
        if (madvise((void *)a, b - a, MADV_POPULATE_WRITE) < 0)
            return -errno;
        from += n;
    }
    return 0;
#else
    (void)r, (void)from, (void)to;
    return -ENOSYS;
#endif
}

/* The tail the producer's room check may use: the real one, or while the first lap is faulted
 * in by demand the one that puts the end of the room at p_ready, whichever leaves less room
 * (so the inline hooks, which see only p_tail_cache, stop at p_ready as at a full ring). */
static void take_tail(struct jp_ring *r, uint64_t tail)
{
    uint64_t held = r->p_ready - r->slot_count;
    r->p_tail_cache = r->p_lazy && r->p_head - held > r->p_head - tail ? held : tail;
}

/* Moves p_ready past `end` by one step or more (never past the lap's end); a kernel that
 * cannot populate ends the demand faulting (the pages then fault in as they are written). */
static void step_to(struct jp_ring *r, uint64_t end)
{
    while (r->p_lazy && end - r->p_ready - 1u < r->slot_count) { /* p_ready < end */
        uint64_t left = r->p_lap_end - r->p_ready;
        uint64_t n = left < r->p_chunk ? left : r->p_chunk;
        if (fault_in(r, r->p_ready, r->p_ready + n) < 0 || n == left) {
            r->p_lazy = 0; /* the lap is faulted in, or the kernel cannot */
            break;
        }
        r->p_ready += n;
        if (r->p_chunk < RING_STEP_MAX)
            r->p_chunk *= 2u;
    }
}

int jp_ring_populate(struct jp_ring *r)
{
    r->p_ready = r->p_head;
    r->p_lap_end = r->p_head + r->slot_count;
    r->p_chunk = RING_STEP_FIRST < r->slot_count ? RING_STEP_FIRST : r->slot_count;
    int e = fault_in(r, r->p_ready, r->p_ready + r->p_chunk);
    r->p_lazy = e == 0 && r->p_chunk < r->slot_count;
    if (r->p_lazy) {
        r->p_ready += r->p_chunk;
        r->p_chunk = r->p_chunk * 2u < RING_STEP_MAX ? r->p_chunk * 2u : RING_STEP_MAX;
    }
    take_tail(r, r->p_tail_cache);
    return e;
}

int jp_ring__room(struct jp_ring *r, uint64_t end)
{
    uint64_t tail = jp_ring__load_acquire(&r->sh->tail); /* B: pairs with D */
    int room = end - tail <= r->slot_count;
    if (room)
        step_to(r, end);
    take_tail(r, tail);
    return room;
}

void jp_ring_unmap(struct jp_ring *r)
{
    if (!r)
        return;
    if (r->sh)
        munmap(r->sh, r->map_size);
    if (r->sh && r->fd >= 0)
        close(r->fd);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

void jp_ring_close(struct jp_ring *r)
{
    store_release32(&r->sh->closed, 1u); /* E: pairs with F */
}

/* Whether `bytes` fit, reloading the consumer's tail with `order` (B: acquire, pairs with D;
 * seq_cst after W2, see W3). */
static int room_for(struct jp_ring *r, uint32_t bytes, int order)
{
    if (bytes - 1u >= JP_REC_MAX_SIZE)
        return 0;
    uint64_t n = jp_rec_slots(bytes);
    uint64_t to_end = r->slot_count - (r->p_head & r->mask);
    uint64_t need = n <= to_end ? n : to_end + n; /* as jp_ring_reserve counts it */
    uint64_t tail = __atomic_load_n(&r->sh->tail, order);
    int room = r->p_head + need - tail <= r->slot_count;
    if (room)
        step_to(r, r->p_head + need);
    take_tail(r, tail);
    return room;
}

int jp_ring_room(struct jp_ring *r, uint32_t bytes)
{
    return room_for(r, bytes, __ATOMIC_ACQUIRE); /* B: pairs with D */
}

/* The futex word is in a MAP_SHARED mapping of a memfd that another process maps too, so the
 * calls are the shared (not FUTEX_PRIVATE_FLAG) ones: the kernel keys them by file and offset. */
static void futex_wait(uint32_t *word, uint32_t expect, uint64_t timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
    (void)syscall(SYS_futex, word, FUTEX_WAIT, expect, &ts, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
    (void)syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int jp_ring_wait(struct jp_ring *r, uint32_t bytes, uint64_t timeout_ns)
{
    if (jp_ring_room(r, bytes))
        return 1;
    uint32_t seq0 = load_acquire32(&r->sh->wake);  /* W1: pairs with K3 */
    __atomic_store_n(&r->sh->waiting, 1u, __ATOMIC_SEQ_CST); /* W2: pairs with K2 */
    int room = room_for(r, bytes, __ATOMIC_SEQ_CST);          /* W3: pairs with K1 */
    if (!room && timeout_ns) {
        futex_wait(&r->sh->wake, seq0, timeout_ns);
        room = jp_ring_room(r, bytes);
    }
    /* Lowered before returning: a consumer that still sees it raised pays one needless wake,
     * never a missed one (the next wait raises it again before sleeping). */
    __atomic_store_n(&r->sh->waiting, 0u, __ATOMIC_RELAXED);
    return room;
}

uint64_t jp_ring_peek(struct jp_ring *r, const uint8_t **first)
{
    uint64_t tail = r->c_tail;
    if (r->c_corrupt)
        return 0;
    if (r->c_head_cache == tail)
        r->c_head_cache = jp_ring__load_acquire(&r->sh->head); /* C: pairs with A */
    uint64_t avail = r->c_head_cache - tail;
    if (avail > r->slot_count) {
        /* Never turn a nonsense head into a read past the mapping. */
        r->c_corrupt = 1;
        r->c_head_cache = tail;
        return 0;
    }
    if (avail == 0)
        return 0;
    uint64_t off = tail & r->mask;
    uint64_t to_end = r->slot_count - off;
    if (first)
        *first = r->data + off * JP_SLOT_SIZE;
    return avail < to_end ? avail : to_end;
}

void jp_ring_release(struct jp_ring *r, uint64_t slots)
{
    uint64_t peeked = r->c_head_cache - r->c_tail;
    if (slots > peeked)
        slots = peeked;
    if (slots == 0)
        return; /* nothing moved: nobody to wake */
    r->c_tail += slots;
    __atomic_store_n(&r->sh->tail, r->c_tail, __ATOMIC_SEQ_CST); /* D and K1: pairs with B, W3 */
    /* A hint from the client's memory: any nonzero value asks for one wake, nothing more. */
    if (__atomic_load_n(&r->sh->waiting, __ATOMIC_SEQ_CST)) {    /* K2: pairs with W2 */
        store_release32(&r->sh->wake, ++r->c_wake);   /* K3: pairs with W1 */
        futex_wake(&r->sh->wake);
        r->c_wakes++;
    }
}

int jp_ring_check(struct jp_ring *r)
{
    if (!r->c_corrupt &&
        jp_ring__load_acquire(&r->sh->head) - r->c_tail > r->slot_count) /* C: pairs with A */
        r->c_corrupt = 1;
    return r->c_corrupt ? -EPROTO : 0;
}

uint64_t jp_ring_fill(const struct jp_ring *r)
{
    if (r->c_corrupt)
        return 0;
    uint64_t fill = jp_ring__load_acquire(&r->sh->head) - r->c_tail; /* C: pairs with A */
    return fill > r->slot_count ? 0 : fill;
}

int jp_ring_drained(struct jp_ring *r)
{
    if (r->c_corrupt)
        return -EPROTO;
    if (!load_acquire32(&r->sh->closed)) /* F: pairs with E */
        return 0;
    /* After F, the final head is visible: reload it rather than trust the cache. */
    uint64_t head = jp_ring__load_acquire(&r->sh->head); /* C: pairs with A */
    if (head - r->c_tail > r->slot_count) {
        r->c_corrupt = 1;
        return -EPROTO;
    }
    return head == r->c_tail;
}

/* Only before the fd is shared, so relaxed stores suffice. */
void jp_ring_set_start_index(struct jp_ring *r, uint64_t index)
{
    __atomic_store_n(&r->sh->head, index, __ATOMIC_RELAXED);
    __atomic_store_n(&r->sh->tail, index, __ATOMIC_RELAXED);
    r->p_head = r->p_tail_cache = index;
    r->p_lazy = 0; /* jp_ring_populate, if wanted, comes after */
    r->c_tail = r->c_head_cache = index;
}
