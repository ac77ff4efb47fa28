/* The bytecode compiler (bytecode.h): one pass over each checked function body and global
 * initialiser, emitting the operations in the order the tree walker (interp.c) evaluates them.
 * Every statement starts with STMT, as every statement the tree walker executes starts with
 * the current position and a safe point; blocks emit nothing of their own. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bytecode.h"

/* The loops being compiled, innermost last: where their break and continue jumps go. */
struct patches {
    uint32_t *at; /* operand words to patch */
    uint32_t n, cap;
};
struct loop {
    struct patches brk, cont;
};

struct cc {
    struct jt_bc *bc;
    uint32_t cap_code, cap_pos, cap_sites;
    uint32_t depth;             /* temporaries on the stack at this point */
    struct loop *loops;
    uint32_t nloops, cap_loops;
};

static void word(struct cc *c, uint32_t w)
{
    struct jt_bc *bc = c->bc;
    if (bc->ncode == c->cap_code) {
        c->cap_code = c->cap_code ? c->cap_code * 2 : 64;
        bc->code = jt_xrealloc(bc->code, sizeof *bc->code * c->cap_code);
    }
    bc->code[bc->ncode++] = w;
}

/* Changes the temporaries' count by d (an instruction's pushes less its pops). */
static void depth(struct cc *c, int d)
{
    c->depth = (uint32_t)((int)c->depth + d);
    if (c->depth > c->bc->max_temps)
        c->bc->max_temps = c->depth;
}

static uint32_t pos(struct cc *c, const struct jt_node *n)
{
    struct jt_bc *bc = c->bc;
    if (bc->npos && bc->pos[bc->npos - 1] == n)
        return bc->npos - 1;
    if (bc->npos == c->cap_pos) {
        c->cap_pos = c->cap_pos ? c->cap_pos * 2 : 16;
        bc->pos = jt_xrealloc(bc->pos, sizeof *bc->pos * c->cap_pos);
    }
    bc->pos[bc->npos] = n;
    return bc->npos++;
}

static uint32_t site(struct cc *c)
{
    struct jt_bc *bc = c->bc;
    if (bc->nsites == c->cap_sites) {
        c->cap_sites = c->cap_sites ? c->cap_sites * 2 : 8;
        bc->sites = jt_xrealloc(bc->sites, sizeof *bc->sites * c->cap_sites);
    }
    memset(&bc->sites[bc->nsites], 0, sizeof *bc->sites);
    return bc->nsites++;
}

static void op0(struct cc *c, enum jt_bc_op op, int d)
{
    word(c, op);
    depth(c, d);
}
static void op1(struct cc *c, enum jt_bc_op op, uint32_t a, int d)
{
    word(c, op);
    word(c, a);
    depth(c, d);
}
static void op2(struct cc *c, enum jt_bc_op op, uint32_t a, uint32_t b, int d)
{
    word(c, op);
    word(c, a);
    word(c, b);
    depth(c, d);
}

/* A forward jump's target operand: the index of the word to patch. */
static uint32_t here(const struct cc *c)
{
    return c->bc->ncode;
}
static void patch(struct cc *c, uint32_t at, uint32_t target)
{
    c->bc->code[at] = target;
}
static void add_patch(struct patches *p, uint32_t at)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 4;
        p->at = jt_xrealloc(p->at, sizeof *p->at * p->cap);
    }
    p->at[p->n++] = at;
}

static void expr(struct cc *c, const struct jt_node *n);
static void stmt(struct cc *c, const struct jt_node *n);

static enum jt_bc_op binary_op(int tok)
{
    switch (tok) {
    case JT_T_PLUS: return JT_OP_ADD;
    case JT_T_MINUS: return JT_OP_SUB;
    case JT_T_STAR: return JT_OP_MUL;
    case JT_T_SLASH: return JT_OP_DIV;
    case JT_T_PERCENT: return JT_OP_MOD;
    case JT_T_EQ: return JT_OP_EQ;
    case JT_T_NE: return JT_OP_NE;
    case JT_T_LT: return JT_OP_LT;
    case JT_T_LE: return JT_OP_LE;
    case JT_T_GT: return JT_OP_GT;
    case JT_T_GE: return JT_OP_GE;
    default: return JT_OP_BINARY;
    }
}

/* Division by a constant d, 1 <= d < 2^63, for dividends 0 <= x < 2^63 (N = 63 bits): with
 * l = ceil(log2 d) and M = ceil(2^(63+l) / d), M < 2^64 and M*d - 2^(63+l) < d <= 2^l, so
 * floor(x / d) = floor(x * M / 2^(63+l)) for every such x (Granlund and Montgomery, "Division
 * by invariant integers using multiplication", theorem 4.2). */
