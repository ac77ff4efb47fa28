/* The evaluator. Values returned by jt_eval() are owned references (+1); every path that drops
 * one releases it, so an object is freed as soon as it becomes unreachable (cycles excepted:
 * they stay alive and are retained at the end of the run).
 *
 * Control flow (return, break, continue, runtime errors, interrupts) unwinds through
 * rt->ctl: a nonzero value makes every level return at once, releasing what it holds. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors.h"
#include "bytecode.h"
#include "call.h"
#include "interp.h"
#include "jettprof.h"

const char *jt_kind_name(uint32_t k)
{
    switch (k) {
    case JV_NIL: return "nil";
    case JV_INT: return "int";
    case JV_BOOL: return "bool";
    case JV_STR: return "str";
    case JV_LIST: return "list";
    case JV_SECRET: return "secret";
    default: return "?";
    }
}

void jt_rt_error(struct jt_rt *rt, const struct jt_node *at, const char *fmt, ...)
{
    if (rt->ctl == CTL_ERROR || rt->ctl == CTL_INTERRUPT)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint32_t line = at ? at->line : rt->line, col = at ? at->col : rt->col;
    jt_buf_printf(&rt->errmsg, "%s:%u:%u: runtime error: %s", rt->fn->src->logical, line, col, msg);
    rt->ctl = CTL_ERROR;
}

bool jt_new_str(struct jt_rt *rt, const struct jt_node *at, const char *p, uint64_t n, jv *out,
                    uint32_t kind)
{
    struct jt_str *s;
    if (jt_heap_str(&rt->heap, n, &s) < 0) {
        jt_rt_error(rt, at, "out of memory: cannot allocate a string of %" PRIu64 " bytes", n);
        return false;
    }
    if (n)
        memcpy(s->data, p, n);
    *out = (jv){.k = kind, .u.o = &s->h};
    return true;
}

static int values_equal(struct jt_rt *rt, const struct jt_node *at, jv a, jv b, int depth)
{
    if (depth > MAX_PRINT_DEPTH) {
        jt_rt_error(rt, at, "cannot compare lists nested more than %d deep", MAX_PRINT_DEPTH);
        return 0;
    }
    bool as = a.k == JV_STR || a.k == JV_SECRET, bs = b.k == JV_STR || b.k == JV_SECRET;
    if (as && bs) {
        const struct jt_str *x = (const struct jt_str *)a.u.o, *y = (const struct jt_str *)b.u.o;
        return x->len == y->len && memcmp(x->data, y->data, x->len) == 0;
    }
    if (a.k != b.k)
        return 0;
    switch (a.k) {
    case JV_NIL: return 1;
    case JV_INT: case JV_BOOL: return a.u.i == b.u.i;
    case JV_LIST: {
        const struct jt_list *x = (const struct jt_list *)a.u.o, *y = (const struct jt_list *)b.u.o;
        if (x == y)
            return 1;
        if (x->len != y->len)
            return 0;
        for (uint64_t i = 0; i < x->len; i++) {
            int e = values_equal(rt, at, x->items[i], y->items[i], depth + 1);
            if (e <= 0)
                return e;
        }
        return 1;
    }
    default: return 0;
    }
}

/* Applies a declared type to a value being bound: checks it, and wraps a str as secret. */
bool jt_convert(struct jt_rt *rt, const struct jt_node *at, enum jt_type ty, jv *v,
                const char *what, const char *name)
{
    static const uint32_t want[] = {
        [JT_TY_INT] = JV_INT, [JT_TY_BOOL] = JV_BOOL, [JT_TY_STR] = JV_STR, [JT_TY_LIST] = JV_LIST,
    };
    static const char *const tyname[] = {
        [JT_TY_ANY] = "any", [JT_TY_INT] = "int", [JT_TY_BOOL] = "bool", [JT_TY_STR] = "str",
        [JT_TY_LIST] = "list", [JT_TY_SECRET] = "secret",
    };
    if (ty == JT_TY_ANY)
        return true;
    if (ty == JT_TY_SECRET) {
        if (v->k == JV_STR) {
            v->k = JV_SECRET;
            return true;
        }
        if (v->k == JV_SECRET)
            return true;
    } else if (v->k == want[ty]) {
        return true;
    }
    jt_rt_error(rt, at, "%s '%s' expects %s, got %s", what, name, tyname[ty], jt_kind_name(v->k));
    jv_release(&rt->heap, *v);
    *v = NIL;
    return false;
}

