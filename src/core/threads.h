/* Thread control: OpenMP for our loops, OpenBLAS (its OpenMP build) for big GEMMs. */
#pragma once
#include <stdbool.h>

/* the most threads vitc starts: libgomp fails to make a hundred thousand, and crashed on the way */
#define VITC_MAX_THREADS 1024

/* n <= 0: keep OMP_NUM_THREADS / the machine default; either at most VITC_MAX_THREADS (else an
 * error). Also flushes denormal floats to zero in every thread (see threads.c): call it before any
 * computation. */
void vitc_set_threads(int n);
int vitc_threads(void);
int vitc_thread_id(void); /* inside a parallel region: 0 .. vitc_threads() - 1 */
int vitc_team_size(void); /* inside a parallel region: its number of threads */
bool vitc_in_parallel(void); /* inside a parallel region (where OpenBLAS runs single-threaded) */
/* Enough independent items (attention's (sequence, head) pairs) to give each thread whole ones, each
 * with single-threaded GEMMs; fewer run one after another with OpenBLAS threading each GEMM. */
bool vitc_items_in_parallel(int items);
