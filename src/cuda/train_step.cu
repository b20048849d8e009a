/* AdamW: the scalars are computed on the host exactly as adamw_step does (double, then rounded to
 * float), so the per-element update is the same float arithmetic as the CPU's. */
#include <math.h>

#include "common.cuh"
#include "train_step.h"

static __global__ void adamw_kernel(float *p, float *m, float *v, const float *g, const float *dm,
                                    int64_t n, float b1, float b2, float eps, float decay,
                                    float step_size, float bc2_sqrt) {
    GRID_STRIDE_LOOP(i, n) {
        p[i] *= 1.0f - decay * dm[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
    }
}

extern "C" void cuda_adamw_update(float *p, float *m, float *v, const float *g, const float *decay,
                                int64_t n, double lr, double beta1, double beta2, double eps,
                                double weight_decay, int64_t step) {
    CHECK(step >= 1, "cuda_adamw_update: step %lld, the first step is 1", (long long)step);
    if (n == 0) return;
    /* torch.optim.AdamW: p *= 1 - lr*wd; m, v updated; p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) +
     * eps) */
    const double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
    adamw_kernel<<<flat_blocks(n), FLAT_THREADS>>>(p, m, v, g, decay, n, (float)beta1, (float)beta2,
                                                   (float)eps, (float)(lr * weight_decay),
                                                   (float)(lr / bc1), (float)sqrt(bc2));
    CUDA_LAUNCHED();
}
