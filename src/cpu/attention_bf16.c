/* Softmax attention under --precision bf16 for heads of 16 to 64 channels: the logits, the
 * probabilities times v and the backward's five products on register tiles of vdpbf16ps, each
 * operand rounded to bf16 once (k and v once per pair, q, the probabilities and the gradients once
 * per block of query rows), every sum fp32. Through gemm_bf16 each of a pair's products packed both
 * of its operands again into panels sized for large GEMMs. The rows' softmax, statistics and
 * gradient stay fp32, as on the fp32 tiles of attention.c, but in one pass a row (below).
 *
 * A word is a uint32 holding two bf16, the lower half first: the pair vdpbf16ps multiplies with
 * the same pair of the other operand. The operands take three layouts of words, zero-padded:
 *   row words        word (r, u) = (x[r][2u], x[r][2u + 1])    a row's consecutive pairs
 *   key pairs        word (u, j) = (x[j][2u], x[j][2u + 1])    row words turned: u over channels
 *   row pairs        word (u, c) = (x[2u][c], x[2u + 1][c])    two rows interleaved
 * and every product is out (R, 16 nv) = a b with a's rows in words and b's rows in words of the
 * same pairs: each output lane sums, in order of u, the products of its pair (vdpbf16ps: the odd
 * element's, then the even one's) into one fp32 accumulator, added to out when the product
 * accumulates. The softmax's scale multiplies the sums afterwards: the logits' in the pass that
 * adds the bias, dq's and dk's as they are delivered. */
#include <math.h>
#include <string.h>

#include "../core/check.h"
#include "../core/cpu_features.h"
#include "../core/threads.h"
#include "amx.h"
#include "attention_blocks.h"
#include "bf16_simd.h"
#include "fast_exp.h"
#include "gemm_bf16.h"

static int min_int(int a, int b) { return a < b ? a : b; }

/* words of one thread's scratch, each buffer a whole number of cache lines */
static size_t lines(size_t words) { return (words + 15) & ~(size_t)15; }

/* The forward's P v runs over the keys in whole tiles of 16 words: the probabilities' rows and
 * v's row pairs are zero-padded to them. Cut short (Agent attention's 9 and 16 agents), each tile
 * went through a buffer whose stores its load waited for (Agent-Swin's first two stages: 1.1x
 * faster forward; the backward's dS k, padded the same way, ran no faster). The backward's dS
 * takes the same row stride, so that its rows start on cache lines (a tile row across two lines
 * costs both). */
static size_t pv_words(size_t mp) { return padded16((int)(mp / 2)); }

/* The products over the keys (P v, dS k) stop at the last pair of keys on vdpbf16ps's tiles: the
 * words past it are zeros (Swin's 49 keys: 25 words of 32, DeiT's 197: 99 of 112). AMX's tiles
 * still take the padded words (the padding given to word_product). */
static int key_words(int m) { return (m + 1) / 2; }

/* zeros in words [mp / 2, pv) of ATTN_BLOCK_ROWS rows of pv words: the probabilities' padding */
static void zero_padding(uint32_t *w, size_t mp, size_t pv) {
    for (int r = 0; r < ATTN_BLOCK_ROWS && pv > mp / 2; r++)
        memset(w + r * pv + mp / 2, 0, sizeof(uint32_t) * (pv - mp / 2));
}

size_t attention_bf16_thread_floats(const attn_dims *a, bool backward) {
    size_t mp = padded16(a->m), d = (size_t)a->d, rows = ATTN_BLOCK_ROWS, pv = pv_words(mp);
    if (!backward) /* k's key pairs, v's row pairs, q's row words, logits, probabilities' row words */
        return lines(d / 2 * mp) + lines(pv * d) + lines(rows * d / 2) + lines(rows * mp) +
               lines(rows * pv);
    /* k's and v's key pairs, k's row pairs; logits and their gradient; q's, dout's and dS's row
     * words; a transposed block (Pᵀ or dSᵀ in row pairs), a block's row pairs (dout or q); dk's
     * and dv's sums and a block's dq, in floats, until they are delivered */
    return 3 * lines(d / 2 * mp) + 2 * lines(rows * mp) + 2 * lines(rows * d / 2) +
           lines(rows * pv) + lines(mp * rows / 2) + lines(rows / 2 * d) +
           2 * lines(mp * d) + lines(rows * d);
}

