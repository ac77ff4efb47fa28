/* The stacks every export writes, from record streams fed straight to an engine (the engine
 * suites' helpers): exact leaf counts and their order, stacks that end in a recursive
 * re-entry, the <unattributed> stack for what no chain holds, and the memory values per
 * creation chain. Each document is compared byte for byte. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "render/export/export.h"
#include "tests/engine/helpers.h"

/* The folded export (value: JP_XVAL_*) of the engine's run since base (NULL: all of it),
 * malloc'ed; with take, base then holds the run's counts now. */
static char *folded_since(struct jp_engine *e, uint32_t value, struct jp_export_base *base,
                          int take)
{
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_RUNNING};
    struct jp_report *r;
    cr_assert_eq(jp_report_build(&v, &o, &r), 0);
    struct jp_export_opts x = {.size = sizeof x, .format = JP_EXPORT_FOLDED, .value = value,
                               .base = base && base->nchains ? base : NULL};
    char *out;
    size_t len;
    int rc = jp_export_write(r, &x, &out, &len);
    cr_assert_eq(rc, 0, "export: %d", rc);
    if (take)
        cr_assert_eq(jp_export_base_take(base, r), 0);
    jp_report_free(r);
    return out;
}

/* The folded export (value: JP_XVAL_*) of the engine's run, malloc'ed. */
static char *folded(struct jp_engine *e, uint32_t value)
{
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_TRUNCATED};
    struct jp_report *r;
    cr_assert_eq(jp_report_build(&v, &o, &r), 0);
    struct jp_export_opts x = {.size = sizeof x, .format = JP_EXPORT_FOLDED, .value = value};
    char *out;
    size_t len;
    int rc = jp_export_write(r, &x, &out, &len);
    jp_report_free(r);
    cr_assert_eq(rc, 0, "export: %d", rc);
    cr_assert_eq(strlen(out), len);
    return out;
}

static void program(struct jp_engine *e, uint64_t cpu_budget)
{
    t_start(e, JP_MODE_CPU, 1000, 0, 10, cpu_budget, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/p.jett");
    static const char *const fn[] = {"main", "a", "b", "c", "h"};
    for (uint32_t i = 0; i < 5; i++)
        t_frame(e, i + 1u, 1, "app", fn[i], i * 10u, i * 10u + 9u, i + 1u, JP_FRAME_FUNCTION);
}

Test(stacks, leaf_counts_are_exact_and_in_lexical_order)
{
    struct jp_engine *e = t_engine();
    program(e, 32 * MiB);
    t_node(e, 1, 0, 1); /* main */
    t_node(e, 2, 1, 2); /* main > a */
    t_node(e, 3, 2, 3); /* main > a > b */
    t_node(e, 4, 1, 4); /* main > c */
    const uint32_t at[] = {3, 3, 3, 2, 2, 1, 4, 4, 4, 4};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        t_sample(e, JP_STATE_JETT, at[i], 1, 1);
    t_sample(e, JP_STATE_RUNTIME, 0, 0, 0); /* not a jett sample: in no stack */
    char *f = folded(e, JP_XVAL_DEFAULT);
    cr_expect_str_eq(f, "app.main 1\napp.main;app.a 2\napp.main;app.a;app.b 3\napp.main;app.c 4\n");
    free(f);
    jp_engine_free(e);
}

Test(stacks, a_stack_ending_in_a_reentry_is_its_own_stack)
{
    struct jp_engine *e = t_engine();
    program(e, 32 * MiB);
    t_node(e, 1, 0, 1); /* main */
    t_node(e, 2, 1, 2); /* main > a */
    t_node(e, 3, 2, 3); /* main > a > b */
    t_node(e, 4, 3, 2); /* main > a > b > a: a re-entry */
    t_node(e, 5, 4, 5); /* main > a > b > a > h: h is not on the stack above */
    t_sample(e, JP_STATE_JETT, 3, 1, 1);
    for (int i = 0; i < 5; i++)
        t_sample(e, JP_STATE_JETT, 4, 1, 1); /* leaf a, re-entered: a stack of its own */
    t_sample(e, JP_STATE_JETT, 5, 1, 1);
    t_sample(e, JP_STATE_JETT, 5, 1, 1);
    char *f = folded(e, JP_XVAL_SAMPLES);
    cr_expect_str_eq(f, "app.main;app.a;app.b 1\napp.main;app.a;app.b;app.a 5\n"
                         "app.main;app.a;app.b;app.a;app.h 2\n");
    free(f);
    jp_engine_free(e);
}

Test(stacks, what_no_kept_stack_holds_is_one_unattributed_stack)
{
    struct jp_engine *e = t_engine();
    /* a budget that keeps the definitions of a few nodes only */
    program(e, 4096);
    uint32_t n = 0;
    for (; n < 400; n++)
        t_node(e, n + 1u, n, 1u + n % 5u);
    t_sample(e, JP_STATE_JETT, 1, 1, 1);
    t_sample(e, JP_STATE_JETT, n, 1, 1); /* past what the budget kept */
    t_sample(e, JP_STATE_JETT, n, 1, 1);
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    cr_assert(v.detail_stopped, "the budget stopped detail");
    char *f = folded(e, JP_XVAL_SAMPLES);
    cr_expect_str_eq(f, "app.main 1\n<unattributed> 2\n");
    free(f);
    jp_engine_free(e);
}

Test(stacks, memory_values_are_each_creation_chains_figures)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "<root>", "build", 10, 19, 2, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    t_alloc(e, 2, 1, 100);  /* main > build: 100, freed before the peak */
    t_free(e, 2, 1, 100);
    t_alloc(e, 1, 2, 40);   /* main: 40, kept */
    t_alloc(e, 2, 3, 61);   /* main > build: 61, live at the (new) peak, then freed */
    t_free(e, 1, 3, 61);
    t_alloc(e, 2, 4, 0);    /* a zero-size allocation: counted, no bytes */
    char *f = folded(e, JP_XVAL_DEFAULT);
    cr_expect_str_eq(f, "main 40\nmain;build 161\n", "alloc_bytes");
    free(f);
    f = folded(e, JP_XVAL_ALLOC_COUNT);
    cr_expect_str_eq(f, "main 1\nmain;build 3\n");
    free(f);
    f = folded(e, JP_XVAL_RETAINED_BYTES);
    cr_expect_str_eq(f, "main 40\n");
    free(f);
    f = folded(e, JP_XVAL_PEAK_BYTES);
    cr_expect_str_eq(f, "main 40\nmain;build 61\n", "the peak is 40 + 61 (above the first 100)");
    free(f);
    f = folded(e, JP_XVAL_RETAINED_COUNT);
    cr_expect_str_eq(f, "main 1\nmain;build 1\n", "allocations 2 and 4 stay live (4 has no bytes)");
    free(f);
    jp_engine_free(e);
}

