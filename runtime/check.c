/* The checker: resolves names to local slots, globals, functions and builtins; rejects what
 * the language forbids with a diagnostic naming what was expected; and computes which
 * expressions have a secret-typed value, so that excerpts can replace those spans with
 * <secret-expression>.
 *
 * The secret analysis is flow-insensitive: a variable is secret-typed when it is declared
 * `secret`, or when any value assigned to it anywhere is. It is computed to a fixed point
 * over the whole program (a secret can flow through globals, parameters and returns). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jett.h"

static const struct {
    const char *name;
    int lo, hi;
} builtins[] = {
#define JT_X(id, s, lo, hi) {s, lo, hi},
    JT_BUILTINS(JT_X)
#undef JT_X
};

int jt_builtin_lookup(const char *name, int *lo, int *hi)
{
    for (int i = 0; i < JT_B_LIMIT; i++) {
        if (strcmp(builtins[i].name, name) == 0) {
            *lo = builtins[i].lo;
            *hi = builtins[i].hi;
            return i;
        }
    }
    return -ENOENT;
}

const char *jt_builtin_name(int id)
{
    return id >= 0 && id < JT_B_LIMIT ? builtins[id].name : "?";
}

struct binding {
    const char *name;
    uint32_t slot;
    uint32_t depth;
    bool mutable;
};

struct checker {
    struct jt_program *prog;
    struct jt_diags *d;
    struct jt_source *src;
    const char *ns;
    struct jt_fn *fn;  /* NULL while checking a global's initialiser */
    struct binding *b;
    uint32_t nb, capb;
    uint32_t depth;
    uint32_t loops;
    bool failed;
};

static bool ns_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static struct jt_fn *find_fn(struct jt_program *prog, const char *ns, const char *name)
{
    for (uint32_t i = 0; i < prog->nmodules; i++) {
        struct jt_module *m = prog->modules[i];
        if (!ns_eq(m->ns, ns))
            continue;
        for (uint32_t k = 0; k < m->nfns; k++)
            if (strcmp(m->fns[k]->name, name) == 0)
                return m->fns[k];
    }
    return NULL;
}

static int find_global(struct jt_program *prog, const char *ns, const char *name)
{
    for (uint32_t i = 0; i < prog->nglobals; i++)
        if (ns_eq(prog->globals[i].ns, ns) && strcmp(prog->globals[i].name, name) == 0)
            return (int)i;
    return -1;
}

#define fail(c, n, ...)                                                                           \
    do {                                                                                          \
        jt_diag((c)->d, (c)->src, (n)->line, (n)->col, __VA_ARGS__);                              \
        (c)->failed = true;                                                                       \
    } while (0)

static struct binding *lookup(struct checker *c, const char *name)
{
    for (uint32_t i = c->nb; i-- > 0;)
        if (strcmp(c->b[i].name, name) == 0)
            return &c->b[i];
    return NULL;
}

static uint32_t new_slot(struct checker *c)
{
    return c->fn ? c->fn->nslots++ : 0;
}

static void declare(struct checker *c, const struct jt_node *at, const char *name, uint32_t slot,
                    bool mutable)
{
    for (uint32_t i = c->nb; i-- > 0 && c->b[i].depth == c->depth;) {
        if (strcmp(c->b[i].name, name) == 0) {
            fail(c, at, "'%s' is already declared in this block", name);
            return;
        }
    }
    if (c->nb == c->capb) {
        c->capb = c->capb ? c->capb * 2 : 16;
        c->b = jt_xrealloc(c->b, sizeof *c->b * c->capb);
    }
    c->b[c->nb++] = (struct binding){name, slot, c->depth, mutable};
}

static void leave_scope(struct checker *c)
{
    while (c->nb > 0 && c->b[c->nb - 1].depth == c->depth)
        c->nb--;
    c->depth--;
}

static void resolve(struct checker *c, struct jt_node *n);

static void resolve_call(struct checker *c, struct jt_node *n)
{
    for (uint32_t i = 0; i < n->nkids; i++)
        resolve(c, n->kids[i]);
    const char *name = n->name;
    const char *dot = strrchr(name, '.');
    struct jt_fn *f = NULL;
    if (dot) {
        char *ns = jt_xstrndup(name, (size_t)(dot - name));
        f = find_fn(c->prog, ns, dot + 1);
        free(ns);
        if (!f) {
            fail(c, n, "unknown function '%s': expected a function of a loaded namespace", name);
            return;
        }
    } else {
        f = find_fn(c->prog, c->ns, name);
    }
    if (f) {
        if (n->nkids != f->nparams) {
            fail(c, n, "function '%s' expects %u argument%s, got %u", name, f->nparams,
                 f->nparams == 1 ? "" : "s", n->nkids);
        }
        n->fn = f;
        return;
    }
    int lo, hi;
    int id = jt_builtin_lookup(name, &lo, &hi);
    if (id < 0) {
        fail(c, n, "unknown function '%s'", name);
        return;
    }
    if ((int)n->nkids < lo || (int)n->nkids > hi) {
        fail(c, n, "builtin '%s' expects %d argument%s, got %u", name, lo, lo == 1 ? "" : "s",
             n->nkids);
    }
    n->kind = JT_N_BUILTIN;
    n->op = id;
}

