/* What the capture writer (capture_write.c) and reader (capture_read.c) share of the format
 * (capture.h has the layout): the magic numbers, little-endian fields, and version 3's columns.
 * Internal to protocol/. */
#ifndef JETTPROF_PROTOCOL_CAPTURE_FORMAT_H
#define JETTPROF_PROTOCOL_CAPTURE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "protocol/capture.h"
#include "protocol/records.h"

extern const uint8_t jp_cap_file_magic[8];
extern const uint8_t jp_cap_block_magic_v1[4]; /* version 1: stored blocks */
extern const uint8_t jp_cap_block_magic_v2[4]; /* version 2: zstd of the records */
extern const uint8_t jp_cap_block_magic[4];    /* version 3: zstd of the columns */

/* ---- little-endian fields -------------------------------------------------------------- */

static inline void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}
static inline void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- version 3 columns ----------------------------------------------------------------- */

/* The record kinds packed field by field (capture.h): every byte after the header is one
 * field, in this order, so a record decodes to exactly its bytes (reserved fields and padding
 * included). Identifiers and counters that advance by small steps (call-chain nodes,
 * allocation ids, requested ticks) are deltas; sizes and the rest are plain varints. Each
 * column holds one sort of value of one kind, so zstd meets long runs of the same few bytes,
 * and a free's node and size, which repeat its allocation's some records later, repeat them
 * in the same order in the free's own columns, where zstd finds them as long matches. */
enum {
    COL_KIND, COL_OTHER,
    COL_A_NODE, COL_A_ID, COL_A_SIZE, COL_A_MISC,
    COL_F_NODE, COL_F_ID, COL_F_SIZE, COL_F_MISC,
    COL_R_NODE, COL_R_ID, COL_R_OLD, COL_R_NEW,
    COL_S_NODE, COL_S_TICK, COL_S_MISC,
};
_Static_assert(COL_S_MISC + 1 == JP_CAPTURE_COLUMNS, "one length per column");

/* delta: 0 a plain value, DELTA_OWN from the same field of the previous record of its kind,
 * DELTA_EVENT (nodes of allocation events) from the node of the previous allocation event of
 * any kind: a free or a resize happens where the program is, mostly at the node of the
 * allocation just before it. */
enum { DELTA_OWN = 1, DELTA_EVENT = 2 };
struct col_field {
    uint8_t off, width, col, delta;
};
struct col_layout {
    uint8_t nfields;
    struct col_field f[6];
};
#define PACKED_SIZE 32u /* the size of every packed kind (each is fixed-size) */
/* Defined here, not in one file, so the packer (capture_write.c) and the unpacker
 * (capture_read.c) see every layout as a constant: each kind's case then compiles to its own
 * straight code, with no table read, loop or branch on width and delta a field (the packer
 * took 10 ns a record with the table behind a link, bench/RESULTS.md). */
static const struct col_layout jp_cap_layouts[JP_REC_TYPE_LIMIT] = {
    [JP_REC_ALLOC] = {4, {{4, 4, COL_A_NODE, DELTA_EVENT}, {8, 8, COL_A_ID, DELTA_OWN},
                          {16, 8, COL_A_SIZE, 0}, {24, 8, COL_A_MISC, 0}}},
    [JP_REC_FREE] = {4, {{4, 4, COL_F_NODE, DELTA_EVENT}, {8, 8, COL_F_ID, DELTA_OWN},
                         {16, 8, COL_F_SIZE, 0}, {24, 8, COL_F_MISC, 0}}},
    [JP_REC_RESIZE] = {4, {{4, 4, COL_R_NODE, DELTA_EVENT}, {8, 8, COL_R_ID, DELTA_OWN},
                           {16, 8, COL_R_OLD, 0}, {24, 8, COL_R_NEW, 0}}},
    /* state, flags and reserved0 as one u32; the four bytes before requested_tick are padding */
    [JP_REC_CPU_SAMPLE] = {6, {{4, 4, COL_S_MISC, 0}, {8, 4, COL_S_NODE, DELTA_OWN},
                               {12, 4, COL_S_MISC, 0}, {16, 4, COL_S_MISC, 0},
                               {20, 4, COL_S_MISC, 0}, {24, 8, COL_S_TICK, DELTA_OWN}}},
};
_Static_assert(sizeof(struct jp_rec_alloc) == PACKED_SIZE &&
                   offsetof(struct jp_rec_alloc, node) == 4 &&
                   offsetof(struct jp_rec_alloc, allocation_id) == 8 &&
                   offsetof(struct jp_rec_alloc, size) == 16 &&
                   offsetof(struct jp_rec_alloc, reserved0) == 24,
               "alloc layout");
_Static_assert(sizeof(struct jp_rec_free) == PACKED_SIZE &&
                   offsetof(struct jp_rec_free, node) == 4 &&
                   offsetof(struct jp_rec_free, allocation_id) == 8 &&
                   offsetof(struct jp_rec_free, old_size) == 16 &&
                   offsetof(struct jp_rec_free, seq) == 24,
               "free layout");
_Static_assert(sizeof(struct jp_rec_resize) == PACKED_SIZE &&
                   offsetof(struct jp_rec_resize, node) == 4 &&
                   offsetof(struct jp_rec_resize, allocation_id) == 8 &&
                   offsetof(struct jp_rec_resize, old_size) == 16 &&
                   offsetof(struct jp_rec_resize, new_size) == 24,
               "resize layout");
_Static_assert(sizeof(struct jp_rec_cpu_sample) == PACKED_SIZE &&
                   offsetof(struct jp_rec_cpu_sample, state) == 4 &&
                   offsetof(struct jp_rec_cpu_sample, node) == 8 &&
                   offsetof(struct jp_rec_cpu_sample, stmt_line) == 12 &&
                   offsetof(struct jp_rec_cpu_sample, stmt_col) == 16 &&
                   offsetof(struct jp_rec_cpu_sample, requested_tick) == 24,
               "cpu sample layout");

static inline uint64_t get_field(const uint8_t *p, unsigned width)
{
    uint64_t v = 0;
    memcpy(&v, p, width); /* little-endian host: records.h refuses others */
    return v;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* The zigzag of a difference taken modulo the field's width: small steps either way are
 * small numbers. */
static inline uint64_t zigzag(uint64_t d, unsigned width)
{
    if (width == 4) {
        int32_t s = (int32_t)(uint32_t)d;
        return (uint32_t)(((uint32_t)s << 1) ^ (uint32_t)(s >> 31));
    }
    int64_t s = (int64_t)d;
    return ((uint64_t)s << 1) ^ (uint64_t)(s >> 63);
}
static inline uint64_t unzigzag(uint64_t z)
{
    return (z >> 1) ^ (0 - (z & 1));
}

#endif
