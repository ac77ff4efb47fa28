/* `jettprofd export` and `jettprofd diff` on captures of real runs, each format checked by its
 * real consumer: folded sums and pprof totals (`go tool pprof -raw`) against the replayed
 * jett.profile.v1 TOON totals, speedscope against the schema the speedscope package ships
 * (ajv), the SVG's boxes against the counts and its PNG rendering (rsvg-convert); bytes
 * deterministic, no absolute path; the errors named. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/text.h"
#include "tests/runtime/support.h"

/* A call chain with recursion under it, so the leaf counts cross re-entries. */
#define CPU_PROGRAM                                                                               \
    "fn leaf(n: int) -> int {\n"                                                                  \
    "  var h = 0\n"                                                                               \
    "  for i in 0..n { h = (h * 31 + i) % 1000003 }\n"                                            \
    "  return h\n"                                                                                \
    "}\n"                                                                                         \
    "fn fact(n: int) -> int {\n"                                                                  \
    "  if n <= 1 { return leaf(3000) }\n"                                                         \
    "  return fact(n - 1) + leaf(100)\n"                                                          \
    "}\n"                                                                                         \
    "fn mid(n: int) -> int { return leaf(n) + fact(4) }\n"                                        \
    "fn main() {\n"                                                                               \
    "  var t = 0\n"                                                                               \
    "  for r in 0..300 { t = t + mid(2000) }\n"                                                   \
    "  print(str(t))\n"                                                                           \
    "}\n"

static const char *env_or_fail(const char *name, const char *what)
{
    const char *p = getenv(name);
    cr_assert(p && *p, "%s is not set: %s is needed (scripts/deps.sh installs it)", name, what);
    return p;
}

static char *path_in(const char *dir, const char *rel)
{
    char *p = malloc(strlen(dir) + strlen(rel) + 2);
    sprintf(p, "%s/%s", dir, rel);
    return p;
}

/* Runs jettprofd with argv (NULL-terminated); the result in *r. */
static void jpd(const char *cwd, const char *const *argv, struct jt_run *r)
{
    jtt_run_exe(getenv("JETTPROFD"), cwd, argv, r);
}

/* A directory holding main.jett (program) and cap.jpcap, the capture of its run in mode. */
static char *capture_of(const char *program, const char *mode)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", program);
    const char *argv[] = {"run", "main.jett", mode, "--profile-capture", "cap.jpcap", NULL};
    struct jt_run r;
    jtt_run(dir, argv, &r);
    cr_assert_eq(r.status, 0, "the profiled run failed: %s", r.err);
    jtt_run_free(&r);
    return dir;
}

