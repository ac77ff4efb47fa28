/* Test helpers for the suites that feed an engine by hand (tests/engine, tests/render, the
 * stacks of tests/export): build record streams, render, and check every TOON document with
 * the official decoder (tl_toon_decode, tests/lib/toon.h). */
#ifndef JETTPROF_TESTS_ENGINE_HELPERS_H
#define JETTPROF_TESTS_ENGINE_HELPERS_H

#include <stdint.h>

#include "engine/engine.h"
#include "render/report.h"
#include "tests/lib/toon.h" /* tl_toon_decode, the official decoder */

#define MiB (UINT64_C(1) << 20)

/* While a tap is set, every record the helpers feed (accepted or not) is also appended to it,
 * laid out as in the ring (each at a JP_SLOT_SIZE boundary, padding zeroed), so a test can
 * replay the same stream (the allocation-failure sweep replays it once per failure). */
struct t_tap {
    uint8_t *buf;
    uint32_t len, cap;
};
void t_tap_set(struct t_tap *tap);

/* Every helper asserts that the engine accepted the record (0). t_feed_raw returns the code. */
int t_feed_raw(struct jp_engine *e, const void *rec, uint32_t len, const char **why);
void t_start(struct jp_engine *e, uint32_t mode, uint32_t rate, uint32_t thr, uint32_t limit,
             uint64_t cpu_budget, uint64_t retention_budget);
void t_source(struct jp_engine *e, uint32_t id, uint32_t origin, const char *path);
void t_frame(struct jp_engine *e, uint32_t id, uint32_t source, const char *ns, const char *fn,
             uint32_t decl_start, uint32_t decl_end, uint32_t line, uint32_t kind);
void t_node(struct jp_engine *e, uint32_t id, uint32_t parent, uint32_t frame);
void t_sample(struct jp_engine *e, uint32_t state, uint32_t node, uint32_t line, uint32_t col);
void t_alloc(struct jp_engine *e, uint32_t node, uint64_t id, uint64_t size);
void t_resize(struct jp_engine *e, uint32_t node, uint64_t id, uint64_t old_size,
              uint64_t new_size);
void t_free(struct jp_engine *e, uint32_t node, uint64_t id, uint64_t old_size);
void t_counters(struct jp_engine *e, uint64_t requested, uint64_t coalesced, uint64_t dropped,
                uint64_t waiting, uint64_t runtime, uint64_t lost);
void t_excerpt(struct jp_engine *e, uint32_t source, uint32_t line, uint32_t col, uint32_t flags,
               const char *text);
/* RUN_STOP with the record count the helpers have fed so far (+ delta, to fake a loss). */
void t_stop(struct jp_engine *e, uint32_t term, uint64_t wall_ns, uint64_t cpu_ns,
            int64_t count_delta);
uint64_t t_records_fed(void);

/* A fresh engine (asserted). */
struct jp_engine *t_engine(void);
/* A CPU run (threshold 0) with one function, main in src/s.jett, and one jett sample at its
 * statement 2:1: a hot line, so CPU_HIGH_SELF applies when nothing is partial. No RUN_STOP. */
void t_simple_cpu(struct jp_engine *e);
/* The stream of the golden CPU files (tests/render/golden/README.md, cpu.*): the program's
 * definitions (source 1, frames 1-4, nodes 1-7), then its samples and counters. */
void t_golden_cpu_program(struct jp_engine *e);
void t_golden_cpu_samples(struct jp_engine *e);

/* Renders with the run's threshold/limit and the given ending; both outputs. The TOON text is
 * checked by the official decoder, *json receives its JSON. Free the three with free(). */
void t_render(struct jp_engine *e, uint32_t ending, char **toon, char **human, char **json,
              uint32_t *status);
void t_render_opts(struct jp_engine *e, const struct jp_report_opts *o, char **toon,
                   char **human, char **json, uint32_t *status);

/* The default human text (not verbose) carries every total of the TOON document whose JSON is
 * json, each in render/human.c's words, and has no raw totals block. */
void t_human_has_totals(const char *human, const char *json);

/* Value at a dotted path ("profile.totals.requested_ticks", "profile.bottlenecks.0.rank") in
 * a JSON text: strings unquoted, everything else as its raw JSON text; NULL when absent.
 * malloc'ed. */
char *t_json_get(const char *json, const char *path);
/* Number of elements of the array at path, -1 when it is not an array. */
int t_json_len(const char *json, const char *path);

#define J_EQ(json, path, want)                                                                   \
    do {                                                                                          \
        char *got_ = t_json_get((json), (path));                                                  \
        cr_assert(got_ != NULL, "%s missing", (path));                                            \
        cr_assert_str_eq(got_, (want), "%s", (path));                                             \
        free(got_);                                                                               \
    } while (0)

#endif
