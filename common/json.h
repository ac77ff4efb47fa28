/* The one JSON string writer: s (NUL-terminated) as a JSON string literal, quotes included;
 * " and \ escaped, control characters as \u00XX, other bytes as they are (callers pass UTF-8). */
#ifndef JP_COMMON_JSON_H
#define JP_COMMON_JSON_H

#include "common/buf.h"

void jp_json_str(struct jp_buf *b, const char *s);
/* data[n] as a JSON string of its standard base64 (RFC 4648, padded): protobuf's JSON form of
 * a bytes field. */
void jp_json_base64(struct jp_buf *b, const void *data, size_t n);

#endif
