#include "mlp.h"

#include <string.h>

#include "../core/precision.h"
#include "../core/threads.h"
#include "elementwise.h"
#include "gemm_bf16.h"
#include "matmul.h"
#include "norm.h"

/* rows a chunk, in whole vectors of 16, for M rows in chunks of at most `most` rows shared evenly
 * among the threads: with chunks of `most` rows, deit_t's 197 rows at batch 1 were one chunk, and
 * one thread idled */
static int even_chunk_rows(int64_t M, int most, int threads) {
    if (M <= 0) return 16;
    int64_t rounds = (M + (int64_t)most * threads - 1) / ((int64_t)most * threads);
    int64_t chunks = rounds * threads, rows = (M + chunks - 1) / chunks;
    int64_t whole = (rows + 15) / 16 * 16;
    /* rounded down where rounding up would leave a thread without a chunk (49 rows, 3 threads) */
    if (whole > 16 && (M + whole - 1) / whole < threads) whole -= 16;
    return (int)whole;
}

/* the most rows whose normalised rows, hidden rows and fc2 rows fit in about 1 MiB */
static int most_chunk_rows(const mlp_dims *d) {
    int rows = (int)((1 << 18) / (2 * d->C + d->hidden)) / 16 * 16;
    return rows < 16 ? 16 : rows;
}

int mlp_chunk_rows(const mlp_dims *d) {
    return even_chunk_rows(d->M, most_chunk_rows(d), vitc_threads());
}

/* floats of one layer's weights packed for gemm_bf16, in whole cache lines */
static size_t packed_floats(int N, int K) {
    return ((gemm_bf16_b_size(N, K) + 1) / 2 + 15) & ~(size_t)15;
}

/* under bf16 both layers' weights are packed once at the start of the scratch, not by each chunk's
 * product (docs/performance.md, op_mlp_residual) */
static size_t packed_weights_floats(const mlp_dims *d) {
    if (vitc_precision() != PRECISION_BF16) return 0;
    return packed_floats(d->hidden, d->C) + packed_floats(d->C, d->hidden);
}

size_t mlp_scratch_floats(const mlp_dims *d) {
    size_t chunk = (size_t)mlp_chunk_rows(d) * (2 * d->C + d->hidden);
    return packed_weights_floats(d) + (size_t)vitc_threads() * chunk;
}

/* out (rows, N) = x wᵀ + b, w as stored or packed (wp) */
static void layer(float *out, const float *x, const float *w, const bf16 *wp, const float *b,
                  int rows, int K, int N) {
    if (wp) gemm_bf16_packed_b_bias(rows, N, K, x, K, wp, b, out, N, 1);
    else linear_forward(out, x, w, b, rows, K, N);
}

/* one MLP step's operands, as mlp_residual_forward has them (w1p, w2p: the weights packed, or
 * NULL) */
typedef struct mlp_step {
    float *out, *h, *mean, *rstd;
    uint16_t *h_bf16;
    const float *res, *ln_w, *ln_b, *w1, *b1, *w2, *b2, *keep;
    const bf16 *w1p, *w2p;
    float eps;
    const mlp_dims *d;
} mlp_step;

/* rows r0.. (rows of them) of the step, in one thread's chunk scratch y */
static void mlp_rows(const mlp_step *m, int64_t r0, int rows, float *y) {
    const mlp_dims *d = m->d;
    int C = d->C, H = d->hidden, R = mlp_chunk_rows(d);
    float *act = y + (size_t)R * C, *branch = act + (size_t)R * H;
    float *pre = m->h ? m->h + r0 * H : act;
    layernorm_forward(y, m->mean + r0, m->rstd + r0, m->res + r0 * C, m->ln_w, m->ln_b, rows, C,
                      m->eps);
    layer(pre, y, m->w1, m->w1p, m->b1, rows, C, H);
    if (m->w2p) { /* the activation in bf16, as fc2's product reads it: nothing to pack */
        gelu_forward_bf16((bf16 *)act, m->h_bf16 ? m->h_bf16 + r0 * H : NULL, pre,
                          (int64_t)rows * H);
        gemm_bf16_a16_packed_b_bias(rows, C, H, (bf16 *)act, H, m->w2p, m->b2, branch, C, 1);
    } else {
        gelu_forward(act, pre, (int64_t)rows * H);
        layer(branch, act, m->w2, NULL, m->b2, rows, H, C);
    }
    for (int i = 0; i < rows; i++) {
        float k = m->keep ? m->keep[(r0 + i) / d->rows_per_sample] : 1.0f;
        const float *src = m->res + (r0 + i) * C, *add = branch + (size_t)i * C;
        float *dst = m->out + (r0 + i) * C;
        for (int j = 0; j < C; j++) dst[j] = src[j] + k * add[j];
    }
}

/* rows r0.. (rows of them) of a dropped sample: the residual alone; h, mean and rstd zeros, which
 * the backward meets with a zero gradient (finite values, whose products with it add nothing) */
