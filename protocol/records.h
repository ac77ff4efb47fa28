/* jettprofd wire records: the fixed-size, versioned layouts that the agent writes into the ring,
 * the daemon consumes, and captures store byte for byte.
 *
 * Layout rules (an ABI, shared between processes and stored on disk):
 *  - every field is fixed-width and little-endian; no pointers, size_t, enum or bool;
 *  - every record starts with struct jp_rec_hdr {type, size}; size counts the whole record,
 *    header included, in bytes; a reader skips a record by size and rejects what it cannot
 *    bound;
 *  - the ring is made of JP_SLOT_SIZE-byte slots; a record occupies jp_rec_slots(size)
 *    consecutive slots and never straddles the end of the ring (the producer fills the tail
 *    with a JP_REC_PAD record first). Hot records (CPU sample, allocation events, execution
 *    switch) fit one slot; metadata definitions with strings span several;
 *  - strings are raw UTF-8 bytes with explicit lengths, no NUL terminator, never absolute paths.
 *
 * Why 32-byte slots: the largest hot record (a resize: id, old and new size, call-chain node)
 * needs 32 bytes with 64-bit sizes and ids; a 64-byte slot would halve ring capacity and memory
 * bandwidth for every event, a 16-byte slot would force two-slot allocation events. Execution
 * identity (thread, task, actor) changes rarely, so it travels in its own JP_REC_EXEC record
 * that applies to the records after it instead of widening every sample.
 */
#ifndef JETTPROF_PROTOCOL_RECORDS_H
#define JETTPROF_PROTOCOL_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/utf8.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "jettprof records are little-endian; big-endian hosts need byte-swapping accessors"
#endif

/* The record stream's format. 1: a resize or free is placed by the block's size alone. 2 (a
 * runtime that declared JETTPROF_CAP_RESIZE_SEQUENCE): every RESIZE and FREE also names how
 * many resizes of its block came before it (RESIZE: 0, RESIZE_SEQ: its seq; FREE: its seq),
 * so the merge of a run's rings orders a block's events across rings even where its size
 * returns to an earlier value (protocol/ring.h, "A run's rings"). A reader takes both. */
#define JP_FORMAT_VERSION 1u
#define JP_FORMAT_VERSION_SEQ 2u
#define JP_SLOT_SIZE 32u
#define JP_REC_MAX_SIZE 2048u        /* largest record of any type, bytes */
#define JP_NAME_MAX 255u             /* namespace or function name, bytes */
#define JP_PATH_MAX 1024u            /* logical path, bytes */
#define JP_EXCERPT_MAX 160u          /* redacted code excerpt, bytes */
#define JP_MAX_DEPTH 128u            /* deepest recorded stack, frames */
#define JP_ID_NONE 0u                /* "no node", "no source", "no frame" */
#define JP_ID_UNAVAILABLE UINT32_MAX /* task, actor or thread id not known */
#define JP_NS_UNAVAILABLE UINT64_MAX /* a duration the platform did not supply */

/* One list makes the record type enum and the names: X(NAME, value, fixed_size).
 * fixed_size 0 means variable length (header + fixed part + strings). */
#define JP_RECORD_TYPES(X)                                                                        \
    X(PAD, 1, 0)                                                                                  \
    X(RUN_START, 2, 64)                                                                           \
    X(SOURCE_DEF, 3, 0)                                                                           \
    X(FRAME_DEF, 4, 0)                                                                            \
    X(NODE_DEF, 5, 16)                                                                            \
    X(EXEC, 6, 16)                                                                                \
    X(CPU_SAMPLE, 7, 32)                                                                          \
    X(ALLOC, 8, 32)                                                                               \
    X(RESIZE, 9, 32)                                                                              \
    X(FREE, 10, 32)                                                                               \
    X(COUNTERS, 11, 64)                                                                           \
    X(EXCERPT, 12, 0)                                                                             \
    X(RUN_STOP, 13, 32)                                                                           \
    X(RESIZE_SEQ, 14, 40)                                                                         \
    X(TIME, 15, 16)

