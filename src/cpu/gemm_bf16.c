#include "gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/check.h"
#include "../core/cpu_features.h"
#include "../core/threads.h"
#include "amx.h"
#include "bf16_simd.h"

static int even(int k) { return k + (k & 1); }

static int min_int(int a, int b) { return a < b ? a : b; }

/* The register tile: TILE_ROWS rows of C by PANEL columns in 2 x TILE_ROWS accumulators; B's PANEL
 * columns are packed as pairs of bf16 KC at a time (24 KiB that stay in L1), A's rows (ROW_BLOCK of
 * them at a time, KC wide: 144 KiB in L2) are rounded once and met by every panel. (Tiles of 8 or
 * 12 rows, blocks of 96 or 384 rows measured the same; KC 384 or 512 ran Swin's third stage 6%
 * faster than 256, whose two blocks for K = 384 sent C through L2 twice.) */
#define TILE_ROWS 6
#define PANEL 32
#define KC GEMM_BF16_KC
#define ROW_BLOCK 192
/* a part of K's thread has all the rows (inner_parts): blocks of 384 pack B half as often as blocks
 * of 192 (384 x 384 x 3136 and 288 x 96 x 50176 ran a fifth faster) */
#define PART_ROW_BLOCK 384
/* with fewer rows than this a thread, threads split the panels (every thread packs all of A) */
#define ROWS_PER_THREAD_MIN 256

size_t gemm_bf16_a_size(int M, int K) { return (size_t)M * even(K); }

size_t gemm_bf16_b_size(int N, int K) { return (size_t)(N + PANEL - 1) / PANEL * PANEL * even(K); }

#ifdef VITC_BF16_KERNELS
/* the stores of a kc-long row in pairs: (kc + 1) / 2 of them from pair p0 on, at most 16 */
static inline __mmask16 pair_lanes(int kc, int p0) { return lanes((kc + 1) / 2 - p0); }

/* the first m (clamped to 0..32) of 32 lanes */
static inline __mmask32 lanes32(int m) {
    return m >= 32 ? 0xffffffffu : m <= 0 ? 0 : (__mmask32)((1u << m) - 1);
}

/* an operand stored in bf16: one matrix (p), or `blocks` of block_cols columns side by side, each
 * its own matrix; row stride ld either way */
typedef struct stored16 {
    const bf16 *p;
    const bf16 *const *blocks;
    int block_cols, ld;
} stored16;

/* element (r, c) as stored; a run of columns from c never crosses a block where c and the run's
 * length divide block_cols (32 from a multiple of 32, 16 from a multiple of 16) */
static inline const bf16 *stored_at(stored16 s, size_t r, int c) {
    if (!s.blocks) return s.p + r * s.ld + c;
    return s.blocks[c / s.block_cols] + r * s.ld + c % s.block_cols;
}

/* ap (rows, lda_p) = op(A)'s rows r0.. and columns k0..k0 + kc as bf16, zero past kc up to even;
 * from A16 (stored in bf16, its p or blocks non-NULL) where the job has it */
BF16_TARGET static void pack_a_block(bf16 *ap, int lda_p, bool trans_a, const float *A,
                                     stored16 A16, int lda, int r0, int rows, int k0, int kc) {
    bool a16 = A16.p || A16.blocks;
    if (a16 && trans_a) { /* as the fp32 case below, from bf16 */
        for (int p0 = 0; 2 * p0 < kc; p0 += 16)
            for (int i0 = 0; i0 < rows; i0 += 16) {
                vec16 x[16];
                turned_pairs16_bf16(x, stored_at(A16, (size_t)k0, r0 + i0), (size_t)A16.ld, p0, kc,
                                    lanes(rows - i0));
                for (int l = 0; l < 16 && i0 + l < rows; l++)
                    _mm512_mask_storeu_epi32(ap + (size_t)(i0 + l) * lda_p + 2 * p0,
                                             pair_lanes(kc, p0), (__m512i)x[l]);
            }
        return;
    }
    if (a16) {
        for (int i = 0; i < rows; i++)
            for (int k = 0; k < kc; k += 32) {
                const bf16 *a = stored_at(A16, (size_t)(r0 + i), k0 + k);
                _mm512_mask_storeu_epi32(ap + (size_t)i * lda_p + k, pair_lanes(kc, k / 2),
                                         _mm512_maskz_loadu_epi16(lanes32(kc - k), a));
            }
        return;
    }
    if (!trans_a) {
        for (int i = 0; i < rows; i++) {
            const float *a = A + (size_t)(r0 + i) * lda + k0;
            for (int k = 0; k < kc; k += 32)
                _mm512_mask_storeu_epi32(ap + (size_t)i * lda_p + k, pair_lanes(kc, k / 2),
                                         bf16_of_32(a + k, kc - k));
        }
        return;
    }
    /* A is stored (K, M): pairs of its rows give 16 rows' pairs a vector, turned by transpose16;
     * 32 of A's rows are read along at a time */
    for (int p0 = 0; 2 * p0 < kc; p0 += 16)
        for (int i0 = 0; i0 < rows; i0 += 16) {
            vec16 x[16];
            turned_pairs16(x, A + (size_t)k0 * lda + r0 + i0, (size_t)lda, p0, kc, lanes(rows - i0));
            for (int l = 0; l < 16 && i0 + l < rows; l++)
                _mm512_mask_storeu_epi32(ap + (size_t)(i0 + l) * lda_p + 2 * p0,
                                         pair_lanes(kc, p0), (__m512i)x[l]);
        }
}

