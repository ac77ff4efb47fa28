/* Runs the tests registered through tests/tsan/criterion/criterion.h (see there for what is
 * supported): each in its own forked child, with its time limit; one line per test, then
 * Criterion's synthesis line; exits 1 if any test failed, crashed, timed out or drew a sanitizer
 * report (a TSan report halts the child at once, see __tsan_default_options below). */
#include <criterion/criterion.h>
#include <fnmatch.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TESTS 1024
#define MAX_SUITES 64
#define DEFAULT_TIMEOUT_S 120.0

struct test {
    const char *suite, *name;
    void (*fn)(void);
    const struct jp_shim_opts *opts;
};
static struct test tests[MAX_TESTS];
static unsigned ntests;
static struct {
    const char *name;
    const struct jp_shim_opts *opts;
} suites[MAX_SUITES];
static unsigned nsuites;

void jp_shim_register(const char *suite, const char *name, void (*fn)(void),
                      const struct jp_shim_opts *opts)
{
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "tsan_runner: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    tests[ntests++] = (struct test){suite, name, fn, opts};
}

void jp_shim_register_suite(const char *suite, const struct jp_shim_opts *opts)
{
    if (nsuites == MAX_SUITES) {
        fprintf(stderr, "tsan_runner: more than %d TestSuite() declarations\n", MAX_SUITES);
        exit(2);
    }
    suites[nsuites].name = suite;
    suites[nsuites++].opts = opts;
}

/* Under ThreadSanitizer, a report must end the child with a failure: TSan sets its exit code
 * (66) only in its exit-time hook, which the child's _exit() skips, so by default every report
 * halts at once. TSAN_OPTIONS from the environment still applies on top of this. Unused in
 * builds without TSan. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "halt_on_error=1";
}

/* ---- inside a test's child ------------------------------------------------------------ */

static jmp_buf test_jmp;
static pthread_t test_thread;
static int in_test;             /* test_jmp is armed (on test_thread) */
static atomic_int failed_checks; /* cr_assert or cr_expect failures so far */

/* The messages are the test's own printf formats, passed through unchecked here because the
 * trailing NULL that ends each list would trip -Wformat-extra-args; the same sources built
 * against Criterion have them checked there. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void report(const char *kind, const char *file, int line, const char *expr,
                   const char *fmt, va_list ap)
{
    flockfile(stderr);
    fprintf(stderr, "%s:%d: %s failed", file, line, kind);
    if (expr)
        fprintf(stderr, ": %s", expr);
    if (fmt && fmt[0]) {
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
    }
    fputc('\n', stderr);
    funlockfile(stderr);
    fflush(stderr);
}
#pragma GCC diagnostic pop

void jp_shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report("Assertion", file, line, expr, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&failed_checks, 1);
    if (in_test && pthread_equal(pthread_self(), test_thread))
        longjmp(test_jmp, 1);
    _exit(1); /* another thread, or .init/.fini: end the child now */
}

void jp_shim_expect(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report("Expectation", file, line, expr, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&failed_checks, 1);
}

void jp_shim_log(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    flockfile(stderr);
    fprintf(stderr, "[----] %s: ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
    va_end(ap);
}

/* A test's effective options: its own where set, else its suite's. */
struct eff {
    void (*init)(void), (*fini)(void);
    double timeout;
    int signal, exit_code;
};

static struct eff effective(const struct test *t)
{
    struct eff e = {t->opts->init, t->opts->fini, t->opts->timeout, t->opts->signal,
                    t->opts->exit_code};
    for (unsigned i = 0; i < nsuites; i++) {
        if (strcmp(suites[i].name, t->suite) != 0)
            continue;
        const struct jp_shim_opts *s = suites[i].opts;
        if (!e.init)
            e.init = s->init;
        if (!e.fini)
            e.fini = s->fini;
        if (e.timeout <= 0)
            e.timeout = s->timeout;
        if (!e.signal)
            e.signal = s->signal;
        if (!e.exit_code)
            e.exit_code = s->exit_code;
    }
    if (e.timeout <= 0)
        e.timeout = DEFAULT_TIMEOUT_S;
    return e;
}

static _Noreturn void run_child(const struct test *t, const struct eff *e)
{
    time_t whole = (time_t)e->timeout;
    struct itimerval it = {{0, 0}, {whole, (suseconds_t)((e->timeout - (double)whole) * 1e6)}};
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
        it.it_value.tv_usec = 1;
    setitimer(ITIMER_REAL, &it, NULL); /* SIGALRM's default action ends the child */
    if (e->init)
        e->init();
    test_thread = pthread_self();
    if (setjmp(test_jmp) == 0) {
        in_test = 1;
        t->fn();
    }
    in_test = 0;
    if (e->fini)
        e->fini();
    fflush(stdout);
    _exit(atomic_load(&failed_checks) ? 1 : 0);
}

/* ---- the parent ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    const char *filter = NULL;
    int expect_failures = 0; /* the shim's self-test: every selected test must fail */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--filter=", 9))
            filter = a + 9;
        else if (!strcmp(a, "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!strcmp(a, "--expect-failures"))
            expect_failures = 1;
        else if (!strncmp(a, "-j", 2) || !strncmp(a, "--jobs", 6) ||
                 !strncmp(a, "--verbose", 9))
            continue;
        else {
            fprintf(stderr, "tsan_runner: unknown argument %s (supported: --filter=SUITE/NAME)\n",
                    a);
            return 2;
        }
    }
    unsigned ran = 0, failed = 0, crashed = 0;
    for (unsigned i = 0; i < ntests; i++) {
        const struct test *t = &tests[i];
        char full[512];
        snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
        if (filter && fnmatch(filter, full, 0) != 0)
            continue;
        struct eff e = effective(t);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            perror("tsan_runner: fork");
            return 2;
        }
        if (pid == 0)
            run_child(t, &e);
        int status;
        while (waitpid(pid, &status, 0) < 0)
            ;
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        int ok = e.signal ? sig == e.signal : !sig && code == e.exit_code;
        ran++;
        printf("[%s] %s::%s", ok ? "PASS" : "FAIL", t->suite, t->name);
        if (!ok && sig == SIGALRM)
            printf(" (timed out after %gs)", e.timeout);
        else if (!ok && sig)
            printf(" (signal %d)", sig);
        else if (!ok)
            printf(" (exit %d)", code);
        putchar('\n');
        failed += !ok;
        crashed += !ok && sig != 0;
    }
    if (ran == 0) {
        fprintf(stderr, "tsan_runner: no test %s\n", filter ? "matches the filter" : "registered");
        return 2;
    }
    printf("[====] Synthesis: Tested: %u | Passing: %u | Failing: %u | Crashing: %u\n", ran,
           ran - failed, failed, crashed);
    if (expect_failures) {
        printf("tsan_runner: %u of %u tests failed as they must\n", failed, ran);
        return failed == ran ? 0 : 1;
    }
    return failed ? 1 : 0;
}