static uint32_t *take(float **scratch, size_t words) {
    uint32_t *p = (uint32_t *)*scratch;
    *scratch += lines(words);
    return p;
}

#ifdef VITC_BF16_KERNELS

/* w (rows of ldw words) = x's rows (stride ldx) of `cols` floats (even) as row words */
BF16_TARGET static void round_rows(uint32_t *w, size_t ldw, const float *x, size_t ldx, int rows,
                                   int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c += 32)
            _mm512_mask_storeu_epi32(w + r * ldw + c / 2, lanes((cols - c) / 2),
                                     bf16_of_32(x + r * ldx + c, cols - c));
}

/* w (pairs rows of `cols` words) = x's rows (stride ldx, `rows` of them, zero beyond) in row pairs;
 * cols a multiple of 16 */
BF16_TARGET static void pair_rows(uint32_t *w, const float *x, size_t ldx, int rows, int cols,
                                  int pairs) {
    for (int u = 0; u < pairs; u++)
        for (int c = 0; c < cols; c += 16) {
            __m512 lo = 2 * u < rows ? _mm512_loadu_ps(x + 2 * u * ldx + c) : _mm512_setzero_ps();
            __m512 hi = 2 * u + 1 < rows ? _mm512_loadu_ps(x + (2 * u + 1) * ldx + c) : _mm512_setzero_ps();
            _mm512_storeu_si512(w + (size_t)u * cols + c, pairs16(lo, hi));
        }
}

/* w (d / 2 rows of mp words) = the key pairs of x's m rows (stride ldx) of d floats, zero for the
 * padding keys up to mp: row words turned 16 x 16 at a time */
BF16_TARGET static void key_pairs(uint32_t *w, size_t mp, const float *x, size_t ldx, int m, int d) {
    for (size_t j0 = 0; j0 < mp; j0 += 16)
        for (int u0 = 0; u0 < d / 2; u0 += 16) {
            vec16 t[16];
            for (int r = 0; r < 16; r++)
                t[r] = j0 + r < (size_t)m ? (vec16)bf16_of_32(x + (j0 + r) * ldx + 2 * u0, d - 2 * u0)
                                          : (vec16){0};
            transpose16(t);
            for (int r = 0; r < 16 && u0 + r < d / 2; r++)
                _mm512_storeu_si512(w + (u0 + r) * mp + j0, (__m512i)t[r]);
        }
}

/* w (cols rows of ldw words) = the row pairs of x's `rows` rows (stride ldx) turned: word (c, u) =
 * (x[2u][c], x[2u + 1][c]), zero for rows past `rows` up to a multiple of 32 */
BF16_TARGET static void transposed_pairs(uint32_t *w, size_t ldw, const float *x, size_t ldx,
                                         int rows, int cols) {
    for (int u0 = 0; 2 * u0 < rows; u0 += 16)
        for (int c0 = 0; c0 < cols; c0 += 16) {
            vec16 t[16];
            turned_pairs16(t, x + c0, ldx, u0, rows, lanes(cols - c0));
            for (int l = 0; l < 16 && c0 + l < cols; l++)
                _mm512_storeu_si512(w + (c0 + l) * ldw + u0, (__m512i)t[l]);
        }
}

