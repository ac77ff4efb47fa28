/* The human writer (render/human.c): units and their boundaries, durations, the collapsed
 * chain of a deep recursion, the low-sample note, the memory top lists over every site, the
 * verbose totals block only with JP_OUT_VERBOSE, and the run id only when the daemon gives one.
 * The golden files pin the whole layout; these pin each rule at its edges. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/engine/helpers.h"
#include "render/report.h"

static char *human_of(struct jp_engine *e, uint32_t outputs, uint64_t run_id, char **json)
{
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_STOP, .outputs = JP_OUT_TOON | outputs,
                               .run_id = run_id};
    char *human;
    t_render_opts(e, &o, NULL, &human, json, NULL);
    return human;
}

/* One memory site `f` with one allocation of `bytes` that stays live. */
static struct jp_engine *one_allocation(uint64_t bytes)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_MEMORY, 0, 500, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    t_frame(e, 1, 1, "m", "f", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_alloc(e, 1, 1, bytes);
    t_stop(e, JP_TERM_RETURNED, 1000000, 0, 0);
    return e;
}

Test(human, bytes_are_exact_below_1024_then_in_binary_units)
{
    static const struct {
        uint64_t bytes;
        const char *shown;
    } cases[] = {
        {0, "0 B"},
        {1023, "1023 B"},
        {1024, "1.0 KiB"},
        {1075, "1.0 KiB"},             /* 1.0498 KiB rounds down */
        {1076, "1.1 KiB"},             /* 1.0508 rounds up */
        {1536, "1.5 KiB"},
        {1048575, "1.0 MiB"},          /* 1023.999 KiB would print 1024.0 KiB: the next unit */
        {1572864, "1.5 MiB"},
        {757986000, "722.9 MiB"},      /* the raw `allocated 757986000 bytes` of before */
        {UINT64_C(3) << 30, "3.0 GiB"},
    };
    char want[96];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jp_engine *e = one_allocation(cases[i].bytes);
        char *json, *h = human_of(e, JP_OUT_HUMAN, 0, &json);
        snprintf(want, sizeof want, "\nbytes: %s allocated (%s to sites), 0 B freed, ",
                 cases[i].shown, cases[i].shown);
        cr_assert(strstr(h, want) != NULL, "%" PRIu64 " bytes: want '%s' in\n%s",
                  cases[i].bytes, want, h);
        /* the same unit in the ranking table, the top lists and the entry's details */
        if (cases[i].bytes) {
            snprintf(want, sizeof want, "%s       1  m.f", cases[i].shown);
            cr_assert(strstr(h, want) != NULL, "table: want '%s' in\n%s", want, h);
            snprintf(want, sizeof want, "retained %s, live at peak %s\n", cases[i].shown,
                     cases[i].shown);
            cr_assert(strstr(h, want) != NULL, "details: want '%s' in\n%s", want, h);
        }
        free(h);
        free(json);
        jp_engine_free(e);
    }
}

/* A CPU run of n jett samples in one function, over wall_ns. */
static struct jp_engine *cpu_run(uint32_t n, uint64_t wall_ns)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/s.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    for (uint32_t i = 0; i < n; i++)
        t_sample(e, JP_STATE_JETT, 1, 2, 1);
    t_stop(e, JP_TERM_RETURNED, wall_ns, JP_NS_UNAVAILABLE, 0);
    return e;
}

Test(human, durations_are_seconds_to_the_millisecond)
{
    static const struct {
        uint64_t ns;
        const char *shown;
    } cases[] = {
        {1612148011, "termination: returned after 1.612 s (CPU time unavailable)\n"},
        {2000000, "termination: returned after 0.002 s ("},
        {1499999, "termination: returned after 0.001 s ("},
        {1500000, "termination: returned after 0.002 s ("}, /* half a millisecond rounds up */
        {400000, "termination: returned after < 0.001 s ("}, /* not a misleading 0.000 */
        {UINT64_C(125000000000), "termination: returned after 125.000 s ("},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jp_engine *e = cpu_run(1, cases[i].ns);
        char *json, *h = human_of(e, JP_OUT_HUMAN, 0, &json);
        cr_assert(strstr(h, cases[i].shown) != NULL, "want '%s' in\n%s", cases[i].shown, h);
        free(h);
        free(json);
        jp_engine_free(e);
    }
}

Test(human, under_100_jett_samples_the_header_says_the_profile_says_little)
{
    struct jp_engine *e = cpu_run(99, 1000000000u);
    char *json, *h = human_of(e, JP_OUT_HUMAN, 0, &json);
    cr_assert(strstr(h, "\nnote: only 99 samples in Jett code (fewer than 100): this profile says "
                        "little\n") != NULL, "%s", h);
    /* in the header, before the ranking */
    cr_assert(strstr(h, "note: ") < strstr(h, "\nrank "), "%s", h);
    free(h);
    free(json);
    jp_engine_free(e);

    e = cpu_run(100, 1000000000u);
    h = human_of(e, JP_OUT_HUMAN, 0, &json);
    cr_assert_null(strstr(h, "note: "), "%s", h);
    free(h);
    free(json);
    jp_engine_free(e);
}

