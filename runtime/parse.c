/* The Jett parser: recursive descent over the lexer's tokens, one module per file. Names are
 * left unresolved (JT_N_NAME, JT_N_CALL with a name); check.c resolves and types them.
 *
 * Statements end at a newline or ';'. A '(' or '[' that starts a new line begins a new
 * statement rather than calling or indexing the previous line's expression, and `return`
 * takes a value only from the same line. Nesting is bounded (JT_MAX_NEST) so hostile input
 * cannot exhaust the C stack of the parser, the checker or the interpreter. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jett.h"
#include "value.h"

#define JT_MAX_NEST 200
#define JT_MAX_EXPR_DEPTH 2000 /* tree height of one expression: `1+1+...` chains too */

struct parser {
    struct jt_lexer lx;
    struct jt_source *src;
    struct jt_diags *d;
    struct jt_token t;   /* current */
    struct jt_token nx;  /* lookahead */
    bool failed;
    uint32_t nest;
    struct jt_program *prog;
};

static int lex_skip(struct parser *p, struct jt_token *t)
{
    do {
        int r = jt_lex_next(&p->lx, t);
        if (r < 0) {
            p->failed = true;
            t->kind = JT_T_EOF;
            return r;
        }
    } while (t->kind == JT_T_COMMENT);
    return 0;
}

static void next(struct parser *p)
{
    p->t = p->nx;
    if (p->t.kind != JT_T_EOF)
        lex_skip(p, &p->nx);
}

static bool at(const struct parser *p, enum jt_tok_kind k)
{
    return p->t.kind == k;
}

static void describe(const struct parser *p, char *buf, size_t cap)
{
    const struct jt_token *t = &p->t;
    if (t->kind == JT_T_IDENT && t->end - t->start < 40) {
        snprintf(buf, cap, "identifier '%.*s'", (int)(t->end - t->start), p->src->text + t->start);
    } else {
        snprintf(buf, cap, "%s", jt_tok_name(t->kind));
    }
}

static void err_expected(struct parser *p, const char *what)
{
    if (p->failed)
        return;
    char found[80];
    describe(p, found, sizeof found);
    jt_diag(p->d, p->src, p->t.line, p->t.col, "expected %s, found %s", what, found);
    p->failed = true;
}

static bool expect(struct parser *p, enum jt_tok_kind k, const char *what)
{
    if (!at(p, k)) {
        err_expected(p, what);
        return false;
    }
    next(p);
    return true;
}

static struct jt_node *mk(struct parser *p, enum jt_node_kind k, const struct jt_token *at_tok)
{
    struct jt_node *n = jt_xcalloc(1, sizeof *n);
    n->kind = k;
    n->start = at_tok->start;
    n->end = at_tok->end;
    n->line = at_tok->line;
    n->col = at_tok->col;
    (void)p;
    return n;
}

static void add_kid(struct jt_node *n, struct jt_node *k)
{
    if ((n->nkids & (n->nkids - 1)) == 0) /* grow at powers of two */
        n->kids = jt_xrealloc(n->kids, sizeof *n->kids * (n->nkids ? n->nkids * 2 : 1));
    n->kids[n->nkids++] = k;
}

static char *tok_text(const struct parser *p, const struct jt_token *t)
{
    return jt_xstrndup(p->src->text + t->start, t->end - t->start);
}

static bool enter_nest(struct parser *p)
{
    if (++p->nest > JT_MAX_NEST) {
        if (!p->failed)
            jt_diag(p->d, p->src, p->t.line, p->t.col,
                    "nesting too deep: at most %d nested blocks and expressions", JT_MAX_NEST);
        p->failed = true;
        return false;
    }
    return true;
}

static struct jt_node *parse_expr(struct parser *p);
static struct jt_node *parse_block(struct parser *p);

static uint32_t height(const struct jt_node *n)
{
    return n ? n->depth : 0;
}

/* Sets an expression node's height from its children and refuses trees too tall to walk
 * recursively (a left-deep chain of operators grows without any nesting). */
static void set_depth(struct parser *p, struct jt_node *n)
{
    uint32_t h = height(n->a);
    if (height(n->b) > h)
        h = height(n->b);
    for (uint32_t i = 0; i < n->nkids; i++)
        if (height(n->kids[i]) > h)
            h = height(n->kids[i]);
    n->depth = h + 1;
    if (n->depth > JT_MAX_EXPR_DEPTH && !p->failed) {
        jt_diag(p->d, p->src, n->line, n->col,
                "expression too deep: at most %d nested operations in one expression",
                JT_MAX_EXPR_DEPTH);
        p->failed = true;
    }
}