/* out's rows r < rows (stride ldo) of 16 NV floats = a[r] · b (+ out when accumulating), a's rows
 * (stride lda) and b's U rows (stride ldb) in words; TR rows are computed, the missing ones
 * repeating the last. A word's rows are broadcast first and each vector of b then loaded once:
 * with b's vectors loaded first, GCC loaded them again for every row (17 loads per 16 products
 * in the 4 x 4 tile, 8 so; simd.h's KEEP_IN_REGISTER), which Zen 4, one zmm load a cycle, hides
 * only while b's vectors sit on cache lines. */
BF16_TARGET INLINE void word_tile(float *out, size_t ldo, const uint32_t *a, size_t lda,
                                  const uint32_t *b, size_t ldb, int U, int rows, int TR, int NV,
                                  bool accumulate) {
    __m512 acc[8][4];
    const uint32_t *ar[8];
    for (int r = 0; r < TR; r++) {
        ar[r] = a + (r < rows ? r : rows - 1) * lda;
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
    }
    for (int u = 0; u < U; u++) {
        __m512bh x[8];
        for (int r = 0; r < TR; r++) x[r] = (__m512bh)_mm512_set1_epi32((int)ar[r][u]);
        for (int v = 0; v < NV; v++) {
            __m512bh bv = (__m512bh)_mm512_loadu_si512(b + u * ldb + 16 * v);
            for (int r = 0; r < TR; r++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x[r], bv);
        }
    }
    for (int r = 0; r < TR && r < rows; r++)
        for (int v = 0; v < NV; v++) {
            float *o = out + r * ldo + 16 * v;
            _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(acc[r][v], _mm512_loadu_ps(o))
                                           : acc[r][v]);
        }
}

/* A product's padding: rows of a that exist and of out that may be written up to `rows`, and
 * words of a's rows and of b that are zeros up to `words` (0: none past the product's) */
typedef struct padding {
    int rows, words;
} padding;

#if VITC_AMX_KERNELS
/* word_product on AMX tiles (amx.h), 32 x 32 outputs at a time, the tiles configured by the
 * caller. A tile that the product's rows or words cut short is computed whole where the padding
 * allows: cut short, it goes through a buffer whose stores its load waits for (in Swin's 49-row
 * products, a sixth of the AMX loop's samples waited there). */
BF16_TARGET static void amx_word_product(float *out, size_t ldo, const uint32_t *a, size_t lda,
                                         const uint32_t *b, size_t ldb, int U, int R, int nv16,
                                         bool accumulate, padding pad) {
    int whole = (int)padded16(U), words = whole <= pad.words ? whole : U;
    for (int c = 0; c < 16 * nv16; c += AMX_COLS) {
        int cols = min_int(AMX_COLS, 16 * nv16 - c);
        for (int r0 = 0; r0 < R; r0 += AMX_ROWS) {
            int rows = min_int(AMX_ROWS, R - r0);
            if (r0 + (int)padded16(rows) <= pad.rows) rows = (int)padded16(rows);
            amx_accumulate(out + r0 * ldo + c, ldo, accumulate, NULL, a + r0 * lda, lda, b + c,
                           ldb, words, rows, cols);
        }
    }
}
#endif

/* out (R rows, stride ldo, 16 nv16 columns) = a b (+= when accumulating): a's R rows of U words
 * (stride lda), b's U rows of 16 nv16 words (stride ldb). Tiles of 8 rows x 1-2 vectors or 4 rows
 * x 3-4 vectors: 8 to 16 accumulators, as attention.c's fp32 tiles; on AMX's where the processor
 * has them (gemm_bf16_uses_amx: the products' sums in the hardware's order; tiles_begin configures
 * them) */
