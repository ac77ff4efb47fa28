/* Internal to protocol/: a structural pre-check of untrusted msgpack bytes.
 *
 * msgpack-c allocates each container's members as soon as it reads the container's count, so a
 * 5-byte array header claiming 4 G members would make it ask for ~100 GiB. Running this first
 * bounds the allocation by the input: it returns NULL when `p[0..len)` is exactly one msgpack
 * value whose every container count and string/bin/ext length fits in the bytes that follow and
 * that holds at most max_values values in all, nested at most JP__MP_MAX_DEPTH containers
 * deep; otherwise a stable reason ("truncated message", "trailing bytes after message", "too
 * many values in one message", "message nested too deeply", "invalid msgpack byte").
 *
 * Why a depth limit: msgpack-c's unpacker keeps open containers on a fixed stack of
 * MSGPACK_EMBED_STACK_SIZE (32) entries and fails with a no-memory error past it, which a
 * consumer would misreport as the host being out of memory. No message of ours nests deeper
 * than 3 (a map of arrays of arrays). */
#ifndef JETTPROF_PROTOCOL_MPCHECK_H
#define JETTPROF_PROTOCOL_MPCHECK_H

#include <stddef.h>
#include <stdint.h>

#define JP__MP_MAX_DEPTH 16u

const char *jp__mp_check(const uint8_t *p, size_t len, uint32_t max_values);

#endif
