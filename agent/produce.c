/* Producing records: sections, pushes that wait for room (the backpressure policy of
 * jettprof.h), thread registration and the hot-path API (enter, leave, stmt, state, safe
 * points, allocation hooks).
 *
 * Streams. A run has a main stream (its ring, the one the run started with) and each thread
 * slot may have a stream of its own, a worker ring (struct jp_stream). A registered thread with
 * its own stream is that ring's only producer: its events need no lock, no fence and no atomic
 * read-modify-write, only the ring's release store of the head (A in protocol/ring.h). The
 * main stream has many producers: the run-level calls of any thread (definitions, COUNTERS,
 * RUN_STOP) and the events of threads without a ring of their own (a local run, or a ring the
 * daemon refused); each of them writes inside a "main section", under the spin flag run->lock.
 * The intern tables (sources, frames, call-chain nodes) are main-section state too: a node is
 * announced on the main ring before the thread that interned it names it anywhere, which is the
 * order the daemon's merge relies on (daemon/drain.c).
 *
 *   label  who        operation                                   pairs with
 *   L1/L2  anyone     spin flag: exchange-acquire / store-release each other
 *   S1     owner      load-acquire pending (safe point)           T2 in timer.c
 *   S2     owner      store-release pending = 0                   T1 in timer.c
 *   R1     register   store-release active = 1 / 0                T4 in timer.c
 *   R2     register   store-release nslots                        T3 in timer.c
 *   G      producer   relaxed stores of a stream's gauges         relaxed loads in
 *                     (lost_records, dropped_ticks,               jp_counters_fill: a snapshot,
 *                     producer_wait_ns)                           exact once producers stopped
 *   I      any        fetch-add next_id_block (relaxed): a        itself (ids need uniqueness,
 *                     block of allocation ids                     not order)
 *
 * Registrations are serialised by reg_mu (a pthread mutex: a registration makes a memfd and
 * sends it to the daemon, too long for the spin flag). Sections never call out to user code, and every wait inside one is
 * bounded, so a section never waits on another forever.
 */
#include "agent.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/mman.h>

/* The calling thread's registration, checked against the run's serial number (never reused
 * in a process) before use, so a registration left over from a finished run whose memory was
 * reused is never dereferenced. */
static _Thread_local struct jettprof_thread *tls_self;
static _Thread_local uint64_t tls_serial;

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

/* A thread's events: its own stream without a lock, else the main one in a main section. */
static inline struct jp_stream *sect_enter(struct jettprof_run *run, struct jettprof_thread *t,
                                           enum jp_sect *s)
{
    if (__builtin_expect(t->st != &run->main, 1)) {
        *s = JP_SECT_OWN;
        return t->st;
    }
    spin_lock(&run->lock);
    *s = JP_SECT_LOCKED;
    return &run->main;
}

static inline void sect_leave(struct jettprof_run *run, enum jp_sect s)
{
    if (s == JP_SECT_LOCKED)
        spin_unlock(&run->lock);
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
    (void)t;
    spin_lock(&run->lock);
    return JP_SECT_LOCKED;
}

void jp_sect_leave(struct jettprof_run *run, enum jp_sect s)
{
    (void)s;
    spin_unlock(&run->lock);
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
 * In the stream's section: on the main ring the other producers wait for us, which is the
 * point (one ring). */
__attribute__((noinline, cold)) static void *reserve_slow(struct jettprof_run *run,
                                                          struct jp_stream *st, uint32_t bytes,
                                                          enum jp_wait w)
{
    if (w == JP_WAIT_NONE || jp_load_relaxed32(&run->failed))
        return NULL;
    struct jp_ring *ring = &st->ring;
    /* The failed reserve reloaded the tail: a stall is over once it moved. */
    if (st->stalled && ring->p_tail_cache == st->stalled_tail)
        goto give_up;
    st->stalled = 0;
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
            st->stalled = 1;
            st->stalled_tail = seen;
            break;
        }
        uint64_t slice = run->stall_ns - idle;
        (void)jp_ring_wait(ring, bytes, slice < JP_WAIT_SLICE_NS ? slice : JP_WAIT_SLICE_NS);
        p = jp_ring_reserve(ring, bytes);
    }
    uint64_t waited = st->producer_wait_ns + (jp_mono_ns() - t0);
    jp_store_relaxed64(&st->producer_wait_ns, waited); /* G */
    /* relaxed: the gauge is for display (ring.h), the COUNTERS record is the account */
    __atomic_store_n(&ring->sh->gauge_wait_ns, waited, __ATOMIC_RELAXED);
    if (p)
        return p;
