/* The evaluator. Values returned by jt_eval() are owned references (+1); every path that drops
 * one releases it, so an object is freed as soon as it becomes unreachable (cycles excepted:
 * they stay alive and are retained at the end of the run).
 *
 * Control flow (return, break, continue, runtime errors, interrupts) unwinds through
 * vm->ctl: a nonzero value makes every level return at once, releasing what it holds. */
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

void jt_rt_error(struct jt_vm *vm, const struct jt_node *at, const char *fmt, ...)
{
    if (vm->ctl == CTL_ERROR || vm->ctl == CTL_INTERRUPT)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint32_t line = at ? at->line : vm->line, col = at ? at->col : vm->col;
    jt_buf_printf(&vm->errmsg, "%s:%u:%u: runtime error: %s", vm->fn->src->logical, line, col, msg);
    vm->ctl = CTL_ERROR;
}

bool jt_new_str(struct jt_vm *vm, const struct jt_node *at, const char *p, uint64_t n, jv *out,
                    uint32_t kind)
{
    struct jt_str *s;
    if (jt_heap_str(&vm->heap, n, &s) < 0) {
        jt_rt_error(vm, at, "out of memory: cannot allocate a string of %" PRIu64 " bytes", n);
        return false;
    }
    if (n)
        memcpy(s->data, p, n);
    *out = (jv){.k = kind, .u.o = &s->h};
    return true;
}

static int values_equal(struct jt_vm *vm, const struct jt_node *at, jv a, jv b, int depth)
{
    if (depth > MAX_PRINT_DEPTH) {
        jt_rt_error(vm, at, "cannot compare lists nested more than %d deep", MAX_PRINT_DEPTH);
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
            int e = values_equal(vm, at, x->items[i], y->items[i], depth + 1);
            if (e <= 0)
                return e;
        }
        return 1;
    }
    default: return 0;
    }
}

/* Applies a declared type to a value being bound: checks it, and wraps a str as secret. */
bool jt_convert(struct jt_vm *vm, const struct jt_node *at, enum jt_type ty, jv *v,
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
    jt_rt_error(vm, at, "%s '%s' expects %s, got %s", what, name, tyname[ty], jt_kind_name(v->k));
    jv_release(&vm->heap, *v);
    *v = NIL;
    return false;
}

static void exec(struct jt_vm *vm, const struct jt_node *n);

/* The body of a call whose arguments are in stack slots base.. (owned there): the call protocol
 * (call.h) around the callee's body, run here or, for a first call into bytecode, by the VM. */
static inline __attribute__((always_inline)) jv
call_body(struct jt_vm *vm, const struct jt_node *n, struct jettprof_site *site,
          const struct jt_fn *f, uint64_t base, bool bytecode)
{
    jv r = NIL;
    if (jt_call_enter(vm, n, site, f, base)) {
        if (bytecode)
            jt_bc_exec(vm, f);
        else
            exec(vm, f->body);
    }
    if (vm->ctl == CTL_RETURN) {
        r = vm->retv;
        vm->retv = NIL;
        vm->ctl = CTL_NONE;
    }
    jv *slots = vm->stack + base;
    r = jt_call_exit(vm, r, slots, slots + f->nslots);
    vm->sp = base;
    return r;
}

static jv call_fn(struct jt_vm *vm, const struct jt_node *n)
{
    const struct jt_fn *f = n->fn;
    if (!jt_call_room(vm, n, vm->sp + f->nslots))
        return NIL;
    uint64_t base = vm->sp;
    for (uint32_t i = 0; i < f->nslots; i++)
        vm->stack[base + i] = NIL;
    vm->sp += f->nslots;
    for (uint32_t i = 0; i < n->nkids; i++) {
        jv v = jt_eval(vm, n->kids[i]);
        if (vm->ctl)
            goto unwind_args;
        if (!jt_convert(vm, n->kids[i], f->params[i].ty, &v, "parameter", f->params[i].name))
            goto unwind_args;
        vm->stack[base + i] = v;
    }
    return call_body(vm, n, (struct jettprof_site *)&n->site, f, base, false);
unwind_args:
    for (uint32_t i = 0; i < f->nslots; i++)
        jv_release(&vm->heap, vm->stack[base + i]);
    vm->sp = base;
    return NIL;
}