static void exec(struct jt_rt *rt, const struct jt_node *n);

/* The body of a call whose arguments are in stack slots base.. (owned there): the call protocol
 * (call.h) around the callee's body, run here or, for a first call into bytecode, by the VM. */
static inline __attribute__((always_inline)) jv
call_body(struct jt_rt *rt, const struct jt_node *n, struct jettprof_site *site,
          const struct jt_fn *f, uint64_t base, bool bytecode)
{
    jv r = NIL;
    if (jt_call_enter(rt, n, site, f, base)) {
        if (bytecode)
            jt_bc_exec(rt, f);
        else
            exec(rt, f->body);
    }
    if (rt->ctl == CTL_RETURN) {
        r = rt->retv;
        rt->retv = NIL;
        rt->ctl = CTL_NONE;
    }
    jv *slots = rt->stack + base;
    r = jt_call_exit(rt, r, slots, slots + f->nslots);
    rt->sp = base;
    return r;
}

static jv call_fn(struct jt_rt *rt, const struct jt_node *n)
{
    const struct jt_fn *f = n->fn;
    if (!jt_call_room(rt, n, rt->sp + f->nslots))
        return NIL;
    uint64_t base = rt->sp;
    for (uint32_t i = 0; i < f->nslots; i++)
        rt->stack[base + i] = NIL;
    rt->sp += f->nslots;
    for (uint32_t i = 0; i < n->nkids; i++) {
        jv v = jt_eval(rt, n->kids[i]);
        if (rt->ctl)
            goto unwind_args;
        if (!jt_convert(rt, n->kids[i], f->params[i].ty, &v, "parameter", f->params[i].name))
            goto unwind_args;
        rt->stack[base + i] = v;
    }
    return call_body(rt, n, (struct jettprof_site *)&n->site, f, base, false);
unwind_args:
    for (uint32_t i = 0; i < f->nslots; i++)
        jv_release(&rt->heap, rt->stack[base + i]);
    rt->sp = base;
    return NIL;
}

jv jt_call_values(struct jt_rt *rt, const struct jt_node *at, const struct jt_fn *f, jv *args)
{
    if (!jt_call_room(rt, at, rt->sp + f->nslots)) {
        for (uint32_t i = 0; i < f->nparams; i++)
            jv_release(&rt->heap, args[i]);
        return NIL;
    }
    uint64_t base = rt->sp;
    for (uint32_t i = 0; i < f->nslots; i++)
        rt->stack[base + i] = NIL;
    rt->sp += f->nslots;
    bool ok = true;
    for (uint32_t i = 0; i < f->nparams; i++) {
        jv v = args[i];
        args[i] = NIL;
        if (ok && !jt_convert(rt, at, f->params[i].ty, &v, "parameter", f->params[i].name))
            ok = false;
        rt->stack[base + i] = v;
    }
    if (ok)
        return call_body(rt, at, (struct jettprof_site *)&at->site, f, base, rt->prog->bytecode);
    for (uint32_t i = 0; i < f->nslots; i++)
        jv_release(&rt->heap, rt->stack[base + i]);
    rt->sp = base;
    return NIL;
}

