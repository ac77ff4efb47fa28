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

/* What a call in progress keeps of its caller, at rt->frames[depth before the call]. A worker
 * reads frame, line and col of every record to re-enter the call chain with its agent when an
 * actor resumes there (actors.c): a migration keeps every function identity and call chain. */
struct jt_frame_rec {
    uint32_t frame;                 /* the callee's profiler frame */
    uint32_t line, col;             /* the caller's statement at the call */
    const struct jt_fn *caller;     /* rt->fn before the call */
    uint64_t caller_base;           /* rt->base before the call */
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
static inline bool jt_call_room(struct jt_rt *rt, const struct jt_node *at, uint64_t top)
{
    if (__builtin_expect(rt->depth >= JT_MAX_DEPTH, 0)) {
        jt_rt_error(rt, at, "stack overflow: more than %u nested calls", JT_MAX_DEPTH);
        return false;
    }
    if (__builtin_expect(top > JT_STACK_SLOTS, 0)) {
        jt_rt_error(rt, at, "stack overflow: too many local variables in active calls");
        return false;
    }
    return true;
}

/* Enters f, called at `at` through the call-site cache `site`, with its slots (arguments
 * first, owned) at rt->stack[base..base + f->nslots). False when the call's safe point
 * interrupts: the body must not run then, and jt_call_exit unwinds the call. */
static inline __attribute__((always_inline)) bool
jt_call_enter(struct jt_rt *rt, const struct jt_node *at, struct jettprof_site *site,
              const struct jt_fn *f, uint64_t base)
{
    rt->frames[rt->depth] =
        (struct jt_frame_rec){f->prof_frame, rt->line, rt->col, rt->fn, rt->base, at};
    rt->fn = f;
    rt->base = base;
    rt->depth++;
    if (rt->pf) /* the call site's cache: no call into the agent on a hit */
        jettprof_enter_fast(rt->pf, site, f->prof_frame);
    else if (rt->pt)
        jettprof_enter(rt->pt, f->prof_frame);
    return jt_safe_point(rt); /* call */
}

/* Leaves the running call with r, its returned value (owned; NIL when it returned none or
 * while rt->ctl unwinds). The call's stack is slots (its locals, at rt->base) up to top: what
 * lies above the locals are temporaries an unwinding left there, released top first, then the
 * locals. Returns r converted to the declared return type, or NIL (r released) while rt->ctl
 * unwinds; the caller's stack top is `slots` either way. The leave comes before
 * any release, so the releases are the caller's events, as they are in the tree walker. */
static inline __attribute__((always_inline)) jv jt_call_exit(struct jt_rt *rt, jv r, jv *slots,
                                                             jv *top)
{
    const struct jt_fn *f = rt->fn;
    if (!rt->ctl)
        jt_safe_point(rt); /* return */
    if (rt->pf)
        jettprof_leave_fast(rt->pf);
    else if (rt->pt)
        jettprof_leave(rt->pt);
    rt->depth--;
    const struct jt_frame_rec *rec = &rt->frames[rt->depth];
    rt->fn = rec->caller;
    rt->base = rec->caller_base;
    if (!rt->ctl) {
        jt_prof_stmt(rt, rec->line, rec->col); /* the caller's statement is current again */
        if (!jt_has_type(f->ret, r.k))
            jt_convert(rt, rec->at, f->ret, &r, "the return value of", f->name);
    }
    for (jv *e = slots + f->nslots; top > e;)
        jv_release(&rt->heap, *--top);
    for (uint32_t i = 0; i < f->nslots; i++)
        jv_release(&rt->heap, slots[i]);
    if (rt->ctl) {
        jv_release(&rt->heap, r);
        return NIL;
    }
    return r;
}

#endif
