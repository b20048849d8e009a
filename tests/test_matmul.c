/* linear and batched matmul: finite differences and a naive reference; gemm_strided's thread splits
 * and gemm_nt's tiles. */
#include <math.h>
#include <stdlib.h>

#include "../src/cpu/gemm_nt.h"
#include "../src/cpu/matmul.h"
#include "../src/ops/ops.h"
#include "gradcheck.h"

static tensor *linear_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_linear(in[0], in[1], in[2]);
}
static tensor *linear_nobias_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_linear(in[0], in[1], NULL);
}

/* x made by another op and read by two products (CSwin's stripes and their q and k rows): the
 * first backward writes its gradient whole (the tests' arena hands that memory out as NaN), the
 * second adds */
static tensor *linear_rows_of_product_fn(tensor **in, const void *ctx) {
    (void)ctx;
    tensor *x = op_scale(in[0], 0.9f);
    return op_add(op_linear_rows(x, in[1], in[2], 0, 4), op_linear_rows(x, in[1], in[2], 4, 4));
}

TEST(grad_linear) {
    rng r;
    rng_seed(&r, 2, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7), *w = LEAF(&r, 0.5f, 11, 7), *b = LEAF(&r, 1, 11);
    EXPECT(GRADCHECK(linear_fn, NULL, x, w, b), "linear with bias");
    EXPECT(GRADCHECK(linear_nobias_fn, NULL, x, w), "linear without bias");
    EXPECT(GRADCHECK(linear_rows_of_product_fn, NULL, x, w, b), "two row ranges of a made input");
}

typedef struct {
    bool ta, tb;
    float alpha;
} matmul_ctx;

static tensor *matmul_fn(tensor **in, const void *ctx) {
    const matmul_ctx *c = ctx;
    return op_matmul(in[0], in[1], c->ta, c->tb, c->alpha);
}

TEST(grad_matmul_all_transposes) {
    rng r;
    rng_seed(&r, 3, RNG_TEST);
    const int B = 3, M = 5, K = 7, N = 9;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            tensor *a = ta ? LEAF(&r, 1, 2, B, K, M) : LEAF(&r, 1, 2, B, M, K);
            tensor *b = tb ? LEAF(&r, 1, 2, B, N, K) : LEAF(&r, 1, 2, B, K, N);
            matmul_ctx c = {ta, tb, 0.7f};
            EXPECT(GRADCHECK(matmul_fn, &c, a, b), "trans_a %d trans_b %d", ta, tb);
        }
}

/* naive reference for C = alpha op(A) op(B) */
static void matmul_naive(float *c, const float *a, const float *b, int M, int N, int K, bool ta,
                         bool tb, float alpha) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)(ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
            c[i * N + j] = (float)(alpha * s);
        }
}

TEST(matmul_matches_naive_reference) {
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    const int B = 6, M = 13, K = 17, N = 11;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            tensor *a = ta ? RANDN(&r, 1, B, K, M) : RANDN(&r, 1, B, M, K);
            tensor *b = tb ? RANDN(&r, 1, B, N, K) : RANDN(&r, 1, B, K, N);
            tensor *c = op_matmul(a, b, ta, tb, 1.5f);
            tensor *ref = TENSOR(B, M, N);
            for (int i = 0; i < B; i++)
                matmul_naive(ref->data + i * M * N, a->data + i * M * K, b->data + i * K * N, M, N, K,
                             ta, tb, 1.5f);
            double err = max_rel_diff(c->data, ref->data, c->numel);
            EXPECT(err < 1e-5, "ta %d tb %d: rel diff %g", ta, tb, err);
        }
}

/* gemm_strided's own thread splits (rows from 256 a thread, the inner dimension from 384) against
 * the naive product, on strided operands and accumulating into C (beta 1). A·Bᵀ goes to gemm_nt up
 * to 1024 rows, or when narrow up to 4096 (AVX-512) or at any height (8-float vectors): the wide case
 * keeps its OpenBLAS row split covered in every build. */