static void divisor_magic(uint64_t d, uint64_t *m, uint32_t *shift)
{
    __extension__ typedef unsigned __int128 u128;
    uint32_t l = 0;
    while ((UINT64_C(1) << l) < d)
        l++;
    u128 num = (u128)1 << (63 + l);
    u128 q = num / d;
    if (q * d != num)
        q++;
    *m = (uint64_t)q;
    *shift = 63 + l;
}

/* `a OP literal`, a already compiled: one instruction with the literal inline. */
static bool literal_op(struct cc *c, const struct jt_node *n)
{
    static const struct { int tok; enum jt_bc_op op; } ks[] = {
        {JT_T_PLUS, JT_OP_ADD_K}, {JT_T_MINUS, JT_OP_SUB_K}, {JT_T_STAR, JT_OP_MUL_K},
        {JT_T_LT, JT_OP_LT_K},    {JT_T_LE, JT_OP_LE_K},     {JT_T_GT, JT_OP_GT_K},
        {JT_T_GE, JT_OP_GE_K},    {JT_T_EQ, JT_OP_EQ_K},     {JT_T_NE, JT_OP_NE_K},
        {JT_T_SLASH, JT_OP_DIV_K}, {JT_T_PERCENT, JT_OP_MOD_K},
    };
    uint64_t k = (uint64_t)n->b->ival;
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        if (ks[i].tok != n->op)
            continue;
        uint32_t p = pos(c, n);
        if (ks[i].op == JT_OP_DIV_K || ks[i].op == JT_OP_MOD_K) {
            if (n->b->ival <= 0)
                return false; /* zero and negative divisors take the general path */
            uint64_t m;
            uint32_t sh;
            divisor_magic(k, &m, &sh);
            word(c, ks[i].op);
            word(c, p);
            word(c, (uint32_t)k);
            word(c, (uint32_t)(k >> 32));
            word(c, (uint32_t)m);
            word(c, (uint32_t)(m >> 32));
            word(c, sh);
        } else {
            op2(c, ks[i].op, p, (uint32_t)k, 0);
            word(c, (uint32_t)(k >> 32));
        }
        /* the literal is pushed only on the general path: room for it */
        depth(c, 1);
        depth(c, -1);
        return true;
    }
    return false;
}

static void expr(struct cc *c, const struct jt_node *n)
{
    switch (n->kind) {
    case JT_N_INT: {
        uint64_t v = (uint64_t)n->ival;
        op2(c, JT_OP_INT, (uint32_t)v, (uint32_t)(v >> 32), 1);
        return;
    }
    case JT_N_BOOL: op0(c, n->ival ? JT_OP_TRUE : JT_OP_FALSE, 1); return;
    case JT_N_STR: op1(c, JT_OP_STR, pos(c, n), 1); return;
    case JT_N_LOCAL: op1(c, JT_OP_LOCAL, n->slot, 1); return;
    case JT_N_GLOBAL: op1(c, JT_OP_GLOBAL, pos(c, n), 1); return;
    case JT_N_SPAWN: {
        const struct jt_node *call = n->a;
        uint32_t p = pos(c, n);
        op1(c, JT_OP_SPAWN_OK, p, 0);
        for (uint32_t i = 0; i < call->nkids; i++) {
            expr(c, call->kids[i]);
            op2(c, JT_OP_SPAWN_ARG, p, i, 0);
        }
        op1(c, JT_OP_SPAWN, p, 1 - (int)call->nkids);
        return;
    }
    case JT_N_LIST:
        op2(c, JT_OP_LIST_NEW, pos(c, n), n->nkids, 1);
        for (uint32_t i = 0; i < n->nkids; i++) {
            expr(c, n->kids[i]);
            op0(c, JT_OP_LIST_ADD, -1);
        }
        return;
    case JT_N_CALL: {
        uint32_t p = pos(c, n);
        op1(c, JT_OP_CALL_ROOM, p, 0);
        for (uint32_t i = 0; i < n->nkids; i++) {
            expr(c, n->kids[i]);
            if (n->fn->params[i].ty != JT_TY_ANY)
                op2(c, JT_OP_PARAM, p, i, 0);
        }
        /* the callee's locals beyond its parameters are pushed by CALL */
        depth(c, (int)n->fn->nslots - (int)n->nkids);
        op2(c, JT_OP_CALL, p, site(c), 1 - (int)n->fn->nslots);
        return;
    }
    case JT_N_BUILTIN: {
        for (uint32_t i = 0; i < n->nkids; i++)
            expr(c, n->kids[i]);
        if (n->op == JT_B_LEN)
            op1(c, JT_OP_LEN, pos(c, n), 0);
        else if (n->op == JT_B_BYTE)
            op1(c, JT_OP_BYTE, pos(c, n), -1);
        else
            op2(c, JT_OP_BUILTIN, pos(c, n), n->nkids, 1 - (int)n->nkids);
        return;
    }
    case JT_N_INDEX:
        expr(c, n->a);
        expr(c, n->b);
        op1(c, JT_OP_INDEX, pos(c, n), -1);
        return;
    case JT_N_UNARY:
        if (n->op == JT_T_MINUS && n->a->kind == JT_N_INT && n->a->ival != INT64_MIN) {
            /* -LITERAL is a constant (only -INT64_MIN would fail, and no literal is that) */
            uint64_t v = (uint64_t)-n->a->ival;
            op2(c, JT_OP_INT, (uint32_t)v, (uint32_t)(v >> 32), 1);
            return;
        }
        expr(c, n->a);
        op1(c, JT_OP_UNARY, pos(c, n), 0);
        return;
    case JT_N_BINARY:
        expr(c, n->a);
        if (n->b->kind == JT_N_INT && literal_op(c, n))
            return;
        expr(c, n->b);
        op1(c, binary_op(n->op), pos(c, n), -1);
        return;
    case JT_N_AND:
    case JT_N_OR: {
        expr(c, n->a);
        op1(c, JT_OP_TRUTHY, pos(c, n->a), 0);
        op1(c, n->kind == JT_N_AND ? JT_OP_JFALSE_KEEP : JT_OP_JTRUE_KEEP, 0, -1);
        uint32_t skip = here(c) - 1;
        expr(c, n->b);
        op1(c, JT_OP_TRUTHY, pos(c, n->b), 0);
        patch(c, skip, here(c));
        return;
    }
    default:
        /* The checker leaves no other kind in an expression; a BINARY on an unknown token
         * reports the tree walker's internal error at run time. */
        op1(c, JT_OP_BINARY, pos(c, n), 1);
        return;
    }
}

