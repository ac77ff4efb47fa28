/* The one JSON string writer (json.h). */
#include "common/json.h"

#include <stdint.h>
#include <stdio.h>

void jp_json_str(struct jp_buf *b, const char *s)
{
    jp_buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            jp_buf_put(b, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            jp_buf_put(b, esc, 6);
        } else {
            jp_buf_put(b, p, 1);
        }
    }
    jp_buf_put(b, "\"", 1);
}

void jp_json_str_or_null(struct jp_buf *b, const char *s)
{
    if (s && *s)
        jp_json_str(b, s);
    else
        jp_buf_put(b, "null", 4);
}

void jp_json_base64(struct jp_buf *b, const void *data, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    jp_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i += 3) {
        size_t k = n - i < 3 ? n - i : 3;
        uint32_t w = (uint32_t)p[i] << 16 | (k > 1 ? (uint32_t)p[i + 1] << 8 : 0u) |
                     (k > 2 ? (uint32_t)p[i + 2] : 0u);
        char q[4] = {abc[w >> 18], abc[(w >> 12) & 63], k > 1 ? abc[(w >> 6) & 63] : '=',
                     k > 2 ? abc[w & 63] : '='};
        jp_buf_put(b, q, 4);
    }
    jp_buf_put(b, "\"", 1);
}
