#include "attention.h"

#include <math.h>
#include <string.h>

#include "../core/check.h"
#include "../core/precision.h"
#include "../core/threads.h"
#include "attention_blocks.h"
#include "fast_exp.h"
#include "matmul.h"
#include "norm.h"
#include "reduce.h"
#include "simd.h"

/* one pair per thread when there are enough (vitc_items_in_parallel); else the pairs run in order
 * with OpenBLAS threading each GEMM and the softmax rows split */
bool attn_pairs_in_parallel(const attn_dims *a) { return vitc_items_in_parallel(a->seqs * a->heads); }

/* P = scale q kᵀ for one pair (bias and mask are added by rows) */
static void pair_logits(float *P, const float *q, const float *k, const attn_dims *a, int pair) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    gemm_strided(false, true, n, m, d, a->scale, q + (size_t)s * n * C + h * d, C,
                 k + (size_t)s * m * C + h * d, C, 0.0f, P, m);
}

/* dS = P ⊙ (dP - rowsum(dP ⊙ P)) in place of dP (rows of stride ld), summed into dbias_h (rows of
 * m) when given */
static void attn_softmax_grad_rows(float *dP, const float *P, size_t ld, float *dbias_h, int n,
                                   int m, bool split_rows) {
#pragma omp parallel for schedule(static) if (split_rows)
    for (int i = 0; i < n; i++) {
        float *g = dP + (size_t)i * ld;
        const float *y = P + (size_t)i * ld;
        float dot = reduce_dot(g, y, m);
        for (int j = 0; j < m; j++) g[j] = y[j] * (g[j] - dot);
        if (dbias_h)
            for (int j = 0; j < m; j++) dbias_h[(size_t)i * m + j] += g[j];
    }
}

/* ---- Register tiles, for heads of 16 to 64 channels ----
 * A pair's products are too small for OpenBLAS to run near speed (Swin's 49 x 49 x 32 windows: 55
 * GFLOP/s on 2 threads, a fifth of a large GEMM), so such heads run on tiles of the machine's vectors
 * (simd.h): with AVX-512, the logits of 4 query rows x 64 keys, or 4-8 output rows x d channels, in
 * 16 of its 32 registers; with AVX2, 4 rows x 16 keys, or 6 rows x 16 channels, in 8-12 of its 16.
 * Queries go in blocks of ATTN_BLOCK_ROWS rows, whose logits stay in L2. */
#if VEC == 16
#define LOGIT_VECS 4
#else
#define LOGIT_VECS 2
#endif

/* how a call runs: fp32 tiles (these), bf16 tiles (attention_bf16.c), or a GEMM a product
 * (gemm_strided: OpenBLAS, or gemm_bf16 under bf16) */
typedef enum { ON_GEMMS, ON_TILES, ON_BF16_TILES } attn_path;

static bool tile_width(const attn_dims *a) { return a->d % 16 == 0 && a->d <= 64; }

static attn_path forward_path(const attn_dims *a) {
    if (!tile_width(a)) return ON_GEMMS;
    return vitc_precision() == PRECISION_BF16 ? ON_BF16_TILES : ON_TILES;
}

/* The backward's five products per pair: on fp32 tiles faster than through OpenBLAS for heads of
 * 32 channels (Swin's and CSwin's: 1.1-1.15x), no faster for 64 (DeiT's 197 x 197); with few pairs
 * the GEMMs are better threaded. */
static attn_path backward_path(const attn_dims *a) {
    attn_path p = forward_path(a);
    if (p == ON_GEMMS || !attn_pairs_in_parallel(a)) return ON_GEMMS;
    return p == ON_TILES && a->d > 32 ? ON_GEMMS : p;
}

/* Rows of a block's logits (stride mp, a multiple of 16), each pass over all rows before the next:
 * done row by row, each row's chain of reductions and exp polynomials ran at its latency. */

/* the logits (the product applied their scale) plus their bias and mask rows; -inf in the padding
 * up to mp (none on the GEMM path, whose rows are m long) */
