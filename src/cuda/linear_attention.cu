/* FLatten's focusing function (a block per token row) and linear attention, ELFATT's softmax linear
 * attention: d x d products by batched GEMMs over the sequences, a head at a time; normalisers and
 * softmaxes a thread per row or channel. Sums over rows or tokens in a fixed order (no atomics). */
#include "common.cuh"
#include "linear_attention.h"
#include "matmul.h"

/* rows per block of the focus backward: each sums its rows' dt into one row of partial sums */
#define FOCUS_ROWS 16
/* floats of scratch held at once by the attention backwards: sequences go in chunks that fit */
#define LIN_CHUNK_FLOATS ((size_t)1 << 25)

/* threads of a row kernel over C columns: whole warps, up to ROW_THREADS */
static unsigned row_threads(int C) {
    int t = (C + 31) / 32 * 32;
    return t > ROW_THREADS ? ROW_THREADS : t;
}

/* sequences per chunk when each takes per_seq floats of scratch: at least 1 */
static int chunk_seqs(int seqs, size_t per_seq) {
    size_t fit = LIN_CHUNK_FLOATS / (per_seq ? per_seq : 1);
    return fit < 1 ? 1 : fit > (size_t)seqs ? seqs : (int)fit;
}

/* ---- focus: y = |u| / |u^p| u^p per row, u = (relu(x) + 1e-6) / t ---- */

static __device__ float feature(float x, float t) { return ((x > 0 ? x : 0.0f) + 1e-6f) / t; }
static __device__ float power(float u, float p) { return p == 3.0f ? u * u * u : powf(u, p); }

/* n1 = |u| and 1 / max u of row xr, for every thread of the block */
static __device__ void focus_stats(const float *xr, const float *t, int C, float *n1,
                                   float *inv_max) {
    float ss = 0, mx = -INFINITY;
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float u = feature(xr[j], t[j]);
        ss += u * u;
        mx = fmaxf(mx, u);
    }
    *n1 = sqrtf(block_sum(ss));
    *inv_max = 1.0f / block_max(mx);
}

static __global__ void focus_forward_kernel(float *y, const float *x, const float *t, float p,
                                            int C) {
    const int64_t r = blockIdx.x;
    const float *xr = x + r * C;
    float *yr = y + r * C, n1, inv_max, ww = 0;
    focus_stats(xr, t, C, &n1, &inv_max);
    /* w = (u / max u)^p: cannot underflow, and the result does not depend on the scale of w */
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float w = power(feature(xr[j], t[j]) * inv_max, p);
        yr[j] = w;
        ww += w * w;
    }
    const float ratio = n1 / sqrtf(block_sum(ww));
    for (int j = threadIdx.x; j < C; j += blockDim.x) yr[j] *= ratio;
}

extern "C" void cuda_focus_forward(float *y, const float *x, const float *t, float p, int64_t rows,
                                   int C) {
    if (rows == 0) return;
    focus_forward_kernel<<<row_blocks(rows), row_threads(C)>>>(y, x, t, p, C);
    CUDA_LAUNCHED();
}

static unsigned focus_blocks(int64_t rows) {
    return row_blocks((rows + FOCUS_ROWS - 1) / FOCUS_ROWS);
}

extern "C" size_t cuda_focus_scratch_floats(int64_t rows, int C) {
    return (size_t)focus_blocks(rows) * C;
}

/* Rows [FOCUS_ROWS blockIdx.x, ...) of the backward. y = n1 ŵ with n1 = |u|, ŵ = w / |w|; with
 * c = g·ŵ:  dL/du_j = (g_j - c ŵ_j) n1 p ŵ_j / u_j + c u_j / n1
 * dx += dL/du / t where x > 0; the block's row of partial (C) = -Σ dL/du u / t over its rows, each
 * thread summing its own columns in row order */
