/* What is answered from a live run's own loop, between its drains, from the run's engine (no
 * lock: that loop is the one thread that feeds it): `show`'s snapshot of the run in flight
 * (SHOW), and the watchers of the run: a `jettprofd top` connection gets a frame of the run
 * each time it asks (TOP), and the run's final profile, unasked, when the run ends while it
 * watches.
 *
 * A frame's rows: the functions (memory: creation sites) with the most of any of the frame's
 * three values, taken in turns from each value's ranking until top.rows are chosen, so a
 * client that sorts by any of them (or by the change of one between two frames) finds its
 * leaders among them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "render/report.h"
#include "session.h"

/* What one frame holds until it is encoded. */
struct frame {
    struct jp_ctl_top_row *rows;
    uint64_t *points;
    char *names;
    uint32_t *order; /* scratch: a ranking of the functions */
    uint8_t *taken;
};

static void frame_free(struct frame *f)
{
    free(f->rows);
    free(f->points);
    free(f->names);
    free(f->order);
    free(f->taken);
}

static uint64_t row_value(const struct jp_engine_view *v, const struct jp_func *fn, int k)
{
    if (v->mode == JP_MODE_CPU)
        return k == 0 ? fn->cpu.self : k == 1 ? fn->cpu.inclusive : 0;
    return k == 0 ? fn->live : k == 1 ? fn->mem.allocated : fn->mem.count;
}

static const struct jp_engine_view *sort_view;
static int sort_key;

static int by_value(const void *a, const void *b)
{
    const struct jp_func *fa = &sort_view->funcs[*(const uint32_t *)a];
    const struct jp_func *fb = &sort_view->funcs[*(const uint32_t *)b];
    uint64_t x = row_value(sort_view, fa, sort_key), y = row_value(sort_view, fb, sort_key);
    if (x != y)
        return x > y ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1; /* stable across frames */
}

/* The rows of the frame: 0, or -ENOMEM. */
static int choose_rows(const struct jp_engine_view *v, uint32_t want, struct frame *f,
                       uint32_t *nrows)
{
    const int keys = v->mode == JP_MODE_CPU ? 2 : 3;
    uint32_t n = v->nfuncs;
    *nrows = 0;
    if (n == 0)
        return 0;
    f->order = malloc((size_t)n * keys * sizeof *f->order);
    f->taken = calloc(n, 1);
    if (!f->order || !f->taken)
        return -ENOMEM;
    /* qsort has no context argument: the view and key are this loop's, set just before. */
    for (int k = 0; k < keys; k++) {
        uint32_t *o = f->order + (size_t)k * n;
        for (uint32_t i = 0; i < n; i++)
            o[i] = i;
        sort_view = v;
        sort_key = k;
        qsort(o, n, sizeof *o, by_value);
    }
    uint32_t chosen = 0;
    for (uint32_t rank = 0; rank < n && chosen < want; rank++)
        for (int k = 0; k < keys && chosen < want; k++) {
            uint32_t i = f->order[(size_t)k * n + rank];
            if (f->taken[i] || !row_value(v, &v->funcs[i], k))
                continue;
            f->taken[i] = 1;
            chosen++;
        }
    *nrows = chosen;
    f->rows = calloc(chosen ? chosen : 1, sizeof *f->rows);
    return f->rows ? 0 : -ENOMEM;
}

/* Fills the rows chosen (in the order of the functions' indexes) with names (the report's
 * qualified names) and values. */
static int fill_rows(const struct jp_engine_view *v, struct frame *f, uint32_t nrows)
{
    struct jp_buf names = {0};
    uint32_t r = 0;
    for (uint32_t i = 0; i < v->nfuncs && r < nrows; i++) {
        if (!f->taken[i])
            continue;
        const struct jp_func *fn = &v->funcs[i];
        struct jp_ctl_top_row *row = &f->rows[r++];
        size_t at = names.len;
        jp_report_func_name(&names, fn);
        row->name_len = names.len - at;
        row->name = (const char *)(uintptr_t)at; /* an offset until the buffer is final */
        const struct jp_source *src =
            fn->source && fn->source < v->nsources ? &v->sources[fn->source] : NULL;
        row->path = src ? src->path : "";
        row->path_len = src ? src->path_len : 0;
        row->line = src ? fn->decl_line : 0;
        for (int k = 0; k < 3; k++)
            row->v[k] = row_value(v, fn, k);
    }
    size_t len;
    if (names.failed || jp_buf_finish(&names, &f->names, &len) < 0) {
        jp_buf_free(&names);
        return -ENOMEM;
    }
    for (uint32_t k = 0; k < r; k++)
        f->rows[k].name = f->names ? f->names + (uintptr_t)f->rows[k].name : "";
    return 0;
}