WIDE_VECTORS static void attn_block_add_bias_mask(float *L, const attn_dims *a, int pair, int i0,
                                                  int i1, size_t mp) {
    size_t nm = (size_t)a->n * a->m;
    int m = a->m, h = pair % a->heads, w = (pair / a->heads) % a->windows;
    for (int i = i0; i < i1; i++) {
        float *p = L + (i - i0) * mp;
        if (a->bias) {
            const float *bias = a->bias + h * nm + (size_t)i * m;
            for (int j = 0; j < m; j++) p[j] += bias[j];
        }
        if (a->mask) {
            const float *mask = a->mask + w * nm + (size_t)i * m;
            for (int j = 0; j < m; j++) p[j] += mask[j];
        }
        for (size_t j = m; j < mp; j++) p[j] = -INFINITY;
    }
}

/* softmax of each row in place; lse (rows) receives each row's log-sum-exp */
WIDE_VECTORS static void attn_block_softmax(float *L, float *lse, int rows, size_t mp) {
    for (int i = 0; i < rows; i++) lse[i] = reduce_max(L + i * mp, (int)mp);
    for (int i = 0; i < rows; i++) exp_shifted_row(L + i * mp, (int)mp, lse[i]);
    for (int i = 0; i < rows; i++) {
        float *p = L + i * mp, sum = reduce_sum(p, (int)mp), inv = 1.0f / sum;
        for (size_t j = 0; j < mp; j++) p[j] *= inv;
        lse[i] += logf(sum);
    }
}

/* the forward's probabilities again from the logits (bias and mask added) and each row's lse */
WIDE_VECTORS static void attn_block_probs(float *L, const float *lse, int rows, size_t mp) {
    for (int i = 0; i < rows; i++) exp_shifted_row(L + i * mp, (int)mp, lse[i]);
}

/* bt (d, mp) = scale * bᵀ for b's m rows (row stride ld), zero in the padding columns */
static void pack_transposed(float *bt, const float *b, int ld, int m, int d, float scale) {
    size_t mp = padded16(m);
    for (size_t j0 = 0; j0 < mp; j0 += VEC)
        for (int t0 = 0; t0 < d; t0 += VEC) {
            vecf x[VEC];
#pragma GCC unroll 16
            for (int r = 0; r < VEC; r++)
                x[r] = j0 + r < (size_t)m ? scale * load_vec(b + (j0 + r) * ld + t0) : (vecf){0};
            transpose_vec(x);
#pragma GCC unroll 16
            for (int r = 0; r < VEC; r++) store_vec(bt + (t0 + r) * mp + j0, x[r]);
        }
}

/* out (4 rows of stride mp, VEC nv columns) = the 4 rows a[r] (d floats each) · bt's columns */
static inline __attribute__((always_inline)) void logits_tile(float *out, size_t mp,
                                                               const float *const a[4],
                                                               const float *bt, int d, int nv) {
    vecf acc[4][LOGIT_VECS];
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = (vecf){0};
    for (int t = 0; t < d; t++) {
        vecf b[LOGIT_VECS];
        for (int v = 0; v < nv; v++) {
            b[v] = load_vec(bt + t * mp + VEC * v);
            KEEP_IN_REGISTER(b[v]);
        }
        for (int r = 0; r < 4; r++) {
            vecf x = splat(a[r][t]);
            for (int v = 0; v < nv; v++) acc[r][v] += x * b[v];
        }
    }
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < nv; v++) store_vec(out + r * mp + VEC * v, acc[r][v]);
}

/* L (rows of stride mp) = rows i0..i1 of a (row stride lda) · bt: the block's logits. The last group
 * of 4 rows repeats row i1 - 1 into L's spare rows (L holds ATTN_BLOCK_ROWS rows). */
static void block_logits(float *L, const float *a, int lda, int i0, int i1, const float *bt, int m,
                         int d) {
    size_t mp = padded16(m);
    for (int i = i0; i < i1; i += 4) {
        const float *rows[4];
        for (int r = 0; r < 4; r++) rows[r] = a + (size_t)(i + r < i1 ? i + r : i1 - 1) * lda;
        float *out = L + (size_t)(i - i0) * mp;
        size_t j = 0, step = LOGIT_VECS * VEC;
        for (; j + step <= mp; j += step) logits_tile(out + j, mp, rows, bt + j, d, LOGIT_VECS);
        switch ((mp - j) / VEC) { /* fewer than LOGIT_VECS vectors of keys left */
        case 1: logits_tile(out + j, mp, rows, bt + j, d, 1); break;
#if LOGIT_VECS == 4
        case 2: logits_tile(out + j, mp, rows, bt + j, d, 2); break;
        case 3: logits_tile(out + j, mp, rows, bt + j, d, 3); break;
#endif
        }
    }
}