Test(stacks, a_value_of_the_other_mode_is_refused)
{
    struct jp_engine *e = t_engine();
    t_simple_cpu(e);
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1};
    struct jp_report *r;
    cr_assert_eq(jp_report_build(&v, &o, &r), 0);
    struct jp_export_opts x = {.size = sizeof x, .format = JP_EXPORT_SVG,
                               .value = JP_XVAL_RETAINED_BYTES};
    char *out = (char *)1;
    size_t len = 1;
    cr_expect_eq(jp_export_write(r, &x, &out, &len), -EINVAL);
    cr_expect_null(out);
    x.format = JP_EXPORT_FORMAT_COUNT;
    x.value = JP_XVAL_DEFAULT;
    cr_expect_eq(jp_export_write(r, &x, &out, &len), -EINVAL, "an unknown format");
    jp_report_free(r);
    jp_engine_free(e);
}

/* Windows (export.h, struct jp_export_base): a window is what the run counted since the cut
 * before, chain by chain, including what only the unattributed stack holds; level values (the
 * live bytes) are the window's end. Three windows of one run add up to the whole. */
Test(stacks, a_window_is_what_each_chain_counted_since_the_cut_before)
{
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "<root>", "build", 10, 19, 2, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    struct jp_export_base bytes = {0}, count = {0};
    t_alloc(e, 2, 1, 100);
    t_alloc(e, 1, 2, 40);
    char *f = folded_since(e, JP_XVAL_ALLOC_BYTES, &bytes, 1);
    cr_expect_str_eq(f, "main 40\nmain;build 100\n", "the first window is the run so far");
    free(f);
    free(folded_since(e, JP_XVAL_ALLOC_COUNT, &count, 1));
    t_free(e, 2, 1, 100);
    t_alloc(e, 2, 3, 7);
    t_alloc(e, 2, 4, 8);
    f = folded_since(e, JP_XVAL_ALLOC_BYTES, &bytes, 0);
    cr_expect_str_eq(f, "main;build 15\n", "only what was allocated since");
    free(f);
    f = folded_since(e, JP_XVAL_ALLOC_COUNT, &count, 1);
    cr_expect_str_eq(f, "main;build 2\n");
    free(f);
    f = folded_since(e, JP_XVAL_LIVE_BYTES, &bytes, 0);
    cr_expect_str_eq(f, "main 40\nmain;build 15\n", "in use at the window's end");
    free(f);
    f = folded_since(e, JP_XVAL_ALLOC_BYTES, &bytes, 1);
    free(f);
    f = folded_since(e, JP_XVAL_ALLOC_BYTES, &bytes, 1);
    cr_expect_str_eq(f, "", "nothing since: an empty window");
    free(f);
    t_alloc(e, 1, 5, 2);
    f = folded_since(e, JP_XVAL_ALLOC_COUNT, &count, 0);
    cr_expect_str_eq(f, "main 1\n", "a chain that counted nothing for a while");
    free(f);
    jp_export_base_free(&bytes);
    jp_export_base_free(&count);
    jp_engine_free(e);
}

