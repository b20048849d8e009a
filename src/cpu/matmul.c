#include "matmul.h"

#include <cblas.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/precision.h"
#include "../core/threads.h"
#include "bf16_store.h"
#include "gemm_bf16.h"
#include "gemm_nt.h"
#include "shape.h"
#include "simd.h"

static void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* OpenBLAS threads a GEMM by blocks of the output that every thread packs its operands for; when
 * each thread instead runs a single-threaded GEMM on its share of the rows, or of the inner
 * dimension, it packs only that share: 1.2-1.5x faster for tall products with few columns (Swin's
 * first stage, 50176 x 96 x 288, forward and weight gradient) and up to 1.15x for DeiT's; with
 * fewer than ~256 rows a thread OpenBLAS's split is faster, unless the inner dimension is long
 * (batch 1's late stages, 197 x 768 x 192: 1.1x split). */
#define ROWS_PER_THREAD_MIN 256
#define INNER_PER_THREAD_MIN 384

/* gemm_nt wins by 1.1-1.7x up to ~1k rows (batch 1 after the first stage) and on narrow products up
 * to ~4k (the first stage, 3136 x 96 x 288); on larger ones OpenBLAS's blocking is faster (6304 x
 * 192 x 768, 1568 x 384 x 1152: 0.85-0.95x). With AVX2's tiles the same up to ~1k rows (1.05-1.25x,
 * 0.92 on 1568 x 384 x 1152), and narrow products win at any height (Swin's first stage in training,
 * 50176 x 288 x 96: 1.1-1.2x). */
static bool gemm_nt_wins(int M, int N, int K) {
    return M <= 1024 || (N <= 384 && K <= 384 && (VEC == 8 || M <= 4096));
}

static void gemm_split_rows(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta, float *C,
                            int ldc, int threads) {
#pragma omp parallel num_threads(threads)
    {
        int t = vitc_thread_id(), team = vitc_team_size(), r0 = (int)((int64_t)M * t / team),
            r1 = (int)((int64_t)M * (t + 1) / team);
        sgemm(trans_a, trans_b, r1 - r0, N, K, alpha, trans_a ? A + r0 : A + (size_t)r0 * lda, lda,
              B, ldb, beta, C + (size_t)r0 * ldc, ldc);
    }
}

/* thread 0 sums its share of the inner dimension into C, the others into partial products that are
 * then added to C */
static void gemm_split_inner(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb, float beta, float *C,
                             int ldc, int threads) {
    size_t mn = (size_t)M * N, n_partial = (threads - 1) * mn;
    float *partial = scratch_floats(n_partial);
#pragma omp parallel num_threads(threads)
    {
        int t = vitc_thread_id(), team = vitc_team_size(), k0 = (int)((int64_t)K * t / team),
            k1 = (int)((int64_t)K * (t + 1) / team);
        const float *a = trans_a ? A + (size_t)k0 * lda : A + k0;
        const float *b = trans_b ? B + k0 : B + (size_t)k0 * ldb;
        if (t == 0) sgemm(trans_a, trans_b, M, N, k1 - k0, alpha, a, lda, b, ldb, beta, C, ldc);
        else sgemm(trans_a, trans_b, M, N, k1 - k0, alpha, a, lda, b, ldb, 0.0f, partial + (t - 1) * mn, N);
#pragma omp barrier
#pragma omp for schedule(static)
        for (int i = 0; i < M; i++)
            for (int u = 1; u < team; u++) {
                const float *src = partial + (u - 1) * mn + (size_t)i * N;
                float *dst = C + (size_t)i * ldc;
                for (int j = 0; j < N; j++) dst[j] += src[j];
            }
    }
    scratch_done(partial, n_partial);
}

int gemm_threads(void) { return vitc_in_parallel() ? 1 : vitc_threads(); }

void gemm_strided(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    int threads = gemm_threads();
    if (vitc_precision() == PRECISION_BF16) {
        gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads);
        return;
    }
    if (!trans_a && trans_b && gemm_nt_wins(M, N, K)) {
        gemm_nt(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads);
        return;
    }
    if (threads > 1 && M >= ROWS_PER_THREAD_MIN * threads)
        gemm_split_rows(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads);
    else if (threads > 1 && K >= INNER_PER_THREAD_MIN * threads)
        gemm_split_inner(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads);
    else
        sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
          const float *B, float beta, float *C) {
    gemm_strided(trans_a, trans_b, M, N, K, alpha, A, trans_a ? M : K, B, trans_b ? K : N, beta, C,
                 N);
}

