#include "threads.h"

#include <cblas.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __SSE2__
#include <xmmintrin.h>
#endif

#include "check.h"

/* Denormal floats (below 1.2e-38) cost x86 a microcode assist per operation, ~100 times the normal
 * speed: softmax over Swin's shifted windows (mask -100) normalises half of each row into them, and
 * the GEMMs reading those probabilities ran 13 times slower. As TensorFlow and oneDNN do, results
 * below the normal range become zero (FTZ) and such inputs read as zero (DAZ). */
static void flush_denormals(void) {
#ifdef __SSE2__ /* every x86-64 processor: MXCSR's FTZ (0x8000) and DAZ (0x0040) bits */
    _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

void vitc_set_threads(int n) {
    CHECK(n <= VITC_MAX_THREADS, "%d threads: at most %d", n, VITC_MAX_THREADS);
    CHECK(n > 0 || vitc_threads() <= VITC_MAX_THREADS, "OMP_NUM_THREADS=%s: at most %d threads",
          getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "(unset)", VITC_MAX_THREADS);
    flush_denormals(); /* threads created later inherit the main thread's mode */
#ifdef _OPENMP
    if (n > 0) omp_set_num_threads(n);
    /* one team: the kernels index their scratch by the thread's number in it, which nested teams
     * (OMP_NUM_THREADS=4,2, OMP_MAX_ACTIVE_LEVELS, OMP_NESTED) would repeat: a race, wrong results
     */
    omp_set_max_active_levels(1);
#pragma omp parallel
    flush_denormals(); /* the pool's threads that exist already */
#endif
    if (n > 0) openblas_set_num_threads(n);
}

int vitc_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int vitc_thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int vitc_team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

bool vitc_in_parallel(void) {
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return false;
#endif
}

bool vitc_items_in_parallel(int items) { return items >= 2 * vitc_threads(); }
