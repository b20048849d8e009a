/* CUDA versions of src/cpu/matmul.h on device pointers, same row-major semantics, through cuBLAS
 * (cublasSgemm, cublasSgemmStridedBatched) in fp32 without TF32. residual_linear_forward is not
 * here yet. Backward kernels accumulate (+=) into their outputs. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C (M, N) = alpha * op(A) op(B) + beta * C, row-major; op(A) is (M, K), op(B) is (K, N) */
void cuda_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
               const float *B, float beta, float *C);
/* the same with explicit leading dimensions (row strides) of A, B and C */
void cuda_gemm_strided(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* out (M, N) = x (M, K) · w (N, K)ᵀ + b (N) (b may be NULL) */
void cuda_linear_forward(float *out, const float *x, const float *w, const float *b, int M, int K,
                         int N);
/* dx (M, K) += dout · w; dw (N, K) += doutᵀ · x; db (N) += column sums of dout; any output NULL
 * is skipped */
void cuda_linear_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                          const float *w, int M, int K, int N);

/* sums (N) += the column sums of x (M, N) */
void cuda_add_column_sums(float *sums, const float *x, int64_t M, int N);

/* batch of C_i = alpha op(A_i) op(B_i), contiguous matrices */
void cuda_matmul_forward(float *c, const float *a, const float *b, int batch, int M, int N, int K,
                         bool trans_a, bool trans_b, float alpha);
/* da, db (shaped like a, b; NULL to skip) += gradients of matmul_forward given dc */
void cuda_matmul_backward(float *da, float *db, const float *dc, const float *a, const float *b,
                          int batch, int M, int N, int K, bool trans_a, bool trans_b, float alpha);

#ifdef __cplusplus
}
#endif