jv jt_op_binary(struct jt_rt *rt, const struct jt_node *n, jv a, jv b)
{
    jv r = NIL;
    if (n->op == JT_T_EQ || n->op == JT_T_NE) {
        int e = values_equal(rt, n, a, b, 0);
        r = mk_bool(n->op == JT_T_EQ ? e == 1 : e == 0);
    } else if (a.k == JV_INT && b.k == JV_INT) {
        int64_t x = a.u.i, y = b.u.i, z = 0;
        bool ovf = false;
        switch (n->op) {
        case JT_T_PLUS: ovf = __builtin_add_overflow(x, y, &z); r = mk_int(z); break;
        case JT_T_MINUS: ovf = __builtin_sub_overflow(x, y, &z); r = mk_int(z); break;
        case JT_T_STAR: ovf = __builtin_mul_overflow(x, y, &z); r = mk_int(z); break;
        case JT_T_SLASH:
        case JT_T_PERCENT:
            if (y == 0) {
                jt_rt_error(rt, n, "division by zero");
                break;
            }
            if (x == INT64_MIN && y == -1) {
                ovf = true;
                break;
            }
            r = mk_int(n->op == JT_T_SLASH ? x / y : x % y);
            break;
        case JT_T_LT: r = mk_bool(x < y); break;
        case JT_T_LE: r = mk_bool(x <= y); break;
        case JT_T_GT: r = mk_bool(x > y); break;
        case JT_T_GE: r = mk_bool(x >= y); break;
        default: break;
        }
        if (ovf)
            jt_rt_error(rt, n, "integer overflow in %s", jt_tok_name(n->op));
    } else if (n->op == JT_T_PLUS && (a.k == JV_STR || a.k == JV_SECRET) &&
               (b.k == JV_STR || b.k == JV_SECRET)) {
        const struct jt_str *x = (const struct jt_str *)a.u.o, *y = (const struct jt_str *)b.u.o;
        struct jt_str *s;
        if (x->len + y->len > JT_MAX_STR_BYTES || jt_heap_str(&rt->heap, x->len + y->len, &s) < 0) {
            jt_rt_error(rt, n, "out of memory: cannot allocate a string of %" PRIu64 " bytes",
                     x->len + y->len);
        } else {
            memcpy(s->data, x->data, x->len);
            memcpy(s->data + x->len, y->data, y->len);
            uint32_t k = (a.k == JV_SECRET || b.k == JV_SECRET) ? JV_SECRET : JV_STR;
            r = (jv){.k = k, .u.o = &s->h};
        }
    } else if (a.k == JV_STR && b.k == JV_STR && n->op >= JT_T_LT && n->op <= JT_T_GE) {
        const struct jt_str *x = (const struct jt_str *)a.u.o, *y = (const struct jt_str *)b.u.o;
        uint64_t m = x->len < y->len ? x->len : y->len;
        int c = memcmp(x->data, y->data, m);
        if (c == 0)
            c = x->len < y->len ? -1 : x->len > y->len;
        switch (n->op) {
        case JT_T_LT: r = mk_bool(c < 0); break;
        case JT_T_LE: r = mk_bool(c <= 0); break;
        case JT_T_GT: r = mk_bool(c > 0); break;
        default: r = mk_bool(c >= 0); break;
        }
    } else {
        jt_rt_error(rt, n, "%s cannot combine %s and %s", jt_tok_name(n->op), jt_kind_name(a.k),
                 jt_kind_name(b.k));
    }
    jv_release(&rt->heap, a);
    jv_release(&rt->heap, b);
    return r;
}

bool jt_truthy(struct jt_rt *rt, const struct jt_node *at, jv v)
{
    if (v.k == JV_BOOL)
        return v.u.i != 0;
    jt_rt_error(rt, at, "a condition expects bool, got %s", jt_kind_name(v.k));
    jv_release(&rt->heap, v);
    return false;
}

