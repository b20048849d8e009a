/* Layernorm and softmax: one block per row, statistics in fp32 reduced over the block (the CPU sums
 * in another order, so results agree to rounding, not bit for bit). Weight gradients are summed by
 * one thread per column over all rows: no atomics, the same sums on every run. */
#include "common.cuh"
#include "norm.h"

static __global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd,
                                                const float *x, const float *w, const float *b,
                                                int C, float eps) {
    const int64_t r = blockIdx.x;
    const float *xr = x + r * C;
    float s = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) s += xr[j];
    const float m = block_sum(s) / C;
    /* the variance of the centred values (two passes, as the CPU): no cancellation of E[x²] - m² */
    float q = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) q += (xr[j] - m) * (xr[j] - m);
    const float rs = 1.0f / sqrtf(block_sum(q) / C + eps);
    float *o = out + r * C;
    for (int j = threadIdx.x; j < C; j += blockDim.x) o[j] = (xr[j] - m) * rs * w[j] + b[j];
    if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
}

extern "C" void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                                       const float *w, const float *b, int64_t M, int C,
                                       float eps) {
    if (M == 0) return;
    layernorm_forward_kernel<<<row_blocks(M), ROW_THREADS>>>(out, mean, rstd, x, w, b, C, eps);
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

/* dw[j] += sum_r g x̂, db[j] += sum_r g: one thread per column walks the rows in order */
static __global__ void layernorm_backward_dwb_kernel(float *dw, float *db, const float *dout,
                                                     const float *x, const float *mean,
                                                     const float *rstd, int64_t M, int C) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= C) return;
    float sw = 0, sb = 0;
    for (int64_t r = 0; r < M; r++) {
        float g = dout[r * C + j];
        sw += g * (x[r * C + j] - mean[r]) * rstd[r];
        sb += g;
    }
    if (dw) dw[j] += sw;
    if (db) db[j] += sb;
}

extern "C" void cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                                        const float *x, const float *mean, const float *rstd,
                                        const float *w, int64_t M, int C) {
    if (M == 0) return;
    if (dx) {
        layernorm_backward_dx_kernel<<<row_blocks(M), ROW_THREADS>>>(dx, dout, x, mean, rstd, w, C);
        CUDA_LAUNCHED();
    }
    if (dw || db) {
        layernorm_backward_dwb_kernel<<<(C + 127) / 128, 128>>>(dw, db, dout, x, mean, rstd, M, C);
        CUDA_LAUNCHED();
    }
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