static __global__ void focus_backward_kernel(float *dx, float *partial, const float *dy,
                                             const float *x, const float *t, float p, int64_t rows,
                                             int C) {
    const int64_t r0 = (int64_t)blockIdx.x * FOCUS_ROWS,
                  r1 = r0 + FOCUS_ROWS < rows ? r0 + FOCUS_ROWS : rows;
    float *pt = partial ? partial + (int64_t)blockIdx.x * C : NULL;
    if (pt)
        for (int j = threadIdx.x; j < C; j += blockDim.x) pt[j] = 0;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * C, *g = dy + r * C;
        float n1, inv_max, ww = 0, gw = 0;
        focus_stats(xr, t, C, &n1, &inv_max);
        for (int j = threadIdx.x; j < C; j += blockDim.x) {
            const float w = power(feature(xr[j], t[j]) * inv_max, p);
            ww += w * w;
            gw += g[j] * w;
        }
        const float inv_n2 = 1.0f / sqrtf(block_sum(ww)), c = block_sum(gw) * inv_n2;
        for (int j = threadIdx.x; j < C; j += blockDim.x) {
            const float u = feature(xr[j], t[j]), wh = power(u * inv_max, p) * inv_n2;
            const float du = (g[j] - c * wh) * n1 * p * wh / u + c * u / n1;
            if (dx && xr[j] > 0) dx[r * C + j] += du / t[j];
            if (pt) pt[j] -= du * u / t[j];
        }
    }
}

/* dt[j] += the sum of column j = blockIdx.x of partial (blocks, C): each thread sums a fixed set of
 * rows in order, then the block adds the threads' sums in a fixed tree */
static __global__ void sum_partials_kernel(float *dt, const float *partial, int blocks, int C) {
    const int j = blockIdx.x;
    float s = 0;
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) s += partial[(int64_t)b * C + j];
    s = block_sum(s);
    if (threadIdx.x == 0) dt[j] += s;
}

extern "C" void cuda_focus_backward(float *dx, float *dt, const float *dy, const float *x,
                                    const float *t, float p, int64_t rows, int C, float *partial) {
    if (rows == 0 || (!dx && !dt)) return;
    const unsigned blocks = focus_blocks(rows);
    focus_backward_kernel<<<blocks, row_threads(C)>>>(dx, dt ? partial : NULL, dy, x, t, p, rows,
                                                      C);
    CUDA_LAUNCHED();
    if (dt) {
        sum_partials_kernel<<<C, ROW_THREADS>>>(dt, partial, (int)blocks, C);
        CUDA_LAUNCHED();
    }
}

/* ---- linear attention: out_i = q_i (kᵀv / m) / (q_i · mean(k) + 1e-6) per (sequence, head) ---- */

/* kmean (pairs, d) = the mean over the m tokens of each head channel of k (seqs, m, heads·d), one
 * thread per (pair, channel) */
static __global__ void kmean_kernel(float *kmean, const float *k, int pairs, int m, int heads,
                                    int d) {
    GRID_STRIDE_LOOP(idx, (int64_t)pairs * d) {
        const int64_t pair = idx / d, s = pair / heads, C = (int64_t)heads * d;
        const float *col = k + s * m * C + pair % heads * d + idx % d;
        float sum = 0;
        for (int j = 0; j < m; j++) sum += col[j * C];
        kmean[idx] = sum / m;
    }
}

/* z (pairs, n) = 1 / (q_i · kmean + 1e-6), and the rows of out (seqs, n, heads·d) times z */
static __global__ void normalise_kernel(float *out, float *z, const float *q, const float *kmean,
                                        int pairs, int n, int heads, int d) {
    GRID_STRIDE_LOOP(idx, (int64_t)pairs * n) {
        const int64_t pair = idx / n, i = idx % n, s = pair / heads, C = (int64_t)heads * d;
        const int64_t o = (s * n + i) * C + pair % heads * d;
        const float *km = kmean + pair * d;
        float dot = 0;
        for (int e = 0; e < d; e++) dot += q[o + e] * km[e];
        const float zi = 1.0f / (dot + 1e-6f);
        z[idx] = zi;
        for (int e = 0; e < d; e++) out[o + e] *= zi;
    }
}

extern "C" void cuda_linear_attention_forward(float *out, float *kv, float *kmean, float *z,
                                              const float *q, const float *k, const float *v,
                                              const lin_attn_dims *a) {
    const int n = a->n, m = a->m, d = a->d, H = a->heads, C = H * d, pairs = a->seqs * H;
    const long long dd = (long long)d * d, qs = (long long)n * C, ks = (long long)m * C;
    if (pairs == 0) return;
    /* kv = kᵀ v / m, then out = q kv (normalised below) */
    for (int h = 0; h < H; h++) {
        const size_t c = (size_t)h * d;
        cuda_gemm_batched(true, false, d, d, m, 1.0f / m, k + c, C, ks, v + c, C, ks, 0.0f,
                          kv + h * dd, d, H * dd, a->seqs);
        cuda_gemm_batched(false, false, n, d, d, 1.0f, q + c, C, qs, kv + h * dd, d, H * dd, 0.0f,
                          out + c, C, qs, a->seqs);
    }
    kmean_kernel<<<flat_blocks((int64_t)pairs * d), FLAT_THREADS>>>(kmean, k, pairs, m, H, d);
    CUDA_LAUNCHED();
    normalise_kernel<<<flat_blocks((int64_t)pairs * n), FLAT_THREADS>>>(out, z, q, kmean, pairs, n,
                                                                        H, d);
    CUDA_LAUNCHED();
}

