/* The diffusion-transformer (DiT/SiT) kernels of src/cpu/adaln.h on the device: SiLU, tanh GELU,
 * the adaLN-modulated LayerNorm (one block per row), the gated residual, the embedding gather.
 * Sums over a sample's rows and over repeated labels run in one thread per output, in the CPU's
 * order: no atomics, the same sums on every run. */
#include "adaln.h"
#include "common.cuh"

static __global__ void silu_forward_kernel(float *out, const float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = x[i] / (1.0f + expf(-x[i]));
}

/* d/dx x s(x) = s (1 + x (1 - s)) */
static __global__ void silu_backward_kernel(float *dx, const float *dout, const float *x,
                                            int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        const float s = 1.0f / (1.0f + expf(-x[i]));
        dx[i] += dout[i] * s * (1.0f + x[i] * (1.0f - s));
    }
}

extern "C" void cuda_silu_forward(float *out, const float *x, int64_t n) {
    if (n == 0) return;
    silu_forward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, x, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_silu_backward(float *dx, const float *dout, const float *x, int64_t n) {
    if (n == 0) return;
    silu_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dx, dout, x, n);
    CUDA_LAUNCHED();
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

static __global__ void gelu_tanh_forward_kernel(float *out, const float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        const float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_A * v * v * v)));
    }
}

/* with u = k (x + a x³), th = tanh u: gelu' = (1 + th)/2 + x/2 (1 - th²) k (1 + 3 a x²) */
static __global__ void gelu_tanh_backward_kernel(float *dx, const float *dout, const float *x,
                                                 int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        const float v = x[i], th = tanhf(GELU_K * (v + GELU_A * v * v * v));
        const float slope = 0.5f * (1.0f + th) +
                            0.5f * v * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] += dout[i] * slope;
    }
}

extern "C" void cuda_gelu_tanh_forward(float *out, const float *x, int64_t n) {
    if (n == 0) return;
    gelu_tanh_forward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, x, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_gelu_tanh_backward(float *dx, const float *dout, const float *x, int64_t n) {
    if (n == 0) return;
    gelu_tanh_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dx, dout, x, n);
    CUDA_LAUNCHED();
}

/* one block per row r of sample r / N: the layernorm_forward kernel of norm.cu with (1 + scale)
 * and shift of the sample in place of the affine weight and bias */
static __global__ void layernorm_modulate_forward_kernel(float *out, float *mean, float *rstd,
                                                         const float *x, const float *shift,
                                                         const float *scale, int N, int C,
                                                         float eps) {
    const int64_t r = blockIdx.x;
    const float *xr = x + r * C, *sh = shift + (r / N) * C, *sc = scale + (r / N) * C;
    float s = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) s += xr[j];
    const float m = block_sum(s) / C;
    float q = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) q += (xr[j] - m) * (xr[j] - m);
    const float rs = 1.0f / sqrtf(block_sum(q) / C + eps);
    float *o = out + r * C;
    for (int j = threadIdx.x; j < C; j += blockDim.x)
        o[j] = (xr[j] - m) * rs * (1.0f + sc[j]) + sh[j];
    if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
}

extern "C" void cuda_layernorm_modulate_forward(float *out, float *mean, float *rstd,
                                                const float *x, const float *shift,
                                                const float *scale, int B, int N, int C,
                                                float eps) {
    const int64_t M = (int64_t)B * N;
    if (M == 0) return;
    layernorm_modulate_forward_kernel<<<row_blocks(M), ROW_THREADS>>>(out, mean, rstd, x, shift,
                                                                      scale, N, C, eps);
    CUDA_LAUNCHED();
}

/* with ĝ = g (1 + scale): dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) */
static __global__ void layernorm_modulate_backward_dx_kernel(float *dx, const float *dout,
                                                             const float *x, const float *mean,
                                                             const float *rstd, const float *scale,
                                                             int N, int C) {
    const int64_t r = blockIdx.x;
    const float *g = dout + r * C, *xr = x + r * C, *sc = scale + (r / N) * C;
    const float m = mean[r], s = rstd[r];
    float sg = 0, sgx = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float gh = g[j] * (1.0f + sc[j]);
        sg += gh;
        sgx += gh * (xr[j] - m) * s;
    }
    const float mean_g = block_sum(sg) / C, mean_gx = block_sum(sgx) / C;
    float *d = dx + r * C;
    for (int j = threadIdx.x; j < C; j += blockDim.x)
        d[j] += s * (g[j] * (1.0f + sc[j]) - mean_g - (xr[j] - m) * s * mean_gx);
}

/* dshift[b, j] += sum_i g[b, i, j], dscale[b, j] += sum_i g x̂: a thread per (b, j), rows in order
 */
