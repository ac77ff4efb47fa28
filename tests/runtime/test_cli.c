/* The CLI validation matrix: every rejected form exits 2 with a message naming what was
 * wrong, before anything is compiled or run (the program would print "user code ran"). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "protocol/records.h"
#include "runtime/jett.h"
#include "support.h"

Test(percent, accepts_zero_to_hundred_with_two_decimals)
{
    static const struct { const char *s; uint32_t bp; } ok[] = {
        {"0", 0}, {"5", 500}, {"5.0", 500}, {"5.5", 550}, {"5.05", 505}, {"0.01", 1},
        {"99.99", 9999}, {"100", 10000}, {"100.00", 10000}, {"007", 700},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint32_t bp = 12345;
        cr_expect_eq(jp_parse_percent_bp(ok[i].s, &bp), 0, "%s", ok[i].s);
        cr_expect_eq(bp, ok[i].bp, "%s -> %u", ok[i].s, bp);
    }
}

Test(percent, rejects_malformed_and_out_of_range)
{
    static const char *const bad[] = {
        "", "5.", ".5", "5.123", "5.001", "-1", "+5", "5%", "1e2", "100.01", "101", "1000",
        " 5", "5 ", "5,5", "0x10", "abc", "5..0", "nan",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t bp = 7;
        cr_expect_lt(jp_parse_percent_bp(bad[i], &bp), 0, "'%s' accepted", bad[i]);
        cr_expect_eq(bp, 7, "'%s' wrote a value", bad[i]);
    }
}

Test(uint, bounds_are_inclusive)
{
    uint32_t v;
    cr_expect_eq(jt_parse_uint("1", 1, 100, &v), 0);
    cr_expect_eq(jt_parse_uint("100", 1, 100, &v), 0);
    cr_expect_eq(v, 100);
    cr_expect_eq(jt_parse_uint("0", 1, 100, &v), -ERANGE);
    cr_expect_eq(jt_parse_uint("101", 1, 100, &v), -ERANGE);
    cr_expect_eq(jt_parse_uint("99999999999999999999", 1, 100, &v), -ERANGE);
    cr_expect_eq(jt_parse_uint("1.0", 1, 100, &v), -EINVAL);
    cr_expect_eq(jt_parse_uint("-1", 1, 100, &v), -EINVAL);
    cr_expect_eq(jt_parse_uint("", 1, 100, &v), -EINVAL);
}

static int parse(const char *const *args, struct jt_cli *c, char *err)
{
    int n = 0;
    while (args[n])
        n++;
    return jt_cli_parse(n, (char **)args, c, err, 400);
}

Test(cli, options_in_any_order_mean_the_same)
{
    const char *a[] = {"--profile-limit", "3", "app.jett", "--profile-threshold=12.5", "--agent",
                       "--profile-rate", "250", "--profile", NULL};
    const char *b[] = {"--profile", "--profile-rate=250", "--agent", "--profile-threshold",
                       "12.5", "app.jett", "--profile-limit=3", NULL};
    struct jt_cli x, y;
    char err[400];
    cr_assert_eq(parse(a, &x, err), 0, "%s", err);
    cr_assert_eq(parse(b, &y, err), 0, "%s", err);
    cr_expect_eq(x.mode, JT_MODE_CPU);
    cr_expect_eq(x.mode, y.mode);
    cr_expect_eq(x.threshold_bp, 1250);
    cr_expect_eq(x.threshold_bp, y.threshold_bp);
    cr_expect_eq(x.limit, 3);
    cr_expect_eq(x.limit, y.limit);
    cr_expect_eq(x.rate_hz, 250);
    cr_expect_eq(x.rate_hz, y.rate_hz);
    cr_expect(x.agent && y.agent);
    cr_expect_str_eq(x.file, "app.jett");
}

Test(cli, defaults_are_the_contracts)
{
    const char *a[] = {"app.jett", "--profile-memory", NULL};
    struct jt_cli c;
    char err[400];
    cr_assert_eq(parse(a, &c, err), 0, "%s", err);
    cr_expect_eq(c.mode, JT_MODE_MEMORY);
    cr_expect_eq(c.threshold_bp, 500);
    cr_expect_eq(c.limit, 10);
    cr_expect_eq(c.rate_hz, 1000);
    cr_expect_not(c.agent);
    cr_expect_null(c.capture_path);
}

/* Each rejected command line, with a fragment its message must contain. */
static const struct {
    const char *args[8];
    const char *says;
} rejected[] = {
    {{"--profile", "--profile-memory"}, "cannot be used together"},
    {{"--profile-memory", "--agent", "--profile"}, "cannot be used together"},
    {{"--profile-threshold", "5"}, "--profile-threshold requires --profile or --profile-memory"},
    {{"--profile-limit", "5"}, "--profile-limit requires"},
    {{"--profile-rate", "100"}, "--profile-rate requires --profile"},
    {{"--profile-memory", "--profile-rate", "100"}, "--profile-rate requires --profile"},
    {{"--profile-capture", "x.jpcap"}, "--profile-capture requires"},
    {{"--profile", "--profile-capture-overwrite"},
     "--profile-capture-overwrite requires --profile-capture"},
    {{"--profile-capture-overwrite"}, "--profile-capture-overwrite requires --profile-capture"},
    {{"--profile-verbose"}, "--profile-verbose requires --profile or --profile-memory"},
    {{"--profile", "--profile-verbose", "--profile-verbose"}, "given more than once"},
    {{"--profile", "--profile-capture-overwrite=yes", "--profile-capture", "x.jpcap"},
     "unknown option"},
    {{"--agent", "--profile-limit=3"}, "--profile-limit requires"},
    {{"--profile", "--profile-threshold", "5.123"}, "at most two fractional digits, got '5.123'"},
    {{"--profile", "--profile-threshold", "100.01"}, "from 0 to 100"},
    {{"--profile", "--profile-threshold", "-1"}, "--profile-threshold expects"},
    {{"--profile", "--profile-threshold", "5."}, "--profile-threshold expects"},
    {{"--profile", "--profile-threshold=abc"}, "got 'abc'"},
    {{"--profile", "--profile-limit", "0"}, "from 1 to 100, got '0'"},
    {{"--profile", "--profile-limit", "101"}, "from 1 to 100, got '101'"},
    {{"--profile-memory", "--profile-limit", "1.5"}, "--profile-limit expects"},
    {{"--profile", "--profile-rate", "0"}, "from 1 to 1000"},
    {{"--profile", "--profile-rate", "1001"}, "from 1 to 1000"},
    {{"--profile", "--profile-rate"}, "--profile-rate expects a value"},
    {{"--profile", "--profile"}, "--profile given more than once"},
    {{"--profile", "--profile-limit=2", "--profile-limit=3"}, "given more than once"},
    {{"--profile-frobnicate"}, "unknown option '--profile-frobnicate'"},
    {{"--profile=yes"}, "unknown option"},
    {{"extra.jett"}, "unexpected extra argument 'extra.jett'"},
};

