/* Terminal-safe human text (text.h). */
#include "common/text.h"

#include <string.h>

#include "common/utf8.h"

static void safe(struct jp_buf *b, const char *s, size_t n, int quoted)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* bytes at p[i - run .. i) that pass unchanged, appended in one go */
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t k = c < 0x80 ? 1 : jp_utf8_seq_len(p + i, n - i);
        bool plain = k == 1 ? c >= 0x20 && c != 0x7f && !(quoted && (c == '"' || c == '\\'))
                            : k != 0 && !(c == 0xc2 && p[i + 1] <= 0x9f);
        if (plain) {
            run += k;
            i += k;
            continue;
        }
        jp_buf_put(b, p + i - run, run);
        run = 0;
        if (k == 2) { /* a C1 control, U+0080..U+009F */
            jp_buf_printf(b, "\\u%04x", p[i + 1]);
            i += 2;
        } else { /* C0, DEL, a quote or backslash in a quoted field, or a byte that starts no
                  * well-formed sequence */
            jp_buf_printf(b, "\\x%02x", c);
            i++;
        }
    }
    jp_buf_put(b, p + n - run, run);
}

void jp_text_safe(struct jp_buf *b, const char *s, size_t n)
{
    safe(b, s, n, 0);
}

void jp_text_safe_str(struct jp_buf *b, const char *s)
{
    if (s)
        safe(b, s, strlen(s), 0);
}

void jp_text_quoted(struct jp_buf *b, const char *s, size_t n)
{
    jp_buf_put(b, "\"", 1);
    safe(b, s, n, 1);
    jp_buf_put(b, "\"", 1);
}
