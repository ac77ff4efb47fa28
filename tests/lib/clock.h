/* tests/lib/clock.h: the monotonic clock in seconds, for the suites' deadlines and the
 * benches' timings alike. No Criterion here: the benches include it. */
#ifndef JETTPROF_TESTS_LIB_CLOCK_H
#define JETTPROF_TESTS_LIB_CLOCK_H

#include <time.h>

static inline double tl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