static void resolve_name(struct checker *c, struct jt_node *n)
{
    if (strchr(n->name, '.')) {
        fail(c, n, "unknown name '%s': only functions are named with a namespace", n->name);
        return;
    }
    struct binding *b = lookup(c, n->name);
    if (b) {
        n->kind = JT_N_LOCAL;
        n->slot = b->slot;
        return;
    }
    int g = find_global(c->prog, c->ns, n->name);
    if (g >= 0) {
        n->kind = JT_N_GLOBAL;
        n->slot = (uint32_t)g;
        return;
    }
    fail(c, n, "unknown name '%s': expected a variable, parameter or global", n->name);
}

static void resolve(struct checker *c, struct jt_node *n)
{
    if (!n)
        return;
    switch (n->kind) {
    case JT_N_INT: case JT_N_BOOL: case JT_N_STR:
        return;
    case JT_N_NAME:
        resolve_name(c, n);
        return;
    case JT_N_CALL:
        resolve_call(c, n);
        return;
    case JT_N_SPAWN:
        if (!n->a || n->a->kind != JT_N_CALL) {
            fail(c, n, "spawn expects a call of a Jett function: spawn f(args)");
            return;
        }
        resolve_call(c, n->a);
        if (n->a->kind != JT_N_CALL)
            fail(c, n, "spawn expects a call of a Jett function, not of the builtin '%s'",
                 n->a->name);
        return;
    case JT_N_LIST:
        for (uint32_t i = 0; i < n->nkids; i++)
            resolve(c, n->kids[i]);
        return;
    case JT_N_INDEX: case JT_N_BINARY: case JT_N_AND: case JT_N_OR: case JT_N_UNARY:
        resolve(c, n->a);
        resolve(c, n->b);
        return;
    case JT_N_LET:
        resolve(c, n->a);
        n->slot = new_slot(c);
        declare(c, n, n->name, n->slot, n->ival != 0);
        return;
    case JT_N_ASSIGN: {
        resolve(c, n->a);
        struct binding *b = lookup(c, n->name);
        if (b) {
            if (!b->mutable)
                fail(c, n, "cannot assign to '%s': it was declared with let (use var)", n->name);
            n->slot = b->slot;
            n->ival = 0; /* local */
            return;
        }
        int g = find_global(c->prog, c->ns, n->name);
        if (g < 0) {
            fail(c, n, "unknown name '%s': expected a variable declared with var", n->name);
            return;
        }
        if (c->prog->globals[g].init->ival == 0)
            fail(c, n, "cannot assign to '%s': it was declared with let (use var)", n->name);
        n->slot = (uint32_t)g;
        n->ival = 1; /* global */
        return;
    }
    case JT_N_SETINDEX:
        resolve(c, n->a);
        resolve(c, n->b);
        return;
    case JT_N_IF:
        resolve(c, n->a);
        resolve(c, n->b);
        resolve(c, n->c);
        return;
    case JT_N_WHILE:
        resolve(c, n->a);
        c->loops++;
        resolve(c, n->b);
        c->loops--;
        return;
    case JT_N_FOR_RANGE: case JT_N_FOR_EACH:
        resolve(c, n->a);
        resolve(c, n->b);
        c->depth++;
        n->ival = new_slot(c); /* hidden: the range end, or the list being walked */
        n->slot = new_slot(c);
        declare(c, n->d, n->name, n->slot, false);
        c->loops++;
        resolve(c, n->c);
        c->loops--;
        leave_scope(c);
        return;
    case JT_N_RETURN:
        resolve(c, n->a);
        return;
    case JT_N_BREAK: case JT_N_CONTINUE:
        if (!c->loops)
            fail(c, n, "'%s' outside a loop: expected it inside while or for",
                 n->kind == JT_N_BREAK ? "break" : "continue");
        return;
    case JT_N_EXPR:
        resolve(c, n->a);
        return;
    case JT_N_BLOCK:
        c->depth++;
        for (uint32_t i = 0; i < n->nkids; i++)
            resolve(c, n->kids[i]);
        leave_scope(c);
        return;
    default:
        return;
    }
}

/* ---- secret analysis ---- */

struct sec {
    struct jt_program *prog;
    struct jt_fn *fn;
    bool changed;
};

static void mark_slot(struct sec *s, uint32_t slot, bool v)
{
    if (v && s->fn && !s->fn->slot_secret[slot]) {
        s->fn->slot_secret[slot] = true;
        s->changed = true;
    }
}

