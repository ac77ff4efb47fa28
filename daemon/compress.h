/* The compressor pool: a capture's blocks encoded and written off the drain's thread (the
 * contract and the locking in compress.c). */
#ifndef JETTPROFD_COMPRESS_H
#define JETTPROFD_COMPRESS_H

#include <stdint.h>

#include "protocol/capture.h"

#define JPD_CAPTURE_IN_FLIGHT 4 /* raw blocks one capture holds at most, the writer's included */

struct jpd_cstream; /* one capture's output: its fd, encoder and blocks in flight */
/* Starts a capture on fd (not taken; it must stay open until jpd_cstream_free) whose writer,
 * in *w, hands its blocks to the pool. The file header is written now, on this thread.
 * -ENOMEM, -EAGAIN when no compressor thread could be started, or the writer's errors. On
 * error nothing is left to free. */
int jpd_cstream_new(int fd, const struct jp_capture_meta *meta, struct jpd_cstream **out,
                    struct jp_capture_writer **w);
/* Waits until every block handed over is written; 0 or the first encode or write error. */
int jpd_cstream_finish(struct jpd_cstream *c);
/* How often, and how long in all, the writer waited for a free buffer. */
void jpd_cstream_waits(struct jpd_cstream *c, uint64_t *waits, uint64_t *wait_ns);
/* Waits as finish does, then frees. The stream's writer must be freed first (its last block
 * goes to the stream). */
void jpd_cstream_free(struct jpd_cstream *c);

#endif
