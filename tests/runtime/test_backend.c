/* The two backends, side by side: `jett run --backend interp` (the tree walker) and
 * `--backend vm` (the bytecode VM) run the same programs into the same bytes. Each program runs
 * with --profile-memory --agent on both, and the two run envelopes (the program's stdout,
 * stderr, exit code, debug rows and logs, then the memory profile) must be equal byte for byte
 * once the backend word (the one field allowed to differ) and the durations are set aside.
 * The programs cover every statement, operator and builtin, imports and the stdlib, actors, and
 * a runtime error of each kind, since an error's unwinding releases what was in flight. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tests/lib/jettgen.h"

/* The envelope with what legitimately differs between two runs of one program replaced:
 * durations and the observed rate (clocks), and the backend word; with `actors`, also the
 * peak, which depends on how the actors' slices interleaved (LANGUAGE.md, "Actors"). */
static char *normalised(const char *out, bool actors)
{
    static const char *const clocked[] = {"wall_duration_ns: ", "process_cpu_duration_ns: ",
                                          "producer_wait_ns: ", "observed_rate_hz: ",
                                          "peak_live_bytes: ", "live_at_peak_bytes: "};
    size_t nclocked = sizeof clocked / sizeof clocked[0] - (actors ? 0 : 2);
    static const struct { const char *from, *to; } words[] = {
        {"backend: vm_alloc_hooks", "backend: interpreter_alloc_hooks"},
        {"backend: vm_safe_point", "backend: interpreter_safe_point"},
    };
    size_t n = strlen(out);
    char *r = malloc(n + 64 * 8 + 1), *w = r;
    cr_assert(r);
    for (const char *line = out; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        const char *t = line;
        while (*t == ' ')
            t++;
        bool done = false;
        for (size_t i = 0; i < nclocked && !done; i++)
            if (!strncmp(t, clocked[i], strlen(clocked[i]))) {
                size_t keep = (size_t)(t - line) + strlen(clocked[i]);
                memcpy(w, line, keep);
                w += keep;
                memcpy(w, "*\n", 2);
                w += 2;
                done = true;
            }
        for (size_t i = 0; i < sizeof words / sizeof words[0] && !done; i++)
            if (!strncmp(t, words[i].from, strlen(words[i].from))) {
                size_t ind = (size_t)(t - line);
                memcpy(w, line, ind);
                w += ind;
                w += sprintf(w, "%s\n", words[i].to);
                done = true;
            }
        if (!done) {
            memcpy(w, line, len);
            w += len;
        }
        line += len;
    }
    *w = '\0';
    return r;
}

/* Runs FILE in dir on both backends with opts; expects equal envelopes and the given exit
 * status (-1: the same on both), and returns the interpreter's for further checks (free it). */
static char *same_on_both_exe(const char *exe, const char *dir, const char *file,
                              const char *const *opts, int status, bool actors)
{
    const char *argv[2][24];
    const char *backends[2] = {"--backend=interp", "--backend=vm"};
    struct jt_run r[2];
    char *norm[2];
    for (int b = 0; b < 2; b++) {
        size_t n = 0;
        argv[b][n++] = "run";
        argv[b][n++] = file;
        argv[b][n++] = backends[b];
        argv[b][n++] = "--agent";
        for (size_t i = 0; opts && opts[i]; i++)
            argv[b][n++] = opts[i];
        argv[b][n] = NULL;
        if (exe)
            jtt_run_exe(exe, dir, argv[b], &r[b]);
        else
            jtt_run(dir, argv[b], &r[b]);
        if (status >= 0 || b == 1)
            cr_expect_eq(r[b].status, status >= 0 ? status : r[0].status,
                         "%s %s: exit %d\n%s%s", file, backends[b], r[b].status, r[b].out,
                         r[b].err);
        norm[b] = normalised(r[b].out, actors);
    }
    cr_expect_str_eq(norm[1], norm[0], "%s: the VM's envelope differs from the interpreter's",
                     file);
    cr_expect(strstr(r[1].out, "backend: vm_"), "%s", r[1].out);
    cr_expect(strstr(r[0].out, "backend: interpreter_"), "%s", r[0].out);
    cr_expect_str_eq(r[1].err, r[0].err);
    jtt_run_free(&r[0]);
    jtt_run_free(&r[1]);
    free(norm[1]);
    return norm[0];
}

