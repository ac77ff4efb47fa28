/* libjettprof-agent internals: the run and thread objects and the helpers the agent's files
 * share. Nothing here is part of the public API (jettprof.h); tests link the static library and
 * may use the jp_agent_* test hooks declared at the end.
 *
 * Concurrency model (details at the top of produce.c):
 *  - the timer thread touches only the timer counters in struct jettprof_run and the first
 *    cache line of each thread slot (pending, req_tick, state, active), through atomics;
 *  - a registered thread with a ring of its own (a worker ring) writes its events there with
 *    no lock and no read-modify-write: its stream is its alone;
 *  - everything written to the main ring (definitions, COUNTERS, RUN_STOP, and the events of a
 *    thread without a ring of its own), and the intern tables, are touched only under the
 *    run's spin flag (a "main section").
 */
#ifndef JETTPROF_AGENT_INTERNAL_H
#define JETTPROF_AGENT_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include "jettprof.h"
#include "protocol/control.h"
#include "protocol/records.h"
#include "protocol/ring.h"

/* Thread slots live inside the run for its whole life, so the timer never touches freed memory
 * and needs no lock to walk them. */
#define JP_AGENT_MAX_THREADS 64u
/* The agent's call-chain table stops growing here (about 24 MiB of table at the cap): past it a
 * new (caller, frame) pair has no node and its stack is reported unavailable, never merged into
 * another node. The daemon's own 32 MiB CPU metadata budget binds well before this. */
#define JP_AGENT_MAX_NODES (1u << 20)
#define JP_AGENT_MAX_FRAMES (1u << 20)
#define JP_AGENT_MAX_SOURCES (1u << 16)
/* Internal marker for a stack level whose node could not be interned: samples there are
 * `unavailable`, allocations have no stack. Never written to the ring. */
#define JP_NODE_LOST UINT32_MAX

/* Waiting for ring room (produce.c): a producer waits while the consumer makes progress and
 * gives up only after the stall bound without any (jettprof_config.stall_ms, else
 * $JETT_PROFILE_STALL_MS, else the default), then drops (memory events) or fails the
 * collector (definitions). */
#define JP_STALL_DEFAULT_MS 1000u
#define JP_STALL_MAX_MS 600000u     /* 10 minutes: the largest stall bound accepted */
#define JP_WAIT_SPINS 64u           /* reloads of the tail before the first sleep */
#define JP_WAIT_SLICE_NS 10000000ull /* the longest single sleep: the daemon's liveness and the
                                      * stall bound are checked at least this often */
/* Control-socket waits (milliseconds). */
#define JP_HANDSHAKE_TIMEOUT_MS 5000
#define JP_FINISH_TIMEOUT_MS 10000
#define JP_REAP_TIMEOUT_MS 2000

/* Ring sizes (the budgets the contract fixes are protocol/records.h's). A memory-mode worker
 * ring is as large as the main ring, what a one-thread run had before worker rings: with a
 * quarter of it, tests/daemon/test_load.c's sixteen concurrent one-thread runs lost events to
 * the stall bound on a quiet machine now and then. It costs the memory its records use: its
 * first lap is faulted in by demand, a step ahead of its producer (jp_ring_populate), so a
 * thread that writes 1 MiB of records commits about 1 MiB, not 16. A CPU-mode worker ring holds 16 s of samples at the highest rate. */
#define JP_DEFAULT_SLOTS_CPU (1u << 16)
#define JP_DEFAULT_SLOTS_MEMORY (1u << 19)
#define JP_DEFAULT_WORKER_SLOTS_CPU (1u << 14)     /* 512 KiB */
#define JP_DEFAULT_WORKER_SLOTS_MEMORY (1u << 19)  /* 16 MiB */
/* Allocation ids are drawn in blocks: a stream takes the run's next block when its own runs
 * out (one atomic add per block), so two threads never share a counter. */
#define JP_ALLOC_ID_BLOCK (UINT64_C(1) << 20)

/* One record stream: a ring and its producer's state. The run's main stream is written under
 * the spin flag; a worker stream only by the thread registered in its slot. The three counters
 * marked "gauge" are stored relaxed by the producer and loaded relaxed by jp_counters_fill on
 * another thread (COUNTERS sums every stream's). */
