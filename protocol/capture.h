/* Capture files: the record stream a daemon consumed for one run, kept for offline replay.
 *
 * Layout (little-endian):
 *   file header  { magic "JPCAPT\r\n", u16 format version, u16 header size (20), u32 meta_len,
 *                  u32 crc32c of meta } then meta_len (1..JP_CAPTURE_MAX_META) bytes of
 *                  msgpack run metadata: exactly the map {"format": the header's version,
 *                  "mode": JP_MODE_*, "pid": u32, "run_id": u64} -- never paths or user values;
 *   blocks, version 3 (written now): { u32 magic "JPBC", u32 stored_len, u32 packed_len
 *                  (1..JP_CAPTURE_MAX_PACKED), u32 raw_len (1..JP_CAPTURE_MAX_BLOCK), u32
 *                  record_count, u32 crc32c } then stored_len bytes: a zstd frame that
 *                  decompresses to exactly packed_len bytes when stored_len < packed_len, the
 *                  packed_len bytes themselves when stored_len == packed_len; stored_len >
 *                  packed_len is invalid. The packed bytes are the block's records by column
 *                  (below), which decode to exactly raw_len bytes of record_count whole records.
 *                  The crc32c covers the header's first five fields and then the stored bytes;
 *   packed bytes, version 3: JP_CAPTURE_COLUMNS u32 column lengths, then the columns in that
 *                  order, their lengths summing to packed_len - 4 * JP_CAPTURE_COLUMNS:
 *                    kind   one byte a record: its type;
 *                    other  every record of a kind not packed, whole and as it was (header
 *                           included);
 *                    then, for each packed kind, its own columns: alloc node, id, size,
 *                           reserved0; free node, id, old_size, seq; resize node, id,
 *                           old_size, new_size; cpu sample node, requested_tick, and the rest
 *                           (state/flags/reserved0 as one u32, stmt_line, stmt_col, padding).
 *                           Each holds LEB128 varints (at most 10 bytes, at most the field's
 *                           width), one a field of each record of its kind in order (capture.c's
 *                           layout table says which bytes): every byte after the header is one
 *                           field. A node, id or tick is stored as the zigzag of its
 *                           difference, modulo its width, from a previous value in the block
 *                           (0 before the first): an allocation event's node from the node of
 *                           the previous allocation event of any kind (alloc, free or resize),
 *                           a CPU sample's node, and any id or tick, from the same field of the
 *                           previous record of its kind;
 *                  every column consumed exactly. Values are per block: a block decodes alone;
 *   blocks, version 2 (still read, and written on request): { u32 magic "JPBZ", u32
 *                  stored_len, u32 raw_len (1..JP_CAPTURE_MAX_BLOCK), u32 record_count, u32
 *                  crc32c } then stored_len bytes: a zstd frame that decompresses to exactly
 *                  raw_len bytes when stored_len < raw_len, the raw_len bytes themselves when
 *                  stored_len == raw_len (a block zstd cannot shrink); stored_len > raw_len is
 *                  invalid. The crc32c covers the header's first four fields and then the
 *                  stored bytes, so damage is caught before anything is decompressed;
 *   blocks, version 1 (still read): { u32 magic "JPBK", u32 payload_len
 *                  (1..JP_CAPTURE_MAX_BLOCK), u32 record_count, u32 crc32c } then payload_len
 *                  raw bytes; the crc32c covers the first three fields, then the payload;
 *   a block's raw bytes are whole records (never split across blocks, PAD records dropped)
 *   exactly as consumed. The first record is JP_REC_RUN_START; the last block ends with the
 *   JP_REC_RUN_STOP record, whose record_count matches (records.h: every record before it
 *   except PAD and EXCERPT); nothing follows it. The writer puts RUN_STOP in a block of its
 *   own (a reader accepts it anywhere at the end of the last block), so a file cut short keeps
 *   every data record. Every block stands alone (its own zstd frame, no shared dictionary or
 *   window), so each complete block before damage can still be read.
 *
 * The reader streams: it never allocates from a length read from the file beyond a fixed
 * bound (a block buffer grows only as bytes actually arrive, up to JP_CAPTURE_MAX_BLOCK; a
 * raw_len over it is refused before anything is allocated; decompression writes into a
 * raw_len buffer and refuses a frame that would produce more or less), verifies a whole block
 * before handing out any of its records, recovers every complete block before damage, and
 * reports the byte offset where trouble starts.
 */
#ifndef JETTPROF_PROTOCOL_CAPTURE_H
#define JETTPROF_PROTOCOL_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/records.h"

#define JP_CAPTURE_VERSION 3u   /* what the writer writes by default: packed by column */
#define JP_CAPTURE_VERSION_2 2u /* records as they are, zstd: still read, written on request */
#define JP_CAPTURE_VERSION_1 1u /* uncompressed blocks: still read, and written on request */
#define JP_CAPTURE_MAX_BLOCK (1u << 20) /* the most raw bytes of one block */
/* the most packed bytes of one version 3 block: no record packs to more than 5/4 of its size
 * plus its kind byte (a 32-byte record: 1 + 5 + 3 * 10 = 36 bytes; any other: 1 + its size) */
