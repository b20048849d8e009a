#include "norm.h"

#include <math.h>
#include <stddef.h>

#include "../core/arena.h"
#include "bf16_store.h"
#include "fast_exp.h"
#include "reduce.h"
#include "spatial.h"

static inline void layernorm_row(float *o, float *mean, float *rstd, const float *xr,
                                 const float *w, const float *b, int C, float eps) {
    float m = reduce_sum(xr, C) / C;
    for (int j = 0; j < C; j++) o[j] = xr[j] - m; /* centred, for the variance */
    float s = 1.0f / sqrtf(reduce_dot(o, o, C) / C + eps);
    for (int j = 0; j < C; j++) o[j] = o[j] * s * w[j] + b[j];
    *mean = m;
    *rstd = s;
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int64_t M, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++)
        layernorm_row(out + r * C, &mean[r], &rstd[r], x + r * C, w, b, C, eps);
}

void layernorm_windows_forward(float *out, uint16_t *out_bf16, float *mean, float *rstd,
                               const float *x, const float *w, const float *b, int B, int H, int W,
                               int C, int wh, int ww, int shift, float eps) {
    int64_t rows = (int64_t)B * (H / wh) * (W / ww) * wh; /* one window row (ww tokens) each */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        window_row at = window_row_at(r, H, W, wh, ww, shift);
        float rounded[out_bf16 ? C : 1];
        for (int t = 0; t < ww; t++) {
            int64_t src = at.map_row + (at.col + t) % W, dst = at.token + t;
            float *o = out_bf16 ? rounded : out + dst * C;
            layernorm_row(o, &mean[src], &rstd[src], x + src * C, w, b, C, eps);
            if (out_bf16) bf16_round(out_bf16 + dst * C, rounded, C);
        }
    }
}

void layernorm_apply(float *out, const float *x, const float *mean, const float *rstd,
                     const float *w, const float *b, int64_t M, int C) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++)
        for (int j = 0; j < C; j++) out[r * C + j] = (x[r * C + j] - mean[r]) * rstd[r] * w[j] + b[j];
}

/* One pass over the rows: each of LAYERNORM_CHUNKS fixed row chunks adds its dx rows and sums its
 * share of dw and db, the shares then added in order (the same sums whatever the thread count; the
 * column-block split read dout and x a second time). */
#define LAYERNORM_CHUNKS 32

/* x is a kept activation far away in memory, dout and dx as large: each row fetches the rows two
 * ahead of the three, which the row-by-row loop gave the hardware too little time to fetch */
static inline void fetch_rows_ahead(const float *g, const float *x, const float *dx, int C) {
    for (int j = 0; j < C; j += 16) {
        __builtin_prefetch(g + 2 * C + j);
        __builtin_prefetch(x + 2 * C + j);
        if (dx) __builtin_prefetch(dx + 2 * C + j, 1);
    }
}

void layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                        const float *mean, const float *rstd, const float *w, int64_t M, int C) {
    size_t n_part = dw || db ? 2 * (size_t)LAYERNORM_CHUNKS * C : 0;
    float *part = n_part ? scratch_floats(n_part) : NULL;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < LAYERNORM_CHUNKS; c++) {
        float *part_w = part ? part + 2 * (size_t)c * C : NULL, *part_b = part ? part_w + C : NULL;
        if (part)
            for (int j = 0; j < 2 * C; j++) part_w[j] = 0;
        for (int64_t r = M * c / LAYERNORM_CHUNKS; r < M * (c + 1) / LAYERNORM_CHUNKS; r++) {
            const float *g = dout + r * C, *xr = x + r * C;
            fetch_rows_ahead(g, xr, dx ? dx + r * C : NULL, C);
            float m = mean[r], s = rstd[r], gh[C], xh[C];
            for (int j = 0; j < C; j++) gh[j] = g[j] * w[j], xh[j] = (xr[j] - m) * s;
            if (dx) {
                /* dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) with ĝ = g w, x̂ = (x - mean) rstd */
                float mean_g = reduce_sum(gh, C) / C, mean_gx = reduce_dot(gh, xh, C) / C;
                float *d = dx + r * C;
                for (int j = 0; j < C; j++) d[j] += s * (gh[j] - mean_g - xh[j] * mean_gx);
            }
            if (part)
                for (int j = 0; j < C; j++) part_w[j] += g[j] * xh[j], part_b[j] += g[j];
        }
    }
    for (int c = 0; part && c < LAYERNORM_CHUNKS; c++)
        for (int j = 0; j < C; j++) {
            if (dw) dw[j] += part[2 * (size_t)c * C + j];
            if (db) db[j] += part[(2 * (size_t)c + 1) * C + j];
        }
    scratch_done(part, n_part);
}

void l2norm_forward(float *out, const float *x, int64_t M, int C) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++) {
        float s = 0;
        for (int j = 0; j < C; j++) s += x[r * C + j] * x[r * C + j];
        out[r] = sqrtf(s);
    }
}

void l2norm_backward(float *dx, const float *dout, const float *x, const float *out, int64_t M, int C) {
    /* d|x|/dx = x / |x| (0 at the origin, as torch's subgradient) */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++) {
        float f = out[r] > 0 ? dout[r] / out[r] : 0.0f;
        for (int j = 0; j < C; j++) dx[r * C + j] += f * x[r * C + j];
    }
}

float softmax_row(float *p, int n) {
    float mx = reduce_max(p, n);
    exp_shifted_row(p, n, mx);
    float sum = reduce_sum(p, n), inv = 1.0f / sum;
    for (int j = 0; j < n; j++) p[j] *= inv;
    return mx + logf(sum);
}

void softmax_forward(float *out, const float *x, const float *bias, int64_t M, int N, int64_t NB) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++) {
        const float *xr = x + r * N;
        const float *br = bias ? bias + (r * N) % NB : NULL;
        float *o = out + r * N;
        for (int j = 0; j < N; j++) o[j] = br ? xr[j] + br[j] : xr[j];
        softmax_row(o, N);
    }
}

void softmax_backward(float *dlogits, const float *dout, const float *y, int64_t M, int N) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++) {
        const float *g = dout + r * N, *yr = y + r * N;
        float dot = reduce_dot(g, yr, N);
        float *d = dlogits + r * N;
        for (int j = 0; j < N; j++) d[j] = yr[j] * (g[j] - dot);
    }
}

void mean_forward(float *out, const float *x, int64_t outer, int len, int64_t inner) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        float *dst = out + o * inner;
        const float *src = x + o * len * inner;
        for (int64_t i = 0; i < inner; i++) dst[i] = 0;
        for (int l = 0; l < len; l++)
            for (int64_t i = 0; i < inner; i++) dst[i] += src[l * inner + i];
        for (int64_t i = 0; i < inner; i++) dst[i] /= len;
    }
}

void mean_backward(float *dx, const float *dout, int64_t outer, int len, int64_t inner) {
    const float f = 1.0f / len;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++)
        for (int l = 0; l < len; l++)
            for (int64_t i = 0; i < inner; i++) dx[(o * len + l) * inner + i] += f * dout[o * inner + i];
}
