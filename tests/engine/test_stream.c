/* Stream semantics: what must come first and last, dense definitions, counted violations,
 * RUN_STOP's record count, cumulative counters, endings and the priority of reasons, the
 * collector_failure profile the agent renders itself, and hostile bytes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tests/lib/recbuild.h"

static struct jp_engine *fresh(void)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    return e;
}

Test(stream, nothing_before_run_start)
{
    struct jp_engine *e = fresh();
    struct jp_rec_counters c = {.h = {JP_REC_COUNTERS, sizeof c}};
    const char *why = NULL;
    cr_assert_eq(t_feed_raw(e, &c, sizeof c, &why), -EPROTO);
    cr_assert_str_eq(why, "record before RUN_START");
    struct jp_rendered r;
    struct jp_report_opts o = {sizeof o, -1, -1, JP_END_STOP, JP_OUT_TOON, 0, 0, 0};
    cr_assert_eq(jp_profile_render(e, &o, &r), -ENODATA);
    jp_engine_free(e);
}

Test(stream, second_start_and_anything_after_stop_are_refused)
{
    struct jp_engine *e = fresh();
    t_simple_cpu(e);
    struct jp_rec_run_start s = tl_rec_run_start(JP_MODE_CPU);
    s.rate_hz = 1;
    s.limit = 1;
    const char *why = NULL;
    cr_assert_eq(t_feed_raw(e, &s, sizeof s, &why), -EPROTO);
    cr_assert_str_eq(why, "second RUN_START");
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    struct jp_rec_exec x = {{JP_REC_EXEC, sizeof x}, 1, 2, 3};
    cr_assert_eq(t_feed_raw(e, &x, sizeof x, &why), -EPROTO);
    cr_assert_str_eq(why, "record after RUN_STOP");
    /* the engine can still render what it had */
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.attributed_samples", "1");
    free(json);
    jp_engine_free(e);
}

Test(stream, structurally_bad_records_end_the_stream_with_a_reason)
{
    struct jp_engine *e = fresh();
    t_simple_cpu(e);
    struct jp_rec_cpu_sample c = {.h = {JP_REC_CPU_SAMPLE, 31}};
    const char *why = NULL;
    cr_assert_eq(t_feed_raw(e, &c, sizeof c, &why), -EPROTO);
    cr_assert(why != NULL && *why);
    struct jp_rec_hdr unknown = {200, 4};
    why = NULL;
    cr_assert_eq(t_feed_raw(e, &unknown, sizeof unknown, &why), -EPROTO);
    cr_assert(why != NULL && *why);
    jp_engine_free(e);
}

Test(stream, definitions_must_be_dense_and_precede_use)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 2, JP_ORIGIN_PROJECT, "src/skip.jett");           /* not dense */
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/s.jett");
    t_frame(e, 1, 7, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION); /* undefined source */
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 5);  /* undefined frame */
    t_node(e, 2, 0, 1);  /* not dense */
    t_node(e, 1, 3, 1);  /* undefined parent */
    t_node(e, 1, 0, 1);
    t_sample(e, JP_STATE_JETT, 1, 0, 0);
    t_sample(e, JP_STATE_JETT, 2, 0, 0); /* undefined node */
    struct jp_rec_exec x = {{JP_REC_EXEC, sizeof x}, 1, JP_ID_UNAVAILABLE, JP_ID_UNAVAILABLE};
    cr_assert_eq(t_feed_raw(e, &x, sizeof x, NULL), 0);
    uint8_t pad[64] = {0};
    struct jp_rec_hdr ph = {JP_REC_PAD, sizeof pad};
    memcpy(pad, &ph, sizeof ph);
    cr_assert_eq(jp_engine_feed(e, pad, sizeof pad, NULL), 0); /* PAD: not counted */
    t_excerpt(e, 1, 2, 1, 0, "x = 1"); /* EXCERPT: not counted either */
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    J_EQ(json, "profile.totals.protocol_violations", "6");
    J_EQ(json, "profile.totals.attributed_samples", "1");
    J_EQ(json, "profile.totals.record_count_mismatch", "0");
    cr_assert_eq(status, JP_STATUS_COMPLETE);
    free(json);
    jp_engine_free(e);
}

