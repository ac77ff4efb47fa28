/* Actors end to end (LANGUAGE.md, "Actors"): spawn, send, receive, join and self; --workers;
 * preemption; the deadlock and actor-error paths; globals; and what the profiles say of a
 * program run on several workers: the same memory totals and sites for every --workers, both
 * workers and every actor counted in a CPU profile, and a capture that replays to the live
 * bytes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* Loop counts for the tests that need an actor busy for a while: the bytecode VM (jett's
 * default) runs a loop about three times as fast as the tree walker. */
static long busy(long n)
{
    return jtt_backend() && !strcmp(jtt_backend(), "interp") ? n : 3 * n;
}

/* ---- the language ---- */

Test(actors, spawn_send_receive_join_and_self)
{
    struct jt_run r = jtt_run_src(
        "fn echo(tag: str, n: int) -> list {\n"
        "  var got = []\n"
        "  for i in 0..n { push(got, receive()) }\n"
        "  return [tag, self(), got]\n"
        "}\n"
        "fn main() {\n"
        "  let a = spawn echo(\"a\", 3)\n"
        "  let b = spawn echo(\"b\", 1)\n"
        "  print([self(), a, b])\n"
        "  send(a, 1); send(a, [2, [\"two\", true]]); send(a, \"three\")\n"
        "  print(send(b, [\"x\"]))\n"
        "  print(join(a)); print(join(b)); print(join(b))\n"
        "  print(send(a, 4))\n"
        "}\n",
        NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "[0, 1, 2]\n"
                            "true\n"
                            "[a, 1, [1, [2, [two, true]], three]]\n"
                            "[b, 2, [[x]]]\n"
                            "[b, 2, [[x]]]\n"
                            "false\n");
    jtt_run_free(&r);
}

Test(actors, a_copy_is_independent_of_its_original)
{
    struct jt_run r = jtt_run_src(
        "fn keep() -> list { let l = receive(); push(l, 9); return l }\n"
        "fn main() {\n"
        "  let xs = [1, 2]\n"
        "  let a = spawn keep()\n"
        "  send(a, xs)\n"
        "  let ys = join(a)\n"
        "  push(ys, 10)\n"
        "  print(xs); print(ys)\n"
        "}\n",
        NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "[1, 2]\n[1, 2, 9, 10]\n");
    jtt_run_free(&r);
}

Test(actors, what_cannot_cross_between_actors_is_a_runtime_error)
{
    static const struct {
        const char *body, *message;
    } cases[] = {
        {"let a = spawn f()\n  send(a, secret(\"k\"))",
         "main.jett:5:3: runtime error: send: a secret cannot be copied to another actor"},
        {"var l = []\n  push(l, l)\n  let a = spawn f()\n  send(a, l)",
         "runtime error: send: a list nested more than 64 deep cannot be copied"},
        {"send(7, 1)", "main.jett:4:3: runtime error: send: no actor 7"},
        {"send(\"x\", 1)", "runtime error: send expects an actor id (int), got str"},
        {"join(self())", "runtime error: join: an actor cannot wait for itself"},
        {"let a = spawn g()\n  join(a)",
         "runtime error: cannot read global 'counter' from actor 1: a var global belongs to "
         "main (actor 0)"},
        {"let a = spawn h()\n  join(a)",
         "runtime error: cannot read global 'names' from actor 1: its value is in main's heap"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[1024];
        snprintf(src, sizeof src,
                 "var counter = 0\nlet names = [\"a\"]\nfn main() {\n  %s\n}\n"
                 "fn f() -> int { return receive() }\n"
                 "fn g() -> int { return counter }\n"
                 "fn h() -> int { return len(names) }\n",
                 cases[i].body);
        struct jt_run r = jtt_run_src(src, NULL);
        cr_expect_eq(r.status, 1, "case %zu: exit %d", i, r.status);
        cr_expect(strstr(r.err, cases[i].message), "case %zu: %s", i, r.err);
        jtt_run_free(&r);
    }
}

Test(actors, an_immutable_global_of_an_int_or_literal_is_readable_everywhere)
{
    struct jt_run r = jtt_run_src("let limit = 3\nlet name = \"w\"\n"
                              "fn f() -> str { return name + str(limit) }\n"
                              "fn main() { print(join(spawn f())) }\n",
                              NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "w3\n");
    jtt_run_free(&r);
}

Test(actors, workers_must_be_one_to_sixty_four)
{
    static const char *bad[] = {"0", "65", "two", "-1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *opts[] = {"--workers", bad[i], NULL};
        struct jt_run r = jtt_run_src("fn main() { print(1) }\n", opts);
        cr_expect_eq(r.status, 2, "--workers '%s': exit %d", bad[i], r.status);
        cr_expect(strstr(r.err, "--workers expects an integer from 1 to 64"), "%s", r.err);
        cr_expect_eq(r.out_len, 0, "nothing ran");
        jtt_run_free(&r);
    }
    static const char *good[] = {"1", "2", "4", "64"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const char *opts[] = {"--workers", good[i], NULL};
        struct jt_run r = jtt_run_src("fn sq(n: int) -> int { return n * n }\n"
                                  "fn main() { var t = 0\n"
                                  "  var ids = []\n"
                                  "  for i in 0..8 { push(ids, spawn sq(i)) }\n"
                                  "  for a in ids { t = t + join(a) }\n"
                                  "  print(t) }\n",
                                  opts);
        cr_expect_eq(r.status, 0, "--workers %s: %s", good[i], r.err);
        cr_expect_str_eq(r.out, "140\n", "--workers %s", good[i]);
        jtt_run_free(&r);
    }
}

Test(actors, every_actor_waiting_is_the_deadlock_error)
{
    static const char *workers[] = {"1", "3"};
    for (size_t i = 0; i < 2; i++) {
        const char *opts[] = {"--workers", workers[i], NULL};
        struct jt_run r = jtt_run_src("fn wait() -> int { return receive() }\n"
                                  "fn main() {\n"
                                  "  let a = spawn wait()\n"
                                  "  print(\"waiting\")\n"
                                  "  print(join(a))\n"
                                  "}\n",
                                  opts);
        cr_expect_eq(r.status, 1, "exit %d", r.status);
        cr_expect_str_eq(r.out, "waiting\n");
        cr_expect(strstr(r.err, "main.jett:5:3: runtime error: deadlock: every actor is waiting"),
                  "%s", r.err);
        jtt_run_free(&r);
    }
    /* main alone, receiving what nobody will send */
    struct jt_run r = jtt_run_src("fn main() { print(receive()) }\n", NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "deadlock: every actor is waiting"), "%s", r.err);
    jtt_run_free(&r);
}

