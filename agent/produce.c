/* Producing records: producer sections, pushes that wait for room (the backpressure policy of
 * jettprof.h), thread registration and the hot-path API (enter, leave, stmt, state, safe points, allocation hooks).
 *
 * One ring per run has exactly one producer at a time. With one registered runtime thread (the
 * reference runtime) that thread is the run's *owner* and its sections are lock-free: it only
 * announces itself in owner_busy. Anyone else who must produce — a second registered thread, or
 * a run-level call (jettprof_source, jettprof_frame, jettprof_finish) from a thread that is not
 * the owner — is a *foreigner*: it raises `foreign`, takes the spin flag `lock`, and, while an
 * owner exists, makes sure the owner is outside its section before going on. The owner sees
 * `foreign` raised and takes the spin flag too until it drops back to zero.
 *
 * The owner's announcement is a plain store followed by a compiler barrier, not a full fence
 * (a fence would cost as much as the lock we avoid). The CPU-level ordering the store/load pair
 * needs (Dekker: owner stores busy then loads foreign; foreigner stores foreign then loads busy)
 * comes from membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) on the foreigner's side, which runs a
 * full barrier on every thread of the process: either the owner's busy store is visible to the
 * foreigner after it, or the owner's load of foreign comes after the barrier and sees it raised.
 * Without membarrier no thread becomes owner and every section takes the spin flag.
 *
 *   label  who        operation                                   pairs with
 *   P1     owner      store-relaxed owner_busy = 1 + compiler     M (the barrier membarrier runs
 *                     barrier                                     on the owner's CPU)
 *   P2     owner      load-acquire foreign                        P5, and P4 through M
 *   P3     owner      store-release owner_busy = 0                P6
 *   P4     foreigner  fetch-add foreign (seq_cst), then M         P2
 *   P6     foreigner  load-acquire owner_busy until 0             P3
 *   P5     foreigner  fetch-sub foreign (release)                 P2
 *   L1/L2  anyone     spin flag: exchange-acquire / store-release each other
 *   S1     owner      load-acquire pending (safe point)           T2 in timer.c
 *   S2     owner      store-release pending = 0                   T1 in timer.c
 *   R1     register   store-release active = 1 / 0                T4 in timer.c
 *   R2     register   store-release nslots                        T3 in timer.c
 *
 * A registered foreigner raises `foreign` once for as long as it stays registered (the handshake
 * runs at registration), so its sections are only the spin flag. Sections never call out to user
 * code, and every wait inside one is bounded, so a section never waits on another forever.
 */
#include "agent.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>

/* The calling thread's registration, checked against the run's serial number (never reused
 * in a process) before use, so a registration left over from a finished run whose memory was
 * reused is never dereferenced. */
static _Thread_local struct jettprof_thread *tls_self;
static _Thread_local uint64_t tls_serial;

/* ---- membarrier ---- */

static pthread_once_t mb_once = PTHREAD_ONCE_INIT;
static int mb_ok;

static void mb_init(void)
{
    long q = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (q < 0 || !(q & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
        return;
    if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) < 0)
        return;
    mb_ok = 1;
}

int jp_membarrier_available(void);
int jp_membarrier_available(void)
{
    pthread_once(&mb_once, mb_init);
    return mb_ok;
}

