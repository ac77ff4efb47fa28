/* Private to render/export/: the stacks every format writes (export_stacks.c) and the frame
 * facts they print. Each format is one file: folded.c, pprof.c, speedscope.c, svg.c; diff.c
 * compares two runs. */
#ifndef JETTPROF_RENDER_EXPORT_INTERNAL_H
#define JETTPROF_RENDER_EXPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "export.h"
#include "render/writers.h" /* jp_wr_qualified: one way to name a frame */

/* The chain index of the one stack holding what no chain holds (export.h) */
#define XSTACK_UNATTRIBUTED UINT32_MAX
#define XFRAME_UNATTRIBUTED "<unattributed>"

struct xstack {
    uint32_t chain; /* index into view->chains, or XSTACK_UNATTRIBUTED */
    uint64_t value;
};

/* One run's stacks for one value, in the lexical order of their frame sequences (READINGS.md #5:
 * element by element with the function keys, a shorter prefix first), the unattributed stack
 * last. Only stacks with a non-zero value are kept. total is the report's total for the value
 * (the sum of the stacks' values). */
struct xprof {
    const struct jp_report *r;
    const struct jp_engine_view *v;
    uint32_t value;      /* JP_XVAL_*, resolved from the default */
    struct xstack *st;
    uint32_t n;
    uint64_t total;
};

/* 0; -EINVAL (a value of the other mode), -ENODATA (live figures unavailable), -ENOMEM. */
int xprof_build(const struct jp_report *r, uint32_t value, struct xprof *p);
void xprof_free(struct xprof *p);

/* A stack's frames, root first, into seq[JP_MAX_DEPTH]: function indices, v->nfuncs standing
 * for <unattributed>; returns how many. */
uint32_t xstack_frames(const struct xprof *p, const struct xstack *s, uint32_t *seq);
/* The frame's source path (relative, as the report prints it), or NULL when unavailable. */
const char *xframe_path(const struct jp_engine_view *v, const struct jp_func *f, uint16_t *len);
/* The value's unit word ("samples", "bytes", "allocations"). */
const char *xvalue_unit(uint32_t value);
/* One line naming the run: "CPU profile, complete, 1234 samples" (mode, status with reason,
 * the total and unit). */
void xprof_title(struct jp_buf *b, const struct xprof *p);

/* The flame graph's boxes: one per (stack prefix) node of the stacks' tree, in preorder,
 * siblings in the stacks' order; start and value in the exported unit, depth 1 at the root.
 * func: a function index, or v->nfuncs for <unattributed>. */
struct xsvg_node {
    uint32_t func, depth;
    uint32_t parent; /* node index + 1, 0 for a root */
    uint64_t start, value;
};
/* 0 with *nodes malloc'ed (NULL when there is none), or -ENOMEM. */
int xsvg_tree(const struct xprof *p, struct xsvg_node **nodes, uint32_t *n);
/* How the flame graph colours and describes each box; NULL members take the plain ones
 * (a warm colour per function name, the box's value and share). */
struct xsvg_style {
    void *ctx;
    uint32_t (*fill)(void *ctx, uint32_t node);                      /* 0xRRGGBB */
    void (*tip)(void *ctx, struct jp_buf *b, uint32_t node);        /* after the name */
    const char *subtitle; /* the second heading line, NULL: the run's totals */
};
/* The whole SVG document of nodes (from xsvg_tree on p). */
void xsvg_doc(struct jp_buf *b, const struct xprof *p, const struct xsvg_node *nodes,
              uint32_t n, const char *title, const struct xsvg_style *style);
/* A frame's name, escaped for XML text and attributes. */
void xsvg_name(struct jp_buf *b, const struct jp_engine_view *v, uint32_t func);

/* A stack's frames as folded text (no value, no newline); tmp is scratch. */
void xfolded_stack(struct jp_buf *b, struct jp_buf *tmp, const struct xprof *p,
                   const struct xstack *s);

/* The writers, each appending its document to b (which latches out of memory). */
void xwrite_folded(struct jp_buf *b, const struct xprof *p);
/* max_bytes: 0, or the cap on the packed message and on the gzip bytes (-EFBIG past it). */
int xwrite_pprof(const struct xprof *p, uint64_t max_bytes, char **out, size_t *len);
void xwrite_speedscope(struct jp_buf *b, const struct xprof *p);
void xwrite_svg(struct jp_buf *b, const struct xprof *p);

#endif