Test(actors, a_runtime_error_in_any_actor_ends_the_program)
{
    const char *opts[] = {"--workers", "2", "--profile-memory", NULL};
    struct jt_run r = jtt_run_src("fn div(x: int) -> int { return 10 / x }\n"
                              "fn spin() -> int { var i = 0\n while true { i = i + 1 } }\n"
                              "fn main() {\n"
                              "  let s = spawn spin()\n"
                              "  let a = spawn div(0)\n"
                              "  print(receive())\n"
                              "}\n",
                              opts);
    cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "main.jett:1:35: runtime error: division by zero"), "%s", r.err);
    cr_expect(strstr(r.err, "termination: runtime_error"), "%s", r.err);
    cr_expect(strstr(r.err, "status: complete"), "%s", r.err);
    jtt_run_free(&r);
}

/* Two CPU-bound actors on one worker: the first is preempted after its slice, so the second
 * runs (and prints) before the first ends. Without preemption the first would run to its end. */
Test(actors, a_running_actor_gives_way_after_its_slice)
{
    const char *opts[] = {"--workers", "1", NULL};
    char src[1024], want[128];
    long n = busy(3000000);
    snprintf(src, sizeof src,
             "fn long() -> int {\n"
             "  print(\"long starts\")\n"
             "  var i = 0\n"
             "  while i < %ld { i = i + 1 }\n"
             "  print(\"long ends\")\n"
             "  return i\n"
             "}\n"
             "fn short() -> int { print(\"short ran\")\n return 1 }\n"
             "fn main() {\n"
             "  let a = spawn long()\n"
             "  let b = spawn short()\n"
             "  print(join(a) + join(b))\n"
             "}\n",
             n);
    struct jt_run r = jtt_run_src(src, opts);
    cr_assert_eq(r.status, 0, "%s", r.err);
    snprintf(want, sizeof want, "long starts\nshort ran\nlong ends\n%ld\n", n + 1);
    cr_expect_str_eq(r.out, want);
    jtt_run_free(&r);
}

/* SIGINT reaches every actor: the running one at its next safe point, the waiting ones at
 * their wait; a join of an actor that was interrupted has no result to print. */
Test(actors, sigint_ends_every_actor)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett",
              "fn spin() -> int { var i = 0\n while true { i = i + 1 } }\n"
              "fn waiter() -> int { return receive() }\n"
              "fn main() {\n"
              "  let a = spawn spin()\n"
              "  let b = spawn waiter()\n"
              "  eprint(\"ready\")\n"
              "  print(join(a))\n"
              "}\n");
    const char *argv[] = {"run", "main.jett", "--workers", "2", "--profile", NULL};
    struct jt_run r;
    jtt_run_sigint(dir, argv, "ready\n", 200, &r);
    cr_expect_eq(r.status, 130, "exit %d: %s", r.status, r.err);
    cr_expect_str_eq(r.out, "");
    cr_expect(strstr(r.err, "ready\njett: interrupted\n"), "%s", r.err);
    cr_expect(strstr(r.err, "termination: interrupted"), "%s", r.err);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}

/* ---- profiles ---- */

/* The profile object of an --agent envelope without the lines that may differ between
 * schedulings: the peak and what was live at it, the threads' count and durations. */
