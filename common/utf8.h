/* UTF-8, the one validator for every trust boundary (records, names the agent interns, Jett
 * source files, text the runtime writes). Well-formed means RFC 3629: a lead byte 0x00-0x7f,
 * 0xc2-0xf4 followed by the right number of continuation bytes, no overlong form, no
 * surrogate (U+D800-U+DFFF), nothing above U+10FFFF, no sequence cut by the end. NUL and
 * other control characters are well-formed and allowed: a name or an excerpt may carry them,
 * and the writers escape them; logical paths are held to more by the engine.
 * jp_utf8_seq_len: the length (1..4) of the well-formed sequence starting at s, n bytes
 * available (n >= 1), or 0 when the bytes there are not one.
 * jp_utf8_validate: 0 when all len bytes are well-formed, else -EILSEQ with *bad_at (may be
 * NULL) the offset of the first sequence that is not. */
#ifndef JP_COMMON_UTF8_H
#define JP_COMMON_UTF8_H

#include <stddef.h>

size_t jp_utf8_seq_len(const void *s, size_t n);
int jp_utf8_validate(const void *s, size_t len, size_t *bad_at);

#endif