static char *same_on_both(const char *dir, const char *file, const char *const *opts,
                          int status)
{
    return same_on_both_exe(NULL, dir, file, opts, status, false);
}

static const char *const memory[] = {"--profile-memory", NULL};

static void one_file(const char *src, int status, const char *expect)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", src);
    char *out = same_on_both(dir, "main.jett", memory, status);
    if (expect)
        cr_expect(strstr(out, expect), "expected '%s' in\n%s", expect, out);
    free(out);
    jtt_rmtree(dir);
    free(dir);
}

Test(backend, every_example_prints_the_same_memory_profile)
{
    static const char *const examples[][2] = {
        {"alloc_builder", "main.jett"}, {"cpu_hotspot", "src/main.jett"},
        {"pipeline", "main.jett"},      {"retaining_cache", "main.jett"},
        {"runtime_failure", "main.jett"}, {"sleepy", "main.jett"},
    };
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/examples/%s", jtt_source_root(), examples[i][0]);
        struct jt_run probe;
        const char *argv[] = {"run", examples[i][1], NULL};
        jtt_run(dir, argv, &probe); /* the exit status the example has */
        int status = probe.status;
        jtt_run_free(&probe);
        /* pipeline's four actors are preempted by time: its peak may differ */
        char *out = same_on_both_exe(NULL, dir, examples[i][1], memory, status,
                                     !strcmp(examples[i][0], "pipeline"));
        cr_expect(strstr(out, "mode: memory"), "%s", out);
        free(out);
    }
}

Test(backend, statements_operators_and_builtins_run_the_same)
{
    one_file("fn fib(n: int) -> int {\n"
             "    if n < 2 { return n }\n"
             "    return fib(n - 1) + fib(n - 2)\n"
             "}\n"
             "fn words(n) {\n"
             "    var out = []\n"
             "    var i = 0\n"
             "    while true {\n"
             "        if i >= n { break }\n"
             "        i = i + 1\n"
             "        if i % 3 == 0 { continue }\n"
             "        push(out, \"w\" + str(i))\n"
             "    }\n"
             "    return out\n"
             "}\n"
             "fn find(xs: list, want: str) -> int {\n"
             "    var i = 0\n"
             "    for x in xs {\n"
             "        if x == want { return i }\n"
             "        i = i + 1\n"
             "    }\n"
             "    return -1\n"
             "}\n"
             "fn nothing() { }\n"
             "fn main() {\n"
             "    print(fib(15))\n"
             "    var w = words(20)\n"
             "    print(w)\n"
             "    var total = 0\n"
             "    for x in w { total = total + len(x) }\n"
             "    print(total)\n"
             "    print(find(w, \"w10\"))\n"
             "    print(find(w, \"none\"))\n"
             "    var nested = [[1, 2], [3, [4, \"five\"]], []]\n"
             "    nested[0][1] = \"two\"\n"
             "    print(nested)\n"
             "    print(nested[1][1][1])\n"
             "    print(nested == [[1, \"two\"], [3, [4, \"five\"]], []])\n"
             "    print(nested != [])\n"
             "    print(\"abc\" < \"abd\")\n"
             "    print(\"b\" >= \"a\")\n"
             "    print(!(1 > 2) && (3 <= 3 || false))\n"
             "    print(false || !true)\n"
             "    print(-(5) * 3 - 7 / 2 % 5)\n"
             "    let s = \"hello\"\n"
             "    print(s[1] + substr(s, 2, 3) + chr(byte(s, 0)))\n"
             "    var l = list(3, \"x\" + \"y\")\n"
             "    print(pop(l) + str(len(l)))\n"
             "    for i in 0..10 {\n"
             "        if i % 2 == 0 {\n"
             "            continue\n"
             "        }\n"
             "        if i > 7 { break }\n"
             "        print(i)\n"
             "    }\n"
             "    for x in w {\n"
             "        if x == \"w5\" { break }\n"
             "    }\n"
             "    let k: secret = \"sk-1\"\n"
             "    print(k)\n"
             "    print(secret(\"a\") + \"b\")\n"
             "    print(str(nothing()))\n"
             "    print(debug([1, [2, \"three\"], true]))\n"
             "    log(\"info\", \"done\", \"n\", total, \"ok\", true, \"key\", k)\n"
             "    log(\"loud\", \"rejected\")\n"
             "    var ys = w\n"
             "    w = []\n"
             "    while len(ys) > 5 { pop(ys) }\n"
             "    print(ys)\n"
             "    sleep(1)\n"
             "}\n",
             0, "stdout: \"610\\n");
}

