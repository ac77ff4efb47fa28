/* The one UTF-8 validator (utf8.h). */
#include "common/utf8.h"

#include <errno.h>

size_t jp_utf8_seq_len(const void *s, size_t n)
{
    const unsigned char *p = s;
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t need;
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range: it rules out the bad forms */
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0; /* below: overlong */
        else if (c == 0xed)
            hi = 0x9f; /* above: a surrogate */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90; /* below: overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* above: past U+10FFFF */
    } else {
        return 0; /* a continuation byte, 0xc0/0xc1 (always overlong) or 0xf5.. */
    }
    if (n < need || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return need;
}

int jp_utf8_validate(const void *s, size_t len, size_t *bad_at)
{
    const unsigned char *p = s;
    for (size_t i = 0; i < len;) {
        size_t l = jp_utf8_seq_len(p + i, len - i);
        if (!l) {
            if (bad_at)
                *bad_at = i;
            return -EILSEQ;
        }
        i += l;
    }
    return 0;
}
