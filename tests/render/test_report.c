/* Report building and writers: exact thresholds where display rounding would differ,
 * percentage rounding, ordering keys 3 and 4, limit and counts, zero denominators, empty
 * profiles, TOON quoting, suggestion omission, human vs TOON agreement, and golden files. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/engine/helpers.h"
#include "render/report.h"

static struct jp_engine *fresh(void)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    return e;
}

Test(report, percent_rounds_half_away_from_zero_from_integers)
{
    cr_assert_eq(jp_percent_hundredths(1, 8), 1250);      /* 12.5 exactly */
    cr_assert_eq(jp_percent_hundredths(1, 3), 3333);      /* 33.333.. */
    cr_assert_eq(jp_percent_hundredths(2, 3), 6667);      /* 66.666.. rounds up */
    cr_assert_eq(jp_percent_hundredths(1, 20000), 1);     /* 0.005 -> 0.01 (half away) */
    cr_assert_eq(jp_percent_hundredths(1, 20001), 0);     /* just under half */
    cr_assert_eq(jp_percent_hundredths(9999, 200000), 500); /* 4.9995 displays as 5.00 */
    cr_assert_eq(jp_percent_hundredths(UINT64_MAX, UINT64_MAX), 10000); /* no overflow */
    cr_assert_eq(jp_percent_hundredths(5, 0), 0);
}

