/* The one TOON scalar encoder (comma is the delimiter). A string is written bare unless TOON
 * requires quotes: empty, a leading or trailing space or tab, true/false/null, a leading '-'
 * or '#', anything a decoder reads as a number, a control character (0x00-0x1f, 0x7f), one of
 * : " \ [ ] { } , or bytes that are not UTF-8. Quoted, it uses the escapes \\ \" \n \r \t and
 * \u00XX for the other control characters. TOON text is UTF-8 and program output can be any
 * bytes: every byte that does not start a well-formed sequence (common/utf8.h) is written as
 * U+FFFD, one per invalid byte. */
#ifndef JP_COMMON_TOON_H
#define JP_COMMON_TOON_H

#include <stddef.h>

#include "common/buf.h"

void jp_toon_str(struct jp_buf *b, const char *s, size_t n);

#endif
