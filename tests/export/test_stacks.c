/* The stacks every export writes, from record streams fed straight to an engine (the engine
 * suites' helpers): exact leaf counts and their order, stacks that end in a recursive
 * re-entry, the <unattributed> stack for what no chain holds, and the memory values per
 * creation chain. Each document is compared byte for byte. */
#include <criterion/criterion.h>
#include <errno.h>
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