struct jp_stream {
    struct jp_ring ring;
    uint64_t record_count;      /* records pushed, PAD excluded */
    uint64_t lost_records;      /* gauge */
    uint64_t dropped_ticks;     /* gauge */
    uint64_t producer_wait_ns;  /* gauge: time spent waiting for ring room */
    uint64_t next_alloc_id;     /* the last id given out; ids up to alloc_id_end are ours */
    uint64_t alloc_id_end;
    uint64_t stalled_tail;      /* ... and its tail is still this: drop without waiting */
    int stalled;                /* the consumer made no progress for the stall bound ... */
    uint32_t samples_since_counters;
    uint32_t exec_thread, exec_task, exec_actor; /* identity of the last EXEC pushed */
};

/* A statement position, 0: none. The public struct jettprof_pos is the same thing. */
#define jp_stmt jettprof_pos

struct jettprof_thread {
    /* Line 0: shared with the timer thread. `pending` is the word jettprof_poll() loads. */
    uint32_t pending;  /* timer: 0 -> 1 (release, T2); owner: 1 -> 0 (release, S2) */
    uint32_t state;    /* JETTPROF_STATE_*: owner stores, timer loads (relaxed, T1) */
    uint32_t active;   /* 1 while registered: store-release by register, load-acquire by timer */
    uint32_t reserved0;
    uint64_t req_tick; /* the tick that raised `pending`; written by the timer before T2 */
    uint8_t pad0[40];

    /* The slot's worker ring, asked for by the slot's first registration with a daemon and
     * kept for the run's life: later registrations in the slot go on writing it (has_own), or
     * share the main stream if the daemon refused it (asked). Registration code only, under
     * reg_mu; its producer state is then the registered thread's. */
    struct jp_stream own;
    int has_own, asked;

    /* Owner-only from here on (plus the registering/unregistering code under the lock). */
    struct jettprof_run *run;
    struct jp_stream *st;       /* &own, or the run's main stream (under the spin flag) */
    uint32_t runtime_thread_id; /* as reported: JP_ID_UNAVAILABLE without the capability */
    uint32_t task_id, actor_id;
    /* The call stack, shared with the inline fast paths of jettprof.h (the layout is
     * JETTPROF_FAST_VERSION's): depth_ (may exceed JP_MAX_DEPTH), nodes_[d] the node at depth
     * d with nodes_[0] = 0, trunc_node_ the <truncated-stack> node in use below depth 128,
     * pos_ the leaf's statement (written by jettprof_stmt() or by the runtime directly through
     * jettprof_stmt_pos(); meaningful at depths 1..128), saved_[d] depth d's statement while
     * it calls, and the memory-event window (produce.c arms it). */
    struct jettprof_fast fast;
    /* The last (parent, frame) -> node resolved at each depth. A node, once interned, never
     * changes, so a hit needs neither the table nor a producer section: an interpreter calling
     * the same function from the same place again pays one compare. 0: empty. */
    uint64_t enter_key[JP_MAX_DEPTH];
    uint32_t enter_node[JP_MAX_DEPTH];
} __attribute__((aligned(64)));

/* Open-addressing hash set of ids whose keys live elsewhere (sources, frames). */
struct jp_idset {
    uint32_t *slots; /* 0 empty, else id */
    uint32_t cap;    /* power of two */
    uint32_t count;
};

struct jp_agent_source {
    uint32_t origin;
    uint16_t len;
    char *path;
};

struct jp_frame {
    struct jettprof_frame_desc d; /* ns and function point into `names` */
    char *names;                  /* ns bytes then function bytes, not NUL-terminated */
    uint16_t ns_len, fn_len;
};

struct jp_nodetab {
    uint64_t *keys; /* (parent << 32) | frame; 0 empty (frame ids start at 1) */
    uint32_t *vals;
    uint32_t cap, count, bits;
};

struct jettprof_run {
    struct jettprof_config cfg; /* a copy, size normalised */
    uint32_t mode;
    uint32_t caps;
    uint32_t slot_count;
    uint64_t serial; /* unique per run in this process, >= 1 */
    struct jettprof_run *next_run; /* the process's list of runs (run.c, for fork) */

