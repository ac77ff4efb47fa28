/* Private to render/export/: the stacks every format writes (export_stacks.c) and the frame
 * facts they print. Each format is one file: folded.c, pprof.c, speedscope.c, svg.c; diff.c
 * compares two runs. Every name declared here carries jpx_ (JPX_ for constants); the jp_export_
 * and jp_diff_ names of export.h are what callers use. */
#ifndef JETTPROF_RENDER_EXPORT_INTERNAL_H
#define JETTPROF_RENDER_EXPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "export.h"
#include "render/writers.h" /* jp_wr_qualified: one way to name a frame */

/* The chain index of the one stack holding what no chain holds (export.h) */
#define JPX_STACK_UNATTRIBUTED UINT32_MAX
#define JPX_FRAME_UNATTRIBUTED "<unattributed>"
#define JPX_FRAME_CUT "<cut>" /* pprof: the samples a receiver's limit left out, merged */

struct jpx_stack {
    uint32_t chain; /* index into view->chains, or JPX_STACK_UNATTRIBUTED */
    uint64_t value;
};

/* One run's stacks for one value, in the lexical order of their frame sequences (READINGS.md #5:
 * element by element with the function keys, a shorter prefix first), the unattributed stack
 * last. Only stacks with a non-zero value are kept. total is the report's total for the value
 * (the sum of the stacks' values). */
struct jpx_prof {
    const struct jp_report *r;
    const struct jp_engine_view *v;
    uint32_t value;      /* JP_XVAL_*, resolved from the default */
    struct jpx_stack *st;
    uint32_t n;
    uint64_t total;
    const struct jp_export_base *base; /* a window's start (export.h), or NULL */
};

/* 0; -EINVAL (a value of the other mode), -ENODATA (live figures unavailable), -ENOMEM.
 * jpx_prof_since: the window since base (NULL: the run so far). */
int jpx_prof_build(const struct jp_report *r, uint32_t value, struct jpx_prof *p);
int jpx_prof_since(const struct jp_report *r, uint32_t value, const struct jp_export_base *base,
                   struct jpx_prof *p);
void jpx_prof_free(struct jpx_prof *p);

/* A stack's frames, root first, into seq[JP_MAX_DEPTH]: function indices, v->nfuncs standing
 * for <unattributed>; returns how many. */
uint32_t jpx_stack_frames(const struct jpx_prof *p, const struct jpx_stack *s, uint32_t *seq);
/* The frame's source path (relative, as the report prints it), or NULL when unavailable. */
const char *jpx_frame_path(const struct jp_engine_view *v, const struct jp_func *f, uint16_t *len);
/* The value's unit word ("samples", "bytes", "allocations"). */
const char *jpx_value_unit(uint32_t value);
/* One line naming the run: "CPU profile, complete, 1234 samples" (mode, status with reason,
 * the total and unit). */
void jpx_prof_title(struct jp_buf *b, const struct jpx_prof *p);

/* The flame graph's boxes: one per (stack prefix) node of the stacks' tree, in preorder,
 * siblings in the stacks' order; start and value in the exported unit, depth 1 at the root.
 * func: a function index, or v->nfuncs for <unattributed>. */
struct jpx_svg_node {
    uint32_t func, depth;
    uint32_t parent; /* node index + 1, 0 for a root */
    uint64_t start, value;
};
/* 0 with *nodes malloc'ed (NULL when there is none), or -ENOMEM. */
int jpx_svg_tree(const struct jpx_prof *p, struct jpx_svg_node **nodes, uint32_t *n);
/* How the flame graph colours and describes each box; NULL members take the plain ones
 * (a warm colour per function name, the box's value and share). */
struct jpx_svg_style {
    void *ctx;
    uint32_t (*fill)(void *ctx, uint32_t node);                      /* 0xRRGGBB */
    void (*tip)(void *ctx, struct jp_buf *b, uint32_t node);        /* after the name */
    const char *subtitle; /* the second heading line, NULL: the run's totals */
};
/* The whole SVG document of nodes (from jpx_svg_tree on p). */
void jpx_svg_doc(struct jp_buf *b, const struct jpx_prof *p, const struct jpx_svg_node *nodes,
                 uint32_t n, const char *title, const struct jpx_svg_style *style);
/* A frame's name, escaped for XML text and attributes. */
void jpx_svg_name(struct jp_buf *b, const struct jp_engine_view *v, uint32_t func);

/* A stack's frames as folded text (no value, no newline); tmp is scratch. */
void jpx_folded_stack(struct jp_buf *b, struct jp_buf *tmp, const struct jpx_prof *p,
                      const struct jpx_stack *s);

/* The writers, each appending its document to b (which latches out of memory). */
void jpx_write_folded(struct jp_buf *b, const struct jpx_prof *p);
/* max_bytes: 0, or the cap on the packed message and on the gzip bytes (-EFBIG past it). */
int jpx_write_pprof(const struct jpx_prof *p, const struct jp_export_opts *o, char **out,
                    size_t *len);
void jpx_write_speedscope(struct jp_buf *b, const struct jpx_prof *p);
void jpx_write_svg(struct jp_buf *b, const struct jpx_prof *p);
/* The HTML page (html.c); _diff: with a colour (0xRRGGBB) per flame node of p (jpx_svg_tree's
 * order) and the changes' HTML after the tables. */
void jpx_write_html(struct jp_buf *b, const struct jpx_prof *p);
void jpx_write_html_diff(struct jp_buf *b, const struct jpx_prof *p, const char *title,
                         const uint32_t *colour, uint32_t ncolour, const char *changes);
/* Text for HTML (text or a quoted attribute): made safe for a person (common/text.h), then
 * &, <, >, " and ' as references. */
void jpx_html_text(struct jp_buf *b, const char *s, size_t n);

#endif
