/* The language and the lifecycle without a profiler: exit codes, diagnostics with
 * file:line:col and what was expected, runtime errors after real output, SIGINT at a safe
 * point, the --agent envelope (decoded by the official TOON decoder) and the heap's own
 * accounting. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/interp.h"
#include "runtime/jett.h"
#include "support.h"

Test(lang, a_normal_return_exits_zero_with_exact_output)
{
    struct jt_run r = jtt_run_src(
        "namespace t.main\n"
        "fn fact(n: int) -> int { if n <= 1 { return 1 }\n return n * fact(n - 1) }\n"
        "fn main() {\n"
        "  var s = \"\"\n"
        "  for i in 0..3 { s = s + str(i) + \",\" }\n"
        "  let xs = [1, \"two\", true, [3]]\n"
        "  print(s); print(xs); print(fact(10)); print(len(xs) == 4 && !false)\n"
        "  eprint(\"warn \" + substr(\"abcdef\", 2, 3)); print(byte(\"A\", 0)); print(chr(66))\n"
        "  var i = 0\n  while true { i = i + 1\n if i % 2 == 0 { continue }\n if i > 6 { break } }\n"
        "  print(i); print(-7 / 2); print(-7 % 2); print(\"b\" < \"ba\")\n"
        "}\n", NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "0,1,2,\n[1, two, true, [3]]\n3628800\ntrue\n65\nB\n7\n-3\n-1\ntrue\n");
    cr_expect_str_eq(r.err, "warn cde\n");
    jtt_run_free(&r);
}

Test(lang, a_runtime_error_exits_one_after_the_output_before_it)
{
    struct jt_run r = jtt_run_src("fn main() {\n  print(\"before\")\n  let xs = [1, 2]\n"
                              "  print(xs[5])\n  print(\"after\")\n}\n", NULL);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.out, "before\n");
    cr_expect_str_eq(r.err,
                     "main.jett:4:9: runtime error: index 5 is out of range for a list of length 2\n");
    jtt_run_free(&r);
    r = jtt_run_src("fn main() { fail(\"bad record \" + str(42)) }\n", NULL);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.err, "main.jett:1:13: runtime error: bad record 42\n");
    jtt_run_free(&r);
}

Test(lang, runtime_errors_name_what_went_wrong)
{
    static const struct { const char *body, *says; } cases[] = {
        {"print(1 / 0)", "division by zero"},
        {"print(9223372036854775807 + 1)", "integer overflow"},
        {"print(1 + \"a\")", "'+' cannot combine int and str"},
        {"if 1 { }", "a condition expects bool, got int"},
        {"let x: int = \"s\"", "variable 'x' expects int, got str"},
        {"pop([])", "pop from an empty list"},
        {"sleep(-1)", "sleep expects milliseconds"},
        {"print(substr(\"abc\", 2, 5))", "outside a string of 3 bytes"},
        {"print(chr(300))", "chr expects a byte value"},
        {"g(0)", "stack overflow: more than 10000 nested calls"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[512];
        snprintf(src, sizeof src, "fn g(n) { return g(n + 1) }\nfn main() {\n  %s\n}\n",
                 cases[i].body);
        struct jt_run r = jtt_run_src(src, NULL);
        cr_expect_eq(r.status, 1, "case %zu: exit %d (%s)", i, r.status, r.err);
        cr_expect(strstr(r.err, "runtime error: "), "case %zu: %s", i, r.err);
        cr_expect(strstr(r.err, cases[i].says), "case %zu: lacks '%s': %s", i, cases[i].says, r.err);
        jtt_run_free(&r);
    }
}

Test(lang, compile_errors_exit_three_with_file_line_col_and_no_user_code)
{
    static const struct { const char *src, *says; } cases[] = {
        {"fn main() {\n  print(\"x)\n}\n", "main.jett:2:9: error: unterminated string literal"},
        {"fn main() {\n  print(1\n}\n", "main.jett:3:1: error: expected ',' or ')' after the call's arguments, found '}'"},
        {"fn main() {\n  nope(1)\n}\n", "main.jett:2:3: error: unknown function 'nope'"},
        {"fn f(a, b) { }\nfn main() { f(1) }\n", "main.jett:2:13: error: function 'f' expects 2 arguments, got 1"},
        {"fn main() { let x = 1\n x = 2 }\n", "main.jett:2:2: error: cannot assign to 'x': it was declared with let"},
        {"fn main() { break }\n", "main.jett:1:13: error: 'break' outside a loop"},
        {"fn main() { print(y) }\n", "main.jett:1:19: error: unknown name 'y'"},
        {"fn helper() { }\n", "main.jett:1:1: error: expected a function 'main'"},
        {"fn main() { }\nfn main() { }\n", "main.jett:2:1: error: function 'main' is already defined"},
        {"import \"/etc/passwd.jett\"\nfn main() { }\n", "main.jett:1:8: error: expected an import path that is relative"},
        {"import \"../up.jett\"\nfn main() { }\n", "main.jett:1:8: error: expected an import path that is relative"},
        {"import \"missing.jett\"\nfn main() { }\n", "main.jett:1:8: error: cannot find the imported file 'missing.jett'"},
        {"import \"deps/x.jett\"\nfn main() { }\n", "expected 'deps/NAME/path.jett'"},
        {"fn main() { let x = 99999999999999999999 }\n", "main.jett:1:21: error: integer literal does not fit"},
        {"fn main() { let x = 1 \x01 }\n", "main.jett:1:23: error: unexpected control character U+0001"},
        {"fn main() { let s = \"\xff\" }\n", "main.jett:1:22: error: invalid UTF-8"},
        {"fn main() { let x: float = 1 }\n", "expected a type (int, bool, str, list or secret)"},
        {"fn main() { print(\"a\") print(\"b\") }\n", "expected the end of the statement"},
        {"namespace a\nnamespace b\nfn main() { }\n", "main.jett:2:1: error: 'namespace' must be the first declaration"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[600];
        snprintf(src, sizeof src, "%s", cases[i].src);
        /* user code that would print if anything ran */
        struct jt_run r = jtt_run_src(src, NULL);
        cr_expect_eq(r.status, 3, "case %zu: exit %d (%s)", i, r.status, r.err);
        cr_expect_str_eq(r.out, "", "case %zu", i);
        cr_expect(strstr(r.err, cases[i].says), "case %zu: lacks '%s': %s", i, cases[i].says, r.err);
        cr_expect_null(strstr(r.err, "/tmp/"), "case %zu: absolute path in %s", i, r.err);
        jtt_run_free(&r);
    }
}

