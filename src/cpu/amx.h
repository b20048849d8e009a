/* AMX-BF16 (tdpbf16ps on tile registers) for the bf16 kernels: gemm_bf16's register tile and the
 * attention cores' products, where the processor has it (cpu_has_amx_bf16) and the build knows it
 * (VITC_AMX_KERNELS). A product here is sums (rows x cols fp32) = a · b over `words` pairs:
 *   a  rows of `words` words, row stride lda words: word (r, u) = (a[r][2u], a[r][2u + 1])
 *   b  `words` rows of cols words, stride ldb: word (u, c) = (b[2u][c], b[2u + 1][c])
 * as vdpbf16ps's kernels lay them out (a word: two bf16, the lower half first). tdpbf16ps sums a
 * chunk of 16 words (32 products) per instruction in the hardware's own order, which is neither
 * vdpbf16ps's nor documented: only these tiles give these bits, the same on every call. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bf16_simd.h"

#if defined(VITC_BF16_KERNELS) && VITC_AMX_KERNELS
#define AMX_ROWS 32 /* a call's rows and columns at most: four 16 x 16 tiles */
#define AMX_COLS 32

/* a thread's tile registers, configured for amx_sums (tiles of 16 rows of 64 bytes), and released:
 * around a thread's products, so that the OS saves no tile state between them */
void amx_begin(void);
void amx_end(void);

/* sums (rows <= AMX_ROWS, cols <= AMX_COLS; row stride AMX_COLS) = a · b; rows and words past
 * the operands' are read as zeros, never from memory */
void amx_sums(float *sums, const uint32_t *a, size_t lda, const uint32_t *b, size_t ldb, int words,
              int rows, int cols);

/* c (rows <= AMX_ROWS x cols <= AMX_COLS, stride ldc) = start + a · b, the products added to the
 * starting values inside the tiles: start is c itself (from_c), else the row `bias` (cols floats)
 * on every row, else 0. b's rows are read up to cols rounded up to 16 (zeros there). This saves
 * amx_sums' round trip through memory where alpha is 1. */
void amx_accumulate(float *c, size_t ldc, bool from_c, const float *bias, const uint32_t *a,
                    size_t lda, const uint32_t *b, size_t ldb, int words, int rows, int cols);
#endif
