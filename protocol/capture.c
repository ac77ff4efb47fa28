/* Capture files: what the writer (capture_write.c) and the reader (capture_read.c) share: the
 * magic numbers, the integrity words, CRC-32C, whole writes and version 3's column layouts
 * (layout in capture.h). */
#include "protocol/capture.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "capture_format.h"

const uint8_t jp_cap_file_magic[8] = {'J', 'P', 'C', 'A', 'P', 'T', '\r', '\n'};
const uint8_t jp_cap_block_magic_v1[4] = {'J', 'P', 'B', 'K'};
const uint8_t jp_cap_block_magic_v2[4] = {'J', 'P', 'B', 'Z'};
const uint8_t jp_cap_block_magic[4] = {'J', 'P', 'B', 'C'};

static const char *const integrity_names[] = {
    [JP_CAPI_NONE] = NULL,
#define JP_X(n, s) [JP_CAPI_##n] = s,
    JP_CAPTURE_INTEGRITY(JP_X)
#undef JP_X
};

const char *jp_capture_integrity_name(uint32_t v)
{
    return v < sizeof integrity_names / sizeof integrity_names[0] ? integrity_names[v] : NULL;
}

/* ---- crc32c ---------------------------------------------------------------------------- */

/* Castagnoli CRC (reflected polynomial 0x82f63b78). Replay and capture writing checksum every
 * byte of the stream, so a byte-at-a-time table would cost more than aggregating the records:
 * x86-64 processors with SSE4.2 have an instruction for exactly this polynomial, and everything
 * else uses eight tables (slicing-by-8), eight bytes per step. Both give the same values. */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_have_hw;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1u ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xffu];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *b, size_t n)
{
    while (n && ((uintptr_t)b & 7u)) {
        crc = crc_table[0][(crc ^ *b++) & 0xffu] ^ (crc >> 8);
        n--;
    }
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8); /* little-endian host: records.h refuses others */
        uint32_t lo = (uint32_t)w ^ crc, hi = (uint32_t)(w >> 32);
        crc = crc_table[7][lo & 0xffu] ^ crc_table[6][(lo >> 8) & 0xffu] ^
              crc_table[5][(lo >> 16) & 0xffu] ^ crc_table[4][lo >> 24] ^
              crc_table[3][hi & 0xffu] ^ crc_table[2][(hi >> 8) & 0xffu] ^
              crc_table[1][(hi >> 16) & 0xffu] ^ crc_table[0][hi >> 24];
    }
    while (n--)
        crc = crc_table[0][(crc ^ *b++) & 0xffu] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *b, size_t n)
{
    uint64_t c = crc;
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    crc = (uint32_t)c;
    while (n--)
        crc = __builtin_ia32_crc32qi(crc, *b++);
    return crc;
}
#endif

uint32_t jp_crc32c(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_have_hw)
        return ~crc_hw(crc, p, n);
#endif
    return ~crc_sw(crc, p, n);
}

/* Test hook: the portable path, so tests can prove both paths agree. */
uint32_t jp_crc32c_portable(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    return ~crc_sw(~crc, p, n);
}

/* ---- I/O ------------------------------------------------------------------------------- */

int jp_capture_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd pf = {fd, POLLOUT, 0};
                if (poll(&pf, 1, -1) < 0 && errno != EINTR)
                    return -errno;
                continue;
            }
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