BF16_TARGET static void word_product(float *out, size_t ldo, const uint32_t *a, size_t lda,
                                     const uint32_t *b, size_t ldb, int U, int R, int nv16,
                                     bool accumulate, padding pad) {
#if VITC_AMX_KERNELS
    if (gemm_bf16_uses_amx()) {
        amx_word_product(out, ldo, a, lda, b, ldb, U, R, nv16, accumulate, pad);
        return;
    }
#endif
    (void)pad;
    for (int c = 0; c < nv16; c += 4) {
        int nv = min_int(4, nv16 - c), tr = nv <= 2 ? 8 : 4;
        for (int r0 = 0; r0 < R; r0 += tr) {
            float *o = out + r0 * ldo + 16 * c;
            const uint32_t *ar = a + r0 * lda, *bc = b + 16 * c;
            int rows = min_int(tr, R - r0);
            switch (nv) { /* constant shapes, so that the accumulators stay in registers */
            case 1: word_tile(o, ldo, ar, lda, bc, ldb, U, rows, 8, 1, accumulate); break;
            case 2: word_tile(o, ldo, ar, lda, bc, ldb, U, rows, 8, 2, accumulate); break;
            case 3: word_tile(o, ldo, ar, lda, bc, ldb, U, rows, 4, 3, accumulate); break;
            default: word_tile(o, ldo, ar, lda, bc, ldb, U, rows, 4, 4, accumulate); break;
            }
        }
    }
}

/* a thread's tiles around its products, once for all of them */
static bool tiles_begin(void) {
#if VITC_AMX_KERNELS
    if (gemm_bf16_uses_amx()) {
        amx_begin();
        return true;
    }
#endif
    return false;
}

static void tiles_end(bool began) {
#if VITC_AMX_KERNELS
    if (began) amx_end();
#else
    (void)began;
#endif
}

/* ---- A block's rows, one pass a row: the logits scaled, biased and masked, their softmax (or the
 * probabilities again, or the softmax's gradient) and the rounding of the result, the row held in
 * registers up to 64 keys (Swin's and CSwin's windows, agents) and in place in the block beyond.
 * The processor overlaps one row's chain of reductions and exponentials with the next row's. In
 * passes over all the block's rows (attention.c's, which these kernels used before), Swin's first
 * stage (1024 windows x 3 heads of 32) ran 1.1x slower forward and 1.19x slower backward. ---- */

/* where a block's rows take their terms: bias and mask rows (stride m) or NULL; the logits'
 * scale */
typedef struct row_terms {
    const float *bias, *mask;
    float scale;
    int m;
} row_terms;

static row_terms terms_of(const attn_dims *a, int pair, int i0) {
    size_t nm = (size_t)a->n * a->m, at = (size_t)i0 * a->m;
    int h = pair % a->heads, w = (pair / a->heads) % a->windows;
    return (row_terms){a->bias ? a->bias + h * nm + at : NULL,
                       a->mask ? a->mask + w * nm + at : NULL, a->scale, a->m};
}

/* x (nv vectors) = row r's logits at L times the scale, plus its bias and mask. Returns the lanes'
 * maxima up to m (-inf in lanes that have none). */
BF16_TARGET INLINE __m512 logits_row(__m512_u *x, int nv, const float *L, const row_terms *t,
                                     int r) {
    __m512 scale = _mm512_set1_ps(t->scale), top = _mm512_set1_ps(-INFINITY);
    const float *bias = t->bias ? t->bias + (size_t)r * t->m : NULL;
    const float *mask = t->mask ? t->mask + (size_t)r * t->m : NULL;
    for (int v = 0; v < nv; v++) {
        __mmask16 k = lanes(t->m - 16 * v);
        __m512 y = _mm512_loadu_ps(L + 16 * v);
        y = bias ? _mm512_fmadd_ps(scale, y, _mm512_maskz_loadu_ps(k, bias + 16 * v))
                 : _mm512_mul_ps(scale, y);
        if (mask) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(k, mask + 16 * v));
        x[v] = y;
        top = _mm512_mask_max_ps(top, k, top, y);
    }
    return top;
}

/* x = e^(x - shift) up to m, zero past it; returns their sum */
BF16_TARGET INLINE float exp_row(__m512_u *x, int nv, float shift, int m) {
    __m512 s = _mm512_set1_ps(shift), total = _mm512_setzero_ps();
    for (int v = 0; v < nv; v++) {
        x[v] = _mm512_maskz_mov_ps(lanes(m - 16 * v), fast_exp16(_mm512_sub_ps(x[v], s)));
        total = _mm512_add_ps(total, x[v]);
    }
    return _mm512_reduce_add_ps(total);
}