/* bp (pairs, PANEL, 2) = op(B)'s columns j0..j0 + n (n <= PANEL, zero beyond), rows k0..k0 + kc in
 * pairs (zero past kc up to even): the order in which the tile reads them; from B16 (stored in
 * bf16, not transposed) where the job has it */
BF16_TARGET static void pack_b_panel(bf16 *bp, bool trans_b, const float *B, const bf16 *B16, int ldb,
                                     int j0, int n, int k0, int kc) {
    if (!trans_b && B16) { /* two rows of bf16 give the pairs of the panel's columns */
        __mmask32 cols = lanes32(n);
        for (int p = 0; 2 * p < kc; p++) {
            const bf16 *row = B16 + (size_t)(k0 + 2 * p) * ldb + j0;
            __m512i lo = _mm512_maskz_loadu_epi16(cols, row);
            __m512i hi = 2 * p + 1 < kc ? _mm512_maskz_loadu_epi16(cols, row + ldb)
                                        : _mm512_setzero_si512();
            __m512i first, second;
            pairs32_bf16(lo, hi, &first, &second);
            _mm512_storeu_si512(bp + 2 * (size_t)p * PANEL, first);
            _mm512_storeu_si512(bp + 2 * ((size_t)p * PANEL + 16), second);
        }
        return;
    }
    if (!trans_b) { /* B stored (K, N): two rows give the pairs of 16 columns */
        for (int p = 0; 2 * p < kc; p++) {
            size_t row = (size_t)(k0 + 2 * p) * ldb + j0;
            for (int h = 0; h < PANEL; h += 16) {
                __m512 lo = _mm512_maskz_loadu_ps(lanes(n - h), B + row + h);
                __m512 hi = 2 * p + 1 < kc ? _mm512_maskz_loadu_ps(lanes(n - h), B + row + ldb + h)
                                           : _mm512_setzero_ps();
                _mm512_storeu_si512(bp + 2 * ((size_t)p * PANEL + h), pairs16(lo, hi));
            }
        }
        return;
    }
    /* B stored (N, K), a column of op(B) a row: 16 of them in pairs, turned by transpose16 */
    for (int h = 0; h < PANEL; h += 16)
        for (int p0 = 0; 2 * p0 < kc; p0 += 16) {
            vec16 x[16];
            for (int r = 0; r < 16; r++)
                x[r] = h + r < n ? (vec16)bf16_of_32(B + (size_t)(j0 + h + r) * ldb + k0 + 2 * p0,
                                                     kc - 2 * p0)
                                 : (vec16){0};
            transpose16(x);
            for (int t = 0; t < 16 && 2 * (p0 + t) < kc; t++)
                _mm512_storeu_si512(bp + 2 * ((size_t)(p0 + t) * PANEL + h), (__m512i)x[t]);
        }
}

/* how a block's sums meet C (see the header's summation order) */
typedef struct epilogue {
    float alpha, beta;
    bool first;
    const float *bias; /* the panel's columns of a bias taking beta c's place, or NULL */
} epilogue;

/* the sums s of C's 16 columns at c, the panel's columns col.. (for the bias), with what C holds */
BF16_TARGET INLINE __m512 combine(__m512 s, const float *c, int col, __mmask16 m, epilogue e) {
    __m512 alpha = _mm512_set1_ps(e.alpha);
    if (!e.first) return _mm512_fmadd_ps(alpha, s, _mm512_maskz_loadu_ps(m, c));
    if (e.bias) return _mm512_fmadd_ps(alpha, s, _mm512_maskz_loadu_ps(m, e.bias + col));
    if (e.beta == 0.0f) return _mm512_mul_ps(alpha, s);
    return _mm512_fmadd_ps(alpha, s,
                           _mm512_mul_ps(_mm512_set1_ps(e.beta), _mm512_maskz_loadu_ps(m, c)));
}

/* C's rows (rows <= TILE_ROWS, stride ldc) x n (<= PANEL) columns from `pairs` pairs of A's rows
 * (bf16, stride lda) and a packed panel */
