/* The requests a client makes of a serving daemon instead of a run: SHOW a kept run, the
 * daemon's STATUS, the RUNS it finished. The answers are the server's: they read what the main
 * loop owns (the kept store, the runs log's recent rows, the live runs' figures), after the
 * workers' posts, so a client that got its RESULT finds its run. A live run's snapshot will be
 * one more request here.
 */
#include <string.h>

#include "jpd.h"
#include "server.h"
#include "status.h"

/* SHOW: one answer for a run that is not kept and one of another user, since telling them
 * apart would tell other users which run ids exist. */
static uint32_t answer_show(struct jpd_daemon *d, uid_t uid, const struct jp_ctl_msg *m,
                            struct jp_ctl_msg *r, const char **why)
{
    if (m->u.show.outputs & ~(uint32_t)(JP_OUT_HUMAN | JP_OUT_TOON)) {
        *why = "show.outputs names an unknown output";
        return JP_CTLE_BAD_MESSAGE;
    }
    const struct jpd_kept *k = jpd_find_kept(d, m->u.show.run_id);
    if (!k || (uid != 0 && uid != k->uid)) {
        *why = "no such run visible to you";
        return JP_CTLE_NO_SUCH_RUN;
    }
    *r = (struct jp_ctl_msg){.type = JP_CTL_RESULT};
    r->u.result.status = k->status;
    r->u.result.reason = k->reason;
    r->u.result.reason_len = strlen(k->reason);
    int h = (m->u.show.outputs & JP_OUT_HUMAN) && k->human;
    int t = (m->u.show.outputs & JP_OUT_TOON) && k->toon;
    r->u.result.human = h ? k->human : "";
    r->u.result.human_len = h ? k->human_len : 0;
    r->u.result.toon = t ? k->toon : "";
    r->u.result.toon_len = t ? k->toon_len : 0;
    return 0;
}

uint32_t jpd_server_answer(struct jpd_daemon *d, uid_t uid, const struct jp_ctl_msg *m,
                           struct jp_ctl_msg *reply, struct jp_buf *text, const char **why)
{
    jpd_workers_absorb(d); /* what workers posted before now is kept and listed */
    if (m->type == JP_CTL_SHOW)
        return answer_show(d, uid, m, reply, why);
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
