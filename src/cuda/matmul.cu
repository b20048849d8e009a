/* Row-major products through column-major cuBLAS: a row-major (M, N) matrix with row stride ld is
 * the column-major (N, M) matrix with the same ld, its transpose. So C = op(A) op(B) is computed as
 * Cᵀ = op(B)ᵀ op(A)ᵀ: cuBLAS gets B before A, N before M, and the same transpose flags.
 * Every product reads vitc_precision() (core/precision.h): fp32 through cublasSgemm (no TF32),
 * tf32 through cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32, bf16 through cublasGemmEx on
 * operands rounded to bf16 by a kernel into scratch of the data arena (as the CPU's gemm takes its
 * partial sums there), summed in fp32. */
#include "column_sums.cuh"
#include "common.cuh"
#include "matmul.h"

extern "C" {
#include "../core/arena.h"
#include "../core/precision.h"
}

/* dst: batch matrices of rows x cols bf16, packed; src: the same with row stride ld, matrix i at
 * src + i stride */
static __global__ void to_bf16_kernel(uint16_t *dst, const float *src, int64_t rows, int cols,
                                      int ld, long long stride, int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        const int64_t c = i % cols, r = i / cols % rows, b = i / (cols * rows);
        dst[i] = bf16_bits(src[b * stride + r * ld + c]);
    }
}

/* an operand of one product: row-major, rows x cols with row stride ld, matrix i at element
 * p + i stride (fp32, or bf16: kept so, or once rounded) */
struct operand {
    const void *p;
    int rows, cols, ld;
    long long stride;
    bool bf16;
};

/* the bf16 copy of `op`'s `batch` matrices packed at dst (stride 0 stays one matrix): its new ld
 * and stride; an operand in bf16 already, itself */
static operand to_bf16(uint16_t *dst, operand op, int batch) {
    if (op.bf16) return op;
    const int mats = op.stride ? batch : 1;
    const int64_t n = (int64_t)mats * op.rows * op.cols;
    to_bf16_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dst, (const float *)op.p, op.rows, op.cols,
                                                     op.ld, op.stride, n);
    CUDA_LAUNCHED();
    return operand{dst, op.rows, op.cols, op.cols, op.stride ? (long long)op.rows * op.cols : 0, true};
}

/* the bf16 elements of to_bf16's copy */
static int64_t packed_size(operand op, int batch) {
    return op.bf16 ? 0 : (int64_t)(op.stride ? batch : 1) * op.rows * op.cols;
}

/* C_i (M, N) = alpha op(A_i) op(B_i) + beta C_i for the batch, bf16 operands and fp32 sums */
static void gemm_bf16(cublasOperation_t op_a, cublasOperation_t op_b, int M, int N, int K,
                      float alpha, operand a, operand b, float beta, float *C, int ldc,
                      long long sc, int batch) {
    /* A's copy first, B's from the next 64 bytes on */
    const int64_t na = (packed_size(a, batch) + 31) / 32 * 32, nb = packed_size(b, batch);
    const size_t floats = (size_t)(na + nb + 1) / 2;
    float *scratch = scratch_floats(floats);
    uint16_t *bits = (uint16_t *)scratch;
    a = to_bf16(bits, a, batch);
    b = to_bf16(bits + na, b, batch);
    if (batch == 1)
        CUBLAS_CHECK(cublasGemmEx(cuda_blas_handle(), op_b, op_a, N, M, K, &alpha, b.p, CUDA_R_16BF,
                                  b.ld, a.p, CUDA_R_16BF, a.ld, &beta, C, CUDA_R_32F, ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            cuda_blas_handle(), op_b, op_a, N, M, K, &alpha, b.p, CUDA_R_16BF, b.ld, b.stride, a.p,
            CUDA_R_16BF, a.ld, a.stride, &beta, C, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT));
    scratch_done(scratch, floats);
}

/* batch of row-major C_i = alpha op(A_i) op(B_i) + beta C_i, matrix i at A + i sa, B + i sb, C + i
 * sc, in the selected precision */
