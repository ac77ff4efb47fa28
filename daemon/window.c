/* serve --push: what each run gives the push thread (docs/READINGS.md #21, windows).
 *
 * Without --push-interval a run is pushed once, when it ends: its whole pprof, stamped with its
 * start (time_nanos) and its length (duration_nanos). With --push-interval I, a run in flight is
 * cut every I seconds on multiples of I of the wall clock, and each window (the records the
 * daemon took between two cuts) is pushed as it is cut; the last window ends with the run.
 * A window carries the CPU samples, or the allocations (alloc_objects, alloc_space), made in it,
 * and the memory in use at its end (inuse_objects, inuse_space): one profile to Pyroscope, whose
 * ingest takes the window's from and until; to Parca, which sums every profile that has a
 * duration, the counts with the window's duration and the in-use figures apart with duration 0.
 *
 * Windows are cut on the daemon's monotonic clock (uv_hrtime), between two drains of the run on
 * its own loop, so they tile the run: no overlap, no gap, and their counts add up to the final
 * profile's exactly (a window is the run's counts less those at the cut before, struct
 * jp_export_base). They are stamped in wall time. When the wall clock moved against the
 * monotonic one (by more than a second) the window that sees it is stamped to end at the new
 * wall time and a new schedule starts from there: no catch-up windows. A daemon held up past
 * several cut times cuts once, when it can.
 *
 * A profile is cut to Pyroscope's default limits (16,000 samples, 4 MiB before compression):
 * the smallest samples are merged into one `<cut>` sample (its sums stay) and counted in
 * `status`. What a run keeps for its windows is its counts at the last cut: 8 (CPU) or 16
 * (memory) bytes per creation chain, the chains being within the run's metadata budget.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "push.h"
#include "render/export/export.h"
#include "session.h"

uint32_t jpd_time_scale = 1;
const char *jpd_wall_step_file;
static uint64_t origin_mono;
static int64_t origin_wall;

static int64_t real_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void jpd_window_clock_init(void)
{
    origin_mono = uv_hrtime();
    origin_wall = real_wall_ns();
}

/* The clocks windows are cut and stamped by: the monotonic and the wall clock, in ns; under
 * the test knobs, running jpd_time_scale times as fast, and the wall clock moved by the
 * seconds jpd_wall_step_file holds. */
static void clocks(uint64_t *mono, int64_t *wall)
{
    *mono = uv_hrtime();
    *wall = real_wall_ns();
    if (jpd_time_scale > 1) {
        uint64_t fast = (*mono - origin_mono) * jpd_time_scale;
        *mono = origin_mono + fast;
        *wall = origin_wall + (int64_t)fast;
    }
    if (jpd_wall_step_file) {
        FILE *f = fopen(jpd_wall_step_file, "re");
        long long step = 0;
        if (f) {
            if (fscanf(f, "%lld", &step) != 1)
                step = 0;
            fclose(f);
        }
        *wall += (int64_t)step * 1000000000;
    }
}

/* The next cut after (mono, wall): the next multiple of the interval of the wall clock. */
static void schedule(struct jpd_session *s, uint64_t mono, int64_t wall)
{
    const int64_t every = (int64_t)s->d->cfg->push_interval_s * 1000000000;
    int64_t next = (wall / every + 1) * every;
    s->win_next_mono = mono + (uint64_t)(next - wall);
    s->win_offset = wall - (int64_t)mono;
}

void jpd_window_begin(struct jpd_session *s)
{
    uint64_t mono;
    int64_t wall;
    clocks(&mono, &wall);
    s->win_from_mono = mono;
    s->win_from_wall = wall;
    if (s->d->push && s->d->cfg->push_interval_s)
        schedule(s, mono, wall);
}

static int64_t round_s(int64_t ns)
{
    return (ns + 500000000) / 1000000000;
}

