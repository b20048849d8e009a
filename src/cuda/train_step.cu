/* The flat loops of a training step outside the network on the device: AdamW, the EMA of the
 * weights and the two halves of gradient-norm clipping. AdamW's scalars are computed on the host
 * exactly as the CPU's adamw_update does (double, then rounded to float), so the per-element update
 * is the same float arithmetic as the CPU's. */
#include <math.h>

#include "common.cuh"
#include "train_step.h"

extern "C" {
#include "../cpu/train_step.h" /* SUM_SQUARES_CHUNKS */
}

static __global__ void adamw_kernel(float *p, float *m, float *v, const float *g,
                                    const uint8_t *dm, int run, int64_t n, float b1, float b2,
                                    float eps, float decay, float step_size, float bc2_sqrt) {
    GRID_STRIDE_LOOP(i, n) {
        p[i] *= 1.0f - decay * (float)dm[i / run];
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
    }
}

extern "C" void cuda_adamw_update(float *p, float *m, float *v, const float *g,
                                  const uint8_t *decay, int run, int64_t n, double lr,
                                  double beta1, double beta2, double eps, double weight_decay,
                                  int64_t step) {
    CHECK(step >= 1, "cuda_adamw_update: step %lld, the first step is 1", (long long)step);
    if (n == 0) return;
    /* torch.optim.AdamW: p *= 1 - lr*wd; m, v updated; p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) +
     * eps) */
    const double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
    adamw_kernel<<<flat_blocks(n), FLAT_THREADS>>>(p, m, v, g, decay, run, n, (float)beta1,
                                                   (float)beta2, (float)eps,
                                                   (float)(lr * weight_decay), (float)(lr / bc1),
                                                   (float)sqrt(bc2));
    CUDA_LAUNCHED();
}

static __global__ void ema_kernel(float *ema, const float *p, int64_t n, float d, float rest) {
    GRID_STRIDE_LOOP(i, n) ema[i] = ema[i] * d + rest * p[i];
}

extern "C" void cuda_ema_update_flat(float *ema, const float *p, int64_t n, double decay) {
    if (n == 0) return;
    ema_kernel<<<flat_blocks(n), FLAT_THREADS>>>(ema, p, n, (float)decay, (float)(1.0 - decay));
    CUDA_LAUNCHED();
}

/* one partial sum per chunk: a static device array, so the reduction allocates nothing */
static __device__ double sum_squares_part[SUM_SQUARES_CHUNKS];

/* block c sums the squares of chunk c: each thread its strided share in order, then block_sum's
 * fixed tree, so the partial is the same on every run */
static __global__ void sum_squares_kernel(const float *x, int64_t n, int64_t per) {
    const int64_t lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
    double s = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += (double)x[i] * x[i];
    s = block_sum(s);
    if (threadIdx.x == 0) sum_squares_part[blockIdx.x] = s;
}

extern "C" double cuda_sum_squares(const float *x, int64_t n) {
    if (n == 0) return 0;
    double part[SUM_SQUARES_CHUNKS], sum = 0;
    const int64_t per = (n + SUM_SQUARES_CHUNKS - 1) / SUM_SQUARES_CHUNKS;
    sum_squares_kernel<<<SUM_SQUARES_CHUNKS, ROW_THREADS>>>(x, n, per);
    CUDA_LAUNCHED();
    CUDA_CHECK(cudaMemcpyFromSymbol(part, sum_squares_part, sizeof(part)));
    for (int c = 0; c < SUM_SQUARES_CHUNKS; c++) sum += part[c];
    return sum;
}

static __global__ void scale_kernel(float *x, int64_t n, float s) {
    GRID_STRIDE_LOOP(i, n) x[i] *= s;
}

extern "C" void cuda_scale_floats(float *x, int64_t n, float s) {
    if (n == 0) return;
    scale_kernel<<<flat_blocks(n), FLAT_THREADS>>>(x, n, s);
    CUDA_LAUNCHED();
}