static void mb_all(void)
{
    /* M: a full barrier on every running thread of this process. EPERM means this process is
     * not registered (a child of fork() after the parent registered): register and retry. Any
     * other failure falls back to the global command, which needs no registration. */
    if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
    if (errno == EPERM &&
        syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
        syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
    syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void spin_lock(uint32_t *l)
{
    unsigned spins = 0;
    while (__atomic_exchange_n(l, 1u, __ATOMIC_ACQUIRE)) { /* L1: pairs with L2 */
        while (jp_load_relaxed32(l)) {
            if (++spins < 128)
                cpu_relax();
            else
                sched_yield(); /* the holder may be waiting for ring room: don't burn a core */
        }
    }
}

static void spin_unlock(uint32_t *l)
{
    jp_store_release32(l, 0); /* L2: pairs with L1 */
}

/* ---- sections ---- */

static void foreign_begin(struct jettprof_run *run)
{
    __atomic_fetch_add(&run->foreign, 1u, __ATOMIC_SEQ_CST); /* P4 */
    spin_lock(&run->lock);
    if (run->owner) {
        mb_all(); /* M */
        unsigned spins = 0;
        while (jp_load_acquire32(&run->owner_busy)) { /* P6: pairs with P3 */
            if (++spins < 128)
                cpu_relax();
            else
                sched_yield();
        }
    }
}

static void foreign_end(struct jettprof_run *run)
{
    spin_unlock(&run->lock);
    __atomic_fetch_sub(&run->foreign, 1u, __ATOMIC_RELEASE); /* P5: pairs with P2 */
}

static inline enum jp_sect sect_enter(struct jettprof_run *run, struct jettprof_thread *t)
{
    if (__builtin_expect(t != NULL && t->exclusive, 1)) {
        jp_store_relaxed32(&run->owner_busy, 1u); /* P1 */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (__builtin_expect(__atomic_load_n(&run->foreign, __ATOMIC_ACQUIRE) == 0, 1)) /* P2 */
            return JP_SECT_EXCLUSIVE;
        jp_store_release32(&run->owner_busy, 0); /* P3: pairs with P6 */
        spin_lock(&run->lock);
        return JP_SECT_LOCKED;
    }
    if (t != NULL && t->foreign) {
        spin_lock(&run->lock);
        return JP_SECT_LOCKED;
    }
    foreign_begin(run);
    return JP_SECT_FOREIGN;
}

static inline void sect_leave(struct jettprof_run *run, enum jp_sect s)
{
    if (__builtin_expect(s == JP_SECT_EXCLUSIVE, 1))
        jp_store_release32(&run->owner_busy, 0); /* P3: pairs with P6 */
    else if (s == JP_SECT_LOCKED)
        spin_unlock(&run->lock);
    else
        foreign_end(run);
}

/* Run-level calls find the calling thread's registration, if it belongs to this run. */
static struct jettprof_thread *self_for(struct jettprof_run *run)
{
    return tls_serial == run->serial ? tls_self : NULL;
}

void jp_answer_own_tick(struct jettprof_run *run)
{
    struct jettprof_thread *t = self_for(run);
    if (t)
        jettprof_safe_point(t);
}

enum jp_sect jp_sect_enter(struct jettprof_run *run, struct jettprof_thread *t)
{
    return sect_enter(run, t ? t : self_for(run));
}

void jp_sect_leave(struct jettprof_run *run, enum jp_sect s)
{
    sect_leave(run, s);
}

/* ---- pushes ---- */

void jp_mark_failed(struct jettprof_run *run)
{
    jp_store_relaxed32(&run->failed, 1u);
}

int jp_daemon_alive(struct jettprof_run *run)
{
    if (run->sock < 0)
        return 1;
    if (jp_load_relaxed32(&run->daemon_gone))
        return 0;
    /* During the run the daemon never speaks first: anything readable is an ERROR before it
     * closes, or EOF. Either way it has stopped consuming for us. */
    struct pollfd p = {.fd = run->sock, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && p.revents) {
        jp_store_relaxed32(&run->daemon_gone, 1u);
        return 0;
    }
    return 1;
}

/* The ring is full: the backpressure policy (jettprof.h, "Backpressure"). A short spin, then
 * sleeps on the ring's futex (jp_ring_wait) in slices of at most JP_WAIT_SLICE_NS, for as long
 * as the consumer keeps releasing slots; every slice also checks that the daemon is still there.
 * The wait ends without room when the consumer has released nothing for the stall bound (the
 * run is then `stalled` at that tail: later waits drop at once until the tail moves again, so a
 * stopped daemon costs the program one stall bound, not one per event) or the daemon is gone
 * (the run is failed: nothing more is waited for). The time spent here is producer_wait_ns.
 * In-section: the section's other producers wait for us, which is the point (one ring). */
__attribute__((noinline, cold)) static void *reserve_slow(struct jettprof_run *run,
                                                          uint32_t bytes, enum jp_wait w)
{
    if (w == JP_WAIT_NONE || jp_load_relaxed32(&run->failed))
        return NULL;
    struct jp_ring *ring = &run->ring;
    /* The failed reserve reloaded the tail: a stall is over once it moved. */
    if (run->stalled && ring->p_tail_cache == run->stalled_tail)
        goto give_up;
    run->stalled = 0;
    /* Whatever this section already wrote must be visible, or the consumer could not make
     * the room we wait for. */
    jp_ring_commit(ring);
    uint64_t t0 = jp_mono_ns();
    void *p = NULL;
    for (unsigned i = 0; i < JP_WAIT_SPINS && !p; i++) {
        cpu_relax();
        p = jp_ring_reserve(ring, bytes);
    }
    uint64_t seen = ring->p_tail_cache, progress_at = t0, now = t0;
    while (!p) {
        if (!jp_daemon_alive(run)) {
            jp_mark_failed(run);
            break;
        }
        now = jp_mono_ns();
        if (ring->p_tail_cache != seen) {
            seen = ring->p_tail_cache;
            progress_at = now;
        }
        uint64_t idle = now - progress_at;
        if (idle >= run->stall_ns) {
            run->stalled = 1;
            run->stalled_tail = seen;
            break;
        }
        uint64_t slice = run->stall_ns - idle;
        (void)jp_ring_wait(ring, bytes, slice < JP_WAIT_SLICE_NS ? slice : JP_WAIT_SLICE_NS);
        p = jp_ring_reserve(ring, bytes);
    }
    run->producer_wait_ns += jp_mono_ns() - t0;
    /* relaxed: the gauge is for display (ring.h), the COUNTERS record is the account */
    __atomic_store_n(&ring->sh->gauge_wait_ns, run->producer_wait_ns, __ATOMIC_RELAXED);
    if (p)
        return p;
give_up:
    if (w == JP_WAIT_META)
        jp_mark_failed(run); /* a lost definition would leave later records dangling */
    return NULL;
}

static inline void *push_reserve(struct jettprof_run *run, uint32_t bytes, enum jp_wait w)
{
    void *p = jp_ring_reserve(&run->ring, bytes);
    if (__builtin_expect(p != NULL, 1))
        return p;
    return reserve_slow(run, bytes, w);
}

void *jp_push_reserve(struct jettprof_run *run, uint32_t bytes, enum jp_wait w)
{
    return push_reserve(run, bytes, w);
}

void jp_push_commit(struct jettprof_run *run, uint32_t records)
{
    jp_ring_commit(&run->ring);
    run->record_count += records;
}

/* Pushes an EXEC record when the thread's identity differs from the last one in the stream.
 * 1 pushed or not needed, 0 no room. */
static inline int exec_sync(struct jettprof_run *run, struct jettprof_thread *t, enum jp_wait w)
{
    if (__builtin_expect(run->exec_thread == t->runtime_thread_id && run->exec_task == t->task_id &&
                             run->exec_actor == t->actor_id,
                         1))
        return 1;
    struct jp_rec_exec *e = push_reserve(run, sizeof *e, w);
    if (!e)
        return 0;
    *e = (struct jp_rec_exec){
        .h = {JP_REC_EXEC, sizeof *e},
        .runtime_thread_id = t->runtime_thread_id,
        .task_id = t->task_id,
        .actor_id = t->actor_id,
    };
    run->record_count++;
    run->exec_thread = t->runtime_thread_id;
    run->exec_task = t->task_id;
    run->exec_actor = t->actor_id;
    return 1;
}

/* ---- threads ---- */

/* The inline fast paths of jettprof.h write the ring's allocation records and read the stack
 * in this library's layouts: tie each of their assumptions to its twin here. */
#define JP_SAME_OFFSET(a, fa, b, fb) _Static_assert(offsetof(a, fa) == offsetof(b, fb), #fa)
JP_SAME_OFFSET(struct jettprof_mem_rec_, node, struct jp_rec_alloc, node);
JP_SAME_OFFSET(struct jettprof_mem_rec_, id, struct jp_rec_alloc, allocation_id);
JP_SAME_OFFSET(struct jettprof_mem_rec_, a, struct jp_rec_alloc, size);
JP_SAME_OFFSET(struct jettprof_mem_rec_, b, struct jp_rec_alloc, reserved0);
JP_SAME_OFFSET(struct jettprof_mem_rec_, id, struct jp_rec_resize, allocation_id);
JP_SAME_OFFSET(struct jettprof_mem_rec_, a, struct jp_rec_resize, old_size);
JP_SAME_OFFSET(struct jettprof_mem_rec_, b, struct jp_rec_resize, new_size);
JP_SAME_OFFSET(struct jettprof_mem_rec_, id, struct jp_rec_free, allocation_id);
JP_SAME_OFFSET(struct jettprof_mem_rec_, a, struct jp_rec_free, old_size);
JP_SAME_OFFSET(struct jettprof_mem_rec_, b, struct jp_rec_free, reserved0);
_Static_assert(sizeof(struct jettprof_mem_rec_) == JP_SLOT_SIZE, "one slot per memory record");
_Static_assert(sizeof(struct jp_rec_alloc) == JP_SLOT_SIZE && sizeof(struct jp_rec_resize) ==
               JP_SLOT_SIZE && sizeof(struct jp_rec_free) == JP_SLOT_SIZE, "one slot each");
_Static_assert(JETTPROF_REC_ALLOC_ == JP_REC_ALLOC && JETTPROF_REC_RESIZE_ == JP_REC_RESIZE &&
               JETTPROF_REC_FREE_ == JP_REC_FREE, "record types");
_Static_assert(JETTPROF_FAST_DEPTH == JP_MAX_DEPTH, "the recorded depth");
_Static_assert(JETTPROF_RING_AHEAD_ == JP_RING_WRITE_AHEAD, "one write-ahead distance");
_Static_assert(JP_NODE_LOST == 0xffffffffu, "the inline hooks' unavailable node");
_Static_assert(sizeof(struct jettprof_site) == 144, "a call site's cache is 144 bytes");

/* Stamps of registrations: unique in the process for its whole life (never 0, never reused,
 * 64 bits never wrap), so a call site filled for one registration never matches another. */
static uint64_t fast_stamps;

/* The fast-path state of a freshly zeroed registration. The memory window points at the run's
 * producer state and stays disarmed until a plain hook pushed as the exclusive owner. */
static void fast_init(struct jettprof_thread *t)
{
    struct jettprof_fast *f = &t->fast;
    struct jettprof_run *run = t->run;
    f->thread_ = t;
    f->stamp_ = __atomic_add_fetch(&fast_stamps, 1u, __ATOMIC_RELAXED);
    f->mem_armed_ = 0;
    f->ring_data_ = run->ring.data;
    f->ring_mask_ = run->ring.mask;
    f->ring_slots_ = run->ring.slot_count;
    f->ring_head_ = &run->ring.p_head;
    f->ring_tail_ = &run->ring.p_tail_cache;
    f->ring_shared_head_ = run->ring.sh ? &run->ring.sh->head : NULL;
    f->record_count_ = &run->record_count;
    f->next_alloc_id_ = &run->next_alloc_id;
    /* Only the owner announces itself in owner_busy; any other thread is foreign for as long
     * as it is registered, so its inline hooks always see foreign raised and take the plain
     * path, having announced nothing but in a word of its own. */
    f->owner_busy_ = &f->busy_scratch_;
    f->foreign_ = &run->foreign;
}

int jettprof_thread_register(jettprof_run *run, uint32_t runtime_thread_id, jettprof_thread **out)
{
    if (!run || !out) {
        jp_set_reason("thread registration needs a run and an output handle");
        return -EINVAL;
    }
    *out = NULL;
    int has_ids = (run->caps & JETTPROF_CAP_THREAD_REGISTRATION) != 0;
    if (has_ids && runtime_thread_id == JETTPROF_ID_UNAVAILABLE) {
        jp_set_reason("runtime thread id is the unavailable marker");
        return -EINVAL;
    }
    if (self_for(run)) {
        jp_set_reason("the calling thread is already registered with this run");
        return -EEXIST;
    }
    foreign_begin(run);
    int r = 0;
    struct jettprof_thread *t = NULL;
    uint32_t n = run->nslots, slot = n;
    if (!has_ids && run->registered > 0) {
        /* Without run-local thread ids a second thread's records would be indistinguishable. */
        jp_set_reason("a second runtime thread needs the thread-registration capability");
        r = -ENOTSUP;
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct jettprof_thread *o = &run->threads[i];
        if (jp_load_relaxed32(&o->active)) {
            if (has_ids && o->runtime_thread_id == runtime_thread_id) {
                jp_set_reason("runtime thread id already registered in this run");
                r = -EEXIST;
                goto out;
            }
        } else if (slot == n) {
            slot = i;
        }
    }
    if (slot == JP_AGENT_MAX_THREADS) {
        jp_set_reason("too many runtime threads registered in this run");
        r = -ENOSPC;
        goto out;
    }
    t = &run->threads[slot];
    /* Owner-only part; the timer reads only line 0. */
    memset((char *)t + offsetof(struct jettprof_thread, run), 0,
           sizeof *t - offsetof(struct jettprof_thread, run));
    t->run = run;
    fast_init(t);
    t->runtime_thread_id = has_ids ? runtime_thread_id : JP_ID_UNAVAILABLE;
    t->task_id = JP_ID_UNAVAILABLE;
    t->actor_id = JP_ID_UNAVAILABLE;
    jp_store_relaxed32(&t->state, JETTPROF_STATE_JETT);
    jp_store_relaxed64(&t->req_tick, 0);
    /* A reused slot may hold a request the timer raised for its previous thread just as that
     * one unregistered: no thread was there to answer it, so it is withdrawn from the
     * requested count rather than reported as a drop. */
    if (__atomic_exchange_n(&t->pending, 0u, __ATOMIC_ACQ_REL)) /* S1+S2 */
        run->withdrawn_ticks++;
    if (run->owner == NULL && run->registered == 0 && run->membarrier_ok) {
        t->exclusive = 1;
        run->owner = t;
        t->fast.owner_busy_ = &run->owner_busy;
    } else {
        /* Stays raised while registered: the handshake in foreign_begin above already waited
         * for the owner to leave its section, and the owner locks from its next one on. */
        t->foreign = 1;
        __atomic_fetch_add(&run->foreign, 1u, __ATOMIC_SEQ_CST); /* P4 */
        /* Our records will change the stream's execution identity, which the owner's inline
         * hooks take as announced: they push again only after a plain hook re-announced it.
         * The owner reads its window only inside a section, after P2 saw foreign at 0, and
         * foreign_begin above waited for it to leave: this store cannot race with it. */
        if (run->owner)
            run->owner->fast.mem_armed_ = 0;
    }
    run->registered++;
    jp_store_release32(&t->active, 1u); /* R1: pairs with T4 */
    if (slot == n)
        jp_store_release32(&run->nslots, n + 1u); /* R2: pairs with T3 */
    tls_self = t;
    tls_serial = run->serial;
    *out = t;
out:
    foreign_end(run);
    return r;
}

void jettprof_thread_unregister(jettprof_thread *t)
{
    if (!t || !t->run)
        return;
    struct jettprof_run *run = t->run;
    /* Unregistering is the thread's last safe point: a tick still pending is answered here,
     * with the stack as it is now. */
    jettprof_safe_point(t);
    spin_lock(&run->lock);
    jp_store_release32(&t->active, 0); /* R1 */
    run->registered--;
    int was_foreign = t->foreign;
    if (t->exclusive) {
        run->owner = NULL;
        t->exclusive = 0;
    }
    t->foreign = 0;
    t->run = NULL;
    if (tls_serial == run->serial && tls_self == t) {
        tls_self = NULL;
        tls_serial = 0;
    }
    spin_unlock(&run->lock);
    if (was_foreign)
        __atomic_fetch_sub(&run->foreign, 1u, __ATOMIC_RELEASE); /* P5 */
}

void jettprof_set_task(jettprof_thread *t, uint32_t task_id, uint32_t actor_id)
{
    if (!t || !t->run || !(t->run->caps & JETTPROF_CAP_TASK_ATTRIBUTION))
        return;
    t->task_id = task_id;
    t->actor_id = actor_id;
    t->fast.mem_armed_ = 0; /* the next event needs an EXEC first: the plain path pushes it */
}

/* ---- the stack the hooks read (enter and leave are in stack.c) ---- */

/* The node the thread is in: 0 before any frame, JP_NODE_LOST on an unavailable level. */
static inline uint32_t cur_node(const struct jettprof_thread *t)
{
    uint32_t d = t->fast.depth_;
    return d <= JP_MAX_DEPTH ? t->fast.nodes_[d] : t->fast.trunc_node_;
}

/* ---- CPU samples ---- */

/* Every this many samples the owner also pushes a COUNTERS snapshot (they are cumulative and
 * the last one wins), so a daemon that loses its producer mid-run (the program was killed)
 * still reports the ticks requested, coalesced and dropped up to then. Never waits. */
#define COUNTERS_EVERY_SAMPLES 256u

static void push_counters_snapshot(struct jettprof_run *run)
{
    struct jp_rec_counters *c = push_reserve(run, sizeof *c, JP_WAIT_NONE);
    if (!c)
        return;
    jp_counters_fill(run, c);
    jp_ring_commit(&run->ring);
    run->record_count++;
}

static void push_sample(struct jettprof_thread *t, uint64_t tick)
{
    struct jettprof_run *run = t->run;
    uint32_t state = jp_load_relaxed32(&t->state);
    uint32_t node = 0, d = t->fast.depth_;
    uint8_t flags = 0;
    struct jp_stmt st = {0, 0};
    if (state == JETTPROF_STATE_JETT) {
        node = cur_node(t);
        if (d == 0) {
            state = JP_STATE_RUNTIME; /* executing with no Jett frame: runtime work */
            node = 0;
        } else if (node == JP_NODE_LOST) {
            state = JP_STATE_UNAVAILABLE; /* the stack could not be interned */
            node = 0;
        } else if (d <= JP_MAX_DEPTH) {
            st = t->fast.pos_;
            if (st.line && st.col && (run->caps & JETTPROF_CAP_SOURCE_SPANS))
                flags = JP_SAMPLE_HAS_STMT;
            else
                st = (struct jp_stmt){0, 0};
        }
    }
    enum jp_sect s = sect_enter(run, t);
    struct jp_rec_cpu_sample *p = NULL;
    /* CPU samples never wait: a full ring drops the tick and counts it. */
    if (exec_sync(run, t, JP_WAIT_NONE))
        p = push_reserve(run, sizeof *p, JP_WAIT_NONE);
    if (p) {
        *p = (struct jp_rec_cpu_sample){
            .h = {JP_REC_CPU_SAMPLE, sizeof *p},
            .state = (uint8_t)state,
            .flags = flags,
            .node = node,
            .stmt_line = st.line,
            .stmt_col = st.col,
            .requested_tick = tick,
        };
        jp_ring_commit(&run->ring);
        run->record_count++;
        if (++run->samples_since_counters == COUNTERS_EVERY_SAMPLES) {
            run->samples_since_counters = 0;
            push_counters_snapshot(run);
        }
    } else {
        jp_ring_commit(&run->ring); /* an EXEC may have gone in */
        run->dropped_ticks++;
    }
    sect_leave(run, s);
}

const uint32_t *jettprof_pending_word(jettprof_thread *t)
{
    return &t->pending;
}

void jettprof_safe_point_slow(jettprof_thread *t)
{
    if (!jp_load_acquire32(&t->pending)) /* S1: pairs with T2 */
        return;
    uint64_t tick = jp_load_relaxed64(&t->req_tick); /* written before T2 */
    jp_store_release32(&t->pending, 0); /* S2: pairs with T1, the timer may raise the next one */
    push_sample(t, tick);
}

void jettprof_safe_point(jettprof_thread *t)
{
    if (__builtin_expect(jp_load_relaxed32(&t->pending) != 0, 0))
        jettprof_safe_point_slow(t);
}

void jettprof_set_state(jettprof_thread *t, uint32_t state)
{
    if (!t || state > JETTPROF_STATE_WAITING || state == jp_load_relaxed32(&t->state))
        return;
    /* A state change is a safe point: a tick raised in the old state is answered in it, so a
     * tick from before a blocking call is never charged to the wait, nor the reverse. */
    jettprof_safe_point(t);
    jp_store_relaxed32(&t->state, state); /* the timer reads it relaxed: a tick racing the
                                              change lands on either side, both are right */
}

/* ---- allocation hooks ---- */

static inline uint32_t stack_node(const struct jettprof_thread *t)
{
    uint32_t n = cur_node(t);
    return n == JP_NODE_LOST ? 0u : n;
}

/* Pushes one memory event in section s. A push in the owner's lock-free section, with the
 * thread's identity announced, arms the thread's inline hooks (jettprof.h) for the next ones. */
static inline int push_mem(struct jettprof_run *run, struct jettprof_thread *t, enum jp_sect s,
                           uint16_t type, uint64_t id, uint64_t a, uint64_t b)
{
    struct jp_rec_alloc *p = NULL; /* alloc, resize and free share one 32-byte shape */
    if (exec_sync(run, t, JP_WAIT_MEM))
        p = push_reserve(run, 32, JP_WAIT_MEM);
    if (__builtin_expect(p == NULL, 0)) {
        jp_ring_commit(&run->ring);
        run->lost_records++;
        if (run->ring.sh) /* relaxed: a display gauge (ring.h) */
            __atomic_store_n(&run->ring.sh->gauge_lost, run->lost_records, __ATOMIC_RELAXED);
        return -ENOBUFS;
    }
    uint32_t node = stack_node(t);
    switch (type) {
    case JP_REC_ALLOC:
        *p = (struct jp_rec_alloc){.h = {JP_REC_ALLOC, 32}, .node = node, .allocation_id = id,
                                   .size = a};
        break;
    case JP_REC_RESIZE:
        *(struct jp_rec_resize *)(void *)p = (struct jp_rec_resize){
            .h = {JP_REC_RESIZE, 32}, .node = node, .allocation_id = id, .old_size = a,
            .new_size = b};
        break;
    default:
        *(struct jp_rec_free *)(void *)p = (struct jp_rec_free){
            .h = {JP_REC_FREE, 32}, .node = node, .allocation_id = id, .old_size = a};
        break;
    }
    jp_ring_commit(&run->ring);
    run->record_count++;
    if (s == JP_SECT_EXCLUSIVE)
        t->fast.mem_armed_ = 1;
    return 0;
}

int jettprof_alloc(jettprof_thread *t, uint64_t size, uint64_t *id)
{
    struct jettprof_run *run = t->run;
    enum jp_sect s = sect_enter(run, t);
    uint64_t nid = ++run->next_alloc_id; /* a per-run counter: never reused */
    int r = 0;
    if (run->mode == JETTPROF_MODE_MEMORY)
        r = push_mem(run, t, s, JP_REC_ALLOC, nid, size, 0);
    sect_leave(run, s);
    if (id)
        *id = nid;
    return r;
}

int jettprof_alloc_id(jettprof_thread *t, uint64_t id, uint64_t size)
{
    struct jettprof_run *run = t->run;
    if (run->mode != JETTPROF_MODE_MEMORY)
        return 0;
    enum jp_sect s = sect_enter(run, t);
    int r = push_mem(run, t, s, JP_REC_ALLOC, id, size, 0);
    sect_leave(run, s);
    return r;
}

int jettprof_resize(jettprof_thread *t, uint64_t id, uint64_t old_size, uint64_t new_size)
{
    struct jettprof_run *run = t->run;
    if (run->mode != JETTPROF_MODE_MEMORY)
        return 0;
    enum jp_sect s = sect_enter(run, t);
    int r = push_mem(run, t, s, JP_REC_RESIZE, id, old_size, new_size);
    sect_leave(run, s);
    return r;
}

int jettprof_free(jettprof_thread *t, uint64_t id, uint64_t old_size)
{
    struct jettprof_run *run = t->run;
    if (run->mode != JETTPROF_MODE_MEMORY)
        return 0;
    enum jp_sect s = sect_enter(run, t);
    int r = push_mem(run, t, s, JP_REC_FREE, id, old_size, 0);
    sect_leave(run, s);
    return r;
}
