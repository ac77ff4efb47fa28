/* `jettprofd top`: a live view of one run, refreshed every interval.
 *
 * It keeps one connection to the daemon (a serving daemon's socket, or a private run's watch
 * socket with --pid) and asks it for a frame (TOP) once an interval. A frame has the run's
 * figures, its timeline and the rows with the most of any value; what changed in the last
 * interval (CPU share of the interval, memory change of live bytes and bytes allocated) is the
 * difference of two frames, worked out here. When the run ends the daemon sends its final
 * profile unasked: top prints it and says so.
 *
 * On a terminal it draws in place (the alternate screen, the cursor hidden, input unbuffered
 * for the keys) and gives the terminal back as it was on every way out: q, SIGINT, SIGTERM,
 * SIGHUP, the run's end, an error. With --batch, or when stdout is not a terminal, it writes
 * one plain frame per interval and no escape code. Every text that came from the daemon (the
 * program, names, paths, the final profile) goes through the one terminal-safe rule
 * (common/text.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/text.h"
#include "commands.h"
#include "jpd.h"
#include "render/report.h"
#include "server.h"
#include "util.h"

#define TOP_ROWS 300u         /* rows asked for: any sort's leaders are among them */
#define INTERVAL_MIN_MS 100u
#define INTERVAL_MAX_MS 60000u

/* The intervals + and - step through. */
static const uint32_t steps_ms[] = {100, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000};
#define NSTEPS (sizeof steps_ms / sizeof steps_ms[0])

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

static void frame_free(struct frame *f)
{
    for (uint32_t i = 0; i < f->nrows; i++) {
        free(f->rows[i].name);
        free(f->rows[i].path);
    }
    free(f->rows);
    free(f->points);
    memset(f, 0, sizeof *f);
}

static uint64_t round_u64(double x)
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
static int take_frame(const struct jp_ctl_msg *m, const struct frame *prev, struct frame *f)
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
static int frame_copy(const struct frame *f, struct frame *out)
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
            frame_free(out);
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---- the view ---- */

enum { SORT_A, SORT_B, SORT_C, SORT_D, SORT_E };
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

struct view {
    int tty;            /* drawing in place */
    int width, height;
    uint32_t interval_ms;
    int sort;
    int paused;
    const struct frame *table; /* what the table shows (frozen while paused) */
};

static const struct sort *sort_of(const struct view *vw, uint32_t mode, uint32_t *n)
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
        put_count(b, f->stretch_ns ? round_u64((double)most * 1e9 / (double)f->stretch_ns) : most);
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