    /* Connection. sock -1: a local run (test hook), no daemon. */
    int sock;
    pid_t daemon_pid; /* > 0: our private daemon, to reap */
    uint64_t run_id;  /* a long-lived daemon's id of this run (WELCOME); 0 with a private one */
    uint64_t ring_cap;   /* WELCOME: the most bytes all the run's rings may have together */
    uint64_t ring_bytes; /* the bytes of the rings handed over so far (under reg_mu) */
    uint32_t worker_rings; /* worker rings handed over (under reg_mu) */
    struct jp_ctl_decoder *dec;

    struct jp_stream main;
    uint64_t start_ns;
    struct jp_rec_run_start rs;  /* as pushed, for a local collector-failure render */

    /* The main section's spin flag, on its own line; reg_mu orders registrations (they may
     * wait for the daemon's answer about a worker ring). */
    uint32_t lock __attribute__((aligned(64)));
    uint32_t registered;           /* under lock */
    pthread_mutex_t reg_mu;
    uint64_t next_id_block __attribute__((aligned(64))); /* atomic: allocation-id blocks taken */

    /* Main-section state. */
    uint64_t withdrawn_ticks; /* raised for a thread that was unregistering: not requested */
    uint64_t stall_ns;          /* the stall bound */
    uint32_t failed;       /* collector failed: atomic, any thread may read (relaxed) */
    uint32_t daemon_gone;  /* the control socket hung up: atomic */
    uint32_t trunc_frame;  /* the agent's <truncated-stack> frame, interned on first use */
    uint32_t nframes;      /* ids 1..nframes are valid; published to enter() in-section */
    struct jp_agent_source *sources; uint32_t nsources, sources_cap;
    struct jp_frame *frames; uint32_t frames_cap;
    struct jp_idset source_set, frame_set;
    struct jp_nodetab nodes;

    /* Timer (timer.c): the counters are written only by the timer thread (relaxed atomics),
     * read after it is joined. */
    pthread_t timer;
    int timer_running;
    uint32_t timer_stop;
    uint32_t nslots; /* slots ever used: store-release by register, load-acquire by timer */
    uint64_t tick_no;
    uint64_t requested_ticks, coalesced_ticks, waiting_ticks, runtime_ticks;

    struct jettprof_thread threads[JP_AGENT_MAX_THREADS];
};

/* Relaxed/acquire/release helpers: every atomic in the agent goes through these, and each call
 * site names its label from the table in produce.c or timer.c. */
static inline uint32_t jp_load_relaxed32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline uint32_t jp_load_acquire32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void jp_store_relaxed32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline void jp_store_release32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline uint64_t jp_load_relaxed64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void jp_store_relaxed64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

uint64_t jp_mono_ns(void);

/* The reason jettprof_last_reason() reports for the calling thread: a static string. */
void jp_set_reason(const char *why);

/* Probe of the (parent, frame) -> node table. Fibonacci hashing of the packed key; linear
 * probing; the table is never more than half full, so a miss ends at an empty slot quickly.
 * Returns 0 when absent. In-section. */
static inline uint64_t jp_node_key(uint32_t parent, uint32_t frame)
{
    return (uint64_t)parent << 32 | frame;
}
static inline uint32_t jp_node_find(const struct jp_nodetab *t, uint64_t key, uint32_t *slot)
{
    uint32_t mask = t->cap - 1u;
    uint32_t i = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64u - t->bits));
    for (;;) {
        uint64_t k = t->keys[i];
        if (k == key)
            return t->vals[i];
        if (k == 0) {
            *slot = i;
            return 0;
        }
        i = (i + 1u) & mask;
    }
}

/* ---- sections and pushes (produce.c) ---- */
enum jp_sect { JP_SECT_OWN = 1, JP_SECT_LOCKED };
/* Enter/leave a main section (the spin flag): definitions, the intern tables, COUNTERS and
 * RUN_STOP. t is unused (kept for the callers' symmetry); every caller locks. */
enum jp_sect jp_sect_enter(struct jettprof_run *run, struct jettprof_thread *t);
void jp_sect_leave(struct jettprof_run *run, enum jp_sect s);
/* The COUNTERS record for what was counted so far (run.c). In-section. */
void jp_counters_fill(struct jettprof_run *run, struct jp_rec_counters *c);
/* If the calling thread is registered with run, answers its pending tick (a safe point). */
void jp_answer_own_tick(struct jettprof_run *run);