BF16_TARGET INLINE void tile(float *c, int ldc, const bf16 *a, int lda, const bf16 *bp, int pairs,
                             int rows, int n, epilogue e) {
    __m512 acc[TILE_ROWS][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int p = 0; p < pairs; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + 2 * PANEL * p);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + 2 * PANEL * p + 32);
        for (int r = 0; r < rows; r++) {
            int32_t pair;
            memcpy(&pair, a + (size_t)r * lda + 2 * p, sizeof pair);
            __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
        }
    }
    __mmask16 m0 = lanes(n), m1 = lanes(n - 16);
    for (int r = 0; r < rows; r++) {
        float *cr = c + (size_t)r * ldc;
        _mm512_mask_storeu_ps(cr, m0, combine(acc[r][0], cr, 0, m0, e));
        _mm512_mask_storeu_ps(cr + 16, m1, combine(acc[r][1], cr + 16, 16, m1, e));
    }
}

#if VITC_AMX_KERNELS
/* tile on AMX (amx.h): 32 rows of C by a whole panel; a packed panel's rows of pairs are already
 * the words amx_sums reads, and a block of A its rows (lda even) */
BF16_TARGET static void amx_tile(float *c, int ldc, const bf16 *a, int lda, const bf16 *bp,
                                 int pairs, int rows, int n, epilogue e) {
    if (e.alpha == 1.0f && (!e.first || e.bias || e.beta == 0.0f || e.beta == 1.0f)) {
        amx_accumulate(c, ldc, !e.first || (!e.bias && e.beta == 1.0f), e.first ? e.bias : NULL,
                       (const uint32_t *)a, (size_t)lda / 2, (const uint32_t *)bp, PANEL, pairs,
                       rows, n);
        return;
    }
    float sums[AMX_ROWS * AMX_COLS] __attribute__((aligned(64)));
    amx_sums(sums, (const uint32_t *)a, (size_t)lda / 2, (const uint32_t *)bp, PANEL, pairs, rows,
             n > 16 ? 32 : 16); /* the panel's columns past n are zeros */
    __mmask16 m0 = lanes(n), m1 = lanes(n - 16);
    for (int r = 0; r < rows; r++) {
        float *cr = c + (size_t)r * ldc;
        const float *s = sums + r * AMX_COLS;
        _mm512_mask_storeu_ps(cr, m0, combine(_mm512_load_ps(s), cr, 0, m0, e));
        _mm512_mask_storeu_ps(cr + 16, m1,
                              combine(_mm512_maskz_load_ps(m1, s + 16), cr + 16, 16, m1, e));
    }
}
#endif

/* a block of an operand as it is stored: `rows` rows of `bytes`, row stride ld bytes, from p; or,
 * in an operand stored as blocks side by side (blocks non-NULL, stored16), its columns
 * col0..col0 + cols of rows row0.. */
typedef struct region {
    const char *p;
    int rows, bytes;
    size_t ld;
    const bf16 *const *blocks;
    int block_cols, row0, col0, cols;
} region;

static inline void prefetch_bytes(const char *p, int bytes) {
    for (int k = 0; k < bytes + 64; k += 64) __builtin_prefetch(p + k, 0, 2);
}

/* share `part` of `parts` of the region fetched into L2 while a tile computes: packing the next
 * block otherwise waits for memory (a transposed operand's short rows defeat the hardware's
 * prefetcher: dw's fp32 GEMMs spent half their time there, the q, k and v gradients' dw a
 * quarter) */
static inline void prefetch_share(region r, int part, int parts) {
    int i0 = (int)((int64_t)r.rows * part / parts);
    int i1 = (int)((int64_t)r.rows * (part + 1) / parts);
    for (int i = i0; i < i1; i++) {
        if (!r.blocks) {
            prefetch_bytes(r.p + (size_t)i * r.ld, r.bytes);
            continue;
        }
        for (int c = r.col0; c < r.col0 + r.cols;) { /* the part of each block the columns cross */
            int in_block = c % r.block_cols;
            int n = min_int(r.block_cols - in_block, r.col0 + r.cols - c);
            const bf16 *at = r.blocks[c / r.block_cols] + (size_t)(r.row0 + i) * r.ld + in_block;
            prefetch_bytes((const char *)at, n * (int)sizeof(bf16));
            c += n;
        }
    }
}

/* one packed panel against `rows` rows of A: whole tiles, then a shorter one; meanwhile the tiles
 * fetch shares a_part.. of a_parts of next_a and all of next_b */
