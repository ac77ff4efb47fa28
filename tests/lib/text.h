/* tests/lib/text.h: files read whole, and texts with the figures no two runs share taken out,
 * so two runs' outputs can be compared byte for byte. Failures fail the test (Criterion). */
#ifndef JETTPROF_TESTS_LIB_TEXT_H
#define JETTPROF_TESTS_LIB_TEXT_H

#include <stddef.h>

/* The whole file at path, NUL-terminated (it may hold NULs of its own: *len, when given,
 * receives its length). malloc'ed. Fails the test when it cannot be read. */
char *tl_slurp(const char *path, size_t *len);

/* text without each line that contains one of keys (a NULL-terminated list): for outputs
 * whose timed lines two runs differ on. malloc'ed. */
char *tl_without_lines(const char *text, const char *const *keys);

/* text with what follows the first of keys (a NULL-terminated list, tried in order) on each
 * line replaced by N: the timed lines stay, so their place and key are still compared.
 * malloc'ed. */
char *tl_values_masked(const char *text, const char *const *keys);

#endif
