#include "linear_attention.h"

#include <math.h>
#include <string.h>

#include "../core/threads.h"
#include "fast_exp.h"
#include "matmul.h"
#include "norm.h"
#include "reduce.h"

/* A row's features: u = (relu(x) + 1e-6) / t (inv_t: 1 / t), |u| into n1, a = u / max u (1 / max u
 * into inv_max) and w = a^p: the power of a cannot underflow, and the focusing function does not
 * depend on the scale of u^p; s = a^(p - 1) when s is given (the backward's w / u, times max u).
 * The common power 3 in plain products, so that the loop vectorises. */
static void focus_row(float *u, float *w, float *s, const float *x, const float *inv_t, float p,
                      int C, float *n1, float *inv_max) {
    for (int j = 0; j < C; j++) u[j] = ((x[j] > 0 ? x[j] : 0.0f) + 1e-6f) * inv_t[j];
    *n1 = sqrtf(reduce_dot(u, u, C));
    float im = *inv_max = 1.0f / reduce_max(u, C);
    if (p == 3.0f) {
        for (int j = 0; j < C; j++) {
            float a = u[j] * im;
            w[j] = a * a * a;
        }
        if (s)
            for (int j = 0; j < C; j++) s[j] = u[j] * im * (u[j] * im);
        return;
    }
    for (int j = 0; j < C; j++) {
        float a = u[j] * im, power_less_one = powf(a, p - 1.0f);
        w[j] = power_less_one * a;
        if (s) s[j] = power_less_one;
    }
}

static void reciprocals(float *inv, const float *t, int C) {
    for (int j = 0; j < C; j++) inv[j] = 1.0f / t[j];
}

void focus_forward(float *y, const float *x, const float *t, float p, int64_t rows, int C) {
    float inv_t[C];
    reciprocals(inv_t, t, C);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        float u[C], n1, inv_max, *yr = y + r * C;
        focus_row(u, yr, NULL, x + r * C, inv_t, p, C, &n1, &inv_max);
        float ratio = n1 / sqrtf(reduce_dot(yr, yr, C));
        for (int j = 0; j < C; j++) yr[j] *= ratio;
    }
}

/* a row of partial dt sums per thread */
size_t focus_scratch_floats(int64_t rows, int C) {
    (void)rows;
    return (size_t)vitc_threads() * C;
}

void focus_backward(float *dx, float *dt, const float *dy, const float *x, const float *t, float p,
                    int64_t rows, int C, float *partial) {
    int threads = vitc_threads();
    if (dt) memset(partial, 0, sizeof(float) * (size_t)threads * C);
    float inv_t[C];
    reciprocals(inv_t, t, C);
    /* y = n1 ŵ with n1 = |u|, ŵ = w / |w|, w = (u / max u)^p: with c = g·ŵ,
     *   dL/du_j = (g_j - c ŵ_j) n1 p ŵ_j / u_j + c u_j / n1,
     * where ŵ_j / u_j = s_j / (max u |w|) */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C, *g = dy + r * C;
        float *pt = partial + (size_t)vitc_thread_id() * C;
        float u[C], w[C], s[C], n1, inv_max;
        focus_row(u, w, s, xr, inv_t, p, C, &n1, &inv_max);
        float inv_n2 = 1.0f / sqrtf(reduce_dot(w, w, C)), c = reduce_dot(g, w, C) * inv_n2;
        float along = n1 * p * inv_max * inv_n2, across = c / n1, c_w = c * inv_n2;
        float *du = w; /* in place of w, read first */
        for (int j = 0; j < C; j++) du[j] = (g[j] - c_w * w[j]) * along * s[j] + across * u[j];
        if (dx)
            for (int j = 0; j < C; j++)
                if (xr[j] > 0) dx[r * C + j] += du[j] * inv_t[j];
        if (dt)
            for (int j = 0; j < C; j++) pt[j] -= du[j] * u[j] * inv_t[j];
    }
    if (dt)
        for (int i = 0; i < threads; i++)
            for (int j = 0; j < C; j++) dt[j] += partial[(size_t)i * C + j];
}