/* A total of the replayed TOON profile, "    NAME: N". */
static uint64_t toon_total(const char *dir, const char *name)
{
    const char *argv[] = {"replay", "cap.jpcap", "--format", "toon", NULL};
    struct jt_run r;
    jpd(dir, argv, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char key[80];
    snprintf(key, sizeof key, "\n    %s: ", name);
    const char *at = strstr(r.out, key);
    cr_assert_not_null(at, "no %s in the profile:\n%s", name, r.out);
    uint64_t v = strtoull(at + strlen(key), NULL, 10);
    jtt_run_free(&r);
    return v;
}

/* `export cap.jpcap --format F [--value V] -o OUT` in dir; the file's bytes. */
static char *export_to(const char *dir, const char *format, const char *value, const char *out,
                       size_t *len)
{
    const char *argv[10] = {"export", "cap.jpcap", "--format", format, "-o", out};
    int n = 6;
    if (value) {
        argv[n++] = "--value";
        argv[n++] = value;
    }
    argv[n] = NULL;
    struct jt_run r;
    jpd(dir, argv, &r);
    cr_assert_eq(r.status, 0, "export --format %s: %s", format, r.err);
    cr_expect_str_eq(r.err, "", "a complete capture has no caveat");
    jtt_run_free(&r);
    char *p = path_in(dir, out);
    char *b = tl_slurp(p, len);
    free(p);
    return b;
}

/* The sum of the values of folded lines. */
static uint64_t folded_sum(const char *text, size_t *lines)
{
    uint64_t sum = 0;
    *lines = 0;
    for (const char *l = text; *l;) {
        const char *nl = strchr(l, '\n');
        cr_assert_not_null(nl, "an unterminated line");
        const char *sp = nl;
        while (sp > l && sp[-1] != ' ')
            sp--;
        cr_assert(sp > l + 1, "a line without frames: %.*s", (int)(nl - l), l);
        sum += strtoull(sp, NULL, 10);
        (*lines)++;
        l = nl + 1;
    }
    return sum;
}

Test(export, folded_cpu_stacks_add_up_to_the_attributed_samples)
{
    char *dir = capture_of(CPU_PROGRAM, "--profile");
    size_t len, lines;
    char *f = export_to(dir, "folded", NULL, "out.folded", &len);
    uint64_t want = toon_total(dir, "attributed_samples");
    cr_assert_gt(want, 0);
    cr_expect_eq(folded_sum(f, &lines), want, "folded:\n%s", f);
    cr_expect(strstr(f, "main;mid;leaf "), "the direct chain is a stack:\n%s", f);
    /* leaf under the recursion keeps its whole stack: its chain is not a re-entry */
    cr_expect(strstr(f, "main;mid;fact;fact;fact;fact;leaf "), "%s", f);
    free(f);
    jtt_rmtree(dir);
    free(dir);
}

/* Sums the columns of the samples `go tool pprof -raw` lists. */
static void pprof_sums(const char *dir, const char *file, uint64_t *sums, int ncol,
                       char *types, size_t types_cap)
{
    const char *go = env_or_fail("JETT_TEST_GO", "go (golang-go) for `go tool pprof`");
    char *home = path_in(dir, "gohome");
    mkdir(home, 0700);
    setenv("HOME", home, 1);
    setenv("GOCACHE", home, 1);
    setenv("GOFLAGS", "-mod=mod", 1);
    const char *argv[] = {"tool", "pprof", "-raw", file, NULL};
    struct jt_run r;
    jtt_run_exe(go, dir, argv, &r);
    cr_assert_eq(r.status, 0, "go tool pprof: %s", r.err);
    const char *s = strstr(r.out, "Samples:\n");
    cr_assert_not_null(s, "%s", r.out);
    s += 9;
    const char *eol = strchr(s, '\n');
    snprintf(types, types_cap, "%.*s", (int)(eol - s), s);
    memset(sums, 0, (size_t)ncol * sizeof *sums);
    for (const char *l = eol + 1; *l == ' ';) {
        char *p = (char *)l;
        for (int c = 0; c < ncol; c++)
            sums[c] += strtoull(p, &p, 10);
        cr_assert_eq(*p, ':', "a sample line: %.40s", l);
        l = strchr(l, '\n') + 1;
    }
    jtt_run_free(&r);
    free(home);
}

Test(export, pprof_cpu_totals_equal_the_profile_by_go_tool_pprof)
{
    char *dir = capture_of(CPU_PROGRAM, "--profile");
    size_t len;
    free(export_to(dir, "pprof", NULL, "cpu.pb.gz", &len));
    uint64_t sums[2];
    char types[128];
    pprof_sums(dir, "cpu.pb.gz", sums, 2, types, sizeof types);
    cr_expect_str_eq(types, "samples/count cpu/nanoseconds[dflt]");
    uint64_t want = toon_total(dir, "attributed_samples");
    cr_expect_eq(sums[0], want);
    cr_expect_eq(sums[1], want * 1000000u, "1000 Hz: a sample is 1 ms");
    /* locations leaf first: the program's work is all in leaf, which pprof must see as flat */
    const char *top[] = {"tool", "pprof", "-top", "-sample_index=samples", "cpu.pb.gz", NULL};
    struct jt_run r;
    jtt_run_exe(getenv("JETT_TEST_GO"), dir, top, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *head = strstr(r.out, "flat  flat%");
    cr_assert_not_null(head, "%s", r.out);
    const char *row = strchr(head, '\n') + 1, *eol = strchr(row, '\n');
    cr_expect(eol && eol - row > 5 && !strncmp(eol - 5, " leaf", 5), "leaf has the most flat "
              "samples:\n%s", r.out);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

static char *memory_capture(void)
{
    char *src = path_in(jtt_source_root(), "examples/retaining_cache/main.jett");
    char *text = tl_slurp(src, NULL);
    char *dir = capture_of(text, "--profile-memory");
    free(text);
    free(src);
    return dir;
}

Test(export, pprof_memory_totals_equal_the_profile_by_go_tool_pprof)
{
    char *dir = memory_capture();
    size_t len;
    free(export_to(dir, "pprof", NULL, "mem.pb.gz", &len));
    uint64_t sums[4];
    char types[128];
    pprof_sums(dir, "mem.pb.gz", sums, 4, types, sizeof types);
    cr_expect_str_eq(types, "alloc_objects/count alloc_space/bytes[dflt] inuse_objects/count "
                            "inuse_space/bytes");
    cr_expect_eq(sums[0], toon_total(dir, "allocation_count"));
    cr_expect_eq(sums[1], toon_total(dir, "allocated_bytes"));
    cr_expect_eq(sums[3], toon_total(dir, "retained_bytes"));
    cr_expect_gt(sums[3], 0, "the example retains its cache");
    /* in-use objects: what folded's retained_count says, some of the allocations, not all */
    size_t flen, lines;
    char *f = export_to(dir, "folded", "retained_count", "mem.count.folded", &flen);
    cr_expect_eq(sums[2], folded_sum(f, &lines), "%s", f);
    free(f);
    cr_expect(sums[2] > 0 && sums[2] < sums[0], "%llu of %llu allocations in use",
              (unsigned long long)sums[2], (unsigned long long)sums[0]);
    jtt_rmtree(dir);
    free(dir);
}

Test(export, folded_memory_values_add_up_to_each_total)
{
    char *dir = memory_capture();
    static const char *const value[] = {"alloc_bytes", "alloc_count", "retained_bytes",
                                        "peak_bytes"};
    static const char *const total[] = {"allocated_bytes", "allocation_count",
                                        "retained_bytes", "peak_live_bytes"};
    for (int i = 0; i < 4; i++) {
        size_t len, lines;
        char *f = export_to(dir, "folded", value[i], "mem.folded", &len);
        cr_expect_eq(folded_sum(f, &lines), toon_total(dir, total[i]), "%s:\n%s", value[i], f);
        cr_expect_gt(lines, 0);
        free(f);
    }
    jtt_rmtree(dir);
    free(dir);
}

/* Runs the speedscope check on file; "SUM END" from its stdout. */
static void speedscope_check(const char *dir, const char *file, uint64_t *sum, uint64_t *end)
{
    const char *node = env_or_fail("JETT_TEST_NODE", "node");
    char *script = path_in(jtt_source_root(), "tests/export/speedscope_check.mjs");
    char *cmd = malloc(strlen(node) + strlen(script) + strlen(dir) + strlen(file) + 32);
    sprintf(cmd, "'%s' '%s' < '%s/%s'", node, script, dir, file);
    const char *argv[] = {"-c", cmd, NULL};
    struct jt_run r;
    jtt_run_exe("/bin/sh", dir, argv, &r);
    cr_assert_eq(r.status, 0, "speedscope schema: %s", r.err);
    cr_assert_eq(sscanf(r.out, "%" SCNu64 " %" SCNu64, sum, end), 2, "%s", r.out);
    jtt_run_free(&r);
    free(cmd);
    free(script);
}

/* tests/export/html_check.mjs on dir/file with its flags: in Debian's chromium, headless. */
static void html_check(const char *dir, const char *file, const char *flags)
{
    const char *node = env_or_fail("JETT_TEST_NODE", "node");
    char *script = path_in(jtt_source_root(), "tests/export/html_check.mjs");
    char *cmd = malloc(strlen(node) + strlen(script) + strlen(dir) + strlen(file) +
                       strlen(flags) + 32);
    sprintf(cmd, "'%s' '%s' '%s/%s' %s", node, script, dir, file, flags);
    const char *argv[] = {"-c", cmd, NULL};
    struct jt_run r;
    jtt_run_exe("/bin/sh", dir, argv, &r);
    cr_assert_eq(r.status, 0, "the HTML page in chromium (%s): %s%s", file, r.out, r.err);
    jtt_run_free(&r);
    free(cmd);
    free(script);
}

/* The HTML report of a CPU and of a memory run (and a live run's own `--profile-export
 * html:PATH`, the same bytes as the export of its capture), in a real browser. */
Test(export, the_html_report_works_in_a_browser_and_matches_the_profile, .timeout = 240)
{
    char *dir = capture_of(CPU_PROGRAM, "--profile");
    size_t len;
    char *page = export_to(dir, "html", NULL, "cpu.html", &len);
    /* its bottleneck table is the profile's, in its order */
    const char *argv[] = {"replay", "cap.jpcap", "--format", "toon", NULL};
    struct jt_run r;
    jpd(dir, argv, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *at = page;
    for (const char *f = r.out; (f = strstr(f, "\n      function: ")); f++) {
        char name[128];
        sscanf(f + strlen("\n      function: "), "%127s", name);
        const char *next = strstr(at, name);
        cr_expect(next, "bottleneck %s missing or out of order in the page", name);
        if (next)
            at = next;
    }
    jtt_run_free(&r);
    free(page);
    html_check(dir, "cpu.html", "");
    jtt_rmtree(dir);
    free(dir);
    dir = memory_capture();
    free(export_to(dir, "html", NULL, "mem.html", &len));
    html_check(dir, "mem.html", "--memory");
    jtt_rmtree(dir);
    free(dir);
    /* a live run's html export is its capture's */
    dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", CPU_PROGRAM);
    const char *run[] = {"run", "main.jett", "--profile-memory", "--profile-capture", "cap.jpcap",
                         "--profile-export", "html:live.html", NULL};
    jtt_run(dir, run, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    jtt_run_free(&r);
    size_t llen, elen;
    char *lp = path_in(dir, "live.html"), *live = tl_slurp(lp, &llen);
    char *exported = export_to(dir, "html", NULL, "export.html", &elen);
    cr_expect(live && llen == elen && !memcmp(live, exported, elen),
              "html:PATH of the live run is the export of its capture");
    free(live);
    free(lp);
    free(exported);
    jtt_rmtree(dir);
    free(dir);
}

Test(export, speedscope_is_valid_against_the_speedscope_schema)
{
    char *dir = capture_of(CPU_PROGRAM, "--profile");
    size_t len;
    free(export_to(dir, "speedscope", NULL, "cpu.speedscope.json", &len));
    uint64_t sum, end;
    speedscope_check(dir, "cpu.speedscope.json", &sum, &end);
    uint64_t want = toon_total(dir, "attributed_samples");
    cr_expect_eq(sum, want);
    cr_expect_eq(end, want);
    jtt_rmtree(dir);
    free(dir);
    dir = memory_capture();
    free(export_to(dir, "speedscope", "retained_bytes", "mem.speedscope.json", &len));
    speedscope_check(dir, "mem.speedscope.json", &sum, &end);
    cr_expect_eq(sum, toon_total(dir, "retained_bytes"));
    jtt_rmtree(dir);
    free(dir);
}

/* Every box of the SVG: its <title> figure and its rect's x and width. */
struct box {
    uint64_t value;
    double x, w;
};

static size_t svg_boxes(const char *svg, struct box *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = svg; (p = strstr(p, "<g><title>")) && n < cap; p++) {
        const char *open = strstr(p, " (");
        const char *end = strstr(p, "</title>");
        while (open && strstr(open + 1, " (") && strstr(open + 1, " (") < end)
            open = strstr(open + 1, " (");
        cr_assert(open && end && open < end, "a box title with its figure");
        out[n].value = strtoull(open + 2, NULL, 10);
        const char *x = strstr(end, "x=\""), *w = strstr(end, "width=\"");
        cr_assert(x && w);
        out[n].x = strtod(x + 3, NULL);
        out[n].w = strtod(w + 7, NULL);
        n++;
    }
    return n;
}

Test(export, svg_boxes_are_sized_by_their_counts_and_render_to_png)
{
    char *dir = capture_of(CPU_PROGRAM, "--profile");
    size_t len;
    char *svg = export_to(dir, "svg", NULL, "cpu.svg", &len);
    uint64_t total = toon_total(dir, "attributed_samples");
    cr_expect(strstr(svg, "CPU profile, complete, "), "the title names mode and status");
    cr_expect_null(strstr(svg, "<script"), "readable without script");
    cr_expect_null(strstr(svg, "href"), "self-contained: no link");
    struct box b[256];
    size_t n = svg_boxes(svg, b, 256);
    cr_assert_gt(n, 3);
    size_t widest = 0;
    for (size_t i = 0; i < n; i++) {
        /* 1180 px for the run's total, in hundredths, rounded down */
        double want = (double)(b[i].value * 118000u / total) / 100.0;
        cr_expect_eq(b[i].w, want, "box %zu: %" PRIu64 " of %" PRIu64 " is %.2f px, not %.2f",
                     i, b[i].value, total, b[i].w, want);
        if (b[i].w > b[widest].w)
            widest = i;
    }
    cr_expect_eq(b[0].value, total, "the root box holds every sample");
    const char *rsvg = env_or_fail("JETT_TEST_RSVG", "rsvg-convert (librsvg2-bin)");
    const char *conv[] = {"cpu.svg", "-o", "cpu.png", NULL};
    struct jt_run r;
    jtt_run_exe(rsvg, dir, conv, &r);
    cr_assert_eq(r.status, 0, "rsvg-convert: %s", r.err);
    jtt_run_free(&r);
    const char *height = strstr(svg, "height=\"");
    unsigned h = (unsigned)strtoul(height + 8, NULL, 10);
    char at[64], white[32];
    /* the middle of the root box: the bottom row, 16 px above the 10 px margin */
    snprintf(at, sizeof at, "%u,%u", (unsigned)(b[widest].x + b[widest].w / 2), h - 18u);
    snprintf(white, sizeof white, "%u,%u", 1195u, 5u);
    char *script = path_in(jtt_source_root(), "tests/export/png_probe.mjs");
    const char *probe[] = {script, "cpu.png", at, white, NULL};
    jtt_run_exe(env_or_fail("JETT_TEST_NODE", "node"), dir, probe, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    unsigned pw, ph, cr_, cg, cb, wr, wg, wb;
    cr_assert_eq(sscanf(r.out, "%u %u\n%u %u %u\n%u %u %u", &pw, &ph, &cr_, &cg, &cb, &wr, &wg,
                        &wb), 8, "%s", r.out);
    cr_expect_eq(pw, 1200u);
    cr_expect_eq(ph, h);
    cr_expect_eq(wr + wg + wb, 3u * 255u, "the background is white");
    cr_expect_neq(cr_ + cg + cb, 3u * 255u, "the widest box is painted (%u %u %u)", cr_, cg, cb);
    jtt_run_free(&r);
    free(script);
    free(svg);
    jtt_rmtree(dir);
    free(dir);
}

Test(export, every_format_is_byte_deterministic_and_has_no_absolute_path)
{
    char *dir = capture_of(CPU_PROGRAM, "--profile");
    /* the run's program named by its absolute path: still only relative paths out */
    char *abs_main = path_in(dir, "main.jett");
    const char *argv[] = {"run", abs_main, "--profile", "--profile-capture", "cap.jpcap",
                          "--profile-capture-overwrite", NULL};
    struct jt_run r;
    jtt_run(dir, argv, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    jtt_run_free(&r);
    static const char *const formats[] = {"folded", "pprof", "speedscope", "svg", "html"};
    for (int i = 0; i < 5; i++) {
        size_t la, lb;
        char *a = export_to(dir, formats[i], NULL, "one", &la);
        char *b = export_to(dir, formats[i], NULL, "two", &lb);
        cr_expect(la == lb && !memcmp(a, b, la), "%s: two exports differ", formats[i]);
        cr_expect_null(memmem(a, la, dir, strlen(dir)), "%s names the directory", formats[i]);
        cr_expect_null(memmem(a, la, "/tmp", 4), "%s has an absolute path", formats[i]);
        free(a);
        free(b);
    }
    /* pprof is compressed: look at its strings through pprof's own listing */
    const char *go = env_or_fail("JETT_TEST_GO", "go");
    char *home = path_in(dir, "gohome");
    mkdir(home, 0700);
    setenv("HOME", home, 1);
    setenv("GOCACHE", home, 1);
    free(export_to(dir, "pprof", NULL, "p.pb.gz", &(size_t){0}));
    const char *raw[] = {"tool", "pprof", "-raw", "p.pb.gz", NULL};
    jtt_run_exe(go, dir, raw, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, " main.jett:"), "the relative path:\n%s", r.out);
    cr_expect_null(strstr(r.out, dir), "no absolute path:\n%s", r.out);
    jtt_run_free(&r);
    free(home);
    free(abs_main);
    jtt_rmtree(dir);
    free(dir);
}

Test(export, errors_name_what_was_wrong)
{
    char *dir = capture_of(CPU_PROGRAM, "--profile");
    struct jt_run r;
    const char *fmt[] = {"export", "cap.jpcap", "--format", "png", NULL};
    jpd(dir, fmt, &r);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--format") && strstr(r.err, "png"), "%s", r.err);
    jtt_run_free(&r);
    const char *val[] = {"export", "cap.jpcap", "--value", "alloc_bytes", NULL};
    jpd(dir, val, &r);
    cr_expect_eq(r.status, 1, "a memory value of a CPU capture");
    cr_expect(strstr(r.err, "alloc_bytes") && strstr(r.err, "CPU"), "%s", r.err);
    jtt_run_free(&r);
    const char *badval[] = {"export", "cap.jpcap", "--value", "bytes", NULL};
    jpd(dir, badval, &r);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--value") && strstr(r.err, "bytes"), "%s", r.err);
    jtt_run_free(&r);
    const char *missing[] = {"export", "nope.jpcap", NULL};
    jpd(dir, missing, &r);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "nope.jpcap"), "%s", r.err);
    jtt_run_free(&r);
    const char *unwritable[] = {"export", "cap.jpcap", "-o", "no/such/dir/out.folded", NULL};
    jpd(dir, unwritable, &r);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "no/such/dir/out.folded") && strstr(r.err, "No such file"), "%s",
              r.err);
    jtt_run_free(&r);
    /* a symbolic link at -o is not followed: its target stays as it was */
    jtt_write(dir, "target", "keep\n");
    char *link = path_in(dir, "link");
    cr_assert_eq(symlink("target", link), 0);
    const char *via_link[] = {"export", "cap.jpcap", "-o", "link", NULL};
    jpd(dir, via_link, &r);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "link") && strstr(r.err, "symbolic link"), "%s", r.err);
    jtt_run_free(&r);
    char *target = path_in(dir, "target");
    char *kept = tl_slurp(target, NULL);
    cr_expect_str_eq(kept, "keep\n");
    free(kept);
    free(target);
    free(link);
    /* a truncated capture: what replay recovers, with its caveat (cut inside its last block,
     * the stop record's, so that the complete block of records precedes the cut) */
    jtt_rmtree(dir);
    free(dir);
    dir = memory_capture();
    char *cap = path_in(dir, "cap.jpcap");
    struct stat st;
    cr_assert_eq(stat(cap, &st), 0);
    cr_assert_eq(truncate(cap, st.st_size - 1), 0);
    const char *cut[] = {"export", "cap.jpcap", NULL};
    jpd(dir, cut, &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "caveat"), "the damage is said: %s", r.err);
    cr_expect(strstr(r.out, "web.cache.main;"), "the recovered stacks: %s", r.out);
    jtt_run_free(&r);
    cr_assert_eq(truncate(cap, 10), 0);
    jpd(dir, cut, &r);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "invalid capture"), "%s", r.err);
    jtt_run_free(&r);
    free(cap);
    jtt_rmtree(dir);
    free(dir);
}

