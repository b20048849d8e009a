/* bf16 GEMM with fp32 sums on AVX512_BF16 (vdpbf16ps): C (M, N) = alpha op(A) op(B) + beta C,
 * row-major with op(A) (M, K) and op(B) (K, N) as in gemm_strided, the operands rounded to bf16 as
 * they are packed. A linear layer's three products: forward x·wᵀ (trans_a false, trans_b true),
 * dx = dy·w (false, false), dw = dyᵀ·x (true, false). Without the instruction every entry point
 * stops with cpu_bf16_error()'s message: there is no slow path.
 *
 * Summation order, the same whatever the thread count (tests/test_gemm_bf16.c repeats it bit for
 * bit): K is cut into blocks of GEMM_BF16_KC from 0. In a block, a fresh fp32 sum s = 0 takes the
 * pairs (k, k + 1), k even from the block's start, adding the product at k + 1 and then the one at
 * k, each addition rounded to nearest even, as vdpbf16ps does in each lane (a missing k + 1 at the
 * end of an odd K counts as 0 · 0; a product of two bf16 is exact in fp32; the instruction
 * flushes a subnormal sum to 0). The first block then sets c = fma(alpha, s, beta c), beta c
 * rounded first (c is not read when beta is 0: alpha s); each later one, c = fma(alpha, s, c).
 * A weight gradient's product (trans_a) with at most GEMM_BF16_PARTS_MAX_ROWS rows and K of at
 * least 2 GEMM_BF16_PART_MIN is cut into parts first: P of them, the most of 2, 4, ...
 * GEMM_BF16_PARTS_MAX with P GEMM_BF16_PART_MIN <= K, part p from block floor(blocks p / P) of the
 * ceil(K / KC) blocks. Part 0 sums into C as above; each later part sums likewise into its own c
 * from beta 0 (and no bias), and C then adds them in order, c = c + c_p, p = 1 .. P - 1. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bf16.h"

#define GEMM_BF16_KC 384 /* the blocks of the inner dimension (even) */
#define GEMM_BF16_PARTS_MAX 8
#define GEMM_BF16_PART_MIN (4 * GEMM_BF16_KC)
#define GEMM_BF16_PARTS_MAX_ROWS 1536

/* Where the processor has AMX-BF16 (cpu_has_amx_bf16), the products run on its tiles instead:
 * the same packing and blocks of K, and in each block the chunks of 32 of K (16 pairs) from its
 * start, each a tdpbf16ps whose sum of the chunk's products follows the hardware's own order (not
 * vdpbf16ps's, and not documented: tests hold it to bf16's error, the same bits whatever the thread
 * count and entry point). With alpha 1 the tiles start from C (beta 1, or a later block of K), from
 * the bias, or from 0, and the chunks add into them; with another alpha the blocks' sums meet C as
 * above. gemm_bf16_allow_amx(false) keeps the vdpbf16ps kernel (tests of the order above,
 * benchmarks of both); it returns the setting before. */
bool gemm_bf16_allow_amx(bool allow);
bool gemm_bf16_amx_here(void); /* built and on this processor, allowed or not */
bool gemm_bf16_uses_amx(void); /* allowed, built and on this processor */

/* packed operands, for one converted once and used by several products (weights within a step, or
 * a benchmark): A as M rows of K bf16 (one 0 more when K is odd: with K even, the plain row-major
 * bf16 matrix), B as panels of its columns */
size_t gemm_bf16_a_size(int M, int K); /* bf16 elements */
size_t gemm_bf16_b_size(int N, int K);
void gemm_bf16_pack_a(bf16 *ap, bool trans_a, int M, int K, const float *A, int lda, int threads);
void gemm_bf16_pack_b(bf16 *bp, bool trans_b, int N, int K, const float *B, int ldb, int threads);

/* `threads` share the work (1: the calling thread alone, as inside a parallel region); fp32
 * operands are rounded block by block, in L2, in 312 KiB of each thread's stack */
void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc, int threads);
/* with beta 0 and a bias (N floats) added to every row: C = alpha op(A) op(B) + bias, the bits of
 * C set to the bias's rows and beta 1 (c = fma(alpha, s, bias) after the first block of K), without
 * that pass over C */
void gemm_bf16_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                    int lda, const float *B, int ldb, const float *bias, float *C, int ldc,
                    int threads);
/* with one operand kept in bf16 (tensor_new_bf16) and read as it is stored, not transposed: A
 * (M, K), row stride lda, with a bias as gemm_bf16_bias and alpha 1 (bias NULL: beta 0), or B
 * stored (K, N), row stride ldb; the same sums as gemm_bf16 on its values as floats. A linear
 * layer's forward from a bf16 input, and its weight gradient. */
void gemm_bf16_a16_bias(bool trans_b, int M, int N, int K, const bf16 *A, int lda, const float *B,
                        int ldb, const float *bias, float *C, int ldc, int threads);
void gemm_bf16_b16(bool trans_a, int M, int N, int K, float alpha, const float *A, int lda,
                   const bf16 *B, int ldb, float beta, float *C, int ldc, int threads);
/* A kept in bf16 in either orientation, with alpha and beta: the products of a gradient kept in
 * bf16 (dx = dy w reads its rows in place, dw = dyᵀ x turns them while packing) */
void gemm_bf16_a16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16 *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc, int threads);
/* gemm_bf16_a16 with alpha 1 and A stored as blocks side by side, each its own matrix of
 * block_cols columns (a multiple of 32; row stride block_cols), and B in fp32 (B) or bf16 (B16, not
 * transposed; the other NULL): the products of the chunks' gradients of one layer (q's, k's and
 * v's), dx = [dq dk dv] w without trans_a, dw = [dq dk dv]ᵀ x with it */
void gemm_bf16_a16_blocks(bool trans_a, int M, int N, int K, const bf16 *const *A, int block_cols,
                          const float *B, const bf16 *B16, int ldb, float beta, float *C, int ldc,
                          int threads);
/* A (M, K) fp32, not transposed, against B packed beforehand (gemm_bf16_pack_b), alpha 1, a bias
 * as gemm_bf16_bias (NULL: beta 0): a layer's weights packed once for the products of many row
 * chunks. The same sums as gemm_bf16_bias. */
void gemm_bf16_packed_b_bias(int M, int N, int K, const float *A, int lda, const bf16 *bp,
                             const float *bias, float *C, int ldc, int threads);
/* the same with A already in bf16 (A16, as gemm_bf16_a16_bias) */
void gemm_bf16_a16_packed_b_bias(int M, int N, int K, const bf16 *A, int lda, const bf16 *bp,
                                 const float *bias, float *C, int ldc, int threads);
/* the same from gemm_bf16_pack_a's and gemm_bf16_pack_b's outputs: the same sums (trans_a as A was
 * packed: a transposed A's product is cut into parts of K alike) */
void gemm_bf16_packed(bool trans_a, int M, int N, int K, float alpha, const bf16 *ap,
                      const bf16 *bp, float beta, float *C, int ldc, int threads);
