/* Row-major products through column-major cuBLAS: a row-major (M, N) matrix with row stride ld is
 * the column-major (N, M) matrix with the same ld, its transpose. So C = op(A) op(B) is computed as
 * Cᵀ = op(B)ᵀ op(A)ᵀ: cuBLAS gets B before A, N before M, and the same transpose flags. */
#include "common.cuh"
#include "matmul.h"

/* batch of row-major C_i = alpha op(A_i) op(B_i) + beta C_i, matrix i at A + i sa, B + i sb, C + i
 * sc */
static void gemm_batched(bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                         int lda, long long sa, const float *B, int ldb, long long sb, float beta,
                         float *C, int ldc, long long sc, int batch) {
    if (M == 0 || N == 0 || batch == 0) return;
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch == 1)
        CUBLAS_CHECK(cublasSgemm(cuda_blas_handle(), op_b, op_a, N, M, K, &alpha, B, ldb, A, lda,
                                 &beta, C, ldc));
    else
        CUBLAS_CHECK(cublasSgemmStridedBatched(cuda_blas_handle(), op_b, op_a, N, M, K, &alpha, B,
                                               ldb, sb, A, lda, sa, &beta, C, ldc, sc, batch));
}

extern "C" void cuda_gemm_strided(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                  const float *A, int lda, const float *B, int ldb, float beta,
                                  float *C, int ldc) {
    gemm_batched(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

extern "C" void cuda_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                          const float *A, const float *B, float beta, float *C) {
    cuda_gemm_strided(trans_a, trans_b, M, N, K, alpha, A, trans_a ? M : K, B, trans_b ? K : N,
                      beta, C, N);
}

static __global__ void fill_rows_kernel(float *out, const float *b, int64_t M, int N) {
    GRID_STRIDE_LOOP(i, M * N) out[i] = b[i % N];
}

extern "C" void cuda_linear_forward(float *out, const float *x, const float *w, const float *b,
                                    int M, int K, int N) {
    /* as the CPU: the bias rows first, then the product added onto them */
    if (b && M && N) {
        fill_rows_kernel<<<flat_blocks((int64_t)M * N), FLAT_THREADS>>>(out, b, M, N);
        CUDA_LAUNCHED();
    }
    cuda_gemm(false, true, M, N, K, 1.0f, x, w, b ? 1.0f : 0.0f, out);
}

extern "C" void cuda_linear_backward(float *dx, float *dw, float *db, const float *dout,
                                     const float *x, const float *w, int M, int K, int N) {
    if (dx) cuda_gemm(false, false, M, K, N, 1.0f, dout, w, 1.0f, dx);
    if (dw) cuda_gemm(true, false, N, K, M, 1.0f, dout, x, 1.0f, dw);
    if (db) cuda_add_column_sums(db, dout, M, N);
}

/* one thread per column walks the rows in order (coalesced across the threads of a warp) */
static __global__ void add_column_sums_kernel(float *sums, const float *x, int64_t M, int N) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    float s = 0;
    for (int64_t i = 0; i < M; i++) s += x[i * N + j];
    sums[j] += s;
}

extern "C" void cuda_add_column_sums(float *sums, const float *x, int64_t M, int N) {
    if (N == 0) return;
    add_column_sums_kernel<<<(N + 127) / 128, 128>>>(sums, x, M, N);
    CUDA_LAUNCHED();
}

extern "C" void cuda_matmul_forward(float *c, const float *a, const float *b, int batch, int M,
                                    int N, int K, bool trans_a, bool trans_b, float alpha) {
    const long long sa = (long long)M * K, sb = (long long)K * N, sc = (long long)M * N;
    gemm_batched(trans_a, trans_b, M, N, K, alpha, a, trans_a ? M : K, sa, b, trans_b ? K : N, sb,
                 0.0f, c, N, sc, batch);
}

/* dA and dB of C = alpha op(A) op(B), written as products on the stored layouts (as the CPU):
 *   op(A) = A:  dA += alpha dC op(B)ᵀ          op(A) = Aᵀ: dA += alpha op(B) dCᵀ
 *   op(B) = B:  dB += alpha op(A)ᵀ dC          op(B) = Bᵀ: dB += alpha dCᵀ op(A)
 * Every operand below is a whole stored matrix, so its row stride follows from its flag. */
static void acc_batched(bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                        long long sa, const float *B, long long sb, float *C, long long sc,
                        int batch) {
    gemm_batched(ta, tb, M, N, K, alpha, A, ta ? M : K, sa, B, tb ? K : N, sb, 1.0f, C, N, sc,
                 batch);
}

extern "C" void cuda_matmul_backward(float *da, float *db, const float *dc, const float *a,
                                     const float *b, int batch, int M, int N, int K, bool trans_a,
                                     bool trans_b, float alpha) {
    const long long sa = (long long)M * K, sb = (long long)K * N, sc = (long long)M * N;
    if (da) {
        if (!trans_a)
            acc_batched(false, !trans_b, M, K, N, alpha, dc, sc, b, sb, da, sa, batch);
        else
            acc_batched(trans_b, true, K, M, N, alpha, b, sb, dc, sc, da, sa, batch);
    }
    if (db) {
        if (!trans_b)
            acc_batched(!trans_a, false, K, N, M, alpha, a, sa, dc, sc, db, sb, batch);
        else
            acc_batched(true, trans_a, N, K, M, alpha, dc, sc, a, sa, db, sb, batch);
    }
}
