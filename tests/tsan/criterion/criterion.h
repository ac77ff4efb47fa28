/* A stand-in for <criterion/criterion.h> for suites that must run under ThreadSanitizer.
 *
 * Why: Criterion 2.4's runner cannot start under TSan (its boxfort arena wants fixed addresses
 * that TSan's shadow memory occupies: "Could not initialize inheritable arena"). The same test
 * sources compiled against this header run through tests/tsan/tsan_runner.c instead, which
 * forks one child per test like Criterion does, so a failed assertion, a crash, a timeout or a
 * TSan report (the runner makes TSan halt on its first report) fails that test only.
 *
 * How a suite opts in (its meson.build; tests/tsan is configured before every suite):
 *
 *     if get_option('b_sanitize').contains('thread')
 *       exe = executable('test_x', 'test_x.c', dependencies : [your_deps, tsan_criterion_dep])
 *     else
 *       exe = executable('test_x', 'test_x.c', dependencies : [your_deps, criterion_dep])
 *     endif
 *     test('x', exe, suite : 'x', env : test_env)
 *
 * tsan_criterion_dep puts this folder first on the include path (so the unchanged
 * `#include <criterion/criterion.h>` finds this file) and compiles the runner, which provides
 * main(), into the executable. Do not also link criterion_dep into that executable. Run it
 * with no arguments, or --filter=SUITE/NAME (a glob over "suite/name"); -j/--jobs/--verbose
 * arguments are accepted and ignored. It prints one [PASS]/[FAIL] line per test and Criterion's
 * closing "[====] Synthesis: Tested: N | Passing: N | Failing: N | Crashing: N" line, and exits
 * non-zero if any test failed.
 *
 * Supported, with Criterion's meaning:
 *   Test(suite, name [, options])    options: .init, .fini (void (*)(void)), .timeout (seconds,
 *                                    double; default 120), .signal (the test passes only if
 *                                    killed by it), .exit_code (passes only with this exit
 *                                    status), .description
 *   TestSuite(suite [, options])     the same options, as defaults for every test of the suite
 *                                    (a test's own option wins)
 *   cr_assert / cr_expect, and their _not, _eq, _neq, _lt, _leq, _gt, _geq, _null, _not_null,
 *   _zero, _not_zero, _str_eq, _str_neq, _str_empty, _str_not_empty, _arr_eq, _arr_neq
 *   (a, b, size: memcmp), _float_eq, _float_neq (a, b, epsilon) forms; cr_assert_fail,
 *   cr_expect_fail; cr_log_info, cr_log_warn, cr_log_error.
 *   The message after the operands is optional and, as in Criterion, a printf format string
 *   and its arguments (not type-checked here: Criterion's build checks them).
 *   cr_assert* end the test at once (the test's .fini still runs); cr_expect* record the
 *   failure and let the test go on; the test fails when it ends.
 * Not supported (a build error under --werror, not a silent difference): other options such
 * as .disabled, ParameterizedTest, Theory, report hooks, cr_skip_test, a custom main(), the
 * cr_assert(eq(...)) "new assertion" API. A cr_assert that fails on a thread other
 * than the test's own ends the child at once without running .fini. Tests run one at a time,
 * in registration order (source order within a file).
 */
#ifndef JETTPROF_TESTS_TSAN_CRITERION_H
#define JETTPROF_TESTS_TSAN_CRITERION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jp_shim_opts {
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    int signal;
    int exit_code;
    const char *description;
    int jp_shim_end_; /* sentinel: lets Test(suite, name) pass an empty option list */
};

void jp_shim_register(const char *suite, const char *name, void (*fn)(void),
                      const struct jp_shim_opts *opts);