Test(cli, rejects_the_matrix_before_running_anything)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/runtime/fixtures/hello.jett", jtt_source_root());
    for (size_t i = 0; i < sizeof rejected / sizeof rejected[0]; i++) {
        const char *argv[12] = {"run", path};
        size_t n = 2;
        for (size_t k = 0; rejected[i].args[k]; k++)
            argv[n++] = rejected[i].args[k];
        argv[n] = NULL;
        bool agent = false;
        for (size_t k = 0; k < n; k++)
            agent |= strcmp(argv[k], "--agent") == 0;
        struct jt_run r;
        jtt_run(NULL, argv, &r);
        cr_expect_eq(r.status, 2, "case %zu: exit %d", i, r.status);
        /* with --agent the message travels in the envelope on stdout, else on stderr */
        const char *channel = agent ? r.out : r.err;
        cr_expect_str_eq(agent ? r.err : r.out, "", "case %zu: wrong channel used", i);
        cr_expect(strstr(channel, rejected[i].says), "case %zu: lacks '%s': %s", i,
                  rejected[i].says, channel);
        cr_expect_null(strstr(channel, "user"), "case %zu: user code ran", i);
        jtt_run_free(&r);
    }
}

Test(cli, a_missing_file_argument_is_a_cli_error)
{
    const char *argv[] = {"run", "--profile", NULL};
    struct jt_run r;
    jtt_run(NULL, argv, &r);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "expected a program file"), "%s", r.err);
    jtt_run_free(&r);
    const char *argv2[] = {"walk", NULL};
    jtt_run(NULL, argv2, &r);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "unknown command"), "%s", r.err);
    jtt_run_free(&r);
}