Test(lang, hostile_nesting_is_a_diagnostic_not_a_crash)
{
    size_t depth = 100000;
    char *src = malloc(depth * 2 + 64);
    strcpy(src, "fn main() { let x = ");
    size_t n = strlen(src);
    for (size_t i = 0; i < depth; i++)
        src[n++] = '(';
    src[n++] = '1';
    for (size_t i = 0; i < depth; i++)
        src[n++] = ')';
    strcpy(src + n, " }\n");
    struct jt_run r = jtt_run_src(src, NULL);
    free(src);
    cr_expect_eq(r.status, 3, "%s", r.err);
    cr_expect(strstr(r.err, "nesting too deep"), "%s", r.err);
    jtt_run_free(&r);
    /* a flat chain of 300000 operators builds a tree as tall, with no nesting at all */
    size_t terms = 300000;
    src = malloc(terms * 2 + 64);
    n = (size_t)sprintf(src, "fn main() { print(1");
    for (size_t i = 1; i < terms; i++) {
        src[n++] = '+';
        src[n++] = '1';
    }
    strcpy(src + n, ") }\n");
    r = jtt_run_src(src, NULL);
    free(src);
    cr_expect_eq(r.status, 3, "%s", r.err);
    cr_expect(strstr(r.err, "expression too deep: at most 2000"), "%s", r.err);
    jtt_run_free(&r);
}

