/* The checks both engine harnesses make once a stream has been fed: excerpt keys, summary
 * and the report in both outputs (see the invariants in fuzz_replay.c). */
#ifndef JETTPROF_FUZZ_REPORT_CHECK_H
#define JETTPROF_FUZZ_REPORT_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "render/report.h"
#include "fuzz_check.h"

static void check_text(const char *what, const char *s, size_t len)
{
    FUZZ_CHECK(s != NULL, "%s output missing", what);
    FUZZ_CHECK(s[len] == '\0', "%s output not NUL-terminated at its length %zu", what, len);
    FUZZ_CHECK(strlen(s) == len, "%s output has a NUL at %zu of %zu", what, strlen(s), len);
    /* Both documents are UTF-8 text (TOON requires it; the human text goes to a terminal):
     * whatever bytes the stream carried, what comes out is well-formed. */
    size_t bad = 0;
    FUZZ_CHECK(jp_utf8_validate(s, len, &bad) == 0, "%s output is not valid UTF-8 at byte %zu",
               what, bad);
}

static void render_checked(struct jp_engine *e, const struct jp_report_opts *o,
                           struct jp_rendered *out)
{
    memset(out, 0, sizeof *out);
    int r = jp_profile_render(e, o, out);
    FUZZ_CHECK(r == 0, "render failed: %d", r);
    FUZZ_CHECK(out->status >= JP_STATUS_COMPLETE && out->status <= JP_STATUS_UNAVAILABLE,
               "status %u", out->status);
    FUZZ_CHECK(memchr(out->reason, '\0', sizeof out->reason) != NULL, "reason unterminated");
    FUZZ_CHECK((out->status == JP_STATUS_COMPLETE) == (out->reason[0] == '\0'),
               "status %u with reason \"%s\"", out->status, out->reason);
    if (o->outputs & JP_OUT_HUMAN)
        check_text("human", out->human, out->human_len);
    else
        FUZZ_CHECK(out->human == NULL, "human output not requested but given");
    if (o->outputs & JP_OUT_TOON)
        check_text("toon", out->toon, out->toon_len);
    else
        FUZZ_CHECK(out->toon == NULL, "toon output not requested but given");
}

/* accepted: records the engine took (0 means no RUN_START: no report exists). Frees e. */
static void fuzz_check_report(struct jp_engine *e, uint64_t accepted, uint32_t ending)
{
    if (accepted == 0) {
        /* Nothing began a run (the engine accepts nothing before RUN_START): there is no mode
         * and no report; the daemon never renders such a stream (offline.c calls it invalid). */
        struct jp_rendered none;
        struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                                   .ending = ending, .outputs = JP_OUT_HUMAN | JP_OUT_TOON};
        FUZZ_CHECK(jp_profile_render(e, &o, &none) == -ENODATA, "a report without RUN_START");
        jp_engine_free(e);
        return;
    }

    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = ending, .outputs = JP_OUT_HUMAN | JP_OUT_TOON};
    struct jp_engine_view v;
    FUZZ_CHECK(jp_engine_view(e, &v) == 0, "no view after RUN_START");
    struct jp_report *rep = NULL;
    int r = jp_report_build(&v, &o, &rep);
    FUZZ_CHECK(r == 0, "report build failed: %d", r);
    struct jp_ctl_excerpt_key *keys = NULL;
    uint32_t nkeys = 0;
    r = jp_report_excerpt_keys(rep, &keys, &nkeys);
    FUZZ_CHECK(r == 0, "excerpt_keys failed: %d", r);
    FUZZ_CHECK(nkeys == 0 || keys != NULL, "%u keys at NULL", nkeys);
    free(keys);
    FUZZ_CHECK(rep->status >= JP_STATUS_COMPLETE && rep->status <= JP_STATUS_UNAVAILABLE,
               "report status %u", rep->status);

    struct jp_engine_summary sum;
    FUZZ_CHECK(jp_engine_summary(e, &sum) == 0, "summary failed");

    struct jp_rendered a, b;
    render_checked(e, &o, &a);
    render_checked(e, &o, &b);
    FUZZ_CHECK(a.status == b.status && strcmp(a.reason, b.reason) == 0 &&
                   a.human_len == b.human_len && memcmp(a.human, b.human, a.human_len) == 0 &&
                   a.toon_len == b.toon_len && memcmp(a.toon, b.toon, a.toon_len) == 0,
               "rendering twice gave different bytes");
    FUZZ_CHECK(rep->status == a.status, "built status %u, rendered status %u", rep->status,
               a.status);
    /* The one build, rebound to a fresh view, writes what a fresh build writes. */
    FUZZ_CHECK(jp_engine_view(e, &v) == 0, "no view after RUN_START");
    jp_report_rebind(rep, &v, ending);
    struct jp_rendered c;
    FUZZ_CHECK(jp_report_write(rep, &o, &c) == 0, "write failed");
    FUZZ_CHECK(c.status == a.status && strcmp(c.reason, a.reason) == 0 &&
                   c.human_len == a.human_len && memcmp(c.human, a.human, a.human_len) == 0 &&
                   c.toon_len == a.toon_len && memcmp(c.toon, a.toon, a.toon_len) == 0,
               "the rebound report gave different bytes");
    jp_rendered_free(&c);
    jp_report_free(rep);
    jp_rendered_free(&a);
    jp_rendered_free(&b);

    /* Everything shown, TOON alone. */
    struct jp_report_opts all = {.size = sizeof all, .threshold_bp = 0, .limit = 100,
                                 .ending = ending, .outputs = JP_OUT_TOON};
    render_checked(e, &all, &a);
    jp_rendered_free(&a);
    jp_engine_free(e);
}

#endif
