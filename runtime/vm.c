/* The bytecode VM (bytecode.h): one dispatch loop, threaded with computed gotos where the
 * compiler has them. The first call of main or of an actor comes from C (interp.c's call_body,
 * which then runs the callee here); a call made by bytecode stays in the loop, through the
 * same call protocol (call.h): CALL enters and saves where the caller goes on in
 * rt->bc_frames, then jumps; RETURN and END exit in place and go on in the caller. Actors,
 * preemption at safe points and migration work on the VM unchanged: an actor's coroutine stack
 * holds its loop, its value stack (rt->stack) the locals and temporaries of all its calls.
 *
 * Ownership is the tree walker's: every value on the stack is an owned reference. An error or
 * interrupt sets rt->ctl; the loop then releases the current call's temporaries, top first,
 * runs its epilogue (leave, release the frame) and goes on unwinding in the caller, until the
 * call it was entered for, which returns to C.
 *
 * The integer fast paths (ADD ... GE on two ints without overflow, LOCAL, SET_LOCAL, the loop
 * steps) do inline what the shared operation would; anything else calls it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "actors.h"
#include "bytecode.h"
#include "call.h"
#include "interp.h"

#if defined(__GNUC__)
#define JT_THREADED 1
/* Labels as values and `goto *` are the GNU dialect's (clang has them too). */
#pragma GCC diagnostic ignored "-Wpedantic"
#else
#define JT_THREADED 0
#endif

/* A stack value read field by field. A fast path stores a result's fields separately (the
 * compiler drops a kind store it knows is redundant), and a load wider than the store before
 * it (a 16-byte copy, or the kind with its padding) cannot be forwarded from the store buffer:
 * on the hot paths that stall costs more than the instruction. */
static inline jv top_value(const jv *p)
{
    jv v;
    v.k = p->k;
    v.u.i = p->u.i;
    return v;
}

static inline void push_value(jv *sp, jv v)
{
    sp->k = v.k;
    sp->u.i = v.u.i;
}

static inline void push_local(jv *sp, jv v)
{
    jv_retain(v);
    *sp = v;
}

/* Where the caller of a call made inside the loop goes on, at rt->bc_frames[depth before the
 * call], beside that call's frame record (call.h), which keeps the rest. */
struct bc_frame {
    const uint32_t *pc;          /* the caller's next instruction */
    const struct jt_bc *bc;      /* the caller's code */
};

/* Runs bc with its temporaries from rt->stack[floor]; the function's locals are at rt->base.
 * Returns VALUE's result (an owned value), else NIL; rt->sp is floor on return. */