Test(stream, record_count_mismatch_says_records_were_lost)
{
    struct jp_engine *e = fresh();
    t_simple_cpu(e);
    t_stop(e, JP_TERM_RETURNED, 10, 10, 2); /* the producer sent two more than arrived */
    char *json, *human;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, &human, &json, &status);
    cr_assert_eq(status, JP_STATUS_PARTIAL);
    J_EQ(json, "profile.partial_reason", "records_dropped");
    J_EQ(json, "profile.totals.record_count_mismatch", "2");
    cr_assert(strstr(human, "records lost in transit") != NULL, "%s", human);
    free(json);
    free(human);
    jp_engine_free(e);
}

Test(stream, counters_are_cumulative_and_drops_make_partial)
{
    struct jp_engine *e = fresh();
    t_simple_cpu(e);
    t_counters(e, 5, 1, 0, 0, 0, 0);
    t_counters(e, 9, 2, 3, 0, 0, 4);
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.status", "partial");
    J_EQ(json, "profile.partial_reason", "records_dropped");
    J_EQ(json, "profile.totals.requested_ticks", "9");
    J_EQ(json, "profile.totals.dropped_ticks", "3");
    J_EQ(json, "profile.totals.lost_records", "4");
    /* dropped data: suggestions are withheld */
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.suggestions"), 0);
    free(json);
    jp_engine_free(e);
}

static void check_ending(uint32_t ending, const char *status, const char *reason,
                         const char *termination)
{
    struct jp_engine *e = fresh();
    t_simple_cpu(e);
    char *json;
    t_render(e, ending, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.status", status);
    J_EQ(json, "profile.partial_reason", reason);
    J_EQ(json, "profile.termination", termination);
    J_EQ(json, "profile.totals.wall_duration_ns", "unavailable");
    J_EQ(json, "profile.totals.observed_rate_hz", "unavailable");
    J_EQ(json, "profile.totals.record_count_mismatch", "unavailable");
    free(json);
    jp_engine_free(e);
}

Test(stream, endings_without_run_stop)
{
    check_ending(JP_END_PRODUCER_LOST, "partial", "producer_lost", "unavailable");
    check_ending(JP_END_SHUTDOWN, "partial", "interrupted", "interrupted");
    check_ending(JP_END_TRUNCATED, "partial", "missing_stop_event", "unavailable");
    check_ending(JP_END_STOP, "partial", "missing_stop_event", "unavailable");
    check_ending(JP_END_COLLECTOR_FAILURE, "partial", "collector_failure", "unavailable");
}

Test(stream, termination_comes_from_run_stop)
{
    struct jp_engine *e = fresh();
    t_simple_cpu(e);
    t_stop(e, JP_TERM_RUNTIME_ERROR, 10, 10, 0);
    char *json;
    t_render(e, JP_END_PRODUCER_LOST, NULL, NULL, &json, NULL); /* ending ignored: stream is whole */
    J_EQ(json, "profile.status", "complete");
    J_EQ(json, "profile.termination", "runtime_error");
    free(json);
    jp_engine_free(e);

    e = fresh();
    t_simple_cpu(e);
    t_stop(e, JP_TERM_INTERRUPTED, 10, 10, 0);
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.status", "partial");
    J_EQ(json, "profile.partial_reason", "interrupted");
    J_EQ(json, "profile.termination", "interrupted");
    free(json);
    jp_engine_free(e);
}

/* What the agent does when its daemon dies: feed its own RUN_START and COUNTERS copies and
 * render with JP_END_COLLECTOR_FAILURE. */
Test(stream, collector_failure_with_nothing_recorded_is_unavailable)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_MEMORY, 0, 500, 10, 32 * MiB, 64 * MiB);
    t_counters(e, 0, 0, 0, 0, 0, 12);
    char *json, *human;
    uint32_t status;
    t_render(e, JP_END_COLLECTOR_FAILURE, NULL, &human, &json, &status);
    cr_assert_eq(status, JP_STATUS_UNAVAILABLE);
    J_EQ(json, "profile.status", "unavailable");
    J_EQ(json, "profile.partial_reason", "collector_failure"); /* first by priority */
    J_EQ(json, "profile.termination", "unavailable");
    J_EQ(json, "profile.totals.allocation_count", "0");
    J_EQ(json, "profile.bottlenecks", "[]");
    cr_assert(strstr(human, "status: unavailable (collector_failure: the collector failed") != NULL,
              "%s", human);
    cr_assert(strstr(human, "\nalso: records_dropped: records were lost") != NULL, "%s", human);
    struct jp_rendered r;
    struct jp_report_opts o = {sizeof o, -1, -1, JP_END_COLLECTOR_FAILURE, JP_OUT_TOON, 0, 0, 0};
    cr_assert_eq(jp_profile_render(e, &o, &r), 0);
    cr_assert_str_eq(r.reason, "collector_failure");
    cr_assert_null(r.human);
    jp_rendered_free(&r);
    free(json);
    free(human);
    jp_engine_free(e);
}