/* Writes examples/cpu_hotspot into dir, its rounds cut from 20 to 3 (the same profile shape in
 * a shorter run), with `edit` replaced by `with` in src/transform.jett when given. */
static void hotspot_copy(const char *dir, const char *edit, const char *with)
{
    static const char *const files[] = {"jett.project", "src/main.jett", "src/transform.jett"};
    for (int i = 0; i < 3; i++) {
        char *rel = path_in("examples/cpu_hotspot", files[i]);
        char *src = path_in(jtt_source_root(), rel);
        char *text = tl_slurp(src, NULL);
        char *out = malloc(strlen(text) + (with ? strlen(with) : 0) + 1);
        const char *cut = i == 1 ? "0..20" : i == 2 ? edit : NULL;
        const char *put = i == 1 ? "0..3" : with;
        char *at = cut ? strstr(text, cut) : NULL;
        if (cut)
            cr_assert_not_null(at, "%s in %s", cut, files[i]);
        if (at)
            sprintf(out, "%.*s%s%s", (int)(at - text), text, put, at + strlen(cut));
        else
            strcpy(out, text);
        jtt_write(dir, files[i], out);
        free(out);
        free(text);
        free(src);
        free(rel);
    }
}

static void capture_project(const char *dir, const char *cap)
{
    const char *argv[] = {"run", "src/main.jett", "--profile", "--profile-capture", cap, NULL};
    struct jt_run r;
    jtt_run(dir, argv, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    jtt_run_free(&r);
}

Test(diff, the_function_made_slower_rises_with_a_positive_change, .timeout = 240)
{
    char *base = jtt_tmpdir(), *next = jtt_tmpdir();
    hotspot_copy(base, NULL, NULL);
    /* the change: normalise walks each row 400 times, as checksum does */
    hotspot_copy(next, "    return len(row)\n",
                 "    var n = 0\n    for pass in 0..400 {\n"
                 "        for i in 0..len(row) { n = (n + byte(row, i)) % 1000003 }\n"
                 "    }\n    return n\n");
    capture_project(base, "base.jpcap");
    capture_project(next, "new.jpcap");
    char *bcap = path_in(base, "base.jpcap"), *ncap = path_in(next, "new.jpcap");
    const char *argv[] = {"diff", bcap, ncap, "--format", "toon", NULL};
    struct jt_run r;
    jpd(NULL, argv, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *err = NULL, *json = tl_toon_decode(r.out, r.out_len, &err);
    cr_assert_not_null(json, "the official decoder rejects it: %s\n%s", err, r.out);
    free(json);
    cr_expect(strstr(r.out, "  base:\n    status: complete\n"), "%s", r.out);
    cr_expect(strstr(r.out, "  new:\n    status: complete\n"), "%s", r.out);
    const char *norm = strstr(r.out, "pipeline.transform.normalise,src/transform.jett,");
    const char *sum = strstr(r.out, "pipeline.transform.checksum,src/transform.jett,");
    cr_assert(norm && sum, "%s", r.out);
    const char *process = strstr(r.out, "pipeline.transform.process,");
    cr_expect(process && norm < process, "ranked by the size of the change:\n%s", r.out);
    /* base,new impacts, base,new percents, change: normalise grew, checksum shrank */
    char *nline = strndup(norm, (size_t)(strchr(norm, '\n') - norm));
    char *sline = strndup(sum, (size_t)(strchr(sum, '\n') - sum));
    const char *nchange = strrchr(nline, ','), *schange = strrchr(sline, ',');
    cr_expect(nchange[1] != '-' && strtod(nchange + 1, NULL) > 10.0, "normalise rose: %s",
              nline);
    cr_expect(schange[1] == '-', "checksum's share fell: %s", sline);
    free(nline);
    free(sline);
    jtt_run_free(&r);
    /* the differential flame graph colours normalise red (grew) */
    const char *svg[] = {"diff", bcap, ncap, "--format", "svg", NULL};
    jpd(NULL, svg, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *box = strstr(r.out, "<title>pipeline.transform.normalise: base");
    cr_assert_not_null(box, "%s", r.out);
    const char *fill = strstr(box, "fill=\"#");
    cr_expect(!strncmp(fill + 7, "ff", 2) && strncmp(fill + 7, "ffffff", 6),
              "red for a rise: %.20s", fill);
    cr_expect(strstr(box, "change +"), "%.200s", box);
    jtt_run_free(&r);
    /* the HTML diff: the same colours, the ranked changes, in a browser */
    const char *html[] = {"diff", bcap, ncap, "--format", "html", "-o", "diff.html", NULL};
    jpd(next, html, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    jtt_run_free(&r);
    html_check(next, "diff.html", "--diff");
    const char *human[] = {"diff", bcap, ncap, NULL};
    jpd(NULL, human, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "CPU profile diff\n  base complete, "), "%s", r.out);
    jtt_run_free(&r);
    free(bcap);
    free(ncap);
    jtt_rmtree(base);
    jtt_rmtree(next);
    free(base);
    free(next);
}

Test(diff, captures_of_different_modes_are_refused)
{
    char *cpu = capture_of(CPU_PROGRAM, "--profile");
    char *mem = capture_of(CPU_PROGRAM, "--profile-memory");
    char *a = path_in(cpu, "cap.jpcap"), *b = path_in(mem, "cap.jpcap");
    const char *argv[] = {"diff", a, b, NULL};
    struct jt_run r;
    jpd(NULL, argv, &r);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "different modes") && strstr(r.err, "CPU") &&
              strstr(r.err, "memory"), "%s", r.err);
    cr_expect_str_eq(r.out, "");
    jtt_run_free(&r);
    free(a);
    free(b);
    jtt_rmtree(cpu);
    jtt_rmtree(mem);
    free(cpu);
    free(mem);
}

/* ---- jett run --profile-export FORMAT:PATH ---- */

/* The names in dir, one per line, sorted ("" when empty); for "nothing was left behind". */
static char *listing(const char *dir)
{
    const char *argv[] = {"-A", dir, NULL};
    struct jt_run r;
    jtt_run_exe("/bin/ls", NULL, argv, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *out = r.out;
    free(r.err);
    return out;
}

Test(live_export, every_format_is_the_export_of_the_runs_own_capture)
{
    /* pieces of 8 bytes: every export crosses many EXPORT frames (a short run's folded text
     * can be under 100 bytes, so the pieces are far smaller than any export) */
    setenv("JETTPROFD_EXPORT_CHUNK_BYTES", "8", 1);
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", CPU_PROGRAM);
    const char *argv[] = {"run", "main.jett", "--profile", "--profile-capture", "cap.jpcap",
                          "--profile-export", "folded:live.folded",
                          "--profile-export=svg:live.svg", "--profile-export", "pprof:live.pb.gz",
                          "--profile-export", "speedscope:live.json",
                          "--profile-export", "folded:again.folded", NULL};
    struct jt_run r;
    jtt_run(dir, argv, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "CPU profile"), "the report is unchanged: %s", r.err);
    cr_expect_null(strstr(r.err, "export"), "no export failed: %s", r.err);
    jtt_run_free(&r);
    static const char *const formats[] = {"folded", "svg", "pprof", "speedscope"};
    static const char *const live[] = {"live.folded", "live.svg", "live.pb.gz", "live.json"};
    for (int i = 0; i < 4; i++) {
        size_t ll, lo;
        char *lp = path_in(dir, live[i]);
        char *a = tl_slurp(lp, &ll);
        char *b = export_to(dir, formats[i], NULL, "offline", &lo);
        cr_expect(ll == lo && !memcmp(a, b, ll), "%s: the live export is not the capture's",
                  formats[i]);
        cr_expect_gt(ll, 16, "%s spans several pieces", formats[i]);
        struct stat st;
        cr_expect(stat(lp, &st) == 0 && (st.st_mode & 0777) == 0644, "%s is 0644", live[i]);
        free(a);
        free(b);
        free(lp);
    }
    char *p1 = path_in(dir, "live.folded"), *p2 = path_in(dir, "again.folded");
    char *a = tl_slurp(p1, NULL), *b = tl_slurp(p2, NULL);
    cr_expect_str_eq(a, b, "one format to two paths");
    free(a);
    free(b);
    free(p1);
    free(p2);
    char *names = listing(dir);
    for (int i = 0; i < 4; i++) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s.", live[i]); /* PATH.XXXXXX, the temporary file */
        cr_expect_null(strstr(names, tmp), "no temporary file is left: %s", names);
    }
    free(names);
    jtt_rmtree(dir);
    free(dir);
    unsetenv("JETTPROFD_EXPORT_CHUNK_BYTES");
}

