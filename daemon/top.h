/* `jettprofd top`'s frames and their drawing (top_view.c), and the client that asks for them
 * and keeps the terminal (top.c). */
#ifndef JETTPROF_DAEMON_TOP_H
#define JETTPROF_DAEMON_TOP_H

#include <stdint.h>

#include "common/buf.h"
#include "jpd.h"

/* A frame kept: its figures and rows, owned. */
struct row {
    char *name, *path;
    size_t name_len, path_len;
    uint32_t line;
    uint64_t v[3];
    int64_t d[3];    /* change since the frame before (CPU self, memory live and allocated) */
    int known;       /* the frame before had this row: d is the change */
};
struct frame {
    uint64_t run_id, elapsed_ns, records, fill, slots, lost, violations, stretch_ns;
    uint32_t mode;
    char program[JPD_PROGRAM_MAX];
    uint64_t figures[JP_CTL_MAX_TOP_FIGURES];
    uint32_t nfigures;
    uint64_t *points;
    uint32_t npoints;
    struct row *rows;
    uint32_t nrows;
};

struct view {
    int tty;            /* drawing in place */
    int width, height;
    uint32_t interval_ms;
    int sort;
    int paused;
    const struct frame *table; /* what the table shows (frozen while paused) */
};

/* The frame of a TOP_FRAME in *f, each row's change since prev (NULL: the first): 0 or
 * -ENOMEM (f then holds what it took; free it). */
int jpd_top_frame_take(const struct jp_ctl_msg *m, const struct frame *prev, struct frame *f);
/* A deep copy of f in *out (the table a pause keeps): 0 or -ENOMEM (*out empty). */
int jpd_top_frame_copy(const struct frame *f, struct frame *out);
void jpd_top_frame_free(struct frame *f);
/* Appends frame f (prev: the one before, or NULL) as vw draws it: the heading, the strip and
 * the table (vw->table's rows while paused). ended: say the run has ended. */
void jpd_top_draw(struct jp_buf *b, const struct frame *f, const struct frame *prev,
                  const struct view *vw, int ended);
/* x rounded to the nearest integer, 0 for x <= 0. */
uint64_t jpd_top_round(double x);

#endif
