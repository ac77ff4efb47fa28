/* Invariant checks for the fuzz harnesses. A broken invariant aborts, so libFuzzer records the
 * input as a crash artifact exactly as it does for a sanitizer report; the message names the
 * invariant and where it was checked. */
#ifndef JETTPROF_FUZZ_CHECK_H
#define JETTPROF_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)                                                                     \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

#endif