static void forward_pair(float *out, float *kv, float *kmean, float *z, const float *q,
                         const float *k, const float *v, const lin_attn_dims *a, int pair) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    const float *qs = q + (size_t)s * n * C + h * d, *ks = k + (size_t)s * m * C + h * d;
    float *os = out + (size_t)s * n * C + h * d;
    float *kvp = kv + (size_t)pair * d * d, *kmp = kmean + (size_t)pair * d, *zp = z + (size_t)pair * n;
    gemm_strided(true, false, d, d, m, 1.0f / m, ks, C, v + (size_t)s * m * C + h * d, C, 0.0f, kvp, d);
    for (int e = 0; e < d; e++) kmp[e] = 0;
    for (int j = 0; j < m; j++)
        for (int e = 0; e < d; e++) kmp[e] += ks[(size_t)j * C + e];
    for (int e = 0; e < d; e++) kmp[e] /= m;
    gemm_strided(false, false, n, d, d, 1.0f, qs, C, kvp, d, 0.0f, os, C);
    for (int i = 0; i < n; i++) {
        zp[i] = 1.0f / (reduce_dot(qs + (size_t)i * C, kmp, d) + 1e-6f);
        for (int e = 0; e < d; e++) os[(size_t)i * C + e] *= zp[i];
    }
}

void linear_attention_forward(float *out, float *kv, float *kmean, float *z, const float *q,
                              const float *k, const float *v, const lin_attn_dims *a) {
    int pairs = a->seqs * a->heads;
    if (vitc_items_in_parallel(pairs)) {
#pragma omp parallel for schedule(static)
        for (int p = 0; p < pairs; p++) forward_pair(out, kv, kmean, z, q, k, v, a, p);
    } else {
        for (int p = 0; p < pairs; p++) forward_pair(out, kv, kmean, z, q, k, v, a, p);
    }
}

/* per thread: P and then G z (n, d), d kv (d, d), d kmean (d), a (n) */
static size_t scratch_per_thread(const lin_attn_dims *a) {
    return (size_t)a->n * a->d + (size_t)a->d * a->d + a->d + a->n;
}

size_t linear_attention_scratch_floats(const lin_attn_dims *a) {
    return (size_t)vitc_threads() * scratch_per_thread(a);
}

static void backward_pair(float *dq, float *dk, float *dv, const float *dout, const float *q,
                          const float *k, const float *v, const float *kv, const float *kmean,
                          const float *z, const lin_attn_dims *a, int pair, float *scratch) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    size_t qo = (size_t)s * n * C + h * d, ko = (size_t)s * m * C + h * d;
    const float *kvp = kv + (size_t)pair * d * d, *kmp = kmean + (size_t)pair * d, *zp = z + (size_t)pair * n;
    float *gz = scratch, *dkv = gz + (size_t)n * d, *dkm = dkv + (size_t)d * d, *an = dkm + d;
    /* P = q kv (the output before the normaliser), then dL/d(q·kmean)_i = -(g_i · P_i) z_i² */
    gemm_strided(false, false, n, d, d, 1.0f, q + qo, C, kvp, d, 0.0f, gz, d);
    for (int i = 0; i < n; i++) {
        const float *g = dout + qo + (size_t)i * C;
        float *row = gz + (size_t)i * d;
        an[i] = -reduce_dot(g, row, d) * zp[i] * zp[i];
        for (int e = 0; e < d; e++) row[e] = g[e] * zp[i]; /* now G z */
    }
    /* d kv = qᵀ (G z), d kmean = Σ_i a_i q_i */
    gemm_strided(true, false, d, d, n, 1.0f, q + qo, C, gz, d, 0.0f, dkv, d);
    for (int e = 0; e < d; e++) dkm[e] = 0;
    for (int i = 0; i < n; i++)
        for (int e = 0; e < d; e++) dkm[e] += an[i] * q[qo + (size_t)i * C + e];
    if (dq) {
        gemm_strided(false, true, n, d, d, 1.0f, gz, d, kvp, d, 1.0f, dq + qo, C);
        for (int i = 0; i < n; i++)
            for (int e = 0; e < d; e++) dq[qo + (size_t)i * C + e] += an[i] * kmp[e];
    }
    /* kv = kᵀ v / m, kmean = mean_j k_j */
    if (dk) {
        gemm_strided(false, true, m, d, d, 1.0f / m, v + ko, C, dkv, d, 1.0f, dk + ko, C);
        for (int j = 0; j < m; j++)
            for (int e = 0; e < d; e++) dk[ko + (size_t)j * C + e] += dkm[e] / m;
    }
    if (dv) gemm_strided(false, false, m, d, d, 1.0f / m, k + ko, C, dkv, d, 1.0f, dv + ko, C);
}