static void dropped_rows(const mlp_step *m, int64_t r0, int rows) {
    int C = m->d->C, H = m->d->hidden;
    size_t hidden = (size_t)rows * H;
    memcpy(m->out + r0 * C, m->res + r0 * C, sizeof(float) * (size_t)rows * C);
    if (m->h) memset(m->h + r0 * H, 0, sizeof(float) * hidden);
    if (m->h_bf16) memset(m->h_bf16 + r0 * H, 0, sizeof(uint16_t) * hidden);
    memset(m->mean + r0, 0, sizeof(float) * (size_t)rows);
    memset(m->rstd + r0, 0, sizeof(float) * (size_t)rows);
}

/* A dropped sample's rows (keep 0) skip the branch (dropped_rows). */
void mlp_residual_forward(float *out, float *h, uint16_t *h_bf16, float *mean, float *rstd,
                          const float *res, const float *ln_w, const float *ln_b, float eps,
                          const float *w1, const float *b1, const float *w2, const float *b2,
                          const float *keep, const mlp_dims *d, float *scratch) {
    int C = d->C, H = d->hidden, R = mlp_chunk_rows(d), per = d->rows_per_sample;
    int64_t chunks = (d->M + R - 1) / R;
    mlp_step m = {out, h, mean, rstd, h_bf16, res, ln_w, ln_b, w1, b1, w2, b2, keep, NULL, NULL,
                  eps, d};
    if (packed_weights_floats(d)) {
        bf16 *w1p = (bf16 *)scratch, *w2p = (bf16 *)(scratch + packed_floats(H, C));
        gemm_bf16_pack_b(w1p, true, H, C, w1, C, vitc_threads());
        gemm_bf16_pack_b(w2p, true, C, H, w2, H, vitc_threads());
        m.w1p = w1p, m.w2p = w2p;
        scratch += packed_weights_floats(d);
    }
#pragma omp parallel for schedule(dynamic)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t end = c * R + R <= d->M ? c * R + R : d->M;
        float *y = scratch + (size_t)vitc_thread_id() * R * (2 * C + H);
        /* the chunk's runs of rows of kept samples, and of dropped ones */
        for (int64_t r0 = c * R, r1; r0 < end; r0 = r1) {
            bool kept = !keep || keep[r0 / per] != 0.0f;
            for (r1 = r0; r1 < end && (!keep || (keep[r1 / per] != 0.0f) == kept);)
                r1 = (r1 / per + 1) * per < end ? (r1 / per + 1) * per : end;
            if (kept) mlp_rows(&m, r0, (int)(r1 - r0), y);
            else dropped_rows(&m, r0, (int)(r1 - r0));
        }
    }
}

/* the hidden layer's chunks: a chunk's g w2 in about 1 MiB, the chunks shared evenly among the
 * threads */
static int hidden_chunk_rows(const mlp_dims *d) {
    int most = (int)((1 << 18) / d->hidden) / 32 * 32;
    return most < 32 ? 32 : most;
}

size_t mlp_hidden_backward_scratch_floats(const mlp_dims *d) {
    return packed_floats(d->hidden, d->C) + (size_t)vitc_threads() * hidden_chunk_rows(d) * d->hidden;
}

void mlp_hidden_backward_bf16(uint16_t *dh, uint16_t *act, const uint16_t *h, const float *g,
                              const float *w2, const mlp_dims *d, float *scratch) {
    if (d->M == 0) return;
    int C = d->C, H = d->hidden, threads = vitc_threads();
    int R = even_chunk_rows(d->M, hidden_chunk_rows(d), threads);
    int64_t chunks = (d->M + R - 1) / R;
    size_t per_thread = (size_t)hidden_chunk_rows(d) * H; /* floats of g w2: the most rows a chunk */
    bf16 *w2p = (bf16 *)scratch; /* fc2's weight as the product g w2 reads it: (C, hidden) */
    if (dh) gemm_bf16_pack_b(w2p, false, H, C, w2, H, threads);
    scratch += packed_floats(H, C);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t r0 = c * R, n = (int64_t)(r0 + R <= d->M ? R : d->M - r0) * H;
        float *dact = scratch + vitc_thread_id() * per_thread;
        if (dh) gemm_bf16_packed_b_bias((int)(n / H), H, C, g + r0 * C, C, w2p, NULL, dact, H, 1);
        for (int64_t b = 0; b < n; b += GELU_BLOCK) {
            int m = (int)(n - b < GELU_BLOCK ? n - b : GELU_BLOCK);
            gelu_bf16_backward_block(act + r0 * H + b, dh ? dh + r0 * H + b : NULL, NULL,
                                     h + r0 * H + b, dact + b, m);
        }
    }
}

void scale_groups(float *dst, const float *x, const float *scale, int64_t groups, int64_t per,
                  bool accumulate) {
    if (per == 1 && accumulate) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < groups; i++) dst[i] += x[i] * scale[i];
    } else if (per == 1) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < groups; i++) dst[i] = x[i] * scale[i];
    } else if (accumulate) {
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t g = 0; g < groups; g++)
            for (int64_t j = 0; j < per; j++) dst[g * per + j] += x[g * per + j] * scale[g];
    } else {
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t g = 0; g < groups; g++)
            for (int64_t j = 0; j < per; j++) dst[g * per + j] = x[g * per + j] * scale[g];
    }
}