Test(stream, hostile_bytes_never_crash)
{
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (int round = 0; round < 200; round++) {
        struct jp_engine *e = fresh();
        t_simple_cpu(e);
        for (int i = 0; i < 200; i++) {
            uint8_t buf[JP_REC_MAX_SIZE];
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            uint32_t len = (uint32_t)(x % 80u) + 4u;
            for (uint32_t b = 0; b < len; b++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf[b] = (uint8_t)x;
            }
            /* keep the header plausible half the time so deeper paths are reached */
            if (x & 1) {
                struct jp_rec_hdr h = {(uint16_t)(x % JP_REC_TYPE_LIMIT), (uint16_t)len};
                memcpy(buf, &h, sizeof h);
            }
            const char *why = NULL;
            int r = jp_engine_feed(e, buf, len, &why);
            cr_assert(r == 0 || (r == -EPROTO && why != NULL), "r=%d", r);
        }
        struct jp_rendered out;
        struct jp_report_opts o = {sizeof o, -1, -1, JP_END_PRODUCER_LOST,
                                   JP_OUT_TOON | JP_OUT_HUMAN, 0, 0, 0};
        cr_assert_eq(jp_profile_render(e, &o, &out), 0);
        size_t at = 0;
        cr_assert_eq(jp_utf8_validate(out.toon, out.toon_len, &at), 0, "TOON byte %zu", at);
        cr_assert_eq(jp_utf8_validate(out.human, out.human_len, &at), 0, "human byte %zu", at);
        jp_rendered_free(&out);
        jp_engine_free(e);
    }
}

/* A frame named with bytes that are not UTF-8 ends the stream at the trust boundary, so it
 * never reaches a report (which must be a valid UTF-8 document). */
Test(stream, names_that_are_not_utf8_are_protocol_violations)
{
    static const char *const bad[] = {"\xff\xfe", "f\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                      "ok\xe2\x82"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct jp_engine *e = fresh();
        t_simple_cpu(e);
        uint8_t buf[128];
        size_t n = strlen(bad[i]);
        struct jp_rec_frame_def r = {.h = {JP_REC_FRAME_DEF, (uint16_t)(36 + 1 + n)},
                                     .frame_id = 2, .source_id = 1, .kind = JP_FRAME_FUNCTION,
                                     .ns_len = 1, .fn_len = (uint16_t)n};
        memcpy(buf, &r, sizeof r);
        buf[36] = 'a';
        memcpy(buf + 37, bad[i], n);
        const char *why = NULL;
        cr_assert_eq(t_feed_raw(e, buf, r.h.size, &why), -EPROTO, "name %zu accepted", i);
        cr_assert_str_eq(why, "frame function name is not valid UTF-8");
        jp_engine_free(e);
    }
}

/* Control characters are well-formed UTF-8 and allowed in names; the writers escape them:
 * TOON quotes C0 as \u00xx, the human text shows C0 as \xHH and C1 as \u00HH. */