#define JP_CAPTURE_COLUMNS 17u
#define JP_CAPTURE_MAX_PACKED \
    (JP_CAPTURE_MAX_BLOCK + JP_CAPTURE_MAX_BLOCK / 4u + 4u * JP_CAPTURE_COLUMNS)
#define JP_CAPTURE_MAX_META (1u << 16)
#define JP_CAPTURE_HEADER_SIZE 20u
#define JP_CAPTURE_BLOCK_HEADER_SIZE_V3 24u /* version 3 */
#define JP_CAPTURE_BLOCK_HEADER_SIZE 20u    /* version 2 */
#define JP_CAPTURE_BLOCK_HEADER_SIZE_V1 16u /* version 1 */
#define JP_CAPTURE_BLOCK_TARGET (64u * 1024u) /* versions 1 and 2: a block ends near this size */
#define JP_CAPTURE_BLOCK_TARGET_V3 (256u * 1024u) /* version 3 (see capture.c) */
/* the most raw bytes a writer puts in one block (a target and one record) */
#define JP_CAPTURE_BLOCK_RAW_MAX (JP_CAPTURE_BLOCK_TARGET_V3 + JP_REC_MAX_SIZE)
#define JP_CAPTURE_ZSTD_LEVEL 1 /* version 2; see the measurement in capture.c */
#define JP_CAPTURE_ZSTD_LEVEL_V3 1 /* version 3; see the measurement in capture.c */

/* A block's header size in a file of that version (0 for a version the reader does not know). */
static inline uint32_t jp_capture_block_header_size(uint32_t version)
{
    return version == 1u   ? JP_CAPTURE_BLOCK_HEADER_SIZE_V1
           : version == 2u ? JP_CAPTURE_BLOCK_HEADER_SIZE
           : version == 3u ? JP_CAPTURE_BLOCK_HEADER_SIZE_V3
                           : 0u;
}

/* CRC-32C (Castagnoli, reflected 0x82F63B78). Start with crc 0; chain by passing the previous
 * result. jp_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t jp_crc32c(uint32_t crc, const void *p, size_t n);
/* The same value without the SSE4.2 instruction (used where the processor lacks it). */
uint32_t jp_crc32c_portable(uint32_t crc, const void *p, size_t n);
/* Writes all of buf[n] to fd, waiting (poll) while a non-blocking fd is full: 0 or -errno. */
int jp_capture_write_all(int fd, const void *buf, size_t n);

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

/* Metadata stored in the header (msgpack). format: the reader gives the file's version; the
 * writer writes JP_CAPTURE_VERSION when it is 0, else the version it names (1, 2 or 3). */
struct jp_capture_meta {
    uint32_t mode;
    uint32_t pid;
    uint64_t run_id;
    uint32_t format;
};

/* Frames blocks: a block of whole records (as the writer gathers them) into the header and
 * stored bytes of one block of a version's file. One per thread that encodes; it holds the
 * compressor and its buffers. */
struct jp_capture_encoder; /* opaque */
/* level: the zstd level (0: the version's default, JP_CAPTURE_ZSTD_LEVEL[_V3]); ignored for
 * version 1. -EINVAL for a version that is not 1, 2 or 3 or a level zstd does not have;
 * -ENOMEM. */
int jp_capture_encoder_new(uint32_t version, int level, struct jp_capture_encoder **out);
/* raw: len (1..JP_CAPTURE_BLOCK_RAW_MAX) bytes of count whole records that passed
 * jp_rec_validate (no PAD). On 0, *out and *n give the framed block (header then stored bytes)
 * in the encoder's memory, valid until its next call. -EINVAL for a bad length, -ENOMEM when
 * the compressor could not allocate. */
int jp_capture_encode_block(struct jp_capture_encoder *e, const uint8_t *raw, uint32_t len,
                            uint32_t count, const uint8_t **out, size_t *n);
void jp_capture_encoder_free(struct jp_capture_encoder *e);

/* Where a writer's finished blocks go when another thread encodes and writes them: block()
 * takes the block in *raw (len bytes, count records) and leaves in *raw an empty buffer of
 * JP_CAPTURE_BLOCK_RAW_MAX bytes that the writer fills next; the writer owns whichever buffer
 * it holds (it frees it with free()). 0, or -errno, which the writer keeps as its write
 * error. */
struct jp_capture_sink {
    int (*block)(void *ctx, uint8_t **raw, uint32_t len, uint32_t count);
    void *ctx;
};
struct jp_capture_options {
    int level;             /* zstd level, 0: the version's default */
    uint32_t block_target; /* raw bytes a block ends near, 0: the version's default; at most
                            * JP_CAPTURE_BLOCK_TARGET_V3 */
    const struct jp_capture_sink *sink; /* NULL: the writer encodes and writes its blocks */
};

struct jp_capture_writer; /* opaque */
/* Starts a capture on an fd opened by someone else (the client, or the daemon's capture dir)
 * and writes the file header at the fd's current position (normally 0). Does not take
 * ownership of fd. -EINVAL for a mode that is not JP_MODE_* or a format that is neither 0,
 * 1, 2 nor 3; -ENOMEM. */