/* The VM divides by a positive literal with a multiply (bc_compile.c's divisor_magic): each
 * quotient and remainder against the general path's (a division by a parameter), for
 * divisors from 1 to 2^63 - 1 and dividends of both signs up to the largest. */
Test(backend, division_by_a_literal_agrees_with_the_general_path)
{
    one_file(
             "fn q(x: int, d: int) -> int { return x / d }\n"
             "fn r(x: int, d: int) -> int { return x % d }\n"
             "fn main() {\n"
             "    let xs = [0, 1, 2, 6, 7, 8, 99, 1000000006, 1000000007, 4294967296, 9223372036854775807, 9223372036854775806, 4611686018427387903, 4611686018427387904, -1, -7, -8, -9223372036854775807, 123456789123456789]\n"
             "    var bad = 0\n"
             "    var n = 0\n"
             "    for x in xs {\n"
             "        for k in 0..3 {\n"
             "            let y = x / (k + 1) + k\n"
             "            if y / 1 != q(y, 1) || y % 1 != r(y, 1) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 2 != q(y, 2) || y % 2 != r(y, 2) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 3 != q(y, 3) || y % 3 != r(y, 3) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 7 != q(y, 7) || y % 7 != r(y, 7) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 10 != q(y, 10) || y % 10 != r(y, 10) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 31 != q(y, 31) || y % 31 != r(y, 31) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 641 != q(y, 641) || y % 641 != r(y, 641) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 1000000007 != q(y, 1000000007) || y % 1000000007 != r(y, 1000000007) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 4294967295 != q(y, 4294967295) || y % 4294967295 != r(y, 4294967295) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 4294967297 != q(y, 4294967297) || y % 4294967297 != r(y, 4294967297) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 4611686018427387904 != q(y, 4611686018427387904) || y % 4611686018427387904 != r(y, 4611686018427387904) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 6148914691236517205 != q(y, 6148914691236517205) || y % 6148914691236517205 != r(y, 6148914691236517205) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "            if y / 9223372036854775807 != q(y, 9223372036854775807) || y % 9223372036854775807 != r(y, 9223372036854775807) { bad = bad + 1 }\n"
             "            n = n + 1\n"
             "        }\n"
             "    }\n"
             "    print(\"checked \" + str(n) + \", wrong \" + str(bad))\n"
             "}\n"
             , 0, "stdout: \"checked 741, wrong 0\\n\"");
}

Test(backend, imports_globals_and_the_stdlib_run_the_same)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "jett.project", "");
    jtt_write(dir, "main.jett",
              "namespace app\n"
              "import \"lib/util.jett\"\n"
              "import \"stdlib/text.jett\"\n"
              "import \"stdlib/list.jett\"\n"
              "var cache = []\n"
              "let greeting = \"hi \" + \"there\"\n"
              "var kept = [greeting, [1, 2]]\n"
              "fn main() {\n"
              "    for i in 0..5 { push(cache, util.make(i)) }\n"
              "    print(std.text.join(cache, \"-\"))\n"
              "    print(std.list.sum(std.list.range(10)))\n"
              "    print(std.text.pad_left(\"7\", 3, \"0\"))\n"
              "    print(greeting)\n"
              "    cache = [greeting]\n"
              "    push(kept, kept)\n"
              "}\n");
    jtt_write(dir, "lib/util.jett",
              "namespace util\n"
              "let base = 10\n"
              "var made = list(2, \"m\" + \"n\")\n"
              "fn make(i: int) -> str { return str(base + i) }\n");
    char *out = same_on_both(dir, "main.jett", memory, 0);
    cr_expect(strstr(out, "10-11-12-13-14"), "%s", out);
    free(out);
    jtt_rmtree(dir);
    free(dir);
}