/* Memory sites with chosen byte counts: one allocation each from its own function. */
static void sites(struct jp_engine *e, uint32_t thr, uint32_t limit, const uint64_t *bytes,
                  uint32_t n)
{
    char fn[16];
    t_start(e, JP_MODE_MEMORY, 0, thr, limit, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/t.jett");
    for (uint32_t i = 0; i < n; i++) {
        snprintf(fn, sizeof fn, "s%u", i);
        t_frame(e, i + 1, 1, "t", fn, i * 10, i * 10 + 5, i + 1, JP_FRAME_FUNCTION);
        t_node(e, i + 1, 0, i + 1);
        t_alloc(e, i + 1, i + 1, bytes[i]);
    }
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
}

Test(report, threshold_compares_exact_counts_not_rounded_display)
{
    /* s0: 9999 of 200000 bytes = 4.9995%, displayed 5 but below a 5.00% threshold;
     * s1: 10000 = exactly 5%: eligible (>=). */
    uint64_t bytes[] = {9999, 10000, 180001};
    struct jp_engine *e = fresh();
    sites(e, 500, 10, bytes, 3);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.eligible_bottlenecks", "2");
    J_EQ(json, "profile.bottlenecks.0.function", "s2");
    J_EQ(json, "profile.bottlenecks.1.function", "s1");
    J_EQ(json, "profile.bottlenecks.1.allocation_percent", "5");
    free(json);
    jp_engine_free(e);

    /* 1 of 3 = 33.33..%: 33.33% admits it (10000 >= 9999), 33.34% does not (10000 < 10002),
     * though both would display the same 33.33 */
    uint64_t third[] = {1, 2};
    e = fresh();
    sites(e, 3333, 10, third, 2);
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.eligible_bottlenecks", "2");
    J_EQ(json, "profile.bottlenecks.1.allocation_percent", "33.33");
    free(json);
    struct jp_report_opts o = {sizeof o, 3334, -1, JP_END_STOP, JP_OUT_TOON | JP_OUT_HUMAN, 0, 0, 0};
    t_render_opts(e, &o, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.config.threshold_basis_points", "3334");
    J_EQ(json, "profile.totals.eligible_bottlenecks", "1");
    J_EQ(json, "profile.bottlenecks.0.allocation_percent", "66.67");
    free(json);
    jp_engine_free(e);
}

Test(report, limit_ranks_and_counts)
{
    uint64_t bytes[] = {10, 50, 30, 20, 40};
    struct jp_engine *e = fresh();
    sites(e, 0, 2, bytes, 5);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.eligible_bottlenecks", "5");
    J_EQ(json, "profile.totals.emitted_bottlenecks", "2");
    J_EQ(json, "profile.totals.truncated_bottlenecks", "3");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 2);
    J_EQ(json, "profile.bottlenecks.0.rank", "1");
    J_EQ(json, "profile.bottlenecks.0.function", "s1");
    J_EQ(json, "profile.bottlenecks.1.rank", "2");
    J_EQ(json, "profile.bottlenecks.1.function", "s4");
    free(json);
    jp_engine_free(e);
}

/* Equal impact and self everywhere: keys 3 and 4 decide (READINGS.md #3 and #5). */
Test(report, ordering_keys_three_and_four)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 100, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_STDLIB, "stdlib/a.jett");
    t_source(e, 2, JP_ORIGIN_DEPENDENCY, "dep/a.jett");
    t_source(e, 3, JP_ORIGIN_PROJECT, "src/b.jett");
    t_source(e, 4, JP_ORIGIN_PROJECT, "src/a.jett");
    /* frame: source, ns, fn, decl */
    t_frame(e, 1, 1, "m", "f", 0, 5, 1, JP_FRAME_FUNCTION);     /* stdlib */
    t_frame(e, 2, 0, "m", "f", 0, 0, 0, JP_FRAME_FUNCTION);     /* source unavailable: last */
    t_frame(e, 3, 2, "m", "f", 0, 5, 1, JP_FRAME_FUNCTION);     /* dependency */
    t_frame(e, 4, 3, "m", "f", 0, 5, 1, JP_FRAME_FUNCTION);     /* project, path src/b */
    t_frame(e, 5, 4, "m", "f", 7, 9, 2, JP_FRAME_FUNCTION);     /* project src/a, start 7 */
    t_frame(e, 6, 4, "m", "f", 3, 9, 3, JP_FRAME_FUNCTION);     /* project src/a, start 3 */
    t_frame(e, 7, 4, "m", "f", 3, 8, 4, JP_FRAME_FUNCTION);     /* start 3, end 8 */
    t_frame(e, 8, 4, "a", "z", 0, 5, 5, JP_FRAME_FUNCTION);     /* namespace a < m */
    t_frame(e, 9, 4, "m", "F", 0, 5, 6, JP_FRAME_FUNCTION);     /* F (0x46) < f (0x66) */
    t_frame(e, 10, 4, "Z", "f", 0, 5, 7, JP_FRAME_FUNCTION);    /* Z (0x5a) < a */
    t_frame(e, 11, 4, "m", "ff", 0, 5, 8, JP_FRAME_FUNCTION);   /* f is a prefix of ff */
    for (uint32_t i = 1; i <= 11; i++) {
        t_node(e, i, 0, i);
        t_sample(e, JP_STATE_JETT, i, 0, 0);
    }
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    const char *want[][3] = {
        {"Z", "f", "7"},  {"a", "z", "5"}, {"m", "F", "6"},
        {"m", "f", "4"},  /* src/a 3..8 */
        {"m", "f", "3"},  /* src/a 3..9 */
        {"m", "f", "2"},  /* src/a 7..9 */
        {"m", "f", "1"},  /* src/b (line 1, project) */
        {"m", "f", "1"},  /* dependency */
        {"m", "f", "1"},  /* stdlib */
        {"m", "f", "unavailable"},
        {"m", "ff", "8"},
    };
    const char *want_path[] = {"src/a.jett", "src/a.jett", "src/a.jett", "src/a.jett",
                               "src/a.jett", "src/a.jett", "src/b.jett", "dep/a.jett",
                               "stdlib/a.jett", "unavailable", "src/a.jett"};
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 11);
    char path[96];
    for (int i = 0; i < 11; i++) {
        snprintf(path, sizeof path, "profile.bottlenecks.%d.namespace", i);
        J_EQ(json, path, want[i][0]);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.function", i);
        J_EQ(json, path, want[i][1]);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.line", i);
        J_EQ(json, path, want[i][2]);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.path", i);
        J_EQ(json, path, want_path[i]);
    }
    free(json);
    jp_engine_free(e);
}

Test(report, zero_denominator_gives_empty_list_with_totals)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_sample(e, JP_STATE_RUNTIME, 0, 0, 0);
    t_sample(e, JP_STATE_UNAVAILABLE, 0, 0, 0);
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json, *toon;
    t_render(e, JP_END_STOP, &toon, NULL, &json, NULL);
    J_EQ(json, "profile.bottlenecks", "[]");
    cr_assert(strstr(toon, "\n  bottlenecks: []\n") != NULL);
    J_EQ(json, "profile.totals.recorded_samples", "2");
    J_EQ(json, "profile.totals.eligible_bottlenecks", "0");
    free(json);
    free(toon);
    jp_engine_free(e);

    /* memory: only zero-size allocations, so no attributed bytes */
    uint64_t zero[] = {0, 0};
    e = fresh();
    sites(e, 0, 10, zero, 2);
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.totals.allocation_count", "2");
    J_EQ(json, "profile.bottlenecks", "[]");
    free(json);
    jp_engine_free(e);
}