static struct jt_node *parse_primary(struct parser *p)
{
    struct jt_token t = p->t;
    switch (t.kind) {
    case JT_T_INT: {
        next(p);
        struct jt_node *n = mk(p, JT_N_INT, &t);
        n->ival = t.ival;
        return n;
    }
    case JT_T_KW_TRUE:
    case JT_T_KW_FALSE: {
        next(p);
        struct jt_node *n = mk(p, JT_N_BOOL, &t);
        n->ival = t.kind == JT_T_KW_TRUE;
        return n;
    }
    case JT_T_STRING: {
        next(p);
        struct jt_node *n = mk(p, JT_N_STR, &t);
        struct jp_buf b = {0};
        jt_unescape(p->src->text + t.start + 1, t.end - t.start - 2, &b);
        n->str = jt_literal_new(b.p ? b.p : "", b.len);
        jp_buf_free(&b);
        return n;
    }
    case JT_T_LPAREN: {
        next(p);
        struct jt_node *e = parse_expr(p);
        if (!e)
            return NULL;
        struct jt_token close = p->t;
        if (!expect(p, JT_T_RPAREN, "')' to close the parenthesised expression"))
            return e;
        e->start = t.start; /* the span includes the parentheses */
        e->end = close.end;
        return e;
    }
    case JT_T_LBRACKET: {
        next(p);
        struct jt_node *n = mk(p, JT_N_LIST, &t);
        while (!at(p, JT_T_RBRACKET) && !p->failed) {
            struct jt_node *e = parse_expr(p);
            if (!e)
                return n;
            add_kid(n, e);
            if (!at(p, JT_T_COMMA))
                break;
            next(p);
        }
        n->end = p->t.end;
        expect(p, JT_T_RBRACKET, "',' or ']' in the list literal");
        set_depth(p, n);
        return n;
    }
    case JT_T_IDENT: {
        next(p);
        struct jt_node *n = mk(p, JT_N_NAME, &t);
        struct jp_buf name = {0};
        jt_buf_put(&name, p->src->text + t.start, t.end - t.start);
        while (at(p, JT_T_DOT) && p->nx.kind == JT_T_IDENT) {
            next(p);
            jt_buf_puts(&name, ".");
            jt_buf_put(&name, p->src->text + p->t.start, p->t.end - p->t.start);
            n->end = p->t.end;
            next(p);
        }
        if (at(p, JT_T_DOT)) {
            next(p);
            err_expected(p, "a name after '.'");
        }
        n->name = name.p;
        if (at(p, JT_T_LPAREN) && !p->t.nl_before) {
            n->kind = JT_N_CALL;
            next(p);
            while (!at(p, JT_T_RPAREN) && !p->failed) {
                struct jt_node *e = parse_expr(p);
                if (!e)
                    return n;
                add_kid(n, e);
                if (!at(p, JT_T_COMMA))
                    break;
                next(p);
            }
            n->end = p->t.end;
            expect(p, JT_T_RPAREN, "',' or ')' after the call's arguments");
        }
        set_depth(p, n);
        return n;
    }
    default:
        err_expected(p, "an expression");
        return NULL;
    }
}

static struct jt_node *parse_postfix(struct parser *p)
{
    struct jt_node *e = parse_primary(p);
    while (e && !p->failed && at(p, JT_T_LBRACKET) && !p->t.nl_before) {
        struct jt_token t = p->t;
        next(p);
        struct jt_node *ix = mk(p, JT_N_INDEX, &t);
        ix->start = e->start;
        ix->line = e->line;
        ix->col = e->col;
        ix->a = e;
        ix->b = parse_expr(p);
        ix->end = p->t.end;
        expect(p, JT_T_RBRACKET, "']' after the index");
        set_depth(p, ix);
        e = ix;
    }
    return e;
}

static struct jt_node *parse_unary(struct parser *p)
{
    if (at(p, JT_T_KW_SPAWN)) { /* spawn f(args): the call is checked to be a Jett function's */
        struct jt_token t = p->t;
        next(p);
        struct jt_node *n = mk(p, JT_N_SPAWN, &t);
        n->a = parse_postfix(p);
        if (n->a)
            n->end = n->a->end;
        set_depth(p, n);
        return n;
    }
    if (at(p, JT_T_MINUS) || at(p, JT_T_NOT)) {
        if (!enter_nest(p))
            return NULL;
        struct jt_token t = p->t;
        next(p);
        struct jt_node *n = mk(p, JT_N_UNARY, &t);
        n->op = t.kind;
        n->a = parse_unary(p);
        p->nest--;
        if (n->a)
            n->end = n->a->end;
        set_depth(p, n);
        return n;
    }
    return parse_postfix(p);
}