void linear_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               const float *k, const float *v, const float *kv, const float *kmean,
                               const float *z, const lin_attn_dims *a, float *scratch) {
    int pairs = a->seqs * a->heads;
    size_t per = scratch_per_thread(a);
    if (vitc_items_in_parallel(pairs)) {
#pragma omp parallel for schedule(static)
        for (int p = 0; p < pairs; p++)
            backward_pair(dq, dk, dv, dout, q, k, v, kv, kmean, z, a, p, scratch + vitc_thread_id() * per);
    } else {
        for (int p = 0; p < pairs; p++) backward_pair(dq, dk, dv, dout, q, k, v, kv, kmean, z, a, p, scratch);
    }
}

/* ELFATT's two softmaxes and their gradients over a head of d <= 64 channels on AVX-512: a
 * token's features held in registers and the channels' running maxima, sums and dot products too.
 * Through the plain loops below (softmax_row, per-channel arrays), the feature softmax of a
 * 32-channel head took ~260 cycles a token and the pair's softmaxes cost more than its two
 * products; the gradients' loops, ~180 a token. */
#ifdef __AVX512F__
/* returns after f(args..., nv) for the nv 16-float vectors of d <= 64 channels, a constant in each
 * call, so that the vectors stay in registers; falls through for wider heads */
#define ON_REGISTERS(d, f, ...)                                                                    \
    switch (((d) + 15) / 16) {                                                                     \
    case 1: f(__VA_ARGS__, 1); return;                                                             \
    case 2: f(__VA_ARGS__, 2); return;                                                             \
    case 3: f(__VA_ARGS__, 3); return;                                                             \
    case 4: f(__VA_ARGS__, 4); return;                                                             \
    }

/* kh (m, d) = softmax over the m tokens of each channel of a head's k (row stride C), nv vectors of
 * channels */
static inline __attribute__((always_inline)) void softmax_tokens_nv(float *kh, const float *k,
                                                                   int m, int d, int C, int nv) {
    __m512 top[4], sum[4];
    for (int t = 0; t < nv; t++) top[t] = _mm512_set1_ps(-INFINITY), sum[t] = _mm512_setzero_ps();
    for (int j = 0; j < m; j++)
        for (int t = 0; t < nv; t++) { /* (vmaxps keeps the second operand where k is NaN) */
            const float *x = k + (size_t)j * C + 16 * t;
            top[t] = _mm512_max_ps(_mm512_maskz_loadu_ps(lanes(d - 16 * t), x), top[t]);
        }
    for (int j = 0; j < m; j++)
        for (int t = 0; t < nv; t++) {
            __mmask16 in = lanes(d - 16 * t);
            __m512 x = _mm512_maskz_loadu_ps(in, k + (size_t)j * C + 16 * t);
            x = fast_exp16(_mm512_sub_ps(x, top[t]));
            sum[t] = _mm512_add_ps(sum[t], x);
            _mm512_mask_storeu_ps(kh + (size_t)j * d + 16 * t, in, x);
        }
    for (int t = 0; t < nv; t++) sum[t] = _mm512_div_ps(_mm512_set1_ps(1.0f), sum[t]);
    for (int j = 0; j < m; j++)
        for (int t = 0; t < nv; t++) {
            __mmask16 in = lanes(d - 16 * t);
            float *row = kh + (size_t)j * d + 16 * t;
            _mm512_mask_storeu_ps(row, in, _mm512_mul_ps(_mm512_maskz_loadu_ps(in, row), sum[t]));
        }
}

