/* clock.c — the monotonic clock and sample sorting of clock.h. */
#include "base/clock.h"

#include <stdlib.h>
#include <time.h>

double g4_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void g4_sort_doubles(double *v, int n) { qsort(v, (size_t)n, sizeof(double), cmp_double); }