static int prec(enum jt_tok_kind k)
{
    switch (k) {
    case JT_T_OR: return 1;
    case JT_T_AND: return 2;
    case JT_T_EQ: case JT_T_NE: case JT_T_LT: case JT_T_LE: case JT_T_GT: case JT_T_GE: return 3;
    case JT_T_PLUS: case JT_T_MINUS: return 4;
    case JT_T_STAR: case JT_T_SLASH: case JT_T_PERCENT: return 5;
    default: return 0;
    }
}

static struct jt_node *parse_binary(struct parser *p, int min_prec)
{
    if (!enter_nest(p))
        return NULL;
    struct jt_node *lhs = parse_unary(p);
    while (lhs && !p->failed) {
        int pr = prec(p->t.kind);
        if (pr == 0 || pr < min_prec)
            break;
        struct jt_token op = p->t;
        next(p);
        struct jt_node *rhs = parse_binary(p, pr + 1);
        if (!rhs)
            break;
        enum jt_node_kind k = op.kind == JT_T_AND ? JT_N_AND : op.kind == JT_T_OR ? JT_N_OR : JT_N_BINARY;
        struct jt_node *n = mk(p, k, &op);
        n->op = op.kind;
        n->a = lhs;
        n->b = rhs;
        n->start = lhs->start;
        n->end = rhs->end;
        set_depth(p, n);
        lhs = n;
    }
    p->nest--;
    return lhs;
}

static struct jt_node *parse_expr(struct parser *p)
{
    return parse_binary(p, 1);
}

static bool parse_type(struct parser *p, enum jt_type *ty)
{
    static const struct {
        const char *name;
        enum jt_type ty;
    } types[] = {{"int", JT_TY_INT}, {"bool", JT_TY_BOOL}, {"str", JT_TY_STR},
                 {"list", JT_TY_LIST}, {"secret", JT_TY_SECRET}};
    if (at(p, JT_T_IDENT)) {
        size_t n = p->t.end - p->t.start;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            if (strlen(types[i].name) == n && memcmp(types[i].name, p->src->text + p->t.start, n) == 0) {
                *ty = types[i].ty;
                next(p);
                return true;
            }
        }
    }
    err_expected(p, "a type (int, bool, str, list or secret)");
    return false;
}

/* A statement ends at ';', a newline, '}' or the end of the file. */
static void end_stmt(struct parser *p)
{
    if (p->failed)
        return;
    if (at(p, JT_T_SEMI)) {
        next(p);
        return;
    }
    if (at(p, JT_T_RBRACE) || at(p, JT_T_EOF) || p->t.nl_before)
        return;
    err_expected(p, "the end of the statement (a newline or ';')");
}

static struct jt_node *parse_let(struct parser *p)
{
    struct jt_token kw = p->t;
    next(p);
    struct jt_node *n = mk(p, JT_N_LET, &kw);
    n->ival = kw.kind == JT_T_KW_VAR; /* 1: mutable */
    if (!at(p, JT_T_IDENT)) {
        err_expected(p, kw.kind == JT_T_KW_VAR ? "a variable name after 'var'" : "a name after 'let'");
        return n;
    }
    n->name = tok_text(p, &p->t);
    n->b = mk(p, JT_N_NAME, &p->t); /* where the name is, for diagnostics */
    next(p);
    if (at(p, JT_T_COLON)) {
        next(p);
        parse_type(p, &n->ty);
    }
    if (!expect(p, JT_T_ASSIGN, "'=' and an initial value"))
        return n;
    n->a = parse_expr(p);
    if (n->a)
        n->end = n->a->end;
    return n;
}

static struct jt_node *parse_if(struct parser *p)
{
    struct jt_token kw = p->t;
    next(p);
    struct jt_node *n = mk(p, JT_N_IF, &kw);
    n->a = parse_expr(p);
    n->b = parse_block(p);
    if (at(p, JT_T_KW_ELSE) && !p->failed) {
        next(p);
        if (at(p, JT_T_KW_IF)) {
            if (!enter_nest(p))
                return n;
            n->c = parse_if(p);
            p->nest--;
        } else {
            n->c = parse_block(p);
        }
    }
    return n;
}