Test(stream, control_characters_in_names_are_escaped_by_both_writers)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/s.jett");
    t_frame(e, 1, 1, "n\x1b[2J", "f\xc2\x9b" "1m", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_sample(e, JP_STATE_JETT, 1, 2, 1);
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *toon, *human, *json;
    t_render(e, JP_END_STOP, &toon, &human, &json, NULL); /* decoded strictly: valid UTF-8 */
    cr_assert_eq(jp_utf8_validate(toon, strlen(toon), NULL), 0);
    cr_assert_eq(jp_utf8_validate(human, strlen(human), NULL), 0);
    J_EQ(json, "profile.bottlenecks.0.namespace", "n\x1b[2J");
    cr_assert(strstr(toon, "namespace: \"n\\u001b[2J\"") != NULL, "%s", toon);
    cr_assert(strstr(human, "#1 n\\x1b[2J.f\\u009b1m (src/s.jett:1)") != NULL, "%s", human);
    cr_assert_null(strchr(human, '\x1b'));
    cr_assert_null(strstr(human, "\xc2\x9b"));
    free(toon);
    free(human);
    free(json);
    jp_engine_free(e);
}

/* Structurally bad records are refused with the reason jp_rec_validate gives, whichever path
 * the engine checks them on: headers it cannot step over, and the per-event records (samples,
 * allocation events) in a wrong size or with bad fields. */
Test(stream, bad_records_get_the_validators_reason)
{
    static const struct {
        uint16_t type, size;
        uint8_t state; /* CPU_SAMPLE: its state byte, at offset 4 */
        const char *reason;
    } cases[] = {
        {JP_REC_PAD, JP_REC_MAX_SIZE + 4, 0, "record larger than JP_REC_MAX_SIZE"},
        {99, JP_REC_MAX_SIZE + 4, 0, "unknown record type"},
        {JP_REC_PAD, 2, 0, "record smaller than its fixed part"},
        {JP_REC_CPU_SAMPLE, 2, 0, "record smaller than its fixed part"},
        {JP_REC_ALLOC, 40, 0, "fixed-size record has the wrong size"},
        {JP_REC_FREE, 24, 0, "record smaller than its fixed part"},
        {JP_REC_RESIZE, 64, 0, "fixed-size record has the wrong size"},
        {JP_REC_CPU_SAMPLE, 32, JP_STATE_LIMIT, "unknown sample state"},
        {JP_REC_CPU_SAMPLE, 32, JP_STATE_JETT, "jett sample without a call-chain node"},
    };
    static uint8_t buf[JP_REC_MAX_SIZE + 64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jp_engine *e = t_engine();
        t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
        memset(buf, 0, sizeof buf);
        struct jp_rec_hdr h = {cases[i].type, cases[i].size};
        memcpy(buf, &h, sizeof h);
        buf[4] = cases[i].state;
        const char *why = NULL, *vwhy = NULL;
        uint32_t len = cases[i].size > sizeof h ? cases[i].size : JP_SLOT_SIZE;
        cr_assert_eq(jp_rec_validate(buf, len, &vwhy), -EPROTO, "case %zu", i);
        cr_assert_eq(jp_engine_feed(e, buf, len, &why), -EPROTO, "case %zu", i);
        cr_assert_str_eq(why, cases[i].reason, "case %zu", i);
        cr_assert_str_eq(vwhy, cases[i].reason, "case %zu", i);
        jp_engine_free(e);
    }
}

/* jp_engine_feed_slot, the daemon's per-slot entry: it takes a one-slot sample or allocation
 * event of an open stream exactly as jp_engine_feed would (counted in the record count,
 * violations counted), and declines (1) everything else having changed nothing, so the
 * caller's jp_engine_feed of the same record still decides it with its reason. */
static int slot_feed(struct jp_engine *e, const void *rec, uint32_t len)
{
    uint8_t slot[JP_SLOT_SIZE] = {0};
    memcpy(slot, rec, len < sizeof slot ? len : sizeof slot);
    return jp_engine_feed_slot(e, slot);
}

/* A memory run with one function, main (frame 1); no node yet. */
static void memory_run_with_main(struct jp_engine *e)
{
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    t_frame(e, 1, 1, "m", "main", 0, 10, 1, JP_FRAME_FUNCTION);
}