/* per sequence of the backward: P and then G z (heads, n, d), d kv (heads, d, d),
 * d kmean (heads, d), a (heads, n) */
static size_t lin_backward_per_seq(const lin_attn_dims *a) {
    return (size_t)a->heads * ((size_t)a->n * a->d + (size_t)a->d * a->d + a->d + a->n);
}

extern "C" size_t cuda_linear_attention_scratch_floats(const lin_attn_dims *a) {
    return (size_t)chunk_seqs(a->seqs, lin_backward_per_seq(a)) * lin_backward_per_seq(a);
}

/* with P = q kv (pairs, n, d) the output before the normaliser:
 * a_i = dL/d(q·kmean)_i = -(g_i · P_i) z_i², and P's rows become G z */
static __global__ void normaliser_grad_kernel(float *an, float *gz, const float *dout,
                                              const float *z, int pairs, int n, int heads, int d) {
    GRID_STRIDE_LOOP(idx, (int64_t)pairs * n) {
        const int64_t pair = idx / n, s = pair / heads, C = (int64_t)heads * d;
        const float *g = dout + (s * n + idx % n) * C + pair % heads * d;
        float *row = gz + idx * d, dot = 0;
        for (int e = 0; e < d; e++) dot += g[e] * row[e];
        const float zi = z[idx];
        an[idx] = -dot * zi * zi;
        for (int e = 0; e < d; e++) row[e] = g[e] * zi;
    }
}

/* dkm (pairs, d) = Σ_i a_i q_i per (pair, channel), the rows in order */
static __global__ void kmean_grad_kernel(float *dkm, const float *an, const float *q, int pairs,
                                         int n, int heads, int d) {
    GRID_STRIDE_LOOP(idx, (int64_t)pairs * d) {
        const int64_t pair = idx / d, s = pair / heads, C = (int64_t)heads * d;
        const float *col = q + s * n * C + pair % heads * d + idx % d, *ap = an + pair * n;
        float sum = 0;
        for (int i = 0; i < n; i++) sum += ap[i] * col[i * C];
        dkm[idx] = sum;
    }
}

/* x (seqs, rows, heads·d) += coef_i vec (coef (pairs, rows)), or vec / div when coef is NULL; vec
 * (pairs, d) */
static __global__ void add_head_rows_kernel(float *x, const float *coef, const float *vec,
                                            float div, int64_t seqs, int rows, int heads, int d) {
    const int64_t C = (int64_t)heads * d;
    GRID_STRIDE_LOOP(idx, seqs * rows * C) {
        const int64_t s = idx / (rows * C), i = idx / C % rows, c = idx % C;
        const int64_t pair = s * heads + c / d;
        const float ve = vec[pair * d + c % d];
        x[idx] += coef ? coef[pair * rows + i] * ve : ve / div;
    }
}

/* The backward of S sequences (pointers at the first), scratch of S lin_backward_per_seq floats.
 * kv = kᵀ v / m and kmean = mean_j k_j, out = (q kv) z with z = 1 / (q · kmean + 1e-6). */
