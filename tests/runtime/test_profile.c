/* Profiled runs against the real agent and daemon ($JETTPROFD is the build's jettprofd):
 * the known hot function ranked first, exact memory totals derived from the program's own
 * arithmetic, origins and relative paths with no absolute path anywhere, program output
 * identical with and without profiling, every lifecycle state with its exit code, and every
 * --agent document decoded by the official TOON decoder. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

/* ---- helpers ---- */

static char *project(void)
{
    return jtt_tmpdir();
}

static struct jt_run run_in(const char *dir, const char *file, const char *const *opts)
{
    struct jt_run r;
    jtt_run_file(dir, file, opts, &r);
    return r;
}

/* Decodes an --agent document; fails the test when it is not valid TOON. */
static char *decoded(const struct jt_run *r)
{
    char *json = tl_toon_decode(r->out, r->out_len, NULL);
    int ok = json != NULL;
    cr_assert(ok, "not valid TOON:\n%s", r->out);
    return json;
}

/* The number after "key": in the first object, at or after `from`, that holds it. */
static double jnum(const char *from, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(from, k);
    cr_assert(p, "no %s in %s", key, from);
    return strtod(p + strlen(k), NULL);
}

/* The JSON text of the bottleneck with rank `rank` (up to the next rank), malloc'ed. */
static char *bottleneck(const char *json, int rank)
{
    char k[64];
    snprintf(k, sizeof k, "{\"rank\":%d,", rank);
    const char *p = strstr(json, k);
    cr_assert(p, "no bottleneck of rank %d in %s", rank, json);
    snprintf(k, sizeof k, "{\"rank\":%d,", rank + 1);
    const char *e = strstr(p, k);
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static void no_absolute_paths(const char *dir, const struct jt_run *r)
{
    cr_expect_null(strstr(r->out, dir), "stdout names the project's absolute path");
    cr_expect_null(strstr(r->err, dir), "stderr names the project's absolute path");
    cr_expect_null(strstr(r->out, "/tmp"), "an absolute path in stdout:\n%s", r->out);
    cr_expect_null(strstr(r->err, "/tmp"), "an absolute path in stderr:\n%s", r->err);
    const char *src = jtt_source_root();
    cr_expect_null(strstr(r->out, src), "stdout names the runtime's source tree");
    cr_expect_null(strstr(r->err, src), "stderr names the runtime's source tree");
}

/* ---- the hot function ---- */

/* hot() runs 9 times the loop iterations of cold(), with the same loop inline: its share of
 * jett samples is 90%; the test accepts 90 +/- 8 points (call overhead and timer jitter).
 * main, the root of every stack, holds 100% inclusive and ranks first; hot must come next,
 * ahead of cold. */
static const char hot_src[] =
    "namespace t.hot\n"
    "fn hot() -> int { var x = 0\n for i in 0..(9 * 150000) { x = (x + i * 7) %% 1000003 }\n return x }\n"
    "fn cold() -> int { var x = 0\n for i in 0..150000 { x = (x + i * 7) %% 1000003 }\n return x }\n"
    "fn main() {\n  var t = 0\n  for r in 0..%d { t = t + hot() + cold() }\n  print(t)\n}\n";
/* Rounds enough for a few hundred samples: the bytecode VM runs them about three times as
 * fast as the tree walker. */
static int hot_rounds(void)
{
    return jtt_backend() && !strcmp(jtt_backend(), "interp") ? 4 : 16;
}

Test(cpu, the_known_hot_function_is_ranked_first_within_tolerance)
{
    char *dir = project();
    char src[sizeof hot_src + 16];
    snprintf(src, sizeof src, hot_src, hot_rounds());
    jtt_write(dir, "main.jett", src);
    const char *opts[] = {"--profile", "--agent", "--profile-threshold", "1", NULL};
    struct jt_run r = run_in(dir, "main.jett", opts);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    char *json = decoded(&r);
    cr_expect(strstr(json, "\"mode\":\"cpu\",\"status\":\"complete\",\"termination\":\"returned\""),
              "%s", json);
    double attributed = jnum(json, "attributed_samples");
    cr_assert_gt(attributed, 100, "too few samples to judge: %s", json);
    char *b1 = bottleneck(json, 1), *b2 = bottleneck(json, 2), *b3 = bottleneck(json, 3);
    cr_expect(strstr(b1, "\"function\":\"main\""), "%s", b1);
    cr_expect_eq(jnum(b1, "cpu_percent"), 100.0, "%s", b1);
    cr_expect(strstr(b2, "\"function\":\"hot\""), "hot is not ranked first below main: %s", b2);
    cr_expect(strstr(b3, "\"function\":\"cold\""), "%s", b3);
    double hot_pct = jnum(b2, "cpu_percent"), cold_pct = jnum(b3, "cpu_percent");
    cr_expect(hot_pct >= 82.0 && hot_pct <= 98.0, "hot share %.2f%% outside 90 +/- 8", hot_pct);
    cr_expect(cold_pct >= 2.0 && cold_pct <= 18.0, "cold share %.2f%% outside 10 +/- 8", cold_pct);
    /* its loop line is its hottest line, with the self work */
    cr_expect(strstr(b2, "\"hot_lines\":[{\"path\":\"main.jett\",\"line\":3"), "%s", b2);
    cr_expect(strstr(b2, "CPU_HIGH_SELF"), "%s", b2);
    cr_expect(strstr(b2, "\"frames\":[\"t.hot.main\",\"t.hot.hot\"]"), "%s", b2);
    cr_log_info("hot %.2f%%, cold %.2f%% of %.0f jett samples", hot_pct, cold_pct, attributed);
    free(b1);
    free(b2);
    free(b3);
    free(json);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

Test(cpu, sleeping_is_waiting_and_never_charged_to_the_caller)
{
    char *dir = project();
    jtt_write(dir, "main.jett",
              "namespace t.sleep\nfn nap() { sleep(300) }\nfn main() { nap(); print(\"woke\") }\n");
    const char *opts[] = {"--profile", "--agent", NULL};
    struct jt_run r = run_in(dir, "main.jett", opts);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *json = decoded(&r);
    double waiting = jnum(json, "waiting_samples"), attributed = jnum(json, "attributed_samples");
    cr_expect_gt(waiting, 150, "300 ms asleep at 1000 Hz: %s", json);
    cr_expect_lt(attributed, 30, "sleep was charged to Jett frames: %s", json);
    free(json);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- exact memory totals ---- */

static const char mem_src[] =
    "namespace t.mem\n"
    "var keep = []\n"
    "fn build(n: int) -> list {\n"
    "  var xs = []\n"
    "  for i in 0..n { push(xs, \"v\" + str(i)) }\n"
    "  return xs\n"
    "}\n"
    "fn main() {\n"
    "  for r in 0..3 { let t = build(10) }\n"
    "  for i in 0..5 { push(keep, \"k\" + str(i)) }\n"
    "}\n";

/* A model of the heap as the program drives it (LANGUAGE.md rules): strings are their length,
 * lists 16 bytes a slot, push grows 0 -> 4 -> 8 -> ... slots. */
struct model {
    long long live, peak, allocated, freed, count, resizes;
};
static void m_alloc(struct model *m, long long n)
{
    m->count++;
    m->allocated += n;
    m->live += n;
    if (m->live > m->peak)
        m->peak = m->live;
}
static void m_free(struct model *m, long long n)
{
    m->freed += n;
    m->live -= n;
}
static long long m_push(struct model *m, long long *len, long long *cap)
{
    if (*len == *cap) {
        long long nc = *cap ? *cap * 2 : 4, grow = (nc - *cap) * 16;
        m->resizes++;
        m->allocated += grow;
        m->live += grow;
        if (m->live > m->peak)
            m->peak = m->live;
        *cap = nc;
    }
    return ++*len;
}
static int digits(long long i)
{
    int d = 1;
    while (i >= 10) {
        i /= 10;
        d++;
    }
    return d;
}

Test(memory, totals_are_exact)
{
    struct model m = {0};
    struct model build = {0}, mainf = {0};
    /* var keep = [] (the <init> frame) */
    m_alloc(&m, 0);
    long long keep_len = 0, keep_cap = 0;
    long long t_bytes = 0; /* the list held by `t` from the previous round */
    for (int r = 0; r < 3; r++) {
        struct model before = m;
        long long len = 0, cap = 0, strs = 0;
        m_alloc(&m, 0); /* var xs = [] */
        for (long long i = 0; i < 10; i++) {
            m_alloc(&m, digits(i));      /* str(i) */
            m_alloc(&m, 1 + digits(i));  /* "v" + str(i) */
            m_free(&m, digits(i));       /* the temporary str(i) */
            m_push(&m, &len, &cap);
            strs += 1 + digits(i);
        }
        /* `let t = ...` replaces the previous round's list, which is freed with its strings */
        m_free(&m, t_bytes);
        t_bytes = cap * 16 + strs;
        build.count += m.count - before.count;
        build.allocated += m.allocated - before.allocated;
        build.resizes += m.resizes - before.resizes;
    }
    struct model before = m;
    for (long long i = 0; i < 5; i++) {
        m_alloc(&m, digits(i));
        m_alloc(&m, 1 + digits(i));
        m_free(&m, digits(i));
        m_push(&m, &keep_len, &keep_cap);
    }
    mainf.count = m.count - before.count;
    mainf.allocated = m.allocated - before.allocated;
    mainf.resizes = m.resizes - before.resizes;
    m_free(&m, t_bytes); /* main returns: its last `t` is released */
    long long retained = m.live;

    char *dir = project();
    jtt_write(dir, "main.jett", mem_src);
    const char *opts[] = {"--profile-memory", "--agent", "--profile-threshold", "0", NULL};
    struct jt_run r = run_in(dir, "main.jett", opts);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *json = decoded(&r);
    const char *totals = strstr(json, "\"totals\":");
    cr_assert(totals, "%s", json);
    cr_expect_eq((long long)jnum(totals, "allocation_count"), m.count, "%s", totals);
    cr_expect_eq((long long)jnum(totals, "resize_count"), m.resizes, "%s", totals);
    cr_expect_eq((long long)jnum(totals, "allocated_bytes"), m.allocated, "%s", totals);
    cr_expect_eq((long long)jnum(totals, "freed_bytes"), m.freed, "%s", totals);
    cr_expect_eq((long long)jnum(totals, "peak_live_bytes"), m.peak, "%s", totals);
    cr_expect_eq((long long)jnum(totals, "retained_bytes"), retained, "%s", totals);
    char *b1 = bottleneck(json, 1), *b2 = bottleneck(json, 2);
    cr_expect(strstr(b1, "\"namespace\":\"t.mem\",\"function\":\"build\",\"path\":\"main.jett\",\"line\":3"),
              "%s", b1);
    cr_expect_eq((long long)jnum(b1, "allocation_count"), build.count);
    cr_expect_eq((long long)jnum(b1, "allocated_bytes"), build.allocated);
    cr_expect_eq((long long)jnum(b1, "resize_count"), build.resizes);
    cr_expect_eq((long long)jnum(b1, "retained_bytes"), 0, "build's lists are all freed: %s", b1);
    cr_expect(strstr(b2, "\"function\":\"main\""), "%s", b2);
    cr_expect_eq((long long)jnum(b2, "allocation_count"), mainf.count);
    cr_expect_eq((long long)jnum(b2, "allocated_bytes"), mainf.allocated);
    /* main created the five kept strings; keep's slots belong to its creator, <init> */
    cr_expect_eq((long long)jnum(b2, "retained_bytes"), 5 * 2, "%s", b2);
    free(b1);
    free(b2);
    free(json);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- origins and paths ---- */

Test(paths, project_dependency_and_stdlib_are_relative_and_nothing_is_absolute)
{
    char *dir = project();
    jtt_write(dir, "jett.project", "");
    jtt_write(dir, "src/app/main.jett",
              "namespace app\nimport \"src/app/lib.jett\"\nimport \"deps/textkit/pad.jett\"\n"
              "import \"stdlib/text.jett\"\n"
              "fn main() {\n  var n = 0\n  for i in 0..30000 {\n"
              "    n = n + len(app.lib.make(i)) + len(textkit.pad.pad(str(i), 40))"
              " + len(std.text.repeat(\"ab\", 30))\n  }\n  print(n)\n}\n");
    jtt_write(dir, "src/app/lib.jett",
              "namespace app.lib\nfn make(i: int) -> str { var s = \"\"\n for k in 0..30 { s = s + \"x\" }\n return s }\n");
    jtt_write(dir, "deps/textkit/pad.jett",
              "namespace textkit.pad\nfn pad(s: str, n: int) -> str { var o = s\n while len(o) < n { o = o + \".\" }\n return o }\n");
    /* CPU: each of the three functions takes about a third of the loop, some 200 ms in all at
     * 1000 Hz, and a threshold of 0 lists every function that has a sample */
    const char *modes[][5] = {
        {"--profile-memory", "--agent", NULL},
        {"--profile-memory", NULL},
        {"--profile", "--agent", "--profile-threshold", "0", NULL},
    };
    for (int k = 0; k < 3; k++) {
        struct jt_run r = run_in(dir, "src/app/main.jett", modes[k]);
        cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
        const char *text = k == 1 ? r.err : r.out;
        if (k != 1) {
            char *json = decoded(&r);
            cr_expect(strstr(json, "\"path\":\"src/app/lib.jett\""), "%s", json);
            cr_expect(strstr(json, "\"path\":\"textkit/pad.jett\""), "%s", json);
            cr_expect(strstr(json, "\"path\":\"stdlib/text.jett\""), "%s", json);
            free(json);
        } else {
            cr_expect(strstr(text, "src/app/lib.jett"), "%s", text);
            cr_expect(strstr(text, "textkit/pad.jett"), "%s", text);
            cr_expect(strstr(text, "stdlib/text.jett"), "%s", text);
        }
        cr_expect_null(strstr(text, "deps/textkit"), "a dependency path kept its deps/ prefix");
        no_absolute_paths(dir, &r);
        jtt_run_free(&r);
    }
    /* the same project's runtime error names the relative path only */
    jtt_write(dir, "src/app/lib.jett", "namespace app.lib\nfn make(i: int) -> str { fail(\"no\") }\n");
    const char *cpu[] = {"--profile", NULL};
    struct jt_run r = run_in(dir, "src/app/main.jett", cpu);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "src/app/lib.jett:2:26: runtime error: no\n"), "%s", r.err);
    no_absolute_paths(dir, &r);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- program output is untouched by profiling ---- */

Test(identity, stdout_and_stderr_are_byte_identical_with_and_without_profiling)
{
    static const char *const examples[] = {
        /* the short examples: sanitizer builds run this suite too */
        "examples/sleepy/main.jett", "examples/retaining_cache/main.jett",
        "examples/runtime_failure/main.jett",
    };
    char *dir = project();
    jtt_write(dir, "main.jett",
              "fn main() {\n  for i in 0..2000 { print(\"line \" + str(i))\n"
              "    if i % 100 == 0 { eprint(\"err \" + str(i)) } }\n  print(chr(0) + chr(255))\n}\n");
    for (size_t e = 0; e < sizeof examples / sizeof examples[0] + 1; e++) {
        char path[4096];
        if (e < sizeof examples / sizeof examples[0])
            snprintf(path, sizeof path, "%s/%s", jtt_source_root(), examples[e]);
        else
            snprintf(path, sizeof path, "%s/main.jett", dir);
        const char *plain[] = {NULL}, *cpu[] = {"--profile", NULL}, *mem[] = {"--profile-memory", NULL};
        struct jt_run a = run_in(NULL, path, plain), b = run_in(NULL, path, cpu),
                      c = run_in(NULL, path, mem);
        cr_expect_eq(a.out_len, b.out_len, "%s", path);
        cr_expect_eq(memcmp(a.out, b.out, a.out_len < b.out_len ? a.out_len : b.out_len), 0, "%s", path);
        cr_expect_eq(a.out_len, c.out_len, "%s", path);
        cr_expect_eq(memcmp(a.out, c.out, a.out_len < c.out_len ? a.out_len : c.out_len), 0, "%s", path);
        cr_expect_eq(a.status, b.status, "%s", path);
        cr_expect_eq(a.status, c.status, "%s", path);
        /* the profile comes after the program's own stderr, which is unchanged */
        cr_expect_geq(b.err_len, a.err_len);
        cr_expect_eq(memcmp(a.err, b.err, a.err_len), 0, "%s: %s", path, b.err);
        cr_expect(strstr(b.err + a.err_len, "CPU profile"), "%s", b.err + a.err_len);
        cr_expect_geq(c.err_len, a.err_len);
        cr_expect_eq(memcmp(a.err, c.err, a.err_len), 0, "%s", path);
        cr_expect(strstr(c.err + a.err_len, "Memory profile"), "%s", c.err + a.err_len);
        jtt_run_free(&a);
        jtt_run_free(&b);
        jtt_run_free(&c);
        /* --agent: the captured scalars are the same with and without a profile */
        const char *ap[] = {"--agent", NULL}, *ac[] = {"--agent", "--profile", NULL};
        struct jt_run x = run_in(NULL, path, ap), y = run_in(NULL, path, ac);
        char *jx = decoded(&x), *jy = decoded(&y);
        char *dx = strstr(jx, ",\"debug\""), *dy = strstr(jy, ",\"debug\"");
        cr_assert(dx && dy);
        cr_expect_eq(dx - jx, dy - jy, "%s", path);
        cr_expect_eq(memcmp(jx, jy, (size_t)(dx - jx)), 0, "%s:\n%.*s\n%.*s", path,
                     (int)(dx - jx), jx, (int)(dy - jy), jy);
        cr_expect(strstr(jy, "\"profile\":{\"schema\":\"jett.profile.v1\""), "%s", path);
        free(jx);
        free(jy);
        jtt_run_free(&x);
        jtt_run_free(&y);
    }
    jtt_rmtree(dir);
    free(dir);
}

/* ---- lifecycle states and exit codes under profiling ---- */

Test(lifecycle, a_runtime_error_finalizes_what_preceded_it)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/runtime_failure/main.jett", jtt_source_root());
    const char *opts[] = {"--profile-memory", "--agent", NULL};
    struct jt_run r = run_in(NULL, path, opts);
    cr_expect_eq(r.status, 1);
    char *json = decoded(&r);
    cr_expect(strstr(json, "{\"status\":\"error\",\"termination\":\"runtime_error\",\"exit_code\":1,"),
              "%s", json);
    cr_expect(strstr(json, "\"mode\":\"memory\",\"status\":\"complete\",\"termination\":\"runtime_error\""),
              "%s", json);
    cr_expect_gt(jnum(json, "allocation_count"), 3000, "the work before the failure is profiled");
    cr_expect(strstr(json, "\"error_kind\":\"runtime_error\",\"error\":\"main.jett:9:13: runtime error: "
                           "malformed amount in record 12x4\"}"), "%s", json);
    free(json);
    jtt_run_free(&r);
}

Test(lifecycle, sigint_gives_a_partial_interrupted_profile_and_exit_130)
{
    char *dir = project();
    jtt_write(dir, "main.jett",
              "fn spin() -> int { var x = 0\n for i in 0..20000 { x = (x + i) % 7 }\n return x }\n"
              "fn main() {\n  print(\"start\")\n  while true { spin() }\n}\n");
    const char *argv[] = {"run", "main.jett", "--profile", "--agent", NULL};
    struct jt_run r;
    /* --agent keeps stderr for the envelope, so no line to wait for: a delay long enough for a
     * slow (sanitized, loaded) start; the program never ends. */
    jtt_run_sigint(dir, argv, NULL, 1500, &r);
    cr_expect_eq(r.status, 130, "exit %d: %s", r.status, r.err);
    char *json = decoded(&r);
    cr_expect(strstr(json, "{\"status\":\"error\",\"termination\":\"interrupted\",\"exit_code\":130,"
                           "\"stdout\":\"start\\n\""), "%s", json);
    cr_expect(strstr(json, "\"mode\":\"cpu\",\"status\":\"partial\""), "%s", json);
    cr_expect(strstr(json, "\"termination\":\"interrupted\",\"backend\""), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"interrupted\""), "%s", json);
    /* the samples taken before the signal are in it (how many depends on the CPU the loaded
     * machine gave the program in those 1500 ms, so only that there are some) */
    cr_expect_gt(jnum(json, "attributed_samples"), 0, "%s", json);
    free(json);
    jtt_run_free(&r);
    /* human mode: the profile follows on stderr */
    const char *argv2[] = {"run", "main.jett", "--profile", NULL};
    jtt_run_sigint(dir, argv2, NULL, 1500, &r);
    cr_expect_eq(r.status, 130);
    cr_expect_str_eq(r.out, "start\n");
    cr_expect_eq(strncmp(r.err, "jett: interrupted\nCPU profile", 29), 0, "%s", r.err);
    cr_expect(strstr(r.err, "termination: interrupted"), "%s", r.err);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

Test(lifecycle, a_setup_failure_runs_no_user_code_and_exits_4)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/runtime/fixtures/hello.jett", jtt_source_root());
    char *saved = strdup(getenv("JETTPROFD") ? getenv("JETTPROFD") : "");
    setenv("JETTPROFD", "/nonexistent/jettprofd", 1);
    const char *opts[] = {"--profile", NULL};
    struct jt_run r = run_in(NULL, path, opts);
    cr_expect_eq(r.status, 4);
    cr_expect_str_eq(r.out, "");
    cr_expect(strstr(r.err, "profiler: setup failure"), "%s", r.err);
    cr_expect_null(strstr(r.err, "user"), "user code ran: %s", r.err);
    jtt_run_free(&r);
    const char *opts2[] = {"--profile-memory", "--agent", NULL};
    r = run_in(NULL, path, opts2);
    cr_expect_eq(r.status, 4);
    char *json = decoded(&r);
    cr_expect(strstr(json, "{\"status\":\"error\",\"termination\":\"not_started\",\"exit_code\":4,"
                           "\"stdout\":\"\",\"stderr\":\"\""), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"profiler_setup_failure\",\"error\":\"profiler: setup failure"),
              "%s", json);
    cr_expect_null(strstr(json, "\"profile\""), "%s", json);
    free(json);
    jtt_run_free(&r);
    setenv("JETTPROFD", saved, 1);
    free(saved);
    /* an unwritable capture path is a setup failure too, and the path is not echoed */
    const char *opts3[] = {"--profile", "--profile-capture", "/nonexistent/dir/run.jpcap", NULL};
    r = run_in(NULL, path, opts3);
    cr_expect_eq(r.status, 4);
    cr_expect_str_eq(r.out, "");
    cr_expect(strstr(r.err, "cannot open the capture file"), "%s", r.err);
    cr_expect_null(strstr(r.err, "/nonexistent"), "%s", r.err);
    jtt_run_free(&r);
}

