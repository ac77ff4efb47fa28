/* Runs the tests registered through tsan_shim/criterion/criterion.h: each in its own forked
 * child with a time limit; prints one line per test and exits non-zero if any failed, crashed,
 * timed out or drew a ThreadSanitizer report (TSAN_OPTIONS=halt_on_error=1 makes that exit
 * non-zero). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TESTS 64
#define TIMEOUT_S 120

static struct {
    const char *suite, *name;
    void (*fn)(void);
} tests[MAX_TESTS];
static unsigned ntests;

void jp_shim_register(const char *suite, const char *name, void (*fn)(void))
{
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "tsan_runner: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    tests[ntests].suite = suite;
    tests[ntests].name = name;
    tests[ntests++].fn = fn;
}

void jp_shim_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: Assertion failed: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    _exit(1);
}

int main(void)
{
    unsigned failed = 0;
    if (ntests == 0) {
        fprintf(stderr, "tsan_runner: no tests registered\n");
        return 2;
    }
    for (unsigned i = 0; i < ntests; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            alarm(TIMEOUT_S);
            tests[i].fn();
            fflush(stdout);
            _exit(0);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
            ;
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        printf("[%s] %s::%s", ok ? "PASS" : "FAIL", tests[i].suite, tests[i].name);
        if (WIFSIGNALED(status))
            printf(" (signal %d)", WTERMSIG(status));
        else if (!ok)
            printf(" (exit %d)", WEXITSTATUS(status));
        putchar('\n');
        failed += !ok;
    }
    printf("Tested: %u | Passing: %u | Failing: %u\n", ntests, ntests - failed, failed);
    return failed ? 1 : 0;
}
