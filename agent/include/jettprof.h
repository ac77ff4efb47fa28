/* libjettprof-agent: the in-runtime half of jettprofd.
 *
 * A Jett runtime embeds this library to be profiled out of process. The agent interns the
 * runtime's sources, frames and call chains, samples CPU time with a monotonic timer thread
 * that only sets a pending bit, records Jett-heap allocation events, and streams fixed-size
 * records to a jettprofd daemon through a shared-memory ring. It never aggregates and never
 * renders; the daemon sends the finished profile back.
 *
 * Conventions:
 *  - every function returning int returns 0 (or a count) on success and a negative errno on
 *    failure; jettprof_strerror() gives the stable message for a code;
 *  - structs passed in start with a `size` field: set it to sizeof the struct you compiled
 *    against, so the library can grow them compatibly;
 *  - handles are opaque; a jettprof_thread is used only by the thread that registered it, and
 *    the hot-path calls do not check it (pass a live handle, never NULL);
 *  - hot-path calls (enter, leave, stmt, poll, alloc, resize, free) never block, allocate,
 *    lock or make a system call while the ring has room. The one exception is the first entry
 *    into a new (caller, frame) pair, which interns a call-chain node (amortised table growth)
 *    and announces it;
 *  - a full ring applies backpressure (the policy below), it does not lose data while the
 *    daemon keeps up;
 *  - after a failure, jettprof_last_reason() names what was wrong on the calling thread.
 *
 * Threads. Every registered runtime thread writes its events (samples, allocation events and
 * its execution identity) into a ring of its own, a worker ring, with no lock and no atomic
 * read-modify-write shared with another thread, the inline fast paths included; the run's main
 * ring carries the definitions, the counters and the stop. The daemon merges the rings into one
 * stream (an allocation always before any resize or free of it, whichever threads made them).
 * Registering costs one ring: a memfd and its mapping (16 MiB in memory mode, 512 KiB in CPU
 * mode, or ring_slots below), faulted in at once so the thread's events never take a page
 * fault, and one message to the daemon (never waited for), some tens of microseconds, the
 * first time a thread slot is used; a slot keeps its ring for the run's life, so a thread that
 * registers in a slot freed by another costs nothing more. A run has at most 64 slots, so at
 * most 64 worker rings, and the daemon caps the bytes of all of a run's rings together
 * (jettprofd serve --max-run-ring-bytes, 1088 MiB by default: a main ring of up to 64 MiB and
 * 64 memory-mode worker rings; a private daemon has no byte cap).
 * A thread whose ring the daemon refuses, and every thread of a run without a daemon, writes to
 * the main ring instead, serialised with the run-level calls by a small spin flag. The run-level
 * calls (jettprof_source, jettprof_frame, jettprof_finish, and the first entry into a new
 * (caller, frame) pair) take that flag too; any thread may make them.
 *
 * Backpressure. When the ring is full, an allocation event or a definition (source, frame,
 * call-chain node, the final counters and stop) waits for the daemon: a short spin, then a
 * sleep on a futex word in the ring's shared header that the daemon signals after it releases
 * slots, only when the producer has said it is waiting (so a ring with room costs the daemon no
 * system call either). It keeps waiting as long as the daemon makes progress, however long that
 * takes. Only when the daemon has released nothing for the stall bound (stall_ms below,
 * default 1 s), or is gone (its socket closed), does the wait end: an allocation event is then
 * dropped and counted (lost_records; the profile becomes partial with reason records_dropped
 * and its live figures unavailable), a definition fails the collector (collector_failure).
 * After a stall, further events drop without waiting until the daemon moves again. CPU samples
 * never wait: a tick that finds the ring full is dropped and counted in dropped_ticks. The time
 * the program spent waiting for room is reported as producer_wait_ns in the profile's totals.
 * Memory ordering of the wait and the wake (why no wake-up is lost): protocol/ring.c.
 *
 * Capabilities shape what is recorded, never what is guessed: without
 * JETTPROF_CAP_THREAD_REGISTRATION the thread id is unavailable and one thread may register;
 * without JETTPROF_CAP_TASK_ATTRIBUTION jettprof_set_task() is ignored; without
 * JETTPROF_CAP_SOURCE_SPANS statements and declaration spans are recorded as unavailable;
 * without JETTPROF_CAP_PROCESS_CPU_TIME the process CPU duration is unavailable.
 *
 * Plain C99, usable from any language with a C FFI.
 */
#ifndef JETTPROF_H
#define JETTPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(JETTPROF_BUILDING) && defined(__GNUC__)
#define JETTPROF_API __attribute__((visibility("default")))
#else
#define JETTPROF_API
#endif

#define JETTPROF_API_VERSION 1