Test(cli, help_prints_the_usage_on_stdout_and_succeeds)
{
    const char *flags[] = {"--help", "-h", "help"};
    for (size_t i = 0; i < 3; i++) {
        const char *argv[] = {flags[i], NULL};
        struct jt_run r;
        jtt_run(NULL, argv, &r);
        cr_expect_eq(r.status, 0, "%s: exit %d", flags[i], r.status);
        cr_expect(strstr(r.out, "usage: jett run FILE"), "%s: %s", flags[i], r.out);
        cr_expect_str_eq(r.err, "", "%s", flags[i]);
        jtt_run_free(&r);
    }
}

Test(cli, agent_mode_reports_a_cli_error_in_the_envelope)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/runtime/fixtures/hello.jett", jtt_source_root());
    const char *argv[] = {"run", path, "--agent", "--profile-rate", "5000", "--profile", NULL};
    struct jt_run r;
    jtt_run(NULL, argv, &r);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "");
    char *json = tl_toon_decode(r.out, r.out_len, NULL);
    int ok = json != NULL;
    cr_assert(ok, "not TOON: %s", r.out);
    cr_expect(strstr(json, "\"status\":\"error\",\"termination\":\"not_started\",\"exit_code\":2,"
                           "\"stdout\":\"\",\"stderr\":\"\""), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"cli_error\""), "%s", json);
    cr_expect(strstr(json, "from 1 to 1000 (hertz), got '5000'"), "%s", json);
    cr_expect_null(strstr(json, "\"profile\""), "%s", json);
    free(json);
    jtt_run_free(&r);
}

/* Runs exe with argv; expects exit 0, `want` on stdout and nothing on stderr. */
static void expect_help(const char *exe, const char *const *argv, const char *want)
{
    struct jt_run r;
    jtt_run_exe(exe, NULL, argv, &r);
    char shown[200] = "";
    for (size_t i = 0; argv[i]; i++)
        snprintf(shown + strlen(shown), sizeof shown - strlen(shown), " %s", argv[i]);
    cr_expect_eq(r.status, 0, "%s%s: exit %d: %s", exe, shown, r.status, r.err);
    cr_expect(strstr(r.out, want), "%s%s: no '%s' on stdout: %s", exe, shown, want, r.out);
    cr_expect_str_eq(r.err, "", "%s%s wrote on stderr", exe, shown);
    jtt_run_free(&r);
}

static const char *jettprofd(void)
{
    const char *d = getenv("JETTPROFD");
    cr_assert(d && *d, "JETTPROFD must name the built jettprofd (run through meson test)");
    return d;
}

Test(cli, every_help_form_prints_usage_on_stdout_and_exits_0)
{
    static const char *const jett_forms[][4] = {
        {"help", NULL}, {"help", "run", NULL}, {"run", "--help", NULL},
        {"run", "x.jett", "--help", NULL}, {"run", "-h", NULL},
    };
    for (size_t i = 0; i < sizeof jett_forms / sizeof jett_forms[0]; i++)
        expect_help(jtt_jett(), jett_forms[i], "usage: jett run FILE");
    expect_help(jtt_jett(), (const char *[]){"run", "--help", NULL}, "--profile-capture PATH");

    static const struct {
        const char *argv[3];
        const char *want;
    } d_forms[] = {
        {{"--help", NULL}, "usage: jettprofd serve"},
        {{"-h", NULL}, "jettprofd summarize"},
        {{"help", NULL}, "jettprofd replay FILE"},
        {{"serve", "--help", NULL}, "--max-retention-budget B"},
        {{"serve", "--help", NULL}, "--push URL [--label K=V]..."},
        {{"export", "--help", NULL}, "jettprofd export CAPTURE --push URL [--label K=V]..."},
        {{"--help", NULL}, "POST URL?name=APP{program=P,mode=M,host=H,K=V...}&from=S&until=S"},
        {{"show", "--help", NULL}, "usage: jettprofd show RUN_ID"},
        {{"replay", "--help", NULL}, "usage: jettprofd replay FILE"},
        {{"summarize", "--help", NULL}, "usage: jettprofd summarize"},
        {{"help", "replay", NULL}, "usage: jettprofd replay FILE"},
        {{"help", "serve", NULL}, "usage: jettprofd serve"},
    };
    for (size_t i = 0; i < sizeof d_forms / sizeof d_forms[0]; i++)
        expect_help(jettprofd(), d_forms[i].argv, d_forms[i].want);
}