static void lin_backward_chunk(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               const float *k, const float *v, const float *kv, const float *kmean,
                               const float *z, const lin_attn_dims *a, int S, float *scratch) {
    const int n = a->n, m = a->m, d = a->d, H = a->heads, C = H * d, pairs = S * H;
    const long long dd = (long long)d * d, nd = (long long)n * d, qs = (long long)n * C,
                    ks = (long long)m * C;
    float *gz = scratch, *dkv = gz + (size_t)pairs * nd, *dkm = dkv + (size_t)pairs * dd,
          *an = dkm + (size_t)pairs * d;
    for (int h = 0; h < H; h++)
        cuda_gemm_batched(false, false, n, d, d, 1.0f, q + (size_t)h * d, C, qs, kv + h * dd, d,
                          H * dd, 0.0f, gz + h * nd, d, H * nd, S);
    normaliser_grad_kernel<<<flat_blocks((int64_t)pairs * n), FLAT_THREADS>>>(an, gz, dout, z,
                                                                              pairs, n, H, d);
    CUDA_LAUNCHED();
    for (int h = 0; h < H; h++) /* d kv = qᵀ (G z) */
        cuda_gemm_batched(true, false, d, d, n, 1.0f, q + (size_t)h * d, C, qs, gz + h * nd, d,
                          H * nd, 0.0f, dkv + h * dd, d, H * dd, S);
    kmean_grad_kernel<<<flat_blocks((int64_t)pairs * d), FLAT_THREADS>>>(dkm, an, q, pairs, n, H,
                                                                         d);
    CUDA_LAUNCHED();
    for (int h = 0; h < H; h++) {
        const size_t c = (size_t)h * d;
        if (dq)
            cuda_gemm_batched(false, true, n, d, d, 1.0f, gz + h * nd, d, H * nd, kv + h * dd, d,
                              H * dd, 1.0f, dq + c, C, qs, S);
        if (dk)
            cuda_gemm_batched(false, true, m, d, d, 1.0f / m, v + c, C, ks, dkv + h * dd, d, H * dd,
                              1.0f, dk + c, C, ks, S);
        if (dv)
            cuda_gemm_batched(false, false, m, d, d, 1.0f / m, k + c, C, ks, dkv + h * dd, d,
                              H * dd, 1.0f, dv + c, C, ks, S);
    }
    if (dq) {
        add_head_rows_kernel<<<flat_blocks((int64_t)S * qs), FLAT_THREADS>>>(dq, an, kmean, 1.0f, S,
                                                                             n, H, d);
        CUDA_LAUNCHED();
    }
    if (dk) {
        add_head_rows_kernel<<<flat_blocks((int64_t)S * ks), FLAT_THREADS>>>(dk, nullptr, dkm,
                                                                             (float)m, S, m, H, d);
        CUDA_LAUNCHED();
    }
}

extern "C" void cuda_linear_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                               const float *q, const float *k, const float *v,
                                               const float *kv, const float *kmean, const float *z,
                                               const lin_attn_dims *a, float *scratch) {
    if (a->seqs == 0 || (!dq && !dk && !dv)) return;
    const int chunk = chunk_seqs(a->seqs, lin_backward_per_seq(a)), H = a->heads, d = a->d;
    const size_t qs = (size_t)a->n * H * d, ks = (size_t)a->m * H * d;
    for (int s0 = 0; s0 < a->seqs; s0 += chunk) {
        const int S = a->seqs - s0 < chunk ? a->seqs - s0 : chunk;
        const size_t p0 = (size_t)s0 * H;
        lin_backward_chunk(dq ? dq + s0 * qs : NULL, dk ? dk + s0 * ks : NULL,
                           dv ? dv + s0 * ks : NULL, dout + s0 * qs, q + s0 * qs, k + s0 * ks,
                           v + s0 * ks, kv + p0 * d * d, kmean + p0 * d, z + p0 * a->n, a, S,
                           scratch);
    }
}

/* ---- ELFATT's global heads: out = softmax_features(q) (softmax_tokens(k)ᵀ v) on the channels
 * [c0, c0 + heads·d) of q, k, v (seqs, tokens, C) ---- */

/* kh (pairs, m, d) = softmax over the m tokens of each head channel of k, one thread per channel */
static __global__ void softmax_tokens_kernel(float *kh, const float *k, int pairs, int m, int heads,
                                             int d, int C, int c0) {
    GRID_STRIDE_LOOP(idx, (int64_t)pairs * d) {
        const int64_t pair = idx / d, e = idx % d, s = pair / heads;
        const float *col = k + s * m * C + c0 + pair % heads * d + e;
        float *out = kh + pair * m * d + e, mx = -INFINITY, sum = 0;
        for (int j = 0; j < m; j++) mx = fmaxf(mx, col[(int64_t)j * C]);
        for (int j = 0; j < m; j++) {
            const float x = expf(col[(int64_t)j * C] - mx);
            out[(int64_t)j * d] = x;
            sum += x;
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < m; j++) out[(int64_t)j * d] *= inv;
    }
}

