/* Files read whole and texts made comparable across runs (see text.h). */
#include "text.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tl_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rbe");
    cr_assert_not_null(f, "cannot open %s", path);
    char *text = NULL;
    size_t n = 0, cap = 0, got;
    do { /* grows as it reads: the file may be a pipe or still growing */
        if (n + 4096u + 1u > cap)
            cr_assert_not_null(text = realloc(text, cap = (n + 4096u + 1u) * 2u));
        n += got = fread(text + n, 1, 4096u, f);
    } while (got);
    cr_assert_eq(ferror(f), 0, "cannot read %s", path);
    fclose(f);
    text[n] = '\0';
    if (len)
        *len = n;
    return text;
}

/* The length of the line at p, its newline included when it has one. */
static size_t line_len(const char *p)
{
    size_t n = strcspn(p, "\n");
    return n + (p[n] == '\n');
}

/* The first of keys found in the n bytes at p, and where: NULL when none is. */
static const char *key_in(const char *p, size_t n, const char *const *keys, const char **at)
{
    for (; *keys; keys++) {
        const char *w = strstr(p, *keys);
        if (w && w < p + n) {
            *at = w;
            return *keys;
        }
    }
    return NULL;
}

char *tl_without_lines(const char *text, const char *const *keys)
{
    char *out = malloc(strlen(text) + 1), *o = out;
    cr_assert_not_null(out);
    for (const char *p = text; *p;) {
        size_t n = line_len(p);
        const char *at;
        if (!key_in(p, n, keys, &at)) {
            memcpy(o, p, n);
            o += n;
        }
        p += n;
    }
    *o = '\0';
    return out;
}

char *tl_values_masked(const char *text, const char *const *keys)
{
    /* a line holding a key and no value grows by its N: at most twice the text */
    char *out = malloc(2 * strlen(text) + 1), *o = out;
    cr_assert_not_null(out);
    for (const char *p = text; *p;) {
        size_t n = line_len(p);
        const char *at, *key = key_in(p, n, keys, &at);
        if (key) {
            size_t head = (size_t)(at - p) + strlen(key);
            memcpy(o, p, head);
            o += head;
            *o++ = 'N';
            if (p[n - 1] == '\n')
                *o++ = '\n';
        } else {
            memcpy(o, p, n);
            o += n;
        }
        p += n;
    }
    *o = '\0';
    return out;
}
