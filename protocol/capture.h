/* Capture files: the record stream a daemon consumed for one run, kept for offline replay.
 *
 * Layout (little-endian):
 *   file header  { magic "JPCAPT\r\n", u16 format version, u16 header size, u32 meta_len,
 *                  u32 crc32c of meta } then meta_len bytes of msgpack run metadata (a map:
 *                  "format", "mode", "pid", "started_unix_s"? ... never paths or user values);
 *   blocks       { u32 magic "JPBK", u32 payload_len, u32 record_count, u32 crc32c(payload) }
 *                  then payload_len bytes of whole records (never split across blocks, PAD
 *                  records dropped) exactly as consumed;
 *   the last block ends with the JP_REC_RUN_STOP record, whose record_count matches.
 *
 * The reader streams: it never allocates from a length read from the file beyond a fixed
 * bound, recovers every complete block before damage, and reports the byte offset where
 * trouble starts.
 */
#ifndef JETTPROF_PROTOCOL_CAPTURE_H
#define JETTPROF_PROTOCOL_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "records.h"

#define JP_CAPTURE_VERSION 1u
#define JP_CAPTURE_MAX_BLOCK (1u << 20)
#define JP_CAPTURE_MAX_META (1u << 16)

/* Integrity verdicts, one list: X(NAME, "word") */
#define JP_CAPTURE_INTEGRITY(X)                                                                   \
    X(COMPLETE, "complete")                                                                       \
    X(MISSING_STOP_EVENT, "missing_stop_event")                                                   \
    X(INVALID, "invalid")                                                                         \
    X(MISSING, "capture_missing")
enum jp_capture_integrity {
    JP_CAPI_NONE = 0,
#define JP_X(n, s) JP_CAPI_##n,
    JP_CAPTURE_INTEGRITY(JP_X)
#undef JP_X
};
const char *jp_capture_integrity_name(uint32_t v);

/* Metadata stored in the header (msgpack). */
struct jp_capture_meta {
    uint32_t mode;
    uint32_t pid;
    uint64_t run_id;
};

struct jp_capture_writer; /* opaque */
/* Starts a capture on an fd opened by someone else (the client, or the daemon's capture dir).
 * Does not take ownership of fd. */
int jp_capture_writer_new(int fd, const struct jp_capture_meta *meta,
                          struct jp_capture_writer **out);
/* Appends one validated record; buffered into blocks. */
int jp_capture_write(struct jp_capture_writer *w, const void *rec, uint32_t len);
/* Flushes the current block; a capture ended without a RUN_STOP reads as missing_stop_event. */
int jp_capture_flush(struct jp_capture_writer *w);
void jp_capture_writer_free(struct jp_capture_writer *w); /* flushes */

struct jp_capture_reader; /* opaque */
/* Opens from a path (-ENOENT => integrity MISSING) or an fd. */
int jp_capture_open(const char *path, struct jp_capture_reader **out);
int jp_capture_open_fd(int fd, struct jp_capture_reader **out);
/* Header metadata (valid after a successful open). */
const struct jp_capture_meta *jp_capture_meta(const struct jp_capture_reader *r);
/* Next record: 1 with *rec/*len pointing into an internal buffer (valid until the next call),
 * 0 at the end of the readable stream (then ask for the verdict), -errno on I/O error. Records
 * come out structurally validated (jp_rec_validate). */
int jp_capture_next(struct jp_capture_reader *r, const void **rec, uint32_t *len);
/* The verdict once next() returned 0: integrity, a stable reason for INVALID/MISSING_STOP_EVENT
 * ("bad magic", "unsupported version", "block checksum mismatch", "record out of bounds",
 * "truncated block", "stop record count mismatch", ...), and the byte offset where trouble
 * starts (file size when complete). */
uint32_t jp_capture_verdict(const struct jp_capture_reader *r, const char **reason,
                            uint64_t *offset);
void jp_capture_close(struct jp_capture_reader *r);

#endif
