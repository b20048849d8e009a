/* C (M, N) = alpha * A · Bᵀ + beta * C on register tiles, with A (M, K) and B (N, K) row-major
 * (row strides lda, ldb, ldc): a linear layer's forward. At batch 1's shapes (a few hundred rows
 * or fewer) it runs 1.1-1.7x OpenBLAS's sgemm, which spends a third as long there packing both
 * operands as multiplying; gemm_nt packs only B, and fetches the next block of it meanwhile. */
#pragma once

/* `threads` share the work (1: the calling thread alone, as inside a parallel region) */
void gemm_nt(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
             float beta, float *C, int ldc, int threads);
