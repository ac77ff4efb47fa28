/* A minimal stand-in for <criterion/criterion.h>, used only when the ring suites are built with
 * -Db_sanitize=thread: Criterion 2.4's runner cannot start under ThreadSanitizer (its boxfort
 * arena wants fixed addresses that TSan's shadow memory occupies: "Could not initialize
 * inheritable arena"). The same test sources then run through tsan_runner.c, which forks one
 * child per test like Criterion does, so a failed assertion or a TSan report fails that test.
 * Only the assertions the ring suites use are provided; their meaning matches Criterion's. */
#ifndef JETTPROF_TESTS_TSAN_SHIM_CRITERION_H
#define JETTPROF_TESTS_TSAN_SHIM_CRITERION_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jp_shim_register(const char *suite, const char *name, void (*fn)(void));
_Noreturn void jp_shim_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Test(suite, name) or Test(suite, name, .timeout = n): extra options are accepted and
 * ignored (the runner has one time limit for all). */
#define Test(...) JP_SHIM_TEST_(__VA_ARGS__, 0)
#define JP_SHIM_TEST_(suite, name, ...)                                                           \
    static void suite##_##name(void);                                                             \
    __attribute__((constructor)) static void suite##_##name##_register(void)                      \
    {                                                                                             \
        jp_shim_register(#suite, #name, suite##_##name);                                          \
    }                                                                                             \
    static void suite##_##name(void)

#define cr_assert_fail(...) jp_shim_fail(__FILE__, __LINE__, __VA_ARGS__)
#define cr_assert(cond, ...)                                                                      \
    do {                                                                                          \
        if (!(cond))                                                                              \
            cr_assert_fail(__VA_ARGS__);                                                          \
    } while (0)
#define cr_assert_not(cond, ...) cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)

#endif
