/* The one JSON string writer: s (NUL-terminated) as a JSON string literal, quotes included;
 * " and \ escaped, C0 control characters as \u00XX, other bytes as they are (callers pass
 * UTF-8). That is what JSON requires and all it does: DEL, the C1 controls (U+0080..U+009F)
 * and any other byte pass through, so JSON text is for a JSON reader. Text a person reads on a
 * terminal goes through jp_text_safe (common/text.h) instead. */
#ifndef JP_COMMON_JSON_H
#define JP_COMMON_JSON_H

#include "common/buf.h"

void jp_json_str(struct jp_buf *b, const char *s);
/* s as jp_json_str writes it, or null when there is none (s NULL or empty): the one way an
 * optional string field is written. */
void jp_json_str_or_null(struct jp_buf *b, const char *s);
/* data[n] as a JSON string of its standard base64 (RFC 4648, padded): protobuf's JSON form of
 * a bytes field. */
void jp_json_base64(struct jp_buf *b, const void *data, size_t n);

#endif