/* Modes (the contract's --profile and --profile-memory). */
#define JETTPROF_MODE_CPU 1u
#define JETTPROF_MODE_MEMORY 2u

/* What runs the Jett code, named in the profile's backend field with the mode's mechanism:
 * interpreter_safe_point / interpreter_alloc_hooks, vm_safe_point / vm_alloc_hooks. Nothing
 * else about a profile depends on it. */
#define JETTPROF_BACKEND_INTERPRETER 0u
#define JETTPROF_BACKEND_VM 1u

/* Capabilities a runtime declares before main. */
#define JETTPROF_CAP_CPU_TICK_SOURCE 0x01u
#define JETTPROF_CAP_SAFE_STACK_CAPTURE 0x02u
#define JETTPROF_CAP_THREAD_REGISTRATION 0x04u
#define JETTPROF_CAP_TASK_ATTRIBUTION 0x08u
#define JETTPROF_CAP_SOURCE_SPANS 0x10u
#define JETTPROF_CAP_PROCESS_CPU_TIME 0x20u
#define JETTPROF_CAP_HEAP_ALLOCATION_HOOKS 0x40u
#define JETTPROF_CAP_FREE_AND_RESIZE_EVENTS 0x80u
/* Not one of the contract's: the runtime passes each block's resize count with its resizes and
 * frees (jettprof_resize_seq, jettprof_free_seq), so blocks that move between threads and are
 * resized back to an earlier size are still counted exactly (see "Memory events across
 * threads" below). */
#define JETTPROF_CAP_RESIZE_SEQUENCE 0x100u

/* Requested outputs. VERBOSE: the human text ends with every total under its TOON name (the
 * TOON object always has them all). */
#define JETTPROF_OUT_HUMAN 0x1u
#define JETTPROF_OUT_TOON 0x2u
#define JETTPROF_OUT_VERBOSE 0x4u

/* Exports the daemon renders from the run's profile when it ends: jettprof_config.exports is
 * a set of (1u << JETTPROF_EXPORT_*), the documents come back in jettprof_result.exports. */
#define JETTPROF_EXPORT_FOLDED 0u     /* folded stacks, text */
#define JETTPROF_EXPORT_PPROF 1u      /* gzip-compressed pprof profile.proto */
#define JETTPROF_EXPORT_SPEEDSCOPE 2u /* speedscope JSON */
#define JETTPROF_EXPORT_SVG 3u        /* SVG flame graph */
#define JETTPROF_EXPORT_HTML 4u       /* the interactive HTML report, one self-contained page */
#define JETTPROF_EXPORT_COUNT 5u      /* grows: a result's size says which it covers */

/* Source origins. */
#define JETTPROF_ORIGIN_PROJECT 1u
#define JETTPROF_ORIGIN_DEPENDENCY 2u
#define JETTPROF_ORIGIN_STDLIB 3u

/* Frame kinds. */
#define JETTPROF_FRAME_FUNCTION 0u
#define JETTPROF_FRAME_RUNTIME_BUCKET 1u     /* e.g. "<runtime>" work outside any Jett frame */
#define JETTPROF_FRAME_UNAVAILABLE_SYMBOL 2u /* a frame whose symbol is missing */
/* (kind 3 is the agent's own <truncated-stack> frame; jettprof_frame() refuses it) */

/* Execution states. */
#define JETTPROF_STATE_JETT 0u
#define JETTPROF_STATE_RUNTIME 1u
#define JETTPROF_STATE_WAITING 2u

/* Terminations. */
#define JETTPROF_TERM_RETURNED 1u
#define JETTPROF_TERM_RUNTIME_ERROR 2u
#define JETTPROF_TERM_INTERRUPTED 3u

/* Profile status in a result. */
#define JETTPROF_STATUS_COMPLETE 1u
#define JETTPROF_STATUS_PARTIAL 2u
#define JETTPROF_STATUS_UNAVAILABLE 3u

#define JETTPROF_ID_UNAVAILABLE 0xffffffffu

typedef struct jettprof_run jettprof_run;
typedef struct jettprof_thread jettprof_thread;

/* Supplies the redacted excerpt of one hot line from the runtime's loaded sources (the daemon
 * never reads source files). Write at most `cap` bytes (cap >= 160) of already-redacted UTF-8
 * to buf, set *redacted to 1 if any redaction rule changed it, and return the length; return a
 * negative errno when no safe excerpt exists (the report then says the code is unavailable). */
typedef int (*jettprof_excerpt_fn)(void *user, uint32_t source_id, uint32_t line, uint32_t col,
                                   char *buf, size_t cap, int *redacted);