/* qh (n, d) = softmax over the d features of each token of a head's q (row stride C) */
static inline __attribute__((always_inline)) void softmax_features_nv(float *qh, const float *q,
                                                                     int n, int d, int C, int nv) {
    for (int i = 0; i < n; i++) {
        __m512 x[4], top = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
        for (int t = 0; t < nv; t++) {
            x[t] = _mm512_mask_loadu_ps(top, lanes(d - 16 * t), q + (size_t)i * C + 16 * t);
            top = _mm512_max_ps(x[t], top);
        }
        __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(top));
        for (int t = 0; t < nv; t++) {
            x[t] = _mm512_maskz_mov_ps(lanes(d - 16 * t), fast_exp16(_mm512_sub_ps(x[t], shift)));
            sum = _mm512_add_ps(sum, x[t]);
        }
        __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
        for (int t = 0; t < nv; t++)
            _mm512_mask_storeu_ps(qh + (size_t)i * d + 16 * t, lanes(d - 16 * t),
                                  _mm512_mul_ps(x[t], inv));
    }
}

/* dk (row stride C) += kh ⊙ (dkh - Σ_j dkh ⊙ kh), sums per channel: softmax_tokens's gradient */
static inline __attribute__((always_inline)) void softmax_tokens_grad_nv(float *dk, int C,
                                                                        const float *kh,
                                                                        const float *dkh, int m,
                                                                        int d, int nv) {
    __m512 dot[4];
    for (int t = 0; t < nv; t++) dot[t] = _mm512_setzero_ps();
    for (int j = 0; j < m; j++)
        for (int t = 0; t < nv; t++) {
            __mmask16 in = lanes(d - 16 * t);
            size_t at = (size_t)j * d + 16 * t;
            dot[t] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(in, dkh + at),
                                     _mm512_maskz_loadu_ps(in, kh + at), dot[t]);
        }
    for (int j = 0; j < m; j++)
        for (int t = 0; t < nv; t++) {
            __mmask16 in = lanes(d - 16 * t);
            size_t at = (size_t)j * d + 16 * t;
            float *to = dk + (size_t)j * C + 16 * t;
            __m512 y = _mm512_maskz_loadu_ps(in, kh + at);
            __m512 gy = _mm512_sub_ps(_mm512_maskz_loadu_ps(in, dkh + at), dot[t]);
            _mm512_mask_storeu_ps(to, in, _mm512_fmadd_ps(y, gy, _mm512_maskz_loadu_ps(in, to)));
        }
}

/* dq (row stride C) += qh ⊙ (dqh - rowsum(dqh ⊙ qh)): softmax_features's gradient */
static inline __attribute__((always_inline)) void softmax_features_grad_nv(float *dq, int C,
                                                                          const float *qh,
                                                                          const float *dqh, int n,
                                                                          int d, int nv) {
    for (int i = 0; i < n; i++) {
        __m512 y[4], gy[4], dot = _mm512_setzero_ps();
        for (int t = 0; t < nv; t++) {
            __mmask16 in = lanes(d - 16 * t);
            y[t] = _mm512_maskz_loadu_ps(in, qh + (size_t)i * d + 16 * t);
            gy[t] = _mm512_maskz_loadu_ps(in, dqh + (size_t)i * d + 16 * t);
            dot = _mm512_fmadd_ps(y[t], gy[t], dot);
        }
        __m512 row_dot = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
        for (int t = 0; t < nv; t++) {
            __mmask16 in = lanes(d - 16 * t);
            float *to = dq + (size_t)i * C + 16 * t;
            __m512 g = _mm512_mul_ps(y[t], _mm512_sub_ps(gy[t], row_dot));
            _mm512_mask_storeu_ps(to, in, _mm512_add_ps(_mm512_maskz_loadu_ps(in, to), g));
        }
    }
}
#endif