/* A loop's body; its continue jumps go to the back-edge that follows it, which the caller
 * emits (and then loop_exit). Loops are compiled with the test at the bottom, so an iteration
 * is its body and one back-edge instruction that safe-points, tests and jumps. */
static void loop_body(struct cc *c, const struct jt_node *body)
{
    if (c->nloops == c->cap_loops) {
        c->cap_loops = c->cap_loops ? c->cap_loops * 2 : 8;
        c->loops = jt_xrealloc(c->loops, sizeof *c->loops * c->cap_loops);
    }
    c->loops[c->nloops++] = (struct loop){{0}, {0}};
    stmt(c, body);
    struct loop *l = &c->loops[c->nloops - 1];
    for (uint32_t i = 0; i < l->cont.n; i++)
        patch(c, l->cont.at[i], here(c));
    free(l->cont.at);
}

static void loop_exit(struct cc *c)
{
    struct loop *l = &c->loops[--c->nloops];
    for (uint32_t i = 0; i < l->brk.n; i++)
        patch(c, l->brk.at[i], here(c));
    free(l->brk.at);
}

static void stmt(struct cc *c, const struct jt_node *n)
{
    if (n->kind == JT_N_BLOCK) {
        for (uint32_t i = 0; i < n->nkids; i++)
            stmt(c, n->kids[i]);
        return;
    }
    op2(c, JT_OP_STMT, pos(c, n), n->line, 0);
    word(c, n->col);
    switch (n->kind) {
    case JT_N_EXPR:
        expr(c, n->a);
        op0(c, JT_OP_POP, -1);
        return;
    case JT_N_LET:
        expr(c, n->a);
        op1(c, JT_OP_LET, pos(c, n), -1);
        return;
    case JT_N_ASSIGN:
        expr(c, n->a);
        if (n->ival)
            op1(c, JT_OP_SET_GLOBAL, pos(c, n), -1);
        else
            op1(c, JT_OP_SET_LOCAL, n->slot, -1);
        return;
    case JT_N_SETINDEX:
        expr(c, n->b->a);
        expr(c, n->b->b);
        expr(c, n->a);
        op1(c, JT_OP_SET_INDEX, pos(c, n), -3);
        return;
    case JT_N_IF: {
        expr(c, n->a);
        op2(c, JT_OP_JFALSE, pos(c, n->a), 0, -1);
        uint32_t to_else = here(c) - 1;
        stmt(c, n->b);
        if (n->c) {
            op1(c, JT_OP_JUMP, 0, 0);
            uint32_t to_end = here(c) - 1;
            patch(c, to_else, here(c));
            stmt(c, n->c);
            patch(c, to_end, here(c));
        } else {
            patch(c, to_else, here(c));
        }
        return;
    }
    case JT_N_WHILE: {
        /* JUMP test; body: ...; BACK_EDGE; test: cond; JTRUE body */
        op1(c, JT_OP_JUMP, 0, 0);
        uint32_t to_test = here(c) - 1, body = here(c);
        loop_body(c, n->b);
        op0(c, JT_OP_BACK_EDGE, 0);
        patch(c, to_test, here(c));
        expr(c, n->a);
        op2(c, JT_OP_JTRUE, pos(c, n->a), body, -1);
        loop_exit(c);
        return;
    }
    case JT_N_FOR_RANGE: {
        /* bounds; RANGE; RANGE_NEXT exit; body: ...; RANGE_LOOP body; exit: DROP 2 */
        expr(c, n->a);
        expr(c, n->b);
        op1(c, JT_OP_RANGE, pos(c, n), 0);
        op2(c, JT_OP_RANGE_NEXT, n->slot, 0, 0);
        uint32_t to_exit = here(c) - 1, body = here(c);
        loop_body(c, n->c);
        op2(c, JT_OP_RANGE_LOOP, n->slot, body, 0);
        patch(c, to_exit, here(c));
        loop_exit(c);
        op1(c, JT_OP_DROP, 2, -2);
        return;
    }
    case JT_N_FOR_EACH: {
        /* list; EACH; EACH_NEXT exit; body: ...; EACH_LOOP body; exit: EACH_END; DROP 1 */
        uint32_t p = pos(c, n);
        expr(c, n->a);
        op1(c, JT_OP_EACH, p, 0); /* the list into the hidden slot, its index pushed */
        op2(c, JT_OP_EACH_NEXT, p, 0, 0);
        uint32_t to_exit = here(c) - 1, body = here(c);
        loop_body(c, n->c);
        op2(c, JT_OP_EACH_LOOP, p, body, 0);
        patch(c, to_exit, here(c));
        loop_exit(c);
        op1(c, JT_OP_EACH_END, p, 0);
        op1(c, JT_OP_DROP, 1, -1);
        return;
    }
    case JT_N_RETURN:
        if (n->a)
            expr(c, n->a);
        else
            op0(c, JT_OP_NIL, 1);
        op0(c, JT_OP_RETURN, -1);
        return;
    case JT_N_BREAK:
    case JT_N_CONTINUE: {
        struct loop *l = &c->loops[c->nloops - 1]; /* the checker allows them in loops only */
        op1(c, JT_OP_JUMP, 0, 0);
        add_patch(n->kind == JT_N_BREAK ? &l->brk : &l->cont, here(c) - 1);
        return;
    }
    default:
        /* Not a statement the checker leaves: the tree walker's internal error, at run time. */
        op1(c, JT_OP_BINARY, pos(c, n), 0);
        return;
    }
}