struct jettprof_config {
    uint32_t size;          /* sizeof(struct jettprof_config) */
    uint32_t mode;          /* JETTPROF_MODE_* */
    uint32_t rate_hz;       /* CPU: 1..1000; memory: 0 */
    uint32_t threshold_bp;  /* 0..10000 basis points */
    uint32_t limit;         /* 1..100 */
    uint32_t outputs;       /* JETTPROF_OUT_* */
    uint32_t capabilities;  /* JETTPROF_CAP_* the runtime supplies */
    int capture_fd;         /* an open, writable file for the run's capture, or -1; the
                               daemon gets a copy, the caller keeps (and closes) its own */
    uint32_t ring_slots;    /* 0: default (65536 for CPU, 524288 for memory); else a power of
                               two, 64..16777216; each slot is 32 bytes */
    jettprof_excerpt_fn excerpt; /* may be NULL: excerpts unavailable */
    void *excerpt_user;
    /* Test and embedding knobs; 0 means the contract's default. They can only lower the
     * daemon's budgets: the daemon caps each at its own ceiling (the contract's 32 MiB CPU and
     * 64 MiB retention unless the operator of `jettprofd serve` set another with
     * --max-cpu-budget / --max-retention-budget), so asking for more runs at that ceiling. */
    uint64_t cpu_budget_bytes;       /* default 33554432 */
    uint64_t retention_budget_bytes; /* default 67108864 */
    /* Added in the second version of this struct (a caller compiled against the first, whose
     * size ends at JETTPROF_CONFIG_SIZE_V1, gets the defaults for these): */
    uint32_t stall_ms; /* the stall bound of the backpressure policy, 1..600000 ms; 0: the
                          environment's JETT_PROFILE_STALL_MS if set (same range, else
                          jettprof_start fails with -EINVAL naming it), else 1000 */
    uint32_t exports;  /* 1u << JETTPROF_EXPORT_*: 0, none */
    /* Added in the third version (earlier callers get the interpreter): */
    uint32_t backend;  /* JETTPROF_BACKEND_* */
};
/* The size of the first version of struct jettprof_config (up to retention_budget_bytes). */
#define JETTPROF_CONFIG_SIZE_V1 (offsetof(struct jettprof_config, retention_budget_bytes) + 8u)
/* The size of the second version (up to exports). */
#define JETTPROF_CONFIG_SIZE_V2 (offsetof(struct jettprof_config, exports) + 4u)

/* Starts a profiled run before user code runs: checks the mode's required capabilities
 * (-ENOTSUP), validates the config (-EINVAL), attaches to the daemon named by
 * $JETTPROFD_SOCKET or spawns a private one over a socket pair, hands it the ring, and starts
 * the CPU timer thread in CPU mode. The private daemon is $JETTPROFD when that is set (nothing
 * else is tried then); else, with DIR the directory of the host's executable (/proc/self/exe),
 * DIR/../libexec/jettprofd, DIR/jettprofd, DIR/../daemon/jettprofd (the build tree), then the
 * path configured at build time (PREFIX/bin/jettprofd), then jettprofd in each absolute PATH
 * directory. On failure no run exists and the caller must not run user code as profiled;
 * jettprof_strerror() gives the stable profiler setup message and jettprof_last_reason() its
 * cause. Setup failures by stage, with what the reason names:
 *   -ENOTSUP       the mode's required capabilities are missing
 *   -EINVAL        a configuration field is out of range (jettprof_last_reason() names it)
 *   -ENOEXEC       the private jettprofd could not be started: every path tried, each with
 *                  its error ("tried JETTPROFD=/x (No such file or directory)")
 *   -ECONNREFUSED  $JETTPROFD_SOCKET could not be connected to: the path and the errno
 *   -EPROTO        the daemon closed or garbled the handshake: what was missing or wrong, and
 *                  how a private daemon exited if it did ("...; jettprofd exited with status 1")
 *   -ETIMEDOUT     the daemon did not answer the handshake within 5 s
 *   -ECONNABORTED  the daemon refused the run (permissions, limits): the daemon's own reason
 *   -ENOMEM        out of memory
 * Several runs may exist at once in one process (each with its own daemon session). */
JETTPROF_API int jettprof_start(const struct jettprof_config *cfg, jettprof_run **out);

/* The stable message for a negative errno returned by this library, e.g.
 * "profiler: backend unsupported", "profiler: setup failure: cannot start jettprofd". */
JETTPROF_API const char *jettprof_strerror(int err);

/* Why the last failing call on the calling thread failed, e.g. "source path is absolute"; ""
 * when there is none. Never contains program data. After a jettprof_start() failure at the
 * daemon stage (see there) it names file system paths and errno values, is thread-local, and
 * stays valid until the next failing call on this thread; otherwise it is a static string. */
JETTPROF_API const char *jettprof_last_reason(void);

