/* The one rule for text a person reads on a terminal or in a log (the daemon's status, runs,
 * show and log lines, the runtime's reports and error messages that quote program or client
 * data). Nothing in such text may drive the terminal it lands on:
 *   - C0 controls (0x00-0x1f) and DEL (0x7f) are written as \xHH;
 *   - C1 controls U+0080..U+009F (CSI, OSC and the rest on terminals that take 8-bit controls)
 *     are written as \u00HH;
 *   - a byte that does not start a well-formed UTF-8 sequence is written as \xHH, so a
 *     terminal never has to guess how to decode it.
 * Everything else, printable ASCII and well-formed UTF-8 above U+009F, passes unchanged, so
 * text that was already safe reads the same. The JSON and TOON writers have rules of their
 * own for their formats; this is the rule for human text.
 * jp_text_safe appends n bytes of s to b made safe; jp_text_safe_str does the same for a
 * NUL-terminated string (NULL is written as nothing). jp_text_quoted writes a field of a
 * column of words (a program path in `jettprofd runs`) the same way between double quotes,
 * with '"' and '\' also written as \x22 and \x5c, so the field ends only at its closing
 * quote and every escape reads one way. */
#ifndef JP_COMMON_TEXT_H
#define JP_COMMON_TEXT_H

#include <stddef.h>

#include "common/buf.h"

void jp_text_safe(struct jp_buf *b, const char *s, size_t n);
void jp_text_safe_str(struct jp_buf *b, const char *s);
void jp_text_quoted(struct jp_buf *b, const char *s, size_t n);

#endif