/* w (row words, nv / 2 of 16) = scale times x, rounded */
BF16_TARGET INLINE void round_row(uint32_t *w, const __m512_u *x, int nv, float scale) {
    __m512 s = _mm512_set1_ps(scale);
    int v = 0;
    for (; v + 1 < nv; v += 2)
        _mm512_storeu_si512(w + 8 * v, (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(s, x[v + 1]),
                                                                    _mm512_mul_ps(s, x[v])));
    if (v < nv)
        _mm256_storeu_si256((__m256i *)(w + 8 * v), (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(s, x[v])));
}

/* the forward's softmax of a block's rows: pw (rows of ldp words) = the probabilities from the
 * logits L (rows of mp, unscaled), rounded; lse[r] = each row's log-sum-exp */
BF16_TARGET INLINE void softmax_rows_nv(uint32_t *pw, size_t ldp, float *lse, float *L,
                                        const row_terms *t, int rows, int nv) {
    size_t mp = 16 * (size_t)nv;
    for (int r = 0; r < rows; r++) {
        __m512_u in_registers[4], *x = nv <= 4 ? in_registers : (__m512_u *)(L + r * mp);
        float top = _mm512_reduce_max_ps(logits_row(x, nv, L + r * mp, t, r));
        float sum = exp_row(x, nv, top, t->m);
        round_row(pw + r * ldp, x, nv, 1.0f / sum);
        lse[r] = top + logf(sum);
    }
}

BF16_TARGET static void softmax_rows(uint32_t *pw, size_t ldp, float *lse, float *L,
                                     const row_terms *t, int rows, size_t mp) {
    switch (mp / 16) { /* constant lengths, so that a row stays in registers */
    case 1: softmax_rows_nv(pw, ldp, lse, L, t, rows, 1); break;
    case 2: softmax_rows_nv(pw, ldp, lse, L, t, rows, 2); break;
    case 3: softmax_rows_nv(pw, ldp, lse, L, t, rows, 3); break;
    case 4: softmax_rows_nv(pw, ldp, lse, L, t, rows, 4); break;
    default: softmax_rows_nv(pw, ldp, lse, L, t, rows, (int)(mp / 16)); break;
    }
}

/* the backward's probabilities again: P (rows of mp) = e^(logits - lse) from the logits in P */
BF16_TARGET INLINE void probs_rows_nv(float *P, const float *lse, const row_terms *t, int rows,
                                      int nv) {
    size_t mp = 16 * (size_t)nv;
    for (int r = 0; r < rows; r++) {
        __m512_u in_registers[4], *x = nv <= 4 ? in_registers : (__m512_u *)(P + r * mp);
        logits_row(x, nv, P + r * mp, t, r);
        exp_row(x, nv, lse[r], t->m);
        for (int v = 0; v < nv && nv <= 4; v++) _mm512_storeu_ps(P + r * mp + 16 * v, x[v]);
    }
}

BF16_TARGET static void probs_rows(float *P, const float *lse, const row_terms *t, int rows,
                                   size_t mp) {
    switch (mp / 16) {
    case 1: probs_rows_nv(P, lse, t, rows, 1); break;
    case 2: probs_rows_nv(P, lse, t, rows, 2); break;
    case 3: probs_rows_nv(P, lse, t, rows, 3); break;
    case 4: probs_rows_nv(P, lse, t, rows, 4); break;
    default: probs_rows_nv(P, lse, t, rows, (int)(mp / 16)); break;
    }
}

/* the softmax's gradient: dS = P ⊙ (dP - rowsum(dP ⊙ P)) in place of dP (rows of mp), added into
 * dbias_h's rows (of m) when given and rounded into sw (rows of mp / 2 words) when given */
