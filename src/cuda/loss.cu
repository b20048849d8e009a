/* Cross entropy with soft targets: one block per sample computes the log-sum-exp in double, as the
 * CPU; the mean over samples is one thread summing the rows in order (deterministic, no atomics).
 * The mean squared error and DiT's loss are one block's fixed-order sum in double. */
#include <math.h>

#include "common.cuh"
#include "loss.h"
extern "C" {
#include "../cpu/ddpm_terms.h"
}

static __global__ void cross_entropy_rows_kernel(float *row_loss, float *probs, const float *logits,
                                                 const float *target, int K) {
    const int64_t b = blockIdx.x;
    const float *z = logits + b * K, *t = target + b * K;
    float *p = probs + b * K;
    float mx = -INFINITY;
    for (int k = threadIdx.x; k < K; k += blockDim.x) mx = fmaxf(mx, z[k]);
    mx = block_max(mx);
    double s = 0;
    for (int k = threadIdx.x; k < K; k += blockDim.x) s += exp((double)z[k] - mx);
    const double lse = mx + log(block_sum(s));
    double row = 0;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        p[k] = (float)exp((double)z[k] - lse);
        row -= t[k] * ((double)z[k] - lse);
    }
    row = block_sum(row);
    if (threadIdx.x == 0) row_loss[b] = (float)row;
}

static __global__ void mean_kernel(float *loss, const float *row_loss, int B) {
    double total = 0;
    for (int b = 0; b < B; b++) total += row_loss[b];
    loss[0] = (float)(total / B);
}

extern "C" void cuda_cross_entropy_forward(float *loss, float *row_loss, float *probs,
                                           const float *logits, const float *target, int B, int K) {
    CHECK(B > 0, "cuda_cross_entropy_forward: batch %d", B);
    cross_entropy_rows_kernel<<<row_blocks(B), ROW_THREADS>>>(row_loss, probs, logits, target, K);
    CUDA_LAUNCHED();
    mean_kernel<<<1, 1>>>(loss, row_loss, B);
    CUDA_LAUNCHED();
}

/* d/dz of -sum t log softmax(z) = softmax(z) sum(t) - t */
static __global__ void cross_entropy_backward_kernel(float *dlogits, const float *dloss,
                                                     const float *probs, const float *target, int B,
                                                     int K) {
    const int64_t b = blockIdx.x;
    const float *p = probs + b * K, *t = target + b * K;
    float s = 0;
    for (int k = threadIdx.x; k < K; k += blockDim.x) s += t[k];
    const float mass = block_sum(s), g = dloss[0] / B;
    float *d = dlogits + b * K;
    for (int k = threadIdx.x; k < K; k += blockDim.x) d[k] += g * (p[k] * mass - t[k]);
}

extern "C" void cuda_cross_entropy_backward(float *dlogits, const float *dloss, const float *probs,
                                            const float *target, int B, int K) {
    if (B == 0) return;
    cross_entropy_backward_kernel<<<row_blocks(B), ROW_THREADS>>>(dlogits, dloss, probs, target, B,
                                                                  K);
    CUDA_LAUNCHED();
}

static __global__ void label_targets_kernel(float *target, const int *labels, float on, float off,
                                            int K, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    target[i] = i % K == labels[i / K] ? on : off;
}

extern "C" void cuda_label_targets(float *target, const int *labels, float on, float off, int B, int K) {
    const int64_t n = (int64_t)B * K;
    if (n == 0) return;
    label_targets_kernel<<<flat_blocks(n), FLAT_THREADS>>>(target, labels, on, off, K, n);
    CUDA_LAUNCHED();
}

/* The threads of the one block of the mse: the whole sum in one block keeps its order fixed with no
 * second pass and no scratch for partial sums */
#define MSE_THREADS 1024

static __global__ void mse_forward_kernel(float *loss, const float *pred, const float *target,
                                          int64_t n) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        double d = (double)pred[i] - target[i];
        s += d * d;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) loss[0] = (float)(s / (double)n);
}

extern "C" void cuda_mse_forward(float *loss, const float *pred, const float *target, int64_t n) {
    CHECK(n > 0, "cuda_mse_forward: %lld elements", (long long)n);
    mse_forward_kernel<<<1, MSE_THREADS>>>(loss, pred, target, n);
    CUDA_LAUNCHED();
}

/* d/dp mean (p - t)^2 = 2 (p - t) / n, and the negative for t */
static __global__ void mse_backward_kernel(float *dpred, float *dtarget, const float *dloss,
                                           const float *pred, const float *target, int64_t n) {
    const float g = 2.0f * dloss[0] / (float)n;
    GRID_STRIDE_LOOP(i, n) {
        float d = g * (pred[i] - target[i]);
        if (dpred) dpred[i] += d;
        if (dtarget) dtarget[i] -= d;
    }
}

extern "C" void cuda_mse_backward(float *dpred, float *dtarget, const float *dloss, const float *pred,
                                  const float *target, int64_t n) {
    if (n == 0 || (!dpred && !dtarget)) return;
    mse_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dpred, dtarget, dloss, pred, target, n);
    CUDA_LAUNCHED();
}

static __global__ void ddpm_loss_forward_kernel(float *loss, const float *out, const float *x0,
                                                const float *xt, const float *eps, const float *coefs,
                                                int64_t P, int C, int64_t n) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t bp = i / C, o = bp * 2 * C + i % C;
        double de, dv;
        s += ddpm_element(coefs + bp / P * DDPM_COEFS, out[o], out[o + C], x0[i], xt[i], eps[i], &de, &dv);
    }
    s = block_sum(s);
    if (threadIdx.x == 0) loss[0] = (float)(s / (double)n);
}

extern "C" void cuda_ddpm_loss_forward(float *loss, const float *out, const float *x0, const float *xt,
                                       const float *eps, const float *coefs, int B, int64_t P, int C) {
    const int64_t n = (int64_t)B * P * C;
    CHECK(n > 0, "cuda_ddpm_loss_forward: %lld elements", (long long)n);
    ddpm_loss_forward_kernel<<<1, MSE_THREADS>>>(loss, out, x0, xt, eps, coefs, P, C, n);
    CUDA_LAUNCHED();
}

static __global__ void ddpm_loss_backward_kernel(float *dout, const float *dloss, const float *out,
                                                 const float *x0, const float *xt, const float *eps,
                                                 const float *coefs, int64_t P, int C, int64_t n) {
    const double g = dloss[0] / (double)n;
    GRID_STRIDE_LOOP(i, n) {
        const int64_t bp = i / C, o = bp * 2 * C + i % C;
        double de, dv;
        ddpm_element(coefs + bp / P * DDPM_COEFS, out[o], out[o + C], x0[i], xt[i], eps[i], &de, &dv);
        dout[o] += (float)(g * de);
        dout[o + C] += (float)(g * dv);
    }
}

extern "C" void cuda_ddpm_loss_backward(float *dout, const float *dloss, const float *out,
                                        const float *x0, const float *xt, const float *eps,
                                        const float *coefs, int B, int64_t P, int C) {
    const int64_t n = (int64_t)B * P * C;
    if (n == 0) return;
    ddpm_loss_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dout, dloss, out, x0, xt, eps, coefs, P,
                                                                C, n);
    CUDA_LAUNCHED();
}