enum {
#define JP_X_ENUM(name, value, size) JP_REC_##name = value,
    JP_RECORD_TYPES(JP_X_ENUM)
#undef JP_X_ENUM
    JP_REC_TYPE_LIMIT
};

/* Returns the stable lower-case name of a record type ("cpu_sample"), or NULL. */
const char *jp_rec_type_name(uint32_t type);

/* The enumerations below are also generated from one list each, for names in reports. */
#define JP_MODES(X) X(CPU, 1, "cpu") X(MEMORY, 2, "memory")
/* What ran the program: the profile's backend is this word and the mode's mechanism
 * ("interpreter_safe_point", "vm_alloc_hooks"). */
#define JP_BACKENDS(X) X(INTERPRETER, 0, "interpreter") X(VM, 1, "vm")
#define JP_ORIGINS(X) X(PROJECT, 1, "project") X(DEPENDENCY, 2, "dependency") X(STDLIB, 3, "stdlib")
#define JP_STATES(X) X(JETT, 0, "jett") X(RUNTIME, 1, "runtime") X(WAITING, 2, "waiting") \
    X(UNAVAILABLE, 3, "unavailable")
#define JP_TERMINATIONS(X) X(RETURNED, 1, "returned") X(RUNTIME_ERROR, 2, "runtime_error") \
    X(INTERRUPTED, 3, "interrupted")
/* Frame kinds: a source-level function, a named runtime bucket such as <runtime>, a native frame
 * without a symbol (<unavailable-symbol>), and the <truncated-stack> frame that ends a stack
 * deeper than JP_MAX_DEPTH. */
#define JP_FRAME_KINDS(X) X(FUNCTION, 0, "function") X(RUNTIME_BUCKET, 1, "runtime_bucket") \
    X(UNAVAILABLE_SYMBOL, 2, "unavailable_symbol") X(TRUNCATED, 3, "truncated")

enum { JP_MODE_NONE = 0,
#define JP_X(n, v, s) JP_MODE_##n = v,
       JP_MODES(JP_X)
#undef JP_X
};
enum {
#define JP_X(n, v, s) JP_BACKEND_##n = v,
       JP_BACKENDS(JP_X)
#undef JP_X
};
enum { JP_ORIGIN_NONE = 0,
#define JP_X(n, v, s) JP_ORIGIN_##n = v,
       JP_ORIGINS(JP_X)
#undef JP_X
};
enum {
#define JP_X(n, v, s) JP_STATE_##n = v,
    JP_STATES(JP_X)
#undef JP_X
    JP_STATE_LIMIT
};
enum { JP_TERM_NONE = 0,
#define JP_X(n, v, s) JP_TERM_##n = v,
       JP_TERMINATIONS(JP_X)
#undef JP_X
};
enum {
#define JP_X(n, v, s) JP_FRAME_##n = v,
    JP_FRAME_KINDS(JP_X)
#undef JP_X
    JP_FRAME_KIND_LIMIT
};

/* A profile's status, in RESULT and in every report: X(NAME, value, "word"). The values are the
 * public JETTPROF_STATUS_* ones (agent/intern.c asserts it); the words are the contract's. */
#define JP_STATUSES(X) X(COMPLETE, 1, "complete") X(PARTIAL, 2, "partial") \
    X(UNAVAILABLE, 3, "unavailable")
enum {
#define JP_X(n, v, s) JP_STATUS_##n = v,
    JP_STATUSES(JP_X)
#undef JP_X
    JP_STATUS_FIRST = JP_STATUS_COMPLETE,
    JP_STATUS_LAST = JP_STATUS_UNAVAILABLE
};
/* How a run's stream ended, as the runs log, the daemon's log lines and `jettprofd runs` name
 * it: X(NAME, value, "word"). The report turns each into the run's partial reason (render). */
