/* Test helpers for the agent suites (prefix ta_): read back what a local run
 * (jp_agent_start_local) pushed, through a consumer view of the same memfd, exactly as the
 * daemon would see it. */
#ifndef JETTPROF_TESTS_AGENT_STREAM_H
#define JETTPROF_TESTS_AGENT_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"

struct rec {
    uint16_t type, size;
    size_t off; /* of the copy in stream.buf */
};

struct stream {
    struct jp_ring ring; /* consumer view */
    uint8_t *buf;
    size_t len, cap;
    struct rec *recs;
    size_t n, rcap;
};

/* Maps a consumer view of the run's ring (asserts). */
void ta_stream_open(struct stream *s, jettprof_run *run);
/* Copies every committed record out (PAD skipped), validating each with jp_rec_validate.
 * Returns how many were added. Safe to call from a consumer thread while producers run. */
size_t ta_stream_drain(struct stream *s);
/* The same for at most one record (and the PAD before it): a slow consumer. */
size_t ta_stream_drain_one(struct stream *s);
void ta_stream_free(struct stream *s);
/* Count of records of a type; the i-th record of a type (asserts it exists; the pointer is
 * valid until the next drain). ta_rec_at: the i-th record of the stream. */
const void *ta_rec_at(const struct stream *s, size_t i);
size_t ta_stream_count(const struct stream *s, uint16_t type);
const void *ta_stream_nth(const struct stream *s, uint16_t type, size_t i);
/* The last record of a type (the final COUNTERS: earlier ones are mid-run snapshots). */
const void *ta_stream_last(const struct stream *s, uint16_t type);

/* A local run (jp_agent_start_local, no timer) of ta_config(mode), with s open on its ring
 * (asserts). */
jettprof_run *ta_local_run(uint32_t mode, struct stream *s);
/* The node the thread's next allocation is charged to: one jettprof_alloc, read back from the
 * ring (drains s). */
uint32_t ta_node_now(jettprof_thread *t, struct stream *s);
/* A config with both modes' capabilities and small, valid values. */
struct jettprof_config ta_config(uint32_t mode);
/* Interns one project source and a function frame in it. */
uint32_t ta_frame(jettprof_run *run, const char *ns, const char *fn, uint32_t decl_line);

#endif
