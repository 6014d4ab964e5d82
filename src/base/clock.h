/* clock.h — small timing helpers shared by the CLI, the server and the benchmarks: a monotonic
 * clock in seconds and an ascending sort of timing samples (for medians). */
#ifndef G4_CLOCK_H
#define G4_CLOCK_H

/* Seconds on CLOCK_MONOTONIC. */
double g4_now(void);
/* Sorts v[0..n) ascending. */
void g4_sort_doubles(double *v, int n);

#endif