Test(cli, usage_errors_stay_on_stderr_with_exit_2)
{
    static const char *const forms[][3] = {
        {"bogus", NULL}, {"serve", "--bogus", NULL}, {"replay", NULL}, {"help", "bogus", NULL},
        {"summarize", "--bogus", NULL}, {"show", NULL},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct jt_run r;
        jtt_run_exe(jettprofd(), NULL, forms[i], &r);
        cr_expect_eq(r.status, 2, "jettprofd %s: exit %d", forms[i][0], r.status);
        cr_expect_str_eq(r.out, "", "jettprofd %s wrote on stdout", forms[i][0]);
        cr_expect_neq(r.err_len, 0, "jettprofd %s said nothing", forms[i][0]);
        jtt_run_free(&r);
    }
    const char *argv[] = {"run", "--bogus", NULL};
    struct jt_run r;
    jtt_run(NULL, argv, &r);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "");
    cr_expect(strstr(r.err, "unknown option '--bogus'"), "%s", r.err);
    jtt_run_free(&r);
}

Test(cli, version_prints_the_project_version)
{
    /* JETTPROF_VERSION is meson's project version, defined for every file of the project. */
    cr_assert_str_neq(JETTPROF_VERSION, "");
    const char *const forms[][2] = {{"--version", NULL}, {"-V", NULL}};
    for (size_t i = 0; i < 2; i++) {
        struct jt_run r;
        jtt_run_exe(jtt_jett(), NULL, forms[i], &r);
        cr_expect_eq(r.status, 0);
        cr_expect_str_eq(r.out, "jett " JETTPROF_VERSION "\n");
        cr_expect_str_eq(r.err, "");
        jtt_run_free(&r);
        jtt_run_exe(jettprofd(), NULL, forms[i], &r);
        cr_expect_eq(r.status, 0);
        cr_expect_str_eq(r.out, "jettprofd " JETTPROF_VERSION "\n");
        cr_expect_str_eq(r.err, "");
        jtt_run_free(&r);
    }
}

/* Each installed man page renders without a single groff warning (-ww: all of them). */
Test(cli, man_pages_render_without_warnings)
{
    const char *groff = getenv("JETT_TEST_GROFF");
    cr_assert(groff && *groff, "groff is a test dependency (groff-base, scripts/deps.sh)");
    static const char *const pages[] = {"jett.1", "jettprofd.8", "libjettprof-agent.3"};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/man/%s", jtt_build_root(), pages[i]);
        const char *argv[] = {"-man", "-Tutf8", "-ww", "-z", path, NULL};
        struct jt_run r;
        jtt_run_exe(groff, NULL, argv, &r);
        cr_expect_eq(r.status, 0, "%s: exit %d", pages[i], r.status);
        cr_expect_str_eq(r.err, "", "%s: %s", pages[i], r.err);
        jtt_run_free(&r);
        /* and it is the real page, with its version filled in */
        FILE *f = fopen(path, "r");
        cr_assert(f, "%s not configured", path);
        char head[200] = "";
        cr_assert(fgets(head, sizeof head, f));
        fclose(f);
        cr_expect(strstr(head, ".TH ") && strstr(head, "jettprofd " JETTPROF_VERSION), "%s", head);
    }
}