Test(stacks, a_cpu_window_holds_the_samples_since_the_cut_before_unattributed_too)
{
    struct jp_engine *e = t_engine();
    program(e, 4096); /* a budget that keeps a few nodes only */
    uint32_t n = 0;
    for (; n < 400; n++)
        t_node(e, n + 1u, n, 1u + n % 5u);
    struct jp_export_base base = {0};
    t_sample(e, JP_STATE_JETT, 1, 1, 1);
    t_sample(e, JP_STATE_JETT, n, 1, 1);
    char *f = folded_since(e, JP_XVAL_SAMPLES, &base, 1);
    cr_expect_str_eq(f, "app.main 1\n<unattributed> 1\n");
    free(f);
    t_sample(e, JP_STATE_JETT, n, 1, 1);
    t_sample(e, JP_STATE_JETT, n, 1, 1);
    t_sample(e, JP_STATE_JETT, 1, 1, 1);
    f = folded_since(e, JP_XVAL_SAMPLES, &base, 1);
    cr_expect_str_eq(f, "app.main 1\n<unattributed> 2\n");
    free(f);
    jp_export_base_free(&base);
    jp_engine_free(e);
}

/* The HTML page (export.h): names from the profile are escaped for each place they land, so a
 * frame named like markup runs nothing and ends no element: in the tables as entity
 * references, in the script's JSON data with <, > and & as \u escapes. The page has exactly
 * its two script elements and asks for nothing from outside. */