static struct jt_node *parse_stmt(struct parser *p)
{
    struct jt_token t = p->t;
    struct jt_node *n = NULL;
    switch (t.kind) {
    case JT_T_KW_LET:
    case JT_T_KW_VAR:
        n = parse_let(p);
        end_stmt(p);
        return n;
    case JT_T_KW_IF:
        return parse_if(p);
    case JT_T_KW_WHILE:
        next(p);
        n = mk(p, JT_N_WHILE, &t);
        n->a = parse_expr(p);
        n->b = parse_block(p);
        return n;
    case JT_T_KW_FOR:
        next(p);
        n = mk(p, JT_N_FOR_EACH, &t);
        if (!at(p, JT_T_IDENT)) {
            err_expected(p, "a loop variable name after 'for'");
            return n;
        }
        n->name = tok_text(p, &p->t);
        n->d = mk(p, JT_N_NAME, &p->t);
        next(p);
        if (!expect(p, JT_T_KW_IN, "'in' after the loop variable"))
            return n;
        n->a = parse_expr(p);
        if (at(p, JT_T_DOTDOT)) {
            next(p);
            n->kind = JT_N_FOR_RANGE;
            n->b = parse_expr(p);
        }
        n->c = parse_block(p);
        return n;
    case JT_T_KW_RETURN:
        next(p);
        n = mk(p, JT_N_RETURN, &t);
        if (!at(p, JT_T_RBRACE) && !at(p, JT_T_SEMI) && !at(p, JT_T_EOF) && !p->t.nl_before) {
            n->a = parse_expr(p);
            if (n->a)
                n->end = n->a->end;
        }
        end_stmt(p);
        return n;
    case JT_T_KW_BREAK:
    case JT_T_KW_CONTINUE:
        next(p);
        n = mk(p, t.kind == JT_T_KW_BREAK ? JT_N_BREAK : JT_N_CONTINUE, &t);
        end_stmt(p);
        return n;
    case JT_T_LBRACE:
        return parse_block(p);
    default:
        break;
    }
    struct jt_node *e = parse_expr(p);
    if (!e)
        return NULL;
    if (at(p, JT_T_ASSIGN)) {
        struct jt_token eq = p->t;
        next(p);
        if (e->kind == JT_N_NAME) {
            n = mk(p, JT_N_ASSIGN, &t);
            n->name = e->name;
            n->b = e;
        } else if (e->kind == JT_N_INDEX) {
            n = mk(p, JT_N_SETINDEX, &t);
            n->b = e;
        } else {
            jt_diag(p->d, p->src, eq.line, eq.col,
                    "expected a variable or an indexed list before '='");
            p->failed = true;
            jt_node_free(e);
            return NULL;
        }
        n->a = parse_expr(p);
        if (n->a)
            n->end = n->a->end;
    } else {
        n = mk(p, JT_N_EXPR, &t);
        n->a = e;
        n->end = e->end;
    }
    end_stmt(p);
    return n;
}

static struct jt_node *parse_block(struct parser *p)
{
    struct jt_token t = p->t;
    struct jt_node *b = mk(p, JT_N_BLOCK, &t);
    if (!expect(p, JT_T_LBRACE, "'{' to open a block"))
        return b;
    if (!enter_nest(p))
        return b;
    while (!at(p, JT_T_RBRACE) && !at(p, JT_T_EOF) && !p->failed) {
        struct jt_node *s = parse_stmt(p);
        if (s)
            add_kid(b, s);
    }
    p->nest--;
    b->end = p->t.end;
    expect(p, JT_T_RBRACE, "'}' to close the block");
    return b;
}

static char *parse_qname(struct parser *p)
{
    struct jp_buf b = {0};
    if (!at(p, JT_T_IDENT)) {
        err_expected(p, "a namespace name");
        return NULL;
    }
    jt_buf_put(&b, p->src->text + p->t.start, p->t.end - p->t.start);
    next(p);
    while (at(p, JT_T_DOT)) {
        next(p);
        if (!at(p, JT_T_IDENT)) {
            err_expected(p, "a name after '.' in the namespace");
            break;
        }
        jt_buf_puts(&b, ".");
        jt_buf_put(&b, p->src->text + p->t.start, p->t.end - p->t.start);
        next(p);
    }
    return b.p;
}

