/* The one JSON string writer: s (NUL-terminated) as a JSON string literal, quotes included;
 * " and \ escaped, control characters as \u00XX, other bytes as they are (callers pass UTF-8). */
#ifndef JP_COMMON_JSON_H
#define JP_COMMON_JSON_H

#include "common/buf.h"

void jp_json_str(struct jp_buf *b, const char *s);

#endif