jv jt_op_index(struct jt_rt *rt, const struct jt_node *n, jv a, jv i)
{
    jv r = NIL;
    if (i.k != JV_INT) {
        jv_release(&rt->heap, i); /* a string or list index is an error, and dropped */
        jt_rt_error(rt, n, "an index expects int, got %s", jt_kind_name(i.k));
        goto out;
    }
    if (a.k == JV_LIST) {
        const struct jt_list *l = (const struct jt_list *)a.u.o;
        if (i.u.i < 0 || (uint64_t)i.u.i >= l->len) {
            jt_rt_error(rt, n, "index %" PRId64 " is out of range for a list of length %" PRIu64,
                        i.u.i, l->len);
            goto out;
        }
        r = l->items[i.u.i];
        jv_retain(r);
    } else if (a.k == JV_STR) {
        const struct jt_str *s = (const struct jt_str *)a.u.o;
        if (i.u.i < 0 || (uint64_t)i.u.i >= s->len) {
            jt_rt_error(rt, n,
                        "index %" PRId64 " is out of range for a string of %" PRIu64 " bytes",
                        i.u.i, s->len);
            goto out;
        }
        jt_new_str(rt, n, s->data + i.u.i, 1, &r, JV_STR);
    } else {
        jt_rt_error(rt, n, "only lists and strings can be indexed, got %s", jt_kind_name(a.k));
    }
out:
    jv_release(&rt->heap, a);
    return r;
}

jv jt_op_unary(struct jt_rt *rt, const struct jt_node *n, jv v)
{
    if (n->op == JT_T_NOT) {
        if (v.k == JV_BOOL)
            return mk_bool(!v.u.i);
        jt_rt_error(rt, n, "'!' expects bool, got %s", jt_kind_name(v.k));
    } else if (v.k == JV_INT) {
        if (v.u.i == INT64_MIN) {
            jt_rt_error(rt, n, "integer overflow in '-'");
            return NIL;
        }
        return mk_int(-v.u.i);
    } else {
        jt_rt_error(rt, n, "'-' expects int, got %s", jt_kind_name(v.k));
    }
    jv_release(&rt->heap, v);
    return NIL;
}

jv jt_read_global(struct jt_rt *rt, const struct jt_node *n)
{
    jv v = rt->root->globals[n->slot];
    if (rt->root != rt && !jt_actor_may_read_global(rt, n, v))
        return NIL;
    jv_retain(v);
    return v;
}

/* n->a then n->b into *a and *b (owned); false, holding nothing, while rt->ctl unwinds. */
static inline bool eval_operands(struct jt_rt *rt, const struct jt_node *n, jv *a, jv *b)
{
    *a = jt_eval(rt, n->a);
    if (rt->ctl)
        return false;
    *b = jt_eval(rt, n->b);
    if (rt->ctl) {
        jv_release(&rt->heap, *a);
        return false;
    }
    return true;
}

jv jt_eval(struct jt_rt *rt, const struct jt_node *n)
{
    switch (n->kind) {
    case JT_N_INT: return mk_int(n->ival);
    case JT_N_BOOL: return mk_bool(n->ival != 0);
    case JT_N_STR: return (jv){.k = JV_STR, .u.o = &n->str->h};
    case JT_N_LOCAL: {
        jv v = rt->stack[rt->base + n->slot];
        jv_retain(v);
        return v;
    }
    case JT_N_GLOBAL: return jt_read_global(rt, n);
    case JT_N_SPAWN: return jt_actor_spawn(rt, n);
    case JT_N_LIST: {
        struct jt_list *l;
        if (jt_heap_list(&rt->heap, n->nkids, &l) < 0) {
            jt_rt_error(rt, n, "out of memory: cannot allocate a list of %u slots", n->nkids);
            return NIL;
        }
        jv lv = {.k = JV_LIST, .u.o = &l->h};
        for (uint32_t i = 0; i < n->nkids; i++) {
            jv v = jt_eval(rt, n->kids[i]);
            if (rt->ctl) {
                jv_release(&rt->heap, lv);
                return NIL;
            }
            l->items[l->len++] = v;
        }
        return lv;
    }
    case JT_N_CALL: return call_fn(rt, n);
    case JT_N_BUILTIN: return jt_call_builtin(rt, n);
    case JT_N_INDEX: {
        jv a, i;
        return eval_operands(rt, n, &a, &i) ? jt_op_index(rt, n, a, i) : NIL;
    }
    case JT_N_UNARY: {
        jv v = jt_eval(rt, n->a);
        if (rt->ctl)
            return NIL;
        return jt_op_unary(rt, n, v);
    }
    case JT_N_BINARY: {
        jv a, b;
        return eval_operands(rt, n, &a, &b) ? jt_op_binary(rt, n, a, b) : NIL;
    }
    case JT_N_AND:
    case JT_N_OR: {
        jv a = jt_eval(rt, n->a);
        if (rt->ctl)
            return NIL;
        bool x = jt_truthy(rt, n->a, a);
        if (rt->ctl)
            return NIL;
        if (n->kind == JT_N_AND ? !x : x)
            return mk_bool(x);
        jv b = jt_eval(rt, n->b);
        if (rt->ctl)
            return NIL;
        bool y = jt_truthy(rt, n->b, b);
        return rt->ctl ? NIL : mk_bool(y);
    }
    default:
        jt_rt_error(rt, n, "internal: not an expression");
        return NIL;
    }
}