/* One profile of the window (or the run) out of r to the push thread. */
static void push_one(struct jpd_session *s, const struct jp_report *r, uint32_t types,
                     int64_t time_ns, int64_t duration_ns)
{
    uint64_t cut = 0;
    struct jp_export_opts o = {.size = sizeof o, .format = JP_EXPORT_PPROF,
                               .value = JP_XVAL_DEFAULT,
                               .max_bytes = s->d->cfg->max_export_bytes,
                               .base = s->win_taken ? &s->win_base : NULL,
                               .time_nanos = time_ns, .duration_nanos = duration_ns,
                               .pprof_types = types, .max_samples = JPD_PUSH_MAX_SAMPLES,
                               .max_raw_bytes = JPD_PUSH_MAX_RAW_BYTES, .cut = &cut};
    char *data = NULL;
    size_t len = 0;
    int rc = jp_export_write(r, &o, &data, &len);
    if (rc < 0) {
        jpd_push_render_failed(s->d->push, s->run_id,
                               rc == -EFBIG ? "its pprof export passes the export cap"
                                            : jpd_error_text(rc));
        return;
    }
    jpd_push_note_cut(s->d->push, cut);
    int64_t until_ns = time_ns + (types == JP_PPROF_INUSE ? 0 : duration_ns);
    struct jpd_push_meta m = {.program = s->live.program, .mode = s->mode,
                              .from_s = round_s(types == JP_PPROF_INUSE ? until_ns : time_ns),
                              .until_s = round_s(until_ns)};
    jpd_push_queue(s->d->push, s->run_id, &m, data, len);
}

/* The window from the last cut to (mono, wall), or the whole run, of report r: pushed as each
 * receiver reads it. */
static void push_window(struct jpd_session *s, const struct jp_report *r, uint64_t mono,
                        int64_t wall)
{
    int64_t duration = (int64_t)(mono - s->win_from_mono);
    int64_t from = s->win_from_wall;
    /* The wall clock moved against the monotonic one: the window ends at the new wall time. */
    int64_t drift = wall - ((int64_t)mono + s->win_offset);
    int stepped = s->d->cfg->push_interval_s && (drift > 1000000000 || drift < -1000000000);
    if (stepped)
        from = wall - duration;
    if (s->mode == JP_MODE_MEMORY && s->d->cfg->push->parca) {
        push_one(s, r, JP_PPROF_COUNTS, from, duration);
        push_one(s, r, JP_PPROF_INUSE, from, duration);
    } else {
        push_one(s, r, JP_PPROF_ALL, from, duration);
    }
    s->win_from_mono = mono;
    s->win_from_wall = from + duration;
}

void jpd_window_tick(struct jpd_session *s)
{
    if (!s->win_next_mono || !s->eng || s->run_finished)
        return;
    uint64_t mono;
    int64_t wall;
    clocks(&mono, &wall);
    if (mono < s->win_next_mono)
        return;
    struct jp_engine_view v;
    struct jp_report *r = NULL;
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_RUNNING, .outputs = 0};
    int rc = jp_engine_view(s->eng, &v);
    if (rc == -ENODATA) {
        /* no RUN_START yet: nothing to push, the window goes on from the run's start */
        schedule(s, mono, wall);
        return;
    }
    if (rc == 0)
        rc = jp_report_build(&v, &o, &r);
    if (rc == 0) {
        push_window(s, r, mono, wall);
        /* A base that cannot grow keeps the last one: the next window then holds two. */
        if (jp_export_base_take(&s->win_base, r) == 0)
            s->win_taken = 1;
    } else {
        jpd_push_render_failed(s->d->push, s->run_id, jpd_error_text(rc));
    }
    jp_report_free(r);
    schedule(s, mono, wall);
}

void jpd_window_end(struct jpd_session *s)
{
    if (!s->d->push || !s->report)
        return;
    uint64_t mono;
    int64_t wall;
    clocks(&mono, &wall);
    /* without --push-interval no cut was taken: one profile, from the run's start */
    push_window(s, s->report, mono, wall);
    jp_export_base_free(&s->win_base);
    s->win_taken = 0;
    s->win_next_mono = 0;
}