extern "C" void cuda_gemm_batched(bool ta, bool tb, int M, int N, int K, float alpha,
                                  const float *A, int lda, long long sa, const float *B, int ldb,
                                  long long sb, float beta, float *C, int ldc, long long sc,
                                  int batch) {
    if (M == 0 || N == 0 || batch == 0) return;
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const precision p = K > 0 ? vitc_precision() : PRECISION_FP32; /* K == 0: C = beta C */
    if (p == PRECISION_BF16) {
        gemm_bf16(op_a, op_b, M, N, K, alpha, operand{A, ta ? K : M, ta ? M : K, lda, sa, false},
                  operand{B, tb ? N : K, tb ? K : N, ldb, sb, false}, beta, C, ldc, sc, batch);
    } else if (p == PRECISION_TF32) {
        if (batch == 1)
            CUBLAS_CHECK(cublasGemmEx(cuda_blas_handle(), op_b, op_a, N, M, K, &alpha, B, CUDA_R_32F,
                                      ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
                                      CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        else
            CUBLAS_CHECK(cublasGemmStridedBatchedEx(
                cuda_blas_handle(), op_b, op_a, N, M, K, &alpha, B, CUDA_R_32F, ldb, sb, A,
                CUDA_R_32F, lda, sa, &beta, C, CUDA_R_32F, ldc, sc, batch,
                CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    } else if (batch == 1) {
        CUBLAS_CHECK(cublasSgemm(cuda_blas_handle(), op_b, op_a, N, M, K, &alpha, B, ldb, A, lda,
                                 &beta, C, ldc));
    } else {
        CUBLAS_CHECK(cublasSgemmStridedBatched(cuda_blas_handle(), op_b, op_a, N, M, K, &alpha, B,
                                               ldb, sb, A, lda, sa, &beta, C, ldc, sc, batch));
    }
}

extern "C" void cuda_gemm_strided(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                  const float *A, int lda, const float *B, int ldb, float beta,
                                  float *C, int ldc) {
    cuda_gemm_batched(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
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

extern "C" void cuda_linear_forward_bf16_input(float *out, const uint16_t *x, const float *w,
                                               const float *b, int M, int K, int N) {
    if (M == 0 || N == 0) return;
    if (b) {
        fill_rows_kernel<<<flat_blocks((int64_t)M * N), FLAT_THREADS>>>(out, b, M, N);
        CUDA_LAUNCHED();
    }
    gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, 1.0f, operand{x, M, K, K, 0, true},
              operand{w, N, K, K, 0, false}, b ? 1.0f : 0.0f, out, N, 0, 1);
}

extern "C" void cuda_linear_backward_bf16_input(float *dx, float *dw, float *db, const float *dout,
                                                const uint16_t *x, const float *w, int M, int K,
                                                int N) {
    if (dx) cuda_gemm(false, false, M, K, N, 1.0f, dout, w, 1.0f, dx);
    if (dw && M > 0)
        gemm_bf16(CUBLAS_OP_T, CUBLAS_OP_N, N, K, M, 1.0f, operand{dout, M, N, N, 0, false},
                  operand{x, M, K, K, 0, true}, 1.0f, dw, K, 0, 1);
    if (db) cuda_add_column_sums(db, dout, M, N);
}

/* x kept in bf16: the fp32 sums of its values' columns */
struct element_of_bf16 {
    const uint16_t *x;
    int N;
    __device__ void operator()(int64_t r, int j, float *s) const {
        s[0] += bf16_value(x[r * N + j]);
    }
};

extern "C" void cuda_linear_backward_bf16_grad(float *dx, float *dw, float *db,
                                               const uint16_t *dout, const float *x, const float *w,
                                               int M, int K, int N) {
    if (M == 0) return;
    const operand g{dout, M, N, N, 0, true};
    if (dx)
        gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_N, M, K, N, 1.0f, g, operand{w, N, K, K, 0, false}, 0.0f,
                  dx, K, 0, 1);
    if (dw)
        gemm_bf16(CUBLAS_OP_T, CUBLAS_OP_N, N, K, M, 1.0f, g, operand{x, M, K, K, 0, false}, 1.0f,
                  dw, K, 0, 1);
    if (db) add_column_sums_of<1>({{db}}, element_of_bf16{dout, N}, M, N);
}

extern "C" void cuda_linear_chunks_backward_bf16_grad(float *dx, float dx_beta, float *dw,
                                                      float *db, const uint16_t *const *dout,
                                                      int chunks, const float *x,
                                                      const uint16_t *x16, const float *w, int M,
                                                      int K, int N) {
    if (M == 0) return;
    const operand xs = x16 ? operand{x16, M, K, K, 0, true} : operand{x, M, K, K, 0, false};
    for (int i = 0; i < chunks; i++) { /* cuBLAS takes each chunk's rows at full speed */
        const operand g{dout[i], M, N, N, 0, true};
        const float *wi = w + (size_t)i * N * K;
        if (dx)
            gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_N, M, K, N, 1.0f, g, operand{wi, N, K, K, 0, false},
                      i == 0 ? dx_beta : 1.0f, dx, K, 0, 1);
        if (dw)
            gemm_bf16(CUBLAS_OP_T, CUBLAS_OP_N, N, K, M, 1.0f, g, xs, 1.0f, dw + (size_t)i * N * K,
                      K, 0, 1);
        if (db) add_column_sums_of<1>({{db + i * N}}, element_of_bf16{dout[i], N}, M, N);
    }
}

/* x itself: its column sums */
struct element_of {
    const float *x;
    int N;
    __device__ void operator()(int64_t r, int j, float *s) const { s[0] += x[r * N + j]; }
};

extern "C" void cuda_add_column_sums(float *sums, const float *x, int64_t M, int N) {
    add_column_sums_of<1>({{sums}}, element_of{x, N}, M, N);
}

/* out = res + k (b + branch) with k the row's sample factor (keep NULL: 1); res, b, branch may be
 * NULL (zero); res may be out */
static __global__ void residual_add_kernel(float *out, const float *res, const float *b,
                                           const float *branch, const float *keep, int64_t rows,
                                           int64_t M, int N) {
    GRID_STRIDE_LOOP(i, M * N) {
        const float k = keep ? keep[i / N / rows] : 1.0f;
        float v = res ? res[i] : 0.0f;
        if (b) v += k * b[i % N];
        if (branch) v += k * branch[i];
        out[i] = v;
    }
}

extern "C" void cuda_residual_linear_forward(float *out, const float *res, const float *act,
                                             const float *w, const float *b, const float *keep,
                                             int B, int M, int K, int N) {
    if (M == 0 || N == 0) return;
    const int rows = M / B;
    const unsigned blocks = flat_blocks((int64_t)M * N);
    if (!keep) { /* as the CPU: residual and bias first, the product added onto them */
        residual_add_kernel<<<blocks, FLAT_THREADS>>>(out, res, b, nullptr, nullptr, rows, M, N);
        CUDA_LAUNCHED();
        cuda_gemm(false, true, M, N, K, 1.0f, act, w, 1.0f, out);
        return;
    }
    /* the factors are device data the host cannot read to pick each sample's alpha: the product
     * goes to scratch and is scaled as it is added (a dropped sample adds 0 times it) */
    float *branch = scratch_floats((size_t)M * N);
    cuda_gemm(false, true, M, N, K, 1.0f, act, w, 0.0f, branch);
    residual_add_kernel<<<blocks, FLAT_THREADS>>>(out, res, b, branch, keep, rows, M, N);
    CUDA_LAUNCHED();
    scratch_done(branch, (size_t)M * N);
}

extern "C" void cuda_matmul_forward(float *c, const float *a, const float *b, int batch, int M,
                                    int N, int K, bool trans_a, bool trans_b, float alpha) {
    const long long sa = (long long)M * K, sb = (long long)K * N, sc = (long long)M * N;
    cuda_gemm_batched(trans_a, trans_b, M, N, K, alpha, a, trans_a ? M : K, sa, b, trans_b ? K : N,
                      sb, 0.0f, c, N, sc, batch);
}

/* dA and dB of C = alpha op(A) op(B), written as products on the stored layouts (as the CPU):
 *   op(A) = A:  dA += alpha dC op(B)ᵀ          op(A) = Aᵀ: dA += alpha op(B) dCᵀ
 *   op(B) = B:  dB += alpha op(A)ᵀ dC          op(B) = Bᵀ: dB += alpha dCᵀ op(A)
 * Every operand below is a whole stored matrix, so its row stride follows from its flag. */
static void acc_batched(bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                        long long sa, const float *B, long long sb, float *C, long long sc,
                        int batch) {
    cuda_gemm_batched(ta, tb, M, N, K, alpha, A, ta ? M : K, sa, B, tb ? K : N, sb, 1.0f, C, N, sc,
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