TEST(gemm_thread_splits_match_naive_reference) {
    rng r;
    rng_seed(&r, 6, RNG_TEST);
    struct { int M, N, K; const char *what; } cases[] = {
        {1100, 7, 9, "rows split"}, {5, 6, 1700, "inner split"}, {9, 8, 7, "OpenBLAS threads"},
        {1100, 400, 9, "rows split, wide"}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int M = cases[c].M, N = cases[c].N, K = cases[c].K, pad = 3;
                int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
                tensor *a = RANDN(&r, 1, ta ? K : M, lda), *b = RANDN(&r, 1, tb ? N : K, ldb);
                tensor *cm = RANDN(&r, 1, M, ldc);
                float *dense_a = malloc(sizeof(float) * M * K), *dense_b = malloc(sizeof(float) * K * N);
                float *ref = malloc(sizeof(float) * M * N);
                for (int i = 0; i < (ta ? K : M); i++)
                    for (int j = 0; j < (ta ? M : K); j++) dense_a[i * (ta ? M : K) + j] = a->data[i * lda + j];
                for (int i = 0; i < (tb ? N : K); i++)
                    for (int j = 0; j < (tb ? K : N); j++) dense_b[i * (tb ? K : N) + j] = b->data[i * ldb + j];
                matmul_naive(ref, dense_a, dense_b, M, N, K, ta, tb, 0.5f);
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) ref[i * N + j] += cm->data[i * ldc + j];
                float pad_before = cm->data[N];
                gemm_strided(ta, tb, M, N, K, 0.5f, a->data, lda, b->data, ldb, 1.0f, cm->data, ldc);
                double worst = 0;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++)
                        worst = max_error(worst, fabs(cm->data[i * ldc + j] - ref[i * N + j]) /
                                                     (1 + fabs(ref[i * N + j])));
                free(dense_a), free(dense_b), free(ref);
                EXPECT(worst < 1e-4, "%s, ta %d tb %d: rel diff %g", cases[c].what, ta, tb, worst);
                EXPECT(cm->data[N] == pad_before, "%s: wrote past the row into C's padding", cases[c].what);
            }
}

/* gemm_nt's register tiles against the naive product: row and panel splits, several row blocks,
 * blocks of the inner dimension, every short tile (rows % 6, columns % 32, inner % 16), strided
 * operands, and the BLAS contract on beta (0: C is not read, so NaN there must not leak; an empty
 * inner dimension still scales C) */
TEST(gemm_nt_tiles_match_naive_reference) {
    rng r;
    rng_seed(&r, 8, RNG_TEST);
    struct { int M, N, K, threads; float alpha, beta; } cases[] = {
        {1100, 70, 41, 2, 1.0f, 1.0f},  {49, 300, 530, 2, 0.5f, 0.0f}, {7, 33, 16, 1, 1.0f, 0.0f},
        {197, 64, 600, 2, 2.0f, 0.25f}, {5, 1, 3, 1, 1.0f, 1.0f},      {600, 31, 17, 1, 1.0f, 0.0f},
        {3, 5, 0, 2, 1.0f, 0.5f}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int M = cases[c].M, N = cases[c].N, K = cases[c].K, pad = 5;
        int lda = K + pad, ldb = K + pad, ldc = N + pad;
        float alpha = cases[c].alpha, beta = cases[c].beta;
        tensor *a = RANDN(&r, 1, M, lda), *b = RANDN(&r, 1, N, ldb), *cm = RANDN(&r, 1, M, ldc);
        float *ref = malloc(sizeof(float) * M * N);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)a->data[i * lda + k] * b->data[j * ldb + k];
                ref[i * N + j] = (float)(alpha * s + (beta == 0.0f ? 0.0 : beta * cm->data[i * ldc + j]));
                if (beta == 0.0f) cm->data[i * ldc + j] = NAN;
            }
        float pad_before = cm->data[N];
        gemm_nt(M, N, K, alpha, a->data, lda, b->data, ldb, beta, cm->data, ldc, cases[c].threads);
        double worst = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double d = fabs(cm->data[i * ldc + j] - ref[i * N + j]) / (1 + fabs(ref[i * N + j]));
                worst = max_error(worst, d);
            }
        free(ref);
        EXPECT(worst < 1e-4, "%d x %d x %d, %d threads, alpha %g beta %g: rel diff %g", M, N, K,
               cases[c].threads, alpha, beta, worst);
        EXPECT(cm->data[N] == pad_before, "%d x %d x %d: wrote past the row into C's padding", M, N, K);
    }
}

TEST(linear_matches_naive_reference) {
    rng r;
    rng_seed(&r, 5, RNG_TEST);
    tensor *x = RANDN(&r, 1, 37, 19), *w = RANDN(&r, 1, 23, 19), *b = RANDN(&r, 1, 23);
    tensor *y = op_linear(x, w, b);
    tensor *ref = TENSOR(37, 23);
    matmul_naive(ref->data, x->data, w->data, 37, 23, 19, false, true, 1.0f);
    for (int i = 0; i < 37; i++)
        for (int j = 0; j < 23; j++) ref->data[i * 23 + j] += b->data[j];
    double err = max_rel_diff(y->data, ref->data, y->numel);
    EXPECT(err < 1e-5, "rel diff %g", err);
}

/* the chunks of op_linear_chunks that *ctx's bits pick, side by side (a chunk left out gets no
 * gradient) */
