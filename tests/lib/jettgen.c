/* tl_jett_program (jettgen.h). The program: two globals, up to three helper functions
 * f0..f2 and main. Helper fK(n, x) starts with `if n <= 0 { return x }` and calls only helpers
 * fJ, J <= K, with n - 1, so recursion ends; main calls them with n <= 3. Loops run at most 4
 * times (for i in 0..K with a literal K, while over a counter only the loop changes, for x in a
 * list nobody pushes to inside the loop), nested at most twice, and a call inside a loop is a
 * call of a lower helper, so a run stays small. Variables have a static type (int, str, list of
 * ints, bool) that expressions respect, except for the deliberate 1 in 64. */
#include "jettgen.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

enum ty { T_INT, T_STR, T_LIST, T_BOOL, T_COUNT };

#define MAX_VARS 48
struct var {
    char name[12];
    enum ty ty;
    bool assignable; /* a `var`, not a loop variable or while counter */
    bool walked;     /* a list some enclosing for ... in walks: never pushed to */
};

struct gen {
    const uint8_t *d;
    size_t n, i;
    struct jp_buf b;
    struct var vars[MAX_VARS];
    int nvars;
    int fn;        /* the helper being written (0..2), or -1 in main */
    int nfns;      /* helpers written so far: callable are f0..f(nfns - 1), or up to fn */
    int loops;     /* loops around the statement being written */
    int depth;     /* statement nesting */
    int counter;   /* names: vN, wN, iN, xN */
    int budget;    /* statements left in this function */
    int walking;   /* for ... in loops around: no push at all (an alias could grow the list) */
};

static unsigned pick(struct gen *g, unsigned k)
{
    return g->i < g->n ? g->d[g->i++] % k : 0u;
}

static void put(struct gen *g, const char *s)
{
    jp_buf_puts(&g->b, s);
}

static void indent(struct gen *g)
{
    for (int i = 0; i < g->depth + 1; i++)
        put(g, "    ");
}

/* A variable of type ty in scope (the later, the likelier), or NULL. */
static const struct var *var_of(struct gen *g, enum ty ty, bool assignable, bool pushable)
{
    int found[MAX_VARS], nf = 0;
    for (int i = 0; i < g->nvars; i++)
        if (g->vars[i].ty == ty && (!assignable || g->vars[i].assignable) &&
            (!pushable || !g->vars[i].walked))
            found[nf++] = i;
    return nf ? &g->vars[found[nf - 1 - (int)pick(g, (unsigned)nf)]] : NULL;
}

static struct var *declare(struct gen *g, char prefix, enum ty ty, bool assignable)
{
    if (g->nvars == MAX_VARS)
        return NULL;
    struct var *v = &g->vars[g->nvars++];
    snprintf(v->name, sizeof v->name, "%c%d", prefix, g->counter++);
    v->ty = ty;
    v->assignable = assignable;
    v->walked = false;
    return v;
}

static void expr(struct gen *g, enum ty ty, int depth);

/* A call of a helper fJ the current function may call: fJ(n - 1, ...) in a helper (J <= fn),
 * fJ(small, ...) in main; its result is the int or str x it was given back, or what it built. */
static bool call(struct gen *g, enum ty ty, int depth)
{
    int callable = g->fn >= 0 ? g->fn + 1 : g->nfns;
    if (callable == 0 || ty != T_INT || (g->loops > 0 && g->fn == 0))
        return false;
    int j = (int)pick(g, (unsigned)callable);
    if (g->loops > 0 && g->fn >= 0 && j == g->fn)
        j = g->fn - 1; /* in a loop, only a lower helper: the work stays small */
    if (j < 0)
        return false;
    jp_buf_printf(&g->b, "f%d(", j);
    if (g->fn >= 0)
        put(g, "n - 1");
    else
        jp_buf_printf(&g->b, "%u", pick(g, 4));
    put(g, ", ");
    expr(g, T_INT, depth + 1);
    put(g, ")");
    return true;
}

