/* Layernorm, L2 norm and softmax: one block per row, statistics in fp32 reduced over the block (the
 * CPU sums in another order, so results agree to rounding, not bit for bit); mean over a dim. The
 * weight gradients are column_sums.cuh's sums over the rows, the mean one thread per output: no
 * atomics, the same sums on every run. */
#include "column_sums.cuh"
#include "common.cuh"
#include "norm.h"

/* row r of x normalised into row `to` of out, or of out_bf16 where given */
static __device__ void layernorm_row(float *out, uint16_t *out_bf16, float *mean, float *rstd,
                                     const float *x, const float *w, const float *b, int C,
                                     float eps, int64_t r, int64_t to) {
    const float *xr = x + r * C;
    float s = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) s += xr[j];
    const float m = block_sum(s) / C;
    /* the variance of the centred values (two passes, as the CPU): no cancellation of E[x²] - m² */
    float q = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) q += (xr[j] - m) * (xr[j] - m);
    const float rs = 1.0f / sqrtf(block_sum(q) / C + eps);
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float o = (xr[j] - m) * rs * w[j] + b[j];
        if (out_bf16) out_bf16[to * C + j] = bf16_bits(o);
        else out[to * C + j] = o;
    }
    if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
}

static __global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd,
                                                const float *x, const float *w, const float *b,
                                                int C, float eps) {
    layernorm_row(out, NULL, mean, rstd, x, w, b, C, eps, blockIdx.x, blockIdx.x);
}

/* one block per map pixel, written to its place among the windows of the map rolled by -shift */
static __global__ void layernorm_windows_kernel(float *out, uint16_t *out_bf16, float *mean,
                                                float *rstd, const float *x, const float *w,
                                                const float *b, int H, int W, int C, int wh,
                                                int ww, int shift, float eps) {
    const int64_t r = blockIdx.x, bi = r / ((int64_t)H * W);
    const int sh = ((shift % H) + H) % H, sw = ((shift % W) + W) % W;
    const int y = ((int)(r / W % H) - sh + H) % H, xx = ((int)(r % W) - sw + W) % W;
    const int64_t win = (bi * (H / wh) + y / wh) * (W / ww) + xx / ww;
    layernorm_row(out, out_bf16, mean, rstd, x, w, b, C, eps, r,
                  (win * wh + y % wh) * ww + xx % ww);
}

extern "C" void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                                       const float *w, const float *b, int64_t M, int C,
                                       float eps) {
    if (M == 0) return;
    layernorm_forward_kernel<<<row_blocks(M), ROW_THREADS>>>(out, mean, rstd, x, w, b, C, eps);
    CUDA_LAUNCHED();
}

extern "C" void cuda_layernorm_windows_forward(float *out, uint16_t *out_bf16, float *mean,
                                               float *rstd, const float *x, const float *w,
                                               const float *b, int B, int H, int W, int C, int wh,
                                               int ww, int shift, float eps) {
    const int64_t M = (int64_t)B * H * W;
    if (M == 0) return;
    layernorm_windows_kernel<<<row_blocks(M), ROW_THREADS>>>(out, out_bf16, mean, rstd, x, w, b,
                                                               H, W, C, wh, ww, shift, eps);
    CUDA_LAUNCHED();
}

static __global__ void layernorm_apply_kernel(float *out, const float *x, const float *mean,
                                              const float *rstd, const float *w, const float *b,
                                              int64_t M, int C) {
    GRID_STRIDE_LOOP(i, M * C) {
        const int64_t r = i / C;
        const int j = (int)(i % C);
        out[i] = (x[i] - mean[r]) * rstd[r] * w[j] + b[j];
    }
}

extern "C" void cuda_layernorm_apply(float *out, const float *x, const float *mean,
                                     const float *rstd, const float *w, const float *b, int64_t M,
                                     int C) {
    if (M == 0) return;
    layernorm_apply_kernel<<<flat_blocks(M * C), FLAT_THREADS>>>(out, x, mean, rstd, w, b, M, C);
    CUDA_LAUNCHED();
}

/* dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) with ĝ = g w, x̂ = (x - mean) rstd */
static __global__ void layernorm_backward_dx_kernel(float *dx, const float *dout, const float *x,
                                                    const float *mean, const float *rstd,
                                                    const float *w, int C) {
    const int64_t r = blockIdx.x;
    const float *g = dout + r * C, *xr = x + r * C;
    const float m = mean[r], s = rstd[r];
    float sg = 0, sgx = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        float gh = g[j] * w[j];
        sg += gh;
        sgx += gh * (xr[j] - m) * s;
    }
    const float mean_g = block_sum(sg) / C, mean_gx = block_sum(sgx) / C;
    float *d = dx + r * C;
    for (int j = threadIdx.x; j < C; j += blockDim.x)
        d[j] += s * (g[j] * w[j] - mean_g - (xr[j] - m) * s * mean_gx);
}

/* (g x̂, g) of element (r, j): dw and db are their sums over the rows */
struct layernorm_dwb_terms {
    const float *dout, *x, *mean, *rstd;
    int C;
    __device__ void operator()(int64_t r, int j, float *s) const {
        const float g = dout[r * C + j];
        s[0] += g * (x[r * C + j] - mean[r]) * rstd[r];
        s[1] += g;
    }
};