Test(stream, feed_slot_takes_events_and_declines_everything_else_untouched)
{
    struct jp_engine *e = fresh();
    struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, sizeof a}, .node = 1, .allocation_id = 1,
                             .size = 40};
    const char *why = NULL;
    cr_assert_eq(slot_feed(e, &a, sizeof a), 1, "before RUN_START");
    cr_assert_eq(t_feed_raw(e, &a, sizeof a, &why), -EPROTO);
    cr_assert_str_eq(why, "record before RUN_START");
    jp_engine_free(e);

    e = fresh();
    memory_run_with_main(e);
    struct jp_rec_node_def nd = {{JP_REC_NODE_DEF, sizeof nd}, 1, 0, 1};
    cr_assert_eq(slot_feed(e, &nd, sizeof nd), 1, "a definition is not an event");
    t_node(e, 1, 0, 1); /* still undefined until fed: the slot did not define it */
    struct jp_rec_hdr pad = {JP_REC_PAD, JP_SLOT_SIZE};
    cr_assert_eq(slot_feed(e, &pad, sizeof pad), 1, "PAD");
    struct jp_rec_alloc short_a = a;
    short_a.h.size = JP_SLOT_SIZE - 1;
    cr_assert_eq(slot_feed(e, &short_a, sizeof short_a), 1, "a size other than the slot's");
    struct jp_rec_cpu_sample bad = {.h = {JP_REC_CPU_SAMPLE, sizeof bad},
                                    .state = JP_STATE_LIMIT, .node = 1};
    cr_assert_eq(slot_feed(e, &bad, sizeof bad), 1, "a sample the validator refuses");
    cr_assert_eq(t_feed_raw(e, &bad, sizeof bad, &why), -EPROTO, "and the feed names it");
    cr_assert_str_eq(why, "unknown sample state");
    jp_engine_free(e);

    e = fresh();
    memory_run_with_main(e);
    t_node(e, 1, 0, 1);
    cr_assert_eq(slot_feed(e, &a, sizeof a), 0);
    cr_assert_eq(slot_feed(e, &a, sizeof a), 0, "a reused id is a counted violation");
    struct jp_rec_free f = {.h = {JP_REC_FREE, sizeof f}, .node = 1, .allocation_id = 1,
                            .old_size = 40};
    cr_assert_eq(slot_feed(e, &f, sizeof f), 0);
    /* RUN_STOP counts the three slot-fed events: a count they were missing from would say
     * records were lost. */
    t_stop(e, JP_TERM_RETURNED, 10, 10, 3);
    cr_assert_eq(slot_feed(e, &a, sizeof a), 1, "after RUN_STOP");
    cr_assert_eq(t_feed_raw(e, &a, sizeof a, &why), -EPROTO);
    cr_assert_str_eq(why, "record after RUN_STOP");
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    J_EQ(json, "profile.totals.allocation_count", "1");
    J_EQ(json, "profile.totals.freed_bytes", "40");
    J_EQ(json, "profile.totals.protocol_violations", "1");
    J_EQ(json, "profile.totals.record_count_mismatch", "0");
    free(json);
    jp_engine_free(e);
}

/* jp_engine_feed_slots, the drain's run of slots: each slot as jp_engine_feed_slot would take
 * it, stopping at the first it declines with the count of those before; the declined slot and
 * everything after it untouched. */