Test(report, toon_quotes_what_needs_quoting)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/my file,v2.jett");
    const char *names[][2] = {{"a,b", "true"}, {"x:y", "say \"hi\"\\"}, {"-neg", "123"},
                              {"#hash", "1e5"}, {" pad", "tab\there"}, {"ctl\x01", "[x]{y}"},
                              {"ünï", "null"}};
    for (uint32_t i = 0; i < 7; i++) {
        t_frame(e, i + 1, 1, names[i][0], names[i][1], i, i + 1, i + 1, JP_FRAME_FUNCTION);
        t_node(e, i + 1, 0, i + 1);
        for (uint32_t k = 0; k <= i; k++) /* distinct counts fix the order */
            t_sample(e, JP_STATE_JETT, i + 1, 1, 1);
    }
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json, *human;
    t_render(e, JP_END_STOP, NULL, &human, &json, NULL);
    /* the human text shows control characters escaped, never raw */
    cr_assert(strstr(human, "ctl\\x01.[x]{y}") != NULL, "%s", human);
    cr_assert(strstr(human, "tab\\x09here") != NULL);
    cr_assert_null(strchr(human, '\x01'));
    free(human);
    char path[96];
    for (int i = 0; i < 7; i++) {
        int rank = 6 - i;
        snprintf(path, sizeof path, "profile.bottlenecks.%d.namespace", rank);
        J_EQ(json, path, names[i][0]);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.function", rank);
        J_EQ(json, path, names[i][1]);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.path", rank);
        J_EQ(json, path, "src/my file,v2.jett");
        snprintf(path, sizeof path, "profile.bottlenecks.%d.hot_lines.0.path", rank);
        J_EQ(json, path, "src/my file,v2.jett");
    }
    /* values that look like numbers or words stay strings */
    J_EQ(json, "profile.bottlenecks.6.function", "true");
    char *raw = t_json_get(json, "profile.bottlenecks.4.function");
    cr_assert_str_eq(raw, "123");
    free(raw);
    cr_assert(strstr(json, "\"function\":\"123\"") != NULL);
    cr_assert(strstr(json, "\"function\":\"null\"") != NULL);
    free(json);
    jp_engine_free(e);
}

Test(report, decoder_is_strict_so_these_checks_can_fail)
{
    /* the contract's printed sample: list items without "- " */
    char *err = NULL;
    const char *doc = "profile:\n  bottlenecks[1]:\n    rank: 1\n";
    char *j = tl_toon_decode(doc, strlen(doc), &err);
    cr_assert_null(j);
    cr_assert(err != NULL && strstr(err, "invalid TOON") != NULL);
    free(err);
}

Test(report, decoder_rejects_bytes_that_are_not_utf8)
{
    /* a TOON document is UTF-8 text: the helper must not replace bad bytes and pass */
    char *err = NULL;
    const char *bad = "profile:\n  function: \xff\xfe\n";
    char *j = tl_toon_decode(bad, strlen(bad), &err);
    cr_assert_null(j, "decoded to %s", j);
    cr_assert(err != NULL && strstr(err, "invalid UTF-8") != NULL, "%s", err ? err : "");
    free(err);
    const char *good = "profile:\n  function: caf\xc3\xa9\n";
    j = tl_toon_decode(good, strlen(good), &err);
    cr_assert_not_null(j, "well-formed UTF-8 decodes");
    free(j);
}

Test(report, cpu_high_self_needs_a_reported_hot_line)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/s.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_sample(e, JP_STATE_JETT, 1, 0, 0); /* self, but no statement position */
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.bottlenecks.0.self_samples", "1");
    J_EQ(json, "profile.bottlenecks.0.hot_lines", "[]");
    J_EQ(json, "profile.bottlenecks.0.suggestions", "[]");
    free(json);
    jp_engine_free(e);
}

/* ---- human and TOON agree ------------------------------------------------------------- */