static void mark_global(struct sec *s, uint32_t g, bool v)
{
    if (v && !s->prog->globals[g].secret) {
        s->prog->globals[g].secret = true;
        s->changed = true;
    }
}

static bool sec_expr(struct sec *s, struct jt_node *n);

static void sec_stmt(struct sec *s, struct jt_node *n)
{
    if (!n)
        return;
    switch (n->kind) {
    case JT_N_LET: {
        bool v = sec_expr(s, n->a);
        if (n->ty == JT_TY_SECRET && n->a && !n->a->secret) {
            n->a->secret = true; /* converted to secret by its declaration */
            v = true;
        }
        mark_slot(s, n->slot, v || n->ty == JT_TY_SECRET);
        return;
    }
    case JT_N_ASSIGN: {
        bool v = sec_expr(s, n->a);
        if (n->ival)
            mark_global(s, n->slot, v);
        else
            mark_slot(s, n->slot, v);
        return;
    }
    case JT_N_SETINDEX:
        sec_expr(s, n->a);
        sec_expr(s, n->b);
        return;
    case JT_N_IF:
        sec_expr(s, n->a);
        sec_stmt(s, n->b);
        sec_stmt(s, n->c);
        return;
    case JT_N_WHILE:
        sec_expr(s, n->a);
        sec_stmt(s, n->b);
        return;
    case JT_N_FOR_RANGE:
        sec_expr(s, n->a);
        sec_expr(s, n->b);
        sec_stmt(s, n->c);
        return;
    case JT_N_FOR_EACH:
        mark_slot(s, n->slot, sec_expr(s, n->a));
        sec_stmt(s, n->c);
        return;
    case JT_N_RETURN:
        if (sec_expr(s, n->a) == false && n->a && s->fn && s->fn->ret == JT_TY_SECRET)
            n->a->secret = true;
        return;
    case JT_N_EXPR:
        sec_expr(s, n->a);
        return;
    case JT_N_BLOCK:
        for (uint32_t i = 0; i < n->nkids; i++)
            sec_stmt(s, n->kids[i]);
        return;
    default:
        return;
    }
}

static bool sec_expr(struct sec *s, struct jt_node *n)
{
    if (!n)
        return false;
    bool v = false;
    switch (n->kind) {
    case JT_N_LIST:
        for (uint32_t i = 0; i < n->nkids; i++)
            v |= sec_expr(s, n->kids[i]);
        break;
    case JT_N_LOCAL:
        v = s->fn && s->fn->slot_secret[n->slot];
        break;
    case JT_N_GLOBAL:
        v = s->prog->globals[n->slot].secret;
        break;
    case JT_N_CALL:
        for (uint32_t i = 0; i < n->nkids; i++) {
            bool a = sec_expr(s, n->kids[i]);
            if (!a && n->fn && n->fn->params[i].ty == JT_TY_SECRET)
                n->kids[i]->secret = true; /* converted by the parameter's type */
        }
        v = n->fn && n->fn->ret == JT_TY_SECRET;
        break;
    case JT_N_BUILTIN: {
        bool any = false, first = false;
        for (uint32_t i = 0; i < n->nkids; i++) {
            bool a = sec_expr(s, n->kids[i]);
            any |= a;
            if (i == 0)
                first = a;
        }
        switch (n->op) {
        case JT_B_SECRET: v = true; break;
        case JT_B_STR: case JT_B_POP: case JT_B_DEBUG: v = first; break;
        case JT_B_LIST: v = n->nkids > 1 && n->kids[1]->secret; break;
        default: v = false; break;
        }
        (void)any;
        break;
    }
    case JT_N_INDEX:
        v = sec_expr(s, n->a);
        sec_expr(s, n->b);
        break;
    case JT_N_UNARY:
        v = sec_expr(s, n->a);
        break;
    case JT_N_BINARY: {
        bool a = sec_expr(s, n->a), b = sec_expr(s, n->b);
        v = n->op == JT_T_PLUS && (a || b);
        break;
    }
    case JT_N_AND: case JT_N_OR:
        sec_expr(s, n->a);
        sec_expr(s, n->b);
        break;
    case JT_N_SPAWN: /* the arguments are checked as a call's; the actor's id is an int */
        sec_expr(s, n->a);
        break;
    default:
        break;
    }
    if (v)
        n->secret = true;
    return n->secret;
}

static void add_span(struct jt_source *src, uint32_t start, uint32_t end)
{
    if (src->nsecret == src->capsecret) {
        src->capsecret = src->capsecret ? src->capsecret * 2 : 8;
        src->secret_spans = jt_xrealloc(src->secret_spans, sizeof *src->secret_spans * src->capsecret);
    }
    src->secret_spans[src->nsecret++] = (struct jt_span){start, end};
}