/* Interns a source by origin and logical path (relative, '/'-separated, no "." or ".."
 * segments; an absolute path is -EINVAL). Returns the run-local source id (>= 1) in *id. The
 * same (origin, path) gives the same id. */
JETTPROF_API int jettprof_source(jettprof_run *run, uint32_t origin, const char *logical_path,
                                 uint32_t *id);

struct jettprof_frame_desc {
    uint32_t size;         /* sizeof(struct jettprof_frame_desc) */
    uint32_t kind;         /* JETTPROF_FRAME_* */
    const char *ns;        /* qualified namespace, or NULL (or "") for "<root>" */
    const char *function;  /* source-level function or runtime bucket name */
    uint32_t source_id;    /* 0: source unavailable */
    uint32_t decl_start, decl_end; /* declaration byte range */
    uint32_t decl_line, decl_col;  /* 1-based */
};
/* Interns a frame; the same description gives the same id (>= 1). Names are 1..255 bytes of
 * UTF-8; source_id is 0 or an id from jettprof_source(); decl_end >= decl_start. With no
 * source (or no source-spans capability) the declaration is recorded as unavailable. */
JETTPROF_API int jettprof_frame(jettprof_run *run, const struct jettprof_frame_desc *d,
                                uint32_t *id);

/* CPU mode: each timer tick is one requested opportunity per registered thread; a thread in
 * JETTPROF_STATE_WAITING or _RUNTIME gets it counted as waiting or runtime, one that still has
 * a request pending gets it counted as coalesced, any other gets its pending word raised.
 *
 * Registers the calling thread as a Jett runtime thread with a run-local id (unique among the
 * run's registered threads; -EEXIST otherwise). At most 64 threads at once (-ENOSPC). The
 * handle is used only by this thread, and must be unregistered (or the run finished) before
 * the thread exits. */
JETTPROF_API int jettprof_thread_register(jettprof_run *run, uint32_t runtime_thread_id,
                                          jettprof_thread **out);
JETTPROF_API void jettprof_thread_unregister(jettprof_thread *t);
/* Sets the task and actor now running on this thread (JETTPROF_ID_UNAVAILABLE when none). */
JETTPROF_API void jettprof_set_task(jettprof_thread *t, uint32_t task_id, uint32_t actor_id);

/* Call-stack tracking: entering a frame moves to the child call-chain node (interned once per
 * (parent, frame)), leaving returns to the parent. Stacks deeper than 128 keep the 127
 * root-most frames and end in the agent's <truncated-stack> frame; deeper enters stay on it
 * and leaves unwind exactly. An enter that fails (an unknown frame id: -EINVAL; the agent's
 * node table full: -ENOSPC / -ENOMEM) still pushes a level, whose samples and allocations are
 * recorded as stack-unavailable, so the matching leave stays balanced. A leave at depth 0 is
 * ignored. */
JETTPROF_API int jettprof_enter(jettprof_thread *t, uint32_t frame_id);
JETTPROF_API void jettprof_leave(jettprof_thread *t);
/* The current statement's start (1-based line and column) in the leaf frame's source. A
 * callee starts with none; returning to a frame restores its position from before the call.
 * 0 means no statement position. */
JETTPROF_API void jettprof_stmt(jettprof_thread *t, uint32_t line, uint32_t col);

/* The same position as a word the runtime may write directly on every statement (what
 * jettprof_stmt_set below does inline, and what an FFI binding does through the pointer): the
 * cheapest statement tracking. The pointer belongs to the thread handle, is touched only by
 * its thread, and stays valid until the handle is unregistered. */
struct jettprof_pos {
    uint32_t line, col;
};
JETTPROF_API struct jettprof_pos *jettprof_stmt_pos(jettprof_thread *t);
static inline void jettprof_stmt_set(struct jettprof_pos *pos, uint32_t line, uint32_t col)
{
    pos->line = line;
    pos->col = col;
}
/* Execution state around work that is not Jett code: JETTPROF_STATE_WAITING around a blocking
 * call, JETTPROF_STATE_RUNTIME around runtime work outside a Jett frame; back to
 * JETTPROF_STATE_JETT after. Ticks while waiting are never charged to the caller. A state
 * change is itself a safe point: a tick pending from before it is answered first. */
JETTPROF_API void jettprof_set_state(jettprof_thread *t, uint32_t state);

/* The safe-point poll. Call at statements, calls, returns and loop back-edges. With nothing
 * pending it is one relaxed load and a branch (inline below); jettprof_safe_point() is the same
 * as a plain function for FFI users. The pending word belongs to the thread handle and stays
 * valid until it is unregistered; the slow path pushes one CPU sample (state, call-chain node,
 * statement) and never waits: with the ring full the tick is dropped and counted. In memory
 * mode nothing is ever pending. */