void jt_store(struct jt_rt *rt, jv *slot, jv v)
{
    jv old = *slot;
    *slot = v;
    jv_release(&rt->heap, old);
}

void jt_assign_global(struct jt_rt *rt, const struct jt_node *n, jv v)
{
    const struct jt_global *g = &rt->prog->globals[n->slot];
    if (rt->root != rt) { /* globals are main's: no value is shared between actors */
        jv_release(&rt->heap, v);
        jt_rt_error(rt, n, "cannot assign to global '%s' from actor %u: globals "
                    "belong to main (actor 0)", g->name, jt_actor_id(rt));
        return;
    }
    if (!jt_convert(rt, n, g->ty, &v, "variable", g->name))
        return;
    jt_store(rt, &rt->globals[n->slot], v);
}

void jt_op_setindex(struct jt_rt *rt, const struct jt_node *n, jv l, jv i, jv v)
{
    if (l.k != JV_LIST) {
        jt_rt_error(rt, n, "only list elements can be assigned, got %s", jt_kind_name(l.k));
    } else if (i.k != JV_INT) {
        jt_rt_error(rt, n, "an index expects int, got %s", jt_kind_name(i.k));
    } else {
        struct jt_list *lp = (struct jt_list *)l.u.o;
        if (i.u.i < 0 || (uint64_t)i.u.i >= lp->len) {
            jt_rt_error(rt, n, "index %" PRId64 " is out of range for a list of length %" PRIu64,
                        i.u.i, lp->len);
        } else {
            jt_store(rt, &lp->items[i.u.i], v);
            v = NIL;
        }
    }
    jv_release(&rt->heap, v);
    jv_release(&rt->heap, i); /* an int, unless it was the error */
    jv_release(&rt->heap, l);
}


static void exec_loop_body(struct jt_rt *rt, const struct jt_node *body, bool *stop)
{
    exec(rt, body);
    if (rt->ctl == CTL_CONTINUE)
        rt->ctl = CTL_NONE;
    if (rt->ctl == CTL_BREAK) {
        rt->ctl = CTL_NONE;
        *stop = true;
        return;
    }
    if (rt->ctl) {
        *stop = true;
        return;
    }
    if (!jt_safe_point(rt)) /* loop back-edge */
        *stop = true;
}

