#include "adaln.h"

#include <math.h>
#include <string.h>

#include "reduce.h"

void silu_forward(float *out, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = x[i] / (1.0f + expf(-x[i]));
}

void silu_backward(float *dx, const float *dout, const float *x, int64_t n) {
    /* d/dx x s(x) = s (1 + x (1 - s)) */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + expf(-x[i]));
        dx[i] += dout[i] * s * (1.0f + x[i] * (1.0f - s));
    }
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void gelu_tanh_forward(float *out, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_A * v * v * v)));
    }
}

void gelu_tanh_backward(float *dx, const float *dout, const float *x, int64_t n) {
    /* with u = k (x + a x³), th = tanh u: gelu' = (1 + th)/2 + x/2 (1 - th²) k (1 + 3 a x²) */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], th = tanhf(GELU_K * (v + GELU_A * v * v * v));
        float slope = 0.5f * (1.0f + th) +
                      0.5f * v * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] += dout[i] * slope;
    }
}

void layernorm_modulate_forward(float *out, float *mean, float *rstd, const float *x,
                                const float *shift, const float *scale, int B, int N, int C,
                                float eps) {
    int64_t M = (int64_t)B * N;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++) {
        const float *xr = x + r * C, *sh = shift + (r / N) * C, *sc = scale + (r / N) * C;
        float *o = out + r * C;
        float m = reduce_sum(xr, C) / C;
        for (int j = 0; j < C; j++) o[j] = xr[j] - m;
        float s = 1.0f / sqrtf(reduce_dot(o, o, C) / C + eps);
        for (int j = 0; j < C; j++) o[j] = o[j] * s * (1.0f + sc[j]) + sh[j];
        mean[r] = m;
        rstd[r] = s;
    }
}

/* channels per task of the per-sample reductions over the N rows */
#define COL_BLOCK 64

void layernorm_modulate_backward(float *dx, float *dshift, float *dscale, const float *dout,
                                 const float *x, const float *mean, const float *rstd,
                                 const float *scale, int B, int N, int C) {
    int64_t M = (int64_t)B * N;
    if (dx) {
        /* with ĝ = g (1 + scale): dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) */
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < M; r++) {
            const float *g = dout + r * C, *xr = x + r * C, *sc = scale + (r / N) * C;
            float m = mean[r], s = rstd[r], gh[C], xh[C];
            for (int j = 0; j < C; j++) gh[j] = g[j] * (1.0f + sc[j]), xh[j] = (xr[j] - m) * s;
            float mean_g = reduce_sum(gh, C) / C, mean_gx = reduce_dot(gh, xh, C) / C;
            float *d = dx + r * C;
            for (int j = 0; j < C; j++) d[j] += s * (gh[j] - mean_g - xh[j] * mean_gx);
        }
    }
    if (!dshift && !dscale) return;
    /* dshift[b] = sum_i g[b, i], dscale[b] = sum_i g[b, i] x̂[b, i]: one task per (sample, channel
     * block), rows in order (no atomics, the same sums whatever the thread count) */
    int blocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int64_t task = 0; task < (int64_t)B * blocks; task++) {
        int b = (int)(task / blocks), c0 = (int)(task % blocks) * COL_BLOCK;
        int c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        float acc_sh[COL_BLOCK] = {0}, acc_sc[COL_BLOCK] = {0};
        for (int i = 0; i < N; i++) {
            int64_t r = (int64_t)b * N + i;
            const float *g = dout + r * C, *xr = x + r * C;
            float m = mean[r], s = rstd[r];
            for (int j = c0; j < c1; j++) {
                acc_sh[j - c0] += g[j];
                acc_sc[j - c0] += g[j] * (xr[j] - m) * s;
            }
        }
        for (int j = c0; j < c1; j++) {
            if (dshift) dshift[(int64_t)b * C + j] += acc_sh[j - c0];
            if (dscale) dscale[(int64_t)b * C + j] += acc_sc[j - c0];
        }
    }
}

void gated_residual_forward(float *out, const float *res, const float *gate, const float *h, int B,
                            int N, int C) {
    int64_t M = (int64_t)B * N;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++) {
        const float *gt = gate + (r / N) * C;
        for (int j = 0; j < C; j++) out[r * C + j] = res[r * C + j] + gt[j] * h[r * C + j];
    }
}

void gated_residual_backward(float *dres, float *dgate, float *dh, const float *dout,
                             const float *gate, const float *h, int B, int N, int C) {
    int64_t M = (int64_t)B * N;
    if (dres || dh) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < M; r++) {
            const float *gt = gate + (r / N) * C, *g = dout + r * C;
            if (dres)
                for (int j = 0; j < C; j++) dres[r * C + j] += g[j];
            if (dh)
                for (int j = 0; j < C; j++) dh[r * C + j] += g[j] * gt[j];
        }
    }
    if (!dgate) return;
    int blocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int64_t task = 0; task < (int64_t)B * blocks; task++) {
        int b = (int)(task / blocks), c0 = (int)(task % blocks) * COL_BLOCK;
        int c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        float acc[COL_BLOCK] = {0};
        for (int i = 0; i < N; i++) {
            int64_t r = (int64_t)b * N + i;
            for (int j = c0; j < c1; j++) acc[j - c0] += dout[r * C + j] * h[r * C + j];
        }
        for (int j = c0; j < c1; j++) dgate[(int64_t)b * C + j] += acc[j - c0];
    }
}

void embedding_forward(float *out, const float *table, const int *idx, int B, int D) {
    for (int b = 0; b < B; b++)
        memcpy(out + (int64_t)b * D, table + (int64_t)idx[b] * D, sizeof(float) * D);
}

void embedding_backward(float *dtable, const float *dout, const int *idx, int B, int D) {
    /* over channels in parallel: samples with one label add into one row in b order */
#pragma omp parallel for schedule(static)
    for (int j = 0; j < D; j++)
        for (int b = 0; b < B; b++) dtable[(int64_t)idx[b] * D + j] += dout[(int64_t)b * D + j];
}