Test(lifecycle, a_compile_error_emits_no_profile)
{
    char *dir = project();
    jtt_write(dir, "main.jett", "fn main() {\n  print(\"x\"\n}\n");
    const char *opts[] = {"--profile", "--agent", NULL};
    struct jt_run r = run_in(dir, "main.jett", opts);
    cr_expect_eq(r.status, 3);
    char *json = decoded(&r);
    cr_expect_null(strstr(json, "\"profile\""), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"compile_error\""), "%s", json);
    free(json);
    jtt_run_free(&r);
    const char *opts2[] = {"--profile-memory", NULL};
    r = run_in(dir, "main.jett", opts2);
    cr_expect_eq(r.status, 3);
    cr_expect_null(strstr(r.err, "profile"), "%s", r.err);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

Test(lifecycle, a_collector_failure_after_a_normal_return_keeps_exit_0_but_fails_the_run)
{
    char *dir = project();
    jtt_write(dir, "main.jett",
              "fn spin() -> int { var x = 0\n for i in 0..20000 { x = (x + i) % 7 }\n return x }\n"
              "fn main() {\n  for r in 0..600 { spin(); sleep(1) }\n  print(\"done\")\n}\n");
    const char *argv[] = {"run", "main.jett", "--profile", "--agent", NULL};
    struct jt_run r;
    int killed = 0;
    jtt_run_hook(dir, argv, NULL, 300, jtt_kill_private_daemon, &killed, &r);
    cr_assert_eq(killed, 1, "the private daemon was not found");
    cr_expect_eq(r.status, 0, "the program's status stands: %s", r.out);
    char *json = decoded(&r);
    cr_expect(strstr(json, "{\"status\":\"error\",\"termination\":\"returned\",\"exit_code\":0,"
                           "\"stdout\":\"done\\n\""), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"profiler_failure\",\"error\":\"profiler: collector failure\"}"),
              "%s", json);
    free(json);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- excerpts come from the loaded sources, redacted ---- */