Test(backend, actors_run_the_same)
{
    static const char *const one_worker[] = {"--profile-memory", "--workers", "1", NULL};
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett",
              "fn worker(n: int, tag: str) -> list {\n"
              "    var acc = []\n"
              "    for i in 0..n { push(acc, tag + str(i)) }\n"
              "    let m = receive()\n"
              "    push(acc, m)\n"
              "    return acc\n"
              "}\n"
              "fn main() {\n"
              "    let a = spawn worker(3, \"a\" + \"!\")\n"
              "    let b = spawn worker(2, \"b\")\n"
              "    print(send(a, \"ma\"))\n"
              "    print(send(b, [\"mb\", [1]]))\n"
              "    print(join(a))\n"
              "    print(join(b))\n"
              "    print(send(a, \"late\"))\n"
              "    print(self())\n"
              "}\n");
    char *out = same_on_both_exe(NULL, dir, "main.jett", one_worker, 0, true);
    cr_expect(strstr(out, "[a!0, a!1, a!2, ma]"), "%s", out);
    free(out);
    jtt_rmtree(dir);
    free(dir);
}

/* Each runtime error unwinds what was in flight (temporaries, a half-built list, arguments,
 * a loop's list) and the profile counts what was freed and what stayed: the same on both. */
Test(backend, runtime_errors_unwind_the_same)
{
    static const struct { const char *src, *msg; } cases[] = {
        {"fn main() {\n    var l = [\"a\" + \"b\", 2]\n    print(l[5])\n}\n",
         "index 5 is out of range"},
        {"fn main() {\n    let s = \"k\" + \"p\"\n    print(s + str(9223372036854775807 + 1))\n}\n",
         "integer overflow"},
        {"fn f(x) { return \"a\" + str(x / 0) }\n"
         "fn main() {\n    let s = \"keep\" + \"me\"\n    print(s + f(1))\n}\n",
         "division by zero"},
        /* an error in a callee with its own temporaries in flight, below the caller's */
        {"fn f(x) { return (\"a\" + \"b\") + str(x / 0) }\n"
         "fn main() {\n    let s = \"keep\" + \"me\"\n    print((s + \"!\") + f(1))\n}\n",
         "division by zero"},
        {"fn g(a, x: int) { }\nfn main() { g(\"s\" + \"t\", \"u\" + \"v\") }\n",
         "parameter 'x' expects int"},
        {"fn h() -> int { return \"x\" + \"y\" }\nfn main() { h() }\n",
         "the return value of"},
        {"fn main() {\n    let l = [\"x\" + \"y\"]\n    if 1 { }\n}\n", "a condition expects bool"},
        {"fn main() { let l = [\"a\" + \"b\", fail(\"boom \" + \"x\")] }\n", "boom x"},
        {"fn r(n) {\n    let s = \"x\" + \"y\"\n    return r(n + 1)\n}\nfn main() { r(0) }\n",
         "stack overflow"},
        {"fn main() {\n    for x in \"a\" + \"b\" { }\n}\n", "for ... in expects a list"},
        {"fn main() {\n    for i in 0..\"x\" { }\n}\n", "a range expects int bounds"},
        {"fn main() {\n    var l = []\n    pop(l)\n}\n", "pop from an empty list"},
        {"fn main() {\n    let l = [1]\n    print(l[\"a\" + \"b\"])\n}\n",
         "an index expects int"},
        {"fn main() {\n    let l = [1]\n    l[\"a\" + \"b\"] = \"c\" + \"d\"\n}\n",
         "an index expects int"},
        {"fn main() {\n    var xs = [\"a\" + \"b\", \"c\"]\n"
         "    for x in xs { xs = [x + \"!\"]\n print(x[3]) }\n}\n",
         "out of range for a string"},
        {"fn main() {\n    print(-(\"a\" + \"b\"))\n}\n", "'-' expects int"},
        {"fn main() {\n    print(!(\"a\" + \"b\"))\n}\n", "'!' expects bool"},
        {"fn main() {\n    print([1] + (\"a\" + \"b\"))\n}\n", "cannot combine"},
        {"fn main() {\n    log(\"info\", fail(\"in \" + \"log\"))\n}\n", "in log"},
        {"let g = 1 / 0\nfn main() { }\n", "division by zero"},
        {"fn w() { }\nlet a = spawn w()\nfn main() { }\n", "actors start once main runs"},
        {"fn main() {\n    receive()\n}\n", "deadlock"},
        {"fn w(s) { }\nfn main() {\n    let k: secret = \"s\" + \"t\"\n    spawn w(k)\n}\n",
         "a secret cannot be copied"},
        {"var g = [1]\nfn w() { g = [2] }\nfn main() { join(spawn w()) }\n",
         "cannot assign to global 'g'"},
        {"var g = [1]\nfn w() { print(g) }\nfn main() { join(spawn w()) }\n",
         "cannot read global 'g'"},
        {"fn main() {\n    join(self())\n}\n", "cannot wait for itself"},
        {"fn main() {\n    send(7, \"x\" + \"y\")\n}\n", "no actor 7"},
        {"fn main() {\n    substr(\"abc\", 2, 5)\n}\n", "outside a string"},
        {"fn main() {\n    chr(300)\n}\n", "chr expects a byte value"},
        {"fn main() {\n    list(-1, 0)\n}\n", "list expects a count"},
        {"fn main() {\n    sleep(\"x\")\n}\n", "sleep expects int"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        one_file(cases[i].src, 1, cases[i].msg);
}

Test(backend, the_profile_names_the_backend_that_ran)
{
    static const struct { const char *backend, *mode, *word; } runs[] = {
        {"interp", "--profile-memory", "backend: interpreter_alloc_hooks\n"},
        {"vm", "--profile-memory", "backend: vm_alloc_hooks\n"},
        {"interp", "--profile", "backend: interpreter_safe_point\n"},
        {"vm", "--profile", "backend: vm_safe_point\n"},
        {NULL, "--profile", "backend: vm_safe_point\n"}, /* the default */
    };
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", "fn main() { print(\"x\" + \"y\") }\n");
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const char *argv[] = {"run", "main.jett", "--backend", runs[i].backend, runs[i].mode,
                              "--agent", NULL};
        struct jt_run r;
        if (!runs[i].backend) { /* no --backend: the default's word, as jett printed it */
            const char *dflt[] = {"run", "main.jett", runs[i].mode, "--agent", NULL};
            jtt_run_raw(dir, dflt, &r);
        } else {
            jtt_run(dir, argv, &r);
        }
        cr_expect_eq(r.status, 0, "%s", r.err);
        cr_expect(strstr(r.out, runs[i].word), "%s %s:\n%s", runs[i].backend, runs[i].mode,
                  r.out);
        cr_expect_eq(jtt_count(r.out, "backend:"), 1);
        jtt_run_free(&r);
    }
    jtt_rmtree(dir);
    free(dir);
}

Test(backend, an_unknown_backend_is_a_cli_error)
{
    static const char *const bad[] = {"jit", "", "VM", "interp2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = {"run", "main.jett", "--backend", bad[i], NULL};
        struct jt_run r;
        jtt_run(NULL, argv, &r);
        cr_expect_eq(r.status, 2, "'%s': %d %s", bad[i], r.status, r.err);
        cr_expect(strstr(r.err, "jett: error: --backend expects interp (the tree-walking "
                                "interpreter) or vm (the bytecode VM), got '"),
                  "%s", r.err);
        jtt_run_free(&r);
    }
    const char *twice[] = {"run", "main.jett", "--backend", "vm", "--backend=interp", NULL};
    struct jt_run r;
    jtt_run(NULL, twice, &r);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--backend given more than once"), "%s", r.err);
    jtt_run_free(&r);
}

/* CPU profiles through the test-only tick source (jett-ticks, tests/runtime/ticks.c): a tick is
 * raised at every N-th safe point and answered there, so both backends must pass the same safe
 * points (statements, calls, returns, loop back-edges) with the same current statement and
 * stack for their profiles to be equal: every sample count, hot line and chain. */
Test(backend, cpu_profiles_with_ticks_at_every_nth_safe_point_are_the_same)
{
    const char *ticks = getenv("JETT_TICKS");
    cr_assert(ticks && *ticks, "JETT_TICKS is not set (run through meson test)");
    static const char *const cpu[] = {"--profile", "--profile-threshold", "0",
                                      "--profile-limit", "100", NULL};
    /* Few enough samples for the CPU ring to hold a whole run (no tick may be dropped for
     * lack of room, which would depend on the daemon's speed). */
    static const char *const every[] = {"10007", "65537"};
    /* Not pipeline: its actors are preempted by time, so which actor a tick finds running
     * depends on the clock, on either backend. */
    static const char *const examples[][2] = {
        {"cpu_hotspot", "src/main.jett"}, {"alloc_builder", "main.jett"},
        {"retaining_cache", "main.jett"}, {"runtime_failure", "main.jett"},
    };
    for (size_t e = 0; e < sizeof every / sizeof every[0]; e++) {
        setenv("JETT_TEST_TICK_EVERY", every[e], 1);
        for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/examples/%s", jtt_source_root(), examples[i][0]);
            int status = strcmp(examples[i][0], "runtime_failure") ? 0 : 1;
            char *out = same_on_both_exe(ticks, dir, examples[i][1], cpu, status, false);
            cr_expect(strstr(out, "mode: cpu"), "%s", out);
            /* the ticks were injected, and answered: samples, all attributed */
            const char *rs = strstr(out, "recorded_samples: ");
            cr_expect(rs && atol(rs + 18) > 0, "no samples with a tick every %s:\n%s",
                      every[e], out);
            cr_expect(strstr(out, "dropped_ticks: 0\n"), "%s", out);
            free(out);
        }
    }
    /* the language corpus too, a tick at every safe point */
    setenv("JETT_TEST_TICK_EVERY", "1", 1);
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett",
              "fn fib(n: int) -> int {\n"
              "    if n < 2 { return n }\n"
              "    return fib(n - 1) + fib(n - 2)\n"
              "}\n"
              "fn main() {\n"
              "    var xs = []\n"
              "    for i in 0..30 { push(xs, str(fib(i % 12))) }\n"
              "    var n = 0\n"
              "    for x in xs {\n"
              "        if len(x) > 1 { continue }\n"
              "        n = n + 1\n"
              "    }\n"
              "    while n > 0 { n = n - 3 }\n"
              "    sleep(2)\n"
              "    print(n)\n"
              "}\n");
    char *out = same_on_both_exe(ticks, dir, "main.jett", cpu, 0, false);
    cr_expect(strstr(out, "function: fib"), "%s", out);
    cr_expect(strstr(out, "dropped_ticks: 0\n"), "%s", out);
    free(out);
    jtt_rmtree(dir);
    free(dir);
}