enum jp_wait { JP_WAIT_NONE, JP_WAIT_MEM, JP_WAIT_META };
/* Reserve `bytes` in the main ring, waiting per the class. NULL: no room (counted by the
 * caller) or the collector already failed. A META failure marks the run collector-failed.
 * In a main section. */
void *jp_push_reserve(struct jettprof_run *run, uint32_t bytes, enum jp_wait w);
/* Commit what was reserved in the main ring and count `records` records. In a main section. */
void jp_push_commit(struct jettprof_run *run, uint32_t records);
/* The records of all the run's streams, for RUN_STOP (no producer may be running). */
uint64_t jp_record_total(struct jettprof_run *run);
/* The main stream's initial state (run_new). */
void jp_stream_init_main(struct jettprof_run *run);
/* Unmaps the slots' worker rings (run_free). */
void jp_streams_free(struct jettprof_run *run);
/* The fork child's view of every worker ring: private zero pages (run.c's atfork). */
void jp_streams_forget(struct jettprof_run *run);
void jp_mark_failed(struct jettprof_run *run);
/* Whether the daemon hung up or said something unsolicited (then it is gone for us). */
int jp_daemon_alive(struct jettprof_run *run);

/* ---- interning (intern.c); all in-section ---- */
int jp_intern_init(struct jettprof_run *run);
void jp_intern_free(struct jettprof_run *run);
/* Returns the child node of (parent, frame), creating and announcing it; JP_NODE_LOST when it
 * cannot be created. *err gets -ENOMEM / -ENOSPC when that happens. */
uint32_t jp_node_child(struct jettprof_run *run, uint32_t parent, uint32_t frame, int *err);
uint32_t jp_truncated_frame(struct jettprof_run *run);
/* Validation of a logical path (exported for tests): 0 or -EINVAL, *why a stable reason. */
int jp_path_check(const char *path, size_t len, const char **why);
/* 0 when s is well-formed UTF-8, else -EINVAL: the one validator (common/utf8.h). */
static inline int jp_utf8_check(const char *s, size_t len)
{
    return jp_utf8_validate(s, len, NULL) < 0 ? -EINVAL : 0;
}

/* ---- timer (timer.c) ---- */
int jp_timer_start(struct jettprof_run *run);
void jp_timer_stop(struct jettprof_run *run);
/* One tick: what the timer thread does each period (exported for tests). */
void jp_timer_tick(struct jettprof_run *run);
void jp_timer_ticks(struct jettprof_run *run, uint64_t elapsed);

/* ---- daemon connection (daemon.c) ---- */
int jp_daemon_connect(struct jettprof_run *run);
int jp_daemon_handshake(struct jettprof_run *run);
int jp_daemon_send_ring(struct jettprof_run *run);
/* Hands the daemon a worker ring (WORKER_RING; never answered). 0 or -errno. */
int jp_daemon_worker_ring(struct jettprof_run *run, struct jp_stream *st);
/* Receive one control message within timeout_ms: 0 and *m, or -ETIMEDOUT, -EPIPE (EOF),
 * -EPROTO (undecodable, *why). */
int jp_daemon_recv(struct jettprof_run *run, int timeout_ms, struct jp_ctl_msg *m,
                   const char **why);
void jp_daemon_close(struct jettprof_run *run);
/* Sends one control message (fds attached) within the finish timeout. 0 or -errno. */
int jp_send(struct jettprof_run *run, const struct jp_ctl_msg *m, const int *fds, unsigned nfds);

/* ---- test hooks ---- */
/* A run with a ring but no daemon: everything but the connection and the final profile. The
 * caller reads the ring through jp_agent_ring_fd() (dup it, jp_ring_map) and ends the run with
 * jp_agent_local_end(), which pushes COUNTERS and RUN_STOP and closes the ring. */
int jp_agent_start_local(const struct jettprof_config *cfg, int with_timer, jettprof_run **out);
int jp_agent_ring_fd(jettprof_run *run);
void jp_agent_local_end(jettprof_run *run, uint32_t termination);
void jp_agent_counters(jettprof_run *run, struct jp_rec_counters *out);

#endif