/* From the verbose human text: "  key: value" lines under "totals:" and the "#N name" order. */
static void parse_human(const char *h, char keys[][48], char vals[][48], int *nk,
                        char names[][64], int *nn)
{
    *nk = *nn = 0;
    bool in_totals = false;
    for (const char *line = h; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        if (!strcmp(buf, "totals:"))
            in_totals = true;
        else if (in_totals && !strncmp(buf, "  ", 2) && buf[2] != ' ') {
            char *colon = strstr(buf, ": ");
            cr_assert(colon != NULL);
            *colon = 0;
            snprintf(keys[*nk], 48, "%.47s", buf + 2);
            snprintf(vals[*nk], 48, "%.47s", colon + 2);
            (*nk)++;
        } else {
            in_totals = false;
        }
        if (buf[0] == '#') {
            char *sp = strchr(buf, ' ');
            char *paren = strstr(buf, " (");
            if (paren)
                *paren = 0;
            snprintf(names[(*nn)++], 64, "%.63s", sp + 1);
        }
        line += len + (end ? 1 : 0);
    }
}

/* The default text words every total (t_human_has_totals); the verbose one ends with all of
 * them under their TOON names, equal to TOON's. */
static void human_matches_toon(struct jp_engine *e, uint32_t ending)
{
    char *json, *human;
    t_render(e, ending, NULL, &human, &json, NULL);
    t_human_has_totals(human, json);
    free(human);
    free(json);
    struct jp_report_opts o = {sizeof o, -1, -1, ending,
                               JP_OUT_HUMAN | JP_OUT_TOON | JP_OUT_VERBOSE, 0, 0, 0};
    t_render_opts(e, &o, NULL, &human, &json, NULL);
    char keys[40][48], vals[40][48], names[100][64];
    int nk, nn;
    parse_human(human, keys, vals, &nk, names, &nn);
    cr_assert_gt(nk, 10);
    char path[128];
    for (int i = 0; i < nk; i++) {
        snprintf(path, sizeof path, "profile.totals.%.47s", keys[i]);
        char *got = t_json_get(json, path);
        cr_assert(got != NULL, "human total %s is missing from TOON", keys[i]);
        /* human prints fixed two decimals; TOON the canonical number of the same value */
        double a = strtod(vals[i], NULL), b = strtod(got, NULL);
        if (!strcmp(got, "unavailable"))
            cr_assert_str_eq(vals[i], "unavailable", "%s", keys[i]);
        else
            cr_assert(a == b, "%s: human %s, toon %s", keys[i], vals[i], got);
        free(got);
    }
    /* every TOON total is in the human text too */
    char *totals = t_json_get(json, "profile.totals");
    int commas = 1;
    for (const char *p = totals; *p; p++)
        commas += *p == ',';
    cr_assert_eq(commas, nk, "TOON has %d totals, human %d", commas, nk);
    free(totals);
    cr_assert_eq(nn, t_json_len(json, "profile.bottlenecks"));
    for (int i = 0; i < nn; i++) {
        snprintf(path, sizeof path, "profile.bottlenecks.%d.namespace", i);
        char *ns = t_json_get(json, path);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.function", i);
        char *fn = t_json_get(json, path);
        char q[200];
        if (!strcmp(ns, "<root>"))
            snprintf(q, sizeof q, "%.90s", fn);
        else
            snprintf(q, sizeof q, "%.90s.%.90s", ns, fn);
        cr_assert_str_eq(names[i], q, "rank %d", i + 1);
        free(ns);
        free(fn);
    }
    free(json);
    free(human);
}

Test(report, human_and_toon_carry_the_same_totals_and_order)
{
    uint64_t bytes[] = {10, 50, 30, 20, 40};
    struct jp_engine *e = fresh();
    sites(e, 0, 4, bytes, 5);
    human_matches_toon(e, JP_END_STOP);
    jp_engine_free(e);

    e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/s.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "lib", "step", 10, 19, 3, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    for (int i = 0; i < 7; i++)
        t_sample(e, JP_STATE_JETT, 2, 4, 2);
    t_sample(e, JP_STATE_JETT, 1, 2, 2);
    t_sample(e, JP_STATE_WAITING, 0, 0, 0);
    t_counters(e, 11, 1, 0, 1, 0, 0);
    t_stop(e, JP_TERM_RETURNED, 3000000000u, JP_NS_UNAVAILABLE, 0);
    human_matches_toon(e, JP_END_STOP);
    jp_engine_free(e);

    e = fresh(); /* without RUN_STOP: unavailable values in both */
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_sample(e, JP_STATE_RUNTIME, 0, 0, 0);
    human_matches_toon(e, JP_END_SHUTDOWN);
    jp_engine_free(e);
}

