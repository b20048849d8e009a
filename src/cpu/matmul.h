/* GEMM kernels on raw row-major pointers, through OpenBLAS cblas_sgemm or, for a linear layer's
 * forward at small shapes, gemm_nt's register tiles; under --precision bf16 (core/precision.h)
 * every one of them through gemm_bf16. Backward kernels accumulate (+=) into their outputs. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

/* the threads of a product: all, or only the calling one inside a parallel region */
int gemm_threads(void);

/* C (M, N) = alpha * op(A) op(B) + beta * C, row-major; op(A) is (M, K), op(B) is (K, N) */
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
          const float *B, float beta, float *C);
/* the same with explicit leading dimensions (row strides) of A, B and C */
void gemm_strided(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* out (M, N) = x (M, K) · w (N, K)ᵀ + b (N) (b may be NULL) */
void linear_forward(float *out, const float *x, const float *w, const float *b, int M, int K, int N);
/* dx (M, K) += dout · w; dw (N, K) += doutᵀ · x; db (N) += column sums of dout; any output NULL
 * is skipped */
void linear_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, int M, int K, int N);
/* the same two with x kept in bf16 (tensor_new_bf16; under --precision bf16 only), its values
 * read as stored: the sums linear_forward and linear_backward make from the same values as floats */
void linear_forward_bf16_input(float *out, const uint16_t *x, const float *w, const float *b, int M,
                               int K, int N);
void linear_backward_bf16_input(float *dx, float *dw, float *db, const float *dout,
                                const uint16_t *x, const float *w, int M, int K, int N);
/* linear_backward from an output gradient kept in bf16 (the MLP's hidden layer's, whose producer
 * rounded it: mlp_hidden_backward_bf16), read as stored: dx = dout · w is written, not added to;
 * dw and db are added to as in linear_backward, db the fp32 sums of the bf16 values in
 * add_column_sums' order. The products' bits are those of linear_backward given dout widened. */
void linear_backward_bf16_grad(float *dx, float *dw, float *db, const uint16_t *dout,
                               const float *x, const float *w, int M, int K, int N);
/* linear_backward for `chunks` layers side by side (w: chunks·N rows; dw, db likewise) from each
 * one's output gradient kept in bf16 (dout[i] (M, N): attention's gradients of q, k and v), the
 * input x in fp32 or bf16 (x16; the other NULL): dx = dx_beta dx + the sum over the chunks (dx_beta
 * 0: dx's values are not read), dw and db are added to; dx and dw each by one product over all
 * chunks */
void linear_chunks_backward_bf16_grad(float *dx, float dx_beta, float *dw, float *db,
                                      const uint16_t *const *dout, int chunks, const float *x,
                                      const uint16_t *x16, const float *w, int M, int K, int N);

/* sums (N) += the column sums of x (M, N) */
void add_column_sums(float *sums, const float *x, int64_t M, int N);

/* out (M, N) = res + keep_s (act · wᵀ + b) with keep_s the drop-path factor of the sample (of B,
 * M/B rows each) the row belongs to (keep NULL: all 1); res (zero) and b may be NULL, res may be out */
void residual_linear_forward(float *out, const float *res, const float *act, const float *w,
                             const float *b, const float *keep, int B, int M, int K, int N);

/* batch of C_i = alpha op(A_i) op(B_i), contiguous matrices */
void matmul_forward(float *c, const float *a, const float *b, int batch, int M, int N, int K,
                    bool trans_a, bool trans_b, float alpha);
/* da, db (shaped like a, b; NULL to skip) += gradients of matmul_forward given dc */
void matmul_backward(float *da, float *db, const float *dc, const float *a, const float *b,
                     int batch, int M, int N, int K, bool trans_a, bool trans_b, float alpha);