Test(lang, imports_resolve_project_dependency_and_stdlib_with_relative_paths)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "jett.project", "");
    jtt_write(dir, "src/main.jett",
              "namespace app\nimport \"src/lib/util.jett\"\nimport \"deps/fmt/pad.jett\"\n"
              "import \"stdlib/text.jett\"\n"
              "fn main() { print(app.util.twice(4)); print(fmt.pad.stars(3)); "
              "print(std.text.repeat(\"ab\", 2)); app.util.boom() }\n");
    jtt_write(dir, "src/lib/util.jett",
              "namespace app.util\nfn twice(x: int) -> int { return x * 2 }\nfn boom() { fail(\"from util\") }\n");
    jtt_write(dir, "deps/fmt/pad.jett",
              "namespace fmt.pad\nimport \"inner.jett\"\nfn stars(n: int) -> str { return fmt.inner.rep(\"*\", n) }\n");
    jtt_write(dir, "deps/fmt/inner.jett",
              "namespace fmt.inner\nfn rep(s: str, n: int) -> str { var o = \"\"\n for i in 0..n { o = o + s }\n return o }\n");
    const char *argv[] = {"run", "src/main.jett", NULL};
    struct jt_run r;
    jtt_run(dir, argv, &r);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.out, "8\n***\nabab\n");
    cr_expect_str_eq(r.err, "src/lib/util.jett:3:13: runtime error: from util\n");
    jtt_run_free(&r);
    /* a symlink that leads out of the project is refused */
    char link[4200];
    snprintf(link, sizeof link, "%s/src/escape.jett", dir);
    cr_assert(symlink("/etc/hostname", link) == 0);
    jtt_write(dir, "src/main.jett", "import \"src/escape.jett\"\nfn main() { }\n");
    jtt_run(dir, argv, &r);
    cr_expect_eq(r.status, 3);
    cr_expect(strstr(r.err, "src/main.jett:1:8: error: import 'src/escape.jett' resolves outside its project"),
              "%s", r.err);
    cr_expect_null(strstr(r.err, "/etc"), "%s", r.err);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

Test(lang, sigint_reaches_the_cooperative_shutdown_and_exits_130)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett",
              "fn spin() -> int { var x = 0\n for i in 0..1000 { x = x + i }\n return x }\n"
              "fn main() {\n  print(\"working\")\n  eprint(\"ready\")\n"
              "  while true { spin(); sleep(5) }\n}\n");
    const char *argv[] = {"run", "main.jett", NULL};
    struct jt_run r;
    jtt_run_sigint(dir, argv, "ready\n", 100, &r);
    cr_expect_eq(r.status, 130, "exit %d: %s", r.status, r.err);
    cr_expect_str_eq(r.out, "working\n");
    cr_expect_str_eq(r.err, "ready\njett: interrupted\n");
    jtt_run_free(&r);
    const char *argv2[] = {"run", "main.jett", "--agent", NULL};
    /* --agent keeps stderr for the envelope, so no line to wait for: a delay long enough for a
     * slow (sanitized, loaded) start to have installed its handler; the program never ends. */
    jtt_run_sigint(dir, argv2, NULL, 1500, &r);
    cr_expect_eq(r.status, 130, "exit %d: %s", r.status, r.err);
    char *json = tl_toon_decode(r.out, r.out_len, NULL);
    int ok = json != NULL;
    cr_assert(ok, "%s", r.out);
    cr_expect(strstr(json, "\"status\":\"error\",\"termination\":\"interrupted\",\"exit_code\":130,"
                           "\"stdout\":\"working\\n\",\"stderr\":\"ready\\n\""), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"interrupted\""), "%s", json);
    free(json);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

