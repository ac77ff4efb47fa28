/* Interpreter-internal memory and text helpers. None of this is Jett heap: the contract
 * excludes interpreter implementation allocations from memory profiling, so these never
 * reach the allocation boundary in heap.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/toon.h"
#include "jett.h"

void *jt_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        /* Interpreter bookkeeping cannot degrade gracefully; a Jett-heap failure is a runtime
         * error instead (see heap.c). */
        fputs("jett: fatal: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *jt_xcalloc(size_t n, size_t m)
{
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (!p) {
        fputs("jett: fatal: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *jt_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("jett: fatal: out of memory\n", stderr);
        abort();
    }
    return q;
}

char *jt_xstrndup(const char *s, size_t n)
{
    char *p = jt_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *jt_xstrdup(const char *s)
{
    return jt_xstrndup(s, strlen(s));
}

static void buf_check(const struct jp_buf *b)
{
    if (b->failed) {
        fputs("jett: fatal: out of memory\n", stderr);
        abort();
    }
}

void jt_buf_put(struct jp_buf *b, const void *s, size_t n)
{
    jp_buf_put(b, s, n);
    buf_check(b);
}

void jt_buf_puts(struct jp_buf *b, const char *s)
{
    jp_buf_put(b, s, strlen(s));
    buf_check(b);
}

void jt_buf_printf(struct jp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jp_buf_vprintf(b, fmt, ap);
    va_end(ap);
    buf_check(b);
}

void jt_toon_string(struct jp_buf *b, const char *s, size_t n)
{
    jp_toon_str(b, s, n);
    buf_check(b);
}

/* Diagnostics name the logical path only: an absolute path never appears in any output. */
void jt_diag(struct jt_diags *d, const struct jt_source *src, uint32_t line, uint32_t col,
             const char *fmt, ...)
{
    if (!d)
        return;
    if (src)
        jt_buf_printf(&d->text, "%s:%u:%u: error: ", src->logical, line, col);
    else
        jt_buf_puts(&d->text, "error: ");
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    jt_buf_puts(&d->text, tmp);
    jt_buf_puts(&d->text, "\n");
    d->count++;
}