/* kh (m, d) = softmax over the m tokens of each channel of a head's k (row stride C) */
static void softmax_tokens(float *kh, const float *k, int m, int d, int C) {
#ifdef __AVX512F__
    ON_REGISTERS(d, softmax_tokens_nv, kh, k, m, d, C);
#endif
    float mx[d], sum[d];
    for (int e = 0; e < d; e++) mx[e] = -INFINITY, sum[e] = 0;
    for (int j = 0; j < m; j++)
        for (int e = 0; e < d; e++) mx[e] = k[(size_t)j * C + e] > mx[e] ? k[(size_t)j * C + e] : mx[e];
    for (int j = 0; j < m; j++)
        for (int e = 0; e < d; e++) {
            float x = fast_expf(k[(size_t)j * C + e] - mx[e]);
            kh[(size_t)j * d + e] = x;
            sum[e] += x;
        }
    for (int e = 0; e < d; e++) sum[e] = 1.0f / sum[e];
    for (int j = 0; j < m; j++)
        for (int e = 0; e < d; e++) kh[(size_t)j * d + e] *= sum[e];
}

/* qh (n, d) = softmax over the d features of each token of a head's q (row stride C) */
static void softmax_features(float *qh, const float *q, int n, int d, int C) {
#ifdef __AVX512F__
    ON_REGISTERS(d, softmax_features_nv, qh, q, n, d, C);
#endif
    for (int i = 0; i < n; i++) {
        for (int e = 0; e < d; e++) qh[(size_t)i * d + e] = q[(size_t)i * C + e];
        softmax_row(qh + (size_t)i * d, d);
    }
}

/* dk (m rows, stride C) += softmax_tokens's gradient from dkh, the gradient of its result kh */
static void softmax_tokens_grad(float *dk, int C, const float *kh, const float *dkh, int m, int d) {
#ifdef __AVX512F__
    ON_REGISTERS(d, softmax_tokens_grad_nv, dk, C, kh, dkh, m, d);
#endif
    float dot[d]; /* per channel */
    for (int e = 0; e < d; e++) dot[e] = 0;
    for (int j = 0; j < m; j++)
        for (int e = 0; e < d; e++) dot[e] += dkh[(size_t)j * d + e] * kh[(size_t)j * d + e];
    for (int j = 0; j < m; j++)
        for (int e = 0; e < d; e++)
            dk[(size_t)j * C + e] += kh[(size_t)j * d + e] * (dkh[(size_t)j * d + e] - dot[e]);
}

/* dq (n rows, stride C) += softmax_features's gradient from dqh, the gradient of its result qh */
static void softmax_features_grad(float *dq, int C, const float *qh, const float *dqh, int n,
                                  int d) {
#ifdef __AVX512F__
    ON_REGISTERS(d, softmax_features_grad_nv, dq, C, qh, dqh, n, d);
#endif
    for (int i = 0; i < n; i++) {
        const float *y = qh + (size_t)i * d, *gy = dqh + (size_t)i * d;
        float dot = reduce_dot(gy, y, d);
        for (int e = 0; e < d; e++) dq[(size_t)i * C + e] += y[e] * (gy[e] - dot);
    }
}

/* per thread: qh (n, d), kh (m, d), and for the backward dqh (n, d), dkh (m, d), dctx (d, d) */
static size_t softmax_lin_per_thread(const softmax_lin_dims *a) {
    return 2 * ((size_t)a->n + a->m) * a->d + (size_t)a->d * a->d;
}

size_t softmax_linear_attention_scratch_floats(const softmax_lin_dims *a) {
    return (size_t)vitc_threads() * softmax_lin_per_thread(a);
}

