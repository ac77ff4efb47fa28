/* The one growable text buffer. Appends never fail at the call: the first allocation failure
 * latches `failed` and every later append is dropped, so a writer appends freely and checks
 * once at the end (jp_buf_finish, or `failed`). While p is not NULL it is NUL-terminated at
 * len. A zeroed struct is an empty buffer. A non-zero `limit` bounds the text: an append that
 * would take len past it latches `failed` and `over` instead, so a writer whose output is
 * capped holds at most limit + 1 bytes and learns why it stopped (-EFBIG, not -ENOMEM). */
#ifndef JP_COMMON_BUF_H
#define JP_COMMON_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct jp_buf {
    char *p;
    size_t len, cap;
    bool failed; /* latched: an allocation failed (or a format error); the text is incomplete */
    bool over;   /* latched with failed: an append would have passed limit */
    size_t limit; /* 0: none */
};

void jp_buf_put(struct jp_buf *b, const void *s, size_t n);
void jp_buf_puts(struct jp_buf *b, const char *s);
#define JP_BUF_LIT(b, lit) jp_buf_put((b), "" lit, sizeof(lit) - 1) /* a literal only */
void jp_buf_printf(struct jp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jp_buf_vprintf(struct jp_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Hands the text over (*out, *len; the caller frees *out) and returns 0, or frees it and
 * returns -EFBIG when an append passed the limit, -ENOMEM when one failed otherwise. Either
 * way b is left empty. */
int jp_buf_finish(struct jp_buf *b, char **out, size_t *len);
void jp_buf_free(struct jp_buf *b);

#endif