JETTPROF_API const uint32_t *jettprof_pending_word(jettprof_thread *t);
JETTPROF_API void jettprof_safe_point_slow(jettprof_thread *t);
JETTPROF_API void jettprof_safe_point(jettprof_thread *t);
#if defined(__GNUC__)
static inline void jettprof_poll(jettprof_thread *t, const uint32_t *pending_word)
{
    if (__builtin_expect(__atomic_load_n(pending_word, __ATOMIC_RELAXED) != 0, 0))
        jettprof_safe_point_slow(t);
}
#endif

/* ---- Inline fast paths ----
 *
 * An interpreter calls into this library on every call, return and heap event; the functions
 * below do the common case of enter, leave and the allocation hooks inline. They work on the
 * thread's stack state, struct jettprof_fast, which jettprof_thread_fast() hands out in the
 * layout named by JETTPROF_FAST_VERSION. Its fields are private to the inline functions of
 * this header (read or write none of them); the layout changes only together with that
 * version, and a library with another layout returns NULL, so a runtime built against this
 * header falls back to the plain calls above. Plain and inline calls may be mixed freely on one
 * thread: they share the same state, record the same stream and are hot-path calls under the
 * same rules (whatever an inline call cannot do inline, it does through its plain twin).
 *
 * Call sites. jettprof_enter_fast() takes a struct jettprof_site that the runtime keeps per
 * call site, as interpreters keep inline caches (144 bytes, zero-initialised before first use;
 * its contents are private too). A hit - the site resolved the same caller node and frame for
 * this same thread registration, and holds it in that caller's way (one of JETTPROF_SITE_WAYS,
 * chosen by the caller node) - pushes the level with no table lookup and no call. A site keeps
 * up to JETTPROF_SITE_WAYS callers however their node ids fall: one found in another way (its
 * own taken by another caller) is pushed by jettprof_enter_site() without a lookup and moved
 * back into its way. Any other case (a site never used, a caller or frame it does not hold, a
 * site filled by another thread's registration or in another run, a stack deeper than
 * JETTPROF_FAST_DEPTH) takes jettprof_enter_site() as exactly jettprof_enter(), which then
 * refills the site. So a site may outlive runs and move between threads, and never yields a
 * node of another registration; like the thread handle, it is used by one thread at a time (a
 * runtime whose threads run the same code keeps its sites per thread).
 */
#define JETTPROF_FAST_VERSION 4u
#if defined(__GNUC__)
#define JETTPROF_LIKELY_(x) __builtin_expect(!!(x), 1)
#else
#define JETTPROF_LIKELY_(x) (x)
#endif
#define JETTPROF_FAST_DEPTH 128u /* the deepest recorded stack (see jettprof_enter) */
/* *to = *from, unless it holds that already (enter's save of the caller's statement). */
static inline void jettprof_pos_save_(struct jettprof_pos *to, const struct jettprof_pos *from)
{
#if defined(__GNUC__)
    uint64_t cur, was; /* a position as one word: one load and one compare */
    __builtin_memcpy(&cur, from, sizeof cur);
    __builtin_memcpy(&was, to, sizeof was);
    if (cur != was)
        __builtin_memcpy(to, &cur, sizeof cur);
#else
    if (to->line != from->line || to->col != from->col)
        *to = *from;
#endif
}

#define JETTPROF_SITE_WAYS 8u /* caller nodes a site remembers at once (a power of two) */
struct jettprof_site {
    /* way_[caller node % WAYS]: what the site resolved under that caller, so a recursive call
     * site (its caller a different node at each depth) or a function reached from several
     * callers keeps hitting; a caller displaced from its way by another is kept in a further
     * way, where jettprof_enter_site() finds it (first in the struct: no offset to add) */
    struct {
        uint64_t key_; /* (caller node << 32) | frame id, once stamp_ is set */
        uint32_t node_;
        uint32_t reserved_;
    } way_[JETTPROF_SITE_WAYS];
    uint64_t stamp_;  /* the registration that filled it; 0: empty */
    uint32_t victim_; /* the next way a displaced caller moves to when none is spare */
    uint32_t reserved_;
};