struct rewrite {
    const char *dir;
    int done;
};

static void rewrite_source(int pid, void *user)
{
    (void)pid;
    struct rewrite *w = user;
    /* Same lines, different text (code, not comments, which an excerpt leaves out): an
     * excerpt read from disk now would say "REREAD". */
    jtt_write(w->dir, "main.jett", "REREAD\nREREAD\nREREAD\nREREAD\nREREAD\nREREAD\nREREAD\n"
                                   "REREAD\nREREAD\nREREAD\nREREAD\nREREAD\nREREAD\nREREAD\n"
                                   "REREAD\nREREAD\n");
    w->done++;
}

/* The program announces on stderr that its hot loop is over, then writes 4 MiB more to
 * stderr: far more than a pipe holds, so it cannot go past that write, nor reach the end of
 * the run where the excerpts are asked for, before the harness has read on after rewriting
 * the source. The human mode writes the program's stderr through (--agent would capture it);
 * the capture gives the TOON profile of the same run. */
Test(excerpts, hot_lines_are_redacted_and_come_from_the_loaded_source)
{
    char *dir = project();
    jtt_write(dir, "main.jett",
              "namespace t.sec\n"
              "fn check(k: secret, n: int) -> int {\n"
              "    var h = 0\n"
              "    for i in 0..n {\n"
              "        h = (h + len(k + \"salt\") + i) % 9973 // mix in the key\n"
              "    }\n"
              "    return h\n"
              "}\n"
              "fn main() {\n"
              "    let key: secret = \"hunter2\"\n"
              "    print(check(key, 3000000))\n"
              "    var pad = \".\"\n"
              "    for i in 0..22 { pad = pad + pad }\n"
              "    eprint(\"hot loop over\")\n"
              "    eprint(pad)\n"
              "}\n");
    char cap[4200];
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    const char *argv[] = {"run", "main.jett", "--profile", "--profile-capture", cap, NULL};
    struct rewrite w = {dir, 0};
    struct jt_run r;
    jtt_run_hook(dir, argv, "hot loop over\n", 0, rewrite_source, &w, &r);
    cr_assert_eq(w.done, 1, "the source was not rewritten while the program waited");
    const char *report = strstr(r.err, "CPU profile\n");
    cr_assert_eq(r.status, 0, "%s", report ? report : "(no report)");
    cr_assert(report, "no human report after %zu bytes of stderr", r.err_len);
    cr_expect(strstr(report, "hot line main.jett:5:9, self "), "%s", report);
    cr_expect(strstr(report, ": h = (h + len(<secret-expression>) + i) % 9973 (redacted)\n"),
              "%s", report);
    cr_expect_null(strstr(report, "REREAD"), "an excerpt was read again from disk: %s", report);
    cr_expect_null(strstr(report, "hunter2"), "%s", report);

    const char *rargv[] = {"replay", cap, "--format", "toon", NULL};
    struct jt_run rep;
    jtt_run_exe(getenv("JETTPROFD"), NULL, rargv, &rep);
    cr_assert_eq(rep.status, 0, "replay: %s", rep.err);
    char *json = tl_toon_decode(rep.out, rep.out_len, NULL);
    cr_assert(json, "not valid TOON:\n%s", rep.out);
    cr_expect(strstr(json, "{\"path\":\"main.jett\",\"line\":5,\"column\":9,"), "%s", json);
    cr_expect(strstr(json, "\"code\":\"h = (h + len(<secret-expression>) + i) % 9973\","
                           "\"source_redacted\":true}"), "%s", json);
    cr_expect_null(strstr(json, "REREAD"), "an excerpt was read again from disk: %s", json);
    cr_expect_null(strstr(json, "hunter2"), "%s", json);
    cr_expect_null(strstr(json, "salt"), "%s", json);
    cr_expect_null(strstr(json, "mix in"), "%s", json);
    free(json);
    jtt_run_free(&rep);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- --profile-capture keeps the run's record stream for jettprofd replay ---- */

Test(capture, the_replay_of_a_capture_is_the_live_profile_byte_for_byte)
{
    char *dir = project();
    char path[4096], cap[4200];
    snprintf(path, sizeof path, "%s/examples/retaining_cache/main.jett", jtt_source_root());
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    const char *opts[] = {"--profile-memory", "--agent", "--profile-capture", cap, NULL};
    struct jt_run r = run_in(NULL, path, opts);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *json = decoded(&r);
    free(json);
    struct stat st;
    cr_assert_eq(stat(cap, &st), 0, "no capture file");
    cr_expect_eq(st.st_mode & 0777, 0600, "capture mode %o", st.st_mode & 0777);
    jtt_expect_replay_is_live(cap, r.out);
    jtt_run_free(&r);
    /* an existing file is refused; with --profile-capture-overwrite it is truncated, not
     * appended to */
    r = run_in(NULL, path, opts);
    cr_expect_eq(r.status, 4, "an existing capture file was not refused");
    jtt_run_free(&r);
    const char *again[] = {"--profile-memory", "--agent", "--profile-capture", cap,
                           "--profile-capture-overwrite", NULL};
    r = run_in(NULL, path, again);
    cr_expect_eq(r.status, 0);
    struct stat st2;
    cr_assert_eq(stat(cap, &st2), 0);
    /* compressed blocks vary by a few bytes between runs; appended would be twice the size */
    cr_expect_lt(st2.st_size, st.st_size + st.st_size / 2, "capture %lld then %lld bytes",
                 (long long)st.st_size, (long long)st2.st_size);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- recursion deeper than the 128-frame stack limit ---- */

Test(cpu, recursion_past_128_frames_is_truncated_and_partial)
{
    char *dir = project();
    jtt_write(dir, "main.jett",
              "namespace t.deep\n"
              "fn dive(n: int) -> int {\n"
              "    if n == 0 {\n"
              "        var x = 0\n"
              "        for i in 0..3000000 { x = (x + i) % 11 }\n"
              "        return x\n"
              "    }\n"
              "    return dive(n - 1)\n"
              "}\n"
              "fn main() { print(dive(200)) }\n");
    const char *opts[] = {"--profile", "--agent", NULL};
    struct jt_run r = run_in(dir, "main.jett", opts);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char want[64]; /* the leaf's sum of 0..2999999, modulo 11 */
    snprintf(want, sizeof want, "stdout: \"%lld\\n\"", (3000000LL * 2999999LL / 2) % 11);
    cr_expect(strstr(r.out, want), "want %s in %s", want, r.out);
    char *json = decoded(&r);
    cr_expect(strstr(json, "\"status\":\"partial\",\"partial_reason\":\"stack_capture_limit\""),
              "%s", json);
    double attributed = jnum(json, "attributed_samples"), truncated = jnum(json, "truncated_stacks");
    cr_expect_gt(attributed, 20, "%s", json);
    /* Every sample taken in the leaf's loop is 201 frames deep, past the limit. A tick may
     * also land during the descent, before depth 128 is reached: the descent is 200 calls,
     * well under a millisecond in a plain build, but its first touch of the fresh stack
     * takes up to 3 ms under AddressSanitizer (0-3 shallow samples in 8 runs, before and
     * after the runtime's actors), so up to 5 of the ~150-250 samples may be shallow. */
    cr_expect_geq(truncated, attributed - 5, "%s", json);
    cr_expect_leq(truncated, attributed, "%s", json);
    /* The <truncated-stack> frame takes each truncated sample as its self sample. It ranks
     * first when every sample was truncated (it ties dive and main on inclusive samples and
     * wins on self); after a shallow sample dive and main have one inclusive sample more. */
    char *found = NULL;
    for (int rank = 1; rank <= 3 && !found; rank++) {
        char *b = bottleneck(json, rank);
        if (strstr(b, "\"function\":\"<truncated-stack>\""))
            found = b;
        else
            free(b);
    }
    cr_assert(found, "no <truncated-stack> bottleneck among the first three: %s", json);
    cr_expect_eq(jnum(found, "self_samples"), truncated, "%s", found);
    free(found);
    free(json);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}