give_up:
    if (w == JP_WAIT_META)
        jp_mark_failed(run); /* a lost definition would leave later records dangling */
    return NULL;
}

static inline void *push_reserve(struct jettprof_run *run, struct jp_stream *st, uint32_t bytes,
                                 enum jp_wait w)
{
    void *p = jp_ring_reserve(&st->ring, bytes);
    if (__builtin_expect(p != NULL, 1))
        return p;
    return reserve_slow(run, st, bytes, w);
}

void *jp_push_reserve(struct jettprof_run *run, uint32_t bytes, enum jp_wait w)
{
    return push_reserve(run, &run->main, bytes, w);
}

void jp_push_commit(struct jettprof_run *run, uint32_t records)
{
    jp_ring_commit(&run->main.ring);
    run->main.record_count += records;
}

/* Pushes an EXEC record when the thread's identity differs from the last one in the stream.
 * 1 pushed or not needed, 0 no room. */
static inline int exec_sync(struct jettprof_run *run, struct jp_stream *st,
                            struct jettprof_thread *t, enum jp_wait w)
{
    if (__builtin_expect(st->exec_thread == t->runtime_thread_id && st->exec_task == t->task_id &&
                             st->exec_actor == t->actor_id,
                         1))
        return 1;
    struct jp_rec_exec *e = push_reserve(run, st, sizeof *e, w);
    if (!e)
        return 0;
    *e = (struct jp_rec_exec){
        .h = {JP_REC_EXEC, sizeof *e},
        .runtime_thread_id = t->runtime_thread_id,
        .task_id = t->task_id,
        .actor_id = t->actor_id,
    };
    st->record_count++;
    st->exec_thread = t->runtime_thread_id;
    st->exec_task = t->task_id;
    st->exec_actor = t->actor_id;
    return 1;
}

/* A stream's next block of allocation ids (I). */
static void take_id_block(struct jettprof_run *run, struct jp_stream *st)
{
    uint64_t b = __atomic_fetch_add(&run->next_id_block, 1u, __ATOMIC_RELAXED); /* I */
    st->next_alloc_id = b * JP_ALLOC_ID_BLOCK;
    st->alloc_id_end = (b + 1u) * JP_ALLOC_ID_BLOCK;
}

static inline uint64_t next_alloc_id(struct jettprof_run *run, struct jp_stream *st)
{
    if (__builtin_expect(st->next_alloc_id >= st->alloc_id_end, 0))
        take_id_block(run, st);
    return ++st->next_alloc_id;
}

static void stream_init(struct jp_stream *st)
{
    st->exec_thread = st->exec_task = st->exec_actor = JP_ID_UNAVAILABLE;
}

void jp_stream_init_main(struct jettprof_run *run)
{
    stream_init(&run->main);
}

uint64_t jp_record_total(struct jettprof_run *run)
{
    uint64_t n = run->main.record_count;
    uint32_t k = jp_load_acquire32(&run->nslots);
    for (uint32_t i = 0; i < k; i++)
        if (run->threads[i].has_own)
            n += run->threads[i].own.record_count;
    return n;
}

void jp_streams_free(struct jettprof_run *run)
{
    for (uint32_t i = 0; i < JP_AGENT_MAX_THREADS; i++)
        if (run->threads[i].own.ring.sh)
            jp_ring_unmap(&run->threads[i].own.ring);
}