struct jettprof_fast {
    jettprof_thread *thread_; /* the handle these fields belong to */
    uint64_t stamp_;          /* this registration: unique in the process, never 0 */
    uint32_t depth_;          /* logical stack depth; may exceed JETTPROF_FAST_DEPTH */
    uint32_t trunc_node_;     /* the node in use while depth_ > JETTPROF_FAST_DEPTH */
    struct jettprof_pos pos_; /* the leaf's statement (what jettprof_stmt_pos() points to) */
    /* Memory-event window: mem_armed_ is nonzero while this thread may push allocation events
     * directly (memory mode, a ring of its own, its execution identity announced). */
    uint32_t mem_armed_;
    uint32_t reserved0_;
    uint8_t *ring_data_;
    uint64_t ring_mask_, ring_slots_;
    uint64_t *ring_head_;        /* the producer's unpublished head */
    const uint64_t *ring_tail_;  /* the producer's last-seen tail */
    uint64_t *ring_shared_head_; /* the head the consumer reads */
    uint64_t *record_count_;
    uint64_t *next_alloc_id_;    /* the stream's last allocation id ... */
    const uint64_t *alloc_id_end_; /* ... and the last of its current block */
    /* nodes_[0] is 0 (the root); nodes_[d] is the node at depth d (1..128); saved_[d] is the
     * statement of depth d while it calls. */
    uint32_t nodes_[JETTPROF_FAST_DEPTH + 1u];
    uint32_t reserved1_;
    struct jettprof_pos saved_[JETTPROF_FAST_DEPTH + 1u];
};

/* The thread's fast-path state, valid until the handle is unregistered (or its run finished);
 * NULL when `version` (pass JETTPROF_FAST_VERSION) is not this library's layout. */
JETTPROF_API struct jettprof_fast *jettprof_thread_fast(jettprof_thread *t, uint32_t version);
/* jettprof_enter() that also records in *site what it resolved, for jettprof_enter_fast().
 * Same return values as jettprof_enter(). */
JETTPROF_API int jettprof_enter_site(jettprof_thread *t, struct jettprof_site *site,
                                     uint32_t frame_id);

/* jettprof_enter(f's thread, frame_id), through the call site's cache. */
static inline int jettprof_enter_fast(struct jettprof_fast *f, struct jettprof_site *site,
                                      uint32_t frame_id)
{
    uint32_t d = f->depth_;
    uint32_t caller = f->nodes_[d < JETTPROF_FAST_DEPTH ? d : 0u];
    unsigned w = caller & (JETTPROF_SITE_WAYS - 1u);
    if (JETTPROF_LIKELY_(d < JETTPROF_FAST_DEPTH &&
                         site->way_[w].key_ == ((uint64_t)caller << 32 | frame_id) &&
                         site->stamp_ == f->stamp_)) {
        f->nodes_[d + 1u] = site->way_[w].node_;
        /* The caller's statement is saved only when this depth does not hold it already,
         * as when two calls come from one statement: an unconditional store makes the
         * matching leave wait for it, and the next enter for that leave, a chain through
         * memory from call to call (bench/RESULTS.md has the figures). */
        jettprof_pos_save_(&f->saved_[d], &f->pos_);
        f->pos_.line = 0;
        f->pos_.col = 0;
        f->depth_ = d + 1u;
        return 0;
    }
    return jettprof_enter_site(f->thread_, site, frame_id);
}

/* jettprof_leave(f's thread). */
static inline void jettprof_leave_fast(struct jettprof_fast *f)
{
    uint32_t d = f->depth_;
    /* Depths 1..128: back to the caller's node and statement. */
    if (JETTPROF_LIKELY_(d - 1u < JETTPROF_FAST_DEPTH)) {
        f->depth_ = d - 1u;
        f->pos_ = f->saved_[d - 1u];
        return;
    }
    jettprof_leave(f->thread_);
}

/* Jett-heap allocation hooks, after the operation succeeded (never for failed ones).
 * jettprof_alloc assigns the id (unique in the run, never reused: each thread draws from
 * blocks of 2^20 consecutive ids it takes in turn, so one thread's ids count 1, 2, 3, ...) and
 * returns it in *id; jettprof_alloc_id takes one the runtime assigned (a run uses one scheme
 * or the other). Sizes are bytes; zero is allowed. No clock is read while the ring has room.
 * With the ring full an event waits for the daemon as the backpressure policy at the top says;
 * one it could not deliver is dropped and counted: -ENOBUFS, with *id still assigned. In CPU mode the hooks record nothing and return 0 (ids are still
 * assigned), so a runtime may call them unconditionally. */
JETTPROF_API int jettprof_alloc(jettprof_thread *t, uint64_t size, uint64_t *id);
JETTPROF_API int jettprof_alloc_id(jettprof_thread *t, uint64_t id, uint64_t size);
JETTPROF_API int jettprof_resize(jettprof_thread *t, uint64_t id, uint64_t old_size,
                                 uint64_t new_size);
JETTPROF_API int jettprof_free(jettprof_thread *t, uint64_t id, uint64_t old_size);

