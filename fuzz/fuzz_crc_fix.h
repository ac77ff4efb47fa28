/* Recomputes the checksums of a capture-shaped buffer in place (layout in capture.h, either
 * version), so that mutated lengths, counts, zstd frames and records get past the crc32c
 * checks and reach the code behind them. Walks the header and then block by block as far as
 * the buffer's own lengths allow; touches nothing it cannot bound. */
#ifndef JETTPROF_FUZZ_CRC_FIX_H
#define JETTPROF_FUZZ_CRC_FIX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "protocol/capture.h"

static inline uint32_t fuzz_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void fuzz_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void fuzz_fix_crcs(uint8_t *b, size_t n)
{
    if (n < JP_CAPTURE_HEADER_SIZE)
        return;
    size_t meta_len = fuzz_get32(b + 12);
    if (meta_len > n - JP_CAPTURE_HEADER_SIZE)
        return;
    fuzz_put32(b + 16, jp_crc32c(0, b + JP_CAPTURE_HEADER_SIZE, meta_len));
    /* version 1 blocks: {magic, payload_len, count, crc}; version 2 {magic, stored_len,
     * raw_len, count, crc}; version 3 {magic, stored_len, packed_len, raw_len, count, crc};
     * in each the stored length follows the magic and the crc ends the header */
    size_t hs = jp_capture_block_header_size(b[8]);
    if (!hs)
        return;
    size_t at = JP_CAPTURE_HEADER_SIZE + meta_len;
    while (n - at >= hs) {
        uint8_t *h = b + at;
        size_t plen = fuzz_get32(h + 4);
        if (plen > n - at - hs)
            return;
        uint32_t crc = jp_crc32c(0, h, hs - 4);
        fuzz_put32(h + hs - 4, jp_crc32c(crc, h + hs, plen));
        at += hs + plen;
    }
}

#endif