BF16_TARGET static void panel_rows(float *c, int ldc, const bf16 *a, int lda, const bf16 *bp,
                                   int pairs, int rows, int n, epilogue e, region next_a,
                                   int a_part, int a_parts, region next_b) {
    int i = 0, tiles = (rows + TILE_ROWS - 1) / TILE_ROWS;
    for (; i + TILE_ROWS <= rows; i += TILE_ROWS) {
        prefetch_share(next_a, a_part + i / TILE_ROWS, a_parts);
        prefetch_share(next_b, i / TILE_ROWS, tiles);
        /* the next tile's rows of C fetched for writing meanwhile: with a short K (Swin's first
         * stage, 96) the tile's stores otherwise wait for C's lines */
        for (int r = i + TILE_ROWS; r < i + 2 * TILE_ROWS && r < rows; r++) {
            __builtin_prefetch(c + (size_t)r * ldc, 1, 3);
            __builtin_prefetch(c + (size_t)r * ldc + 16, 1, 3);
        }
        tile(c + (size_t)i * ldc, ldc, a + (size_t)i * lda, lda, bp, pairs, TILE_ROWS, n, e);
    }
    if (i < rows) {
        prefetch_share(next_a, a_part + tiles - 1, a_parts);
        prefetch_share(next_b, tiles - 1, tiles);
    }
    c += (size_t)i * ldc, a += (size_t)i * lda;
    switch (rows - i) { /* constant row counts, so that the accumulators stay in registers */
    case 1: tile(c, ldc, a, lda, bp, pairs, 1, n, e); break;
    case 2: tile(c, ldc, a, lda, bp, pairs, 2, n, e); break;
    case 3: tile(c, ldc, a, lda, bp, pairs, 3, n, e); break;
    case 4: tile(c, ldc, a, lda, bp, pairs, 4, n, e); break;
    case 5: tile(c, ldc, a, lda, bp, pairs, 5, n, e); break;
    default: break;
    }
}

#if VITC_AMX_KERNELS
/* panel_rows on AMX tiles, without its prefetches: there the training steps ran faster without
 * them (docs/performance.md, "AMX products without prefetches") */
BF16_TARGET static void amx_panel_rows(float *c, int ldc, const bf16 *a, int lda, const bf16 *bp,
                                      int pairs, int rows, int n, epilogue e) {
    for (int i = 0; i < rows; i += AMX_ROWS)
        amx_tile(c + (size_t)i * ldc, ldc, a + (size_t)i * lda, lda, bp, pairs,
                 min_int(AMX_ROWS, rows - i), n, e);
}
#endif

/* a product: operands packed block by block, from fp32 (A, B) or from bf16 as stored (A16, B16:
 * B16 not transposed), or operands packed beforehand (ap, bp) */
typedef struct gemm_job {
    int M, N, K;
    float alpha, beta;
    bool trans_a, trans_b;
    const float *A, *B;
    const bf16 *A16, *B16;
    const bf16 *const *A16_blocks; /* A16 as blocks of a_block_cols columns (stored16), or NULL */
    int a_block_cols;
    int lda, ldb;
    const bf16 *ap, *bp;
    float *C;
    int ldc;
    const float *bias; /* N floats added to every row in beta c's place, or NULL */
    bool amx;          /* on AMX tiles (amx_tile) rather than vdpbf16ps's (tile) */
    /* set by gemm_run: the blocks of K summed (a part of them where the product is cut into
     * parts, else 0..K), and the rows packed a block */
    int k_begin, k_end, row_block;
} gemm_job;

/* A16's rows are read as they are stored where they already are the packed form: pairs from an
 * even column, none past K */
static bool a16_direct(const gemm_job *g) {
    return g->A16 && !g->A16_blocks && !g->trans_a && g->K % 2 == 0 && g->lda % 2 == 0;
}

/* the block of `rows` x `width` elements from element `at` of an operand stored in fp32 (p) or
 * bf16 (p16), row stride ld elements */
static region block_of(const float *p, const bf16 *p16, size_t at, int rows, int width, int ld) {
    size_t size = p16 ? sizeof(bf16) : sizeof(float);
    const char *base = p16 ? (const char *)p16 : (const char *)p;
    return (region){.p = base + at * size, .rows = rows, .bytes = (int)(width * size),
                    .ld = ld * size};
}

/* what is stored behind A's block (rows r0.., columns k0.. of op(A)) and B's (columns j0.. of
 * op(B)); nothing for operands read as packed, which the hardware fetches well (and for no block:
 * rows 0) */