void jp_streams_forget(struct jettprof_run *run)
{
    for (uint32_t i = 0; i < JP_AGENT_MAX_THREADS; i++) {
        struct jp_ring *r = &run->threads[i].own.ring;
        if (r->sh)
            mmap(r->sh, r->map_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    }
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
JP_SAME_OFFSET(struct jettprof_mem_rec_, b, struct jp_rec_free, seq);
_Static_assert(sizeof(struct jettprof_mem_rec_) == JP_SLOT_SIZE, "one slot per memory record");
_Static_assert(sizeof(struct jp_rec_alloc) == JP_SLOT_SIZE && sizeof(struct jp_rec_resize) ==
               JP_SLOT_SIZE && sizeof(struct jp_rec_free) == JP_SLOT_SIZE, "one slot each");
_Static_assert(JETTPROF_CAP_RESIZE_SEQUENCE == JP_CAP_RESIZE_SEQUENCE, "one capability bit");
_Static_assert(JETTPROF_REC_ALLOC_ == JP_REC_ALLOC && JETTPROF_REC_RESIZE_ == JP_REC_RESIZE &&
               JETTPROF_REC_FREE_ == JP_REC_FREE, "record types");
_Static_assert(JETTPROF_FAST_DEPTH == JP_MAX_DEPTH, "the recorded depth");
_Static_assert(JETTPROF_RING_AHEAD_ == JP_RING_WRITE_AHEAD, "one write-ahead distance");
_Static_assert(JP_NODE_LOST == 0xffffffffu, "the inline hooks' unavailable node");
_Static_assert(sizeof(struct jettprof_site) == 144, "a call site's cache is 144 bytes");

/* Stamps of registrations: unique in the process for its whole life (never 0, never reused,
 * 64 bits never wrap), so a call site filled for one registration never matches another. */
static uint64_t fast_stamps;

/* The fast-path state of a freshly zeroed registration. The memory window stays disarmed until
 * a plain hook pushed into the thread's own stream; a thread on the main stream never arms it,
 * so its inline hooks always take the plain calls (and their main section). */
static void fast_init(struct jettprof_thread *t)
{
    struct jettprof_fast *f = &t->fast;
    struct jp_stream *st = t->st;
    f->thread_ = t;
    f->stamp_ = __atomic_add_fetch(&fast_stamps, 1u, __ATOMIC_RELAXED);
    f->mem_armed_ = 0;
    f->ring_data_ = st->ring.data;
    f->ring_mask_ = st->ring.mask;
    f->ring_slots_ = st->ring.slot_count;
    f->ring_head_ = &st->ring.p_head;
    f->ring_tail_ = &st->ring.p_tail_cache;
    f->ring_shared_head_ = st->ring.sh ? &st->ring.sh->head : NULL;
    f->record_count_ = &st->record_count;
    f->next_alloc_id_ = &st->next_alloc_id;
    f->alloc_id_end_ = &st->alloc_id_end;
}

/* The slot's worker ring, made once per slot when the run has a daemon and the ring keeps
 * within the caps WELCOME gave (JP_CTL_MAX_WORKER_RINGS rings, ring_cap bytes for all the
 * run's rings): the daemon never answers WORKER_RING, so a registration never waits for it.
 * A ring past the caps, or one that cannot be made, leaves the slot on the main stream; a
 * daemon that is gone fails the run as any lost daemon does. Under reg_mu. */
static void slot_stream(struct jettprof_run *run, struct jettprof_thread *t)
{
    if (t->asked || run->sock < 0 || jp_load_relaxed32(&run->failed))
        return;
    t->asked = 1;
    uint32_t slots = run->cfg.ring_slots ? run->cfg.ring_slots
                     : run->mode == JETTPROF_MODE_CPU ? JP_DEFAULT_WORKER_SLOTS_CPU
                                                      : JP_DEFAULT_WORKER_SLOTS_MEMORY;
    uint64_t bytes = (uint64_t)JP_RING_HEADER_SIZE + (uint64_t)slots * JP_SLOT_SIZE;
    if (run->ring_bytes == 0)
        run->ring_bytes = run->main.ring.map_size;
    if (run->worker_rings == JP_CTL_MAX_WORKER_RINGS || bytes > run->ring_cap ||
        run->ring_bytes > run->ring_cap - bytes)
        return;
    struct jp_stream *st = &t->own;
    memset(st, 0, sizeof *st);
    stream_init(st);
    if (jp_ring_create(slots, &st->ring) < 0) {
        memset(st, 0, sizeof *st);
        return;
    }
    (void)jp_ring_populate(&st->ring); /* by demand, a step ahead of the thread's head */
    if (jp_daemon_worker_ring(run, st) < 0) {
        jp_store_relaxed32(&run->daemon_gone, 1u);
        jp_mark_failed(run);
        jp_ring_unmap(&st->ring);
        memset(st, 0, sizeof *st);
        return;
    }
    run->worker_rings++;
    run->ring_bytes += bytes;
    t->has_own = 1;
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
    pthread_mutex_lock(&run->reg_mu);
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
    slot_stream(run, t);
    /* Owner-only part; the timer reads only line 0. */
    memset((char *)t + offsetof(struct jettprof_thread, run), 0,
           sizeof *t - offsetof(struct jettprof_thread, run));
    t->run = run;
    t->st = t->has_own ? &t->own : &run->main;
    fast_init(t);
    t->runtime_thread_id = has_ids ? runtime_thread_id : JP_ID_UNAVAILABLE;
    t->task_id = JP_ID_UNAVAILABLE;
    t->actor_id = JP_ID_UNAVAILABLE;
    jp_store_relaxed32(&t->state, JETTPROF_STATE_JETT);
    jp_store_relaxed64(&t->req_tick, 0);
    /* A reused slot may hold a request the timer raised for its previous thread just as that
     * one unregistered: no thread was there to answer it, so it is withdrawn from the
     * requested count rather than reported as a drop. */
    if (__atomic_exchange_n(&t->pending, 0u, __ATOMIC_ACQ_REL)) { /* S1+S2 */
        spin_lock(&run->lock);
        run->withdrawn_ticks++;
        spin_unlock(&run->lock);
    }
    spin_lock(&run->lock);
    run->registered++;
    spin_unlock(&run->lock);
    jp_store_release32(&t->active, 1u); /* R1: pairs with T4 */
    if (slot == n)
        jp_store_release32(&run->nslots, n + 1u); /* R2: pairs with T3 */
    tls_self = t;
    tls_serial = run->serial;
    *out = t;
out:
    pthread_mutex_unlock(&run->reg_mu);
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
    pthread_mutex_lock(&run->reg_mu);
    spin_lock(&run->lock);
    jp_store_release32(&t->active, 0); /* R1 */
    run->registered--;
    t->run = NULL;
    if (tls_serial == run->serial && tls_self == t) {
        tls_self = NULL;
        tls_serial = 0;
    }
    spin_unlock(&run->lock);
    pthread_mutex_unlock(&run->reg_mu);
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
    struct jp_rec_counters *c = push_reserve(run, &run->main, sizeof *c, JP_WAIT_NONE);
    if (!c)
        return;
    jp_counters_fill(run, c);
    jp_ring_commit(&run->main.ring);
    run->main.record_count++;
}

static void push_sample(struct jettprof_thread *t, uint64_t tick)
{
    struct jettprof_run *run = t->run;
    uint32_t state = jp_load_relaxed32(&t->state);
    uint32_t node = 0, d = t->fast.depth_;
    uint8_t flags = 0;
    struct jp_stmt pos = {0, 0};
    if (state == JETTPROF_STATE_JETT) {
        node = cur_node(t);
        if (d == 0) {
            state = JP_STATE_RUNTIME; /* executing with no Jett frame: runtime work */
            node = 0;
        } else if (node == JP_NODE_LOST) {
            state = JP_STATE_UNAVAILABLE; /* the stack could not be interned */
            node = 0;
        } else if (d <= JP_MAX_DEPTH) {
            pos = t->fast.pos_;
            if (pos.line && pos.col && (run->caps & JETTPROF_CAP_SOURCE_SPANS))
                flags = JP_SAMPLE_HAS_STMT;
            else
                pos = (struct jp_stmt){0, 0};
        }
    }
    enum jp_sect s;
    struct jp_stream *st = sect_enter(run, t, &s);
    struct jp_rec_cpu_sample *p = NULL;
    int snapshot = 0;
    /* CPU samples never wait: a full ring drops the tick and counts it. */
    if (exec_sync(run, st, t, JP_WAIT_NONE))
        p = push_reserve(run, st, sizeof *p, JP_WAIT_NONE);
    if (p) {
        *p = (struct jp_rec_cpu_sample){
            .h = {JP_REC_CPU_SAMPLE, sizeof *p},
            .state = (uint8_t)state,
            .flags = flags,
            .node = node,
            .stmt_line = pos.line,
            .stmt_col = pos.col,
            .requested_tick = tick,
        };
        jp_ring_commit(&st->ring);
        st->record_count++;
        if (++st->samples_since_counters == COUNTERS_EVERY_SAMPLES) {
            st->samples_since_counters = 0;
            snapshot = 1;
        }
    } else {
        jp_ring_commit(&st->ring); /* an EXEC may have gone in */
        jp_store_relaxed64(&st->dropped_ticks, st->dropped_ticks + 1u); /* G */
    }
    if (snapshot && s == JP_SECT_LOCKED) {
        push_counters_snapshot(run);
    } else if (snapshot) {
        /* COUNTERS belong to the main ring: a main section, once every 256 samples. */
        spin_lock(&run->lock);
        push_counters_snapshot(run);
        spin_unlock(&run->lock);
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

/* Pushes one memory event into stream st (section s). A push into the thread's own stream,
 * with its identity announced, arms the thread's inline hooks (jettprof.h) for the next ones. */
static inline int push_mem(struct jettprof_run *run, struct jettprof_thread *t,
                           struct jp_stream *st, enum jp_sect s, uint16_t type, uint64_t id,
                           uint64_t a, uint64_t b, uint64_t seq)
{
    /* alloc, resize and free share one 32-byte shape; a resize of a block resized before
     * (seq >= 1) is the two-slot RESIZE_SEQ */
    struct jp_rec_alloc *p = NULL;
    if (type == JP_REC_RESIZE && seq)
        type = JP_REC_RESIZE_SEQ;
    uint32_t bytes = type == JP_REC_RESIZE_SEQ ? sizeof(struct jp_rec_resize_seq) : 32u;
    if (exec_sync(run, st, t, JP_WAIT_MEM))
        p = push_reserve(run, st, bytes, JP_WAIT_MEM);
    if (__builtin_expect(p == NULL, 0)) {
        jp_ring_commit(&st->ring);
        jp_store_relaxed64(&st->lost_records, st->lost_records + 1u); /* G */
        if (st->ring.sh) /* relaxed: a display gauge (ring.h) */
            __atomic_store_n(&st->ring.sh->gauge_lost, st->lost_records, __ATOMIC_RELAXED);
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
    case JP_REC_RESIZE_SEQ:
        *(struct jp_rec_resize_seq *)(void *)p = (struct jp_rec_resize_seq){
            .h = {JP_REC_RESIZE_SEQ, sizeof(struct jp_rec_resize_seq)}, .node = node,
            .allocation_id = id, .old_size = a, .new_size = b, .seq = seq};
        break;
    default:
        *(struct jp_rec_free *)(void *)p = (struct jp_rec_free){
            .h = {JP_REC_FREE, 32}, .node = node, .allocation_id = id, .old_size = a,
            .seq = seq};
        break;
    }
    jp_ring_commit(&st->ring);
    st->record_count++;
    if (s == JP_SECT_OWN)
        t->fast.mem_armed_ = 1;
    return 0;
}

int jettprof_alloc(jettprof_thread *t, uint64_t size, uint64_t *id)
{
    struct jettprof_run *run = t->run;
    enum jp_sect s;
    struct jp_stream *st = sect_enter(run, t, &s);
    uint64_t nid = next_alloc_id(run, st); /* unique in the run: never reused */
    int r = 0;
    if (run->mode == JETTPROF_MODE_MEMORY)
        r = push_mem(run, t, st, s, JP_REC_ALLOC, nid, size, 0, 0);
    sect_leave(run, s);
    if (id)
        *id = nid;
    return r;
}

static inline int mem_event(jettprof_thread *t, uint16_t type, uint64_t id, uint64_t a,
                            uint64_t b, uint64_t seq)
{
    struct jettprof_run *run = t->run;
    if (seq && !(run->caps & JETTPROF_CAP_RESIZE_SEQUENCE)) {
        jp_set_reason("a resize sequence needs the resize_sequence capability");
        return -EINVAL;
    }
    if (run->mode != JETTPROF_MODE_MEMORY)
        return 0;
    enum jp_sect s;
    struct jp_stream *st = sect_enter(run, t, &s);
    int r = push_mem(run, t, st, s, type, id, a, b, seq);
    sect_leave(run, s);
    return r;
}

int jettprof_alloc_id(jettprof_thread *t, uint64_t id, uint64_t size)
{
    return mem_event(t, JP_REC_ALLOC, id, size, 0, 0);
}

int jettprof_resize(jettprof_thread *t, uint64_t id, uint64_t old_size, uint64_t new_size)
{
    return mem_event(t, JP_REC_RESIZE, id, old_size, new_size, 0);
}

int jettprof_resize_seq(jettprof_thread *t, uint64_t id, uint64_t seq, uint64_t old_size,
                        uint64_t new_size)
{
    return mem_event(t, JP_REC_RESIZE, id, old_size, new_size, seq);
}

int jettprof_free(jettprof_thread *t, uint64_t id, uint64_t old_size)
{
    return mem_event(t, JP_REC_FREE, id, old_size, 0, 0);
}

int jettprof_free_seq(jettprof_thread *t, uint64_t id, uint64_t seq, uint64_t old_size)
{
    return mem_event(t, JP_REC_FREE, id, old_size, 0, seq);
}