jv jt_call_values(struct jt_vm *vm, const struct jt_node *at, const struct jt_fn *f, jv *args)
{
    if (!jt_call_room(vm, at, vm->sp + f->nslots)) {
        for (uint32_t i = 0; i < f->nparams; i++)
            jv_release(&vm->heap, args[i]);
        return NIL;
    }
    uint64_t base = vm->sp;
    for (uint32_t i = 0; i < f->nslots; i++)
        vm->stack[base + i] = NIL;
    vm->sp += f->nslots;
    bool ok = true;
    for (uint32_t i = 0; i < f->nparams; i++) {
        jv v = args[i];
        args[i] = NIL;
        if (ok && !jt_convert(vm, at, f->params[i].ty, &v, "parameter", f->params[i].name))
            ok = false;
        vm->stack[base + i] = v;
    }
    if (ok)
        return call_body(vm, at, (struct jettprof_site *)&at->site, f, base, vm->prog->bytecode);
    for (uint32_t i = 0; i < f->nslots; i++)
        jv_release(&vm->heap, vm->stack[base + i]);
    vm->sp = base;
    return NIL;
}

jv jt_op_binary(struct jt_vm *vm, const struct jt_node *n, jv a, jv b)
{
    jv r = NIL;
    if (n->op == JT_T_EQ || n->op == JT_T_NE) {
        int e = values_equal(vm, n, a, b, 0);
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
                jt_rt_error(vm, n, "division by zero");
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
            jt_rt_error(vm, n, "integer overflow in %s", jt_tok_name(n->op));
    } else if (n->op == JT_T_PLUS && (a.k == JV_STR || a.k == JV_SECRET) &&
               (b.k == JV_STR || b.k == JV_SECRET)) {
        const struct jt_str *x = (const struct jt_str *)a.u.o, *y = (const struct jt_str *)b.u.o;
        struct jt_str *s;
        if (x->len + y->len > JT_MAX_STR_BYTES || jt_heap_str(&vm->heap, x->len + y->len, &s) < 0) {
            jt_rt_error(vm, n, "out of memory: cannot allocate a string of %" PRIu64 " bytes",
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
        jt_rt_error(vm, n, "%s cannot combine %s and %s", jt_tok_name(n->op), jt_kind_name(a.k),
                 jt_kind_name(b.k));
    }
    jv_release(&vm->heap, a);
    jv_release(&vm->heap, b);
    return r;
}

bool jt_truthy(struct jt_vm *vm, const struct jt_node *at, jv v)
{
    if (v.k == JV_BOOL)
        return v.u.i != 0;
    jt_rt_error(vm, at, "a condition expects bool, got %s", jt_kind_name(v.k));
    jv_release(&vm->heap, v);
    return false;
}

jv jt_op_index(struct jt_vm *vm, const struct jt_node *n, jv a, jv i)
{
    jv r = NIL;
    if (i.k != JV_INT) {
        jv_release(&vm->heap, i); /* a string or list index is an error, and dropped */
        jt_rt_error(vm, n, "an index expects int, got %s", jt_kind_name(i.k));
        goto out;
    }
    if (a.k == JV_LIST) {
        const struct jt_list *l = (const struct jt_list *)a.u.o;
        if (i.u.i < 0 || (uint64_t)i.u.i >= l->len) {
            jt_rt_error(vm, n, "index %" PRId64 " is out of range for a list of length %" PRIu64,
                        i.u.i, l->len);
            goto out;
        }
        r = l->items[i.u.i];
        jv_retain(r);
    } else if (a.k == JV_STR) {
        const struct jt_str *s = (const struct jt_str *)a.u.o;
        if (i.u.i < 0 || (uint64_t)i.u.i >= s->len) {
            jt_rt_error(vm, n,
                        "index %" PRId64 " is out of range for a string of %" PRIu64 " bytes",
                        i.u.i, s->len);
            goto out;
        }
        jt_new_str(vm, n, s->data + i.u.i, 1, &r, JV_STR);
    } else {
        jt_rt_error(vm, n, "only lists and strings can be indexed, got %s", jt_kind_name(a.k));
    }
out:
    jv_release(&vm->heap, a);
    return r;
}

jv jt_op_unary(struct jt_vm *vm, const struct jt_node *n, jv v)
{
    if (n->op == JT_T_NOT) {
        if (v.k == JV_BOOL)
            return mk_bool(!v.u.i);
        jt_rt_error(vm, n, "'!' expects bool, got %s", jt_kind_name(v.k));
    } else if (v.k == JV_INT) {
        if (v.u.i == INT64_MIN) {
            jt_rt_error(vm, n, "integer overflow in '-'");
            return NIL;
        }
        return mk_int(-v.u.i);
    } else {
        jt_rt_error(vm, n, "'-' expects int, got %s", jt_kind_name(v.k));
    }
    jv_release(&vm->heap, v);
    return NIL;
}

jv jt_read_global(struct jt_vm *vm, const struct jt_node *n)
{
    jv v = vm->root->globals[n->slot];
    if (vm->root != vm && !jt_actor_may_read_global(vm, n, v))
        return NIL;
    jv_retain(v);
    return v;
}

/* n->a then n->b into *a and *b (owned); false, holding nothing, while vm->ctl unwinds. */
static inline bool eval_operands(struct jt_vm *vm, const struct jt_node *n, jv *a, jv *b)
{
    *a = jt_eval(vm, n->a);
    if (vm->ctl)
        return false;
    *b = jt_eval(vm, n->b);
    if (vm->ctl) {
        jv_release(&vm->heap, *a);
        return false;
    }
    return true;
}

jv jt_eval(struct jt_vm *vm, const struct jt_node *n)
{
    switch (n->kind) {
    case JT_N_INT: return mk_int(n->ival);
    case JT_N_BOOL: return mk_bool(n->ival != 0);
    case JT_N_STR: return (jv){.k = JV_STR, .u.o = &n->str->h};
    case JT_N_LOCAL: {
        jv v = vm->stack[vm->base + n->slot];
        jv_retain(v);
        return v;
    }
    case JT_N_GLOBAL: return jt_read_global(vm, n);
    case JT_N_SPAWN: return jt_actor_spawn(vm, n);
    case JT_N_LIST: {
        struct jt_list *l;
        if (jt_heap_list(&vm->heap, n->nkids, &l) < 0) {
            jt_rt_error(vm, n, "out of memory: cannot allocate a list of %u slots", n->nkids);
            return NIL;
        }
        jv lv = {.k = JV_LIST, .u.o = &l->h};
        for (uint32_t i = 0; i < n->nkids; i++) {
            jv v = jt_eval(vm, n->kids[i]);
            if (vm->ctl) {
                jv_release(&vm->heap, lv);
                return NIL;
            }
            l->items[l->len++] = v;
        }
        return lv;
    }
    case JT_N_CALL: return call_fn(vm, n);
    case JT_N_BUILTIN: return jt_call_builtin(vm, n);
    case JT_N_INDEX: {
        jv a, i;
        return eval_operands(vm, n, &a, &i) ? jt_op_index(vm, n, a, i) : NIL;
    }
    case JT_N_UNARY: {
        jv v = jt_eval(vm, n->a);
        if (vm->ctl)
            return NIL;
        return jt_op_unary(vm, n, v);
    }
    case JT_N_BINARY: {
        jv a, b;
        return eval_operands(vm, n, &a, &b) ? jt_op_binary(vm, n, a, b) : NIL;
    }
    case JT_N_AND:
    case JT_N_OR: {
        jv a = jt_eval(vm, n->a);
        if (vm->ctl)
            return NIL;
        bool x = jt_truthy(vm, n->a, a);
        if (vm->ctl)
            return NIL;
        if (n->kind == JT_N_AND ? !x : x)
            return mk_bool(x);
        jv b = jt_eval(vm, n->b);
        if (vm->ctl)
            return NIL;
        bool y = jt_truthy(vm, n->b, b);
        return vm->ctl ? NIL : mk_bool(y);
    }
    default:
        jt_rt_error(vm, n, "internal: not an expression");
        return NIL;
    }
}

void jt_store(struct jt_vm *vm, jv *slot, jv v)
{
    jv old = *slot;
    *slot = v;
    jv_release(&vm->heap, old);
}

void jt_assign_global(struct jt_vm *vm, const struct jt_node *n, jv v)
{
    const struct jt_global *g = &vm->prog->globals[n->slot];
    if (vm->root != vm) { /* globals are main's: no value is shared between actors */
        jv_release(&vm->heap, v);
        jt_rt_error(vm, n, "cannot assign to global '%s' from actor %u: globals "
                    "belong to main (actor 0)", g->name, jt_actor_id(vm));
        return;
    }
    if (!jt_convert(vm, n, g->ty, &v, "variable", g->name))
        return;
    jt_store(vm, &vm->globals[n->slot], v);
}

void jt_op_setindex(struct jt_vm *vm, const struct jt_node *n, jv l, jv i, jv v)
{
    if (l.k != JV_LIST) {
        jt_rt_error(vm, n, "only list elements can be assigned, got %s", jt_kind_name(l.k));
    } else if (i.k != JV_INT) {
        jt_rt_error(vm, n, "an index expects int, got %s", jt_kind_name(i.k));
    } else {
        struct jt_list *lp = (struct jt_list *)l.u.o;
        if (i.u.i < 0 || (uint64_t)i.u.i >= lp->len) {
            jt_rt_error(vm, n, "index %" PRId64 " is out of range for a list of length %" PRIu64,
                        i.u.i, lp->len);
        } else {
            jt_store(vm, &lp->items[i.u.i], v);
            v = NIL;
        }
    }
    jv_release(&vm->heap, v);
    jv_release(&vm->heap, i); /* an int, unless it was the error */
    jv_release(&vm->heap, l);
}


static void exec_loop_body(struct jt_vm *vm, const struct jt_node *body, bool *stop)
{
    exec(vm, body);
    if (vm->ctl == CTL_CONTINUE)
        vm->ctl = CTL_NONE;
    if (vm->ctl == CTL_BREAK) {
        vm->ctl = CTL_NONE;
        *stop = true;
        return;
    }
    if (vm->ctl) {
        *stop = true;
        return;
    }
    if (!jt_safe_point(vm)) /* loop back-edge */
        *stop = true;
}

static void exec(struct jt_vm *vm, const struct jt_node *n)
{
    if (n->kind == JT_N_BLOCK) {
        for (uint32_t i = 0; i < n->nkids && !vm->ctl; i++)
            exec(vm, n->kids[i]);
        return;
    }
    jt_prof_stmt(vm, n->line, n->col);
    if (!jt_safe_point(vm)) /* statement */
        return;
    switch (n->kind) {
    case JT_N_EXPR:
        jv_release(&vm->heap, jt_eval(vm, n->a));
        return;
    case JT_N_LET: {
        jv v = jt_eval(vm, n->a);
        if (vm->ctl)
            return;
        if (!jt_convert(vm, n, n->ty, &v, "variable", n->name))
            return;
        jt_store(vm, &vm->stack[vm->base + n->slot], v);
        return;
    }
    case JT_N_ASSIGN: {
        jv v = jt_eval(vm, n->a);
        if (vm->ctl)
            return;
        if (n->ival) {
            jt_assign_global(vm, n, v);
        } else {
            jt_store(vm, &vm->stack[vm->base + n->slot], v);
        }
        return;
    }
    case JT_N_SETINDEX: {
        jv l = jt_eval(vm, n->b->a);
        if (vm->ctl)
            return;
        jv i = jt_eval(vm, n->b->b);
        if (vm->ctl) {
            jv_release(&vm->heap, l);
            return;
        }
        jv v = jt_eval(vm, n->a);
        if (vm->ctl) {
            jv_release(&vm->heap, i);
            jv_release(&vm->heap, l);
            return;
        }
        jt_op_setindex(vm, n, l, i, v);
        return;
    }
    case JT_N_IF: {
        jv c = jt_eval(vm, n->a);
        if (vm->ctl)
            return;
        bool t = jt_truthy(vm, n->a, c);
        if (vm->ctl)
            return;
        if (t)
            exec(vm, n->b);
        else if (n->c)
            exec(vm, n->c);
        return;
    }
    case JT_N_WHILE: {
        bool stop = false;
        while (!stop) {
            jv c = jt_eval(vm, n->a);
            if (vm->ctl)
                return;
            bool t = jt_truthy(vm, n->a, c);
            if (vm->ctl || !t)
                return;
            exec_loop_body(vm, n->b, &stop);
        }
        return;
    }
    case JT_N_FOR_RANGE: {
        jv a = jt_eval(vm, n->a);
        if (vm->ctl)
            return;
        jv b = jt_eval(vm, n->b);
        if (vm->ctl) {
            jv_release(&vm->heap, a);
            return;
        }
        if (a.k != JV_INT || b.k != JV_INT) {
            jt_rt_error(vm, n, "a range expects int bounds, got %s..%s", jt_kind_name(a.k),
                        jt_kind_name(b.k));
            jv_release(&vm->heap, a);
            jv_release(&vm->heap, b);
            return;
        }
        bool stop = false;
        for (int64_t i = a.u.i; i < b.u.i && !stop; i++) {
            vm->stack[vm->base + n->slot] = mk_int(i);
            exec_loop_body(vm, n->c, &stop);
        }
        return;
    }
    case JT_N_FOR_EACH: {
        jv l = jt_eval(vm, n->a);
        if (vm->ctl)
            return;
        if (l.k != JV_LIST) {
            jt_rt_error(vm, n, "for ... in expects a list or a range, got %s", jt_kind_name(l.k));
            jv_release(&vm->heap, l);
            return;
        }
        /* the hidden slot keeps the list alive while it is walked */
        jt_store(vm, &vm->stack[vm->base + (uint32_t)n->ival], l);
        const struct jt_list *lp = (const struct jt_list *)l.u.o;
        bool stop = false;
        for (uint64_t i = 0; i < lp->len && !stop; i++) {
            jv e = lp->items[i];
            jv_retain(e);
            jt_store(vm, &vm->stack[vm->base + n->slot], e);
            exec_loop_body(vm, n->c, &stop);
        }
        jt_store(vm, &vm->stack[vm->base + n->slot], NIL);
        jt_store(vm, &vm->stack[vm->base + (uint32_t)n->ival], NIL);
        return;
    }
    case JT_N_RETURN: {
        jv v = n->a ? jt_eval(vm, n->a) : NIL;
        if (vm->ctl)
            return;
        vm->retv = v;
        vm->ctl = CTL_RETURN;
        return;
    }
    case JT_N_BREAK: vm->ctl = CTL_BREAK; return;
    case JT_N_CONTINUE: vm->ctl = CTL_CONTINUE; return;
    default:
        jt_rt_error(vm, n, "internal: not a statement");
        return;
    }
}

const uint32_t jt_no_pending = 0;

bool jt_safe_point_slow(struct jt_vm *vm)
{
    if (vm->pt)
        jettprof_poll(vm->pt, vm->pw);
    if (__atomic_load_n(vm->poke, __ATOMIC_RELAXED) != 0)
        jt_actor_poked(vm); /* may switch this actor out; it resumes here, on any worker */
    if (__atomic_load_n(vm->interrupt, __ATOMIC_RELAXED) != 0) {
        if (vm->ctl != CTL_ERROR)
            vm->ctl = CTL_INTERRUPT;
        return false;
    }
    return true;
}

void jt_vm_init(struct jt_vm *vm, struct jt_program *prog, const int *interrupt)
{
    memset(vm, 0, sizeof *vm);
    vm->prog = prog;
    vm->interrupt = interrupt;
    vm->pw = &jt_no_pending;
    vm->poke = &jt_no_pending;
    vm->root = vm;
    vm->globals = jt_xcalloc(prog->nglobals ? prog->nglobals : 1, sizeof(jv));
    vm->stack = jt_xmalloc(sizeof(jv) * JT_STACK_SLOTS);
    vm->frames = jt_xmalloc(sizeof *vm->frames * JT_MAX_DEPTH);
}

static enum jt_outcome run_program(struct jt_vm *vm)
{
    struct jt_program *prog = vm->prog;
    for (uint32_t i = 0; i < prog->nmodules && !vm->ctl; i++) {
        const struct jt_module *m = prog->modules[i];
        if (!m->nglobals)
            continue;
        vm->fn = m->init_frame;
        vm->init_frame = m->init_frame->prof_frame;
        if (vm->pt)
            jettprof_enter(vm->pt, m->init_frame->prof_frame);
        for (uint32_t k = 0; k < m->nglobals && !vm->ctl; k++) {
            const struct jt_global *g = &prog->globals[m->globals[k]];
            jt_prof_stmt(vm, g->line, g->col);
            if (!jt_safe_point(vm))
                break;
            jv v = prog->bytecode ? jt_bc_eval(vm, g->bc) : jt_eval(vm, g->init->a);
            if (vm->ctl)
                break;
            if (!jt_convert(vm, g->init, g->ty, &v, "variable", g->name))
                break;
            jt_store(vm, &vm->globals[m->globals[k]], v);
        }
        if (vm->pt)
            jettprof_leave(vm->pt);
        vm->init_frame = 0;
    }
    if (!vm->ctl) {
        vm->fn = prog->main;
        struct jt_node call = {.kind = JT_N_CALL, .fn = prog->main, .line = prog->main->decl_line,
                               .col = prog->main->decl_col};
        jv r = prog->bytecode ? jt_call_values(vm, &call, prog->main, NULL) : call_fn(vm, &call);
        jv_release(&vm->heap, r);
    }
    if (vm->ctl == CTL_INTERRUPT)
        return JT_OUT_INTERRUPTED;
    if (vm->ctl == CTL_ERROR)
        return JT_OUT_RUNTIME_ERROR;
    return JT_OUT_RETURNED;
}

enum jt_outcome jt_vm_run(struct jt_vm *vm)
{
    /* The worker's agent handle and inline paths are set by the scheduler at every switch-in
     * (actors.c), so they are always the running worker's. */
    return run_program(vm);
}

void jt_vm_fini(struct jt_vm *vm)
{
    if (vm->root == vm) { /* the other actors first: main's mailbox joins its heap */
        jt_sched_free(vm->sched);
        vm->sched = NULL;
    }
    vm->heap.pt = NULL; /* teardown is not a Jett event */
    jt_heap_fini(&vm->heap);
    if (vm->root == vm)
        free(vm->globals);
    free(vm->stack);
    free(vm->frames);
    free(vm->bc_frames);
    jp_buf_free(&vm->out);
    jp_buf_free(&vm->err);
    jp_buf_free(&vm->errmsg);
    jt_runlog_free(&vm->runlog);
}
