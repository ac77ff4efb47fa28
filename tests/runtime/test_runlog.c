/* Debug rows and structured logs (runtime/OUTPUT.md, "Debug rows and structured logs"): whole
 * envelopes of a succeeding and a failing program, with and without a memory profile, pinned
 * against tests/runtime/golden/ (README.md there says why each line is right) and decoded by
 * the official TOON decoder; the human lines on stderr; the acceptance rules at their edges;
 * hostile text; secrets in every position; an interrupt, a collector failure and every
 * allocation failure in the middle of logging; and pre-execution failures. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"
#include "tests/lib/text.h"

/* ---- helpers ---- */

static char *source_path(const char *rel)
{
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/tests/runtime/%s", jtt_source_root(), rel);
    return p;
}

static struct jt_run run_file(const char *cwd, const char *file, const char *const *opts)
{
    struct jt_run r;
    jtt_run_file(cwd, file, opts, &r);
    return r;
}

static char *decoded(const char *text, size_t len)
{
    char *err = NULL;
    char *json = tl_toon_decode(text, len, &err);
    int ok = json != NULL;
    cr_assert(ok, "not valid TOON (%s):\n%s", err ? err : "", text);
    return json;
}

/* The figures no two runs share (elapsed and waiting time): replaced by N in a document. */
static const char *const timed_figures[] = {"wall_duration_ns: ", "producer_wait_ns: ", NULL};

/* The top-level keys of a decoded object, comma-separated, in order. */
static char *top_keys(const char *json)
{
    char *out = calloc(1, strlen(json) + 1);
    int depth = 0;
    bool in_str = false, want_key = false;
    const char *key = NULL;
    for (const char *p = json; *p; p++) {
        if (in_str) {
            if (*p == '\\')
                p++;
            else if (*p == '"') {
                in_str = false;
                if (key) {
                    if (*out)
                        strcat(out, ",");
                    strncat(out, key, (size_t)(p - key));
                    key = NULL;
                }
            }
            continue;
        }
        if (*p == '"') {
            in_str = true;
            if (depth == 1 && want_key)
                key = p + 1;
            want_key = false;
        } else if (*p == '{' || *p == '[') {
            depth++;
            want_key = depth == 1;
        } else if (*p == '}' || *p == ']') {
            depth--;
        } else if (*p == ',' && depth == 1) {
            want_key = true;
        }
    }
    return out;
}

/* The rows of TOON table `name` in a document: the lines after its header, malloc'ed. */
static char *table_rows(const char *doc, const char *name, unsigned *count)
{
    char hdr[128];
    snprintf(hdr, sizeof hdr, "\n%s[", name);
    const char *h = strstr(doc, hdr);
    cr_assert(h, "no table %s in:\n%s", name, doc);
    *count = (unsigned)strtoul(h + strlen(hdr), NULL, 10);
    const char *p = strchr(h + 1, '\n') + 1, *e = p;
    while (e[0] == ' ' && e[1] == ' ')
        e = strchr(e, '\n') + 1;
    char *rows = malloc((size_t)(e - p) + 1);
    memcpy(rows, p, (size_t)(e - p));
    rows[e - p] = '\0';
    return rows;
}

/* The first cell (the sequence number) of each row of table `name`, as "1,2,4". */
static char *seqs(const char *doc, const char *name)
{
    unsigned n;
    char *rows = table_rows(doc, name, &n), *out = calloc(1, strlen(rows) + 2);
    unsigned seen = 0;
    for (char *p = rows; *p; p = strchr(p, '\n') + 1, seen++) {
        char num[32];
        snprintf(num, sizeof num, "%s%lu", seen ? "," : "", strtoul(p + 2, NULL, 10));
        strcat(out, num);
    }
    cr_expect_eq(seen, n, "table %s says %u rows, holds %u", name, n, seen);
    free(rows);
    return out;
}

/* ---- the composed fixtures: whole envelopes ---- */

struct variant {
    const char *program, *golden;
    bool memory, fails;
};
static const struct variant variants[] = {
    {"fixtures/composed/fail.jett", "golden/composed_fail.toon", false, true},
    {"fixtures/composed/fail.jett", "golden/composed_fail_memory.toon", true, true},
    {"fixtures/composed/ok.jett", "golden/composed_ok.toon", false, false},
    {"fixtures/composed/ok.jett", "golden/composed_ok_memory.toon", true, false},
};

static struct jt_run run_variant(const struct variant *v, const char *capture)
{
    char *file = source_path(v->program);
    const char *mem[] = {"--agent", "--profile-memory", capture ? "--profile-capture" : NULL,
                         capture, NULL};
    const char *plain[] = {"--agent", NULL};
    struct jt_run r = run_file(NULL, file, v->memory ? mem : plain);
    free(file);
    return r;
}

/* The envelope without its profile block: what the same run writes without profiling. */
static char *without_profile(const char *doc)
{
    char *out = strdup(doc);
    char *p = strstr(out, "\nprofile:\n");
    if (p) {
        char *e = p + 1;
        do
            e = strchr(e, '\n') + 1;
        while (e[0] == ' ');
        memmove(p + 1, e, strlen(e) + 1);
    }
    return out;
}

