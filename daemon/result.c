/* The end of a run: the profile built and written once, the run logged, kept for `show` and
 * delivered to whoever can still take it (with the exports its FINALIZE asked for, rendered
 * from that same report), then, under `serve --push`, its last window or its one profile
 * queued for the push thread (window.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "push.h"
#include "render/export/export.h"
#include "session.h"
#include "commands.h"

/* One export rendered from the run's one report. */
struct rendered_export {
    char *data;
    size_t len;
    int error; /* 0, or the errno that kept it from being rendered */
};

static int render_one(struct jpd_session *s, uint32_t format, uint64_t cap,
                      struct rendered_export *x)
{
    x->error = 0;
    struct jp_export_opts o = {.size = sizeof o, .format = format, .value = JP_XVAL_DEFAULT,
                               .max_bytes = cap};
    int r = jp_export_write(s->report, &o, &x->data, &x->len);
    if (r < 0)
        x->error = -r;
    return r;
}

/* Renders and queues each export FINALIZE asked for, in format order, before the RESULT. All
 * of a run's exports together hold at most the daemon's export cap (--max-export-bytes), a
 * client can only ask for less: each export is rendered within what is left of the cap and
 * handed to the output queue, which sends it piece by piece as the socket takes it; one that
 * would pass the cap is refused (EFBIG: `jett run` prints export_too_large) and the profile
 * and the other exports still go. Stops when the peer is gone. 0 or -errno. */
static int send_exports(struct jpd_session *s)
{
    uint64_t left = s->d->cfg->max_export_bytes;
    for (unsigned f = 0; f < JP_EXPORT_FORMAT_COUNT; f++) {
        if (!(s->exports & (1u << f)))
            continue;
        if (s->eof)
            return 0;
        struct rendered_export x = {.error = EFBIG};
        int r = left ? render_one(s, f, left, &x) : -EFBIG;
        if (r == -EFBIG)
            jpd_log("run %llu: its %s export refused: it passes the export cap of %llu bytes "
                    "a run (%llu left)", (unsigned long long)s->run_id,
                    jp_export_format_name(f),
                    (unsigned long long)s->d->cfg->max_export_bytes, (unsigned long long)left);
        else if (r < 0)
            jpd_log("run %llu: cannot render its %s export (%s)", (unsigned long long)s->run_id,
                    jp_export_format_name(f), strerror(-r));
        else
            left -= x.len;
        r = jpd_conn_send_export(s, f, (uint32_t)x.error, x.data, x.len);
        if (r < 0)
            return r;
    }
    return 0;
}

void jpd_result_row(struct jpd_session *s, uint32_t ending, const struct jp_engine_summary *sum,
                    const char *reason, uint32_t status, struct jpd_run_row *row)
{
    s->live.records = s->fed;
    jpd_live_end(s->d, &s->live);
    memset(row, 0, sizeof *row);
    row->run_id = s->run_id;
    row->pid = s->peer.pid;
    row->uid = s->peer.uid;
    row->ending = ending;
    row->status = status;
    row->sum = *sum;
    if (!row->sum.mode)
        row->sum.mode = s->mode; /* no RUN_START reached the engine: the HELLO's mode */
    row->start_unix_s = s->start_unix_s;
    if (s->start_ns)
        row->duration_ms = (uv_hrtime() - s->start_ns) / 1000000u;
    snprintf(row->reason, sizeof row->reason, "%s", reason ? reason : "");
    uint32_t from = 0;
    if (s->eng)
        (void)jpd_program_of(s->eng, &from, row->program);
}

/* Without a client to deliver to, the profile goes to the place the contract promises a lost
 * producer: stderr in private mode (the user's terminal), the runs log and the `show` store in
 * long-lived mode. */
void jpd_result_msg(const struct jp_rendered *out, uint32_t outputs, struct jp_ctl_msg *m)
{
    int h = (outputs & JP_OUT_HUMAN) && out->human, t = (outputs & JP_OUT_TOON) && out->toon;
    *m = (struct jp_ctl_msg){.type = JP_CTL_RESULT};
    m->u.result.status = out->status;
    m->u.result.reason = out->reason;
    m->u.result.reason_len = strlen(out->reason);
    m->u.result.human = h ? out->human : "";
    m->u.result.human_len = h ? out->human_len : 0;
    m->u.result.toon = t ? out->toon : "";
    m->u.result.toon_len = t ? out->toon_len : 0;
}