static struct jt_bc *compile_fn(const struct jt_node *body, const struct jt_node *init)
{
    struct cc c = {.bc = jt_xcalloc(1, sizeof *c.bc)};
    if (body) {
        stmt(&c, body);
        op0(&c, JT_OP_END, 0);
    } else {
        expr(&c, init);
        op0(&c, JT_OP_VALUE, -1);
    }
    free(c.loops);
    return c.bc;
}

static void free_bc(struct jt_bc *bc)
{
    if (!bc)
        return;
    free(bc->code);
    free(bc->pos);
    free(bc->sites);
    free(bc);
}

int jt_bc_compile(struct jt_program *prog)
{
    for (uint32_t i = 0; i < prog->nmodules; i++) {
        const struct jt_module *m = prog->modules[i];
        for (uint32_t k = 0; k < m->nfns; k++)
            m->fns[k]->bc = compile_fn(m->fns[k]->body, NULL);
    }
    for (uint32_t i = 0; i < prog->nglobals; i++)
        prog->globals[i].bc = compile_fn(NULL, prog->globals[i].init->a);
    prog->bytecode = true;
    return 0;
}

void jt_bc_free_program(struct jt_program *prog)
{
    for (uint32_t i = 0; i < prog->nmodules; i++) {
        const struct jt_module *m = prog->modules[i];
        for (uint32_t k = 0; k < m->nfns; k++) {
            free_bc(m->fns[k]->bc);
            m->fns[k]->bc = NULL;
        }
    }
    for (uint32_t i = 0; i < prog->nglobals; i++) {
        free_bc(prog->globals[i].bc);
        prog->globals[i].bc = NULL;
    }
    prog->bytecode = false;
}
