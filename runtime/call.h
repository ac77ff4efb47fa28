/* The call protocol of a Jett call, for both backends: the tree walker's calls (interp.c) and the
 * calls the bytecode VM makes inside its dispatch loop (vm.c). A call is, in this order:
 *
 *   jt_call_room   the depth and the stack slots it needs, or the stack-overflow error;
 *   jt_call_enter  the frame record, the callee's frame and base, the profiler's enter, and the
 *                  call's safe point;
 *   ...            the callee's body, which leaves a returned value owned by the caller;
 *   jt_call_exit   the return's safe point, the profiler's leave, the caller's frame and
 *                  statement back, the return value's conversion, the callee's slots released.
 *
 * Both backends make their calls through these alone, so they pass the same safe points with
 * the same current statement, and allocate and release the same objects in the same order: a
 * memory profile is the same events in the same order on both. They are static inline because
 * the VM runs them in its dispatch loop, where an out-of-line call costs on every Jett call. */
#ifndef JETT_RUNTIME_CALL_H
#define JETT_RUNTIME_CALL_H

#include "interp.h"

/* What a call in progress keeps of its caller, at vm->frames[depth before the call]. A worker
 * reads frame, line and col of every record to re-enter the call chain with its agent when an
 * actor resumes there (actors.c): a migration keeps every function identity and call chain. */
struct jt_frame_rec {
    uint32_t frame;                 /* the callee's profiler frame */
    uint32_t line, col;             /* the caller's statement at the call */
    const struct jt_fn *caller;     /* vm->fn before the call */
    uint64_t caller_base;           /* vm->base before the call */
    const struct jt_node *at;       /* the call: where the return value's conversion errs */
};

/* Whether a value already has a declared type, so that jt_convert would leave it as it is. */
static inline bool jt_has_type(enum jt_type ty, uint32_t k)
{
    switch (ty) {
    case JT_TY_ANY: return true;
    case JT_TY_INT: return k == JV_INT;
    case JT_TY_BOOL: return k == JV_BOOL;
    case JT_TY_STR: return k == JV_STR;
    case JT_TY_LIST: return k == JV_LIST;
    case JT_TY_SECRET: return k == JV_SECRET;
    default: return false;
    }
}

/* Room for one more call whose slots end at stack slot `top`: true, or false after the
 * stack-overflow error at `at`. */
static inline bool jt_call_room(struct jt_vm *vm, const struct jt_node *at, uint64_t top)
{
    if (__builtin_expect(vm->depth >= JT_MAX_DEPTH, 0)) {
        jt_rt_error(vm, at, "stack overflow: more than %u nested calls", JT_MAX_DEPTH);
        return false;
    }
    if (__builtin_expect(top > JT_STACK_SLOTS, 0)) {
        jt_rt_error(vm, at, "stack overflow: too many local variables in active calls");
        return false;
    }
    return true;
}

/* Enters f, called at `at` through the call-site cache `site`, with its slots (arguments
 * first, owned) at vm->stack[base..base + f->nslots). False when the call's safe point
 * interrupts: the body must not run then, and jt_call_exit unwinds the call. */
static inline __attribute__((always_inline)) bool
jt_call_enter(struct jt_vm *vm, const struct jt_node *at, struct jettprof_site *site,
              const struct jt_fn *f, uint64_t base)
{
    vm->frames[vm->depth] =
        (struct jt_frame_rec){f->prof_frame, vm->line, vm->col, vm->fn, vm->base, at};
    vm->fn = f;
    vm->base = base;
    vm->depth++;
    if (vm->pf) /* the call site's cache: no call into the agent on a hit */
        jettprof_enter_fast(vm->pf, site, f->prof_frame);
    else if (vm->pt)
        jettprof_enter(vm->pt, f->prof_frame);
    return jt_safe_point(vm); /* call */
}

/* Leaves the running call with r, its returned value (owned; NIL when it returned none or
 * while vm->ctl unwinds). The call's stack is slots (its locals, at vm->base) up to top: what
 * lies above the locals are temporaries an unwinding left there, released top first, then the
 * locals. Returns r converted to the declared return type, or NIL (r released) while vm->ctl
 * unwinds; the caller's stack top is `slots` either way. The leave comes before
 * any release, so the releases are the caller's events, as they are in the tree walker. */
static inline __attribute__((always_inline)) jv jt_call_exit(struct jt_vm *vm, jv r, jv *slots,
                                                             jv *top)
{
    const struct jt_fn *f = vm->fn;
    if (!vm->ctl)
        jt_safe_point(vm); /* return */
    if (vm->pf)
        jettprof_leave_fast(vm->pf);
    else if (vm->pt)
        jettprof_leave(vm->pt);
    vm->depth--;
    const struct jt_frame_rec *rec = &vm->frames[vm->depth];
    vm->fn = rec->caller;
    vm->base = rec->caller_base;
    if (!vm->ctl) {
        jt_prof_stmt(vm, rec->line, rec->col); /* the caller's statement is current again */
        if (!jt_has_type(f->ret, r.k))
            jt_convert(vm, rec->at, f->ret, &r, "the return value of", f->name);
    }
    for (jv *e = slots + f->nslots; top > e;)
        jv_release(&vm->heap, *--top);
    for (uint32_t i = 0; i < f->nslots; i++)
        jv_release(&vm->heap, slots[i]);
    if (vm->ctl) {
        jv_release(&vm->heap, r);
        return NIL;
    }
    return r;
}

#endif
