/* `jettprofd top`'s frames (taken from TOP_FRAME, each row's change since the frame before)
 * and how one is drawn: the heading, the timeline's strip and the sorted table, cut to the
 * view's width. Every text from the daemon goes through the one terminal-safe rule
 * (common/text.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "render/report.h"
#include "top.h"
void jpd_top_frame_free(struct frame *f)
{
    for (uint32_t i = 0; i < f->nrows; i++) {
        free(f->rows[i].name);
        free(f->rows[i].path);
    }
    free(f->rows);
    free(f->points);
    memset(f, 0, sizeof *f);
}

uint64_t jpd_top_round(double x)
{
    return x <= 0 ? 0 : (uint64_t)(x + 0.5);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static int same_row(const struct row *a, const struct row *b)
{
    return a->line == b->line && a->name_len == b->name_len && a->path_len == b->path_len &&
           !memcmp(a->name, b->name, a->name_len) && !memcmp(a->path, b->path, a->path_len);
}

/* The frame of a TOP_FRAME, with each row's change since prev (NULL: the first). 0 or
 * -ENOMEM. */
int jpd_top_frame_take(const struct jp_ctl_msg *m, const struct frame *prev, struct frame *f)
{
    const __typeof__(m->u.top_frame) *t = &m->u.top_frame;
    memset(f, 0, sizeof *f);
    f->run_id = t->run_id;
    f->mode = t->mode;
    f->elapsed_ns = t->elapsed_ns;
    f->records = t->records;
    f->fill = t->fill;
    f->slots = t->slots;
    f->lost = t->lost;
    f->violations = t->violations;
    f->stretch_ns = t->stretch_ns;
    size_t pl = t->program_len < JPD_PROGRAM_MAX - 1 ? t->program_len : JPD_PROGRAM_MAX - 1;
    memcpy(f->program, t->program, pl);
    f->nfigures = t->nfigures;
    memcpy(f->figures, t->figures, (size_t)t->nfigures * sizeof t->figures[0]);
    f->points = malloc((t->npoints ? t->npoints : 1) * sizeof *f->points);
    f->rows = calloc(t->nrows ? t->nrows : 1, sizeof *f->rows);
    if (!f->points || !f->rows)
        return -ENOMEM;
    memcpy(f->points, t->timeline, (size_t)t->npoints * sizeof *f->points);
    f->npoints = t->npoints;
    for (uint32_t i = 0; i < t->nrows; i++) {
        const struct jp_ctl_top_row *w = &t->rows[i];
        struct row *r = &f->rows[f->nrows];
        r->name = dup_bytes(w->name, w->name_len);
        r->path = dup_bytes(w->path, w->path_len);
        f->nrows++;
        if (!r->name || !r->path)
            return -ENOMEM;
        r->name_len = w->name_len;
        r->path_len = w->path_len;
        r->line = w->line;
        memcpy(r->v, w->v, sizeof r->v);
        for (uint32_t j = 0; prev && j < prev->nrows; j++)
            if (same_row(r, &prev->rows[j])) {
                for (int k = 0; k < 3; k++)
                    r->d[k] = (int64_t)(r->v[k] - prev->rows[j].v[k]);
                r->known = 1;
                break;
            }
    }
    return 0;
}