/* main > down ×126 > <truncated-stack>: a recursion past 128 frames. */
Test(human, a_deep_recursion_chain_collapses_each_run_of_one_frame)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/r.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "<root>", "down", 10, 19, 3, JP_FRAME_FUNCTION);
    t_frame(e, 3, 0, "<root>", "<truncated-stack>", 0, 0, 0, JP_FRAME_TRUNCATED);
    t_node(e, 1, 0, 1);
    for (uint32_t n = 2; n < JP_MAX_DEPTH; n++)
        t_node(e, n, n - 1, 2);
    t_node(e, JP_MAX_DEPTH, JP_MAX_DEPTH - 1, 3);
    t_sample(e, JP_STATE_JETT, JP_MAX_DEPTH, 0, 0);
    t_sample(e, JP_STATE_JETT, 5, 4, 1); /* down at depth 5: its chain ends at main > down */
    t_stop(e, JP_TERM_RETURNED, 1000000, 0, 0);
    char *json, *h = human_of(e, JP_OUT_HUMAN, 0, &json);
    /* TOON keeps every frame */
    J_EQ(json, "profile.bottlenecks.2.function", "<truncated-stack>");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.2.call_chains.0.frames"), JP_MAX_DEPTH);
    const char *line = strstr(h, "\n   chain 1 samples: main > down \xc3\x97" "126 > "
                                 "<truncated-stack>\n");
    cr_assert(line != NULL, "%s", h);
    cr_assert(strstr(h, "\n   chain 2 samples: main > down\n") != NULL, "%s", h);
    /* a frame that does not repeat carries no count */
    cr_assert_null(strstr(h, "main \xc3\x97"), "%s", h);
    cr_assert_null(strstr(h, "down > down"), "%s", h);
    free(h);
    free(json);
    jp_engine_free(e);
}

/* main > (ping > pong) ×63 > <truncated-stack>: a mutual recursion past 128 frames collapses
 * by its repeating unit; a unit that repeats once stays as it is. */
Test(human, a_mutual_recursion_chain_collapses_by_its_repeating_unit)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/p.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "p", "ping", 10, 19, 3, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "p", "pong", 20, 29, 5, JP_FRAME_FUNCTION);
    t_frame(e, 4, 0, "<root>", "<truncated-stack>", 0, 0, 0, JP_FRAME_TRUNCATED);
    t_node(e, 1, 0, 1);
    for (uint32_t n = 2; n < JP_MAX_DEPTH; n++)
        t_node(e, n, n - 1, n % 2 ? 3 : 2);
    t_node(e, JP_MAX_DEPTH, JP_MAX_DEPTH - 1, 4);
    t_sample(e, JP_STATE_JETT, JP_MAX_DEPTH, 0, 0);
    t_stop(e, JP_TERM_RETURNED, 1000000, 0, 0);
    char *json, *h = human_of(e, JP_OUT_HUMAN, 0, &json);
    cr_assert(strstr(h, "\n   chain 1 samples: main > (p.ping > p.pong) \xc3\x97" "63 > "
                        "<truncated-stack>\n") != NULL, "%s", h);
    /* pong's own chain ends at its root-most occurrence: ping > pong once, no count */
    cr_assert(strstr(h, "\n   chain 1 samples: main > p.ping > p.pong\n") != NULL, "%s", h);
    free(h);
    free(json);
    jp_engine_free(e);
}

/* The site that keeps 1 MiB alive ranks below a 5% threshold on allocated bytes, yet leads
 * the retained list; the live-at-peak list has the churning site first. */
Test(human, retained_and_peak_lists_cover_sites_below_the_threshold)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_MEMORY, 0, 500, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/c.jett");
    t_frame(e, 1, 1, "c", "churn", 0, 9, 3, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "c", "keep", 10, 19, 7, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 0, 2);
    t_alloc(e, 2, 1, 1 * MiB);
    t_alloc(e, 1, 2, 100 * MiB);
    t_free(e, 1, 2, 100 * MiB);
    t_stop(e, JP_TERM_RETURNED, 1000000, 0, 0);
    char *json, *h = human_of(e, JP_OUT_HUMAN, 0, &json);
    J_EQ(json, "profile.totals.eligible_bottlenecks", "1"); /* keep: 0.99% < 5% */
    J_EQ(json, "profile.bottlenecks.0.function", "churn");
    cr_assert(strstr(h, "\nretained at the end, largest sites (1 of 1):\n"
                        "   1.0 MiB  c.keep  src/c.jett:7\n"
                        "live at the peak, largest sites (2 of 2):\n"
                        "   100.0 MiB  c.churn  src/c.jett:3\n"
                        "     1.0 MiB  c.keep   src/c.jett:7\n") != NULL, "%s", h);
    free(h);
    free(json);
    jp_engine_free(e);
}

