/* The Jett lexer. One token at a time over a byte buffer; no allocation. Comments come out as
 * tokens so that the excerpt writer (excerpt.c) can tokenize a single source line with the
 * same rules the compiler used: there is no construct that spans lines (string literals end
 * at the line, comments are `//` to end of line), so any line can be lexed on its own. */
#include <errno.h>
#include <string.h>

#include "jett.h"

static const char *const tok_names[] = {
#define JT_X(n, s) s,
    JT_TOKENS(JT_X)
#undef JT_X
};

const char *jt_tok_name(enum jt_tok_kind k)
{
    return (unsigned)k < JT_T_LIMIT ? tok_names[k] : "token";
}

static const struct {
    const char *word;
    enum jt_tok_kind kind;
} keywords[] = {
    {"namespace", JT_T_KW_NAMESPACE}, {"import", JT_T_KW_IMPORT}, {"fn", JT_T_KW_FN},
    {"let", JT_T_KW_LET},             {"var", JT_T_KW_VAR},       {"if", JT_T_KW_IF},
    {"else", JT_T_KW_ELSE},           {"while", JT_T_KW_WHILE},   {"for", JT_T_KW_FOR},
    {"in", JT_T_KW_IN},               {"return", JT_T_KW_RETURN}, {"break", JT_T_KW_BREAK},
    {"continue", JT_T_KW_CONTINUE},   {"true", JT_T_KW_TRUE},     {"false", JT_T_KW_FALSE}, {"spawn", JT_T_KW_SPAWN},
};

void jt_lex_init(struct jt_lexer *lx, const char *p, size_t len, const struct jt_source *src,
                 struct jt_diags *d)
{
    memset(lx, 0, sizeof *lx);
    lx->p = p;
    lx->len = len;
    lx->src = src;
    lx->diags = d;
    lx->line = 1;
    lx->col = 1;
    lx->at_line_start = true;
}

static int peekc(const struct jt_lexer *lx, size_t off)
{
    return lx->pos + off < lx->len ? (unsigned char)lx->p[lx->pos + off] : -1;
}

static void advance(struct jt_lexer *lx)
{
    if (lx->p[lx->pos] == '\n') {
        lx->line++;
        lx->col = 1;
        lx->at_line_start = true;
    } else {
        lx->col++;
    }
    lx->pos++;
}

static bool ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static bool ident_char(int c)
{
    return ident_start(c) || (c >= '0' && c <= '9');
}