/* A deep copy of f in *out (the table a pause keeps): 0 or -ENOMEM (*out empty). */
int jpd_top_frame_copy(const struct frame *f, struct frame *out)
{
    *out = *f;
    out->points = NULL;
    out->npoints = 0;
    out->rows = calloc(f->nrows ? f->nrows : 1, sizeof *out->rows);
    out->nrows = 0;
    if (!out->rows)
        return -ENOMEM;
    for (uint32_t i = 0; i < f->nrows; i++) {
        struct row *r = &out->rows[out->nrows++];
        *r = f->rows[i];
        r->name = dup_bytes(f->rows[i].name, f->rows[i].name_len);
        r->path = dup_bytes(f->rows[i].path, f->rows[i].path_len);
        if (!r->name || !r->path) {
            jpd_top_frame_free(out);
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---- the view ---- */

struct sort {
    const char *name;
    int value;  /* index into v (or d) */
    int change; /* by the change in the last interval */
};
/* CPU: self in the interval, self in the run, inclusive in the run. Memory: live now, its
 * change, allocated in the interval, allocations, allocated in the run. */
static const struct sort cpu_sorts[] = {
    {"self in the interval", 0, 1}, {"self in the run", 0, 0}, {"inclusive in the run", 1, 0}};
static const struct sort mem_sorts[] = {{"live now", 0, 0},
                                        {"change of live", 0, 1},
                                        {"allocated in the interval", 1, 1},
                                        {"allocations", 2, 0},
                                        {"allocated in the run", 1, 0}};



static const struct sort *sort_of(uint32_t mode, uint32_t *n)
{
    *n = mode == JP_MODE_CPU ? 3u : 5u;
    return mode == JP_MODE_CPU ? cpu_sorts : mem_sorts;
}

static const struct sort *cur_sort;

static int64_t sort_key(const struct row *r)
{
    if (cur_sort->change)
        return r->known ? r->d[cur_sort->value] : INT64_MIN;
    return r->v[cur_sort->value] > INT64_MAX ? INT64_MAX : (int64_t)r->v[cur_sort->value];
}

static int by_sort(const void *a, const void *b)
{
    const struct row *x = *(const struct row *const *)a, *y = *(const struct row *const *)b;
    int64_t p = sort_key(x), q = sort_key(y);
    if (p != q)
        return p > q ? -1 : 1;
    int c = memcmp(x->name, y->name, x->name_len < y->name_len ? x->name_len : y->name_len);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* A count with thousands separators. */
static void put_count(struct jp_buf *b, uint64_t n)
{
    char d[32];
    int len = snprintf(d, sizeof d, "%" PRIu64, n);
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0)
            jp_buf_put(b, ",", 1);
        jp_buf_put(b, d + i, 1);
    }
}

static void put_signed_bytes(struct jp_buf *b, int64_t d)
{
    if (d == 0) {
        JP_BUF_LIT(b, "0 B");
        return;
    }
    jp_buf_put(b, d > 0 ? "+" : "-", 1);
    jp_report_bytes(b, d > 0 ? (uint64_t)d : (uint64_t)0 - (uint64_t)d);
}

static void put_pct(struct jp_buf *b, uint64_t part, uint64_t whole)
{
    if (!whole) {
        JP_BUF_LIT(b, "-");
        return;
    }
    uint64_t t = (part * 1000u + whole / 2u) / whole; /* tenths of a percent */
    jp_buf_printf(b, "%" PRIu64 ".%" PRIu64 "%%", t / 10u, t % 10u);
}

/* Appends s padded with spaces to w columns (right-aligned when right), counting a UTF-8
 * sequence as one column. */
static size_t columns(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0u) != 0x80u;
    return c;
}

static void put_cell(struct jp_buf *b, const char *s, size_t n, size_t w, int right)
{
    size_t c = columns(s, n);
    if (right)
        for (; c < w; c++)
            jp_buf_put(b, " ", 1);
    jp_buf_put(b, s, n);
    if (!right)
        for (; c < w; c++)
            jp_buf_put(b, " ", 1);
}

/* One cell built with f, right-aligned in w columns, then two spaces. */
#define CELL(b, w, ...)                                                                           \
    do {                                                                                          \
        struct jp_buf c_ = {0};                                                                   \
        __VA_ARGS__;                                                                              \
        put_cell((b), c_.p ? c_.p : "", c_.len, (w), 1);                                          \
        JP_BUF_LIT((b), "  ");                                                                    \
        jp_buf_free(&c_);                                                                         \
    } while (0)

/* The timeline as a strip of at most w cells, each the largest of the points it covers, then
 * its scale: the top cell's figure (memory: bytes live; CPU: samples a second). */
static void put_strip(struct jp_buf *b, const struct frame *f, size_t w)
{
    static const char *const bars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    if (!f->npoints || !w) {
        JP_BUF_LIT(b, "(no points yet)");
        return;
    }
    uint64_t most = 0;
    for (uint32_t i = 0; i < f->npoints; i++)
        most = f->points[i] > most ? f->points[i] : most;
    JP_BUF_LIT(b, "(top ");
    if (f->mode == JP_MODE_CPU) {
        put_count(b, f->stretch_ns ? jpd_top_round((double)most * 1e9 / (double)f->stretch_ns) : most);
        JP_BUF_LIT(b, "/s");
    } else {
        jp_report_bytes(b, most);
    }
    jp_buf_printf(b, ", %.2f s a point) ", (double)f->stretch_ns / 1e9);
    size_t cells = f->npoints < w ? f->npoints : w;
    uint64_t top = 0;
    for (uint32_t i = 0; i < f->npoints; i++)
        top = f->points[i] > top ? f->points[i] : top;
    for (size_t c = 0; c < cells; c++) {
        uint64_t m = 0;
        size_t from = c * f->npoints / cells, to = (c + 1) * f->npoints / cells;
        for (size_t i = from; i < to; i++)
            m = f->points[i] > m ? f->points[i] : m;
        size_t level = top ? (size_t)((m * 7u + top - 1u) / top) : 0;
        jp_buf_puts(b, bars[level > 7 ? 7 : level]);
    }
}

/* Ends a line: cut to the view's width (at a character's start) and, on a terminal, the rest
 * of the screen line cleared. from: where the line began in b. */
static void end_line(struct jp_buf *b, size_t from, const struct view *vw)
{
    if (vw->width > 0 && b->p) {
        size_t c = 0;
        for (size_t i = from; i < b->len; i++) {
            if (((unsigned char)b->p[i] & 0xc0u) != 0x80u && ++c > (size_t)vw->width) {
                b->len = i;
                b->p[i] = 0;
                break;
            }
        }
    }
    if (vw->tty)
        JP_BUF_LIT(b, "\x1b[K");
    jp_buf_put(b, "\n", 1);
}

void jpd_top_draw(struct jp_buf *b, const struct frame *f, const struct frame *prev,
                 const struct view *vw, int ended)
{
    size_t at = b->len;
    int cpu = f->mode == JP_MODE_CPU;
    double secs = (double)f->elapsed_ns / 1e9;
    jp_buf_printf(b, "jettprofd top - run %" PRIu64 " - ", f->run_id);
    jp_text_safe_str(b, f->program[0] ? f->program : "(program not known yet)");
    jp_buf_printf(b, " - %s - %.1f s into the run", cpu ? "cpu" : "memory", secs);
    end_line(b, at, vw);
    at = b->len;
    JP_BUF_LIT(b, "records ");
    put_count(b, f->records);
    if (prev && f->elapsed_ns > prev->elapsed_ns) {
        double rate = (double)(f->records - prev->records) * 1e9 /
                      (double)(f->elapsed_ns - prev->elapsed_ns);
        JP_BUF_LIT(b, " (");
        put_count(b, jpd_top_round(rate));
        JP_BUF_LIT(b, "/s)");
    }
    JP_BUF_LIT(b, " - ring ");
    put_pct(b, f->fill, f->slots);
    JP_BUF_LIT(b, " full - lost ");
    put_count(b, f->lost);
    JP_BUF_LIT(b, " - violations ");
    put_count(b, f->violations);
    end_line(b, at, vw);
    at = b->len;
    if (cpu) {
        JP_BUF_LIT(b, "samples ");
        put_count(b, f->nfigures ? f->figures[0] : 0);
        if (prev && prev->nfigures && f->elapsed_ns > prev->elapsed_ns) {
            JP_BUF_LIT(b, " (");
            put_count(b, jpd_top_round((double)(f->figures[0] - prev->figures[0]) * 1e9 /
                                           (double)(f->elapsed_ns - prev->elapsed_ns)));
            JP_BUF_LIT(b, "/s)");
        }
    } else if (f->nfigures >= 4) {
        JP_BUF_LIT(b, "live ");
        jp_report_bytes(b, f->figures[0]);
        JP_BUF_LIT(b, " (peak ");
        jp_report_bytes(b, f->figures[1]);
        JP_BUF_LIT(b, ") - allocated ");
        jp_report_bytes(b, f->figures[2]);
        JP_BUF_LIT(b, " in ");
        put_count(b, f->figures[3]);
        JP_BUF_LIT(b, " allocations");
    }
    end_line(b, at, vw);
    at = b->len;
    jp_buf_puts(b, cpu ? "samples over time " : "live over time ");
    put_strip(b, f, vw->width > 70 ? (size_t)vw->width - 60u : vw->width ? 10u : 48u);
    end_line(b, at, vw);
    at = b->len;
    uint32_t nsorts;
    const struct sort *sorts = sort_of(f->mode, &nsorts);
    jp_buf_printf(b, "sorted by %s - every %.2g s%s", sorts[vw->sort % (int)nsorts].name,
                  vw->interval_ms / 1000.0, vw->paused ? " - PAUSED" : "");
    if (ended)
        JP_BUF_LIT(b, " - the run has ended");
    else if (vw->tty)
        JP_BUF_LIT(b, " - q quit, space pause, s sort, +/- interval");
    end_line(b, at, vw);
    at = b->len;
    end_line(b, at, vw);

    const struct frame *t = vw->table ? vw->table : f;
    at = b->len;
    if (cpu) {
        static const char *const h[] = {"SELF%INT", "SELF%RUN", "INCL%RUN", "SELF"};
        for (int i = 0; i < 4; i++) {
            put_cell(b, h[i], strlen(h[i]), 9, 1);
            JP_BUF_LIT(b, "  ");
        }
        JP_BUF_LIT(b, "FUNCTION");
    } else {
        static const char *const h[] = {"LIVE NOW", "CHANGE", "ALLOC/INT", "ALLOCS", "ALLOCATED"};
        for (int i = 0; i < 5; i++) {
            put_cell(b, h[i], strlen(h[i]), 10, 1);
            JP_BUF_LIT(b, "  ");
        }
        JP_BUF_LIT(b, "SITE");
    }
    end_line(b, at, vw);
    const struct row **order = calloc(t->nrows ? t->nrows : 1, sizeof *order);
    if (!order) {
        b->failed = 1;
        return;
    }
    for (uint32_t i = 0; i < t->nrows; i++)
        order[i] = &t->rows[i];
    cur_sort = &sorts[vw->sort % (int)nsorts];
    qsort(order, t->nrows, sizeof *order, by_sort);
    int room = vw->tty && vw->height > 0 ? vw->height - 8 : 20;
    uint64_t all = t->nfigures ? t->figures[0] : 0;
    uint64_t all_d = 0;
    if (cpu && t == f && prev && prev->nfigures)
        all_d = f->figures[0] - prev->figures[0];
    for (uint32_t i = 0; i < t->nrows && (int)i < room; i++) {
        const struct row *r = order[i];
        at = b->len;
        if (cpu) {
            CELL(b, 9, if (r->known && all_d) put_pct(&c_, (uint64_t)r->d[0], all_d);
                 else JP_BUF_LIT(&c_, "-"));
            CELL(b, 9, put_pct(&c_, r->v[0], all));
            CELL(b, 9, put_pct(&c_, r->v[1], all));
            CELL(b, 9, put_count(&c_, r->v[0]));
        } else {
            CELL(b, 10, jp_report_bytes(&c_, r->v[0]));
            CELL(b, 10, if (r->known) put_signed_bytes(&c_, r->d[0]); else JP_BUF_LIT(&c_, "-"));
            CELL(b, 10, if (r->known) jp_report_bytes(&c_, (uint64_t)r->d[1]);
                 else JP_BUF_LIT(&c_, "-"));
            CELL(b, 10, put_count(&c_, r->v[2]));
            CELL(b, 10, jp_report_bytes(&c_, r->v[1]));
        }
        jp_text_safe(b, r->name, r->name_len);
        if (r->path_len) {
            JP_BUF_LIT(b, "  ");
            jp_text_safe(b, r->path, r->path_len);
            if (r->line)
                jp_buf_printf(b, ":%" PRIu32, r->line);
        }
        end_line(b, at, vw);
    }
    if (!t->nrows) {
        at = b->len;
        JP_BUF_LIT(b, "(nothing attributed yet)");
        end_line(b, at, vw);
    }
    free(order);
}