void jp_shim_register_suite(const char *suite, const struct jp_shim_opts *opts);
/* fmt NULL: no message. fmt is a printf format for the arguments after it. */
_Noreturn void jp_shim_fail(const char *file, int line, const char *expr, const char *fmt, ...);
void jp_shim_expect(const char *file, int line, const char *expr, const char *fmt, ...);
void jp_shim_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define Test(...) JP_SHIM_TEST_(__VA_ARGS__, .jp_shim_end_ = 0)
#define JP_SHIM_TEST_(suite, name, ...)                                                           \
    static void jp_shim_t_##suite##_##name(void);                                                 \
    __attribute__((constructor)) static void jp_shim_r_##suite##_##name(void)                     \
    {                                                                                             \
        static const struct jp_shim_opts o = {__VA_ARGS__};                                       \
        jp_shim_register(#suite, #name, jp_shim_t_##suite##_##name, &o);                          \
    }                                                                                             \
    static void jp_shim_t_##suite##_##name(void)

#define TestSuite(...) JP_SHIM_SUITE_(__VA_ARGS__, .jp_shim_end_ = 0)
#define JP_SHIM_SUITE_(suite, ...)                                                                \
    __attribute__((constructor)) static void jp_shim_s_##suite(void)                              \
    {                                                                                             \
        static const struct jp_shim_opts o = {__VA_ARGS__};                                       \
        jp_shim_register_suite(#suite, &o);                                                       \
    }                                                                                             \
    struct jp_shim_semicolon_##suite

/* K is JP_SHIM_A_ (fatal) or JP_SHIM_E_ (go on); the trailing NULL ends the message list, so
 * an assertion without a message still passes at least one variadic argument. */
#define JP_SHIM_A_(cond, expr, ...)                                                               \
    do {                                                                                          \
        if (!(cond))                                                                              \
            jp_shim_fail(__FILE__, __LINE__, expr, __VA_ARGS__);                                  \
    } while (0)
#define JP_SHIM_E_(cond, expr, ...)                                                               \
    do {                                                                                          \
        if (!(cond))                                                                              \
            jp_shim_expect(__FILE__, __LINE__, expr, __VA_ARGS__);                                \
    } while (0)
#define JP_SHIM_U_(K, x, ...) K((x), #x, __VA_ARGS__)
#define JP_SHIM_N_(K, x, ...) K(!(x), "!(" #x ")", __VA_ARGS__)
#define JP_SHIM_B_(K, op, a, b, ...) K((a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define JP_SHIM_P_(K, test, what, x, ...) K((x)test, #x what, __VA_ARGS__)
#define JP_SHIM_S_(K, op, a, b, ...) K(strcmp((a), (b)) op 0, #a " " #op " " #b, __VA_ARGS__)
#define JP_SHIM_M_(K, op, a, b, n, ...)                                                           \
    K(memcmp((a), (b), (n)) op 0, #a " " #op " " #b, __VA_ARGS__)
#define JP_SHIM_F_(K, eq, a, b, eps, ...)                                                         \
    K((((a) - (b) <= (eps)) && ((b) - (a) <= (eps))) == (eq), #a " ~ " #b, __VA_ARGS__)

#define cr_assert(...) JP_SHIM_U_(JP_SHIM_A_, __VA_ARGS__, NULL)
#define cr_assert_not(...) JP_SHIM_N_(JP_SHIM_A_, __VA_ARGS__, NULL)
#define cr_assert_eq(...) JP_SHIM_B_(JP_SHIM_A_, ==, __VA_ARGS__, NULL)
#define cr_assert_neq(...) JP_SHIM_B_(JP_SHIM_A_, !=, __VA_ARGS__, NULL)
#define cr_assert_lt(...) JP_SHIM_B_(JP_SHIM_A_, <, __VA_ARGS__, NULL)
#define cr_assert_leq(...) JP_SHIM_B_(JP_SHIM_A_, <=, __VA_ARGS__, NULL)
#define cr_assert_gt(...) JP_SHIM_B_(JP_SHIM_A_, >, __VA_ARGS__, NULL)
#define cr_assert_geq(...) JP_SHIM_B_(JP_SHIM_A_, >=, __VA_ARGS__, NULL)
#define cr_assert_null(...) JP_SHIM_P_(JP_SHIM_A_, == NULL, " is NULL", __VA_ARGS__, NULL)
#define cr_assert_not_null(...) JP_SHIM_P_(JP_SHIM_A_, != NULL, " is not NULL", __VA_ARGS__, NULL)
#define cr_assert_zero(...) JP_SHIM_P_(JP_SHIM_A_, == 0, " is zero", __VA_ARGS__, NULL)
#define cr_assert_not_zero(...) JP_SHIM_P_(JP_SHIM_A_, != 0, " is not zero", __VA_ARGS__, NULL)
#define cr_assert_str_eq(...) JP_SHIM_S_(JP_SHIM_A_, ==, __VA_ARGS__, NULL)
#define cr_assert_str_neq(...) JP_SHIM_S_(JP_SHIM_A_, !=, __VA_ARGS__, NULL)
#define cr_assert_str_empty(...) JP_SHIM_P_(JP_SHIM_A_, [0] == '\0', " is empty", __VA_ARGS__, NULL)
#define cr_assert_str_not_empty(...)                                                              \
    JP_SHIM_P_(JP_SHIM_A_, [0] != '\0', " is not empty", __VA_ARGS__, NULL)
#define cr_assert_arr_eq(...) JP_SHIM_M_(JP_SHIM_A_, ==, __VA_ARGS__, NULL)
#define cr_assert_arr_neq(...) JP_SHIM_M_(JP_SHIM_A_, !=, __VA_ARGS__, NULL)
#define cr_assert_float_eq(...) JP_SHIM_F_(JP_SHIM_A_, 1, __VA_ARGS__, NULL)
#define cr_assert_float_neq(...) JP_SHIM_F_(JP_SHIM_A_, 0, __VA_ARGS__, NULL)
#define cr_assert_fail(...) jp_shim_fail(__FILE__, __LINE__, NULL, "" __VA_ARGS__, NULL)

#define cr_expect(...) JP_SHIM_U_(JP_SHIM_E_, __VA_ARGS__, NULL)
#define cr_expect_not(...) JP_SHIM_N_(JP_SHIM_E_, __VA_ARGS__, NULL)
#define cr_expect_eq(...) JP_SHIM_B_(JP_SHIM_E_, ==, __VA_ARGS__, NULL)
#define cr_expect_neq(...) JP_SHIM_B_(JP_SHIM_E_, !=, __VA_ARGS__, NULL)
#define cr_expect_lt(...) JP_SHIM_B_(JP_SHIM_E_, <, __VA_ARGS__, NULL)
#define cr_expect_leq(...) JP_SHIM_B_(JP_SHIM_E_, <=, __VA_ARGS__, NULL)
#define cr_expect_gt(...) JP_SHIM_B_(JP_SHIM_E_, >, __VA_ARGS__, NULL)
#define cr_expect_geq(...) JP_SHIM_B_(JP_SHIM_E_, >=, __VA_ARGS__, NULL)
#define cr_expect_null(...) JP_SHIM_P_(JP_SHIM_E_, == NULL, " is NULL", __VA_ARGS__, NULL)
#define cr_expect_not_null(...) JP_SHIM_P_(JP_SHIM_E_, != NULL, " is not NULL", __VA_ARGS__, NULL)
#define cr_expect_zero(...) JP_SHIM_P_(JP_SHIM_E_, == 0, " is zero", __VA_ARGS__, NULL)
#define cr_expect_not_zero(...) JP_SHIM_P_(JP_SHIM_E_, != 0, " is not zero", __VA_ARGS__, NULL)
#define cr_expect_str_eq(...) JP_SHIM_S_(JP_SHIM_E_, ==, __VA_ARGS__, NULL)
#define cr_expect_str_neq(...) JP_SHIM_S_(JP_SHIM_E_, !=, __VA_ARGS__, NULL)
#define cr_expect_str_empty(...) JP_SHIM_P_(JP_SHIM_E_, [0] == '\0', " is empty", __VA_ARGS__, NULL)
#define cr_expect_str_not_empty(...)                                                              \
    JP_SHIM_P_(JP_SHIM_E_, [0] != '\0', " is not empty", __VA_ARGS__, NULL)
#define cr_expect_arr_eq(...) JP_SHIM_M_(JP_SHIM_E_, ==, __VA_ARGS__, NULL)
#define cr_expect_arr_neq(...) JP_SHIM_M_(JP_SHIM_E_, !=, __VA_ARGS__, NULL)
#define cr_expect_float_eq(...) JP_SHIM_F_(JP_SHIM_E_, 1, __VA_ARGS__, NULL)
#define cr_expect_float_neq(...) JP_SHIM_F_(JP_SHIM_E_, 0, __VA_ARGS__, NULL)
#define cr_expect_fail(...) jp_shim_expect(__FILE__, __LINE__, NULL, "" __VA_ARGS__, NULL)

#define cr_log_info(...) jp_shim_log("info", __VA_ARGS__)
#define cr_log_warn(...) jp_shim_log("warn", __VA_ARGS__)
#define cr_log_error(...) jp_shim_log("error", __VA_ARGS__)

#endif