/* Memory events across threads. A block may be allocated, resized and freed on different
 * threads; the daemon counts every interleaving exactly when the runtime keeps this order: an
 * event on a block is made after the event before it on that block returned (the hand-over of
 * the block between threads - a queue, a lock, a message - orders them), which the hooks
 * above keep by publishing each event before they return. Sizes alone order a block's events
 * unless its size comes back to an earlier value while it moves between threads (grown on one,
 * shrunk back on another, then freed on the first): a runtime that can do that declares
 * JETTPROF_CAP_RESIZE_SEQUENCE and passes, with every resize and free, seq, the number of
 * resizes of the block before it (0 for the first resize and for the free of a block never
 * resized; the hooks above are the same calls with seq 0). Without the capability a seq
 * other than 0 is -EINVAL. */
JETTPROF_API int jettprof_resize_seq(jettprof_thread *t, uint64_t id, uint64_t seq,
                                     uint64_t old_size, uint64_t new_size);
JETTPROF_API int jettprof_free_seq(jettprof_thread *t, uint64_t id, uint64_t seq,
                                   uint64_t old_size);

/* The allocation hooks inline: the same calls as above, with the same results, that push the
 * record themselves while the memory-event window is armed and the ring has room (no call,
 * no wait, no atomic read-modify-write), and otherwise call the functions above. */
#define JETTPROF_REC_ALLOC_ 8u /* the ring's record types (protocol/records.h) */
#define JETTPROF_REC_RESIZE_ 9u
#define JETTPROF_REC_FREE_ 10u
#if defined(__GNUC__)
struct jettprof_mem_rec_ { /* the ring's allocation, resize and free records (one slot) */
    uint16_t type, size;
    uint32_t node;
    uint64_t id, a, b;
};

/* The slot JETTPROF_RING_AHEAD_ past the head is asked for in writable state (a hint; no
 * fault, no effect on what any side reads): the consumer on another core read that line a lap
 * ago, and fetching it only when the record is stored there makes later stores wait. The
 * library's own pushes do the same (protocol/ring.h, JP_RING_WRITE_AHEAD). */
#define JETTPROF_RING_AHEAD_ 16u
#if defined(__x86_64__) || defined(__i386__)
#define JETTPROF_PREFETCHW_(p) __asm__("prefetchw %0" : : "m"(*(const char *)(p)))
#else
#define JETTPROF_PREFETCHW_(p) __builtin_prefetch((p), 1)
#endif

/* 1: pushed; 0: the caller takes the plain call. `alloc` draws the id from the stream's block
 * of ids into *id. The window is armed only for a thread whose ring is its own, so this hook is
 * that ring's one producer: no lock, no read-modify-write; the record becomes visible by the
 * release store of the ring's head (A in protocol/ring.h), as the plain call's does. */
static inline int jettprof_mem_push_(struct jettprof_fast *f, uint16_t type, int alloc,
                                     uint64_t *id, uint64_t a, uint64_t b)
{
    /* The pointers are the registration's, fixed for its life: loaded once, as the stores
     * through them would otherwise make the compiler load them again. */
    uint64_t *headp = f->ring_head_, *next = f->next_alloc_id_;
    uint64_t head = 0;
    if (__builtin_expect(!f->mem_armed_ ||
                             (head = *headp) + 1u - *f->ring_tail_ > f->ring_slots_ ||
                             (alloc && *next >= *f->alloc_id_end_),
                         0))
        return 0;
    uint64_t *shared_head = f->ring_shared_head_, *count = f->record_count_;
    uint32_t d = f->depth_;
    uint32_t node = d <= JETTPROF_FAST_DEPTH ? f->nodes_[d] : f->trunc_node_;
    struct jettprof_mem_rec_ *r =
        (struct jettprof_mem_rec_ *)(void *)(f->ring_data_ + (head & f->ring_mask_) * 32u);
    JETTPROF_PREFETCHW_(f->ring_data_ + ((head + JETTPROF_RING_AHEAD_) & f->ring_mask_) * 32u);
    uint64_t v = alloc ? ++*next : *id;
    if (alloc)
        *id = v;
    node = node == 0xffffffffu ? 0u : node; /* an unavailable stack: no node */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* type, size and node as one store: the hook is bound by its stores */
    *(uint64_t *)(void *)r = (uint64_t)node << 32 | 32u << 16 | type;
#else
    r->type = type;
    r->size = 32u;
    r->node = node;
#endif
    r->id = v;
    r->a = a;
    r->b = b;
    *headp = head + 1u;
    __atomic_store_n(shared_head, head + 1u, __ATOMIC_RELEASE); /* A */
    ++*count;
    return 1;
}
#define JETTPROF_MEM_PUSH_(f, type, alloc, id, a, b) jettprof_mem_push_(f, type, alloc, id, a, b)
#else
#define JETTPROF_MEM_PUSH_(f, type, alloc, id, a, b) ((void)(f), (void)(id), 0)
#endif

