/* Timings: monotonic wall-clock seconds, and the median of a run of them. */
#pragma once
#include <stdlib.h>
#include <time.h>

static inline double clock_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int clock_order(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the median of n timings (the upper of the middle two when n is even), t sorted in place */
static inline double median_seconds(double *t, int n) {
    qsort(t, (size_t)n, sizeof(double), clock_order);
    return t[n / 2];
}