static void softmax_lin_forward_pair(float *out, float *ctx, const float *q, const float *k,
                                     const float *v, const softmax_lin_dims *a, int pair, float *scratch) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->C;
    int Co = a->heads * d;
    size_t qo = (size_t)s * n * C + a->c0 + h * d, ko = (size_t)s * m * C + a->c0 + h * d;
    float *qh = scratch, *kh = qh + (size_t)n * d, *cp = ctx + (size_t)pair * d * d;
    softmax_tokens(kh, k + ko, m, d, C);
    gemm_strided(true, false, d, d, m, 1.0f, kh, d, v + ko, C, 0.0f, cp, d);
    softmax_features(qh, q + qo, n, d, C);
    gemm_strided(false, false, n, d, d, 1.0f, qh, d, cp, d, 0.0f, out + (size_t)s * n * Co + h * d, Co);
}

void softmax_linear_attention_forward(float *out, float *ctx, const float *q, const float *k,
                                      const float *v, const softmax_lin_dims *a, float *scratch) {
    int pairs = a->seqs * a->heads;
    size_t per = softmax_lin_per_thread(a);
    if (vitc_items_in_parallel(pairs)) {
#pragma omp parallel for schedule(static)
        for (int p = 0; p < pairs; p++)
            softmax_lin_forward_pair(out, ctx, q, k, v, a, p, scratch + vitc_thread_id() * per);
    } else {
        for (int p = 0; p < pairs; p++) softmax_lin_forward_pair(out, ctx, q, k, v, a, p, scratch);
    }
}

static void softmax_lin_backward_pair(float *dq, float *dk, float *dv, const float *dout,
                                      const float *q, const float *k, const float *v,
                                      const float *ctx, const softmax_lin_dims *a, int pair,
                                      float *scratch) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->C;
    int Co = a->heads * d;
    size_t qo = (size_t)s * n * C + a->c0 + h * d, ko = (size_t)s * m * C + a->c0 + h * d;
    const float *g = dout + (size_t)s * n * Co + h * d, *cp = ctx + (size_t)pair * d * d;
    float *qh = scratch, *kh = qh + (size_t)n * d, *dqh = kh + (size_t)m * d, *dkh = dqh + (size_t)n * d;
    float *dctx = dkh + (size_t)m * d;
    softmax_tokens(kh, k + ko, m, d, C);
    softmax_features(qh, q + qo, n, d, C);
    /* out = qh ctx, ctx = khᵀ v */
    gemm_strided(true, false, d, d, n, 1.0f, qh, d, g, Co, 0.0f, dctx, d);
    if (dq) {
        gemm_strided(false, true, n, d, d, 1.0f, g, Co, cp, d, 0.0f, dqh, d);
        softmax_features_grad(dq + qo, C, qh, dqh, n, d);
    }
    if (dv) gemm_strided(false, false, m, d, d, 1.0f, kh, d, dctx, d, 1.0f, dv + ko, C);
    if (dk) {
        gemm_strided(false, true, m, d, d, 1.0f, v + ko, C, dctx, d, 0.0f, dkh, d);
        softmax_tokens_grad(dk + ko, C, kh, dkh, m, d);
    }
}

void softmax_linear_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                       const float *q, const float *k, const float *v,
                                       const float *ctx, const softmax_lin_dims *a, float *scratch) {
    int pairs = a->seqs * a->heads;
    size_t per = softmax_lin_per_thread(a);
    if (vitc_items_in_parallel(pairs)) {
#pragma omp parallel for schedule(static)
        for (int p = 0; p < pairs; p++)
            softmax_lin_backward_pair(dq, dk, dv, dout, q, k, v, ctx, a, p, scratch + vitc_thread_id() * per);
    } else {
        for (int p = 0; p < pairs; p++)
            softmax_lin_backward_pair(dq, dk, dv, dout, q, k, v, ctx, a, p, scratch);
    }
}
