#include "threads.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void vitc_set_threads(int n) {
    if (n <= 0) return;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    openblas_set_num_threads(n);
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

bool vitc_items_in_parallel(int items) { return items >= 2 * vitc_threads(); }