Test(envelope, program_output_cannot_impersonate_fields)
{
    const char *extra[] = {"--agent", NULL};
    struct jt_run r = jtt_run_src(
        "fn main() {\n"
        "  print(\"profile:\\n  schema: fake\\nstatus: ok\")\n"
        "  print(\"quote \\\" backslash \\\\ tab \\t cr \\r nul \\0 end\")\n"
        "  print(\"caf\xc3\xa9\")\n"
        "  print(chr(255))\n"
        "  eprint(\"- not a list item, [x]: {y}\")\n"
        "  eprint(\"42\")\n"
        "}\n", extra);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    cr_expect_eq(jtt_count(r.out, "\nstatus:"), 0, "a second status line: %s", r.out);
    char *json = tl_toon_decode(r.out, r.out_len, NULL);
    int ok = json != NULL;
    cr_assert(ok, "%s", r.out);
    cr_expect(strstr(json,
                     "\"stdout\":\"profile:\\n  schema: fake\\nstatus: ok\\nquote \\\" backslash \\\\ "
                     "tab \\t cr \\r nul \\u0000 end\\ncafé\\n\xef\xbf\xbd\\n\""),
              "%s", json);
    cr_expect(strstr(json, "\"stderr\":\"- not a list item, [x]: {y}\\n42\\n\""), "%s", json);
    cr_expect(strstr(json, "{\"status\":\"ok\",\"termination\":\"returned\",\"exit_code\":0,"), "%s", json);
    cr_expect(strstr(json, "\"debug\":[],\"logs\":[],\"log_sources\":[],"
                           "\"log_source_graph_path_segments\":[],\"log_fields\":[]}"), "%s", json);
    free(json);
    jtt_run_free(&r);
}

Test(envelope, compile_and_runtime_failures_decode)
{
    const char *extra[] = {"--agent", NULL};
    struct jt_run r = jtt_run_src("fn main() {\n  print(1\n}\n", extra);
    cr_expect_eq(r.status, 3);
    char *json = tl_toon_decode(r.out, r.out_len, NULL);
    int ok = json != NULL;
    cr_assert(ok, "%s", r.out);
    cr_expect(strstr(json, "\"termination\":\"not_started\",\"exit_code\":3"), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"compile_error\",\"error\":\"main.jett:3:1: error: expected"),
              "%s", json);
    free(json);
    jtt_run_free(&r);
    r = jtt_run_src("fn main() {\n  print(\"partial\")\n  fail(\"boom\")\n}\n", extra);
    cr_expect_eq(r.status, 1);
    json = tl_toon_decode(r.out, r.out_len, NULL);
    ok = json != NULL;
    cr_assert(ok, "%s", r.out);
    cr_expect(strstr(json, "\"status\":\"error\",\"termination\":\"runtime_error\",\"exit_code\":1,"
                           "\"stdout\":\"partial\\n\",\"stderr\":\"\""), "%s", json);
    cr_expect(strstr(json, "\"error_kind\":\"runtime_error\",\"error\":\"main.jett:3:3: runtime error: boom\"}"),
              "%s", json);
    free(json);
    jtt_run_free(&r);
}

/* In-process: the heap's own accounting after a run, derived from the growth rule. */
static uint64_t grown_cap(uint64_t pushes)
{
    uint64_t cap = 0;
    for (uint64_t i = 0; i < pushes; i++)
        if (i == cap)
            cap = cap ? cap * 2 : 4;
    return cap;
}

static int never = 0;

Test(heap, retained_objects_are_exactly_what_globals_reach)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett",
              "var keep = []\n"
              "fn main() {\n"
              "  for i in 0..37 { push(keep, \"k\" + str(i)) }\n"
              "  var tmp = list(100, 0)\n"
              "  tmp = []\n"
              "  var cyc = [0]\n  cyc[0] = cyc\n"
              "}\n");
    char path[4200];
    snprintf(path, sizeof path, "%s/main.jett", dir);
    struct jt_diags d = {0};
    struct jt_program *prog = NULL;
    cr_assert_eq(jt_compile(path, NULL, &prog, &d), 0, "%s", d.text.p);
    struct jt_rt rt;
    jt_rt_init(&rt, prog, &never);
    cr_assert_eq(jt_rt_run(&rt), JT_OUT_RETURNED, "%s", rt.errmsg.p);
    /* strings "k0".."k36": 10 of 2 bytes, 27 of 3; the global list; the self-cycle of 1 slot */
    uint64_t strings = 10 * 2 + 27 * 3;
    uint64_t expect = strings + grown_cap(37) * JT_SLOT_BYTES + 1 * JT_SLOT_BYTES;
    cr_expect_eq(rt.heap.live_bytes, expect, "live %llu, expected %llu",
                 (unsigned long long)rt.heap.live_bytes, (unsigned long long)expect);
    cr_expect_eq(rt.heap.objects, 37 + 1 + 1);
    jt_rt_fini(&rt);
    jt_program_free(prog);
    jp_buf_free(&d.text);
    jtt_rmtree(dir);
    free(dir);
}