BF16_TARGET static void softmax_grad_rows(float *dP, uint32_t *sw, size_t lds, float *dbias_h,
                                          const float *P, int rows, int m, size_t mp) {
    int nv = (int)(mp / 16);
    for (int r = 0; r < rows; r++) {
        __m512_u *g = (__m512_u *)(dP + r * mp);
        __m512 dot = _mm512_setzero_ps();
        const __m512_u *p = (const __m512_u *)(P + r * mp);
        for (int v = 0; v < nv; v++) dot = _mm512_fmadd_ps(g[v], p[v], dot);
        __m512 row_dot = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
        for (int v = 0; v < nv; v++) {
            g[v] = _mm512_mul_ps(p[v], _mm512_sub_ps(g[v], row_dot));
            if (!dbias_h) continue;
            float *db = dbias_h + (size_t)r * m + 16 * v;
            __mmask16 k = lanes(m - 16 * v);
            _mm512_mask_storeu_ps(db, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, db), g[v]));
        }
        if (sw) round_row(sw + r * lds, g, nv, 1.0f);
    }
}

/* a block's operands and results in scratch: ATTN_BLOCK_ROWS rows each */
static const padding block_rows_pad = {ATTN_BLOCK_ROWS, 0};

/* L (rows of mp) = q kᵀ, unscaled (logits_row scales it), for `rows` query rows of
 * one pair: q's rows rounded into qw, kw the pair's key pairs of k */
static void block_logits(float *L, uint32_t *qw, const float *q, const uint32_t *kw,
                         const attn_dims *a, int rows) {
    size_t mp = padded16(a->m);
    int d = a->d;
    round_rows(qw, d / 2, q, (size_t)a->heads * d, rows, d);
    word_product(L, mp, qw, d / 2, kw, mp, d / 2, rows, (int)(mp / 16), false, block_rows_pad);
}

void attention_bf16_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                            const attn_dims *a, float *scratch, size_t per_thread) {
    CHECK(cpu_has_avx512_bf16(), "%s", cpu_bf16_error());
    int block_rows = attn_forward_block_rows(a), blocks = (a->n + block_rows - 1) / block_rows;
    int items = a->seqs * a->heads * blocks, d = a->d, C = a->heads * d, n = a->n, m = a->m;
    size_t mp = padded16(m), pv = pv_words(mp);
#pragma omp parallel
    {
        float *s = scratch + vitc_thread_id() * per_thread;
        uint32_t *kw = take(&s, d / 2 * mp), *vw = take(&s, pv * d);
        uint32_t *qw = take(&s, ATTN_BLOCK_ROWS * d / 2);
        float *L = (float *)take(&s, ATTN_BLOCK_ROWS * mp);
        uint32_t *pw = take(&s, ATTN_BLOCK_ROWS * pv);
        zero_padding(pw, mp, pv);
        int packed = -1; /* the pair whose k and v kw and vw hold: a thread's items are consecutive */
        bool tiles = tiles_begin();
#pragma omp for schedule(static)
        for (int it = 0; it < items; it++) {
            int pair = it / blocks, i0 = it % blocks * block_rows, rows = min_int(block_rows, n - i0);
            int sq = pair / a->heads, h = pair % a->heads;
            size_t qo = (size_t)sq * n * C + h * d, ko = (size_t)sq * m * C + h * d;
            if (pair != packed) {
                key_pairs(kw, mp, k + ko, C, m, d);
                pair_rows(vw, v + ko, C, m, d, (int)pv);
                packed = pair;
            }
            float row_lse[ATTN_BLOCK_ROWS];
            row_terms t = terms_of(a, pair, i0);
            int next = (it + 1) / blocks, j0 = (it + 1) % blocks * block_rows;
            bool more = it + 1 < items, keys = more && next != pair;
            if (keys) attn_fetch_rows(attn_pair_row(a, k, m, next, 0), C, m, d);
            block_logits(L, qw, q + qo + (size_t)i0 * C, kw, a, rows);
            if (keys) attn_fetch_rows(attn_pair_row(a, v, m, next, 0), C, m, d);
            softmax_rows(pw, pv, row_lse, L, &t, rows, mp);
            if (more)
                attn_fetch_rows(attn_pair_row(a, q, n, next, j0), C, min_int(block_rows, n - j0), d);
            if (lse) memcpy(lse + (size_t)pair * n + i0, row_lse, sizeof(float) * rows);
            word_product(out + qo + (size_t)i0 * C, C, pw, pv, vw, d, key_words(m), rows, d / 16,
                         false, (padding){0, (int)pv});
        }
        tiles_end(tiles);
    }
}