/* Records the maximal secret-typed expression spans of a subtree. */
static void collect(struct jt_source *src, struct jt_node *n)
{
    if (!n)
        return;
    bool is_expr = n->kind <= JT_N_NAME;
    if (is_expr && n->secret) {
        add_span(src, n->start, n->end);
        return;
    }
    collect(src, n->a);
    collect(src, n->b);
    collect(src, n->c);
    collect(src, n->d);
    for (uint32_t i = 0; i < n->nkids; i++)
        collect(src, n->kids[i]);
}

static int span_cmp(const void *a, const void *b)
{
    const struct jt_span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

int jt_check_program(struct jt_program *prog, struct jt_diags *d)
{
    struct checker c = {0};
    c.prog = prog;
    c.d = d;
    /* duplicate functions and globals within a namespace */
    for (uint32_t i = 0; i < prog->nmodules; i++) {
        struct jt_module *m = prog->modules[i];
        for (uint32_t k = 0; k < m->nfns; k++) {
            struct jt_fn *f = m->fns[k];
            if (find_fn(prog, m->ns, f->name) != f) {
                jt_diag(d, f->src, f->decl_line, f->decl_col,
                        "function '%s' is already defined in namespace %s", f->name,
                        m->ns ? m->ns : "<root>");
                c.failed = true;
            }
        }
    }
    for (uint32_t i = 0; i < prog->nglobals; i++) {
        struct jt_global *g = &prog->globals[i];
        if (find_global(prog, g->ns, g->name) != (int)i) {
            jt_diag(d, g->src, g->line, g->col, "global '%s' is already defined in namespace %s",
                    g->name, g->ns ? g->ns : "<root>");
            c.failed = true;
        }
    }
    for (uint32_t i = 0; i < prog->nmodules; i++) {
        struct jt_module *m = prog->modules[i];
        c.src = m->src;
        c.ns = m->ns;
        for (uint32_t k = 0; k < m->nglobals; k++) {
            c.fn = NULL;
            resolve(&c, prog->globals[m->globals[k]].init->a);
        }
        for (uint32_t k = 0; k < m->nfns; k++) {
            struct jt_fn *f = m->fns[k];
            c.fn = f;
            c.nb = 0;
            c.depth = 1;
            f->nslots = 0;
            for (uint32_t p = 0; p < f->nparams; p++) {
                struct jt_node at = {.line = f->params[p].line, .col = f->params[p].col};
                declare(&c, &at, f->params[p].name, new_slot(&c), true);
            }
            c.depth = 2;
            resolve(&c, f->body);
            f->slot_secret = jt_xcalloc(f->nslots ? f->nslots : 1, sizeof(bool));
            for (uint32_t p = 0; p < f->nparams; p++)
                f->slot_secret[p] = f->params[p].ty == JT_TY_SECRET;
        }
        /* the pseudo function whose frame runs this file's global initialisers */
        struct jt_fn *init = jt_xcalloc(1, sizeof *init);
        init->ns = m->ns ? jt_xstrdup(m->ns) : NULL;
        init->name = jt_xstrdup("<init>");
        init->src = m->src;
        init->decl_start = 0;
        init->decl_end = (uint32_t)m->src->len;
        init->decl_line = 1;
        init->decl_col = 1;
        m->init_frame = init;
    }
    free(c.b);
    if (c.failed)
        return -EINVAL;
    struct sec s = {prog, NULL, true};
    for (int round = 0; s.changed && round < 10000; round++) {
        s.changed = false;
        for (uint32_t i = 0; i < prog->nglobals; i++) {
            s.fn = NULL;
            struct jt_global *g = &prog->globals[i];
            bool v = sec_expr(&s, g->init->a);
            if (g->ty == JT_TY_SECRET && g->init->a)
                g->init->a->secret = v = true;
            mark_global(&s, i, v);
        }
        for (uint32_t i = 0; i < prog->nmodules; i++) {
            struct jt_module *m = prog->modules[i];
            for (uint32_t k = 0; k < m->nfns; k++) {
                s.fn = m->fns[k];
                sec_stmt(&s, m->fns[k]->body);
            }
        }
    }
    for (uint32_t i = 0; i < prog->nglobals; i++)
        collect(prog->globals[i].src, prog->globals[i].init);
    for (uint32_t i = 0; i < prog->nmodules; i++)
        for (uint32_t k = 0; k < prog->modules[i]->nfns; k++)
            collect(prog->modules[i]->src, prog->modules[i]->fns[k]->body);
    for (uint32_t i = 0; i < prog->nsources; i++) {
        struct jt_source *src = prog->sources[i];
        if (src->nsecret > 1)
            qsort(src->secret_spans, src->nsecret, sizeof *src->secret_spans, span_cmp);
    }
    return 0;
}