static void literal(struct gen *g, enum ty ty)
{
    static const char *const strs[] = {"\"\"", "\"a\"", "\"xyz\"", "\"k-\"", "\"hello world\""};
    static const char *const ints[] = {"0", "1", "2", "7", "-3", "100", "9223372036854775807"};
    switch (ty) {
    case T_INT: put(g, ints[pick(g, 7)]); return;
    case T_STR: put(g, strs[pick(g, 5)]); return;
    case T_BOOL: put(g, pick(g, 2) ? "true" : "false"); return;
    default: put(g, "[]"); return;
    }
}

static void expr(struct gen *g, enum ty ty, int depth)
{
    if (depth > 4) {
        literal(g, ty);
        return;
    }
    if (pick(g, 64) == 0) /* a deliberate type error, sometimes */
        ty = (enum ty)pick(g, T_COUNT);
    const struct var *v;
    switch (ty) {
    case T_INT:
        switch (pick(g, 10)) {
        case 0: literal(g, T_INT); return;
        case 1: case 2:
            if ((v = var_of(g, T_INT, false, false))) {
                put(g, v->name);
                return;
            }
            literal(g, T_INT);
            return;
        case 3: {
            static const char *const ops[] = {" + ", " - ", " * ", " / ", " % "};
            unsigned op = pick(g, 5);
            put(g, "(");
            expr(g, T_INT, depth + 1);
            put(g, ops[op]);
            if (op >= 3 && pick(g, 4)) /* mostly a literal divisor, never zero */
                jp_buf_printf(&g->b, "%u", 1 + pick(g, 9));
            else
                expr(g, T_INT, depth + 1);
            put(g, ")");
            return;
        }
        case 4:
            put(g, "len(");
            expr(g, pick(g, 2) ? T_STR : T_LIST, depth + 1);
            put(g, ")");
            return;
        case 5:
            if ((v = var_of(g, T_LIST, true, true)) && pick(g, 3) == 0) {
                jp_buf_printf(&g->b, "pop(%s)", v->name);
                return;
            }
            put(g, "byte(");
            expr(g, T_STR, depth + 1);
            put(g, ", 0)");
            return;
        case 6:
            if (call(g, T_INT, depth))
                return;
            /* fall through */
        case 7:
            put(g, "-");
            expr(g, T_INT, depth + 1);
            return;
        case 8:
            put(g, "[");
            expr(g, T_INT, depth + 1);
            put(g, ", 5][");
            jp_buf_printf(&g->b, "%u", pick(g, 8) ? pick(g, 2) : 2u); /* 2: out of range */
            put(g, "]");
            return;
        default: literal(g, T_INT); return;
        }
    case T_STR:
        switch (pick(g, 7)) {
        case 0: literal(g, T_STR); return;
        case 1: case 2:
            if ((v = var_of(g, T_STR, false, false))) {
                put(g, v->name);
                return;
            }
            literal(g, T_STR);
            return;
        case 3:
            expr(g, T_STR, depth + 1);
            put(g, " + ");
            expr(g, T_STR, depth + 1);
            return;
        case 4:
            put(g, "str(");
            expr(g, pick(g, 3) ? T_INT : T_LIST, depth + 1);
            put(g, ")");
            return;
        case 5:
            put(g, "substr(");
            expr(g, T_STR, depth + 1);
            jp_buf_printf(&g->b, ", 0, %u)", pick(g, 3));
            return;
        default:
            put(g, "chr(");
            jp_buf_printf(&g->b, "%u", 97 + pick(g, 26));
            put(g, ")");
            return;
        }
    case T_LIST:
        switch (pick(g, 5)) {
        case 0: literal(g, T_LIST); return;
        case 1: case 2:
            if ((v = var_of(g, T_LIST, false, false))) {
                put(g, v->name);
                return;
            }
            /* fall through */
        case 3:
            put(g, "[");
            for (unsigned k = pick(g, 4); k > 0; k--) {
                expr(g, T_INT, depth + 1);
                if (k > 1)
                    put(g, ", ");
            }
            put(g, "]");
            return;
        default:
            jp_buf_printf(&g->b, "list(%u, ", pick(g, 5));
            expr(g, T_INT, depth + 1);
            put(g, ")");
            return;
        }
    default:
        switch (pick(g, 5)) {
        case 0: literal(g, T_BOOL); return;
        case 1: {
            static const char *const cmp[] = {" < ", " <= ", " > ", " >= ", " == ", " != "};
            expr(g, T_INT, depth + 1);
            put(g, cmp[pick(g, 6)]);
            expr(g, T_INT, depth + 1);
            return;
        }
        case 2:
            expr(g, T_STR, depth + 1);
            put(g, pick(g, 2) ? " == " : " < ");
            expr(g, T_STR, depth + 1);
            return;
        case 3:
            put(g, "!(");
            expr(g, T_BOOL, depth + 1);
            put(g, ")");
            return;
        default:
            put(g, "(");
            expr(g, T_BOOL, depth + 1);
            put(g, pick(g, 2) ? " && " : " || ");
            expr(g, T_BOOL, depth + 1);
            put(g, ")");
            return;
        }
    }
}