/* out[r] (VEC dv floats) = alpha * sum_t a[r][t * ats] b[t] (+ out[r] when accumulating), for the
 * rows whose out[r] is not NULL; b's T rows have stride ldb */
static inline __attribute__((always_inline)) void product_tile(float *const out[8], float alpha,
                                                                bool accumulate,
                                                                const float *const a[8], size_t ats,
                                                                const float *b, int ldb, int T,
                                                                int rows, int dv) {
    vecf acc[8][4];
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < dv; v++) acc[r][v] = (vecf){0};
    for (int t = 0; t < T; t++) {
        vecf bv[4];
        for (int v = 0; v < dv; v++) {
            bv[v] = load_vec(b + (size_t)t * ldb + VEC * v);
            KEEP_IN_REGISTER(bv[v]);
        }
        for (int r = 0; r < rows; r++) {
            vecf x = splat(a[r][t * ats]);
            for (int v = 0; v < dv; v++) acc[r][v] += x * bv[v];
        }
    }
    for (int r = 0; r < rows; r++)
        if (out[r])
            for (int v = 0; v < dv; v++) {
                vecf y = alpha * acc[r][v];
                if (accumulate) y += load_vec(out[r] + VEC * v);
                store_vec(out[r] + VEC * v, y);
            }
}

/* out row r (row stride ldo, d channels) = alpha * sum_t A(r, t) b[t] (+= when accumulating) for r
 * in [0, R), with A(r, t) = a[r * ars + t * ats]: a block's probabilities times v (ars the row
 * stride), or their transpose times the block's output gradient (ats the row stride) */
static void block_product(float *out, int ldo, float alpha, bool accumulate, const float *a,
                          size_t ars, size_t ats, int R, const float *b, int ldb, int T, int d) {
#if VEC == 16 /* the whole head a tile: 8 rows of 1-2 vectors, or 4 rows of 3-4 */
    int dv = d / VEC, rows = dv == 4 || dv == 3 ? 4 : 8, chunk = d;
#else /* 6 rows x 16 channels a tile, the head in chunks of 16 */
    int rows = 6, chunk = 2 * VEC;
#endif
    for (int r0 = 0; r0 < R; r0 += rows) {
        const float *arow[8];
        float *orow[8];
        for (int r = 0; r < rows; r++) {
            int rr = r0 + r < R ? r0 + r : R - 1;
            arow[r] = a + rr * ars;
            orow[r] = r0 + r < R ? out + (size_t)(r0 + r) * ldo : NULL;
        }
        for (int c0 = 0; c0 < d; c0 += chunk) {
            float *o[8];
            for (int r = 0; r < rows; r++) o[r] = orow[r] ? orow[r] + c0 : NULL;
#if VEC == 16
            switch (dv) {
            case 1: product_tile(o, alpha, accumulate, arow, ats, b + c0, ldb, T, 8, 1); break;
            case 2: product_tile(o, alpha, accumulate, arow, ats, b + c0, ldb, T, 8, 2); break;
            case 3: product_tile(o, alpha, accumulate, arow, ats, b + c0, ldb, T, 4, 3); break;
            default: product_tile(o, alpha, accumulate, arow, ats, b + c0, ldb, T, 4, 4); break;
            }
#else
            product_tile(o, alpha, accumulate, arow, ats, b + c0, ldb, T, 6, 2);
#endif
        }
    }
}

/* floats of one thread's tiled scratch: kᵀ (and vᵀ) packed, a block's logits (and their gradient) */
static size_t tiled_thread_floats(const attn_dims *a, bool backward) {
    size_t mp = padded16(a->m);
    return (backward ? 2 : 1) * ((size_t)a->d * mp + ATTN_BLOCK_ROWS * mp);
}

/* halved while the blocks are fewer than 4 a thread (batch 1's agent tokens: 3 pairs of 49 rows on
 * 2 threads) */