int jt_lex_next(struct jt_lexer *lx, struct jt_token *t)
{
    for (;;) {
        int c = peekc(lx, 0);
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            advance(lx);
        else
            break;
    }
    memset(t, 0, sizeof *t);
    t->start = (uint32_t)lx->pos;
    t->line = lx->line;
    t->col = lx->col;
    t->nl_before = lx->at_line_start;
    lx->at_line_start = false;
    int c = peekc(lx, 0);
    if (c < 0) {
        t->kind = JT_T_EOF;
        t->end = t->start;
        return 0;
    }
    if (c == '/' && peekc(lx, 1) == '/') {
        while (peekc(lx, 0) >= 0 && peekc(lx, 0) != '\n')
            advance(lx);
        t->kind = JT_T_COMMENT;
        t->end = (uint32_t)lx->pos;
        /* the newline after a comment still starts a line for the next token */
        return 0;
    }
    if (ident_start(c)) {
        while (ident_char(peekc(lx, 0)))
            advance(lx);
        t->end = (uint32_t)lx->pos;
        t->kind = JT_T_IDENT;
        size_t n = t->end - t->start;
        for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
            if (strlen(keywords[i].word) == n && memcmp(keywords[i].word, lx->p + t->start, n) == 0)
                t->kind = keywords[i].kind;
        return 0;
    }
    if (c >= '0' && c <= '9') {
        uint64_t v = 0;
        bool overflow = false;
        while (peekc(lx, 0) >= '0' && peekc(lx, 0) <= '9') {
            unsigned d = (unsigned)(peekc(lx, 0) - '0');
            if (v > (UINT64_C(9223372036854775807) - d) / 10)
                overflow = true;
            else
                v = v * 10 + d;
            advance(lx);
        }
        t->end = (uint32_t)lx->pos;
        if (ident_char(peekc(lx, 0))) {
            jt_diag(lx->diags, lx->src, t->line, t->col,
                    "expected a digit or the end of the integer literal, found '%c'",
                    peekc(lx, 0) < 0x80 ? peekc(lx, 0) : '?');
            return -EINVAL;
        }
        if (overflow) {
            jt_diag(lx->diags, lx->src, t->line, t->col,
                    "integer literal does not fit in 64 bits (maximum 9223372036854775807)");
            return -EINVAL;
        }
        t->kind = JT_T_INT;
        t->ival = (int64_t)v;
        return 0;
    }
    if (c == '"') {
        advance(lx);
        for (;;) {
            int d = peekc(lx, 0);
            if (d < 0 || d == '\n') {
                jt_diag(lx->diags, lx->src, t->line, t->col,
                        "unterminated string literal: expected '\"' before the end of the line");
                return -EINVAL;
            }
            if (d == '"')
                break;
            if (d == '\\') {
                int e = peekc(lx, 1);
                if (e != 'n' && e != 't' && e != 'r' && e != '\\' && e != '"' && e != '0') {
                    jt_diag(lx->diags, lx->src, lx->line, lx->col,
                            "unknown escape in string literal: expected one of \\n \\t \\r \\\\ \\\" \\0");
                    return -EINVAL;
                }
                advance(lx);
            }
            advance(lx);
        }
        advance(lx);
        t->kind = JT_T_STRING;
        t->end = (uint32_t)lx->pos;
        return 0;
    }
    enum jt_tok_kind k = JT_T_EOF;
    int n = 1;
    int c1 = peekc(lx, 1);
    switch (c) {
    case '(': k = JT_T_LPAREN; break;
    case ')': k = JT_T_RPAREN; break;
    case '{': k = JT_T_LBRACE; break;
    case '}': k = JT_T_RBRACE; break;
    case '[': k = JT_T_LBRACKET; break;
    case ']': k = JT_T_RBRACKET; break;
    case ',': k = JT_T_COMMA; break;
    case ':': k = JT_T_COLON; break;
    case ';': k = JT_T_SEMI; break;
    case '.': if (c1 == '.') { k = JT_T_DOTDOT; n = 2; } else k = JT_T_DOT; break;
    case '-': if (c1 == '>') { k = JT_T_ARROW; n = 2; } else k = JT_T_MINUS; break;
    case '+': k = JT_T_PLUS; break;
    case '*': k = JT_T_STAR; break;
    case '/': k = JT_T_SLASH; break;
    case '%': k = JT_T_PERCENT; break;
    case '=': if (c1 == '=') { k = JT_T_EQ; n = 2; } else k = JT_T_ASSIGN; break;
    case '!': if (c1 == '=') { k = JT_T_NE; n = 2; } else k = JT_T_NOT; break;
    case '<': if (c1 == '=') { k = JT_T_LE; n = 2; } else k = JT_T_LT; break;
    case '>': if (c1 == '=') { k = JT_T_GE; n = 2; } else k = JT_T_GT; break;
    case '&': if (c1 == '&') { k = JT_T_AND; n = 2; } break;
    case '|': if (c1 == '|') { k = JT_T_OR; n = 2; } break;
    default: break;
    }
    if (k == JT_T_EOF) {
        if (c < 0x20 || c == 0x7f)
            jt_diag(lx->diags, lx->src, t->line, t->col,
                    "unexpected control character U+%04X outside a string or comment", c);
        else
            jt_diag(lx->diags, lx->src, t->line, t->col, "unexpected character '%c'", c);
        return -EINVAL;
    }
    for (int i = 0; i < n; i++)
        advance(lx);
    t->kind = k;
    t->end = (uint32_t)lx->pos;
    return 0;
}

int jt_unescape(const char *p, size_t len, struct jp_buf *out)
{
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < len) {
            char e = p[++i];
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '0': c = '\0'; break;
            case '\\': c = '\\'; break;
            case '"': c = '"'; break;
            default: return -EINVAL;
            }
        }
        jt_buf_put(out, &c, 1);
    }
    return 0;
}