static char *stable_profile(const struct jt_run *r)
{
    const char *p = strstr(r->out, "\nprofile:\n");
    cr_assert(p, "%s", r->out);
    struct jp_buf_like {
        char *p;
        size_t len;
    } b = {malloc(strlen(p) + 1), 0};
    for (const char *line = p + 1; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%.*s", (int)(n < 511 ? n : 511), line);
        if (!strstr(tmp, "peak") && !strstr(tmp, "runtime_threads") && !strstr(tmp, "_ns:")) {
            memcpy(b.p + b.len, line, n);
            b.len += n;
        }
        line += n;
    }
    b.p[b.len] = '\0';
    return b.p;
}

/* A fan-out/fan-in program whose output does not depend on scheduling; each worker receives
 * three levels deep (a migration point in the middle of a chain) and allocates after it. */
static const char migrating[] =
    "fn build(n: int) -> list { var l = []\n for i in 0..n { push(l, \"v\" + str(i)) }\n return l }\n"
    "fn stage(depth: int) -> int {\n"
    "  if depth > 0 { return stage(depth - 1) }\n"
    "  let job = receive()\n"
    "  let l = build(job)\n"
    "  return len(l)\n"
    "}\n"
    "fn work(rounds: int) -> int { var t = 0\n for r in 0..rounds { t = t + stage(3) }\n return t }\n"
    "fn main() {\n"
    "  var ids = []\n"
    "  for k in 0..4 { push(ids, spawn work(25)) }\n"
    "  for r in 0..25 { for a in ids { send(a, 40 + r) } }\n"
    "  var t = 0\n"
    "  for a in ids { t = t + join(a) }\n"
    "  print(t)\n"
    "}\n";

Test(actors, memory_totals_and_sites_are_the_same_for_every_worker_count)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", migrating);
    char *base = NULL;
    static const char *workers[] = {"1", "2", "4"};
    for (size_t i = 0; i < 3; i++) {
        const char *opts[] = {"--workers", workers[i], "--profile-memory", "--agent", NULL};
        struct jt_run r;
        jtt_run_file(dir, "main.jett", opts, &r);
        cr_assert_eq(r.status, 0, "--workers %s: %s", workers[i], r.err);
        cr_expect(strstr(r.out, "stdout: \"5200\\n\""), "%s", r.out);
        cr_expect(strstr(r.out, "  status: complete\n"), "--workers %s:\n%s", workers[i], r.out);
        char *json = tl_toon_decode(r.out, r.out_len, NULL);
        cr_expect(json, "not valid TOON");
        free(json);
        char *s = stable_profile(&r);
        /* 5200 strings built at build, the lists' growth there too, the messages at main */
        cr_expect(strstr(s, "allocation_count: "), "%s", s);
        cr_expect(strstr(s, "stage > build") || strstr(s, "stage,build") || strstr(s, "build"),
                  "%s", s);
        if (!base)
            base = s;
        else {
            cr_expect_str_eq(s, base, "--workers %s differs from --workers 1", workers[i]);
            free(s);
        }
        jtt_run_free(&r);
    }
    free(base);
    jtt_rmtree(dir);
    free(dir);
}

Test(actors, a_cpu_profile_on_two_workers_counts_both_threads_and_every_actor)
{
    const char *opts[] = {"--workers", "2", "--profile", "--agent", NULL};
    char src[1024];
    snprintf(src, sizeof src,
             "fn spin(n: int) -> int { var i = 0\n var a = 0\n"
             "  while i < n { a = (a + i * 7) %% 1000003\n i = i + 1 }\n"
             "  return a }\n"
             "fn main() {\n"
             "  let a = spawn spin(%ld)\n"
             "  let b = spawn spin(%ld)\n"
             "  print(join(a) == join(b))\n"
             "}\n",
             busy(4000000), busy(4000000));
    struct jt_run r = jtt_run_src(src, opts);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *json = tl_toon_decode(r.out, r.out_len, NULL);
    cr_assert(json, "not valid TOON:\n%s", r.out);
    /* the totals' runtime_threads, then spin's entry: both workers, both actors */
    cr_expect(strstr(json, "\"runtime_threads\":2"), "%s", json);
    const char *spin = strstr(json, "\"function\":\"spin\"");
    cr_assert(spin, "%s", json);
    cr_expect(strstr(spin, "\"runtime_threads\":2"), "%s", spin);
    cr_expect(strstr(spin, "\"tasks\":2"), "%s", spin);
    free(json);
    jtt_run_free(&r);
}

Test(actors, a_capture_of_several_workers_replays_to_the_live_profile)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", migrating);
    char cap[4200];
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    const char *opts[] = {"--workers", "3", "--profile-memory", "--agent",
                          "--profile-capture", cap, NULL};
    struct jt_run r;
    jtt_run_file(dir, "main.jett", opts, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    jtt_expect_replay_is_live(cap, r.out);
    jtt_run_free(&r);
    jtt_rmtree(dir);
    free(dir);
}