static region a_region(const gemm_job *g, int r0, int rows, int k0) {
    int kc = min_int(KC, g->k_end - k0);
    if (g->ap || a16_direct(g) || rows <= 0) return (region){0};
    if (g->A16_blocks) /* in ld elements */
        return g->trans_a ? (region){.blocks = g->A16_blocks, .block_cols = g->a_block_cols,
                                     .ld = (size_t)g->lda, .row0 = k0, .rows = kc, .col0 = r0,
                                     .cols = rows}
                          : (region){.blocks = g->A16_blocks, .block_cols = g->a_block_cols,
                                     .ld = (size_t)g->lda, .row0 = r0, .rows = rows, .col0 = k0,
                                     .cols = kc};
    return g->trans_a ? block_of(g->A, g->A16, (size_t)k0 * g->lda + r0, kc, rows, g->lda)
                      : block_of(g->A, g->A16, (size_t)r0 * g->lda + k0, rows, kc, g->lda);
}
static region b_region(const gemm_job *g, int j0, int k0) {
    int n = min_int(PANEL, g->N - j0), kc = min_int(KC, g->K - k0);
    if (g->bp || n <= 0 || kc <= 0) return (region){0};
    return g->trans_b ? block_of(g->B, g->B16, (size_t)j0 * g->ldb + k0, n, kc, g->ldb)
                      : block_of(g->B, g->B16, (size_t)k0 * g->ldb + j0, kc, n, g->ldb);
}

static stored16 a_stored16(const gemm_job *g) {
    return (stored16){g->A16, g->A16_blocks, g->a_block_cols, g->lda};
}

/* rows i0..i1 of C, panels p0, p0 + step, ... */
BF16_TARGET static void gemm_part(const gemm_job *g, int i0, int i1, int p0, int step) {
    bf16 a_block[PART_ROW_BLOCK * KC] __attribute__((aligned(64)));
    bf16 b_panel[KC * PANEL] __attribute__((aligned(64)));
    int panels = (g->N + PANEL - 1) / PANEL, kp = even(g->K);
    int my_panels = (panels - p0 + step - 1) / step;
#if VITC_AMX_KERNELS
    if (g->amx) amx_begin();
#endif
    int k_begin = g->k_begin, k_end = g->k_end, row_block = g->row_block;
    for (int r0 = i0; r0 < i1; r0 += row_block) {
        int rows = min_int(row_block, i1 - r0), tiles = (rows + TILE_ROWS - 1) / TILE_ROWS;
        for (int k0 = k_begin; k0 < k_end; k0 += KC) {
            int kc = min_int(KC, k_end - k0), lda = KC;
            const bf16 *a = a_block;
            if (g->ap) a = g->ap + (size_t)r0 * kp + k0, lda = kp;
            else if (a16_direct(g)) a = g->A16 + (size_t)r0 * g->lda + k0, lda = g->lda;
            else
                pack_a_block(a_block, KC, g->trans_a, g->A, a_stored16(g), g->lda, r0, rows, k0,
                             kc);
            /* the block after this one: the next KC columns, else the next rows' first */
            int next_r0 = k0 + KC < k_end ? r0 : r0 + row_block,
                next_k0 = k0 + KC < k_end ? k0 + KC : k_begin;
            region next_a = a_region(g, next_r0, min_int(row_block, i1 - next_r0), next_k0);
            epilogue e = {g->alpha, g->beta, k0 == k_begin, NULL};
            for (int p = p0, q = 0; p < panels; p += step, q++) {
                int n = min_int(PANEL, g->N - p * PANEL);
                const bf16 *b = b_panel;
                if (g->bp) b = g->bp + (size_t)p * PANEL * kp + (size_t)k0 * PANEL;
                else pack_b_panel(b_panel, g->trans_b, g->B, g->B16, g->ldb, p * PANEL, n, k0, kc);
                e.bias = g->bias ? g->bias + p * PANEL : NULL;
                float *c = g->C + (size_t)r0 * g->ldc + p * PANEL;
#if VITC_AMX_KERNELS
                if (g->amx) {
                    amx_panel_rows(c, g->ldc, a, lda, b, even(kc) / 2, rows, n, e);
                    continue;
                }
#endif
                region next_b = p + step < panels ? b_region(g, (p + step) * PANEL, k0)
                                : next_r0 < i1    ? b_region(g, p0 * PANEL, next_k0)
                                                  : (region){0};
                panel_rows(c, g->ldc, a, lda, b, even(kc) / 2, rows, n, e, next_a, q * tiles,
                           my_panels * tiles, next_b);
            }
        }
    }
#if VITC_AMX_KERNELS
    if (g->amx) amx_end();
#endif
}

static void gemm_run(const gemm_job *g, int threads);

static void pack_b(bf16 *bp, bool trans_b, int N, int K, const float *B, const bf16 *B16, int ldb,
                   int threads) {
    int panels = (N + PANEL - 1) / PANEL;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int p = 0; p < panels; p++) {
        int n = N - p * PANEL < PANEL ? N - p * PANEL : PANEL;
        pack_b_panel(bp + (size_t)p * PANEL * even(K), trans_b, B, B16, ldb, p * PANEL, n, 0, K);
    }
}

/* With rows for several row blocks a thread, gemm_part would pack B's panels again for every
 * block (at 50176 x 96 x 288, as much packing as a sixth of the multiplying): B is packed once,
 * the threads sharing its panels, and the product runs on the packed panels (the same sums) */