/* RUNNING is no ending: a snapshot's, the profile of a run in flight (render/REPORT.md). */
#define JP_ENDINGS(X) X(STOP, 0, "stop") X(PRODUCER_LOST, 1, "producer_lost") \
    X(SHUTDOWN, 2, "shutdown") X(TRUNCATED, 3, "truncated") \
    X(COLLECTOR_FAILURE, 4, "collector_failure") X(RUNNING, 5, "running")
enum {
#define JP_X(n, v, s) JP_END_##n = v,
    JP_ENDINGS(JP_X)
#undef JP_X
    JP_END_LIMIT
};

/* The contract's ranges for a run's parameters, one definition each: the runtime's flags, the
 * agent's configuration, HELLO, RUN_START, replay and the report all check against these, and
 * their messages name them through JP_STR (plain decimals, so they read as numbers there). */
#define JP_RATE_HZ_MIN 1
#define JP_RATE_HZ_MAX 1000
#define JP_RATE_HZ_DEFAULT 1000
#define JP_THRESHOLD_BP_MAX 10000 /* basis points: 10000 is 100% */
#define JP_THRESHOLD_PCT_MAX 100  /* the same as a percentage, as the flags take it */
#define JP_LIMIT_MIN 1
#define JP_LIMIT_MAX 100
#define JP_STR_(x) #x
#define JP_STR(x) JP_STR_(x)
#define JP_RATE_HZ_RANGE JP_STR(JP_RATE_HZ_MIN) ".." JP_STR(JP_RATE_HZ_MAX)
#define JP_LIMIT_RANGE JP_STR(JP_LIMIT_MIN) ".." JP_STR(JP_LIMIT_MAX)
/* The contract's metadata budgets: the most a run gets unless an operator of `serve` sets a
 * lower or higher ceiling; a producer may only ask for less. */
#define JP_DEFAULT_CPU_BUDGET (32ull << 20)
#define JP_DEFAULT_RETENTION_BUDGET (64ull << 20)

const char *jp_mode_name(uint32_t mode);
const char *jp_backend_name(uint32_t backend);
const char *jp_status_word(uint32_t status);
const char *jp_ending_word(uint32_t ending);
const char *jp_origin_name(uint32_t origin);
const char *jp_state_name(uint32_t state);
const char *jp_termination_name(uint32_t term);
const char *jp_frame_kind_name(uint32_t kind);

/* Capability bits a runtime declares before main (the contract's list, in its order). */
#define JP_CAPABILITIES(X)                                                                        \
    X(CPU_TICK_SOURCE, 0, "cpu_tick_source")                                                      \
    X(SAFE_STACK_CAPTURE, 1, "safe_stack_capture")                                                \
    X(THREAD_REGISTRATION, 2, "jett_runtime_thread_registration")                                 \
    X(TASK_ATTRIBUTION, 3, "task_attribution")                                                    \
    X(SOURCE_SPANS, 4, "source_spans")                                                            \
    X(PROCESS_CPU_TIME, 5, "process_cpu_time")                                                    \
    X(HEAP_ALLOCATION_HOOKS, 6, "jett_heap_allocation_hooks")                                     \
    X(FREE_AND_RESIZE_EVENTS, 7, "free_and_resize_events")
enum {
#define JP_X(n, bit, s) JP_CAP_##n = 1u << bit,
    JP_CAPABILITIES(JP_X)
#undef JP_X
};
/* Not one of the contract's: a runtime that passes each block's resize count with its resizes
 * and frees (jettprof_resize_seq, jettprof_free_seq); its stream is of format 2. */
#define JP_CAP_RESIZE_SEQUENCE (1u << 8)
#define JP_CAPS_KNOWN 0x1ffu
#define JP_CAPS_CPU_REQUIRED (JP_CAP_CPU_TICK_SOURCE | JP_CAP_SAFE_STACK_CAPTURE)
#define JP_CAPS_MEMORY_REQUIRED (JP_CAP_HEAP_ALLOCATION_HOOKS | JP_CAP_FREE_AND_RESIZE_EVENTS)