/* qh (pairs, n, d) = softmax over the d features of each token and head of q, a thread per row */
static __global__ void softmax_features_kernel(float *qh, const float *q, int pairs, int n,
                                               int heads, int d, int C, int c0) {
    GRID_STRIDE_LOOP(idx, (int64_t)pairs * n) {
        const int64_t pair = idx / n, s = pair / heads;
        const float *row = q + (s * n + idx % n) * C + c0 + pair % heads * d;
        float *out = qh + idx * d, mx = -INFINITY, sum = 0;
        for (int e = 0; e < d; e++) mx = fmaxf(mx, row[e]);
        for (int e = 0; e < d; e++) sum += out[e] = expf(row[e] - mx);
        const float inv = 1.0f / sum;
        for (int e = 0; e < d; e++) out[e] *= inv;
    }
}

/* dq += y (gy - gy·y) per row (softmax over features): y = qh, gy = its gradient (pairs, n, d) */
static __global__ void features_grad_kernel(float *dq, const float *qh, const float *dqh, int pairs,
                                            int n, int heads, int d, int C, int c0) {
    GRID_STRIDE_LOOP(idx, (int64_t)pairs * n) {
        const int64_t pair = idx / n, s = pair / heads;
        const float *y = qh + idx * d, *gy = dqh + idx * d;
        float *row = dq + (s * n + idx % n) * C + c0 + pair % heads * d, dot = 0;
        for (int e = 0; e < d; e++) dot += gy[e] * y[e];
        for (int e = 0; e < d; e++) row[e] += y[e] * (gy[e] - dot);
    }
}

/* dk += y (gy - Σ_j gy y) per channel (softmax over tokens): y = kh, gy its gradient, both
 * (pairs, m, d) */
static __global__ void tokens_grad_kernel(float *dk, const float *kh, const float *dkh, int pairs,
                                          int m, int heads, int d, int C, int c0) {
    GRID_STRIDE_LOOP(idx, (int64_t)pairs * d) {
        const int64_t pair = idx / d, e = idx % d, s = pair / heads;
        const float *y = kh + pair * m * d + e, *gy = dkh + pair * m * d + e;
        float *col = dk + s * m * C + c0 + pair % heads * d + e, dot = 0;
        for (int j = 0; j < m; j++) dot += gy[(int64_t)j * d] * y[(int64_t)j * d];
        for (int j = 0; j < m; j++)
            col[(int64_t)j * C] += y[(int64_t)j * d] * (gy[(int64_t)j * d] - dot);
    }
}

/* per sequence: qh (heads, n, d), kh (heads, m, d), and for the backward dqh, dkh and
 * dctx (heads, d, d) */
static size_t softmax_lin_per_seq(const softmax_lin_dims *a) {
    return (size_t)a->heads * (2 * ((size_t)a->n + a->m) * a->d + (size_t)a->d * a->d);
}

extern "C" size_t cuda_softmax_linear_attention_scratch_floats(const softmax_lin_dims *a) {
    return (size_t)chunk_seqs(a->seqs, softmax_lin_per_seq(a)) * softmax_lin_per_seq(a);
}

/* The scratch of a chunk of `chunk` sequences. */
struct softmax_lin_scratch {
    float *qh, *kh, *dqh, *dkh, *dctx;
};
static softmax_lin_scratch softmax_lin_split(float *scratch, const softmax_lin_dims *a, int chunk) {
    const size_t pairs = (size_t)chunk * a->heads, nd = (size_t)a->n * a->d,
                 md = (size_t)a->m * a->d;
    softmax_lin_scratch w;
    w.qh = scratch, w.kh = w.qh + pairs * nd, w.dqh = w.kh + pairs * md, w.dkh = w.dqh + pairs * nd;
    w.dctx = w.dkh + pairs * md;
    return w;
}

/* qh and kh of S sequences (q, k at the first) */
static void softmax_lin_features(const softmax_lin_scratch &w, const float *q, const float *k,
                                 const softmax_lin_dims *a, int S) {
    const int pairs = S * a->heads;
    softmax_tokens_kernel<<<flat_blocks((int64_t)pairs * a->d), FLAT_THREADS>>>(
        w.kh, k, pairs, a->m, a->heads, a->d, a->C, a->c0);
    CUDA_LAUNCHED();
    softmax_features_kernel<<<flat_blocks((int64_t)pairs * a->n), FLAT_THREADS>>>(
        w.qh, q, pairs, a->n, a->heads, a->d, a->C, a->c0);
    CUDA_LAUNCHED();
}