/* Runs `jett run main.jett ...` (argv); expects a failure naming `want` with `status` before
 * any user code, and nothing new left in the directory. */
static void expect_refused(const char *dir, const char *const *argv, int status,
                           const char *want)
{
    char *before = listing(dir);
    struct jt_run r;
    jtt_run(dir, argv, &r);
    cr_expect_eq(r.status, status, "exit status: %s", r.err);
    cr_expect(strstr(r.err, want), "names %s: %s", want, r.err);
    cr_expect_str_eq(r.out, "", "no user code ran");
    jtt_run_free(&r);
    char *after = listing(dir);
    cr_expect_str_eq(after, before, "nothing was left behind");
    free(after);
    free(before);
}

Test(live_export, refuses_what_it_must_not_write_before_user_code)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", "fn main() {\n  print(\"user code ran\")\n}\n");
    jtt_write(dir, "target", "keep\n");
    char *link = path_in(dir, "link");
    cr_assert_eq(symlink("target", link), 0);
    const char *sym[] = {"run", "main.jett", "--profile", "--profile-export", "svg:link", NULL};
    expect_refused(dir, sym, 4, "'link' is a symbolic link");
    const char *own[] = {"run", "main.jett", "--profile", "--profile-export", "folded:main.jett",
                         NULL};
    expect_refused(dir, own, 4, "'main.jett' is one of the program's own source files");
    const char *nodir[] = {"run", "main.jett", "--profile", "--profile-export",
                           "pprof:gone/out.pb.gz", NULL};
    expect_refused(dir, nodir, 4, "'gone/out.pb.gz': No such file or directory");
    const char *fmt[] = {"run", "main.jett", "--profile", "--profile-export", "png:out.png", NULL};
    expect_refused(dir, fmt, 2, "FORMAT folded, pprof, speedscope, svg or html, got 'png:out.png'");
    const char *nopath[] = {"run", "main.jett", "--profile", "--profile-export", "svg:", NULL};
    expect_refused(dir, nopath, 2, "--profile-export expects FORMAT:PATH");
    const char *nomode[] = {"run", "main.jett", "--profile-export", "svg:out.svg", NULL};
    expect_refused(dir, nomode, 2, "--profile-export requires --profile or --profile-memory");
    char *target = path_in(dir, "target"), *src = path_in(dir, "main.jett");
    char *t = tl_slurp(target, NULL), *s = tl_slurp(src, NULL);
    cr_expect_str_eq(t, "keep\n", "the link's target is untouched");
    cr_expect(strstr(s, "user code ran"), "the source is untouched");
    free(t);
    free(s);
    free(target);
    free(src);
    free(link);
    jtt_rmtree(dir);
    free(dir);
}