static bool prepack_b(const gemm_job *g, int threads, bool split_rows) {
    return !g->bp && !vitc_in_parallel() && split_rows && g->M > ROW_BLOCK * threads;
}

static void gemm_run_prepacked_b(const gemm_job *g, int threads) {
    size_t n = (gemm_bf16_b_size(g->N, g->K) + 1) / 2; /* floats */
    bf16 *bp = (bf16 *)scratch_floats(n);
    pack_b(bp, g->trans_b, g->N, g->K, g->B, g->B16, g->ldb, threads);
    gemm_job packed = *g;
    packed.bp = bp;
    gemm_run(&packed, threads);
    scratch_done((float *)bp, n);
}

static bool amx_allowed = true;

bool gemm_bf16_allow_amx(bool allow) {
    bool was = amx_allowed;
    amx_allowed = allow;
    return was;
}

bool gemm_bf16_amx_here(void) { return VITC_AMX_KERNELS && cpu_has_amx_bf16(); }

bool gemm_bf16_uses_amx(void) { return amx_allowed && gemm_bf16_amx_here(); }

/* where thread t of a team starts its rows: A's blocks, turned, are read 16 rows a run
 * (stored16) */
static int row_split(const gemm_job *g, int t, int team) {
    int i = (int)((int64_t)g->M * t / team);
    return g->A16_blocks && g->trans_a && t < team ? i & ~15 : i;
}

/* The parts of K summed apart (the header's order): a weight gradient's K, the tokens, dwarfs its
 * M and N, and a thread split of rows or panels packs B or A again in every thread (96 x 384 x
 * 3136 took 0.38-0.53 ms so, 0.21 ms in two parts); a thread per part packs each element once. Not
 * past four blocks of rows, as a part packs B again for every block (1536 x 384 x 3136 ran 5% faster
 * in parts, in blocks of 192 rows 20% slower). */
static int inner_parts(const gemm_job *g) {
    if (!g->trans_a || g->M > GEMM_BF16_PARTS_MAX_ROWS || g->M == 0 || g->N == 0) return 1;
    int parts = 1;
    while (2 * parts <= GEMM_BF16_PARTS_MAX && 2 * parts * GEMM_BF16_PART_MIN <= g->K) parts *= 2;
    return parts;
}

/* part p of K: whole blocks, as many as the blocks allow each part */
static int part_start(int K, int p, int parts) {
    int blocks = (K + KC - 1) / KC;
    return min_int(K, (int)((int64_t)blocks * p / parts) * KC);
}

/* part p into C (p = 0) or from beta 0 into its own sums (p - 1 of `sums`, (M, N)); rows i0..i1 */
static void run_part(const gemm_job *g, int p, int parts, float *sums, int i0, int i1) {
    gemm_job part = *g;
    if (p > 0) {
        part.C = sums + (size_t)(p - 1) * g->M * g->N;
        part.ldc = g->N, part.beta = 0.0f, part.bias = NULL;
    }
    part.k_begin = part_start(g->K, p, parts), part.k_end = part_start(g->K, p + 1, parts);
    part.row_block = PART_ROW_BLOCK;
    gemm_part(&part, i0, i1, 0, 1);
}

/* row i of C adds the later parts' sums, in order */
static void add_parts(const gemm_job *g, int parts, const float *sums, int i) {
    float *c = g->C + (size_t)i * g->ldc;
    for (int p = 1; p < parts; p++) {
        const float *s = sums + ((size_t)(p - 1) * g->M + i) * g->N;
        for (int j = 0; j < g->N; j++) c[j] += s[j];
    }
}

/* the parts share the threads (a team larger than the parts splits each part's rows), then C adds
 * their sums */
static void gemm_run_parts(const gemm_job *g, int parts, int threads) {
    size_t n = (size_t)(parts - 1) * g->M * g->N;
    bool nested = vitc_in_parallel(); /* the scratch arena is the team's, not a thread's */
    float *sums = nested ? malloc(n * sizeof(float)) : scratch_floats(n);
    CHECK(sums, "gemm_bf16: out of memory for %d parts of %d x %d sums", parts, g->M, g->N);
    if (threads == 1) {
        for (int p = 0; p < parts; p++) run_part(g, p, parts, sums, 0, g->M);
        for (int i = 0; i < g->M; i++) add_parts(g, parts, sums, i);
    } else {
#pragma omp parallel num_threads(threads)
        {
            int t = vitc_thread_id(), team = vitc_team_size(), per = team / parts;
            if (per <= 1) {
                for (int p = t; p < parts; p += team) run_part(g, p, parts, sums, 0, g->M);
            } else if (t < per * parts) {
                int slice = t / parts;
                run_part(g, t % parts, parts, sums, row_split(g, slice, per),
                         row_split(g, slice + 1, per));
            }
#pragma omp barrier
#pragma omp for schedule(static)
            for (int i = 0; i < g->M; i++) add_parts(g, parts, sums, i);
        }
    }
    if (nested) free(sums);
    else scratch_done(sums, n);
}