extern "C" void cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                                        const float *x, const float *mean, const float *rstd,
                                        const float *w, int64_t M, int C) {
    if (M == 0) return;
    if (dx) {
        layernorm_backward_dx_kernel<<<row_blocks(M), ROW_THREADS>>>(dx, dout, x, mean, rstd, w, C);
        CUDA_LAUNCHED();
    }
    if (dw || db) {
        add_column_sums_of<2>({{dw, db}}, layernorm_dwb_terms{dout, x, mean, rstd, C}, M, C);
    }
}

static __global__ void l2norm_forward_kernel(float *out, const float *x, int C) {
    const int64_t r = blockIdx.x;
    const float *xr = x + r * C;
    float s = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) s += xr[j] * xr[j];
    s = block_sum(s);
    if (threadIdx.x == 0) out[r] = sqrtf(s);
}

extern "C" void cuda_l2norm_forward(float *out, const float *x, int64_t M, int C) {
    if (M == 0) return;
    l2norm_forward_kernel<<<row_blocks(M), ROW_THREADS>>>(out, x, C);
    CUDA_LAUNCHED();
}

/* d|x|/dx = x / |x| (0 at the origin, as torch's subgradient) */
static __global__ void l2norm_backward_kernel(float *dx, const float *dout, const float *x,
                                              const float *out, int64_t M, int C) {
    GRID_STRIDE_LOOP(i, M * C) {
        const int64_t r = i / C;
        const float f = out[r] > 0 ? dout[r] / out[r] : 0.0f;
        dx[i] += f * x[i];
    }
}

extern "C" void cuda_l2norm_backward(float *dx, const float *dout, const float *x, const float *out,
                                     int64_t M, int C) {
    if (M == 0) return;
    l2norm_backward_kernel<<<flat_blocks(M * C), FLAT_THREADS>>>(dx, dout, x, out, M, C);
    CUDA_LAUNCHED();
}

static __global__ void softmax_forward_kernel(float *out, const float *x, const float *bias, int N,
                                              int64_t NB) {
    const int64_t r = blockIdx.x;
    const float *xr = x + r * N;
    const float *br = bias ? bias + (r * N) % NB : NULL;
    float *o = out + r * N;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        o[j] = br ? xr[j] + br[j] : xr[j];
        mx = fmaxf(mx, o[j]);
    }
    mx = block_max(mx);
    float s = 0;
    for (int j = threadIdx.x; j < N; j += blockDim.x) { /* each thread rereads only what it wrote */
        o[j] = expf(o[j] - mx);
        s += o[j];
    }
    const float inv = 1.0f / block_sum(s);
    for (int j = threadIdx.x; j < N; j += blockDim.x) o[j] *= inv;
}

extern "C" void cuda_softmax_forward(float *out, const float *x, const float *bias, int64_t M,
                                     int N, int64_t NB) {
    if (M == 0) return;
    softmax_forward_kernel<<<row_blocks(M), ROW_THREADS>>>(out, x, bias, N, NB);
    CUDA_LAUNCHED();
}

static __global__ void softmax_backward_kernel(float *dlogits, const float *dout, const float *y,
                                               int N) {
    const int64_t r = blockIdx.x;
    const float *g = dout + r * N, *yr = y + r * N;
    float s = 0;
    for (int j = threadIdx.x; j < N; j += blockDim.x) s += g[j] * yr[j];
    const float dot = block_sum(s);
    float *d = dlogits + r * N;
    for (int j = threadIdx.x; j < N; j += blockDim.x) d[j] = yr[j] * (g[j] - dot);
}

extern "C" void cuda_softmax_backward(float *dlogits, const float *dout, const float *y, int64_t M,
                                      int N) {
    if (M == 0) return;
    softmax_backward_kernel<<<row_blocks(M), ROW_THREADS>>>(dlogits, dout, y, N);
    CUDA_LAUNCHED();
}

/* one thread per output (o, i) adds its len inputs in order, as the CPU: the same sums */
static __global__ void mean_forward_kernel(float *out, const float *x, int64_t outer, int len,
                                           int64_t inner) {
    GRID_STRIDE_LOOP(k, outer * inner) {
        const int64_t o = k / inner, i = k % inner;
        const float *src = x + o * len * inner + i;
        float s = 0;
        for (int l = 0; l < len; l++) s += src[l * inner];
        out[k] = s / len;
    }
}

extern "C" void cuda_mean_forward(float *out, const float *x, int64_t outer, int len,
                                  int64_t inner) {
    if (outer * inner == 0) return;
    mean_forward_kernel<<<flat_blocks(outer * inner), FLAT_THREADS>>>(out, x, outer, len, inner);
    CUDA_LAUNCHED();
}

static __global__ void mean_backward_kernel(float *dx, const float *dout, int64_t outer, int len,
                                            int64_t inner) {
    const float f = 1.0f / len;
    GRID_STRIDE_LOOP(k, outer * len * inner) {
        const int64_t o = k / (len * inner), i = k % inner;
        dx[k] += f * dout[o * inner + i];
    }
}

extern "C" void cuda_mean_backward(float *dx, const float *dout, int64_t outer, int len,
                                   int64_t inner) {
    if (outer * len * inner == 0) return;
    mean_backward_kernel<<<flat_blocks(outer * len * inner), FLAT_THREADS>>>(dx, dout, outer, len,
                                                                               inner);
    CUDA_LAUNCHED();
}