/* ---- golden files --------------------------------------------------------------------- */

static char *read_golden(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/render/golden/%s", getenv("JETTPROF_SOURCE_ROOT"),
             name);
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "missing golden file %s", path);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* The stream explained line by line in tests/render/golden/README.md. */
Test(report, golden_memory_profile)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_MEMORY, 0, 500, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/cache.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 40, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "cache", "fill", 40, 90, 5, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "cache", "grow", 90, 140, 12, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    t_node(e, 3, 1, 3);
    t_alloc(e, 2, 1, 64);
    t_alloc(e, 2, 2, 64);
    t_resize(e, 3, 1, 64, 256);
    t_free(e, 1, 2, 64);
    t_alloc(e, 1, 3, 16);
    t_stop(e, JP_TERM_RETURNED, 2000000, JP_NS_UNAVAILABLE, 0);
    char *toon, *human;
    t_render(e, JP_END_STOP, &toon, &human, NULL, NULL);
    cr_assert_str_eq(toon, read_golden("memory.toon"));
    cr_assert_str_eq(human, read_golden("memory.txt"));
    free(toon);
    free(human);
    jp_engine_free(e);
}

Test(report, absolute_and_unauthorized_paths_never_appear)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    const char *bad[] = {"/home/u/app.jett", "src/../secret.jett", "./x.jett", "a//b.jett",
                         "C:/x.jett", "src\\x.jett", "src/."};
    for (uint32_t i = 0; i < 7; i++)
        t_source(e, i + 1, JP_ORIGIN_PROJECT, bad[i]);
    t_source(e, 8, JP_ORIGIN_PROJECT, "src/ok.jett");
    t_frame(e, 1, 1, "m", "abs", 3, 9, 4, JP_FRAME_FUNCTION);
    t_frame(e, 2, 8, "m", "ok", 3, 9, 4, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 0, 2);
    t_sample(e, JP_STATE_JETT, 1, 5, 1);
    t_sample(e, JP_STATE_JETT, 1, 5, 1);
    t_sample(e, JP_STATE_JETT, 2, 5, 1);
    t_excerpt(e, 1, 5, 1, 0, "secret_call()");
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json, *toon, *human;
    t_render(e, JP_END_STOP, &toon, &human, &json, NULL);
    J_EQ(json, "profile.totals.protocol_violations", "7");
    J_EQ(json, "profile.bottlenecks.0.function", "abs");
    J_EQ(json, "profile.bottlenecks.0.path", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.line", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.hot_lines.0.path", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.hot_lines.0.code", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.suggestions", "unavailable"); /* no source: READINGS.md #12 */
    J_EQ(json, "profile.bottlenecks.1.path", "src/ok.jett");
    cr_assert_null(strstr(toon, "/home"));
    cr_assert_null(strstr(toon, "secret"));
    cr_assert_null(strstr(human, "/home"));
    cr_assert_null(strstr(human, "secret"));
    free(json);
    free(toon);
    free(human);
    jp_engine_free(e);
}

/* Samples from several runtime threads aggregate into one function identity, and the
 * execution records change nothing in the output (run-local metadata). */
static char *threads_profile(bool with_exec)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/w.jett");
    t_frame(e, 1, 1, "w", "task", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    for (uint32_t th = 1; th <= 3; th++) {
        if (with_exec) {
            struct jp_rec_exec x = {{JP_REC_EXEC, sizeof x}, th, 100 + th, JP_ID_UNAVAILABLE};
            cr_assert_eq(t_feed_raw(e, &x, sizeof x, NULL), 0);
        }
        t_sample(e, JP_STATE_JETT, 1, 2, 1);
    }
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *toon;
    t_render(e, JP_END_STOP, &toon, NULL, NULL, NULL);
    jp_engine_free(e);
    return toon;
}

/* Drops the lines naming execution-identity counts (the only ones EXEC records change). */
static void drop_identity_lines(char *t)
{
    char *o = t;
    for (char *l = t; *l;) {
        char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) + 1u : strlen(l);
        if (!strstr(l, "runtime_threads:") || (nl && strstr(l, "runtime_threads:") > nl)) {
            if (!(strncmp(l, "      tasks: ", 13) == 0)) {
                memmove(o, l, n);
                o += n;
            }
        }
        l += n;
    }
    *o = 0;
}