static void exec(struct jt_rt *rt, const struct jt_node *n)
{
    if (n->kind == JT_N_BLOCK) {
        for (uint32_t i = 0; i < n->nkids && !rt->ctl; i++)
            exec(rt, n->kids[i]);
        return;
    }
    jt_prof_stmt(rt, n->line, n->col);
    if (!jt_safe_point(rt)) /* statement */
        return;
    switch (n->kind) {
    case JT_N_EXPR:
        jv_release(&rt->heap, jt_eval(rt, n->a));
        return;
    case JT_N_LET: {
        jv v = jt_eval(rt, n->a);
        if (rt->ctl)
            return;
        if (!jt_convert(rt, n, n->ty, &v, "variable", n->name))
            return;
        jt_store(rt, &rt->stack[rt->base + n->slot], v);
        return;
    }
    case JT_N_ASSIGN: {
        jv v = jt_eval(rt, n->a);
        if (rt->ctl)
            return;
        if (n->ival) {
            jt_assign_global(rt, n, v);
        } else {
            jt_store(rt, &rt->stack[rt->base + n->slot], v);
        }
        return;
    }
    case JT_N_SETINDEX: {
        jv l = jt_eval(rt, n->b->a);
        if (rt->ctl)
            return;
        jv i = jt_eval(rt, n->b->b);
        if (rt->ctl) {
            jv_release(&rt->heap, l);
            return;
        }
        jv v = jt_eval(rt, n->a);
        if (rt->ctl) {
            jv_release(&rt->heap, i);
            jv_release(&rt->heap, l);
            return;
        }
        jt_op_setindex(rt, n, l, i, v);
        return;
    }
    case JT_N_IF: {
        jv c = jt_eval(rt, n->a);
        if (rt->ctl)
            return;
        bool t = jt_truthy(rt, n->a, c);
        if (rt->ctl)
            return;
        if (t)
            exec(rt, n->b);
        else if (n->c)
            exec(rt, n->c);
        return;
    }
    case JT_N_WHILE: {
        bool stop = false;
        while (!stop) {
            jv c = jt_eval(rt, n->a);
            if (rt->ctl)
                return;
            bool t = jt_truthy(rt, n->a, c);
            if (rt->ctl || !t)
                return;
            exec_loop_body(rt, n->b, &stop);
        }
        return;
    }
    case JT_N_FOR_RANGE: {
        jv a = jt_eval(rt, n->a);
        if (rt->ctl)
            return;
        jv b = jt_eval(rt, n->b);
        if (rt->ctl) {
            jv_release(&rt->heap, a);
            return;
        }
        if (a.k != JV_INT || b.k != JV_INT) {
            jt_rt_error(rt, n, "a range expects int bounds, got %s..%s", jt_kind_name(a.k),
                        jt_kind_name(b.k));
            jv_release(&rt->heap, a);
            jv_release(&rt->heap, b);
            return;
        }
        bool stop = false;
        for (int64_t i = a.u.i; i < b.u.i && !stop; i++) {
            rt->stack[rt->base + n->slot] = mk_int(i);
            exec_loop_body(rt, n->c, &stop);
        }
        return;
    }
    case JT_N_FOR_EACH: {
        jv l = jt_eval(rt, n->a);
        if (rt->ctl)
            return;
        if (l.k != JV_LIST) {
            jt_rt_error(rt, n, "for ... in expects a list or a range, got %s", jt_kind_name(l.k));
            jv_release(&rt->heap, l);
            return;
        }
        /* the hidden slot keeps the list alive while it is walked */
        jt_store(rt, &rt->stack[rt->base + (uint32_t)n->ival], l);
        const struct jt_list *lp = (const struct jt_list *)l.u.o;
        bool stop = false;
        for (uint64_t i = 0; i < lp->len && !stop; i++) {
            jv e = lp->items[i];
            jv_retain(e);
            jt_store(rt, &rt->stack[rt->base + n->slot], e);
            exec_loop_body(rt, n->c, &stop);
        }
        jt_store(rt, &rt->stack[rt->base + n->slot], NIL);
        jt_store(rt, &rt->stack[rt->base + (uint32_t)n->ival], NIL);
        return;
    }
    case JT_N_RETURN: {
        jv v = n->a ? jt_eval(rt, n->a) : NIL;
        if (rt->ctl)
            return;
        rt->retv = v;
        rt->ctl = CTL_RETURN;
        return;
    }
    case JT_N_BREAK: rt->ctl = CTL_BREAK; return;
    case JT_N_CONTINUE: rt->ctl = CTL_CONTINUE; return;
    default:
        jt_rt_error(rt, n, "internal: not a statement");
        return;
    }
}

