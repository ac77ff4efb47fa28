/* Bounds check of untrusted msgpack before msgpack-c builds objects from it. */
#include "mpcheck.h"

/* Walks one msgpack value without building it: every container count and string length must
 * fit in the bytes left, and the whole buffer holds at most max_values values, so what
 * msgpack-c then allocates is bounded by the buffer itself. left[d] counts the values still
 * to read in the container open at depth d (depth 0: the one top-level value). */
const char *jp__mp_check(const uint8_t *p, size_t len, uint32_t max_values)
{
    size_t i = 0;
    uint64_t pending = 1, total = 1;
    uint64_t left[JP__MP_MAX_DEPTH + 1] = {1};
    unsigned depth = 0;
    while (pending) {
        while (left[depth] == 0)
            depth--; /* pending > 0, so some open container still has values to read */
        if (i >= len)
            return "truncated message";
        pending--;
        left[depth]--;
        uint8_t c = p[i++];
        uint64_t skip = 0, members = 0;
        size_t lenbytes = 0;
        int is_map = 0;
        if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
        } else if (c >= 0x80 && c <= 0x8f) {
            members = c & 0x0f;
            is_map = 1;
        } else if (c >= 0x90 && c <= 0x9f) {
            members = c & 0x0f;
        } else if (c >= 0xa0 && c <= 0xbf) {
            skip = c & 0x1f;
        } else {
            switch (c) {
            case 0xcc: case 0xd0: skip = 1; break;
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xce: case 0xd2: case 0xca: skip = 4; break;
            case 0xcf: case 0xd3: case 0xcb: skip = 8; break;
            case 0xd4: skip = 2; break;
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xc4: case 0xd9: lenbytes = 1; break;
            case 0xc5: case 0xda: lenbytes = 2; break;
            case 0xc6: case 0xdb: lenbytes = 4; break;
            case 0xc7: lenbytes = 1; skip = 1; break; /* ext: length then type byte */
            case 0xc8: lenbytes = 2; skip = 1; break;
            case 0xc9: lenbytes = 4; skip = 1; break;
            case 0xdc: lenbytes = 2; members = UINT64_MAX; break;
            case 0xdd: lenbytes = 4; members = UINT64_MAX; break;
            case 0xde: lenbytes = 2; members = UINT64_MAX; is_map = 1; break;
            case 0xdf: lenbytes = 4; members = UINT64_MAX; is_map = 1; break;
            default: return "invalid msgpack byte";
            }
        }
        if (lenbytes) {
            if (len - i < lenbytes)
                return "truncated message";
            uint64_t n = 0;
            for (size_t k = 0; k < lenbytes; k++)
                n = n << 8 | p[i + k];
            i += lenbytes;
            if (members == UINT64_MAX)
                members = n;
            else
                skip += n;
        }
        if (len - i < skip)
            return "truncated message";
        i += (size_t)skip;
        if (is_map)
            members *= 2;
        total += members;
        pending += members;
        if (pending > len - i) /* each pending value needs at least one byte */
            return "truncated message";
        if (total > max_values)
            return "too many values in one message";
        if (members) {
            if (depth == JP__MP_MAX_DEPTH)
                return "message nested too deeply";
            left[++depth] = members;
        }
    }
    if (i != len)
        return "trailing bytes after message";
    return NULL;
}