static void gemm_run(const gemm_job *job, int threads) {
    CHECK(cpu_has_avx512_bf16(), "%s", cpu_bf16_error());
    gemm_job on_this_cpu = *job;
    on_this_cpu.amx = gemm_bf16_uses_amx();
    on_this_cpu.k_begin = 0, on_this_cpu.k_end = job->K, on_this_cpu.row_block = ROW_BLOCK;
    const gemm_job *g = &on_this_cpu;
    if (g->K == 0) { /* no block of the inner dimension would apply beta */
        for (int i = 0; i < g->M; i++)
            for (int j = 0; j < g->N; j++) {
                float *c = g->C + (size_t)i * g->ldc + j;
                *c = g->bias ? g->bias[j] : g->beta == 0.0f ? 0.0f : g->beta * *c;
            }
        return;
    }
    int parts = inner_parts(g);
    if (parts > 1) {
        gemm_run_parts(g, parts, threads);
        return;
    }
    int panels = (g->N + PANEL - 1) / PANEL;
    bool split_rows = threads == 1 || g->M >= ROWS_PER_THREAD_MIN * threads || panels < 4 * threads;
    if (prepack_b(g, threads, split_rows)) {
        gemm_run_prepacked_b(g, threads);
        return;
    }
    if (threads == 1) { /* (a nested parallel region, even of one thread, calls the heap) */
        gemm_part(g, 0, g->M, 0, 1);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        int t = vitc_thread_id(), team = vitc_team_size();
        int i0 = row_split(g, t, team), i1 = row_split(g, t + 1, team);
        if (split_rows) gemm_part(g, i0, i1, 0, 1);
        else gemm_part(g, 0, g->M, t, team);
    }
}

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc, int threads) {
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .trans_a = trans_a,
                  .trans_b = trans_b, .A = A, .B = B, .lda = lda, .ldb = ldb, .C = C, .ldc = ldc};
    gemm_run(&g, threads);
}

void gemm_bf16_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                    int lda, const float *B, int ldb, const float *bias, float *C, int ldc,
                    int threads) {
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = alpha, .trans_a = trans_a, .trans_b = trans_b,
                  .A = A, .B = B, .lda = lda, .ldb = ldb, .C = C, .ldc = ldc, .bias = bias};
    gemm_run(&g, threads);
}

void gemm_bf16_a16_bias(bool trans_b, int M, int N, int K, const bf16 *A, int lda, const float *B,
                        int ldb, const float *bias, float *C, int ldc, int threads) {
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = 1.0f, .trans_b = trans_b, .A16 = A, .B = B,
                  .lda = lda, .ldb = ldb, .C = C, .ldc = ldc, .bias = bias};
    gemm_run(&g, threads);
}

void gemm_bf16_a16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16 *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc, int threads) {
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .trans_a = trans_a,
                  .trans_b = trans_b, .A16 = A, .B = B, .lda = lda, .ldb = ldb, .C = C,
                  .ldc = ldc};
    gemm_run(&g, threads);
}

void gemm_bf16_b16(bool trans_a, int M, int N, int K, float alpha, const float *A, int lda,
                   const bf16 *B, int ldb, float beta, float *C, int ldc, int threads) {
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .trans_a = trans_a, .A = A,
                  .B16 = B, .lda = lda, .ldb = ldb, .C = C, .ldc = ldc};
    gemm_run(&g, threads);
}

void gemm_bf16_a16_blocks(bool trans_a, int M, int N, int K, const bf16 *const *A, int block_cols,
                          const float *B, const bf16 *B16, int ldb, float beta, float *C, int ldc,
                          int threads) {
    CHECK(block_cols % 32 == 0, "gemm_bf16_a16_blocks: blocks of %d columns (a multiple of 32)",
          block_cols);
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = 1.0f, .beta = beta, .trans_a = trans_a,
                  .A16_blocks = A, .a_block_cols = block_cols, .B = B, .B16 = B16,
                  .lda = block_cols, .ldb = ldb, .C = C, .ldc = ldc};
    gemm_run(&g, threads);
}

void gemm_bf16_packed_b_bias(int M, int N, int K, const float *A, int lda, const bf16 *bp,
                             const float *bias, float *C, int ldc, int threads) {
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = 1.0f, .A = A, .lda = lda, .bp = bp, .C = C,
                  .ldc = ldc, .bias = bias};
    gemm_run(&g, threads);
}

void gemm_bf16_a16_packed_b_bias(int M, int N, int K, const bf16 *A, int lda, const bf16 *bp,
                                 const float *bias, float *C, int ldc, int threads) {
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = 1.0f, .A16 = A, .lda = lda, .bp = bp, .C = C,
                  .ldc = ldc, .bias = bias};
    gemm_run(&g, threads);
}