const uint32_t jt_no_pending = 0;

bool jt_safe_point_slow(struct jt_rt *rt)
{
    if (rt->pt)
        jettprof_poll(rt->pt, rt->pw);
    if (__atomic_load_n(rt->poke, __ATOMIC_RELAXED) != 0)
        jt_actor_poked(rt); /* may switch this actor out; it resumes here, on any worker */
    if (__atomic_load_n(rt->interrupt, __ATOMIC_RELAXED) != 0) {
        if (rt->ctl != CTL_ERROR)
            rt->ctl = CTL_INTERRUPT;
        return false;
    }
    return true;
}

void jt_rt_init(struct jt_rt *rt, struct jt_program *prog, const int *interrupt)
{
    memset(rt, 0, sizeof *rt);
    rt->prog = prog;
    rt->interrupt = interrupt;
    rt->pw = &jt_no_pending;
    rt->poke = &jt_no_pending;
    rt->root = rt;
    rt->globals = jt_xcalloc(prog->nglobals ? prog->nglobals : 1, sizeof(jv));
    rt->stack = jt_xmalloc(sizeof(jv) * JT_STACK_SLOTS);
    rt->frames = jt_xmalloc(sizeof *rt->frames * JT_MAX_DEPTH);
}

static enum jt_outcome run_program(struct jt_rt *rt)
{
    struct jt_program *prog = rt->prog;
    for (uint32_t i = 0; i < prog->nmodules && !rt->ctl; i++) {
        const struct jt_module *m = prog->modules[i];
        if (!m->nglobals)
            continue;
        rt->fn = m->init_frame;
        rt->init_frame = m->init_frame->prof_frame;
        if (rt->pt)
            jettprof_enter(rt->pt, m->init_frame->prof_frame);
        for (uint32_t k = 0; k < m->nglobals && !rt->ctl; k++) {
            const struct jt_global *g = &prog->globals[m->globals[k]];
            jt_prof_stmt(rt, g->line, g->col);
            if (!jt_safe_point(rt))
                break;
            jv v = prog->bytecode ? jt_bc_eval(rt, g->bc) : jt_eval(rt, g->init->a);
            if (rt->ctl)
                break;
            if (!jt_convert(rt, g->init, g->ty, &v, "variable", g->name))
                break;
            jt_store(rt, &rt->globals[m->globals[k]], v);
        }
        if (rt->pt)
            jettprof_leave(rt->pt);
        rt->init_frame = 0;
    }
    if (!rt->ctl) {
        rt->fn = prog->main;
        struct jt_node call = {.kind = JT_N_CALL, .fn = prog->main, .line = prog->main->decl_line,
                               .col = prog->main->decl_col};
        jv r = prog->bytecode ? jt_call_values(rt, &call, prog->main, NULL) : call_fn(rt, &call);
        jv_release(&rt->heap, r);
    }
    if (rt->ctl == CTL_INTERRUPT)
        return JT_OUT_INTERRUPTED;
    if (rt->ctl == CTL_ERROR)
        return JT_OUT_RUNTIME_ERROR;
    return JT_OUT_RETURNED;
}

enum jt_outcome jt_rt_run(struct jt_rt *rt)
{
    /* The worker's agent handle and inline paths are set by the scheduler at every switch-in
     * (actors.c), so they are always the running worker's. */
    return run_program(rt);
}

void jt_rt_fini(struct jt_rt *rt)
{
    if (rt->root == rt) { /* the other actors first: main's mailbox joins its heap */
        jt_sched_free(rt->sched);
        rt->sched = NULL;
    }
    rt->heap.pt = NULL; /* teardown is not a Jett event */
    jt_heap_fini(&rt->heap);
    if (rt->root == rt)
        free(rt->globals);
    free(rt->stack);
    free(rt->frames);
    free(rt->bc_frames);
    jp_buf_free(&rt->out);
    jp_buf_free(&rt->err);
    jp_buf_free(&rt->errmsg);
    jt_runlog_free(&rt->runlog);
}
