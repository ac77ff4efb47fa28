/* The requests a client makes of a serving daemon instead of a run: SHOW a kept run or a
 * snapshot of a live one, TOP a live run's frames, the daemon's STATUS, the RUNS it finished. The answers are the
 * server's: they read what the main loop owns (the kept store, the runs log's recent rows, the
 * live runs' figures), after the workers' posts, so a client that got its RESULT finds its run.
 * A live run's snapshot is the one answer not built here: only the run's own loop may read its
 * engine, so the request goes there (watch.c, jpd_watch_snapshot).
 */
#include <string.h>

#include "jpd.h"
#include "server.h"
#include "status.h"

/* The loop a live run of this id, visible to uid, is drained on, or NULL. */
static struct jpd_loop *live_run_loop(struct jpd_daemon *d, uid_t uid, uint64_t run_id)
{
    struct jpd_loop *lp = NULL;
    pthread_mutex_lock(&d->live_mu);
    for (const struct jpd_live *l = d->live; l; l = l->next)
        if (l->run_id == run_id && (uid == 0 || uid == l->uid)) {
            lp = l->lp;
            break;
        }
    pthread_mutex_unlock(&d->live_mu);
    return lp;
}

/* SHOW or TOP: a kept run's profile, or a live run's snapshot or frame (built on its loop);
 * one answer for a run that is neither and one of another user, since telling them apart
 * would tell other users which run ids exist. */
static uint32_t answer_show(struct jpd_daemon *d, uid_t uid, uint64_t run_id, uint32_t outputs,
                            struct jp_ctl_msg *r, const char **why, struct jpd_loop **on)
{
    if (outputs & ~(uint32_t)(JP_OUT_HUMAN | JP_OUT_TOON)) {
        *why = "show.outputs names an unknown output";
        return JP_CTLE_BAD_MESSAGE;
    }
    const struct jpd_kept *k = jpd_find_kept(d, run_id);
    if (!k && (*on = live_run_loop(d, uid, run_id)) != NULL)
        return 0;
    if (!k || (uid != 0 && uid != k->uid)) {
        *why = "no such run visible to you";
        return JP_CTLE_NO_SUCH_RUN;
    }
    *r = (struct jp_ctl_msg){.type = JP_CTL_RESULT};
    r->u.result.status = k->status;
    r->u.result.reason = k->reason;
    r->u.result.reason_len = strlen(k->reason);
    int h = (outputs & JP_OUT_HUMAN) && k->human;
    int t = (outputs & JP_OUT_TOON) && k->toon;
    r->u.result.human = h ? k->human : "";
    r->u.result.human_len = h ? k->human_len : 0;
    r->u.result.toon = t ? k->toon : "";
    r->u.result.toon_len = t ? k->toon_len : 0;
    return 0;
}

/* The run a TOP names: run 0 of a private daemon is its one run (while it is live). */
static uint64_t top_run(struct jpd_daemon *d, uint64_t run_id)
{
    if (run_id || !d->private_mode)
        return run_id;
    pthread_mutex_lock(&d->live_mu);
    uint64_t id = d->live ? d->live->run_id : 0;
    pthread_mutex_unlock(&d->live_mu);
    return id;
}

uint32_t jpd_server_answer(struct jpd_daemon *d, uid_t uid, const struct jp_ctl_msg *m,
                           struct jp_ctl_msg *reply, struct jp_buf *text, const char **why,
                           struct jpd_loop **snapshot_on, uint64_t *run_id)
{
    *snapshot_on = NULL;
    jpd_workers_absorb(d); /* what workers posted before now is kept and listed */
    if (m->type == JP_CTL_SHOW) {
        *run_id = m->u.show.run_id;
        return answer_show(d, uid, *run_id, m->u.show.outputs, reply, why, snapshot_on);
    }
    if (m->type == JP_CTL_TOP) {
        *run_id = top_run(d, m->u.top.run_id);
        return answer_show(d, uid, *run_id, JP_OUT_HUMAN, reply, why, snapshot_on);
    }
    if (m->type == JP_CTL_RUNS)
        jpd_runs_text(d, uid, m->u.runs.format, m->u.runs.limit, text);
    else
        jpd_status_text(d, uid, m->u.status.format, text);
    if (text->failed) {
        *why = "the daemon is out of memory";
        return JP_CTLE_INTERNAL;
    }
    *reply = (struct jp_ctl_msg){.type = JP_CTL_STATUS_REPLY};
    reply->u.status_reply.text = text->p ? text->p : "";
    reply->u.status_reply.text_len = text->len;
    return 0;
}