Test(heap, a_deeply_nested_list_is_freed_without_recursion)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett",
              "fn main() {\n  var x = []\n  for i in 0..300000 { x = [x] }\n  x = 0\n  print(\"freed\")\n}\n");
    const char *argv[] = {"run", "main.jett", NULL};
    struct jt_run r;
    jtt_run(dir, argv, &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "freed\n");
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* The envelope's string scalars: whatever bytes a program prints, the official decoder reads
 * back exactly that text (invalid UTF-8 as U+FFFD). */
Test(toon, string_scalars_round_trip_through_the_decoder)
{
    static const struct { const char *in, *json; } cases[] = {
        {"", "\"\""}, {"plain words", "\"plain words\""}, {"true", "\"true\""},
        {"false", "\"false\""}, {"null", "\"null\""}, {"42", "\"42\""}, {"-3.5e2", "\"-3.5e2\""},
        {"05", "\"05\""}, {"-", "\"-\""}, {"- item", "\"- item\""}, {"#x", "\"#x\""},
        {" lead", "\" lead\""}, {"trail ", "\"trail \""}, {"a:b", "\"a:b\""},
        {"k: v", "\"k: v\""}, {"[1]", "\"[1]\""}, {"{x}", "\"{x}\""}, {"a,b", "\"a,b\""},
        {"q\"q", "\"q\\\"q\""}, {"back\\slash", "\"back\\\\slash\""},
        {"l1\nl2", "\"l1\\nl2\""}, {"\t\r", "\"\\t\\r\""}, {"\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\""},
        {"caf\xc3\xa9", "\"caf\xc3\xa9\""}, {"\xff", "\"\xef\xbf\xbd\""},
        {"\xc3", "\"\xef\xbf\xbd\""}, {"\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jp_buf b = {0};
        jt_buf_puts(&b, "v: ");
        jt_toon_string(&b, cases[i].in, strlen(cases[i].in));
        jt_buf_puts(&b, "\n");
        char *json = tl_toon_decode(b.p, b.len, NULL);
        int ok = json != NULL;
        cr_expect(ok, "case %zu: not TOON: %s", i, b.p);
        char want[256];
        snprintf(want, sizeof want, "{\"v\":%s}\n", cases[i].json);
        cr_expect_str_eq(json, want, "case %zu: wrote %s", i, b.p);
        free(json);
        jp_buf_free(&b);
    }
}

/* Hostile sources: every prefix of a real program and seeded byte mutations of it either
 * compile or give diagnostics; the compiler never crashes or leaks (ASan runs this too). */
static void compile_text(const char *dir, const char *text, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/main.jett", dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fwrite(text, 1, len, f);
    fclose(f);
    struct jt_diags d = {0};
    struct jt_program *p = NULL;
    int r = jt_compile(path, NULL, &p, &d);
    if (r < 0) {
        cr_expect_gt(d.count, 0, "failed without a diagnostic: %.*s", (int)len, text);
        cr_expect_null(strstr(d.text.p ? d.text.p : "", dir), "absolute path in a diagnostic");
    }
    jt_program_free(p);
    jp_buf_free(&d.text);
}

Test(hostile, every_prefix_and_mutation_compiles_or_is_diagnosed)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/retaining_cache/main.jett", jtt_source_root());
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    char src[8192];
    size_t n = fread(src, 1, sizeof src, f);
    fclose(f);
    char *dir = jtt_tmpdir();
    for (size_t len = 0; len <= n; len++)
        compile_text(dir, src, len);
    uint32_t seed = 12345;
    static const char bytes[] = "(){}[]\",.:;=+-*/%<>!&|\\\n\t\x01\xff\xc3 0a_";
    for (int round = 0; round < 400; round++) {
        char m[8192];
        memcpy(m, src, n);
        for (int k = 0; k < 3; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            m[at] = bytes[(seed >> 8) % (sizeof bytes - 1)];
        }
        compile_text(dir, m, n);
    }
    jtt_rmtree(dir);
    free(dir);
}