/* The frame of run, as TOP_FRAME into *m (its arrays in *f). 0 or -ENOMEM. */
static int build(struct jpd_session *run, uint32_t rows, struct frame *f, uint64_t *figures,
                 char *program, struct jp_ctl_msg *m)
{
    struct jp_engine_view v;
    int r = jp_engine_view(run->eng, &v);
    if (r < 0)
        return r;
    uint32_t nrows = 0;
    if ((r = choose_rows(&v, rows, f, &nrows)) < 0 || (r = fill_rows(&v, f, nrows)) < 0)
        return r;
    uint32_t nfig = 0;
    if (v.mode == JP_MODE_CPU) {
        uint64_t all = 0;
        for (uint32_t s = 0; s < JP_STATE_LIMIT; s++)
            all += v.state_samples[s];
        figures[nfig++] = all;
        for (uint32_t s = 0; s < JP_STATE_LIMIT; s++)
            figures[nfig++] = v.state_samples[s];
    } else {
        figures[nfig++] = v.live_bytes;
        figures[nfig++] = v.peak_bytes;
        figures[nfig++] = v.allocated_bytes;
        figures[nfig++] = v.allocation_count;
    }
    uint32_t np = v.timeline ? v.timeline_n : 0;
    f->points = calloc(np ? np : 1, sizeof *f->points);
    if (!f->points)
        return -ENOMEM;
    for (uint32_t i = 0; i < np; i++) {
        const struct jp_timeline_point *p = &v.timeline[i];
        if (v.mode == JP_MODE_CPU)
            for (uint32_t s = 0; s < JP_STATE_LIMIT; s++)
                f->points[i] += p->samples[s];
        else
            f->points[i] = p->live_max;
    }
    memcpy(program, run->live.program, JPD_PROGRAM_MAX); /* this thread's to write */
    program[JPD_PROGRAM_MAX - 1] = 0;
    *m = (struct jp_ctl_msg){.type = JP_CTL_TOP_FRAME};
    m->u.top_frame.run_id = run->run_id;
    m->u.top_frame.mode = v.mode;
    m->u.top_frame.program = program;
    m->u.top_frame.program_len = strlen(program);
    m->u.top_frame.elapsed_ns = uv_hrtime() - run->start_ns;
    m->u.top_frame.records = run->fed;
    /* The run's own figures for `status`, written on this thread (jpd_live_update). */
    m->u.top_frame.fill = run->live.fill;
    m->u.top_frame.slots = run->live.slots;
    m->u.top_frame.lost = run->live.lost;
    m->u.top_frame.violations = v.violations;
    m->u.top_frame.figures = figures;
    m->u.top_frame.nfigures = nfig;
    m->u.top_frame.stretch_ns = v.timeline_stretch_ns;
    m->u.top_frame.timeline = f->points;
    m->u.top_frame.npoints = np;
    m->u.top_frame.rows = f->rows;
    m->u.top_frame.nrows = nrows;
    return 0;
}

int jpd_watch_answer(struct jpd_session *w, struct jpd_session *run)
{
    struct frame f = {0};
    uint64_t figures[JP_CTL_MAX_TOP_FIGURES];
    _Static_assert(1u + JP_STATE_LIMIT <= JP_CTL_MAX_TOP_FIGURES, "a CPU frame's figures");
    char program[JPD_PROGRAM_MAX];
    struct jp_ctl_msg m;
    int r = build(run, w->snap_rows, &f, figures, program, &m);
    if (r < 0) {
        frame_free(&f);
        jpd_session_fail(w, JP_CTLE_INTERNAL, "the daemon is out of memory");
        return -1;
    }
    r = jpd_conn_send(w, &m);
    frame_free(&f);
    if (r < 0) {
        jpd_session_fail(w, JP_CTLE_INTERNAL, "the daemon could not answer");
        return -1;
    }
    return 0;
}

void jpd_watch_run_ended(struct jpd_session *run, const struct jp_rendered *out)
{
    for (struct jpd_session *w = run->lp->sessions, *next; w; w = next) {
        next = w->next;
        if (w == run || w->closing || w->state != JPD_S_TOP || w->snap_run_id != run->run_id)
            continue;
        struct jp_ctl_msg m;
        jpd_result_msg(out, JP_OUT_HUMAN, &m);
        if (jpd_conn_send(w, &m) < 0)
            jpd_session_fail(w, JP_CTLE_INTERNAL, "the daemon could not answer");
        else
            jpd_session_done(w);
    }
}

struct jpd_session *jpd_watch_run_of(struct jpd_session *s)
{
    for (struct jpd_session *it = s->lp->sessions; it; it = it->next)
        if (it != s && it->run_id == s->snap_run_id && it->eng && !it->run_finished &&
            (it->state == JPD_S_LIVE || it->state == JPD_S_EXCERPTS))
            return it;
    return NULL;
}

/* The profile of the records the run's engine has taken (docs/READINGS.md #21), rendered as
 * a running run's, within the daemon's --max-export-bytes. */
void jpd_watch_snapshot(struct jpd_session *s, struct jpd_session *run)
{
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_RUNNING, .outputs = s->snap_outputs,
                               .run_id = run->run_id, .records_taken = run->fed,
                               .elapsed_ns = uv_hrtime() - run->start_ns};
    struct jp_rendered out;
    memset(&out, 0, sizeof out);
    int r = jp_profile_render(run->eng, &o, &out);
    if (r < 0) {
        jpd_session_fail(s, r == -ENOMEM ? JP_CTLE_INTERNAL : JP_CTLE_NO_SUCH_RUN,
                         r == -ENOMEM ? "the daemon is out of memory"
                                      : "the run has no profile to show yet");
        return;
    }
    if (out.human_len + out.toon_len > s->d->cfg->max_export_bytes) {
        jp_rendered_free(&out);
        jpd_session_fail(s, JP_CTLE_INTERNAL,
                         "the snapshot is larger than this daemon's --max-export-bytes");
        return;
    }
    struct jp_ctl_msg m;
    jpd_result_msg(&out, JP_OUT_HUMAN | JP_OUT_TOON, &m);
    int e = jpd_conn_send(s, &m);
    jp_rendered_free(&out);
    if (e < 0)
        jpd_session_fail(s, JP_CTLE_INTERNAL, "the daemon could not answer");
    else
        jpd_session_done(s);
}