void linear_forward(float *out, const float *x, const float *w, const float *b, int M, int K, int N) {
    if (b && vitc_precision() == PRECISION_BF16) { /* the bias in the kernel's epilogue */
        gemm_bf16_bias(false, true, M, N, K, 1.0f, x, K, w, K, b, out, N, gemm_threads());
        return;
    }
    if (b) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < M; i++) memcpy(out + (size_t)i * N, b, (size_t)N * sizeof(float));
    }
    gemm(false, true, M, N, K, 1.0f, x, w, b ? 1.0f : 0.0f, out);
}

void linear_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, int M, int K, int N) {
    if (dx) gemm(false, false, M, K, N, 1.0f, dout, w, 1.0f, dx);
    if (dw) gemm(true, false, N, K, M, 1.0f, dout, x, 1.0f, dw);
    if (db) add_column_sums(db, dout, M, N);
}

void linear_forward_bf16_input(float *out, const uint16_t *x, const float *w, const float *b, int M,
                               int K, int N) {
    gemm_bf16_a16_bias(true, M, N, K, x, K, w, K, b, out, N, gemm_threads());
}

void linear_backward_bf16_input(float *dx, float *dw, float *db, const float *dout,
                                const uint16_t *x, const float *w, int M, int K, int N) {
    if (dx) gemm(false, false, M, K, N, 1.0f, dout, w, 1.0f, dx);
    if (dw) gemm_bf16_b16(true, N, K, M, 1.0f, dout, N, x, K, 1.0f, dw, K, gemm_threads());
    if (db) add_column_sums(db, dout, M, N);
}

/* Fixed row chunks summed in order: the same sums whatever the thread count, and every thread busy
 * (column blocks, the earlier split, left one of two threads idle a third of the time at 192 columns) */
#define COLUMN_SUM_CHUNKS 32

/* add_column_sums of x or, where x is NULL, of x16's values widened */
static void column_sums(float *sums, const float *x, const uint16_t *x16, int64_t M, int N) {
    size_t n_part = (size_t)COLUMN_SUM_CHUNKS * N;
    float *part = scratch_floats(n_part);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < COLUMN_SUM_CHUNKS; c++) {
        float *p = part + (size_t)c * N;
        for (int j = 0; j < N; j++) p[j] = 0;
        for (int64_t i = M * c / COLUMN_SUM_CHUNKS; i < M * (c + 1) / COLUMN_SUM_CHUNKS; i++) {
            if (x16)
                for (int j = 0; j < N; j++) p[j] += bf16_to_float(x16[i * N + j]);
            else
                for (int j = 0; j < N; j++) p[j] += x[i * N + j];
        }
    }
    for (int c = 0; c < COLUMN_SUM_CHUNKS; c++)
        for (int j = 0; j < N; j++) sums[j] += part[(size_t)c * N + j];
    scratch_done(part, n_part);
}

void add_column_sums(float *sums, const float *x, int64_t M, int N) {
    column_sums(sums, x, NULL, M, N);
}

/* The weight gradient's product turns its narrower operand while packing: with more outputs than
 * inputs (an MLP's fc1), xᵀ dout gives the gradient turned, and dout's rows are read as stored. */
void linear_backward_bf16_grad(float *dx, float *dw, float *db, const uint16_t *dout,
                               const float *x, const float *w, int M, int K, int N) {
    if (dx) gemm_bf16_a16(false, false, M, K, N, 1.0f, dout, N, w, K, 0.0f, dx, K, gemm_threads());
    if (dw && N > K) {
        float *dwt = scratch_floats((size_t)K * N);
        gemm_bf16_b16(true, K, N, M, 1.0f, x, K, dout, N, 0.0f, dwt, N, gemm_threads());
        permute_backward(dw, dwt, 2, (int[]){N, K}, (int[]){1, 0}); /* dw += dwtᵀ */
        scratch_done(dwt, (size_t)K * N);
    } else if (dw) {
        gemm_bf16_a16(true, false, N, K, M, 1.0f, dout, N, x, K, 1.0f, dw, K, gemm_threads());
    }
    if (db) column_sums(db, NULL, dout, M, N);
}

void linear_chunks_backward_bf16_grad(float *dx, float dx_beta, float *dw, float *db,
                                      const uint16_t *const *dout, int chunks, const float *x,
                                      const uint16_t *x16, const float *w, int M, int K, int N) {
    if (N % 32) { /* blocks gemm_bf16_a16_blocks cannot read: each chunk widened */
        if (dx && dx_beta == 0.0f) memset(dx, 0, sizeof(float) * M * K);
        float *g = scratch_floats((size_t)M * N);
        for (int i = 0; i < chunks; i++) {
            bf16_load(g, dout[i], (int64_t)M * N);
            float *dwi = dw ? dw + (size_t)i * N * K : NULL, *dbi = db ? db + i * N : NULL;
            const float *wi = w + (size_t)i * N * K;
            if (x16) linear_backward_bf16_input(dx, dwi, dbi, g, x16, wi, M, K, N);
            else linear_backward(dx, dwi, dbi, g, x, wi, M, K, N);
        }
        scratch_done(g, (size_t)M * N);
        return;
    }
    int threads = gemm_threads();
    if (dx)
        gemm_bf16_a16_blocks(false, M, K, chunks * N, dout, N, w, NULL, K, dx_beta, dx, K, threads);
    if (dw) gemm_bf16_a16_blocks(true, chunks * N, K, M, dout, N, x, x16, K, 1.0f, dw, K, threads);
    if (db)
        for (int i = 0; i < chunks; i++) column_sums(db + i * N, NULL, dout[i], M, N);
}

