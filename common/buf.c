/* The one growable text buffer (buf.h). */
#include "common/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(struct jp_buf *b, size_t add)
{
    if (b->failed)
        return false;
    if (b->limit && (add > b->limit || b->len > b->limit - add)) {
        b->failed = b->over = true;
        return false;
    }
    if (add < SIZE_MAX - b->len && b->len + add + 1u <= b->cap)
        return true;
    if (add >= SIZE_MAX / 2u - b->len) {
        b->failed = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256u;
    while (cap < b->len + add + 1u)
        cap *= 2u;
    if (b->limit && cap > b->limit + 1u)
        cap = b->limit + 1u; /* len + add <= limit here: the text still fits */
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void jp_buf_put(struct jp_buf *b, const void *s, size_t n)
{
    if (!reserve(b, n))
        return;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void jp_buf_puts(struct jp_buf *b, const char *s)
{
    jp_buf_put(b, s, strlen(s));
}

void jp_buf_printf(struct jp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jp_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void jp_buf_vprintf(struct jp_buf *b, const char *fmt, va_list ap)
{
    char tmp[512];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0) {
        va_end(again);
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof tmp) {
        jp_buf_put(b, tmp, (size_t)n);
    } else if (reserve(b, (size_t)n)) {
        vsnprintf(b->p + b->len, (size_t)n + 1u, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

int jp_buf_finish(struct jp_buf *b, char **out, size_t *len)
{
    if (b->failed || !b->p) {
        int over = b->over;
        jp_buf_free(b);
        return over ? -EFBIG : -ENOMEM;
    }
    *out = b->p;
    *len = b->len;
    memset(b, 0, sizeof *b);
    return 0;
}

void jp_buf_free(struct jp_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