static jv run(struct jt_rt *rt, const struct jt_bc *bc, uint64_t floor)
{
    jv *const stack = rt->stack;
    jv *locals = stack + rt->base;
    jv *const bottom = stack + floor;
    jv *sp = bottom;
    const uint32_t *code = bc->code;
    const uint32_t *pc = code;
    const struct jt_node *const *pos = bc->pos;
    struct jt_heap *const heap = &rt->heap;
    /* Calls made here run in this loop; the frame run() was called for is at entry_depth. */
    const uint32_t entry_depth = rt->depth;
    struct bc_frame *frames = rt->bc_frames;
    jv r;

#if JT_THREADED
    static const void *const labels[] = {
#define JT_X(n, w) [JT_OP_##n] = &&op_##n,
        JT_BC_OPS(JT_X)
#undef JT_X
    };
#define CASE(n) op_##n:
#define NEXT goto *labels[*pc++]
    NEXT;
#else
#define CASE(n) case JT_OP_##n:
#define NEXT continue
    for (;;)
        switch (*pc++) {
#endif

    CASE(STMT)
    {
        jt_prof_stmt(rt, pc[1], pc[2]); /* P's line and column, inline */
        pc += 3;
        if (!jt_safe_point(rt))
            goto unwind;
        NEXT;
    }
    CASE(NIL) *sp++ = NIL; NEXT;
    CASE(TRUE) *sp++ = mk_bool(true); NEXT;
    CASE(FALSE) *sp++ = mk_bool(false); NEXT;
    CASE(INT)
    {
        uint64_t v = (uint64_t)pc[0] | (uint64_t)pc[1] << 32;
        pc += 2;
        *sp++ = mk_int((int64_t)v);
        NEXT;
    }
    CASE(STR) *sp++ = (jv){.k = JV_STR, .u.o = &pos[*pc++]->str->h}; NEXT;
    CASE(LOCAL) push_local(sp++, locals[*pc++]); NEXT;
    CASE(GLOBAL)
    {
        jv v = jt_read_global(rt, pos[*pc++]);
        if (rt->ctl)
            goto unwind;
        *sp++ = v;
        NEXT;
    }
    CASE(LIST_NEW)
    {
        const struct jt_node *n = pos[pc[0]];
        uint32_t cap = pc[1];
        pc += 2;
        struct jt_list *l;
        if (jt_heap_list(heap, cap, &l) < 0) {
            jt_rt_error(rt, n, "out of memory: cannot allocate a list of %u slots", cap);
            goto unwind;
        }
        *sp++ = (jv){.k = JV_LIST, .u.o = &l->h};
        NEXT;
    }
    CASE(LIST_ADD)
    {
        jv v = *--sp;
        struct jt_list *l = (struct jt_list *)sp[-1].u.o;
        l->items[l->len++] = v;
        NEXT;
    }
#define INT_OP(NAME, EXPR)                                                                        \
    CASE(NAME)                                                                                    \
    {                                                                                             \
        if (__builtin_expect(sp[-2].k == JV_INT && sp[-1].k == JV_INT, 1)) {                      \
            int64_t x = sp[-2].u.i, y = sp[-1].u.i;                                               \
            EXPR;                                                                                 \
        }                                                                                         \
        goto binary;                                                                              \
    }
    INT_OP(ADD, int64_t z; if (!__builtin_add_overflow(x, y, &z)) {
        sp[-2] = mk_int(z); /* whole: the next load of it is whole */
        sp--;
        pc++;
        NEXT;
    })
    INT_OP(SUB, int64_t z; if (!__builtin_sub_overflow(x, y, &z)) {
        sp[-2] = mk_int(z); /* whole: the next load of it is whole */
        sp--;
        pc++;
        NEXT;
    })
    INT_OP(MUL, int64_t z; if (!__builtin_mul_overflow(x, y, &z)) {
        sp[-2] = mk_int(z); /* whole: the next load of it is whole */
        sp--;
        pc++;
        NEXT;
    })
    INT_OP(DIV, if (y != 0 && !(x == INT64_MIN && y == -1)) {
        sp[-2] = mk_int(x / y);
        sp--;
        pc++;
        NEXT;
    })
    INT_OP(MOD, if (y != 0 && !(x == INT64_MIN && y == -1)) {
        sp[-2] = mk_int(x % y);
        sp--;
        pc++;
        NEXT;
    })
    INT_OP(EQ, sp[-2] = mk_bool(x == y); sp--; pc++; NEXT)
    INT_OP(NE, sp[-2] = mk_bool(x != y); sp--; pc++; NEXT)
    INT_OP(LT, sp[-2] = mk_bool(x < y); sp--; pc++; NEXT)
    INT_OP(LE, sp[-2] = mk_bool(x <= y); sp--; pc++; NEXT)
    INT_OP(GT, sp[-2] = mk_bool(x > y); sp--; pc++; NEXT)
    INT_OP(GE, sp[-2] = mk_bool(x >= y); sp--; pc++; NEXT)
#undef INT_OP
#define K64(at) ((int64_t)((uint64_t)(at)[0] | (uint64_t)(at)[1] << 32))
#define INT_K(NAME, EXPR)                                                                         \
    CASE(NAME)                                                                                    \
    {                                                                                             \
        if (__builtin_expect(sp[-1].k == JV_INT, 1)) {                                            \
            int64_t x = sp[-1].u.i, y = K64(pc + 1);                                              \
            EXPR;                                                                                 \
        }                                                                                         \
        goto binary_k;                                                                            \
    }
    INT_K(ADD_K, int64_t z; if (!__builtin_add_overflow(x, y, &z)) {
        sp[-1] = mk_int(z);
        pc += 3;
        NEXT;
    })
    INT_K(SUB_K, int64_t z; if (!__builtin_sub_overflow(x, y, &z)) {
        sp[-1] = mk_int(z);
        pc += 3;
        NEXT;
    })
    INT_K(MUL_K, int64_t z; if (!__builtin_mul_overflow(x, y, &z)) {
        sp[-1] = mk_int(z);
        pc += 3;
        NEXT;
    })
    INT_K(LT_K, sp[-1] = mk_bool(x < y); pc += 3; NEXT)
    INT_K(LE_K, sp[-1] = mk_bool(x <= y); pc += 3; NEXT)
    INT_K(GT_K, sp[-1] = mk_bool(x > y); pc += 3; NEXT)
    INT_K(GE_K, sp[-1] = mk_bool(x >= y); pc += 3; NEXT)
    INT_K(EQ_K, sp[-1] = mk_bool(x == y); pc += 3; NEXT)
    INT_K(NE_K, sp[-1] = mk_bool(x != y); pc += 3; NEXT)
    /* y > 0: no division by zero and no INT64_MIN / -1 */
    INT_K(DIV_K, {
        __extension__ typedef unsigned __int128 u128;
        int64_t q = x >= 0 ? (int64_t)(((u128)(uint64_t)x * (uint64_t)K64(pc + 3)) >> pc[5])
                           : x / y;
        sp[-1] = mk_int(q);
        pc += 6;
        NEXT;
    })
    INT_K(MOD_K, {
        __extension__ typedef unsigned __int128 u128;
        int64_t q = x >= 0 ? (int64_t)(((u128)(uint64_t)x * (uint64_t)K64(pc + 3)) >> pc[5])
                           : x / y;
        sp[-1] = mk_int(x - q * y);
        pc += 6;
        NEXT;
    })
#undef INT_K
    binary_k: /* the literal pushed, then the general path */
    {
        const struct jt_node *n = pos[pc[0]];
        pc += pc[-1] == JT_OP_DIV_K || pc[-1] == JT_OP_MOD_K ? 6 : 3;
        sp--;
        r = jt_op_binary(rt, n, sp[0], mk_int(n->b->ival));
        if (rt->ctl)
            goto unwind;
        push_value(sp++, r);
        NEXT;
    }
    CASE(BINARY)
    binary:
    {
        const struct jt_node *n = pos[*pc++];
        sp -= 2;
        r = jt_op_binary(rt, n, sp[0], sp[1]);
        if (rt->ctl)
            goto unwind;
        push_value(sp++, r);
        NEXT;
    }
    CASE(UNARY)
    {
        const struct jt_node *n = pos[*pc++];
        uint64_t k = sp[-1].k;
        if (n->op == JT_T_NOT ? k == JV_BOOL : k == JV_INT && sp[-1].u.i != INT64_MIN) {
            int64_t v = sp[-1].u.i;
            sp[-1] = n->op == JT_T_NOT ? mk_bool(!v) : mk_int(-v);
            NEXT;
        }
        r = jt_op_unary(rt, n, top_value(--sp));
        if (rt->ctl)
            goto unwind;
        push_value(sp++, r);
        NEXT;
    }
    CASE(INDEX)
    {
        const struct jt_node *n = pos[*pc++];
        sp -= 2;
        r = jt_op_index(rt, n, sp[0], sp[1]);
        if (rt->ctl)
            goto unwind;
        push_value(sp++, r);
        NEXT;
    }
    CASE(TRUTHY)
    {
        const struct jt_node *n = pos[*pc++];
        if (sp[-1].k != JV_BOOL) {
            jt_truthy(rt, n, *--sp); /* the error; the value released */
            goto unwind;
        }
        NEXT;
    }
    CASE(JUMP) pc = code + *pc; NEXT;
    CASE(JFALSE)
    {
        jv c = top_value(--sp);
        if (__builtin_expect(c.k != JV_BOOL, 0)) {
            jt_truthy(rt, pos[pc[0]], c);
            goto unwind;
        }
        pc = c.u.i ? pc + 2 : code + pc[1];
        NEXT;
    }
    CASE(JTRUE)
    {
        jv c = top_value(--sp);
        if (__builtin_expect(c.k != JV_BOOL, 0)) {
            jt_truthy(rt, pos[pc[0]], c);
            goto unwind;
        }
        pc = c.u.i ? code + pc[1] : pc + 2;
        NEXT;
    }
    CASE(JFALSE_KEEP)
    {
        if (!sp[-1].u.i) {
            pc = code + *pc;
        } else {
            sp--;
            pc++;
        }
        NEXT;
    }
    CASE(JTRUE_KEEP)
    {
        if (sp[-1].u.i) {
            pc = code + *pc;
        } else {
            sp--;
            pc++;
        }
        NEXT;
    }
    CASE(POP) jv_release(heap, top_value(--sp)); NEXT;
    CASE(LET)
    {
        const struct jt_node *n = pos[*pc++];
        jv v = top_value(--sp);
        if (n->ty != JT_TY_ANY && !jt_convert(rt, n, n->ty, &v, "variable", n->name))
            goto unwind;
        jt_store(rt, &locals[n->slot], v);
        NEXT;
    }
    CASE(SET_LOCAL)
    {
        jv *slot = &locals[*pc++];
        jv old = *slot;
        *slot = top_value(--sp);
        jv_release(heap, old);
        NEXT;
    }
    CASE(SET_GLOBAL)
    {
        const struct jt_node *n = pos[*pc++];
        jt_assign_global(rt, n, *--sp);
        if (rt->ctl)
            goto unwind;
        NEXT;
    }
    CASE(SET_INDEX)
    {
        const struct jt_node *n = pos[*pc++];
        sp -= 3;
        jt_op_setindex(rt, n, sp[0], sp[1], sp[2]);
        if (rt->ctl)
            goto unwind;
        NEXT;
    }
    CASE(CALL_ROOM)
    {
        const struct jt_node *n = pos[*pc++];
        const struct jt_fn *f = n->fn;
        /* The callee's locals and temporaries start here (its arguments are pushed next). */
        if (!jt_call_room(rt, n, (uint64_t)(sp - stack) + f->nslots + f->bc->max_temps))
            goto unwind;
        NEXT;
    }
    CASE(PARAM)
    {
        const struct jt_node *n = pos[pc[0]];
        uint32_t i = pc[1];
        pc += 2;
        if (!jt_has_type(n->fn->params[i].ty, sp[-1].k) &&
            !jt_convert(rt, n->kids[i], n->fn->params[i].ty, &sp[-1], "parameter",
                        n->fn->params[i].name)) {
            sp--; /* released by the conversion */
            goto unwind;
        }
        NEXT;
    }
    CASE(CALL)
    {
        /* The call protocol (call.h) in the loop: enter through this instruction's call-site
         * cache, then the callee's code; its RETURN or END comes back to the caller here. */
        const struct jt_node *n = pos[pc[0]];
        struct jettprof_site *site = &bc->sites[pc[1]];
        pc += 2;
        const struct jt_fn *f = n->fn;
        jv *base = sp - n->nkids;
        for (jv *e = base + f->nslots; sp < e;)
            *sp++ = NIL;
        if (__builtin_expect(!frames, 0)) {
            frames = rt->bc_frames = malloc(sizeof *frames * (JT_MAX_DEPTH + 1));
            if (!frames) {
                jt_rt_error(rt, n, "out of memory: cannot call %s", f->name);
                goto unwind;
            }
        }
        frames[rt->depth] = (struct bc_frame){pc, bc};
        bool go = jt_call_enter(rt, n, site, f, (uint64_t)(base - stack));
        bc = f->bc;
        code = bc->code;
        pos = bc->pos;
        locals = base;
        if (!go) {
            r = NIL;
            goto leave;
        }
        pc = code;
        NEXT;
    }
    CASE(BUILTIN)
    {
        const struct jt_node *n = pos[pc[0]];
        uint32_t nargs = pc[1];
        pc += 2;
        sp -= nargs; /* the builtin owns them now */
        r = jt_builtin_apply(rt, n, sp, nargs);
        if (rt->ctl)
            goto unwind;
        push_value(sp++, r);
        NEXT;
    }
    CASE(LEN)
    {
        jv v = sp[-1];
        if (v.k == JV_STR || v.k == JV_SECRET) {
            sp[-1] = mk_int((int64_t)((const struct jt_str *)v.u.o)->len);
        } else if (v.k == JV_LIST) {
            sp[-1] = mk_int((int64_t)((const struct jt_list *)v.u.o)->len);
        } else {
            sp--;
            r = jt_builtin_apply(rt, pos[*pc++], sp, 1); /* its error */
            goto unwind;
        }
        pc++;
        jv_release(heap, v);
        NEXT;
    }
    CASE(BYTE)
    {
        jv s = sp[-2], i = sp[-1];
        if (s.k == JV_STR && i.k == JV_INT && i.u.i >= 0 &&
            (uint64_t)i.u.i < ((const struct jt_str *)s.u.o)->len) {
            sp[-2] = mk_int((unsigned char)((const struct jt_str *)s.u.o)->data[i.u.i]);
            sp--;
            pc++;
            jv_release(heap, s);
            NEXT;
        }
        sp -= 2;
        r = jt_builtin_apply(rt, pos[*pc++], sp, 2); /* its error */
        goto unwind;
    }
    CASE(SPAWN_OK)
    {
        if (!jt_actor_spawn_allowed(rt, pos[*pc++]))
            goto unwind;
        NEXT;
    }
    CASE(SPAWN_ARG)
    {
        const struct jt_node *n = pos[pc[0]];
        uint32_t i = pc[1];
        pc += 2;
        jv v = *--sp;
        *sp++ = jt_actor_spawn_copy(rt, n->a->kids[i], v);
        if (rt->ctl)
            goto unwind;
        NEXT;
    }
    CASE(SPAWN)
    {
        const struct jt_node *n = pos[*pc++];
        uint32_t np = n->a->fn->nparams;
        jv *args = calloc(np ? np : 1, sizeof *args);
        if (!args) {
            jt_rt_error(rt, n, "out of memory: cannot start an actor");
            goto unwind;
        }
        sp -= np;
        memcpy(args, sp, sizeof *args * np);
        r = jt_actor_spawn_start(rt, n, args);
        if (rt->ctl)
            goto unwind;
        push_value(sp++, r);
        NEXT;
    }
    CASE(RANGE)
    {
        const struct jt_node *n = pos[*pc++];
        if (sp[-2].k != JV_INT || sp[-1].k != JV_INT) {
            jt_rt_error(rt, n, "a range expects int bounds, got %s..%s", jt_kind_name(sp[-2].k),
                        jt_kind_name(sp[-1].k));
            goto unwind;
        }
        NEXT;
    }
    CASE(RANGE_NEXT)
    {
        int64_t i = sp[-2].u.i;
        if (i >= sp[-1].u.i) {
            pc = code + pc[1];
            NEXT;
        }
        locals[pc[0]] = mk_int(i); /* the loop variable only ever holds ints */
        sp[-2] = mk_int(i + 1);
        pc += 2;
        NEXT;
    }
    CASE(RANGE_LOOP)
    {
        if (!jt_safe_point(rt)) /* loop back-edge */
            goto unwind;
        int64_t i = sp[-2].u.i;
        if (i < sp[-1].u.i) {
            locals[pc[0]] = mk_int(i);
            sp[-2] = mk_int(i + 1);
            pc = code + pc[1];
            NEXT;
        }
        pc += 2;
        NEXT;
    }
    CASE(EACH)
    {
        const struct jt_node *n = pos[*pc++];
        jv l = *--sp;
        if (l.k != JV_LIST) {
            jt_rt_error(rt, n, "for ... in expects a list or a range, got %s", jt_kind_name(l.k));
            jv_release(heap, l);
            goto unwind;
        }
        /* the hidden slot keeps the list alive while it is walked */
        jt_store(rt, &locals[(uint32_t)n->ival], l);
        *sp++ = mk_int(0);
        NEXT;
    }
    CASE(EACH_NEXT)
    {
        const struct jt_node *n = pos[pc[0]];
        const struct jt_list *l = (const struct jt_list *)locals[(uint32_t)n->ival].u.o;
        uint64_t i = (uint64_t)sp[-1].u.i;
        if (i >= l->len) {
            pc = code + pc[1];
            NEXT;
        }
        pc += 2;
        jv e = l->items[i];
        jv_retain(e);
        jt_store(rt, &locals[n->slot], e);
        sp[-1] = mk_int((int64_t)(i + 1));
        NEXT;
    }
    CASE(EACH_LOOP)
    {
        if (!jt_safe_point(rt)) /* loop back-edge */
            goto unwind;
        const struct jt_node *n = pos[pc[0]];
        const struct jt_list *l = (const struct jt_list *)locals[(uint32_t)n->ival].u.o;
        uint64_t i = (uint64_t)sp[-1].u.i;
        if (i < l->len) {
            jv e = l->items[i];
            jv_retain(e);
            jt_store(rt, &locals[n->slot], e);
            sp[-1] = mk_int((int64_t)(i + 1));
            pc = code + pc[1];
            NEXT;
        }
        pc += 2;
        NEXT;
    }
    CASE(EACH_END)
    {
        const struct jt_node *n = pos[*pc++];
        jt_store(rt, &locals[n->slot], NIL);
        jt_store(rt, &locals[(uint32_t)n->ival], NIL);
        NEXT;
    }
    CASE(DROP) sp -= *pc++; NEXT;
    CASE(BACK_EDGE)
    {
        if (!jt_safe_point(rt)) /* loop back-edge */
            goto unwind;
        NEXT;
    }
    CASE(RETURN)
    {
        r = top_value(--sp);
        if (rt->depth == entry_depth) { /* the call from C (interp.c) returns it */
            while (sp > bottom) /* loop state: ints */
                jv_release(heap, *--sp);
            rt->retv = r;
            rt->ctl = CTL_RETURN;
            rt->sp = floor;
            return NIL;
        }
        goto leave;
    }
    CASE(END)
    {
        if (rt->depth == entry_depth) {
            rt->sp = floor;
            return NIL;
        }
        r = NIL;
    }
    leave: /* the exit of a call made in this loop; with rt->ctl set (an error or interrupt in
            * the callee, r NIL) it releases the frame and goes on unwinding in the caller */
    {
        r = jt_call_exit(rt, r, locals, sp);
        const struct bc_frame *fr = &frames[rt->depth];
        sp = locals;
        bc = fr->bc;
        code = bc->code;
        pos = bc->pos;
        pc = fr->pc;
        locals = stack + rt->base;
        if (rt->ctl)
            goto unwind;
        push_value(sp++, r);
        NEXT;
    }
    CASE(VALUE)
    {
        r = top_value(--sp);
        rt->sp = floor;
        return r;
    }
#if !JT_THREADED
        default:
            jt_rt_error(rt, NULL, "internal: bad bytecode");
            goto unwind;
        }
#endif
#undef CASE
#undef NEXT

unwind:
    if (rt->depth != entry_depth) { /* a call made here: its epilogue, then the caller's */
        r = NIL;
        goto leave;
    }
    while (sp > bottom)
        jv_release(heap, *--sp);
    rt->sp = floor;
    return NIL;
}

void jt_bc_exec(struct jt_rt *rt, const struct jt_fn *f)
{
    run(rt, f->bc, rt->sp);
}

jv jt_bc_eval(struct jt_rt *rt, const struct jt_bc *bc)
{
    return run(rt, bc, rt->sp);
}
