/* CUDA versions of the training step's flat loops (src/cpu/train_step.h) on device pointers, with
 * the same arithmetic: the AdamW update (torch.optim.AdamW, decoupled weight decay, bias
 * correction), the EMA of the weights, and the sum of squares and scaling of gradient clipping. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step over n flat parameters p with gradients g and moments m, v (all device pointers);
 * decay[i / run] is 1 where weight decay applies, else 0 (a flag a run of `run` floats). `step`
 * counts this step (1 for the first), as adamw.step after adamw_step's increment. */
void cuda_adamw_update(float *p, float *m, float *v, const float *g, const uint8_t *decay, int run,
                       int64_t n, double lr, double beta1, double beta2, double eps,
                       double weight_decay, int64_t step);
/* ema = decay * ema + (1 - decay) * p */
void cuda_ema_update_flat(float *ema, const float *p, int64_t n, double decay);
/* The sum of x[i]² in double over SUM_SQUARES_CHUNKS fixed chunks (a fixed-order reduction in each,
 * the chunks added in order on the host): the same value on every run, though not the CPU's to the
 * last bit. Waits for the work queued before it. */
double cuda_sum_squares(const float *x, int64_t n);
/* x *= s */
void cuda_scale_floats(float *x, int64_t n, float s);

#ifdef __cplusplus
}
#endif