int attn_forward_block_rows(const attn_dims *a) {
    int rows = ATTN_BLOCK_ROWS, pairs = a->seqs * a->heads;
    while (rows > 8 && (int64_t)pairs * ((a->n + rows - 1) / rows) < 4 * vitc_threads()) rows /= 2;
    return rows;
}

/* rows [i0, i1) of one pair, kt its packed scale·kᵀ */
static void tiled_forward_block(float *out, float *lse, float *L, const float *kt, const float *q,
                                const float *v, const attn_dims *a, int pair, int i0, int i1) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    size_t mp = padded16(m), qo = (size_t)s * n * C + h * d, vo = (size_t)s * m * C + h * d;
    float row_lse[ATTN_BLOCK_ROWS];
    block_logits(L, q + qo, C, i0, i1, kt, m, d);
    attn_block_add_bias_mask(L, a, pair, i0, i1, mp);
    attn_block_softmax(L, row_lse, i1 - i0, mp);
    if (lse) memcpy(lse + (size_t)pair * n + i0, row_lse, sizeof(float) * (i1 - i0));
    block_product(out + qo + (size_t)i0 * C, C, 1.0f, false, L, mp, 1, i1 - i0, v + vo, C, m, d);
}

static void tiled_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                          const attn_dims *a, float *scratch) {
    int block_rows = attn_forward_block_rows(a), blocks = (a->n + block_rows - 1) / block_rows;
    int items = a->seqs * a->heads * blocks, C = a->heads * a->d;
    size_t per_thread = tiled_thread_floats(a, false), mp = padded16(a->m);
#pragma omp parallel
    {
        float *kt = scratch + vitc_thread_id() * per_thread, *L = kt + (size_t)a->d * mp;
        int packed = -1; /* the pair whose kᵀ kt holds: a thread's items are consecutive */
#pragma omp for schedule(static)
        for (int it = 0; it < items; it++) {
            int pair = it / blocks, i0 = it % blocks * block_rows;
            int i1 = i0 + block_rows < a->n ? i0 + block_rows : a->n;
            if (pair != packed) {
                int s = pair / a->heads, h = pair % a->heads;
                pack_transposed(kt, k + (size_t)s * a->m * C + h * a->d, C, a->m, a->d, a->scale);
                packed = pair;
            }
            /* the next item's rows (attn_fetch_rows), v's after the product that reads this v */
            int next = (it + 1) / blocks, j0 = (it + 1) % blocks * block_rows;
            int next_rows = j0 + block_rows < a->n ? block_rows : a->n - j0;
            bool more = it + 1 < items, keys = more && next != pair;
            if (keys) attn_fetch_rows(attn_pair_row(a, k, a->m, next, 0), C, a->m, a->d);
            if (more) attn_fetch_rows(attn_pair_row(a, q, a->n, next, j0), C, next_rows, a->d);
            tiled_forward_block(out, lse, L, kt, q, v, a, pair, i0, i1);
            if (keys) attn_fetch_rows(attn_pair_row(a, v, a->m, next, 0), C, a->m, a->d);
        }
    }
}