struct jp_rec_hdr {
    uint16_t type;
    uint16_t size; /* whole record in bytes, header included */
};

static inline uint32_t jp_rec_slots(uint32_t size)
{
    return (size + JP_SLOT_SIZE - 1u) / JP_SLOT_SIZE;
}

/* First record of every stream: what the run asked for. */
struct jp_rec_run_start {
    struct jp_rec_hdr h;
    uint16_t format_version; /* JP_FORMAT_VERSION */
    uint8_t mode;            /* JP_MODE_* */
    uint8_t backend;         /* JP_BACKEND_* (0, the interpreter, in streams older than it) */
    uint32_t rate_hz;        /* CPU: requested rate 1..1000; memory: 0 */
    uint32_t threshold_bp;   /* 0..10000 */
    uint32_t limit;          /* 1..100 */
    uint32_t capabilities;   /* JP_CAP_* the runtime declared */
    uint32_t pid;            /* run-local metadata only, never rendered */
    uint32_t reserved2;
    uint64_t cpu_budget_bytes;       /* 33554432 unless a test shrinks it */
    uint64_t retention_budget_bytes; /* 67108864 unless a test shrinks it */
    uint64_t start_mono_ns;  /* monotonic clock at start; only differences are meaningful */
    uint64_t reserved1;
};

/* Defines source_id (>= 1, dense, in definition order). Followed by path_len bytes of logical
 * path: relative, '/'-separated, no "." or ".." segments, never absolute. */
struct jp_rec_source_def {
    struct jp_rec_hdr h;
    uint32_t source_id;
    uint8_t origin; /* JP_ORIGIN_* */
    uint8_t reserved0;
    uint16_t path_len; /* 1..JP_PATH_MAX */
    /* uint8_t path[path_len]; */
};

/* Defines frame_id (>= 1, dense). Followed by ns_len bytes of qualified namespace ("<root>" for
 * none) then fn_len bytes of function name. source_id JP_ID_NONE: source unavailable, and then
 * the declaration fields are 0 and mean unavailable. */
struct jp_rec_frame_def {
    struct jp_rec_hdr h;
    uint32_t frame_id;
    uint32_t source_id;
    uint32_t decl_start; /* declaration byte range within the source, [start, end) */
    uint32_t decl_end;
    uint32_t decl_line;  /* 1-based line of the declaration */
    uint32_t decl_col;   /* 1-based column */
    uint8_t kind;        /* JP_FRAME_* */
    uint8_t reserved0;
    uint16_t ns_len;     /* 1..JP_NAME_MAX */
    uint16_t fn_len;     /* 1..JP_NAME_MAX */
    uint16_t reserved1;
    /* uint8_t ns[ns_len]; uint8_t fn[fn_len]; */
};

/* Defines call-chain node_id (>= 1, dense) as (parent, frame): the calling-context tree.
 * parent JP_ID_NONE makes a root node (depth 1). A node's depth is its parent's + 1 and never
 * exceeds JP_MAX_DEPTH; a node at depth JP_MAX_DEPTH that is not a TRUNCATED frame may only be a
 * leaf. A node is defined before any record names it. */
struct jp_rec_node_def {
    struct jp_rec_hdr h;
    uint32_t node_id;
    uint32_t parent;
    uint32_t frame_id;
};

/* Execution identity for the records that follow, until the next JP_REC_EXEC. Before the first
 * one every identity is unavailable. */
struct jp_rec_exec {
    struct jp_rec_hdr h;
    uint32_t runtime_thread_id; /* run-local, or JP_ID_UNAVAILABLE */
    uint32_t task_id;           /* or JP_ID_UNAVAILABLE */
    uint32_t actor_id;          /* or JP_ID_UNAVAILABLE */
};

#define JP_SAMPLE_HAS_STMT 0x01u /* line/col name the leaf's current statement */

/* One acknowledged tick. state JP_STATE_JETT requires node != JP_ID_NONE; other states ignore
 * node. The statement is in the leaf frame's source. Sequence is the record's position in the
 * stream. */
