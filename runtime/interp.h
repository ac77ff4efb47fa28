/* The tree-walking interpreter. It runs on the `jett-runtime` thread (driver.c) and is the
 * only producer of profiler events: frames at calls and returns, the current statement, the
 * safe-point poll at statements, calls, returns and loop back-edges, the waiting state
 * around sleep, and heap events through heap.c. */
#ifndef JETT_RUNTIME_INTERP_H
#define JETT_RUNTIME_INTERP_H

#include "jett.h"
#include "value.h"

enum jt_outcome { JT_OUT_RETURNED = 1, JT_OUT_RUNTIME_ERROR = 2, JT_OUT_INTERRUPTED = 3 };

#define JT_MAX_DEPTH 10000u            /* nested Jett calls */
#define JT_STACK_SLOTS (1u << 20)      /* locals of all active calls */

struct jt_vm {
    struct jt_program *prog;
    struct jt_heap heap;
    jv *globals;
    jv *stack;
    uint64_t sp, base;
    uint32_t depth;
    int ctl;          /* enum ctl in interp.c: nonzero while unwinding */
    jv retv;
    const struct jt_fn *fn;     /* running function (for error locations) */
    uint32_t line, col;         /* current statement */
    /* profiling: both NULL when not profiled */
    struct jettprof_thread *pt;
    const uint32_t *pw;
    struct jettprof_pos *stmt_pos; /* CPU mode: hot lines need the current statement */
    /* output: written through, or captured for the --agent envelope */
    bool capture;
    struct jp_buf out, err;
    /* a runtime error's message, "path:line:col: runtime error: ..." */
    struct jp_buf errmsg;
    const int *interrupt;       /* set asynchronously on SIGINT; read relaxed */
};

void jt_vm_init(struct jt_vm *vm, struct jt_program *prog, const int *interrupt);
/* Runs the globals' initialisers then main. */
enum jt_outcome jt_vm_run(struct jt_vm *vm);
/* Frees every value (without profiler events: call after the profile is final). */
void jt_vm_fini(struct jt_vm *vm);

#endif