void gemm_bf16_packed(bool trans_a, int M, int N, int K, float alpha, const bf16 *ap,
                      const bf16 *bp, float beta, float *C, int ldc, int threads) {
    gemm_job g = {.M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .trans_a = trans_a,
                  .ap = ap, .bp = bp, .C = C, .ldc = ldc};
    gemm_run(&g, threads);
}

void gemm_bf16_pack_a(bf16 *ap, bool trans_a, int M, int K, const float *A, int lda, int threads) {
    CHECK(cpu_has_avx512_bf16(), "%s", cpu_bf16_error());
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int r0 = 0; r0 < M; r0 += 64) {
        int rows = M - r0 < 64 ? M - r0 : 64;
        pack_a_block(ap + (size_t)r0 * even(K), even(K), trans_a, A, (stored16){0}, lda, r0, rows,
                     0, K);
    }
}

void gemm_bf16_pack_b(bf16 *bp, bool trans_b, int N, int K, const float *B, int ldb, int threads) {
    CHECK(cpu_has_avx512_bf16(), "%s", cpu_bf16_error());
    pack_b(bp, trans_b, N, K, B, NULL, ldb, threads);
}

#else /* no compiler support: every entry point stops, as on a CPU without the instruction */

bool gemm_bf16_allow_amx(bool allow) {
    (void)allow;
    return false;
}

bool gemm_bf16_amx_here(void) { return false; }

bool gemm_bf16_uses_amx(void) { return false; }

static void unsupported(void) {
    FATAL("--precision bf16: this build has no AVX512_BF16 kernels (they need x86-64 and GCC >= 10 "
          "or Clang >= 9); use --precision fp32");
}

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc, int threads) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda;
    (void)B, (void)ldb, (void)beta, (void)C, (void)ldc, (void)threads;
    unsupported();
}

void gemm_bf16_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                    int lda, const float *B, int ldb, const float *bias, float *C, int ldc,
                    int threads) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda;
    (void)B, (void)ldb, (void)bias, (void)C, (void)ldc, (void)threads;
    unsupported();
}

void gemm_bf16_a16_bias(bool trans_b, int M, int N, int K, const bf16 *A, int lda, const float *B,
                        int ldb, const float *bias, float *C, int ldc, int threads) {
    (void)trans_b, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)bias;
    (void)C, (void)ldc, (void)threads;
    unsupported();
}

void gemm_bf16_a16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16 *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc, int threads) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda;
    (void)B, (void)ldb, (void)beta, (void)C, (void)ldc, (void)threads;
    unsupported();
}

void gemm_bf16_b16(bool trans_a, int M, int N, int K, float alpha, const float *A, int lda,
                   const bf16 *B, int ldb, float beta, float *C, int ldc, int threads) {
    (void)trans_a, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc, (void)threads;
    unsupported();
}

void gemm_bf16_a16_blocks(bool trans_a, int M, int N, int K, const bf16 *const *A, int block_cols,
                          const float *B, const bf16 *B16, int ldb, float beta, float *C, int ldc,
                          int threads) {
    (void)trans_a, (void)M, (void)N, (void)K, (void)A, (void)block_cols, (void)B, (void)B16;
    (void)ldb, (void)beta, (void)C, (void)ldc, (void)threads;
    unsupported();
}

void gemm_bf16_packed_b_bias(int M, int N, int K, const float *A, int lda, const bf16 *bp,
                             const float *bias, float *C, int ldc, int threads) {
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)bp, (void)bias, (void)C, (void)ldc;
    (void)threads;
    unsupported();
}

void gemm_bf16_a16_packed_b_bias(int M, int N, int K, const bf16 *A, int lda, const bf16 *bp,
                                 const float *bias, float *C, int ldc, int threads) {
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)bp, (void)bias, (void)C, (void)ldc;
    (void)threads;
    unsupported();
}

void gemm_bf16_packed(bool trans_a, int M, int N, int K, float alpha, const bf16 *ap,
                      const bf16 *bp, float beta, float *C, int ldc, int threads) {
    (void)trans_a, (void)M, (void)N, (void)K, (void)alpha, (void)ap, (void)bp, (void)beta, (void)C;
    (void)ldc, (void)threads;
    unsupported();
}

void gemm_bf16_pack_a(bf16 *ap, bool trans_a, int M, int K, const float *A, int lda, int threads) {
    (void)ap, (void)trans_a, (void)M, (void)K, (void)A, (void)lda, (void)threads;
    unsupported();
}

void gemm_bf16_pack_b(bf16 *bp, bool trans_b, int N, int K, const float *B, int ldb, int threads) {
    (void)bp, (void)trans_b, (void)N, (void)K, (void)B, (void)ldb, (void)threads;
    unsupported();
}
#endif
