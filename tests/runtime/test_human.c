/* The human report end to end: `jett run --profile-verbose` and `jettprofd replay --verbose`
 * end the report with every total under its TOON name, and only with the flag; a run served by
 * a long-lived daemon names its run id (human header, --agent envelope, `jettprofd show`), a
 * run of a private daemon does not. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define PROGRAM                                                                                   \
    "fn main() {\n"                                                                               \
    "  var s = \"\"\n"                                                                            \
    "  for i in 0..20000 { s = s + \"x\"\n    if len(s) > 64 { s = \"\" } }\n"                    \
    "  print(\"user code ran\")\n"                                                                \
    "}\n"

/* `jett run main.jett OPTS...` in dir (up to three options, NULL-terminated), which must
 * succeed; with --agent the program's output is inside the envelope. */
static struct jt_run run_main(const char *dir, const char *o1, const char *o2, const char *o3)
{
    const char *argv[] = {"run", "main.jett", o1, o2, o3, NULL};
    struct jt_run r;
    jtt_run(dir, argv, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s%s", r.status, r.out, r.err);
    cr_assert(strstr(r.out, "user code ran"), "%s", r.out);
    return r;
}

Test(verbose, the_flag_appends_every_total_after_the_report)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", PROGRAM);
    static const char *const modes[][2] = {
        {"--profile", "  requested_ticks: "},
        {"--profile-memory", "  allocation_count: "},
    };
    for (size_t m = 0; m < 2; m++) {
        struct jt_run plain = run_main(dir, modes[m][0], NULL, NULL);
        struct jt_run verbose = run_main(dir, modes[m][0], "--profile-verbose", NULL);
        cr_expect_null(strstr(plain.err, "\ntotals:\n"), "%s", plain.err);
        const char *block = strstr(verbose.err, "\ntotals:\n");
        cr_assert_not_null(block, "%s", verbose.err);
        /* after the report: its last line, the runtime threads total, comes first */
        cr_expect(strstr(verbose.err, "\nruntime threads: ") < block, "%s", verbose.err);
        cr_expect_eq(strncmp(block + strlen("\ntotals:\n"), modes[m][1], strlen(modes[m][1])), 0,
                     "%s", block);
        cr_expect(strstr(block, "\n  protocol_violations: 0\n"), "%s", block);
        cr_expect(strstr(block, "\n  eligible_bottlenecks: "), "%s", block);
        jtt_run_free(&plain);
        jtt_run_free(&verbose);
    }
    /* with --agent the flag changes nothing: the TOON profile has every total anyway */
    struct jt_run y = run_main(dir, "--profile-memory", "--agent", "--profile-verbose");
    cr_expect(strstr(y.out, "\n  totals:\n    allocation_count: "), "%s", y.out);
    cr_expect_null(strstr(y.out, "\ntotals:"), "no human block in the envelope: %s", y.out);
    char *err = NULL, *json = tl_toon_decode(y.out, y.out_len, &err);
    cr_expect_not_null(json, "%s: %s", err ? err : "", y.out);
    free(json);
    free(err);
    jtt_run_free(&y);
    jtt_rmtree(dir);
    free(dir);
}

Test(verbose, replay_verbose_is_the_same_block_and_needs_the_human_format)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", PROGRAM);
    struct jt_run r = run_main(dir, "--profile", "--profile-capture", "run.jpcap");
    jtt_run_free(&r);
    char cap[4200];
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    const char *plain[] = {"replay", cap, NULL};
    const char *verbose[] = {"replay", "--verbose", cap, NULL};
    const char *toon[] = {"replay", cap, "--format", "toon", "--verbose", NULL};
    struct jt_run p, v, t;
    jtt_run_exe(getenv("JETTPROFD"), NULL, plain, &p);
    jtt_run_exe(getenv("JETTPROFD"), NULL, verbose, &v);
    jtt_run_exe(getenv("JETTPROFD"), NULL, toon, &t);
    cr_expect_eq(p.status, 0, "%s", p.err);
    cr_expect_eq(v.status, 0, "%s", v.err);
    cr_expect_null(strstr(p.out, "\ntotals:\n"), "%s", p.out);
    size_t n = strlen(p.out);
    cr_expect_eq(strncmp(v.out, p.out, n), 0, "the same report first: %s", v.out);
    cr_expect_eq(strncmp(v.out + n, "\ntotals:\n  requested_ticks: ", 28), 0, "%s", v.out + n);
    cr_expect_eq(t.status, 2, "%s", t.err);
    cr_expect(strstr(t.err, "--verbose applies to --format human only"), "%s", t.err);
    cr_expect_str_eq(t.out, "");
    jtt_run_free(&p);
    jtt_run_free(&v);
    jtt_run_free(&t);
    jtt_rmtree(dir);
    free(dir);
}