static tensor *linear_chunks_fn(tensor **in, const void *ctx) {
    int picked = *(const int *)ctx, n = 0;
    tensor *chunks[3], *kept[3];
    op_linear_chunks(in[0], in[1], in[2], 3, chunks);
    for (int i = 0; i < 3; i++)
        if (picked >> i & 1) kept[n++] = chunks[i];
    return op_concat(n, kept, 2);
}

TEST(linear_chunks_are_slices_of_linear_and_grad) {
    rng r;
    rng_seed(&r, 7, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7), *w = LEAF(&r, 0.5f, 12, 7), *b = LEAF(&r, 1, 12);
    tensor *chunks[3], *full = op_linear(x, w, b);
    op_linear_chunks(x, w, b, 3, chunks);
    double worst = 0;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 15; i++)
            for (int j = 0; j < 4; j++)
                worst = max_error(worst, fabs(chunks[c]->data[i * 4 + j] -
                                              full->data[i * 12 + 4 * c + j]));
    EXPECT(worst < 1e-6, "the chunks differ from the full output by %g", worst);
    int all = 7, outer = 5; /* every chunk; the first and the last */
    EXPECT(GRADCHECK(linear_chunks_fn, &all, x, w, b), "three chunks");
    EXPECT(GRADCHECK(linear_chunks_fn, &outer, x, w, b), "the middle chunk unused");
    EXPECT_ERROR(op_linear_chunks(x, w, b, 5, chunks), "linear: 12 outputs do not split into 5 chunks (1 to 6)");
    tensor *many[12];
    EXPECT_ERROR(op_linear_chunks(x, w, b, 12, many), "linear: 12 outputs do not split into 12 chunks (1 to 6)");
}

/* CSwin's second branch: q's, k's and v's rows 2..4 of each block of 6 (rows 2-3, 8-9, 14-15 of
 * 18), side by side */
static tensor *strided_chunks_fn(tensor **in, const void *ctx) {
    (void)ctx;
    tensor *chunks[3];
    op_linear_strided_chunks(in[0], in[1], in[2], 3, 2, 2, 6, chunks);
    return op_concat(3, chunks, 2);
}

TEST(linear_strided_chunks_are_rows_of_linear_and_grad) {
    rng r;
    rng_seed(&r, 8, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7), *w = LEAF(&r, 0.5f, 18, 7), *b = LEAF(&r, 1, 18);
    tensor *side = strided_chunks_fn((tensor *[]){x, w, b}, NULL), *full = op_linear(x, w, b);
    double worst = 0;
    for (int i = 0; i < 15; i++)
        for (int c = 0; c < 3; c++)
            for (int j = 0; j < 2; j++)
                worst = max_error(worst, fabs(side->data[i * 6 + 2 * c + j] -
                                              full->data[i * 18 + 6 * c + 2 + j]));
    EXPECT(worst < 1e-6, "the chunks differ from the full output's rows by %g", worst);
    EXPECT(GRADCHECK(strided_chunks_fn, NULL, x, w, b), "three chunks 6 rows apart (the rows between get no gradient)");
    tensor *chunks[3];
    EXPECT_ERROR(op_linear_strided_chunks(x, w, b, 3, 2, 5, 6, chunks),
                 "linear: 3 chunks of 2 rows from row 5, 6 apart, do not fit weight (18, 7)");
    EXPECT_ERROR(op_linear_strided_chunks(x, w, b, 3, 4, 0, 3, chunks),
                 "linear: 3 chunks of 4 rows from row 0, 3 apart, do not fit weight (18, 7)");
}

static tensor *linear_rows_fn(tensor **in, const void *ctx) {
    const int *range = ctx;
    return op_linear_rows(in[0], in[1], in[2], range[0], range[1]);
}

TEST(linear_rows_is_a_slice_of_linear_and_grad) {
    rng r;
    rng_seed(&r, 6, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7), *w = LEAF(&r, 0.5f, 12, 7), *b = LEAF(&r, 1, 12);
    int range[2] = {4, 5};
    tensor *part = linear_rows_fn((tensor *[]){x, w, b}, range), *full = op_linear(x, w, b);
    double worst = 0;
    for (int i = 0; i < 15; i++)
        for (int j = 0; j < 5; j++)
            worst = max_error(worst, fabs(part->data[i * 5 + j] - full->data[i * 12 + 4 + j]));
    EXPECT(worst < 1e-6, "rows 4..9 differ from the full output by %g", worst);
    EXPECT(GRADCHECK(linear_rows_fn, range, x, w, b), "linear rows 4..9 (the others get no gradient)");
    EXPECT_ERROR(op_linear_rows(x, w, b, 8, 5), "output rows 8..13 outside weight (12, 7)");
}
