/* CUDA versions of src/cpu/matmul.h on device pointers, same row-major semantics, through cuBLAS in
 * the precision of core/precision.h: fp32 (cublasSgemm, no TF32), tf32 or bf16 (cublasGemmEx; bf16
 * operands are rounded into scratch of the data arena). Backward kernels accumulate (+=) into their
 * outputs. */
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

/* batch of C_i = alpha op(A_i) op(B_i) + beta C_i with row strides and matrix i at A + i sa, B + i
 * sb, C + i sc (a stride 0 shares one matrix): the product under every kernel here, for the other
 * families' batched products */
void cuda_gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                       int lda, long long sa, const float *B, int ldb, long long sb, float beta,
                       float *C, int ldc, long long sc, int batch);

/* out (M, N) = x (M, K) · w (N, K)ᵀ + b (N) (b may be NULL) */
void cuda_linear_forward(float *out, const float *x, const float *w, const float *b, int M, int K,
                         int N);
/* dx (M, K) += dout · w; dw (N, K) += doutᵀ · x; db (N) += column sums of dout; any output NULL
 * is skipped */
void cuda_linear_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                          const float *w, int M, int K, int N);

/* the same two with x kept in bf16 (tensor_new_bf16), read as stored */
void cuda_linear_forward_bf16_input(float *out, const uint16_t *x, const float *w, const float *b,
                                    int M, int K, int N);
void cuda_linear_backward_bf16_input(float *dx, float *dw, float *db, const float *dout,
                                     const uint16_t *x, const float *w, int M, int K, int N);
/* as linear_backward_bf16_grad: dout kept in bf16, dx written */
void cuda_linear_backward_bf16_grad(float *dx, float *dw, float *db, const uint16_t *dout,
                                    const float *x, const float *w, int M, int K, int N);
/* as linear_chunks_backward_bf16_grad: each chunk's own products */
void cuda_linear_chunks_backward_bf16_grad(float *dx, float dx_beta, float *dw, float *db,
                                           const uint16_t *const *dout, int chunks, const float *x,
                                           const uint16_t *x16, const float *w, int M, int K,
                                           int N);

/* sums (N) += the column sums of x (M, N) */
void cuda_add_column_sums(float *sums, const float *x, int64_t M, int N);

/* out (M, N) = res + keep_s (act · wᵀ + b) with keep_s the drop-path factor of the sample (of B,
 * M/B rows each) the row belongs to (keep NULL: all 1); res (zero) and b may be NULL, res may be
 * out. With keep, the product takes M * N floats of scratch from the data arena. */
void cuda_residual_linear_forward(float *out, const float *res, const float *act, const float *w,
                                  const float *b, const float *keep, int B, int M, int K, int N);

/* batch of C_i = alpha op(A_i) op(B_i), contiguous matrices */
void cuda_matmul_forward(float *c, const float *a, const float *b, int batch, int M, int N, int K,
                         bool trans_a, bool trans_b, float alpha);
/* da, db (shaped like a, b; NULL to skip) += gradients of matmul_forward given dc */
void cuda_matmul_backward(float *da, float *db, const float *dc, const float *a, const float *b,
                          int batch, int M, int N, int K, bool trans_a, bool trans_b, float alpha);

#ifdef __cplusplus
}
#endif