static inline int jettprof_alloc_fast(struct jettprof_fast *f, uint64_t size, uint64_t *id)
{
    uint64_t tmp;
    uint64_t *p = id ? id : &tmp;
    if (JETTPROF_MEM_PUSH_(f, JETTPROF_REC_ALLOC_, 1, p, size, 0u))
        return 0;
    return jettprof_alloc(f->thread_, size, id);
}
static inline int jettprof_alloc_id_fast(struct jettprof_fast *f, uint64_t id, uint64_t size)
{
    if (JETTPROF_MEM_PUSH_(f, JETTPROF_REC_ALLOC_, 0, &id, size, 0u))
        return 0;
    return jettprof_alloc_id(f->thread_, id, size);
}
static inline int jettprof_resize_fast(struct jettprof_fast *f, uint64_t id, uint64_t old_size,
                                       uint64_t new_size)
{
    if (JETTPROF_MEM_PUSH_(f, JETTPROF_REC_RESIZE_, 0, &id, old_size, new_size))
        return 0;
    return jettprof_resize(f->thread_, id, old_size, new_size);
}
static inline int jettprof_free_fast(struct jettprof_fast *f, uint64_t id, uint64_t old_size)
{
    if (JETTPROF_MEM_PUSH_(f, JETTPROF_REC_FREE_, 0, &id, old_size, 0u))
        return 0;
    return jettprof_free(f->thread_, id, old_size);
}
/* The resize of a block resized before (seq >= 1) takes two slots: the plain call. */
static inline int jettprof_resize_seq_fast(struct jettprof_fast *f, uint64_t id, uint64_t seq,
                                           uint64_t old_size, uint64_t new_size)
{
    if (seq == 0 && JETTPROF_MEM_PUSH_(f, JETTPROF_REC_RESIZE_, 0, &id, old_size, new_size))
        return 0;
    return jettprof_resize_seq(f->thread_, id, seq, old_size, new_size);
}
static inline int jettprof_free_seq_fast(struct jettprof_fast *f, uint64_t id, uint64_t seq,
                                         uint64_t old_size)
{
    if (seq == 0 && JETTPROF_MEM_PUSH_(f, JETTPROF_REC_FREE_, 0, &id, old_size, 0u))
        return 0;
    return jettprof_free_seq(f->thread_, id, seq, old_size);
}

struct jettprof_result {
    uint32_t size;        /* sizeof(struct jettprof_result) */
    uint32_t status;      /* JETTPROF_STATUS_* */
    char reason[40];      /* stable partial/unavailable reason, "" when complete */
    int collector_failed; /* 1: collection failed after user code started */
    char *human; size_t human_len; /* NUL-terminated, NULL unless requested */
    char *toon; size_t toon_len;   /* the `profile:` TOON object, indent 0 */
    /* 0, or the positive errno that ended the run's capture (cfg->capture_fd) early: ENOSPC
     * or EFBIG when a write failed, EINVAL when the fd is not a writable regular file. The
     * profile is unaffected (still the live one); only the capture file is missing or cut
     * short, and the caller should tell the user so. */
    int capture_errno;
    /* The id a long-lived daemon ($JETTPROFD_SOCKET) gave the run, for `jettprofd show`; 0
     * with a private daemon. Filled only when size covers it: a caller compiled before this
     * field passes the smaller size and is served without it. */
    uint64_t run_id;
    /* The exports cfg->exports asked for, each rendered from the same profile: data is
     * malloc'ed (len bytes, NUL-terminated past them), or NULL when none arrived (the run's
     * collector failed, or the daemon could not render it: then error is its positive errno). */
    struct jettprof_export {
        char *data;
        size_t len;
        int error;
    } exports[JETTPROF_EXPORT_COUNT];
};

/* Ends the run with its termination: stops the timer, flushes the ring, asks the daemon to
 * finalize, answers its excerpt requests through cfg->excerpt (called on this thread; it must
 * not call into this library), and fills *out with the rendered profile. If the daemon is
 * gone, *out still holds an `unavailable` (or `partial`) profile with reason collector_failure
 * and collector_failed = 1. Frees the run: no other thread may be using it or its thread
 * handles any more. Every wait is bounded (10 s). Returns 0, or -EINVAL (nothing done, the run
 * still exists) for a bad termination or a result whose size is too small. */
JETTPROF_API int jettprof_finish(jettprof_run *run, uint32_t termination,
                                 struct jettprof_result *out);
/* Frees the texts of a result filled by jettprof_finish(); the struct keeps its size field and
 * may be reused. */
JETTPROF_API void jettprof_result_release(struct jettprof_result *r);

#ifdef __cplusplus
}
#endif
#endif
