/* tests/lib/recbuild.h: the variable-length records (SOURCE_DEF, FRAME_DEF, EXCERPT) laid out
 * the way a producer writes them: the fixed part, then its strings, h.size and the lengths set
 * from the strings. The suites build their streams with these; fixed-size records need none.
 * No Criterion here: the benches may use it. */
#ifndef JETTPROF_TESTS_LIB_RECBUILD_H
#define JETTPROF_TESTS_LIB_RECBUILD_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/records.h"

/* Each writes the record into buf (JP_REC_MAX_SIZE bytes) and returns its length: the fixed
 * part given (its h.type, h.size and length fields are overwritten) followed by the strings.
 * The caller keeps the strings within the record's limits (or past them, to test a refusal,
 * as long as the whole fits JP_REC_MAX_SIZE). */
uint32_t tl_rec_source(uint8_t *buf, const struct jp_rec_source_def *fixed, const char *path,
                       size_t path_len);
uint32_t tl_rec_frame(uint8_t *buf, const struct jp_rec_frame_def *fixed, const char *ns,
                      size_t ns_len, const char *fn, size_t fn_len);
/* A RUN_START as the suites' streams begin: this format version, the mode, 1000 Hz in CPU mode
 * (0 in memory mode), limit 10, everything else zero. */
struct jp_rec_run_start tl_rec_run_start(uint32_t mode);
uint32_t tl_rec_excerpt(uint8_t *buf, const struct jp_rec_excerpt *fixed, const char *text,
                        size_t text_len);

#endif