static void parse_fn(struct parser *p, struct jt_module *m)
{
    struct jt_token kw = p->t;
    next(p);
    struct jt_fn *f = jt_xcalloc(1, sizeof *f);
    f->src = p->src;
    f->ns = m->ns ? jt_xstrdup(m->ns) : NULL;
    f->decl_start = kw.start;
    f->decl_line = kw.line;
    f->decl_col = kw.col;
    m->fns = jt_xrealloc(m->fns, sizeof *m->fns * (m->nfns + 1));
    m->fns[m->nfns++] = f;
    if (!at(p, JT_T_IDENT)) {
        err_expected(p, "a function name after 'fn'");
        f->name = jt_xstrdup("?");
        return;
    }
    f->name = tok_text(p, &p->t);
    next(p);
    if (!expect(p, JT_T_LPAREN, "'(' to open the parameter list"))
        return;
    while (!at(p, JT_T_RPAREN) && !p->failed) {
        if (!at(p, JT_T_IDENT)) {
            err_expected(p, "a parameter name");
            return;
        }
        f->params = jt_xrealloc(f->params, sizeof *f->params * (f->nparams + 1));
        struct jt_param *pa = &f->params[f->nparams++];
        pa->name = tok_text(p, &p->t);
        pa->line = p->t.line;
        pa->col = p->t.col;
        pa->ty = JT_TY_ANY;
        next(p);
        if (at(p, JT_T_COLON)) {
            next(p);
            parse_type(p, &pa->ty);
        }
        if (!at(p, JT_T_COMMA))
            break;
        next(p);
    }
    if (!expect(p, JT_T_RPAREN, "',' or ')' after the parameters"))
        return;
    if (at(p, JT_T_ARROW)) {
        next(p);
        parse_type(p, &f->ret);
    }
    f->body = parse_block(p);
    f->decl_end = f->body ? f->body->end : kw.end;
}

int jt_parse_module(struct jt_source *src, struct jt_module **out, struct jt_program *prog,
                    struct jt_diags *d)
{
    struct parser p = {0};
    p.src = src;
    p.d = d;
    p.prog = prog;
    jt_lex_init(&p.lx, src->text, src->len, src, d);
    struct jt_module *m = jt_xcalloc(1, sizeof *m);
    m->src = src;
    *out = m;
    lex_skip(&p, &p.nx);
    next(&p);
    if (at(&p, JT_T_KW_NAMESPACE)) {
        next(&p);
        m->ns = parse_qname(&p);
        end_stmt(&p);
    }
    while (!at(&p, JT_T_EOF) && !p.failed) {
        struct jt_token t = p.t;
        if (at(&p, JT_T_KW_NAMESPACE)) {
            jt_diag(d, src, t.line, t.col, "'namespace' must be the first declaration of the file");
            p.failed = true;
        } else if (at(&p, JT_T_KW_IMPORT)) {
            next(&p);
            if (!at(&p, JT_T_STRING)) {
                err_expected(&p, "a quoted path after 'import'");
                break;
            }
            struct jp_buf b = {0};
            jt_unescape(src->text + p.t.start + 1, p.t.end - p.t.start - 2, &b);
            m->imports = jt_xrealloc(m->imports, sizeof *m->imports * (m->nimports + 1));
            m->import_line = jt_xrealloc(m->import_line, sizeof(uint32_t) * (m->nimports + 1));
            m->import_col = jt_xrealloc(m->import_col, sizeof(uint32_t) * (m->nimports + 1));
            m->imports[m->nimports] = b.p ? b.p : jt_xstrdup("");
            m->import_line[m->nimports] = p.t.line;
            m->import_col[m->nimports] = p.t.col;
            m->nimports++;
            next(&p);
            end_stmt(&p);
        } else if (at(&p, JT_T_KW_FN)) {
            parse_fn(&p, m);
        } else if (at(&p, JT_T_KW_LET) || at(&p, JT_T_KW_VAR)) {
            struct jt_node *n = parse_let(&p);
            end_stmt(&p);
            struct jt_global g = {0};
            g.ns = m->ns ? jt_xstrdup(m->ns) : NULL;
            g.name = n->name ? jt_xstrdup(n->name) : jt_xstrdup("?");
            g.ty = n->ty;
            g.init = n;
            g.src = src;
            g.line = t.line;
            g.col = t.col;
            int idx = jt_add_global(prog, &g);
            m->globals = jt_xrealloc(m->globals, sizeof *m->globals * (m->nglobals + 1));
            m->globals[m->nglobals++] = (uint32_t)idx;
        } else {
            err_expected(&p, "'fn', 'let', 'var' or 'import' at the top level");
        }
    }
    return p.failed ? -EINVAL : 0;
}