void jpd_result_finish(struct jpd_session *s, uint32_t ending, int deliver)
{
    /* The human text names the run id only where the user can do something with it: a
     * long-lived daemon's run, for `jettprofd show`. JP_OUT_VERBOSE is the client's
     * (--profile-verbose); the kept copy for `show` is the text the client got. */
    struct jp_report_opts o = {
        .size = sizeof o, .threshold_bp = -1, .limit = -1, .ending = ending,
        .outputs = JP_OUT_HUMAN | JP_OUT_TOON | (s->outputs & JP_OUT_VERBOSE),
        .run_id = s->d->private_mode ? 0 : s->run_id,
    };
    struct jp_rendered out;
    memset(&out, 0, sizeof out);
    struct jp_engine_summary sum;
    memset(&sum, 0, sizeof sum);
    s->run_finished = 1;
    /* The report built when the excerpts were asked for is rebound to the fresh view: since
     * then only EXCERPT records and RUN_STOP were fed, which change no ranked count, but they
     * change the totals, the status (RUN_STOP, the ending) and so the suggestions. */
    struct jp_engine_view v;
    int r = jp_engine_view(s->eng, &v);
    if (r == 0 && s->report)
        jp_report_rebind(s->report, &v, ending);
    else if (r == 0)
        r = jp_report_build(&v, &o, &s->report);
    if (r == 0)
        r = jp_report_write(s->report, &o, &out);
    (void)jp_engine_summary(s->eng, &sum);
    jpd_capture_close(s);
    jpd_session_unmap_ring(s);

    if (r < 0) {
        jpd_log("run %llu: cannot render its profile (%s)", (unsigned long long)s->run_id,
                strerror(-r));
        struct jpd_run_row row;
        jp_report_free(s->report);
        s->report = NULL;
        jpd_result_row(s, ending, &sum, "internal", 0, &row);
        jpd_log_run(s->d, &row);
        jpd_push_render_failed(s->d->push, s->run_id, "the profile could not be rendered");
        if (deliver) {
            struct jp_ctl_msg m = {.type = JP_CTL_ERROR};
            m.u.error.code = JP_CTLE_INTERNAL;
            m.u.error.message = "the daemon could not render the profile";
            m.u.error.message_len = strlen(m.u.error.message);
            (void)jpd_conn_send(s, &m);
        }
        jpd_session_done(s);
        return;
    }

    /* Private mode's stderr is the user's terminal: run bookkeeping stays out of it. */
    if (!s->d->private_mode)
        jpd_log("run %llu finished: %s%s%s, %llu records, ending %s",
                (unsigned long long)s->run_id, jpd_status_word(out.status),
                out.reason[0] ? " " : "", out.reason, (unsigned long long)s->fed,
                jpd_ending_word(ending));
    struct jpd_run_row row;
    jpd_result_row(s, ending, &sum, out.reason, out.status, &row);
    jpd_log_run(s->d, &row);
    if (!s->d->private_mode)
        jpd_keep_run(s->d, s->run_id, s->peer.uid, &out);
    jpd_watch_run_ended(s, &out); /* `top` shows the final profile and says so */

    if (deliver && !s->eof) {
        struct jp_ctl_msg m;
        jpd_result_msg(&out, s->outputs, &m);
        m.u.result.capture_errno = (uint32_t)s->cap_errno;
        r = send_exports(s);
        if (r == 0 && !s->eof)
            r = jpd_conn_send(s, &m);
        if (r < 0)
            jpd_log("run %llu: cannot send its result (%s)", (unsigned long long)s->run_id,
                    strerror(-r));
    } else if (s->d->private_mode && out.human) {
        /* Private mode's stderr is the user's terminal: the best-effort profile of a run whose
         * process vanished lands there. */
        (void)jpd_write_all(STDERR_FILENO, out.human, out.human_len);
    }
    jpd_window_end(s); /* after the result went: the push's render never delays it */
    jp_report_free(s->report);
    s->report = NULL;
    jp_rendered_free(&out);
    jp_engine_free(s->eng);
    s->eng = NULL;
    jpd_session_done(s);
}
