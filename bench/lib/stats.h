/* bench/lib/stats.h: the median every bench reports, one definition for all of them, so a
 * figure means the same thing in every row of bench/RESULTS.md. Their clock is tests/lib's
 * tl_now_s (tests/lib/clock.h). */
#ifndef JETTPROF_BENCH_LIB_STATS_H
#define JETTPROF_BENCH_LIB_STATS_H

#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of the n values of v (sorted in place): for an even n, the mean of the two in
 * the middle. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