/* a pair's gradient rows (row stride C from `at`) from their sums (row stride d): scale times
 * them added into the fp32 gradient g32 (written where whole: it has no value yet), or written
 * rounded into the bf16 one g16 (attention their one reader), the same rounded values */
BF16_TARGET static void deliver(float *g32, bool whole, uint16_t *g16, size_t at, int C,
                                const float *sums, int rows, int d, float scale) {
    __m512 s = _mm512_set1_ps(scale);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < d; c += 16) {
            __m512 x = _mm512_mul_ps(s, _mm512_loadu_ps(sums + (size_t)r * d + c));
            size_t o = at + (size_t)r * C + c;
            if (g32 && !whole) x = _mm512_add_ps(_mm512_loadu_ps(g32 + o), x);
            if (g32) _mm512_storeu_ps(g32 + o, x);
            else _mm256_storeu_si256((__m256i *)(g16 + o), (__m256i)_mm512_cvtneps_pbh(x));
        }
}

void attention_bf16_backward_pair(const attn_grads *g, float *dbias_h, const float *dout,
                                  const float *lse, const float *q, const float *k, const float *v,
                                  const attn_dims *a, int pair, float *scratch) {
    CHECK(cpu_has_avx512_bf16(), "%s", cpu_bf16_error());
    int sq = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    size_t mp = padded16(m), qo = (size_t)sq * n * C + h * d, ko = (size_t)sq * m * C + h * d;
    size_t pv = pv_words(mp); /* dS's rows of words start on cache lines, as P's in the forward */
    const size_t half = ATTN_BLOCK_ROWS / 2; /* the row pairs of a block */
    float *s = scratch;
    uint32_t *kw = take(&s, d / 2 * mp), *vkw = take(&s, d / 2 * mp), *kpw = take(&s, mp / 2 * d);
    float *P = (float *)take(&s, ATTN_BLOCK_ROWS * mp), *dP = (float *)take(&s, ATTN_BLOCK_ROWS * mp);
    uint32_t *qw = take(&s, ATTN_BLOCK_ROWS * d / 2), *dow = take(&s, ATTN_BLOCK_ROWS * d / 2);
    uint32_t *sw = take(&s, ATTN_BLOCK_ROWS * pv), *tw = take(&s, mp * half);
    uint32_t *cw = take(&s, half * d);
    float *dk_sums = (float *)take(&s, mp * d), *dv_sums = (float *)take(&s, mp * d);
    float *dq_block = (float *)take(&s, ATTN_BLOCK_ROWS * d);
    bool want_dq = g->dq || g->dq16, want_dk = g->dk || g->dk16, want_dv = g->dv || g->dv16;
    bool need_ds = want_dq || want_dk || dbias_h, tiles = tiles_begin();
    int next = pair + 1 < a->seqs * a->heads ? pair + 1 : -1;
    key_pairs(kw, mp, k + ko, C, m, d);
    if (next >= 0) attn_fetch_rows(attn_pair_row(a, k, m, next, 0), C, m, d);
    if (need_ds) key_pairs(vkw, mp, v + ko, C, m, d);
    if (next >= 0) attn_fetch_rows(attn_pair_row(a, v, m, next, 0), C, m, d);
    if (want_dq) pair_rows(kpw, k + ko, C, m, d, (int)(mp / 2));
    for (int i0 = 0; i0 < n; i0 += ATTN_BLOCK_ROWS) {
        int rows = min_int(ATTN_BLOCK_ROWS, n - i0), pairs = (rows + 1) / 2;
        /* dk's and dv's products over the block's row pairs: Pᵀ and dSᵀ (tw) are zeros past
         * them up to 16, and so are the block's pairs (cw) */
        padding over_pairs = {(int)mp, (int)padded16(pairs)};
        const float *q_block = q + qo + (size_t)i0 * C, *dout_block = dout + qo + (size_t)i0 * C;
        row_terms t = terms_of(a, pair, i0);
        block_logits(P, qw, q_block, kw, a, rows);
        if (next >= 0) attn_fetch_rows(attn_pair_row(a, q, n, next, i0), C, rows, d);
        probs_rows(P, lse + (size_t)pair * n + i0, &t, rows, mp);
        if (want_dv) { /* dv = Pᵀ dout, summed over the blocks */
            transposed_pairs(tw, half, P, mp, rows, m);
            pair_rows(cw, dout_block, C, rows, d, over_pairs.words);
            word_product(dv_sums, d, tw, half, cw, d, pairs, m, d / 16, i0 > 0, over_pairs);
        }
        if (!need_ds) continue;
        round_rows(dow, d / 2, dout_block, C, rows, d); /* dP = dout vᵀ, then dS in its place */
        word_product(dP, mp, dow, d / 2, vkw, mp, d / 2, rows, (int)(mp / 16), false,
                     block_rows_pad);
        if (next >= 0) attn_fetch_rows(attn_pair_row(a, dout, n, next, i0), C, rows, d);
        softmax_grad_rows(dP, want_dq ? sw : NULL, pv, dbias_h ? dbias_h + (size_t)i0 * m : NULL,
                          P, rows, m, mp);
        if (want_dq) { /* dq = scale dS k */
            word_product(dq_block, d, sw, pv, kpw, d, key_words(m), rows, d / 16, false,
                         (padding){ATTN_BLOCK_ROWS, (int)(mp / 2)});
            deliver(g->dq, g->dq_whole, g->dq16, qo + (size_t)i0 * C, C, dq_block, rows, d,
                    a->scale);
        }
        if (want_dk) { /* dk = scale dSᵀ q, summed over the blocks */
            transposed_pairs(tw, half, dP, mp, rows, m);
            pair_rows(cw, q_block, C, rows, d, over_pairs.words);
            word_product(dk_sums, d, tw, half, cw, d, pairs, m, d / 16, i0 > 0, over_pairs);
        }
    }
    tiles_end(tiles);
    if (want_dk) deliver(g->dk, g->dk_whole, g->dk16, ko, C, dk_sums, m, d, a->scale);
    if (want_dv) deliver(g->dv, g->dv_whole, g->dv16, ko, C, dv_sums, m, d, 1.0f);
}

#else /* no compiler support: as on a CPU without the instruction */

void attention_bf16_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                            const attn_dims *a, float *scratch, size_t per_thread) {
    (void)out, (void)lse, (void)q, (void)k, (void)v, (void)a, (void)scratch, (void)per_thread;
    FATAL("--precision bf16: this build has no AVX512_BF16 kernels; use --precision fp32");
}

void attention_bf16_backward_pair(const attn_grads *g, float *dbias_h, const float *dout,
                                  const float *lse, const float *q, const float *k, const float *v,
                                  const attn_dims *a, int pair, float *scratch) {
    (void)g, (void)dbias_h, (void)dout, (void)lse, (void)q, (void)k, (void)v;
    (void)a, (void)pair, (void)scratch;
    FATAL("--precision bf16: this build has no AVX512_BF16 kernels; use --precision fp32");
}
#endif
