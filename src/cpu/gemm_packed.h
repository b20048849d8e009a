/* C (M, N) = alpha * op(A) op(B) + beta * C, row-major, both operands packed into slivers for a
 * register tile of 6 rows by two vectors (docs/performance.md: where it replaces OpenBLAS) */
#pragma once
#include <stdbool.h>

/* `threads` share the work; not to be called inside a parallel region (its packing buffers come
 * from the scratch arena) */
void gemm_packed(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc, int threads);
/* whether `threads` each get a share of C: rows, or columns; else (few of both, a long inner
 * dimension) the product is better split along the inner dimension */
bool gemm_packed_shares(int M, int N, int threads);
