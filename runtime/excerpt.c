/* Redacted hot-line excerpts from the runtime's loaded sources (the contract's source and
 * secret safety rules). The line is re-tokenized with the compiler's own lexer; this is safe
 * because no Jett token spans lines. What is kept: identifiers, keywords, numbers and
 * punctuation with their original spacing (trimmed at both ends). What changes, each setting
 * *redacted: a comment is omitted; a string literal becomes <redacted-literal>; the tokens of
 * a secret-typed expression become one <secret-expression>; a control character between
 * tokens (a tab) is escaped as \t; a text over 160 bytes is cut at a UTF-8 boundary. A line
 * the lexer rejects gives -EINVAL: the code is then unavailable, never the raw line. */
#include <errno.h>
#include <string.h>

#include "jett.h"

static void put_escaped_gap(struct jp_buf *b, const char *p, size_t n, int *redacted)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\t') {
            jt_buf_put(b, "\\t", 2);
            *redacted = 1;
        } else if (c == '\r') {
            jt_buf_put(b, "\\r", 2);
            *redacted = 1;
        } else if (c < 0x20 || c == 0x7f) {
            jt_buf_printf(b, "\\x%02x", c);
            *redacted = 1;
        } else {
            jt_buf_put(b, p + i, 1);
        }
    }
}

int jt_excerpt(const struct jt_source *src, uint32_t line, char *out, size_t cap, int *redacted)
{
    *redacted = 0;
    if (!src || line == 0)
        return -ENOENT;
    size_t ls = 0;
    for (uint32_t l = 1; l < line; l++) {
        const char *nl = memchr(src->text + ls, '\n', src->len - ls);
        if (!nl)
            return -ENOENT;
        ls = (size_t)(nl - src->text) + 1;
    }
    const char *nl = memchr(src->text + ls, '\n', src->len - ls);
    size_t le = nl ? (size_t)(nl - src->text) : src->len;
    if (ls >= src->len && line > 1 && !nl)
        return -ENOENT;
    struct jt_lexer lx;
    jt_lex_init(&lx, src->text + ls, le - ls, NULL, NULL);
    struct jp_buf b = {0};
    size_t prev_end = SIZE_MAX; /* SIZE_MAX: no token emitted yet (drop leading space) */
    uint32_t si = 0;            /* secret span cursor */
    size_t skip_until = 0;      /* absolute offset: inside a secret span already emitted */
    for (;;) {
        struct jt_token t;
        if (jt_lex_next(&lx, &t) < 0) {
            jp_buf_free(&b);
            return -EINVAL;
        }
        if (t.kind == JT_T_EOF)
            break;
        size_t ts = ls + t.start, te = ls + t.end;
        if (ts < skip_until)
            continue;
        if (t.kind == JT_T_COMMENT) {
            *redacted = 1;
            continue;
        }
        if (prev_end != SIZE_MAX && ts > prev_end)
            put_escaped_gap(&b, src->text + prev_end, ts - prev_end, redacted);
        while (si < src->nsecret && src->secret_spans[si].end <= ts)
            si++;
        if (si < src->nsecret && src->secret_spans[si].start <= ts) {
            jt_buf_puts(&b, "<secret-expression>");
            *redacted = 1;
            skip_until = src->secret_spans[si].end;
            prev_end = skip_until < le ? skip_until : le;
            continue;
        }
        if (t.kind == JT_T_STRING) {
            jt_buf_puts(&b, "<redacted-literal>");
            *redacted = 1;
        } else {
            jt_buf_put(&b, src->text + ts, te - ts);
        }
        prev_end = te;
    }
    size_t n = b.len;
    size_t limit = cap < JT_EXCERPT_MAX ? cap : JT_EXCERPT_MAX;
    if (n > limit) {
        n = limit;
        /* back off to the start of the character that would be split */
        while (n > 0 && ((unsigned char)b.p[n] & 0xc0) == 0x80)
            n--;
        *redacted = 1;
    }
    while (n > 0 && b.p[n - 1] == ' ')
        n--;
    if (n)
        memcpy(out, b.p, n);
    jp_buf_free(&b);
    return (int)n;
}