static void draw(struct jp_buf *b, const struct frame *f, const struct frame *prev,
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
        put_count(b, round_u64(rate));
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
            put_count(b, round_u64((double)(f->figures[0] - prev->figures[0]) * 1e9 /
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
    const struct sort *sorts = sort_of(vw, f->mode, &nsorts);
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

/* ---- the terminal ---- */

static volatile sig_atomic_t got_signal, got_winch;
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int e = errno;
    if (sig == SIGWINCH)
        got_winch = 1;
    else
        got_signal = sig;
    if (sig_pipe[1] >= 0)
        (void)!write(sig_pipe[1], "", 1);
    errno = e;
}

static struct termios saved_tio;
static int tio_saved;

static void term_enter(struct view *vw)
{
    if (tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tio_saved = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    static const char enter[] = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
    (void)jpd_write_all(STDOUT_FILENO, enter, sizeof enter - 1);
    (void)vw;
}

static void term_leave(void)
{
    static const char leave[] = "\x1b[?25h\x1b[?1049l";
    (void)jpd_write_all(STDOUT_FILENO, leave, sizeof leave - 1);
    if (tio_saved)
        (void)tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
    tio_saved = 0;
}

static void term_size(struct view *vw)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        vw->width = ws.ws_col;
        vw->height = ws.ws_row;
    } else {
        vw->width = 120;
        vw->height = 40;
    }
}

/* ---- the connection ---- */

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* The next message on fd, waiting at most until deadline_ms (monotonic) while watching stdin
 * for keys and the signal pipe: 1 with *m, 0 when the wait ended first (a key, a signal or
 * the time), -EPIPE when the daemon closed, -EPROTO with *why. */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct conn {
    int fd;
    struct jp_ctl_decoder *dec;
};

static int next_message(struct conn *c, struct jp_ctl_msg *m, const char **why, int keys,
                        uint64_t deadline, int *key)
{
    *key = -1;
    for (;;) {
        int r = jp_ctl_decoder_next(c->dec, m, why);
        if (r != 0)
            return r < 0 ? -EPROTO : 1;
        uint64_t now = now_ms();
        if (now >= deadline || got_signal || got_winch)
            return 0;
        struct pollfd p[3] = {{.fd = c->fd, .events = POLLIN},
                              {.fd = sig_pipe[0], .events = POLLIN},
                              {.fd = keys ? STDIN_FILENO : -1, .events = POLLIN}};
        int n = poll(p, 3, (int)(deadline - now));
        if (n < 0 && errno != EINTR)
            return -errno;
        if (n <= 0)
            continue;
        if (p[1].revents) {
            char drain[64];
            (void)!read(sig_pipe[0], drain, sizeof drain);
        }
        if (p[2].revents & POLLIN) {
            unsigned char ch;
            if (read(STDIN_FILENO, &ch, 1) == 1) {
                *key = ch;
                return 0;
            }
        }
        if (p[0].revents) {
            uint8_t buf[65536];
            ssize_t got = read(c->fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return -EPIPE;
            if (jp_ctl_decoder_feed(c->dec, buf, (size_t)got) < 0) {
                *why = "the daemon's answer is too large";
                return -EPROTO;
            }
        }
    }
}

/* Prints text (the final profile) line by line through the terminal-safe rule. */
static void print_safe_lines(const char *s, size_t n)
{
    struct jp_buf b = {0};
    size_t from = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '\n') {
            if (i > from || i < n) {
                jp_text_safe(&b, s + from, i - from);
                if (i < n)
                    jp_buf_put(&b, "\n", 1);
            }
            from = i + 1;
        }
    if (b.p)
        (void)jpd_write_all(STDOUT_FILENO, b.p, b.len);
    jp_buf_free(&b);
}

struct top_args {
    const char *socket_path;
    uint64_t run_id;
    int have_run, have_pid;
    uint32_t pid;
    uint32_t interval_ms;
    int batch;
    uint64_t frames; /* 0: until the run ends or q */
};

static int run_top(const struct top_args *a, const char *where)
{
    struct view vw = {.interval_ms = a->interval_ms};
    vw.tty = !a->batch && isatty(STDOUT_FILENO);
    int keys = vw.tty && isatty(STDIN_FILENO);
    if (vw.tty)
        term_size(&vw);
    int fd = connect_to(where);
    if (fd < 0) {
        if (a->have_pid)
            fprintf(stderr, "jettprofd: top: no run of pid %u that you may watch (%s: %s)\n",
                    (unsigned)a->pid, where, strerror(-fd));
        else
            fprintf(stderr, "jettprofd: top: cannot reach the daemon at %s: %s\n", where,
                    strerror(-fd));
        return 1;
    }
    struct conn c = {.fd = fd};
    if (jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &c.dec) < 0 || pipe2(sig_pipe, O_CLOEXEC) < 0) {
        fprintf(stderr, "jettprofd: top: out of memory\n");
        close(fd);
        jp_ctl_decoder_free(c.dec);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (vw.tty)
        term_enter(&vw);

    struct frame cur = {0}, prev = {0}, frozen = {0};
    int have_cur = 0, have_prev = 0, rc = 0, quit = 0, ended = 0;
    uint64_t shown = 0;
    struct jp_buf err = {0}, final_text = {0};
    uint64_t next_ask = now_ms();
    int asked = 0;
    while (!quit) {
        if (!asked && now_ms() >= next_ask) {
            struct jp_ctl_msg q = {.type = JP_CTL_TOP};
            q.u.top.run_id = a->have_pid ? 0 : a->run_id;
            q.u.top.rows = TOP_ROWS;
            int r = jp_ctl_send(fd, &q, NULL, 0);
            if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
                jp_buf_printf(&err, "cannot ask the daemon: %s", strerror(-r));
                rc = 1;
                break;
            }
            asked = 1;
            next_ask = now_ms() + vw.interval_ms;
        }
        struct jp_ctl_msg m;
        const char *why = NULL;
        int key = -1;
        int r = next_message(&c, &m, &why, keys, asked ? now_ms() + 60000u : next_ask, &key);
        if (got_signal) {
            quit = 1;
            break;
        }
        int redraw = 0;
        if (got_winch) {
            got_winch = 0;
            term_size(&vw);
            redraw = have_cur;
        }
        if (key >= 0) {
            uint32_t i = 0;
            while (i + 1 < NSTEPS && steps_ms[i] < vw.interval_ms)
                i++;
            if (key == 'q' || key == 'Q')
                quit = 1;
            else if (key == ' ') {
                /* Paused, the table stays as it is while the header keeps running. */
                vw.paused = !vw.paused;
                frame_free(&frozen);
                vw.table = NULL;
                if (vw.paused && have_cur && frame_copy(&cur, &frozen) == 0)
                    vw.table = &frozen;
            } else if (key == 's' || key == 'S') {
                vw.sort++;
            } else if (key == '+') {
                vw.interval_ms = i + 1 < NSTEPS ? steps_ms[i + 1] : steps_ms[NSTEPS - 1];
            } else if (key == '-') {
                vw.interval_ms = i > 0 && steps_ms[i] >= vw.interval_ms ? steps_ms[i - 1]
                                                                         : steps_ms[0];
            }
            redraw = !quit;
        }
        if (r < 0) {
            if (r == -EPIPE)
                jp_buf_printf(&err, "the daemon closed the connection%s",
                              a->have_pid ? ": the run is gone" : "");
            else
                jp_buf_printf(&err, "malformed answer: %s", why ? why : strerror(-r));
            rc = 1;
            break;
        }
        if (r == 1) {
            if (m.type == JP_CTL_TOP_FRAME) {
                asked = 0;
                if (have_cur) {
                    frame_free(&prev);
                    prev = cur;
                    have_prev = 1;
                    memset(&cur, 0, sizeof cur);
                }
                if (take_frame(&m, have_prev ? &prev : NULL, &cur) < 0) {
                    JP_BUF_LIT(&err, "out of memory");
                    rc = 1;
                    break;
                }
                have_cur = 1;
                redraw = 1;
            } else if (m.type == JP_CTL_RESULT) {
                ended = 1;
                jp_buf_put(&final_text, m.u.result.human, m.u.result.human_len);
                break;
            } else if (m.type == JP_CTL_ERROR) {
                if (m.u.error.code == JP_CTLE_NO_SUCH_RUN && have_cur)
                    ended = 2; /* it ended between two frames */
                jp_buf_printf(&err, "%s: ", jp_ctl_error_name(m.u.error.code));
                jp_text_safe(&err, m.u.error.message, m.u.error.message_len);
                rc = ended ? 0 : 1;
                break;
            } else {
                jp_buf_printf(&err, "unexpected %s message", jp_ctl_type_name(m.type));
                rc = 1;
                break;
            }
        }
        if (redraw && have_cur) {
            struct jp_buf b = {0};
            if (vw.tty)
                JP_BUF_LIT(&b, "\x1b[H");
            else if (shown)
                JP_BUF_LIT(&b, "\n");
            draw(&b, &cur, have_prev ? &prev : NULL, &vw, 0);
            if (vw.tty)
                JP_BUF_LIT(&b, "\x1b[J");
            if (b.p && !b.failed)
                (void)jpd_write_all(STDOUT_FILENO, b.p, b.len);
            jp_buf_free(&b);
            if (r == 1 && m.type == JP_CTL_TOP_FRAME && ++shown == a->frames)
                quit = 1; /* --frames N: the N-th frame drawn */
        }
    }
    if (vw.tty)
        term_leave();
    if (ended == 1) {
        printf("jettprofd top: run %" PRIu64 " has ended; its final profile:\n\n",
               have_cur ? cur.run_id : a->run_id);
        fflush(stdout);
        print_safe_lines(final_text.p ? final_text.p : "", final_text.len);
    } else if (ended == 2) {
        printf("jettprofd top: run %" PRIu64 " has ended", cur.run_id);
        if (!a->have_pid)
            printf("; its final profile: jettprofd show %" PRIu64, cur.run_id);
        printf("\n");
    } else if (err.p) {
        fprintf(stderr, "jettprofd: top: %s\n", err.p);
    } else if (got_signal) {
        rc = 128 + got_signal;
    }
    jp_buf_free(&err);
    jp_buf_free(&final_text);
    frame_free(&cur);
    frame_free(&prev);
    frame_free(&frozen);
    jp_ctl_decoder_free(c.dec);
    close(fd);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    sig_pipe[0] = sig_pipe[1] = -1;
    return rc;
}

