/* The one JSON string writer (json.h). */
#include "common/json.h"

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
