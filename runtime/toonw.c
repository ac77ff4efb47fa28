/* TOON scalars for the run envelope (the TOON encoding rules). A string is
 * written bare only when the decoder cannot read it as anything else; otherwise it is quoted
 * with the five escapes TOON defines. TOON text is UTF-8: a byte sequence that is not valid
 * UTF-8 (a program may print any bytes) is written as U+FFFD, one per invalid byte. */
#include <string.h>

#include "jett.h"

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
    else return 0;
    if (len > n)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[k] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static bool needs_quotes(const unsigned char *s, size_t n)
{
    if (n == 0)
        return true;
    if (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t')
        return true;
    if ((n == 4 && memcmp(s, "true", 4) == 0) || (n == 5 && memcmp(s, "false", 5) == 0) ||
        (n == 4 && memcmp(s, "null", 4) == 0))
        return true;
    /* Anything that starts like a number is quoted: stricter than needed, never ambiguous. */
    if ((s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '+' || s[0] == '#' || s[0] == '.')
        return true;
    for (size_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (c < 0x20 || c == 0x7f || c == ':' || c == '"' || c == '\\' || c == '[' || c == ']' ||
            c == '{' || c == '}' || c == ',')
            return true;
    }
    size_t i = 0;
    while (i < n) {
        size_t l = utf8_len(s + i, n - i);
        if (!l)
            return true;
        i += l;
    }
    return false;
}

void jt_toon_string(struct jt_buf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    if (!needs_quotes(s, n)) {
        jt_buf_put(b, str, n);
        return;
    }
    jt_buf_put(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t l = utf8_len(s + i, n - i);
        if (!l) {
            jt_buf_put(b, "\xef\xbf\xbd", 3);
            i++;
            continue;
        }
        if (l > 1) {
            jt_buf_put(b, str + i, l);
            i += l;
            continue;
        }
        switch (c) {
        case '\\': jt_buf_put(b, "\\\\", 2); break;
        case '"': jt_buf_put(b, "\\\"", 2); break;
        case '\n': jt_buf_put(b, "\\n", 2); break;
        case '\r': jt_buf_put(b, "\\r", 2); break;
        case '\t': jt_buf_put(b, "\\t", 2); break;
        default:
            if (c < 0x20 || c == 0x7f)
                jt_buf_printf(b, "\\u%04x", c);
            else
                jt_buf_put(b, str + i, 1);
            break;
        }
        i++;
    }
    jt_buf_put(b, "\"", 1);
}