static int bad(const char *what, const char *arg)
{
    fprintf(stderr, "jettprofd: top: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "usage: jettprofd top [RUN_ID] [--socket PATH | --pid PID] "
                    "[--interval SECONDS] [--batch] [--frames N]\n");
    return 2;
}

static int list_answer(const struct jp_ctl_msg *a, void *arg)
{
    (void)arg;
    if (a->type != JP_CTL_STATUS_REPLY)
        return -1;
    printf("Name a run: jettprofd top RUN_ID. The daemon's runs in flight that you may see:\n\n");
    fflush(stdout);
    print_safe_lines(a->u.status_reply.text, a->u.status_reply.text_len);
    return 0;
}

int jpd_cmd_top(int argc, char **argv)
{
    struct top_args a = {.interval_ms = 1000};
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--batch")) {
            a.batch = 1;
        } else if (!strcmp(s, "--socket") || !strcmp(s, "--pid") || !strcmp(s, "--interval") ||
                   !strcmp(s, "--frames")) {
            if (i + 1 >= argc)
                return bad("missing value for", s);
            const char *v = argv[++i];
            uint64_t n;
            if (!strcmp(s, "--socket")) {
                a.socket_path = v;
            } else if (!strcmp(s, "--pid")) {
                if (jpd_parse_u64(v, 1, INT32_MAX, &n) < 0)
                    return bad("--pid must be a process id, not", v);
                a.pid = (uint32_t)n;
                a.have_pid = 1;
            } else if (!strcmp(s, "--frames")) {
                if (jpd_parse_u64(v, 1, UINT32_MAX, &n) < 0)
                    return bad("--frames must be a positive integer, not", v);
                a.frames = n;
            } else {
                char *end = NULL;
                errno = 0;
                double sec = strtod(v, &end);
                if (errno || end == v || *end || !(sec >= INTERVAL_MIN_MS / 1000.0) ||
                    sec > INTERVAL_MAX_MS / 1000.0)
                    return bad("--interval must be seconds from 0.1 to 60, not", v);
                a.interval_ms = (uint32_t)round_u64(sec * 1000.0);
            }
        } else if (s[0] == '-') {
            return bad("unknown option", s);
        } else if (a.have_run) {
            return bad("more than one RUN_ID given", s);
        } else {
            if (jpd_parse_u64(s, 1, UINT64_MAX, &a.run_id) < 0)
                return bad("RUN_ID must be a positive integer, not", s);
            a.have_run = 1;
        }
    }
    if (a.have_pid && (a.socket_path || a.have_run))
        return bad("--pid watches a private run: it takes neither --socket nor a RUN_ID", NULL);
    if (a.have_pid) {
        char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
        char first[sizeof path] = "";
        int r = -ENOENT;
        for (int where = 0; where < 2; where++) {
            r = jpd_watch_path(getuid(), a.pid, where, 0, path, sizeof path);
            if (r == 0 && !first[0])
                memcpy(first, path, sizeof path);
            if (r == 0 && access(path, F_OK) == 0)
                return run_top(&a, path);
        }
        fprintf(stderr, "jettprofd: top: no run of pid %u that you may watch (%s)\n",
                (unsigned)a.pid,
                first[0] ? "no watch socket of that pid" : "no private directory to look in");
        return 1;
    }
    char buf[160];
    const char *sock = a.socket_path ? a.socket_path : jpd_default_socket(buf, sizeof buf);
    if (!a.have_run) {
        struct jp_ctl_msg m = {.type = JP_CTL_STATUS};
        m.u.status.format = JP_STATUS_FMT_HUMAN;
        return jpd_ask("top", sock, &m, list_answer, NULL);
    }
    return run_top(&a, sock);
}
