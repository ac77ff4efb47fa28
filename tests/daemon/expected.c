/* What the daemon must deliver for a jpt_stream: the same stream and excerpts fed to a local
 * engine and rendered (see support.h). */
#include "support.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/recbuild.h"

int jpt_expected(struct jpt_stream *s, struct jpt_result *out)
{
    memset(out, 0, sizeof *out);
    struct jp_engine *e;
    int r = jp_engine_new(&e);
    if (r < 0)
        return r;
    uint8_t buf[JP_REC_MAX_SIZE], stop[JP_REC_MAX_SIZE];
    uint32_t stop_len = 0;
    const char *why = NULL;
    struct jp_report *rep = NULL;
    for (;;) {
        uint32_t len = jpt_stream_next(s, buf);
        if (len == 0)
            break;
        struct jp_rec_hdr h;
        memcpy(&h, buf, sizeof h);
        if (h.type == JP_REC_RUN_STOP) {
            memcpy(stop, buf, len);
            stop_len = len;
            continue;
        }
        r = jp_engine_feed(e, buf, len, &why);
        if (r < 0)
            goto out;
    }
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_STOP, .outputs = JP_OUT_HUMAN | JP_OUT_TOON,
                               .run_id = s->run_id};
    /* As the daemon does it: one report, built before the excerpts, written after the stop. */
    struct jp_ctl_excerpt_key *keys = NULL;
    uint32_t n = 0;
    struct jp_engine_view v;
    if ((r = jp_engine_view(e, &v)) < 0 || (r = jp_report_build(&v, &o, &rep)) < 0 ||
        (r = jp_report_excerpt_keys(rep, &keys, &n)) < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        struct jp_ctl_excerpt x;
        char text[200];
        jpt_excerpt_for(&keys[i], &x, text, sizeof text);
        struct jp_rec_excerpt rec;
        memset(&rec, 0, sizeof rec);
        rec.source_id = x.source_id;
        rec.line = x.line;
        rec.col = x.col;
        rec.flags = (uint8_t)x.flags;
        r = jp_engine_feed(e, buf, tl_rec_excerpt(buf, &rec, x.text, x.text_len), &why);
        if (r < 0) {
            free(keys);
            goto out;
        }
    }
    free(keys);
    if (stop_len) {
        r = jp_engine_feed(e, stop, stop_len, &why);
        if (r < 0)
            goto out;
    }
    struct jp_rendered rd;
    memset(&rd, 0, sizeof rd);
    if ((r = jp_engine_view(e, &v)) == 0) {
        jp_report_rebind(rep, &v, stop_len ? JP_END_STOP : JP_END_PRODUCER_LOST);
        r = jp_report_write(rep, &o, &rd);
    }
    if (r == 0) {
        out->status = rd.status;
        snprintf(out->reason, sizeof out->reason, "%s", rd.reason);
        out->human = rd.human;
        out->human_len = rd.human_len;
        out->toon = rd.toon;
        out->toon_len = rd.toon_len;
        rd.human = rd.toon = NULL;
        jp_rendered_free(&rd);
    }
out:
    if (r < 0 && why)
        fprintf(stderr, "expected: engine refused the stream: %s\n", why);
    jp_report_free(rep);
    jp_engine_free(e);
    return r;
}