struct jp_rec_cpu_sample {
    struct jp_rec_hdr h;
    uint8_t state; /* JP_STATE_* */
    uint8_t flags; /* JP_SAMPLE_* */
    uint16_t reserved0;
    uint32_t node;
    uint32_t stmt_line; /* 1-based */
    uint32_t stmt_col;  /* 1-based */
    uint64_t requested_tick; /* the tick that raised the request, run-local, monotonic */
};

/* A successful new allocation: creates allocation_id (never reused in a run). node JP_ID_NONE:
 * allocation stack unavailable. */
struct jp_rec_alloc {
    struct jp_rec_hdr h;
    uint32_t node;
    uint64_t allocation_id;
    uint64_t size;
    uint64_t reserved0;
};

/* A successful resize of a live allocation, keeping its id. node is the resizing frame. */
struct jp_rec_resize {
    struct jp_rec_hdr h;
    uint32_t node;
    uint64_t allocation_id;
    uint64_t old_size;
    uint64_t new_size;
};

/* The resize of a block resized seq (>= 1) times before, in a stream of format 2 (two slots;
 * the block's first resize is a RESIZE, whose seq is 0). Otherwise RESIZE's meaning. */
struct jp_rec_resize_seq {
    struct jp_rec_hdr h;
    uint32_t node;
    uint64_t allocation_id;
    uint64_t old_size;
    uint64_t new_size;
    uint64_t seq;
};

/* A free retiring allocation_id. old_size is the producer's view of the live size; a mismatch
 * with the tracked size is a protocol violation. The free's node attributes nothing. seq: in a
 * stream of format 2, the resizes of the block before the free; 0 in format 1. */
struct jp_rec_free {
    struct jp_rec_hdr h;
    uint32_t node;
    uint64_t allocation_id;
    uint64_t old_size;
    uint64_t seq;
};

/* Cumulative agent-side counters; each record replaces the previous values (they only grow). */
struct jp_rec_counters {
    struct jp_rec_hdr h;
    uint32_t reserved0;
    uint64_t requested_ticks; /* timer opportunities raised */
    uint64_t coalesced_ticks; /* ticks that found a request already pending */
    uint64_t dropped_ticks;   /* acknowledged ticks whose sample could not be pushed */
    uint64_t waiting_ticks;   /* ticks observed by the timer while the thread was waiting */
    uint64_t runtime_ticks;   /* ticks observed by the timer while the thread was in runtime work */
    uint64_t lost_records;    /* non-sample records the agent could not push (ring full) */
    uint64_t producer_wait_ns; /* time the program waited for ring room (backpressure) */
};

#define JP_EXCERPT_REDACTED 0x01u    /* a redaction rule changed the excerpt */
#define JP_EXCERPT_UNAVAILABLE 0x02u /* no safe excerpt exists; text_len is 0 */

/* A hot line's redacted code excerpt, supplied by the runtime at finalize time. */
struct jp_rec_excerpt {
    struct jp_rec_hdr h;
    uint32_t source_id;
    uint32_t line;
    uint32_t col;
    uint8_t flags; /* JP_EXCERPT_* */
    uint8_t reserved0;
    uint16_t text_len; /* 0..JP_EXCERPT_MAX */
    /* uint8_t text[text_len]; */
};

/* A mark of time the daemon writes into the stream it takes (never a producer: a ring that
 * carries one fails its run): ns since the run's start on the daemon's monotonic clock. It
 * places what came before it on the run's timeline (engine/timeline.c), and a capture keeps
 * it, so a replay draws the same timeline. Counted in RUN_STOP's record_count like the EXECs
 * the merge injects. */
struct jp_rec_time {
    struct jp_rec_hdr h;
    uint32_t reserved0;
    uint64_t ns;
};

/* Last record of a finished stream. record_count counts every record before this one except
 * JP_REC_PAD and JP_REC_EXCERPT (excerpts are annotations the daemon adds at finalize time,
 * between the producer's last record and this one, after asking the runtime for them). */
