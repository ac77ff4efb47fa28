/* Exports of one run's profile for the usual profile tools: folded stacks, pprof, speedscope
 * and an SVG flame graph; and the diff of two runs. Everything here reads a built report and
 * the engine's read-only view it points to (render/report.h, engine/view.h): the
 * figures are the engine's aggregates, never a second aggregation, so an export's totals are
 * the report's totals by construction.
 *
 * Stacks and values:
 *   CPU     one stack per call chain, valued by the jett samples whose leaf it is (derived from
 *           the engine's chain counts, export_stacks.c); unit: samples.
 *   memory  one stack per creation chain, valued by --value: alloc_bytes (default; initial and
 *           growth bytes), alloc_count, retained_bytes (live at the end), peak_bytes (live at
 *           the global peak), retained_count (allocations live at the end); the last three
 *           only while live tracking is exact.
 *   Figures of the run's totals that no chain holds (a stack the budget refused to keep, an
 *   event without a stack) become one stack of the single frame `<unattributed>`, so the
 *   stacks always add up to the report's total for the value.
 * Frames are `namespace.function` (the bare function in the `<root>` namespace), with the
 * source's relative logical path where it is known: never an absolute path, never a value.
 * Every export is byte-deterministic: the same capture gives the same bytes.
 */
#ifndef JETTPROF_RENDER_EXPORT_H
#define JETTPROF_RENDER_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/control.h" /* JP_EXPORT_FORMATS: the formats' one list */
#include "render/report.h"

/* What a stack is valued by: X(NAME, "word", mode, "unit"). DEFAULT picks the mode's first. */
#define JP_EXPORT_VALUES(X)                                                                       \
    X(SAMPLES, "samples", JP_MODE_CPU, "samples")                                                 \
    X(ALLOC_BYTES, "alloc_bytes", JP_MODE_MEMORY, "bytes")                                        \
    X(ALLOC_COUNT, "alloc_count", JP_MODE_MEMORY, "allocations")                                  \
    X(RETAINED_BYTES, "retained_bytes", JP_MODE_MEMORY, "bytes")                                  \
    X(PEAK_BYTES, "peak_bytes", JP_MODE_MEMORY, "bytes")                                          \
    X(RETAINED_COUNT, "retained_count", JP_MODE_MEMORY, "allocations")                           \
    X(LIVE_BYTES, "live_bytes", JP_MODE_MEMORY, "bytes")
enum {
#define JP_X(n, w, m, u) JP_XVAL_##n,
    JP_EXPORT_VALUES(JP_X)
#undef JP_X
    JP_XVAL_COUNT,
    JP_XVAL_DEFAULT = JP_XVAL_COUNT
};

/* The word of a format or value (NULL when out of range), and the reverse: 0, or -EINVAL
 * for a word that names none. */
const char *jp_export_format_name(uint32_t format);
int jp_export_format_parse(const char *word, uint32_t *format);
const char *jp_export_value_name(uint32_t value);
int jp_export_value_parse(const char *word, uint32_t *value);

/* A run's counts at one cut (docs/READINGS.md #21, windows): per creation chain, CPU samples,
 * or memory allocations and bytes, and the run's totals of them. An export given a base is
 * the window since that cut: every counted value (samples, alloc_count, alloc_bytes) less the
 * base's, so the windows between consecutive cuts add up to the run's; level values (live and
 * retained bytes and counts) stay what they are at the export, the window's end. It holds
 * 8 (CPU) or 16 (memory) bytes per chain of the run. */
struct jp_export_base {
    uint32_t nchains, cap;
    uint64_t *v[2];     /* [0] samples or alloc_count, [1] alloc_bytes; per chain */
    uint64_t total[2];
};
/* The counts of r's run now into b (grown as the run's chains grew): 0 or -ENOMEM (b as it
 * was). */
int jp_export_base_take(struct jp_export_base *b, const struct jp_report *r);
void jp_export_base_free(struct jp_export_base *b);

/* What a pprof profile carries (JP_PPROF_*): everything, or for a receiver that sums
 * every profile with a duration (Parca) the counted types and the in-use ones apart. */
#define JP_PPROF_ALL 0u
#define JP_PPROF_COUNTS 1u /* memory: alloc_objects and alloc_space only */
#define JP_PPROF_INUSE 2u  /* memory: inuse_objects and inuse_space only, duration 0 */

struct jp_export_opts {
    uint32_t size;   /* sizeof(struct jp_export_opts) */
    uint32_t format; /* JP_EXPORT_* */
    uint32_t value;  /* JP_XVAL_*, or JP_XVAL_DEFAULT */
    uint64_t max_bytes; /* 0: no cap; else the most bytes the export may have, and the most
                         * its writer holds while building it (pprof: its packed message too) */
    const struct jp_export_base *base; /* NULL: the run so far; else the window since base */
    /* pprof only: */
    int64_t time_nanos;     /* 0: none; else the profile's time_nanos (wall clock) */
    int64_t duration_nanos; /* with time_nanos: its duration_nanos (else the run's wall time) */
    uint32_t pprof_types;   /* JP_PPROF_* */
    uint32_t max_samples;   /* 0: no cap; else the smallest samples past it are merged into
                             * one sample of the single frame `<cut>` (the sums stay) */
    uint64_t max_raw_bytes; /* 0: no cap; else samples are merged so the message, before
                             * gzip, has at most this many bytes */
    uint64_t *cut;          /* NULL, or where the count of samples merged is added */
};

/* Writes the export of a built report. *out is malloc'ed (NUL-terminated at *len for the
 * text formats; pprof is gzip bytes). 0; -EINVAL (bad opts, or a value of the other mode:
 * samples for a memory run, a memory value for a CPU run); -ENODATA (retained_bytes or
 * peak_bytes while the run's live figures are unavailable); -EFBIG (the export would pass
 * o->max_bytes: its writer stopped there and freed what it had); -ENOMEM (nothing to free). */
int jp_export_write(const struct jp_report *r, const struct jp_export_opts *o, char **out,
                    size_t *len);

/* ---- diff (render/export/diff.c) ---- */

/* Diff formats: X(NAME, "word") */
#define JP_DIFF_FORMATS(X)                                                                        \
    X(HUMAN, "human") X(TOON, "toon") X(FOLDED, "folded") X(SVG, "svg") X(HTML, "html")
enum {
#define JP_X(n, w) JP_DIFF_##n,
    JP_DIFF_FORMATS(JP_X)
#undef JP_X
    JP_DIFF_FORMAT_COUNT
};
int jp_diff_format_parse(const char *word, uint32_t *format);

/* The change from run `base` to run `next`, per function (CPU: inclusive samples) or site
 * (memory: by value, JP_XVAL_DEFAULT for attributed allocated bytes; alloc_count, live_bytes,
 * retained_bytes or peak_bytes), each as a share of its own run's total of it so runs of
 * different length compare; ranked by the absolute change of share. Either run may be a
 * snapshot (a point of a run): live_bytes is then what was live at that point. 0; -EINVAL
 * (bad format, a value of the other mode, retained_count), -EDOM (the runs are of different
 * modes), -ENODATA (a live value while a run's live figures are unavailable), -ENOMEM
 * (nothing to free). */
int jp_diff_write(const struct jp_report *base, const struct jp_report *next, uint32_t format,
                  uint32_t value, char **out, size_t *len);

#endif
