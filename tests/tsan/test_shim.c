/* Self-test of the stand-in: every test of suite "passes" must pass, and every test of suite
 * "fails" must fail (the runner's --expect-failures checks that each one did), so the shim can
 * neither hide a failure nor invent one. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static int inited, suite_inited;
static void init(void)
{
    inited = 42;
}
static void suite_init(void)
{
    suite_inited = 7;
}

TestSuite(passes, .init = suite_init);

Test(passes, every_form_holds)
{
    const char *s = "abc", *empty = "";
    int a[3] = {1, 2, 3}, b[3] = {1, 2, 3};
    cr_assert(1);
    cr_assert(2 > 1, "with a message %d", 1);
    cr_assert_not(0);
    cr_assert_eq(3, 3);
    cr_assert_neq(3, 4, "msg");
    cr_assert_lt(3, 4);
    cr_assert_leq(4, 4);
    cr_assert_gt(5, 4);
    cr_assert_geq(5, 5);
    cr_assert_null(NULL);
    cr_assert_not_null(s);
    cr_assert_zero(0);
    cr_assert_not_zero(9);
    cr_assert_str_eq(s, "abc");
    cr_assert_str_neq(s, "abd");
    cr_assert_str_empty(empty);
    cr_assert_str_not_empty(s);
    cr_assert_arr_eq(a, b, sizeof a);
    b[2] = 4;
    cr_assert_arr_neq(a, b, sizeof a);
    cr_assert_float_eq(1.0, 1.05, 0.1);
    cr_assert_float_neq(1.0, 1.5, 0.1);
    cr_expect(1);
    cr_expect_eq(1, 1, "x");
    cr_expect_str_eq(s, "abc");
    cr_log_info("logging works: %d", 1);
}

Test(passes, init_runs_first, .init = init)
{
    cr_assert_eq(inited, 42, "the test's .init ran");
    cr_assert_eq(suite_inited, 0, "a test's own .init replaces the suite's");
}

Test(passes, suite_init_is_the_default)
{
    cr_assert_eq(suite_inited, 7, "TestSuite .init ran");
}

Test(passes, expected_signal, .signal = SIGABRT)
{
    abort();
}

Test(passes, expected_exit_code, .exit_code = 3)
{
    _exit(3);
}

/* fails/fini_runs_after_a_failed_assert, run by this same runner in a child: its body's
 * assertion is reported, and then its .fini's, which only a .fini that ran can report. */
Test(passes, fini_runs_after_a_failed_assert)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        execl("/proc/self/exe", "test_tsan_shim", "--filter=fails/fini_runs_after_a_failed_assert",
              (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char out[8192];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(p[0], out + len, sizeof out - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    close(p[0]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "the runner's status %d:\n%s", st, out);
    const char *body = strstr(out, "the body's assertion failed");
    const char *fini = strstr(out, "fini ran after the failed assertion");
    cr_assert_not_null(body, "%s", out);
    cr_assert_not_null(fini, ".fini did not run after the failed assertion:\n%s", out);
    cr_assert_lt(body, fini, "%s", out);
}

static void fini_fails(void)
{
    cr_assert_fail("fini ran after the failed assertion");
}

Test(fails, assert) { cr_assert_eq(1, 2, "one is not two"); }
Test(fails, assert_without_message) { cr_assert(0); }
Test(fails, expect_then_return)
{
    cr_expect(0, "recorded");
    cr_expect_str_eq("a", "a");
}
Test(fails, crash) { raise(SIGSEGV); }
Test(fails, timeout, .timeout = 0.2) { for (;;) pause(); }
Test(fails, exit_code) { _exit(5); }
Test(fails, wrong_signal, .signal = SIGSEGV) { abort(); }
/* The test's assertion passes; its .fini runs and fails: proves .fini runs, and counts. */
Test(fails, fini_runs, .fini = fini_fails) { cr_assert(1); }
/* Fails for its body's assertion alone; whether its .fini ran too is read from its output by
 * passes/fini_runs_after_a_failed_assert. */
Test(fails, fini_runs_after_a_failed_assert, .fini = fini_fails)
{
    cr_assert_fail("the body's assertion failed");
}

/* Under ThreadSanitizer, a data race must fail its test (the report halts the child). */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define JP_SHIM_UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define JP_SHIM_UNDER_TSAN 1
#endif
#ifdef JP_SHIM_UNDER_TSAN
#include <pthread.h>
static int racy;
static void *bump(void *arg)
{
    (void)arg;
    racy++;
    return NULL;
}
Test(fails, data_race)
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, bump, NULL), 0);
    racy++;
    pthread_join(t, NULL);
    usleep(1000);
}
#endif