struct jp_rec_run_stop {
    struct jp_rec_hdr h;
    uint8_t termination; /* JP_TERM_* */
    uint8_t reserved0[3];
    uint64_t wall_ns;         /* monotonic duration of the run */
    uint64_t process_cpu_ns;  /* or JP_NS_UNAVAILABLE */
    uint64_t record_count;
};

#define JP_ASSERT_LAYOUT(type, bytes)                                                             \
    _Static_assert(sizeof(struct type) == (bytes), #type " size is part of the ABI")
JP_ASSERT_LAYOUT(jp_rec_hdr, 4);
JP_ASSERT_LAYOUT(jp_rec_run_start, 64);
JP_ASSERT_LAYOUT(jp_rec_source_def, 12);
JP_ASSERT_LAYOUT(jp_rec_frame_def, 36);
JP_ASSERT_LAYOUT(jp_rec_node_def, 16);
JP_ASSERT_LAYOUT(jp_rec_exec, 16);
JP_ASSERT_LAYOUT(jp_rec_cpu_sample, 32);
JP_ASSERT_LAYOUT(jp_rec_alloc, 32);
JP_ASSERT_LAYOUT(jp_rec_resize, 32);
JP_ASSERT_LAYOUT(jp_rec_free, 32);
JP_ASSERT_LAYOUT(jp_rec_counters, 64);
JP_ASSERT_LAYOUT(jp_rec_excerpt, 20);
JP_ASSERT_LAYOUT(jp_rec_run_stop, 32);
_Static_assert(offsetof(struct jp_rec_alloc, allocation_id) == 8, "8-byte aligned id");
_Static_assert(offsetof(struct jp_rec_resize, new_size) == 24, "resize fills one slot");
_Static_assert(offsetof(struct jp_rec_cpu_sample, requested_tick) == 24, "aligned tick");

/* The contract's --profile-threshold grammar, shared by `jett run` and `jettprofd replay` so
 * the two cannot accept different spellings: digits, optionally '.' and one or two digits,
 * 0..100, stored as basis points. No sign, exponent or spaces; never rounded. 0, -EINVAL
 * (malformed) or -ERANGE (above 100). */
int jp_parse_percent_bp(const char *s, uint32_t *bp);

/* UTF-8: the one validator, common/utf8.h (included above; every record string field is
 * checked with it). */

/* Structural validation of one record copied out of untrusted memory: the header's type is
 * known, size is within [fixed part, JP_REC_MAX_SIZE], fixed-size records have exactly their
 * size, string lengths are in range and fit inside size, every string is well-formed UTF-8
 * (jp_utf8_validate; "source path is not valid UTF-8", ...), enum fields are in range, and a
 * RUN_START's rate_hz, threshold_bp and limit are within the ranges stated on its fields.
 * Returns 0, or -EPROTO with *why set to a stable static reason ("size past end", ...).
 * It does not check references between records (that is the engine's job). */
int jp_rec_validate(const void *rec, uint32_t len, const char **why);

/* A sample's own fields (one rule, for jp_rec_validate and the engine's per-slot entry): NULL
 * when they are well-formed, else jp_rec_validate's reason. */
static inline const char *jp_rec_sample_fault(const struct jp_rec_cpu_sample *r)
{
    if (r->state >= JP_STATE_LIMIT)
        return "unknown sample state";
    if (r->flags & ~JP_SAMPLE_HAS_STMT)
        return "unknown sample flags";
    if (r->state == JP_STATE_JETT && r->node == JP_ID_NONE)
        return "jett sample without a call-chain node";
    return NULL;
}

_Static_assert(sizeof(struct jp_rec_cpu_sample) == JP_SLOT_SIZE &&
                   sizeof(struct jp_rec_alloc) == JP_SLOT_SIZE &&
                   sizeof(struct jp_rec_resize) == JP_SLOT_SIZE &&
                   sizeof(struct jp_rec_free) == JP_SLOT_SIZE,
               "the per-event records fill one slot");

#endif