/* Runs `jett run main.jett --profile-memory [--agent]` against a `jettprofd serve` started for
 * it, then `jettprofd show ID` for the id the run printed: the run's stdout, then on stderr the
 * run's stderr, `--- show ID` and what show printed. */
static struct jt_run served(const char *dir, bool agent)
{
    char script[8192];
    snprintf(script, sizeof script,
             "(exec \"$JETTPROFD\" serve --socket d.sock) & d=$!\n"
             "i=0; while [ ! -S d.sock ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n"
             "JETTPROFD_SOCKET=\"$PWD/d.sock\" \"%s\" run main.jett --profile-memory %s "
             "2>run.err >run.out; rc=$?\n"
             "id=$(sed -n 's/^run id: //p; s/^run_id: //p' run.err run.out)\n"
             "cat run.out; cat run.err >&2\n"
             "echo \"--- show $id\" >&2\n"
             "\"$JETTPROFD\" show \"$id\" --socket d.sock >&2\n"
             "kill $d; wait $d; exit $rc\n",
             jtt_jett(), agent ? "--agent" : "");
    const char *argv[] = {"-c", script, NULL};
    struct jt_run r;
    jtt_run_exe("/bin/sh", dir, argv, &r);
    return r;
}

Test(run_id, a_served_run_names_its_id_a_private_run_does_not)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", PROGRAM);
    struct jt_run h = served(dir, false);
    cr_assert_eq(h.status, 0, "%s", h.err);
    /* human: in the header, right after the status; `show` prints the same report */
    const char *id = strstr(h.err, "Memory profile\nstatus: complete\nrun id: ");
    cr_assert_not_null(id, "%s", h.err);
    unsigned long long n = strtoull(id + strlen("Memory profile\nstatus: complete\nrun id: "),
                                    NULL, 10);
    cr_assert_gt(n, 0, "%s", h.err);
    char want[64];
    snprintf(want, sizeof want, "--- show %llu\nMemory profile\n", n);
    const char *shown = strstr(h.err, want);
    cr_assert_not_null(shown, "%s", h.err);
    size_t report_len = (size_t)(shown - id); /* the run's report, up to its final newline */
    cr_expect_eq(strncmp(shown + strlen(want) - strlen("Memory profile\n"), id, report_len), 0,
                 "show gives the report the run printed: %s", h.err);
    jtt_run_free(&h);

    /* --agent: a run_id field before the profile, the profile itself without it */
    struct jt_run a = served(dir, true);
    cr_assert_eq(a.status, 0, "%s", a.err);
    const char *f = strstr(a.out, "\nlog_fields[0]:\nrun_id: ");
    cr_assert_not_null(f, "%s", a.out);
    const char *prof = strstr(f, "\nprofile:\n");
    cr_assert_not_null(prof, "%s", a.out);
    cr_expect_null(memchr(f + 1 + strlen("log_fields[0]:\nrun_id: "), '\n',
                          (size_t)(prof - f) - 1 - strlen("log_fields[0]:\nrun_id: ")),
                   "run_id is one line right before profile: %s", a.out);
    cr_expect_null(strstr(prof, "run_id"), "%s", a.out);
    char *err = NULL, *json = tl_toon_decode(a.out, a.out_len, &err);
    cr_expect_not_null(json, "%s: %s", err ? err : "", a.out);
    cr_expect(json && strstr(json, "\"run_id\":"), "%s", json ? json : "");
    free(json);
    free(err);
    jtt_run_free(&a);

    /* a private daemon's run: neither */
    struct jt_run x = run_main(dir, "--profile-memory", NULL, NULL);
    cr_expect(strstr(x.err, "Memory profile\nstatus: complete\ntermination: "), "%s", x.err);
    cr_expect_null(strstr(x.err, "run id"), "%s", x.err);
    jtt_run_free(&x);
    x = run_main(dir, "--profile-memory", "--agent", NULL);
    cr_expect_null(strstr(x.out, "run_id"), "%s", x.out);
    cr_expect(strstr(x.out, "\nlog_fields[0]:\nprofile:\n"), "%s", x.out);
    jtt_run_free(&x);
    jtt_rmtree(dir);
    free(dir);
}