Test(composed, whole_envelopes_are_the_golden_files)
{
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        const struct variant *v = &variants[i];
        struct jt_run r = run_variant(v, NULL);
        cr_expect_eq(r.status, v->fails ? 1 : 0, "%s: %s", v->golden, r.err);
        cr_expect_str_eq(r.err, "", "--agent writes nothing on stderr");
        char *got = tl_values_masked(r.out, timed_figures), *path = source_path(v->golden);
        char *want = tl_slurp(path, NULL);
        cr_expect_str_eq(got, want, "%s differs; the run wrote:\n%s", v->golden, got);
        char *json = decoded(r.out, r.out_len), *keys = top_keys(json);
        cr_expect_str_eq(keys,
                         v->memory ? (v->fails ? "status,termination,exit_code,stdout,stderr,debug,"
                                                 "logs,log_sources,log_source_graph_path_segments,"
                                                 "log_fields,profile,error_kind,error"
                                               : "status,termination,exit_code,stdout,stderr,debug,"
                                                 "logs,log_sources,log_source_graph_path_segments,"
                                                 "log_fields,profile")
                                   : (v->fails ? "status,termination,exit_code,stdout,stderr,debug,"
                                                 "logs,log_sources,log_source_graph_path_segments,"
                                                 "log_fields,error_kind,error"
                                               : "status,termination,exit_code,stdout,stderr,debug,"
                                                 "logs,log_sources,log_source_graph_path_segments,"
                                                 "log_fields"),
                         "%s", json);
        /* only what the program printed is in the scalars */
        cr_expect(strstr(json, v->fails ? "\"stdout\":\"loading\\n\",\"stderr\":\"warning: slow\\n\","
                                        : "\"stdout\":\"loading\\ndone 6\\n\",\"stderr\":\"warning: slow\\n\","),
                  "%s", json);
        /* the gap: seq 3 was rejected */
        cr_expect(strstr(json, "\"logs\":[{\"seq\":1,\"level\":\"info\",\"source_id\":1,\"line\":10,"
                               "\"column\":5,\"message\":\"loaded\",\"field_count\":2},"
                               "{\"seq\":2,\"level\":\"debug\",\"source_id\":2,\"line\":4,\"column\":5,"
                               "\"message\":\"checking\",\"field_count\":2},"
                               "{\"seq\":4,\"level\":\"warn\",\"source_id\":1,\"line\":14,\"column\":5,"
                               "\"message\":\"slow: 2 of 3\",\"field_count\":1}],"),
                  "%s", json);
        cr_expect_null(strstr(r.out, "tok-XYZZY"), "the secret leaked: %s", r.out);
        free(keys);
        free(json);
        free(got);
        free(path);
        free(want);
        jtt_run_free(&r);
    }
    /* the tables are the same with and without a profile (memory or CPU), which only adds its
     * own block */
    for (size_t i = 0; i < 4; i += 2) {
        struct jt_run a = run_variant(&variants[i], NULL), b = run_variant(&variants[i + 1], NULL);
        char *file = source_path(variants[i].program);
        const char *cpu[] = {"--agent", "--profile", NULL};
        struct jt_run c = run_file(NULL, file, cpu);
        for (int k = 0; k < 2; k++) {
            const struct jt_run *p = k ? &c : &b;
            char *stripped = without_profile(p->out);
            cr_expect_str_eq(stripped, a.out);
            cr_expect_neq(strlen(stripped), strlen(p->out), "no profile block in:\n%s", p->out);
            free(stripped);
        }
        free(decoded(c.out, c.out_len));
        free(file);
        jtt_run_free(&a);
        jtt_run_free(&b);
        jtt_run_free(&c);
    }
}

Test(composed, without_agent_each_row_is_one_stderr_line_as_it_happens)
{
    char *file = source_path("fixtures/composed/fail.jett"), *path = source_path("golden/composed_fail.stderr");
    char *want = tl_slurp(path, NULL);
    const char *none[] = {NULL}, *mem[] = {"--profile-memory", NULL};
    struct jt_run r = run_file(NULL, file, none);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.out, "loading\n");
    cr_expect_str_eq(r.err, want);
    jtt_run_free(&r);
    /* profiled: the same lines, then the report after the runtime error */
    r = run_file(NULL, file, mem);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.out, "loading\n");
    cr_expect_eq(strncmp(r.err, want, strlen(want)), 0, "%s", r.err);
    cr_expect_eq(strncmp(r.err + strlen(want), "Memory profile\n", 15), 0, "%s", r.err);
    cr_expect_eq(jtt_count(r.err, "info "), 1, "%s", r.err);
    jtt_run_free(&r);
    free(file);
    free(path);
    free(want);
}