extern "C" void cuda_softmax_linear_attention_forward(float *out, float *ctx, const float *q,
                                                      const float *k, const float *v,
                                                      const softmax_lin_dims *a, float *scratch) {
    if (a->seqs == 0) return;
    const int n = a->n, m = a->m, d = a->d, H = a->heads, C = a->C, Co = H * d;
    const int chunk = chunk_seqs(a->seqs, softmax_lin_per_seq(a));
    const long long dd = (long long)d * d, nd = (long long)n * d, md = (long long)m * d;
    const softmax_lin_scratch w = softmax_lin_split(scratch, a, chunk);
    for (int s0 = 0; s0 < a->seqs; s0 += chunk) {
        const int S = a->seqs - s0 < chunk ? a->seqs - s0 : chunk;
        const float *qc = q + (size_t)s0 * n * C, *kc = k + (size_t)s0 * m * C,
                    *vc = v + (size_t)s0 * m * C;
        float *oc = out + (size_t)s0 * n * Co, *cc = ctx + (size_t)s0 * H * dd;
        softmax_lin_features(w, qc, kc, a, S);
        for (int h = 0; h < H; h++) { /* ctx = khᵀ v, out = qh ctx */
            cuda_gemm_batched(true, false, d, d, m, 1.0f, w.kh + h * md, d, H * md,
                              vc + a->c0 + (size_t)h * d, C, (long long)m * C, 0.0f, cc + h * dd, d,
                              H * dd, S);
            cuda_gemm_batched(false, false, n, d, d, 1.0f, w.qh + h * nd, d, H * nd, cc + h * dd, d,
                              H * dd, 0.0f, oc + (size_t)h * d, Co, (long long)n * Co, S);
        }
    }
}

extern "C" void cuda_softmax_linear_attention_backward(float *dq, float *dk, float *dv,
                                                       const float *dout, const float *q,
                                                       const float *k, const float *v,
                                                       const float *ctx, const softmax_lin_dims *a,
                                                       float *scratch) {
    if (a->seqs == 0 || (!dq && !dk && !dv)) return;
    const int n = a->n, m = a->m, d = a->d, H = a->heads, C = a->C, Co = H * d;
    const int chunk = chunk_seqs(a->seqs, softmax_lin_per_seq(a));
    const long long dd = (long long)d * d, nd = (long long)n * d, md = (long long)m * d;
    const long long qs = (long long)n * C, ks = (long long)m * C, os = (long long)n * Co;
    const softmax_lin_scratch w = softmax_lin_split(scratch, a, chunk);
    for (int s0 = 0; s0 < a->seqs; s0 += chunk) {
        const int S = a->seqs - s0 < chunk ? a->seqs - s0 : chunk, pairs = S * H;
        const size_t qo = (size_t)s0 * qs, ko = (size_t)s0 * ks;
        const float *gc = dout + (size_t)s0 * os, *cc = ctx + (size_t)s0 * H * dd;
        softmax_lin_features(w, q + qo, k + ko, a, S);
        for (int h = 0; h < H; h++) { /* out = qh ctx, ctx = khᵀ v */
            const size_t c = (size_t)a->c0 + (size_t)h * d;
            cuda_gemm_batched(true, false, d, d, n, 1.0f, w.qh + h * nd, d, H * nd,
                              gc + (size_t)h * d, Co, os, 0.0f, w.dctx + h * dd, d, H * dd, S);
            if (dq)
                cuda_gemm_batched(false, true, n, d, d, 1.0f, gc + (size_t)h * d, Co, os,
                                  cc + h * dd, d, H * dd, 0.0f, w.dqh + h * nd, d, H * nd, S);
            if (dv)
                cuda_gemm_batched(false, false, m, d, d, 1.0f, w.kh + h * md, d, H * md,
                                  w.dctx + h * dd, d, H * dd, 1.0f, dv + ko + c, C, ks, S);
            if (dk)
                cuda_gemm_batched(false, true, m, d, d, 1.0f, v + ko + c, C, ks, w.dctx + h * dd, d,
                                  H * dd, 0.0f, w.dkh + h * md, d, H * md, S);
        }
        if (dq) {
            features_grad_kernel<<<flat_blocks((int64_t)pairs * n), FLAT_THREADS>>>(
                dq + qo, w.qh, w.dqh, pairs, n, H, d, C, a->c0);
            CUDA_LAUNCHED();
        }
        if (dk) {
            tokens_grad_kernel<<<flat_blocks((int64_t)pairs * d), FLAT_THREADS>>>(
                dk + ko, w.kh, w.dkh, pairs, m, H, d, C, a->c0);
            CUDA_LAUNCHED();
        }
    }
}
