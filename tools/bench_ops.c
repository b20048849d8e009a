/* Micro-benchmark: GFLOP/s of the linear op (forward, backward, both) at ViT shapes next to a bare
 * cblas_sgemm of the same size, measured in the same run (ratios, not wall times, are what count). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/arena.h"
#include "core/tape.h"
#include "core/threads.h"
#include "ops/ops.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define REPS 15

static double median(double *t) {
    qsort(t, REPS, sizeof(double), cmp_double);
    return t[REPS / 2];
}

static void fill(float *p, long n, rng *r) {
    for (long i = 0; i < n; i++) p[i] = rng_normal(r) * 0.1f;
}

static void bench_linear(int M, int K, int N) {
    rng r;
    rng_seed(&r, 7, RNG_TEST);
    double flop = 2.0 * M * N * K;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K),
          *C = malloc(sizeof(float) * M * N);
    fill(A, (long)M * K, &r);
    fill(B, (long)N * K, &r);
    double t_gemm[REPS], t_fwd[REPS], t_bwd[REPS];
    /* the bare sgemm and the op alternate in one loop, so machine noise hits both alike */
    for (int rep = -1; rep < REPS; rep++) { /* rep -1 warms up */
        double tg = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        if (rep >= 0) t_gemm[rep] = now() - tg;
        tensor *x = TENSOR(M, K), *w = TENSOR(N, K), *b = TENSOR(N);
        fill(x->data, x->numel, &r);
        fill(w->data, w->numel, &r);
        fill(b->data, b->numel, &r);
        x->requires_grad = w->requires_grad = b->requires_grad = true;
        double t0 = now();
        tensor *y = op_linear(x, w, b);
        double t1 = now();
        fill(tensor_grad(y), y->numel, &r);
        tensor_grad(w), tensor_grad(b); /* parameter gradients exist before the step */
        double t2 = now();
        tape_run_backward();
        double t3 = now();
        if (rep >= 0) t_fwd[rep] = t1 - t0, t_bwd[rep] = t3 - t2;
        tape_reset();
        arena_reset(&vitc_arena);
    }
    double g = flop / median(t_gemm) * 1e-9, f = flop / median(t_fwd) * 1e-9,
           b = 2 * flop / median(t_bwd) * 1e-9;
    double both = 3 * flop / (median(t_fwd) + median(t_bwd)) * 1e-9;
    printf("linear %5dx%4d->%4d   sgemm %6.1f   fwd %6.1f (%3.0f%%)   bwd %6.1f (%3.0f%%)   "
           "fwd+bwd %6.1f GFLOP/s (%3.0f%% of sgemm)\n",
           M, K, N, g, f, 100 * f / g, b, 100 * b / g, both, 100 * both / g);
    free(A), free(B), free(C);
}

int main(void) {
    printf("threads %d, OpenBLAS %s\n", vitc_threads(), openblas_get_config());
    bench_linear(6304, 192, 576);
    bench_linear(6304, 768, 192);
    bench_linear(6304, 192, 768);
    arena_free(&vitc_arena);
    return 0;
}