Test(report, workers_aggregate_into_one_function_deterministically)
{
    char *a = threads_profile(true), *b = threads_profile(false);
    /* three workers, one function: identity only adds its counts */
    char *json = tl_toon_decode(a, strlen(a), NULL);
    cr_assert(json != NULL);
    J_EQ(json, "profile.bottlenecks.0.inclusive_samples", "3");
    J_EQ(json, "profile.bottlenecks.0.runtime_threads", "3");
    J_EQ(json, "profile.bottlenecks.0.tasks", "3");
    J_EQ(json, "profile.totals.runtime_threads", "3");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 1);
    free(json);
    json = tl_toon_decode(b, strlen(b), NULL);
    J_EQ(json, "profile.bottlenecks.0.runtime_threads", "unavailable");
    J_EQ(json, "profile.totals.runtime_threads", "unavailable");
    free(json);
    drop_identity_lines(a);
    drop_identity_lines(b);
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
}

/* READINGS.md #5: chains with equal counts compare element by element with the function keys. */
Test(report, chain_ties_compare_element_by_element)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/c.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "x", "b", 10, 19, 2, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "x", "a", 20, 29, 3, JP_FRAME_FUNCTION);
    t_frame(e, 4, 1, "x", "leaf", 30, 39, 4, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);    /* main */
    t_node(e, 2, 1, 2);    /* main > b */
    t_node(e, 3, 2, 4);    /* main > b > leaf */
    t_node(e, 4, 1, 3);    /* main > a */
    t_node(e, 5, 4, 4);    /* main > a > leaf */
    t_node(e, 6, 1, 4);    /* main > leaf */
    t_node(e, 7, 0, 4);    /* leaf as a root of its own */
    for (uint32_t n = 3; n <= 7; n++)
        if (n != 4)
            t_sample(e, JP_STATE_JETT, n, 0, 0);
    t_sample(e, JP_STATE_JETT, 7, 0, 0); /* the root-only chain has 2 */
    t_stop(e, JP_TERM_RETURNED, 10, 10, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.bottlenecks.0.function", "leaf");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.call_chains"), 3);
    J_EQ(json, "profile.bottlenecks.0.call_chains.0.frames", "[\"x.leaf\"]"); /* 2 samples */
    /* then the 1-sample chains: main>x.a>leaf < main>x.b>leaf < main>leaf? element two is
     * x.a, x.b, x.leaf: namespace x equal, then a < b < leaf */
    J_EQ(json, "profile.bottlenecks.0.call_chains.1.frames", "[\"main\",\"x.a\",\"x.leaf\"]");
    J_EQ(json, "profile.bottlenecks.0.call_chains.2.frames", "[\"main\",\"x.b\",\"x.leaf\"]");
    free(json);
    jp_engine_free(e);
}

/* READINGS.md #7 in memory mode: the <truncated-stack> frame takes the allocation. */
Test(report, truncated_stack_takes_the_allocation)
{
    struct jp_engine *e = fresh();
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/d.jett");
    char fn[16];
    for (uint32_t i = 1; i < JP_MAX_DEPTH; i++) {
        snprintf(fn, sizeof fn, "d%03u", i);
        t_frame(e, i, 1, "d", fn, i, i + 1, i, JP_FRAME_FUNCTION);
        t_node(e, i, i - 1, i);
    }
    t_frame(e, JP_MAX_DEPTH, 0, "<root>", "<truncated-stack>", 0, 0, 0, JP_FRAME_TRUNCATED);
    t_node(e, JP_MAX_DEPTH, JP_MAX_DEPTH - 1, JP_MAX_DEPTH);
    t_alloc(e, JP_MAX_DEPTH, 1, 64);
    t_alloc(e, 5, 2, 32);
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
    char *json;
    uint32_t status;
    t_render(e, JP_END_STOP, NULL, NULL, &json, &status);
    cr_assert_eq(status, JP_STATUS_PARTIAL);
    J_EQ(json, "profile.partial_reason", "stack_capture_limit");
    J_EQ(json, "profile.totals.truncated_stacks", "1");
    J_EQ(json, "profile.bottlenecks.0.function", "<truncated-stack>");
    J_EQ(json, "profile.bottlenecks.0.allocated_bytes", "64");
    J_EQ(json, "profile.bottlenecks.0.path", "unavailable");
    J_EQ(json, "profile.bottlenecks.1.function", "d005");
    J_EQ(json, "profile.bottlenecks.1.allocation_percent", "33.33");
    free(json);
    jp_engine_free(e);
}