/* Programs of the fuzz harness's generator (tests/lib/jettgen.h), from a fixed stream of
 * bytes: the whole memory profiles compared, where fuzz/fuzz_backends.c compares what an
 * in-process run shows (output, errors, the heap at the end). */
Test(backend, generated_programs_print_the_same_memory_profiles)
{
    uint64_t x = 0x2545f4914f6cdd1dull; /* xorshift64: the same programs on every run */
    uint8_t bytes[600];
    int errors = 0;
    for (int k = 0; k < 40; k++) {
        for (size_t i = 0; i < sizeof bytes; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes[i] = (uint8_t)(x >> 24);
        }
        char *src;
        cr_assert(tl_jett_program(bytes, 200 + (size_t)k * 10, &src) > 0);
        char *dir = jtt_tmpdir();
        jtt_write(dir, "main.jett", src);
        char *out = same_on_both(dir, "main.jett", memory, -1);
        cr_expect(strstr(out, "mode: memory"), "program %d did not run:\n%s\n%s", k, src, out);
        errors += strstr(out, "termination: runtime_error") != NULL;
        free(out);
        free(src);
        jtt_rmtree(dir);
        free(dir);
    }
    /* the generator makes both kinds: programs that return and programs that fail */
    cr_expect(errors > 0 && errors < 40, "%d of 40 generated programs failed", errors);
}