static void tiled_backward_pair(float *dq, float *dk, float *dv, float *dbias_h, const float *dout,
                                const float *lse, const float *q, const float *k, const float *v,
                                const attn_dims *a, int pair, float *scratch) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    size_t mp = padded16(m), qo = (size_t)s * n * C + h * d, ko = (size_t)s * m * C + h * d;
    float *kt = scratch, *vt = kt + (size_t)d * mp, *P = vt + (size_t)d * mp,
          *dP = P + ATTN_BLOCK_ROWS * mp;
    bool need_ds = dq || dk || dbias_h;
    int next = pair + 1 < a->seqs * a->heads ? pair + 1 : -1;
    pack_transposed(kt, k + ko, C, m, d, a->scale);
    if (next >= 0) attn_fetch_rows(attn_pair_row(a, k, m, next, 0), C, m, d);
    if (need_ds) pack_transposed(vt, v + ko, C, m, d, 1.0f);
    if (next >= 0) attn_fetch_rows(attn_pair_row(a, v, m, next, 0), C, m, d);
    for (int i0 = 0; i0 < n; i0 += ATTN_BLOCK_ROWS) {
        int i1 = i0 + ATTN_BLOCK_ROWS < n ? i0 + ATTN_BLOCK_ROWS : n, rows = i1 - i0;
        block_logits(P, q + qo, C, i0, i1, kt, m, d);
        attn_block_add_bias_mask(P, a, pair, i0, i1, mp);
        attn_block_probs(P, lse + (size_t)pair * n + i0, rows, mp);
        if (next >= 0) attn_fetch_rows(attn_pair_row(a, q, n, next, i0), C, rows, d);
        const float *dout_block = dout + qo + (size_t)i0 * C;
        if (dv) block_product(dv + ko, C, 1.0f, true, P, 1, mp, m, dout_block, C, rows, d);
        if (!need_ds) continue;
        block_logits(dP, dout_block, C, 0, rows, vt, m, d);
        if (next >= 0) attn_fetch_rows(attn_pair_row(a, dout, n, next, i0), C, rows, d);
        attn_softmax_grad_rows(dP, P, mp, dbias_h ? dbias_h + (size_t)i0 * m : NULL, rows, m, false);
        if (dq) block_product(dq + qo + (size_t)i0 * C, C, a->scale, true, dP, mp, 1, rows, k + ko, C, m, d);
        if (dk) block_product(dk + ko, C, a->scale, true, dP, 1, mp, m, q + qo + (size_t)i0 * C, C, rows, d);
    }
}

/* ---- Entry points, and the GEMM path: other head widths, and DeiT's backward ---- */

/* one thread's scratch, besides private bias gradients */
static size_t thread_floats(const attn_dims *a, bool backward) {
    switch (backward ? backward_path(a) : forward_path(a)) {
    case ON_TILES: return tiled_thread_floats(a, backward);
    case ON_BF16_TILES: return attention_bf16_thread_floats(a, backward);
    default: return (backward ? 2 : 1) * (size_t)a->n * a->m;
    }
}

size_t attention_scratch_floats(const attn_dims *a, bool backward, bool dbias) {
    size_t nm = (size_t)a->n * a->m;
    return (size_t)vitc_threads() * (thread_floats(a, backward) + (dbias ? a->heads * nm : 0));
}

static void forward_pair(float *out, float *lse, float *P, const float *q, const float *k,
                         const float *v, const attn_dims *a, int pair, bool split_rows) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    pair_logits(P, q, k, a, pair);
#pragma omp parallel for schedule(static) if (split_rows)
    for (int i = 0; i < n; i++) {
        float *p = P + (size_t)i * m;
        attn_block_add_bias_mask(p, a, pair, i, i + 1, m);
        float row_lse = softmax_row(p, m);
        if (lse) lse[(size_t)pair * n + i] = row_lse;
    }
    gemm_strided(false, false, n, d, m, 1.0f, P, m, v + (size_t)s * m * C + h * d, C, 0.0f,
                 out + (size_t)s * n * C + h * d, C);
}

void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       const attn_dims *a, float *scratch) {
    switch (forward_path(a)) {
    case ON_TILES: tiled_forward(out, lse, q, k, v, a, scratch); return;
    case ON_BF16_TILES: attention_bf16_forward(out, lse, q, k, v, a, scratch, thread_floats(a, false)); return;
    default: break;
    }
    size_t nm = (size_t)a->n * a->m;
    int pairs = a->seqs * a->heads;
    if (attn_pairs_in_parallel(a)) {
#pragma omp parallel for schedule(static)
        for (int p = 0; p < pairs; p++)
            forward_pair(out, lse, scratch + vitc_thread_id() * nm, q, k, v, a, p, false);
    } else {
        for (int p = 0; p < pairs; p++) forward_pair(out, lse, scratch, q, k, v, a, p, true);
    }
}


/* the forward's probabilities again, from the logits and each row's log-sum-exp */
static void recompute_probs(float *P, const float *lse, const float *q, const float *k,
                            const attn_dims *a, int pair, bool split_rows) {
    int n = a->n, m = a->m;
    pair_logits(P, q, k, a, pair);
#pragma omp parallel for schedule(static) if (split_rows)
    for (int i = 0; i < n; i++) {
        float *p = P + (size_t)i * m, row_lse = lse[(size_t)pair * n + i];
        attn_block_add_bias_mask(p, a, pair, i, i + 1, m);
        exp_shifted_row(p, m, row_lse);
    }
}