static __global__ void layernorm_modulate_backward_ss_kernel(float *dshift, float *dscale,
                                                             const float *dout, const float *x,
                                                             const float *mean, const float *rstd,
                                                             int B, int N, int C) {
    GRID_STRIDE_LOOP(k, (int64_t)B * C) {
        const int64_t b = k / C, j = k % C;
        float sh = 0, sc = 0;
        for (int i = 0; i < N; i++) {
            const int64_t r = b * N + i;
            const float g = dout[r * C + j];
            sh += g;
            sc += g * (x[r * C + j] - mean[r]) * rstd[r];
        }
        if (dshift) dshift[k] += sh;
        if (dscale) dscale[k] += sc;
    }
}

extern "C" void cuda_layernorm_modulate_backward(float *dx, float *dshift, float *dscale,
                                                 const float *dout, const float *x,
                                                 const float *mean, const float *rstd,
                                                 const float *scale, int B, int N, int C) {
    const int64_t M = (int64_t)B * N;
    if (M == 0) return;
    if (dx) {
        layernorm_modulate_backward_dx_kernel<<<row_blocks(M), ROW_THREADS>>>(dx, dout, x, mean,
                                                                              rstd, scale, N, C);
        CUDA_LAUNCHED();
    }
    if (dshift || dscale) {
        layernorm_modulate_backward_ss_kernel<<<flat_blocks((int64_t)B * C), FLAT_THREADS>>>(
            dshift, dscale, dout, x, mean, rstd, B, N, C);
        CUDA_LAUNCHED();
    }
}

static __global__ void gated_residual_forward_kernel(float *out, const float *res,
                                                     const float *gate, const float *h, int N,
                                                     int C, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = res[i] + gate[i / ((int64_t)N * C) * C + i % C] * h[i];
}

extern "C" void cuda_gated_residual_forward(float *out, const float *res, const float *gate,
                                            const float *h, int B, int N, int C) {
    const int64_t n = (int64_t)B * N * C;
    if (n == 0) return;
    gated_residual_forward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, res, gate, h, N, C, n);
    CUDA_LAUNCHED();
}

static __global__ void gated_residual_backward_kernel(float *dres, float *dh, const float *dout,
                                                      const float *gate, int N, int C, int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        if (dres) dres[i] += dout[i];
        if (dh) dh[i] += dout[i] * gate[i / ((int64_t)N * C) * C + i % C];
    }
}

/* dgate[b, j] += sum_i g[b, i, j] h[b, i, j]: one thread per (b, j), rows in order */
static __global__ void gated_residual_backward_gate_kernel(float *dgate, const float *dout,
                                                           const float *h, int B, int N, int C) {
    GRID_STRIDE_LOOP(k, (int64_t)B * C) {
        const int64_t b = k / C, j = k % C;
        float s = 0;
        for (int i = 0; i < N; i++) s += dout[(b * N + i) * C + j] * h[(b * N + i) * C + j];
        dgate[k] += s;
    }
}

extern "C" void cuda_gated_residual_backward(float *dres, float *dgate, float *dh,
                                             const float *dout, const float *gate, const float *h,
                                             int B, int N, int C) {
    const int64_t n = (int64_t)B * N * C;
    if (n == 0) return;
    if (dres || dh) {
        gated_residual_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dres, dh, dout, gate, N, C,
                                                                         n);
        CUDA_LAUNCHED();
    }
    if (dgate) {
        gated_residual_backward_gate_kernel<<<flat_blocks((int64_t)B * C), FLAT_THREADS>>>(
            dgate, dout, h, B, N, C);
        CUDA_LAUNCHED();
    }
}

static __global__ void embedding_forward_kernel(float *out, const float *table, const int *idx,
                                                int D, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = table[(int64_t)idx[i / D] * D + i % D];
}

extern "C" void cuda_embedding_forward(float *out, const float *table, const int *idx, int B,
                                       int D) {
    const int64_t n = (int64_t)B * D;
    if (n == 0) return;
    embedding_forward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, table, idx, D, n);
    CUDA_LAUNCHED();
}

/* Thread (b, j) owns the table entry (idx[b], j) when b is the first sample with its label: it adds
 * the gradients of the samples with that label in b order, as the CPU; the other threads stop. */
static __global__ void embedding_backward_kernel(float *dtable, const float *dout, const int *idx,
                                                 int B, int D) {
    GRID_STRIDE_LOOP(k, (int64_t)B * D) {
        const int b = (int)(k / D), j = (int)(k % D), label = idx[b];
        bool first = true;
        for (int e = 0; e < b && first; e++) first = idx[e] != label;
        if (!first) continue;
        float d = dtable[(int64_t)label * D + j];
        for (int e = b; e < B; e++)
            if (idx[e] == label) d += dout[(int64_t)e * D + j];
        dtable[(int64_t)label * D + j] = d;
    }
}

extern "C" void cuda_embedding_backward(float *dtable, const float *dout, const int *idx, int B,
                                        int D) {
    const int64_t n = (int64_t)B * D;
    if (n == 0) return;
    embedding_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dtable, dout, idx, B, D);
    CUDA_LAUNCHED();
}