Test(composed, the_capture_of_a_failed_run_replays_its_profile)
{
    char *dir = jtt_tmpdir(), cap[4200];
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    struct jt_run r = run_variant(&variants[1], cap);
    cr_assert_eq(r.status, 1, "%s", r.err);
    const char *p = strstr(r.out, "\nprofile:\n"), *e = strstr(r.out, "\nerror_kind:");
    cr_assert(p && e, "%s", r.out);
    const char *argv[] = {"replay", cap, "--format", "toon", NULL};
    struct jt_run rep;
    jtt_run_exe(getenv("JETTPROFD"), NULL, argv, &rep);
    cr_expect_eq(rep.status, 0, "%s", rep.err);
    cr_expect_eq(rep.out_len, (size_t)(e - p), "replay:\n%s", rep.out);
    cr_expect_eq(strncmp(rep.out, p + 1, (size_t)(e - p)), 0, "replay:\n%s", rep.out);
    cr_expect_null(strstr(rep.out, "debug"), "rows do not belong in the profile: %s", rep.out);
    jtt_run_free(&rep);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- what debug records ---- */

Test(debug, the_value_column_is_a_toon_document_of_the_value)
{
    /* each value, and the JSON the official decoder must read from its rendering */
    static const struct {
        const char *expr, *json;
    } cases[] = {
        {"42", "42"}, {"-7", "-7"}, {"true", "true"}, {"\"hi\"", "\"hi\""}, {"\"\"", "\"\""},
        {"\"42\"", "\"42\""}, {"\"a,b: c\"", "\"a,b: c\""}, {"\"- item\"", "\"- item\""},
        {"\"null\"", "\"null\""}, {"[]", "[]"}, {"[1, 2, 3]", "[1,2,3]"},
        {"[\"x\", \"\", \"y z\"]", "[\"x\",\"\",\"y z\"]"},
        {"[[1, 2], [3]]", "[[1,2],[3]]"}, {"[1, [2, [3, []]], \"x\"]", "[1,[2,[3,[]]],\"x\"]"},
        {"[[]]", "[[]]"}, {"nothing()", "null"}, {"secret(\"s3cr3t\")", "\"<secret>\""},
        {"[secret(\"s3cr3t\"), 1]", "[\"<secret>\",1]"},
        {"\"line\\nprofile:\\n  schema: x\"", "\"line\\nprofile:\\n  schema: x\""},
    };
    size_t n = sizeof cases / sizeof cases[0];
    char src[8192] = "fn nothing() { }\nfn main() {\n";
    for (size_t i = 0; i < n; i++) {
        strcat(src, "  debug(");
        strcat(src, cases[i].expr);
        strcat(src, ")\n");
    }
    strcat(src, "}\n");
    const char *agent[] = {"--agent", NULL};
    struct jt_run r = jtt_run_src(src, agent);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *json = decoded(r.out, r.out_len);
    cr_expect_null(strstr(r.out, "s3cr3t"), "%s", r.out);
    /* the value column of each row, decoded again: it is the value's own TOON document */
    const char *p = strstr(json, "\"debug\":[");
    cr_assert(p, "%s", json);
    for (size_t i = 0; i < n; i++) {
        char want_row[128];
        snprintf(want_row, sizeof want_row, "{\"seq\":%zu,\"path\":\"main.jett\",\"line\":%zu,"
                 "\"column\":3,\"value\":\"", i + 1, i + 3);
        p = strstr(p, want_row);
        cr_assert(p, "row %zu (%s) missing: %s", i + 1, cases[i].expr, json);
        p += strlen(want_row);
        /* unescape the JSON string into the TOON text */
        char text[512];
        size_t k = 0;
        for (; *p != '"' && k + 1 < sizeof text; p++) {
            if (*p == '\\') {
                p++;
                text[k++] = *p == 'n' ? '\n' : *p;
            } else {
                text[k++] = *p;
            }
        }
        text[k] = '\0';
        char *again = decoded(text, k);
        again[strcspn(again, "\n")] = '\0';
        cr_expect_str_eq(again, cases[i].json, "debug(%s) rendered as:\n%s", cases[i].expr, text);
        free(again);
    }
    free(json);
    jtt_run_free(&r);
    /* debug returns its argument: the program computes with it */
    const char *none[] = {NULL};
    r = jtt_run_src("fn main() { print(debug(20) + debug(22)) }\n", none);
    cr_expect_str_eq(r.out, "42\n");
    cr_expect_str_eq(r.err, "debug main.jett:1:19: 20\ndebug main.jett:1:31: 22\n");
    jtt_run_free(&r);
}

/* ---- the acceptance rules, at their edges ---- */

Test(limits, each_rule_rejects_at_its_edge_and_uses_up_a_number)
{
    static const struct {
        const char *call;
        bool accepted;
    } cases[] = {
        {"log(\"trace\", \"m\")", true}, {"log(\"debug\", \"m\")", true},
        {"log(\"info\", \"m\")", true}, {"log(\"warn\", \"m\")", true},
        {"log(\"error\", \"m\")", true}, {"log(\"INFO\", \"m\")", false},
        {"log(\"fatal\", \"m\")", false}, {"log(1, \"m\")", false},
        {"log(secret(\"info\"), \"m\")", false}, {"log(\"info\")", false}, {"log()", false},
        {"log(\"info\", 7)", false}, {"log(\"info\", secret(\"m\"))", false},
        {"log(\"info\", [\"m\"])", false}, {"log(\"info\", \"m\", \"k\")", false},
        {"log(\"info\", \"\")", true},
        /* keys: [a-z_][a-z0-9_]*, unique */
        {"log(\"info\", \"m\", \"a\", 1)", true}, {"log(\"info\", \"m\", \"_a9_\", 1)", true},
        {"log(\"info\", \"m\", \"\", 1)", false}, {"log(\"info\", \"m\", \"A\", 1)", false},
        {"log(\"info\", \"m\", \"9a\", 1)", false}, {"log(\"info\", \"m\", \"a-b\", 1)", false},
        {"log(\"info\", \"m\", \"a b\", 1)", false}, {"log(\"info\", \"m\", \"caf\xc3\xa9\", 1)", false},
        {"log(\"info\", \"m\", secret(\"a\"), 1)", false}, {"log(\"info\", \"m\", 5, 1)", false},
        {"log(\"info\", \"m\", \"a\", 1, \"a\", 2)", false},
        {"log(\"info\", \"m\", \"a\", 1, \"b\", 2)", true},
        /* values: int, bool, str, secret */
        {"log(\"info\", \"m\", \"v\", true)", true}, {"log(\"info\", \"m\", \"v\", \"s\")", true},
        {"log(\"info\", \"m\", \"v\", secret(\"s\"))", true},
        {"log(\"info\", \"m\", \"v\", nothing())", false}, {"log(\"info\", \"m\", \"v\", [1])", false},
        /* 16 fields, not 17 */
        {"log(\"info\", \"m\", \"a\",1,\"b\",1,\"c\",1,\"d\",1,\"e\",1,\"f\",1,\"g\",1,\"h\",1,"
         "\"i\",1,\"j\",1,\"k\",1,\"l\",1,\"m\",1,\"n\",1,\"o\",1,\"p\",1)", true},
        {"log(\"info\", \"m\", \"a\",1,\"b\",1,\"c\",1,\"d\",1,\"e\",1,\"f\",1,\"g\",1,\"h\",1,"
         "\"i\",1,\"j\",1,\"k\",1,\"l\",1,\"m\",1,\"n\",1,\"o\",1,\"p\",1,\"q\",1)", false},
        /* 4096 bytes of message plus values, as written */
        {"log(\"info\", std.text.repeat(\"x\", 4096))", true},
        {"log(\"info\", std.text.repeat(\"x\", 4097))", false},
        {"log(\"info\", std.text.repeat(\"x\", 4000), \"v\", std.text.repeat(\"y\", 96))", true},
        {"log(\"info\", std.text.repeat(\"x\", 4000), \"v\", std.text.repeat(\"y\", 97))", false},
        {"log(\"info\", std.text.repeat(\"x\", 4094), \"v\", 10)", true},
        {"log(\"info\", std.text.repeat(\"x\", 4095), \"v\", 10)", false},
        {"log(\"info\", std.text.repeat(\"x\", 4094), \"v\", -1)", true},
        {"log(\"info\", std.text.repeat(\"x\", 4092), \"v\", true)", true},
        {"log(\"info\", std.text.repeat(\"x\", 4092), \"v\", false)", false},
        /* a secret counts as its 8-byte <secret>, whatever its length */
        {"log(\"info\", std.text.repeat(\"x\", 4088), \"v\", secret(\"s\"))", true},
        {"log(\"info\", std.text.repeat(\"x\", 4088), \"v\", secret(std.text.repeat(\"s\", 5000)))", true},
        {"log(\"info\", std.text.repeat(\"x\", 4089), \"v\", secret(\"s\"))", false},
        /* keys do not count */
        {"log(\"info\", std.text.repeat(\"x\", 4095), std.text.repeat(\"k\", 300), \"y\")", true},
    };
    size_t n = sizeof cases / sizeof cases[0];
    char *src = calloc(1, 65536), want[4096] = "";
    strcat(src, "import \"stdlib/text.jett\"\nfn nothing() { }\nfn main() {\n");
    unsigned accepted = 0;
    for (size_t i = 0; i < n; i++) {
        strcat(src, "  ");
        strcat(src, cases[i].call);
        strcat(src, "\n");
        if (cases[i].accepted) {
            char num[16];
            snprintf(num, sizeof num, "%s%zu", accepted++ ? "," : "", i + 1);
            strcat(want, num);
        }
    }
    strcat(src, "  print(\"went on\")\n}\n");
    const char *agent[] = {"--agent", NULL};
    struct jt_run r = jtt_run_src(src, agent);
    cr_expect_eq(r.status, 0, "a rejection is never an error: %s", r.out);
    char *json = decoded(r.out, r.out_len);
    cr_expect(strstr(json, "\"stdout\":\"went on\\n\""), "%s", json);
    char *got = seqs(r.out, "logs");
    cr_expect_str_eq(got, want, "accepted sequence numbers");
    /* the same calls without --agent: one line per accepted record, nothing else */
    const char *none[] = {NULL};
    struct jt_run h = jtt_run_src(src, none);
    cr_expect_eq(h.status, 0);
    unsigned lines = (unsigned)jtt_count(h.err, "\n");
    cr_expect_eq(lines, accepted, "%s", h.err);
    cr_expect_str_eq(h.out, "went on\n");
    free(got);
    free(json);
    free(src);
    jtt_run_free(&r);
    jtt_run_free(&h);
}

Test(limits, ten_thousand_records_then_nothing)
{
    const char *src =
        "fn main() {\n"
        "  log(\"nope\", \"rejected first\")\n"
        "  for i in 0..10001 { log(\"info\", \"m\", \"i\", i) }\n"
        "  log(\"info\", \"after the limit\")\n"
        "  for i in 0..10001 { debug(i) }\n"
        "  print(\"done\")\n"
        "}\n";
    const char *agent[] = {"--agent", NULL};
    struct jt_run r = jtt_run_src(src, agent);
    cr_assert_eq(r.status, 0, "%.2000s", r.out);
    char *json = decoded(r.out, r.out_len);
    unsigned n;
    char *rows = table_rows(r.out, "logs", &n);
    cr_expect_eq(n, 10000);
    /* numbers 2..10001 accepted: the first was rejected, 10002 and 10003 came past the limit */
    cr_expect_eq(strncmp(rows, "  2,info,1,3,23,m,1\n", 20), 0, "%.200s", rows);
    cr_expect(strstr(rows, "\n  10001,info,1,3,23,m,1\n"), "%s", rows + strlen(rows) - 200);
    cr_expect_null(strstr(rows, "10002"));
    free(rows);
    char *want = malloc(100000), *p = want;
    for (unsigned s = 2; s <= 10001; s++)
        p += sprintf(p, "%s%u", s > 2 ? "," : "", s);
    char *got = seqs(r.out, "logs");
    cr_expect_str_eq(got, want);
    free(got);
    rows = table_rows(r.out, "log_fields", &n);
    cr_expect_eq(n, 10000);
    cr_expect(strstr(rows, "\n  10001,0,i,9999\n"), "%s", rows + strlen(rows) - 200);
    free(rows);
    rows = table_rows(r.out, "debug", &n);
    cr_expect_eq(n, 10000);
    cr_expect(strstr(rows, "\n  10000,main.jett,5,23,\"9999\"\n"), "%s", rows + strlen(rows) - 200);
    free(rows);
    cr_expect(strstr(json, "\"stdout\":\"done\\n\""));
    free(json);
    jtt_run_free(&r);
    /* human: 10,000 lines of each, nothing after the limits */
    const char *none[] = {NULL};
    r = jtt_run_src(src, none);
    cr_expect_eq(r.status, 0);
    cr_expect_eq(jtt_count(r.err, "info main.jett:3:23: m i="), 10000);
    cr_expect_eq(jtt_count(r.err, "debug main.jett:5:23: "), 10000);
    cr_expect_eq(jtt_count(r.err, "\n"), 20000);
    cr_expect_null(strstr(r.err, "after the limit"));
    cr_expect(strstr(r.err, "m i=9999\n"));
    cr_expect_null(strstr(r.err, "m i=10000\n"));
    free(want);
    jtt_run_free(&r);
}

/* ---- hostile text ---- */

Test(hostile, messages_and_values_cannot_start_a_line_or_add_a_field)
{
    const char *src =
        "fn main() {\n"
        "  let nl = \"a\\nprofile:\\n  schema: fake\\nerror_kind: x\"\n"
        "  let ctl = chr(1) + chr(27) + \"[31m\" + chr(127) + chr(0)\n"
        "  let bad = \"x\" + chr(255) + chr(192) + \"y\"\n"
        "  let c1 = chr(194) + chr(155) + \"2J\"\n"
        "  log(\"info\", nl, \"k\", \"key: value, other: 1\")\n"
        "  log(\"warn\", ctl, \"bad\", bad, \"c1\", c1)\n"
        "  log(\"error\", \"- item\", \"v\", \"  # lead\", \"w\", \"true\")\n"
        "  debug(nl)\n"
        "  debug([ctl, bad, c1])\n"
        "  eprint(\"own stderr\")\n"
        "}\n";
    const char *agent[] = {"--agent", NULL};
    struct jt_run r = jtt_run_src(src, agent);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *json = decoded(r.out, r.out_len), *keys = top_keys(json);
    cr_expect_str_eq(keys, "status,termination,exit_code,stdout,stderr,debug,logs,log_sources,"
                           "log_source_graph_path_segments,log_fields");
    /* 5 scalars, 5 table headers, 2 debug rows, 3 logs, 1 source, 1 segment, 5 fields: one
     * line each, whatever the text held */
    cr_expect_eq(jtt_count(r.out, "\n"), 5 + 5 + 2 + 3 + 1 + 1 + 5, "%s", r.out);
    cr_expect_eq(jtt_count(r.out, "\nprofile:"), 0, "%s", r.out);
    cr_expect_eq(jtt_count(r.out, "\nerror_kind:"), 0, "%s", r.out);
    cr_expect(strstr(json, "\"stderr\":\"own stderr\\n\""), "%s", json);
    cr_expect(strstr(json, "\"message\":\"a\\nprofile:\\n  schema: fake\\nerror_kind: x\""), "%s", json);
    cr_expect(strstr(json, "{\"seq\":1,\"index\":0,\"key\":\"k\",\"value\":\"key: value, other: 1\"}"),
              "%s", json);
    cr_expect(strstr(json, "\"message\":\"\\u0001\\u001b[31m\x7f\\u0000\""), "%s", json);
    cr_expect(strstr(json, "\"value\":\"x\xef\xbf\xbd\xef\xbf\xbdy\""), "%s", json);
    cr_expect(strstr(json, "\"key\":\"c1\",\"value\":\"\xc2\x9b" "2J\""), "%s", json);
    cr_expect(strstr(json, "\"message\":\"- item\""), "%s", json);
    cr_expect(strstr(json, "\"value\":\"  # lead\"},{\"seq\":3,\"index\":1,\"key\":\"w\",\"value\":\"true\"}"),
              "%s", json);
    free(keys);
    free(json);
    jtt_run_free(&r);
    /* human: every byte of program data through the one terminal-safe rule */
    const char *none[] = {NULL};
    r = jtt_run_src(src, none);
    cr_assert_eq(r.status, 0);
    cr_expect_str_eq(r.err,
        "info main.jett:6:3: a\\x0aprofile:\\x0a  schema: fake\\x0aerror_kind: x k=key: value, other: 1\n"
        "warn main.jett:7:3: \\x01\\x1b[31m\\x7f\\x00 bad=x\\xff\\xc0y c1=\\u009b2J\n"
        "error main.jett:8:3: - item v=  # lead w=true\n"
        "debug main.jett:9:3: \"a\\nprofile:\\n  schema: fake\\nerror_kind: x\"\n"
        "debug main.jett:10:3: [3]: \"\\u0001\\u001b[31m\\u007f\\u0000\",\"x\xef\xbf\xbd\xef\xbf\xbdy\",\\u009b2J\n"
        "own stderr\n");
    for (const char *p = r.err; *p; p++)
        cr_expect((unsigned char)*p >= 0x20 || *p == '\n', "a control byte 0x%02x on stderr",
                  (unsigned char)*p);
    jtt_run_free(&r);
}

/* ---- secrets ---- */

Test(secrets, a_secret_in_every_position_never_reaches_any_output)
{
    const char *src =
        "import \"stdlib/text.jett\"\n"
        "fn key() -> secret { return \"hunter2-XYZZY\" }\n"
        "fn main() {\n"
        "  let k = key()\n"
        "  let big: secret = std.text.repeat(\"hunter2-XYZZY\", 400)\n"
        "  debug(k)\n"
        "  debug([k, [k + \"!\"]])\n"
        "  let same = debug(k)\n"
        "  log(k, \"secret level\")\n"
        "  log(\"info\", k)\n"
        "  log(\"info\", \"secret key\", k, 1)\n"
        "  log(\"info\", \"secret values\", \"a\", k, \"b\", big, \"c\", k + \"x\")\n"
        "  print(len(same))\n"
        "  fail(k)\n"
        "}\n";
    char *dir = jtt_tmpdir(), cap[4200];
    jtt_write(dir, "main.jett", src);
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    const char *agent[] = {"--agent", NULL}, *none[] = {NULL},
               *mem[] = {"--agent", "--profile-memory", "--profile-capture", cap, NULL},
               *human_mem[] = {"--profile-memory", NULL};
    const char *const *modes[] = {agent, none, mem, human_mem};
    for (int m = 0; m < 4; m++) {
        struct jt_run r = run_file(dir, "main.jett", modes[m]);
        cr_expect_eq(r.status, 1, "mode %d: %s%s", m, r.out, r.err);
        cr_expect_null(strstr(r.out, "XYZZY"), "mode %d: %s", m, r.out);
        cr_expect_null(strstr(r.err, "XYZZY"), "mode %d: %s", m, r.err);
        const char *text = m == 0 || m == 2 ? r.out : r.err;
        cr_expect(strstr(text, "<secret>"), "mode %d: %s", m, text);
        if (m == 0 || m == 2) {
            char *json = decoded(r.out, r.out_len);
            /* seq 1..3 rejected (level, message, key); 4 accepted with three secrets */
            cr_expect(strstr(json, "\"logs\":[{\"seq\":4,"), "%s", json);
            cr_expect(strstr(json, "\"log_fields\":[{\"seq\":4,\"index\":0,\"key\":\"a\",\"value\":"
                                   "\"<secret>\"},{\"seq\":4,\"index\":1,\"key\":\"b\",\"value\":"
                                   "\"<secret>\"},{\"seq\":4,\"index\":2,\"key\":\"c\",\"value\":"
                                   "\"<secret>\"}]"), "%s", json);
            cr_expect(strstr(json, "\"value\":\"[2]:\\n  - <secret>\\n  - [1]: <secret>\""), "%s", json);
            cr_expect(strstr(json, "\"stdout\":\"13\\n\""), "%s", json);
            free(json);
        } else {
            cr_expect(strstr(r.err, "info main.jett:12:3: secret values a=<secret> b=<secret> "
                                    "c=<secret>\n"), "%s", r.err);
            cr_expect_eq(jtt_count(r.err, "info "), 1, "%s", r.err);
        }
        jtt_run_free(&r);
    }
    size_t len;
    char *bytes = tl_slurp(cap, &len);
    cr_expect_null(memmem(bytes, len, "XYZZY", 5), "the capture holds the secret");
    free(bytes);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- failures in the middle of logging ---- */

static const char ticking[] =
    "fn main() {\n"
    "  print(\"start\")\n"
    "  var i = 0\n"
    "  while true {\n"
    "    log(\"info\", \"tick\", \"i\", i)\n"
    "    debug(i)\n"
    "    i = i + 1\n"
    "    sleep(1)\n"
    "  }\n"
    "}\n";

/* Every log row is `seq,info,1,5,5,tick,1` with seq 1..K and every field `seq,0,i,seq-1`, every
 * debug row `seq,main.jett,6,5,"seq-1"`, for one K: nothing half written, nothing skipped. */
static unsigned expect_ticks(const char *doc)
{
    unsigned n, nf, nd;
    char *logs = table_rows(doc, "logs", &n), *fields = table_rows(doc, "log_fields", &nf),
         *dbg = table_rows(doc, "debug", &nd);
    cr_expect_eq(nf, n);
    cr_expect(nd == n || nd == n - 1 || (n == 0 && nd == 0), "%u debug rows, %u logs", nd, n);
    char *want = malloc(64u * n + 1), *wf = malloc(64u * n + 1), *wd = malloc(64u * n + 1);
    char *p = want, *q = wf, *d = wd;
    *p = *q = *d = '\0';
    for (unsigned s = 1; s <= n; s++) {
        p += sprintf(p, "  %u,info,1,5,5,tick,1\n", s);
        q += sprintf(q, "  %u,0,i,%u\n", s, s - 1);
        if (s <= nd)
            d += sprintf(d, "  %u,main.jett,6,5,\"%u\"\n", s, s - 1);
    }
    cr_expect_str_eq(logs, want);
    cr_expect_str_eq(fields, wf);
    cr_expect_str_eq(dbg, wd);
    free(want);
    free(wf);
    free(wd);
    free(logs);
    free(fields);
    free(dbg);
    return n;
}

Test(interrupt, sigint_in_the_middle_of_logging_keeps_every_row_before_it)
{
    char *dir = jtt_tmpdir(), cap[4200];
    jtt_write(dir, "main.jett", ticking);
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    const char *argv[] = {"run", "main.jett", "--agent", "--profile-memory", "--profile-capture",
                          cap, NULL};
    struct jt_run r;
    jtt_run_sigint(dir, argv, NULL, 1000, &r);
    cr_expect_eq(r.status, 130, "%s", r.err);
    char *json = decoded(r.out, r.out_len);
    cr_expect(strstr(json, "{\"status\":\"error\",\"termination\":\"interrupted\",\"exit_code\":130,"
                           "\"stdout\":\"start\\n\",\"stderr\":\"\","), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"interrupted\",\"error\":\"interrupted\"}"), "%s", json);
    cr_expect(strstr(json, "\"status\":\"partial\",\"partial_reason\":\"interrupted\""), "%s", json);
    cr_expect_gt(expect_ticks(r.out), 0, "nothing logged in a second: %s", r.out);
    free(json);
    /* the capture written so far replays as the partial, interrupted profile it was */
    const char *rargv[] = {"replay", cap, NULL};
    struct jt_run rep;
    jtt_run_exe(getenv("JETTPROFD"), NULL, rargv, &rep);
    cr_expect_eq(rep.status, 0, "%s", rep.err);
    cr_expect(strstr(rep.out, "status: partial (interrupted"), "%s", rep.out);
    cr_expect(strstr(rep.out, "termination: interrupted"), "%s", rep.out);
    jtt_run_free(&rep);
    jtt_run_free(&r);
    /* human: the lines as they happened, each whole, then the interruption */
    const char *hargv[] = {"run", "main.jett", NULL};
    jtt_run_sigint(dir, hargv, "debug main.jett:6:5: 3\n", 20, &r);
    cr_expect_eq(r.status, 130);
    cr_expect_str_eq(r.out, "start\n");
    size_t len = strlen(r.err);
    cr_assert_gt(len, 18);
    cr_expect_str_eq(r.err + len - 18, "jett: interrupted\n", "%s", r.err);
    unsigned i = 0;
    for (const char *p = r.err; p < r.err + len - 18; i++) {
        char want[128];
        int k = snprintf(want, sizeof want, "info main.jett:5:5: tick i=%u\ndebug main.jett:6:5: %u\n",
                         i, i);
        const char *nl = strchr(p, '\n');
        if (strncmp(p, want, (size_t)k) == 0) {
            p += k;
            continue;
        }
        /* interrupted between the two: the log line alone, last */
        cr_expect_eq(nl - p + 1, (long)strcspn(want, "\n") + 1, "line %u: %s", i, p);
        cr_expect_eq(strncmp(p, want, strcspn(want, "\n")), 0, "line %u: %s", i, p);
        cr_expect_eq(nl + 1, r.err + len - 18, "more after a half pair: %s", p);
        break;
    }
    cr_expect_geq(i, 4, "%s", r.err);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

Test(interrupt, a_collector_failure_leaves_the_rows_alone)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett",
              "fn spin() -> int { var x = 0\n for i in 0..20000 { x = (x + i) % 7 }\n return x }\n"
              "fn main() {\n  for r in 0..600 {\n    spin(); sleep(1)\n    log(\"info\", \"round\", \"r\", r)\n"
              "  }\n  debug(\"done\")\n}\n");
    const char *argv[] = {"run", "main.jett", "--profile", "--agent", NULL};
    struct jt_run r;
    int killed = 0;
    jtt_run_hook(dir, argv, NULL, 300, jtt_kill_private_daemon, &killed, &r);
    cr_assert_eq(killed, 1, "the private daemon was not found");
    cr_expect_eq(r.status, 0, "%s", r.out);
    char *json = decoded(r.out, r.out_len);
    cr_expect(strstr(json, "\"error_kind\":\"profiler_failure\",\"error\":\"profiler: collector failure\"}"),
              "%s", json);
    unsigned n;
    char *rows = table_rows(r.out, "logs", &n);
    cr_expect_eq(n, 600);
    char *got = seqs(r.out, "logs"), *want = malloc(8 * 600), *p = want;
    for (unsigned s = 1; s <= 600; s++)
        p += sprintf(p, "%s%u", s > 1 ? "," : "", s);
    cr_expect_str_eq(got, want);
    cr_expect(strstr(json, "\"debug\":[{\"seq\":1,\"path\":\"main.jett\",\"line\":9,\"column\":3,"
                           "\"value\":\"done\"}]"), "%s", json);
    free(rows);
    free(got);
    free(want);
    free(json);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

Test(interrupt, after_the_daemon_dies_the_capture_so_far_replays_as_partial)
{
    /* 400,000 allocations are far more records than the 2 MiB ring holds, so by the time the
     * program reaches its debug row the daemon has consumed, and written to the capture in
     * complete blocks, most of them; then it is killed */
    char *dir = jtt_tmpdir(), cap[4200];
    jtt_write(dir, "main.jett",
              "fn main() {\n  var keep = 0\n"
              "  for i in 0..200000 { keep = keep + len(\"x\" + str(i % 10)) }\n"
              "  debug(keep)\n"
              "  for r in 0..300 { sleep(1); log(\"info\", \"after\", \"r\", r) }\n}\n");
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    const char *argv[] = {"run", "main.jett", "--profile-memory", "--profile-capture", cap, NULL};
    struct jt_run r;
    int killed = 0;
    jtt_run_hook(dir, argv, "debug main.jett:4:3: 400000\n", 0, jtt_kill_private_daemon,
                    &killed, &r);
    cr_assert_eq(killed, 1, "the private daemon was not found");
    cr_expect_eq(r.status, 0, "%s", r.err);
    /* every record after the failure is still written, in order */
    for (int i = 0; i < 300; i++) {
        char want[64];
        snprintf(want, sizeof want, "info main.jett:5:31: after r=%d\n", i);
        cr_expect_eq(jtt_count(r.err, want), 1, "%s missing: %.600s", want, r.err);
    }
    cr_expect(strstr(r.err, "profiler: collector failure\n"), "%s", r.err);
    const char *rargv[] = {"replay", cap, NULL};
    struct jt_run rep;
    jtt_run_exe(getenv("JETTPROFD"), NULL, rargv, &rep);
    cr_expect_eq(rep.status, 0, "%s", rep.err);
    cr_expect(strstr(rep.out, "status: partial (missing_stop_event"), "%s", rep.out);
    const char *ev = strstr(rep.out, "events: ");
    cr_expect(ev && strtoul(ev + 8, NULL, 10) > 1000, "%s", rep.out);
    jtt_run_free(&rep);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

Test(failure, compile_and_setup_failures_keep_empty_tables)
{
    const char *agent[] = {"--agent", NULL};
    struct jt_run r = jtt_run_src("fn main() {\n  log(\"info\", \"never\")\n  debug(1\n}\n", agent);
    cr_expect_eq(r.status, 3);
    cr_expect(strstr(r.out, "\nstderr: \"\"\ndebug[0]:\nlogs[0]:\nlog_sources[0]:\n"
                            "log_source_graph_path_segments[0]:\nlog_fields[0]:\nerror_kind: compile_error\n"),
              "%s", r.out);
    free(decoded(r.out, r.out_len));
    jtt_run_free(&r);
    /* a profiler setup failure: no user code, no rows, in either mode */
    char *saved = strdup(getenv("JETTPROFD") ? getenv("JETTPROFD") : "");
    setenv("JETTPROFD", "/nonexistent/jettprofd", 1);
    const char *src = "fn main() {\n  log(\"info\", \"never\")\n  debug(1)\n}\n";
    const char *mem[] = {"--agent", "--profile-memory", NULL}, *human[] = {"--profile", NULL};
    r = jtt_run_src(src, mem);
    cr_expect_eq(r.status, 4);
    cr_expect(strstr(r.out, "\ndebug[0]:\nlogs[0]:\nlog_sources[0]:\n"
                            "log_source_graph_path_segments[0]:\nlog_fields[0]:\n"
                            "error_kind: profiler_setup_failure\n"), "%s", r.out);
    free(decoded(r.out, r.out_len));
    jtt_run_free(&r);
    r = jtt_run_src(src, human);
    cr_expect_eq(r.status, 4);
    cr_expect_null(strstr(r.err, "never"), "%s", r.err);
    cr_expect_null(strstr(r.err, "debug "), "%s", r.err);
    jtt_run_free(&r);
    setenv("JETTPROFD", saved, 1);
    free(saved);
    /* a program that never calls them: the tables stay empty */
    r = jtt_run_src("fn main() { print(1) }\n", agent);
    cr_expect(strstr(r.out, "\ndebug[0]:\nlogs[0]:\nlog_sources[0]:\n"
                            "log_source_graph_path_segments[0]:\nlog_fields[0]:"), "%s", r.out);
    jtt_run_free(&r);
}

/* ---- out of memory ---- */

/* The elements of the top-level array `key` of a decoded envelope, as JSON text. */
static char *json_array(const char *json, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, ",\"%s\":[", key);
    const char *p = strstr(json, k);
    cr_assert(p, "no %s in %s", key, json);
    p += strlen(k);
    int depth = 0;
    bool in_str = false;
    const char *e = p;
    for (; *e && (in_str || depth > 0 || *e != ']'); e++) {
        if (in_str) {
            if (*e == '\\')
                e++;
            else if (*e == '"')
                in_str = false;
        } else if (*e == '"') {
            in_str = true;
        } else if (*e == '[' || *e == '{') {
            depth++;
        } else if (*e == ']' || *e == '}') {
            depth--;
        }
    }
    return strndup(p, (size_t)(e - p));
}

static struct jt_run run_failing(const char *dir, unsigned at, const char *count_file)
{
    const char *lib = getenv("JETTPROF_FAILALLOC");
    cr_assert(lib && *lib, "JETTPROF_FAILALLOC is not set (tests/runtime/meson.build)");
    char n[32];
    snprintf(n, sizeof n, "%u", at);
    setenv("LD_PRELOAD", lib, 1);
    setenv("FAILALLOC_AT", n, 1);
    if (count_file)
        setenv("FAILALLOC_COUNT_FILE", count_file, 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
    const char *agent[] = {"--agent", NULL};
    struct jt_run r = run_file(dir, "main.jett", agent);
    unsetenv("LD_PRELOAD");
    unsetenv("FAILALLOC_AT");
    unsetenv("FAILALLOC_COUNT_FILE");
    return r;
}

Test(oom, every_allocation_failure_is_reported_as_out_of_memory)
{
    char *dir = jtt_tmpdir(), count[4200];
    jtt_write(dir, "main.jett",
              "fn main() {\n  debug(\"a\")\n  log(\"info\", \"one\", \"k\", 1)\n  debug([1, 2])\n"
              "  log(\"warn\", \"two\", \"s\", \"text\")\n  print(\"end\")\n}\n");
    snprintf(count, sizeof count, "%s/count", dir);
    struct jt_run base = run_failing(dir, 0, count);
    cr_assert_eq(base.status, 0, "%s", base.err);
    char *c = tl_slurp(count, NULL);
    unsigned total = (unsigned)strtoul(c, NULL, 10);
    free(c);
    cr_assert_gt(total, 0);
    char *full = decoded(base.out, base.out_len);
    unsigned recording = 0;
    for (unsigned at = 1; at <= total; at++) {
        struct jt_run r = run_failing(dir, at, NULL);
        if (strstr(r.err, "Sanitizer: CHECK failed")) {
            /* under a sanitizer: its runtime's own allocation (starting a thread) failed, in
             * the sanitizer before any code of ours could see it */
        } else if (r.status == 128 + SIGABRT) {
            /* interpreter bookkeeping: said once, before the abort */
            cr_expect_str_eq(r.err, "jett: fatal: out of memory\n", "allocation %u", at);
        } else if (r.status == 0) {
            cr_expect_str_eq(r.out, base.out, "allocation %u: exit 0 with another envelope", at);
        } else if (r.status == 3 || r.status == 4) {
            /* loading the program, or starting the runtime thread: no user code ran */
            cr_expect(strstr(r.out, "termination: not_started"), "allocation %u: %s", at, r.out);
            cr_expect(r.status == 4 || strstr(r.out, "Cannot allocate memory") ||
                          strstr(r.out, "out of memory"), "allocation %u: %s", at, r.out);
            cr_expect(strstr(r.out, "\ndebug[0]:\nlogs[0]:\n"), "allocation %u: %s", at, r.out);
        } else {
            cr_expect_eq(r.status, 1, "allocation %u: status %d: %s", at, r.status, r.err);
            cr_expect_str_eq(r.err, "", "allocation %u", at);
            char *json = decoded(r.out, r.out_len);
            cr_expect(strstr(json, "runtime error: out of memory"), "allocation %u: %s", at, json);
            recording += strstr(json, "out of memory: cannot record") != NULL;
            /* what was recorded before it is a prefix of the full run's rows */
            static const char *const names[] = {"debug", "logs", "log_fields"};
            for (int t = 0; t < 3; t++) {
                char *part = json_array(json, names[t]), *whole = json_array(full, names[t]);
                size_t n = strlen(part);
                cr_expect(strncmp(whole, part, n) == 0 && (!n || !whole[n] || whole[n] == ','),
                          "allocation %u: %s is not a prefix of the full run's:\n%s\n%s", at,
                          names[t], part, whole);
                free(part);
                free(whole);
            }
            free(json);
        }
        jtt_run_free(&r);
    }
    /* some failures hit the rows' own allocations, and were reported as such */
    cr_expect_gt(recording, 0, "no failure reached the recording of a row");
    free(full);
    jtt_run_free(&base);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- sources ---- */

Test(sources, each_logging_source_is_listed_once_by_id_with_its_origin_and_segments)
{
    char *dir = jtt_tmpdir(), lib[4200];
    jtt_write(dir, "jett.project", "");
    jtt_write(dir, "src/app/main.jett",
              "import \"src/app/quiet.jett\"\nimport \"deps/kit/util.jett\"\nimport \"stdlib/say.jett\"\n"
              "fn main() {\n  std.say.hello()\n  kit.util.note(1)\n  app.quiet.none()\n"
              "  kit.util.note(2)\n  log(\"info\", \"main\")\n}\n");
    jtt_write(dir, "src/app/quiet.jett", "namespace app.quiet\nfn none() { debug(0) }\n");
    jtt_write(dir, "deps/kit/util.jett",
              "namespace kit.util\nfn note(x: int) { log(\"trace\", \"dep\", \"x\", x) }\n");
    jtt_write(dir, "lib/say.jett", "namespace std.say\nfn hello() { log(\"debug\", \"std\") }\n");
    snprintf(lib, sizeof lib, "%s/lib", dir);
    char *saved = getenv("JETT_STDLIB") ? strdup(getenv("JETT_STDLIB")) : NULL;
    setenv("JETT_STDLIB", lib, 1);
    const char *agent[] = {"--agent", NULL};
    struct jt_run r = run_file(dir, "src/app/main.jett", agent);
    if (saved)
        setenv("JETT_STDLIB", saved, 1);
    else
        unsetenv("JETT_STDLIB");
    free(saved);
    cr_assert_eq(r.status, 0, "%s", r.out);
    /* load order: the program file 1, quiet 2, the dependency 3, the stdlib file 4; quiet only
     * debugs, so it has no record and is not listed */
    unsigned n;
    char *rows = table_rows(r.out, "log_sources", &n);
    cr_expect_str_eq(rows, "  1,project,src/app/main.jett\n  3,dependency,kit/util.jett\n"
                           "  4,stdlib,stdlib/say.jett\n");
    free(rows);
    rows = table_rows(r.out, "log_source_graph_path_segments", &n);
    cr_expect_str_eq(rows, "  1,0,src\n  1,1,app\n  1,2,main.jett\n  3,0,kit\n  3,1,util.jett\n"
                           "  4,0,stdlib\n  4,1,say.jett\n");
    free(rows);
    rows = table_rows(r.out, "logs", &n);
    cr_expect_str_eq(rows, "  1,debug,4,2,14,std,0\n  2,trace,3,2,19,dep,1\n  3,trace,3,2,19,dep,1\n"
                           "  4,info,1,9,3,main,0\n");
    free(rows);
    rows = table_rows(r.out, "debug", &n);
    cr_expect_str_eq(rows, "  1,src/app/quiet.jett,2,13,\"0\"\n");
    free(rows);
    free(decoded(r.out, r.out_len));
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}