Test(stream, feed_slots_stops_at_the_first_declined_slot)
{
    struct jp_engine *e = fresh();
    memory_run_with_main(e);
    t_node(e, 1, 0, 1);
    uint8_t run[6][JP_SLOT_SIZE];
    memset(run, 0, sizeof run);
    for (uint64_t i = 0; i < 3; i++) { /* three allocations */
        struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, sizeof a}, .node = 1,
                                 .allocation_id = i + 1u, .size = 10u * (i + 1u)};
        memcpy(run[i], &a, sizeof a);
    }
    struct jp_rec_hdr pad = {JP_REC_PAD, JP_SLOT_SIZE}; /* declined: not an event */
    memcpy(run[3], &pad, sizeof pad);
    struct jp_rec_free f = {.h = {JP_REC_FREE, sizeof f}, .node = 1, .allocation_id = 1,
                            .old_size = 10};
    memcpy(run[4], &f, sizeof f);
    memcpy(run[5], &f, sizeof f);
    uint64_t fed = 99;
    cr_assert_eq(jp_engine_feed_slots(e, run, 6, &fed), 1, "PAD is declined");
    cr_assert_eq(fed, 3, "the three allocations before it");
    struct jp_engine_summary s;
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.allocation_count, 3);
    cr_assert_eq(s.freed_bytes, 0, "nothing after the declined slot was fed");
    cr_assert_eq(jp_engine_feed_slots(e, run[4], 2, &fed), 0, "a free, then a double free");
    cr_assert_eq(fed, 2);
    cr_assert_eq(jp_engine_feed_slots(e, run[0], 0, &fed), 0, "no slots");
    cr_assert_eq(fed, 0);
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.freed_bytes, 10);
    cr_assert_eq(s.violations, 1, "the double free is counted, not refused");
    t_stop(e, JP_TERM_RETURNED, 10, 10, 5);
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    J_EQ(json, "profile.totals.record_count_mismatch", "0");
    free(json);
    jp_engine_free(e);
}

/* Hold mode (a daemon merging several rings): an event naming what the stream has not given
 * yet - a node not defined, an id not live, an id live with another size - is handed back with
 * nothing changed, not even the record count; once what it names came, the same record is
 * taken. With hold off the same record is the counted violation. */
Test(stream, hold_mode_hands_back_what_names_the_future_and_changes_nothing)
{
    struct jp_engine *e = fresh();
    memory_run_with_main(e);
    jp_engine_set_hold(e, 1);
    struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, sizeof a}, .node = 1, .allocation_id = 5,
                             .size = 40};
    struct jp_rec_resize rz = {.h = {JP_REC_RESIZE, sizeof rz}, .node = 1, .allocation_id = 5,
                               .old_size = 40, .new_size = 64};
    struct jp_rec_free fr = {.h = {JP_REC_FREE, sizeof fr}, .node = 1, .allocation_id = 5,
                             .old_size = 64};
    struct jp_engine_summary before, after;
    cr_assert_eq(jp_engine_summary(e, &before), 0);
    const char *why = NULL;
    cr_assert_eq(t_feed_raw(e, &a, sizeof a, &why), JP_ENGINE_HELD, "node 1 is not defined");
    cr_assert_eq(slot_feed(e, &fr, sizeof fr), JP_ENGINE_HELD, "id 5 is not live");
    cr_assert_eq(jp_engine_summary(e, &after), 0);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0, "a held record changes nothing");
    t_node(e, 1, 0, 1);
    cr_assert_eq(t_feed_raw(e, &a, sizeof a, &why), 0);
    cr_assert_eq(slot_feed(e, &fr, sizeof fr), JP_ENGINE_HELD, "live with 40 bytes, not 64");
    uint8_t run[2 * JP_SLOT_SIZE];
    memcpy(run, &rz, sizeof rz);
    memcpy(run + JP_SLOT_SIZE, &fr, sizeof fr);
    uint64_t fed = 0;
    cr_assert_eq(jp_engine_feed_slots(e, run, 2, &fed), 0);
    cr_assert_eq(fed, 2);
    cr_assert_eq(slot_feed(e, &fr, sizeof fr), JP_ENGINE_HELD, "a double free is held too");
    jp_engine_set_hold(e, 0);
    cr_assert_eq(slot_feed(e, &fr, sizeof fr), 0);
    cr_assert_eq(jp_engine_summary(e, &after), 0);
    cr_assert_eq(after.violations, 1, "without hold it is the violation");
    cr_assert_eq(after.allocation_count, 1);
    cr_assert_eq(after.resize_count, 1);
    cr_assert_eq(after.freed_bytes, 64);
    /* the node, the allocation, the resize, the free and the second free: each held attempt
     * before them counted nothing */
    cr_assert_eq(after.records, before.records + 5, "held records were never counted");
    jp_engine_free(e);
}
