/* The runtime's execution state and what its two backends share. struct jt_rt is one actor's
 * state (its heap, value stack, calls in progress and profiler handles); either backend runs
 * on it, the tree walker (interp.c) or the bytecode VM (vm.c, bytecode.h), and both make the
 * same profiler events through the code declared here and in call.h: frames at calls and
 * returns (call.h), the current statement, the safe-point poll at statements, calls, returns
 * and loop back-edges, and heap events through heap.c. The builtins (builtins.c) and the
 * actors (actors.c, actor_ops.c) work on the same state through the same declarations. */
#ifndef JETT_RUNTIME_INTERP_H
#define JETT_RUNTIME_INTERP_H

#include "jett.h"
#include "jettprof.h"
#include "runlog.h"
#include "value.h"

enum jt_outcome { JT_OUT_RETURNED = 1, JT_OUT_RUNTIME_ERROR = 2, JT_OUT_INTERRUPTED = 3 };

#define JT_MAX_DEPTH 10000u            /* nested Jett calls */
#define JT_STACK_SLOTS (1u << 20)      /* locals of all active calls */

struct jt_rt {
    struct jt_program *prog;
    struct jt_heap heap;
    jv *globals;
    jv *stack;
    uint64_t sp, base;
    uint32_t depth;
    int ctl;          /* enum jt_ctl: nonzero while unwinding */
    jv retv;
    const struct jt_fn *fn;     /* running function (for error locations) */
    uint32_t line, col;         /* current statement */
    /* profiling: pt NULL and pw &jt_no_pending when not profiled */
    struct jettprof_thread *pt;
    const uint32_t *pw;
    struct jettprof_fast *pf;      /* pt's inline enter/leave, while jt_rt_run runs (or NULL) */
    struct jettprof_pos *stmt_pos; /* CPU mode: hot lines need the current statement */
    /* output: written through, or captured for the --agent envelope */
    bool capture;
    struct jp_buf out, err;
    struct jt_runlog runlog;    /* debug rows and log records (runlog.human: where they go) */
    /* a runtime error's message, "path:line:col: runtime error: ..." */
    struct jp_buf errmsg;
    const int *interrupt;       /* set asynchronously on SIGINT; read relaxed */
    /* Actors (actors.c). Every actor has its own state: its heap, stack and calls; the run's
     * shared state (globals, outputs, runlog) is the root's, main's (actor 0). */
    struct jt_rt *root;         /* main's state: itself for main */
    struct jt_sched *sched;     /* the run's scheduler, NULL before it runs */
    struct jt_actor *actor;     /* the actor this state runs */
    const uint32_t *poke;       /* the worker's preemption word (safe points read it) */
    /* The calls in progress: frames[d] for depth d + 1, what the call keeps of its caller
     * (call.h). */
    struct jt_frame_rec *frames;
    uint32_t init_frame;        /* the <init> frame while globals initialise (depth 0), or 0 */
    void *bc_frames;            /* the VM's resume points (vm.c), made at its first call */
};

void jt_rt_init(struct jt_rt *rt, struct jt_program *prog, const int *interrupt);
/* Runs the globals' initialisers then main, on the calling coroutine (actor 0). */
enum jt_outcome jt_rt_run(struct jt_rt *rt);
/* Calls f with the values args[0..f->nparams) (owned: consumed), as a spawned actor's body
 * does; the result is owned, NIL while rt->ctl unwinds. */
jv jt_call_values(struct jt_rt *rt, const struct jt_node *at, const struct jt_fn *f, jv *args);
/* Frees every value (without profiler events: call after the profile is final). */
void jt_rt_fini(struct jt_rt *rt);

/* ---- unwinding, errors and the tree walker's evaluator: for both backends, the builtins and
 * the actors ---- */

/* rt->ctl: nonzero while unwinding. */
enum jt_ctl { CTL_NONE = 0, CTL_RETURN, CTL_BREAK, CTL_CONTINUE, CTL_ERROR, CTL_INTERRUPT };

#define NIL ((jv){.k = JV_NIL})
#define MAX_PRINT_DEPTH 64 /* nesting that print() shows and == compares */

static inline jv mk_int(int64_t i)
{
    return (jv){.k = JV_INT, .u.i = i};
}
static inline jv mk_bool(bool b)
{
    return (jv){.k = JV_BOOL, .u.i = b};
}

/* The safe point: acknowledge a pending profiler tick, then honour an interrupt. Statements,
 * calls, returns and loop back-edges all pass here, so the common case (nothing pending, no
 * interrupt) is one branch on both words together: pw is the profiler's pending word, or
 * jt_no_pending (always 0) when the run is not profiled, and a profiled safe point costs one
 * load and an OR more than an unprofiled one. */