int jp_capture_writer_new(int fd, const struct jp_capture_meta *meta,
                          struct jp_capture_writer **out);
/* The same with options (NULL: the defaults); -EINVAL for a level or target out of range. With
 * a sink, the writer encodes nothing and writes only the file header itself. */
int jp_capture_writer_new_opts(int fd, const struct jp_capture_meta *meta,
                               const struct jp_capture_options *opt,
                               struct jp_capture_writer **out);
/* Appends one record (it must pass jp_rec_validate with len == its size: else -EINVAL);
 * buffered into blocks of about JP_CAPTURE_BLOCK_TARGET bytes. PAD records are dropped (0).
 * A RUN_STOP record ends the capture: the pending block is written, then RUN_STOP alone in the
 * last block, and any later write is -EINVAL. After a write error (-errno) the writer refuses
 * everything with that error. */
int jp_capture_write(struct jp_capture_writer *w, const void *rec, uint32_t len);
/* Room for a run of one-slot records (JP_SLOT_SIZE bytes each) written in place: a pointer to
 * the end of the pending block, with *n lowered to how many fit before the block's target (the
 * block is ended first when none does; at least 1 then). The caller fills some of them and
 * takes the first k with jp_capture_slots_commit, before any other call on the writer. NULL
 * with the writer's sticky error in *err, or -EINVAL for a writer that is stopped or n 0. */
uint8_t *jp_capture_slots_begin(struct jp_capture_writer *w, uint32_t *n, int *err);
/* Takes the first k slots of the last begin as k records: each must be a whole one-slot
 * record that passes jp_rec_validate and is not PAD, RUN_START or RUN_STOP (else -EINVAL and
 * none is taken). */
int jp_capture_slots_commit(struct jp_capture_writer *w, uint32_t k);

/* Writes the current block out (if any), or hands it to the sink; a capture ended without a
 * RUN_STOP reads as missing_stop_event. Writes retry on EINTR and partial writes. -ENOMEM when
 * the compressor could not allocate (sticky, like a write error). */
int jp_capture_flush(struct jp_capture_writer *w);
void jp_capture_writer_free(struct jp_capture_writer *w); /* flushes */

struct jp_capture_reader; /* opaque */
/* Opens from a path or an fd (open_fd does not take ownership of fd; it reads from the fd's
 * current position). -ENOENT from jp_capture_open means integrity MISSING ("capture_missing");
 * -ENOMEM is the host out of memory (never a verdict on the file); other -errno are I/O
 * errors. Any file that could be opened gives a reader, even if its header is damaged: the
 * verdict then says why. */
int jp_capture_open(const char *path, struct jp_capture_reader **out);
int jp_capture_open_fd(int fd, struct jp_capture_reader **out);
/* Header metadata, or NULL when the header or metadata was unreadable (verdict INVALID or, for
 * a file cut inside its header, INVALID "truncated header"). */
const struct jp_capture_meta *jp_capture_meta(const struct jp_capture_reader *r);
/* Next record: 1 with *rec and *len pointing into an internal 8-byte aligned buffer (valid until
 * the next call), 0 at the end of the readable stream (then ask for the verdict), -errno on
 * I/O error, -ENOMEM when a block buffer could not grow (out of memory is never a verdict).
 * After a negative return the reader can only be closed. Records come out structurally
 * validated (jp_rec_validate), from verified blocks only. */
int jp_capture_next(struct jp_capture_reader *r, const void **rec, uint32_t *len);
/* The next records when they are a run of one-slot events (CPU samples and allocation events,
 * JP_SLOT_SIZE bytes each) lying one after the other in the current block: 1 with *slots and
 * *n (>= 1) giving them, valid until the next call, validated like next()'s and counted as
 * handed out; 0 when the next record is no such event or the block is done: then
 * jp_capture_next gives it (and loads the next block). For feeding a run at a time
 * (jp_engine_feed_slots). */
int jp_capture_next_run(struct jp_capture_reader *r, const void **slots, uint32_t *n);
/* The verdict once next() returned 0: integrity, a stable reason for INVALID/MISSING_STOP_EVENT
 * ("bad magic", "unsupported version", "block checksum mismatch", "record out of bounds",
 * "truncated block", "stop record count mismatch", "bad compressed block", ...), and the byte
 * offset where trouble starts (file size when complete). *reason is NULL when complete. The
 * offset is the start of the damaged unit: 0 for the file header, the metadata's start for
 * metadata, the block's start for a damaged or truncated block (and for a bad record inside a
 * compressed block, whose records have no file offset of their own), the record's own offset
 * for a bad record in an uncompressed block whose checksum holds, the end of the last good
 * block for a clean end without a stop record.
 * Before next() returned 0 the verdict is JP_CAPI_NONE. */
uint32_t jp_capture_verdict(const struct jp_capture_reader *r, const char **reason,
                            uint64_t *offset);
void jp_capture_close(struct jp_capture_reader *r);

#endif
