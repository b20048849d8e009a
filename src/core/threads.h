/* Thread control: OpenMP for our loops, OpenBLAS (its OpenMP build) for big GEMMs. */
#pragma once

void vitc_set_threads(int n); /* n <= 0: keep OMP_NUM_THREADS / the machine default */
int vitc_threads(void);
int vitc_thread_id(void); /* inside a parallel region: 0 .. vitc_threads() - 1 */