static void backward_pair(float *dq, float *dk, float *dv, float *dbias, const float *dout,
                          const float *lse, const float *q, const float *k, const float *v,
                          const attn_dims *a, int pair, float *P, bool split_rows) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    size_t qo = (size_t)s * n * C + h * d, ko = (size_t)s * m * C + h * d;
    float *dP = P + (size_t)n * m;
    recompute_probs(P, lse, q, k, a, pair, split_rows);
    if (dv) gemm_strided(true, false, m, d, n, 1.0f, P, m, dout + qo, C, 1.0f, dv + ko, C);
    if (!dq && !dk && !dbias) return;
    gemm_strided(false, true, n, m, d, 1.0f, dout + qo, C, v + ko, C, 0.0f, dP, m);
    attn_softmax_grad_rows(dP, P, m, dbias ? dbias + (size_t)h * n * m : NULL, n, m, split_rows);
    if (dq) gemm_strided(false, false, n, d, m, a->scale, dP, m, k + ko, C, 1.0f, dq + qo, C);
    if (dk) gemm_strided(true, false, m, d, n, a->scale, dP, m, q + qo, C, 1.0f, dk + ko, C);
}

bool attention_grads_in_bf16(const attn_dims *a) { return backward_path(a) == ON_BF16_TILES; }

/* the fp32 paths add into the gradients block by block: those written whole start from zeros */
static void zero_whole(const attn_grads *g, const attn_dims *a) {
    size_t q_floats = (size_t)a->seqs * a->n * a->heads * a->d;
    size_t kv_floats = (size_t)a->seqs * a->m * a->heads * a->d;
    if (g->dq && g->dq_whole) memset(g->dq, 0, sizeof(float) * q_floats);
    if (g->dk && g->dk_whole) memset(g->dk, 0, sizeof(float) * kv_floats);
    if (g->dv && g->dv_whole) memset(g->dv, 0, sizeof(float) * kv_floats);
}

void attention_backward(const attn_grads *g, float *dbias, const float *dout, const float *lse,
                        const float *q, const float *k, const float *v, const attn_dims *a,
                        float *scratch) {
    size_t hnm = (size_t)a->heads * a->n * a->m;
    int pairs = a->seqs * a->heads;
    attn_path path = backward_path(a);
    CHECK(path == ON_BF16_TILES || (!g->dq16 && !g->dk16 && !g->dv16),
          "attention: bf16 gradients off the bf16 tiles (attention_grads_in_bf16)");
    float *dq = g->dq, *dk = g->dk, *dv = g->dv;
    if (path != ON_BF16_TILES) zero_whole(g, a);
    if (path == ON_GEMMS && !attn_pairs_in_parallel(a)) {
        for (int p = 0; p < pairs; p++)
            backward_pair(dq, dk, dv, dbias, dout, lse, q, k, v, a, p, scratch, true);
        return;
    }
    /* each thread sums its pairs' bias gradients privately; the sums are added in thread order */
    int threads = vitc_threads();
    size_t per_thread = thread_floats(a, true);
    float *private_dbias = scratch + (size_t)threads * per_thread;
    if (dbias) memset(private_dbias, 0, sizeof(float) * threads * hnm);
#pragma omp parallel for schedule(static)
    for (int p = 0; p < pairs; p++) {
        int t = vitc_thread_id();
        float *dbias_t = dbias ? private_dbias + t * hnm : NULL;
        float *dbias_h = dbias_t ? dbias_t + (p % a->heads) * (hnm / a->heads) : NULL;
        if (path == ON_TILES)
            tiled_backward_pair(dq, dk, dv, dbias_h, dout, lse, q, k, v, a, p, scratch + t * per_thread);
        else if (path == ON_BF16_TILES)
            attention_bf16_backward_pair(g, dbias_h, dout, lse, q, k, v, a, p,
                                         scratch + t * per_thread);
        else
            backward_pair(dq, dk, dv, dbias_t, dout, lse, q, k, v, a, p, scratch + t * per_thread, false);
    }
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < hnm; i++)
            for (int t = 0; t < threads; t++) dbias[i] += private_dbias[t * hnm + i];
    }
}