void residual_linear_forward(float *out, const float *res, const float *act, const float *w,
                             const float *b, const float *keep, int B, int M, int K, int N) {
    int rows = M / B;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        float k = keep ? keep[i / rows] : 1.0f;
        const float *src = res ? res + (size_t)i * N : NULL;
        float *dst = out + (size_t)i * N;
        if (src && b)
            for (int j = 0; j < N; j++) dst[j] = src[j] + k * b[j];
        else if (src && src != dst)
            memcpy(dst, src, (size_t)N * sizeof(float));
        else if (!src && b)
            for (int j = 0; j < N; j++) dst[j] = k * b[j];
        else if (!src)
            memset(dst, 0, (size_t)N * sizeof(float));
    }
    if (!keep) {
        gemm(false, true, M, N, K, 1.0f, act, w, 1.0f, out);
        return;
    }
    /* dropped samples keep the bare residual; a run of kept samples with one factor (drop path
     * gives them all 1 / (1 - p)) is one product: a product a sample ran Swin's 49-row windows at a
     * fraction of the speed */
    for (int s = 0, end; s < B; s = end) {
        for (end = s + 1; end < B && keep[end] == keep[s];) end++;
        if (keep[s] != 0)
            gemm(false, true, (end - s) * rows, N, K, keep[s], act + (size_t)s * rows * K, w,
                 1.0f, out + (size_t)s * rows * N);
    }
}

/* Many small products run one per thread (OpenBLAS then stays single-threaded inside the OpenMP
 * region); a few large ones run one after another with OpenBLAS threading each. */
static bool batch_in_parallel(int batch, int M, int N, int K) {
    double flops = 2.0 * M * N * K;
    return batch >= 2 * vitc_threads() || flops < 4e6;
}

void matmul_forward(float *c, const float *a, const float *b, int batch, int M, int N, int K,
                    bool trans_a, bool trans_b, float alpha) {
    size_t sa = (size_t)M * K, sb = (size_t)K * N, sc = (size_t)M * N;
    if (batch_in_parallel(batch, M, N, K)) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < batch; i++)
            gemm(trans_a, trans_b, M, N, K, alpha, a + i * sa, b + i * sb, 0.0f, c + i * sc);
    } else {
        for (int i = 0; i < batch; i++)
            gemm(trans_a, trans_b, M, N, K, alpha, a + i * sa, b + i * sb, 0.0f, c + i * sc);
    }
}

/* dA and dB of one product C = alpha op(A) op(B), written as GEMMs on the stored layouts:
 *   op(A) = A:  dA += alpha dC op(B)ᵀ          op(A) = Aᵀ: dA += alpha op(B) dCᵀ
 *   op(B) = B:  dB += alpha op(A)ᵀ dC          op(B) = Bᵀ: dB += alpha dCᵀ op(A) */
static void matmul_backward_one(float *da, float *db, const float *dc, const float *a,
                                const float *b, int M, int N, int K, bool ta, bool tb, float alpha) {
    if (da) {
        if (!ta) gemm(false, !tb, M, K, N, alpha, dc, b, 1.0f, da);
        else gemm(tb, true, K, M, N, alpha, b, dc, 1.0f, da);
    }
    if (db) {
        if (!tb) gemm(!ta, false, K, N, M, alpha, a, dc, 1.0f, db);
        else gemm(true, ta, N, K, M, alpha, dc, a, 1.0f, db);
    }
}

void matmul_backward(float *da, float *db, const float *dc, const float *a, const float *b,
                     int batch, int M, int N, int K, bool trans_a, bool trans_b, float alpha) {
    size_t sa = (size_t)M * K, sb = (size_t)K * N, sc = (size_t)M * N;
    if (batch_in_parallel(batch, M, N, K)) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < batch; i++)
            matmul_backward_one(da ? da + i * sa : NULL, db ? db + i * sb : NULL, dc + i * sc,
                                a + i * sa, b + i * sb, M, N, K, trans_a, trans_b, alpha);
    } else {
        for (int i = 0; i < batch; i++)
            matmul_backward_one(da ? da + i * sa : NULL, db ? db + i * sb : NULL, dc + i * sc,
                                a + i * sa, b + i * sb, M, N, K, trans_a, trans_b, alpha);
    }
}