Test(stacks, the_html_page_escapes_every_name_for_where_it_lands)
{
    static const char *const hostile[] = {"</script><script>alert(1)</script>",
                                          "<img src=x onerror=alert(1)>", "a&b\"c'd"};
    struct jp_engine *e = t_engine();
    t_start(e, JP_MODE_CPU, 1000, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/<b>x</b>.jett");
    t_frame(e, 1, 1, "app", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    for (uint32_t i = 0; i < 3; i++)
        t_frame(e, i + 2u, 1, "app", hostile[i], 10u * (i + 1u), 10u * (i + 1u) + 9u, i + 2u,
                JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    for (uint32_t i = 0; i < 3; i++) {
        t_node(e, i + 2u, 1, i + 2u);
        for (uint32_t k = 0; k <= i; k++)
            t_sample(e, JP_STATE_JETT, i + 2u, 1, 1);
    }
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_TRUNCATED};
    struct jp_report *r;
    cr_assert_eq(jp_report_build(&v, &o, &r), 0);
    struct jp_export_opts x = {.size = sizeof x, .format = JP_EXPORT_HTML,
                               .value = JP_XVAL_DEFAULT};
    char *out;
    size_t len;
    cr_assert_eq(jp_export_write(r, &x, &out, &len), 0);
    cr_assert_eq(strlen(out), len, "a NUL at %zu: ...%s", strlen(out),
                 out + (strlen(out) > 80 ? strlen(out) - 80 : 0));
    size_t scripts = 0, ends = 0;
    for (const char *p = out; (p = strstr(p, "<script")); p++)
        scripts++;
    for (const char *p = out; (p = strstr(p, "</script")); p++)
        ends++;
    cr_expect_eq(scripts, 2, "the data and the code, nothing else:\n%s", out);
    cr_expect_eq(ends, 2);
    cr_expect_null(strstr(out, "<img"), "markup from a name");
    cr_expect_null(strstr(out, "alert(1)</"), "a name ended an element");
    cr_expect(strstr(out, "<td>app.&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;</td>"),
              "the table's text:\n%s", out);
    cr_expect(strstr(out, "app.a&amp;b&quot;c&#39;d"), "%s", out);
    cr_expect(strstr(out, "src/&lt;b&gt;x&lt;/b&gt;.jett"), "a path in the table");
    cr_expect(strstr(out, "\"app.\\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script"
                          "\\u003e\""),
              "the data's JSON:\n%s", out);
    cr_expect(strstr(out, "content=\"default-src 'none';"), "the CSP forbids every request");
    cr_expect_null(strstr(out, "http:"), "no address of any kind");
    cr_expect_null(strstr(out, "https:"));
    /* the ranked table is the report's, in its order: the most samples first */
    const char *first = strstr(out, "onerror"), *second = strstr(out, "a&amp;b");
    cr_expect(first && second && second < first, "a&b (3 samples) before the img (2)");
    /* and in a real browser: shown as text, nothing run (tests/export/html_check.mjs) */
    const char *node = getenv("JETT_TEST_NODE");
    cr_assert(node && *node, "JETT_TEST_NODE is not set: node is needed to drive chromium");
    char dir[] = "/tmp/jp-html-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char file[64], cmd[1024];
    snprintf(file, sizeof file, "%s/hostile.html", dir);
    FILE *f = fopen(file, "we");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(out, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' '%s/tests/export/html_check.mjs' '%s' --hostile '%s' --hostile '%s' 2>&1",
             node, getenv("JETTPROF_SOURCE_ROOT"), file, hostile[0], hostile[1]);
    FILE *pipe = popen(cmd, "r");
    cr_assert_not_null(pipe);
    char said[4096] = "";
    size_t got = fread(said, 1, sizeof said - 1, pipe);
    said[got] = 0;
    int st = pclose(pipe);
    cr_expect_eq(st, 0, "in chromium: %s", said);
    unlink(file);
    rmdir(dir);
    free(out);
    jp_report_free(r);
    jp_engine_free(e);
}

/* A receiver's limits (export.h: max_samples, max_raw_bytes): the smallest samples past the
 * limit are merged into one sample of the single frame <cut>, so every type's sum stays; the
 * count merged is reported. Read back by `go tool pprof -raw`. */
Test(stacks, pprof_past_a_sample_limit_merges_the_smallest_into_cut, .timeout = 60)
{
    struct jp_engine *e = t_engine();
    program(e, 32 * MiB);
    t_node(e, 1, 0, 1);
    for (uint32_t i = 0; i < 4; i++) {
        t_node(e, i + 2u, 1, i + 2u); /* main > a, main > b, main > c, main > h */
        for (uint32_t k = 0; k <= i; k++)
            t_sample(e, JP_STATE_JETT, i + 2u, 1, 1); /* 1, 2, 3 and 4 samples */
    }
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = JP_END_TRUNCATED};
    struct jp_report *r;
    cr_assert_eq(jp_report_build(&v, &o, &r), 0);
    uint64_t cut = 0;
    struct jp_export_opts x = {.size = sizeof x, .format = JP_EXPORT_PPROF,
                               .value = JP_XVAL_DEFAULT, .max_samples = 2, .cut = &cut,
                               .time_nanos = 1700000000000000000, .duration_nanos = 1000000000};
    char *out;
    size_t len;
    cr_assert_eq(jp_export_write(r, &x, &out, &len), 0);
    cr_expect_eq(cut, 3, "three samples (1, 2 and 3) merged into one");
    const char *go = getenv("JETT_TEST_GO");
    cr_assert(go && *go, "JETT_TEST_GO is not set: go is needed for `go tool pprof`");
    char dir[] = "/tmp/jp-cut-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char file[64], cmd[512];
    snprintf(file, sizeof file, "%s/cut.pb.gz", dir);
    FILE *f = fopen(file, "we");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(out, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "HOME='%s' GOCACHE='%s' '%s' tool pprof -raw '%s' 2>&1", dir, dir,
             go, file);
    FILE *pipe = popen(cmd, "r");
    cr_assert_not_null(pipe);
    char raw[8192] = "";
    size_t got = fread(raw, 1, sizeof raw - 1, pipe);
    raw[got] = 0;
    cr_assert_eq(pclose(pipe), 0, "%s", raw);
    /* two samples: app.h's 4, and <cut>'s 1 + 2 + 3 = 6 */
    cr_expect(strstr(raw, "          4    4000000: 1 2 \n"), "the largest kept:\n%s", raw);
    cr_expect(strstr(raw, "          6    6000000: 3 \n"), "the rest merged:\n%s", raw);
    cr_expect(strstr(raw, "\n     3: ") && strstr(strstr(raw, "\n     3: "), "<cut>"),
              "location 3 is the <cut> frame:\n%s", raw);
    cr_expect(strstr(raw, "\nTime: 2023-11-14 22:13:20 +0000 UTC\n"), "time_nanos:\n%s", raw);
    cr_expect(strstr(raw, "\nDuration: 1s\n"), "duration_nanos:\n%s", raw);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    cr_expect_eq(system(rm), 0);
    free(out);
    jp_report_free(r);
    jp_engine_free(e);
}
