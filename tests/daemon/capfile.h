/* Test support for the capture suites: capture files written straight from a known record
 * stream with the real capture writer (no daemon in between), the profile the engine gives for a
 * prefix of that stream, the block layout of a capture file as the format defines it, and one
 * complete run on a serving daemon (whose capture directory a suite then looks at). */
#ifndef JETTPROF_TESTS_DAEMON_CAPFILE_H
#define JETTPROF_TESTS_DAEMON_CAPFILE_H

#include <stddef.h>
#include <stdint.h>

/* Writes the jpt_stream (mode, seed, events) to a new file at path (0600) through
 * jp_capture_writer. Returns the number of records written (RUN_STOP included). Fails the test
 * on any error. */
uint64_t jpt_capfile_write(const char *path, uint32_t mode, uint32_t seed, uint64_t events);
/* The same in a given capture version (struct jp_capture_meta.format: 0 is the default). */
uint64_t jpt_capfile_write_format(const char *path, uint32_t mode, uint32_t seed,
                                  uint64_t events, uint32_t format);

/* The profile the engine renders for the first nrecs records of that stream, with the given
 * ending (JP_END_*: RUNNING for the snapshot that covers them) and outputs (JP_OUT_HUMAN or
 * JP_OUT_TOON), threshold and limit as the run asked. The text is malloc'ed. */
char *jpt_capfile_expected(uint32_t mode, uint32_t seed, uint64_t events, uint64_t nrecs,
                           uint32_t ending, uint32_t outputs, size_t *len);

/* The blocks of a capture file's bytes (either version): up to max of them, each its file
 * offset, header size, stored payload length (compressed or not) and record count. Returns how
 * many there are (walking stops at the first header that does not fit in the bytes). */
struct jpt_capfile_block {
    uint64_t offset;
    uint32_t header_len, payload_len, records;
};
uint32_t jpt_capfile_blocks(const uint8_t *file, size_t len, struct jpt_capfile_block *out,
                            uint32_t max);

/* One CPU run of the jpt_stream (seed, events) on the daemon serving at sock, through a 4096-slot
 * ring without a client capture: fails the test unless its profile is complete. */
void jpt_run_complete(const char *sock, uint32_t seed, uint64_t events);

/* The whole content of a file (malloc'ed), or a file written from bytes (0600, replaced). */
uint8_t *jpt_capfile_read(const char *path, size_t *len);
void jpt_capfile_put(const char *path, const uint8_t *bytes, size_t len);

#endif