extern const uint32_t jt_no_pending;
bool jt_safe_point_slow(struct jt_rt *rt);
#ifdef JT_TEST_TICKS
/* Only in the tests' jett-ticks (tests/runtime/ticks.c), never in jett: with
 * $JETT_TEST_TICK_EVERY=N the CPU timer is stopped before any thread registers, and every N-th
 * safe point a thread passes raises a tick itself, which that safe point then answers. A CPU
 * profile is then a function of the program and the safe points its backend passes. */
void jt_test_ticks_start(jettprof_run *run);
void jt_test_tick(struct jt_rt *rt);
#endif
static inline bool jt_safe_point(struct jt_rt *rt)
{
#ifdef JT_TEST_TICKS
    jt_test_tick(rt);
#endif
    /* The worker's preemption word joins the OR: raised by the slice ticker (actors.c) only
     * once a second actor exists, so a program without actors pays one more load. */
    if (__builtin_expect((__atomic_load_n(rt->pw, __ATOMIC_RELAXED) |
                          (uint32_t)__atomic_load_n(rt->interrupt, __ATOMIC_RELAXED) |
                          __atomic_load_n(rt->poke, __ATOMIC_RELAXED)) != 0,
                         0))
        return jt_safe_point_slow(rt);
    return true;
}

/* A value kind's name in messages ("int", "list", ...). */
const char *jt_kind_name(uint32_t k);
/* Records a runtime error at `at` (or the current statement when NULL) and starts unwinding;
 * the first error wins, and nothing is recorded once an interrupt is unwinding. */
void jt_rt_error(struct jt_rt *rt, const struct jt_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A new string value of kind JV_STR or JV_SECRET holding a copy of p[0..n); false after
 * recording the out-of-memory error. */
bool jt_new_str(struct jt_rt *rt, const struct jt_node *at, const char *p, uint64_t n, jv *out,
                uint32_t kind);
/* Evaluates an expression: an owned reference (+1), or NIL while rt->ctl unwinds. */
jv jt_eval(struct jt_rt *rt, const struct jt_node *n);
/* Evaluates a builtin call node's arguments, then applies it (builtins.c), with the same
 * ownership rule as jt_eval(). */
jv jt_call_builtin(struct jt_rt *rt, const struct jt_node *n);

/* ---- what both backends do with values (the tree walker here, the bytecode VM in vm.c) ----
 * Each takes its operands owned (consumed, also on error), reports errors at node n as
 * jt_rt_error does, and returns an owned result (NIL after an error). A backend only decides
 * the order in which operands are evaluated, which is the tree walker's everywhere, so the two
 * allocate and release the same objects in the same order. */

/* The current statement (line, col): errors without a node, and CPU samples' hot lines. */
static inline void jt_prof_stmt(struct jt_rt *rt, uint32_t line, uint32_t col)
{
    rt->line = line;
    rt->col = col;
    if (rt->stmt_pos) /* memory reports use declaration lines only */
        jettprof_stmt_set(rt->stmt_pos, line, col); /* two plain stores, no call */
}
jv jt_op_binary(struct jt_rt *rt, const struct jt_node *n, jv a, jv b); /* n->op */
jv jt_op_unary(struct jt_rt *rt, const struct jt_node *n, jv v);
jv jt_op_index(struct jt_rt *rt, const struct jt_node *n, jv a, jv i);
void jt_op_setindex(struct jt_rt *rt, const struct jt_node *n, jv l, jv i, jv v);
/* A condition's value: true or false, or false after the error for a non-bool (released). */
bool jt_truthy(struct jt_rt *rt, const struct jt_node *at, jv v);
/* Applies a declared type to a value being bound: checks it (the error names `what` and
 * `name`, and *v is released and set to NIL), and wraps a str as secret. */
bool jt_convert(struct jt_rt *rt, const struct jt_node *at, enum jt_type ty, jv *v,
                const char *what, const char *name);
/* Replaces *slot with v (owned), releasing what was there. */
void jt_store(struct jt_rt *rt, jv *slot, jv v);
/* Global n->slot: read by a JT_N_GLOBAL node, assigned by a JT_N_ASSIGN one (actors' rules). */
jv jt_read_global(struct jt_rt *rt, const struct jt_node *n);
void jt_assign_global(struct jt_rt *rt, const struct jt_node *n, jv v);
/* Builtin n->op applied to a[0..nargs) (owned, consumed); n gives the position. */
jv jt_builtin_apply(struct jt_rt *rt, const struct jt_node *n, jv *a, uint32_t nargs);

#endif
