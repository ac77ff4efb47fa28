/* The one TOON scalar encoder (toon.h). */
#include "common/toon.h"

#include <stdbool.h>
#include <string.h>

#include "common/utf8.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ^[+-]?\d+(\.\d+)?(e[+-]?\d+)?$, any case: a decoder would read it as a number. */
static bool looks_numeric(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    size_t d = i;
    while (i < n && is_digit(s[i]))
        i++;
    if (i == d)
        return false;
    if (i < n && s[i] == '.') {
        size_t f = ++i;
        while (i < n && is_digit(s[i]))
            i++;
        if (i == f)
            return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t x = i;
        while (i < n && is_digit(s[i]))
            i++;
        if (i == x)
            return false;
    }
    return i == n;
}

static bool needs_quotes(const char *s, size_t n)
{
    if (!n)
        return true;
    if (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t')
        return true;
    if ((n == 4 && !memcmp(s, "true", 4)) || (n == 5 && !memcmp(s, "false", 5)) ||
        (n == 4 && !memcmp(s, "null", 4)))
        return true;
    if (s[0] == '-' || s[0] == '#' || looks_numeric(s, n))
        return true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == ':' || c == '"' || c == '\\' || c == '[' ||
            c == ']' || c == '{' || c == '}' || c == ',')
            return true;
    }
    /* Bytes that are not UTF-8 are replaced, which only a quoted string may show. */
    return jp_utf8_validate(s, n, NULL) < 0;
}

void jp_toon_str(struct jp_buf *b, const char *s, size_t n)
{
    if (!needs_quotes(s, n)) {
        jp_buf_put(b, s, n);
        return;
    }
    jp_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t l = jp_utf8_seq_len(s + i, n - i);
        if (!l) {
            jp_buf_put(b, "\xef\xbf\xbd", 3); /* U+FFFD for this one byte */
            i++;
            continue;
        }
        if (l > 1) {
            jp_buf_put(b, s + i, l);
            i += l;
            continue;
        }
        switch (c) {
        case '\\': jp_buf_put(b, "\\\\", 2); break;
        case '"': jp_buf_put(b, "\\\"", 2); break;
        case '\n': jp_buf_put(b, "\\n", 2); break;
        case '\r': jp_buf_put(b, "\\r", 2); break;
        case '\t': jp_buf_put(b, "\\t", 2); break;
        default:
            if (c < 0x20 || c == 0x7f)
                jp_buf_printf(b, "\\u%04x", c);
            else
                jp_buf_put(b, s + i, 1);
        }
        i++;
    }
    jp_buf_put(b, "\"", 1);
}