static void block(struct gen *g, int max);

static void stmt(struct gen *g)
{
    const struct var *v;
    struct var *nv;
    g->budget--;
    indent(g);
    switch (pick(g, 14)) {
    case 0: case 1: { /* var vN = e, vN in scope after e */
        enum ty ty = (enum ty)pick(g, T_COUNT);
        if (g->nvars == MAX_VARS) {
            put(g, "print(0)\n");
            return;
        }
        int at = g->counter;
        jp_buf_printf(&g->b, "var v%d = ", at);
        g->counter++;
        expr(g, ty, 0);
        put(g, "\n");
        if ((nv = declare(g, 'v', ty, true)))
            snprintf(nv->name, sizeof nv->name, "v%d", at);
        return;
    }
    case 2: case 3: { /* vN = e */
        enum ty ty = (enum ty)pick(g, T_COUNT);
        if ((v = var_of(g, ty, true, ty != T_LIST))) {
            jp_buf_printf(&g->b, "%s = ", v->name);
            expr(g, ty, 0);
            put(g, "\n");
            return;
        }
        put(g, "print(");
        expr(g, ty, 0);
        put(g, ")\n");
        return;
    }
    case 4:
        if (!g->walking && (v = var_of(g, T_LIST, true, true))) {
            jp_buf_printf(&g->b, "push(%s, ", v->name);
            expr(g, T_INT, 0);
            put(g, ")\n");
            return;
        }
        /* fall through */
    case 5:
        put(g, pick(g, 4) ? "print(" : "eprint(");
        expr(g, (enum ty)pick(g, T_COUNT), 0);
        put(g, ")\n");
        return;
    case 6:
        if ((v = var_of(g, T_LIST, false, false))) {
            jp_buf_printf(&g->b, "if len(%s) > 0 { %s[0] = ", v->name, v->name);
            expr(g, T_INT, 1);
            put(g, " }\n");
            return;
        }
        /* fall through */
    case 7: {
        put(g, "if ");
        expr(g, T_BOOL, 0);
        put(g, " {\n");
        block(g, 3);
        indent(g);
        if (pick(g, 2)) {
            put(g, "} else {\n");
            block(g, 2);
            indent(g);
        }
        put(g, "}\n");
        return;
    }
    case 8: case 9: { /* for iN in 0..K: iN is the loop's only */
        int scope = g->nvars;
        if (g->loops >= 2 || !(nv = declare(g, 'i', T_INT, false))) {
            put(g, "print(1)\n");
            return;
        }
        jp_buf_printf(&g->b, "for %s in 0..%u {\n", nv->name, pick(g, 5));
        g->loops++;
        block(g, 3);
        g->loops--;
        g->nvars = scope;
        indent(g);
        put(g, "}\n");
        return;
    }
    case 10: { /* for xN in list */
        struct var *l = (struct var *)var_of(g, T_LIST, false, false);
        if (g->loops >= 2 || !l || g->nvars == MAX_VARS) {
            put(g, "print(2)\n");
            return;
        }
        int scope = g->nvars;
        bool was = l->walked;
        l->walked = true;
        nv = declare(g, 'x', T_INT, false);
        jp_buf_printf(&g->b, "for %s in %s {\n", nv->name, l->name);
        g->loops++;
        g->walking++;
        block(g, 3);
        g->walking--;
        g->loops--;
        g->nvars = scope;
        l->walked = was;
        indent(g);
        put(g, "}\n");
        return;
    }
    case 11: { /* var wN = 0; while wN < K { wN = wN + 1 ... } */
        if (g->loops >= 2 || !(nv = declare(g, 'w', T_INT, false))) {
            put(g, "print(3)\n");
            return;
        }
        char name[12];
        memcpy(name, nv->name, sizeof name);
        jp_buf_printf(&g->b, "var %s = 0\n", name);
        indent(g);
        jp_buf_printf(&g->b, "while %s < %u {\n", name, pick(g, 5));
        g->depth++;
        indent(g);
        jp_buf_printf(&g->b, "%s = %s + 1\n", name, name);
        g->depth--;
        g->loops++;
        block(g, 3);
        g->loops--;
        indent(g);
        put(g, "}\n");
        return;
    }
    case 12:
        if (g->loops > 0) {
            put(g, "if ");
            expr(g, T_BOOL, 1);
            put(g, pick(g, 2) ? " { break }\n" : " { continue }\n");
            return;
        }
        /* fall through */
    default:
        if (g->fn >= 0 && pick(g, 3) == 0) {
            put(g, "if ");
            expr(g, T_BOOL, 1);
            put(g, " { return ");
            expr(g, T_INT, 1);
            put(g, " }\n");
            return;
        }
        put(g, pick(g, 2) ? "debug(" : "log(\"info\", \"m\", \"k\", ");
        expr(g, pick(g, 2) ? T_INT : T_STR, 0);
        put(g, ")\n");
        return;
    }
}