Test(human, top_lists_show_five_sites_largest_first_ties_in_definition_order)
{
    static const uint64_t kept[] = {10, 30, 30, 70, 50, 60, 20};
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/t.jett");
    char fn[8];
    for (uint32_t i = 0; i < 7; i++) {
        snprintf(fn, sizeof fn, "s%u", i + 1);
        t_frame(e, i + 1, 1, "t", fn, i * 10, i * 10 + 5, i + 1, JP_FRAME_FUNCTION);
        t_node(e, i + 1, 0, i + 1);
        t_alloc(e, i + 1, i + 1, kept[i]);
    }
    t_stop(e, JP_TERM_RETURNED, 1000000, 0, 0);
    char *json, *h = human_of(e, JP_OUT_HUMAN, 0, &json);
    cr_assert(strstr(h, "\nretained at the end, largest sites (5 of 7):\n"
                        "   70 B  t.s4  src/t.jett:4\n"
                        "   60 B  t.s6  src/t.jett:6\n"
                        "   50 B  t.s5  src/t.jett:5\n"
                        "   30 B  t.s2  src/t.jett:2\n"
                        "   30 B  t.s3  src/t.jett:3\n"
                        "live at the peak, ") != NULL, "%s", h);
    free(h);
    free(json);
    jp_engine_free(e);
}

Test(human, verbose_block_only_with_the_flag_and_the_toon_unchanged)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 1000, 2400, 10, 32 * MiB, 64 * MiB);
    t_golden_cpu_program(e);
    t_golden_cpu_samples(e);
    t_stop(e, JP_TERM_RETURNED, 1000000000u, 500000000u, 0);
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_STOP, .outputs = JP_OUT_HUMAN | JP_OUT_TOON};
    char *toon, *plain, *verbose, *json, *toon_v;
    t_render_opts(e, &o, &toon, &plain, &json, NULL);
    o.outputs |= JP_OUT_VERBOSE;
    t_render_opts(e, &o, &toon_v, &verbose, NULL, NULL);
    cr_assert_str_eq(toon_v, toon, "the flag changes only the human text");
    cr_assert_null(strstr(plain, "totals:"), "%s", plain);
    t_human_has_totals(plain, json);
    /* verbose = the same report, then the block */
    size_t n = strlen(plain);
    cr_assert_eq(strncmp(verbose, plain, n), 0, "%s", verbose);
    const char *block = verbose + n;
    const char *head = "\ntotals:\n  requested_ticks: 30\n  recorded_samples: 20\n";
    cr_assert_eq(strncmp(block, head, strlen(head)), 0, "%s", block);
    cr_assert(strstr(block, "\n  observed_rate_hz: 20.00\n  wall_duration_ns: 1000000000\n"
                            "  process_cpu_duration_ns: 500000000\n") != NULL, "%s", block);
    /* one line per TOON total, nothing after */
    char *totals = t_json_get(json, "profile.totals");
    int want = 1, lines = 0;
    for (const char *p = totals; *p; p++)
        want += *p == ',';
    for (const char *p = block + strlen("\ntotals:\n"); *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, want, "%s", block);
    cr_assert(strstr(block, "\n  runtime_threads: unavailable\n") != NULL);
    cr_assert_eq(block[strlen(block) - 1], '\n');
    free(totals);
    free(toon);
    free(toon_v);
    free(plain);
    free(verbose);
    free(json);
    jp_engine_free(e);
}

Test(human, run_id_named_only_when_the_daemon_gives_one)
{
    struct jp_engine *e = cpu_run(3, 1000000);
    char *json, *none = human_of(e, JP_OUT_HUMAN, 0, &json);
    free(json);
    char *with = human_of(e, JP_OUT_HUMAN, 18446744073709551615u, &json);
    cr_assert_null(strstr(none, "run id"), "%s", none);
    cr_assert(strstr(with, "CPU profile\nstatus: complete\nrun id: 18446744073709551615\n"
                           "termination: ") == with, "%s", with);
    /* and nothing else differs */
    const char *rest = strstr(with, "termination: ");
    cr_assert_str_eq(rest, strstr(none, "termination: "));
    cr_assert_null(strstr(json, "run_id"), "the TOON never names a run id: %s", json);
    free(none);
    free(with);
    free(json);
    jp_engine_free(e);
}