/* Up to max statements (at least one), in a scope of their own. */
static void block(struct gen *g, int max)
{
    int scope = g->nvars;
    g->depth++;
    int k = 1 + (int)pick(g, (unsigned)max);
    for (int i = 0; i < k; i++)
        if (g->budget > 0 || i == 0)
            stmt(g);
    g->depth--;
    g->nvars = scope;
}

size_t tl_jett_program(const uint8_t *bytes, size_t n, char **out)
{
    struct gen g = {.d = bytes, .n = n, .fn = -1};
    put(&g, "var g0 = [1, 2]\nlet g1 = \"glob\"\n");
    int nfns = (int)pick(&g, 4);
    for (int f = 0; f < nfns; f++) {
        g.fn = f;
        g.nvars = 0;
        g.budget = 12;
        struct var *p = declare(&g, 'n', T_INT, false);
        memcpy(p->name, "n", 2);
        p = declare(&g, 'x', T_INT, false);
        memcpy(p->name, "x", 2);
        jp_buf_printf(&g.b, "fn f%d(n: int, x) -> int {\n    if n <= 0 { return x }\n", f);
        block(&g, 6);
        put(&g, "    return x\n}\n");
        g.nfns = f + 1;
    }
    g.fn = -1;
    g.nvars = 0;
    g.budget = 24;
    struct var *gv = declare(&g, 'g', T_LIST, true);
    memcpy(gv->name, "g0", 3);
    gv = declare(&g, 'g', T_STR, false);
    memcpy(gv->name, "g1", 3);
    put(&g, "fn main() {\n");
    block(&g, 12);
    put(&g, "}\n");
    size_t len = 0;
    if (jp_buf_finish(&g.b, out, &len) < 0)
        return 0;
    return len;
}
