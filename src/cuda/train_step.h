/* CUDA version of the AdamW update of src/train/optim.c (adamw_step) on device pointers, with the
 * same arithmetic: torch.optim.AdamW, decoupled weight decay, bias correction. Grad clipping, EMA
 * and the LR schedule are not here yet. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step over n flat parameters p with gradients g and moments m, v (all device pointers);
 * decay (n) is 1 where weight decay applies, else 0. `step` counts this step (1 for the first), as
 * adamw.step after adamw_step's increment. */
void cuda_adamw_update(float *p, float *m, float *v, const float *g, const float *decay, int64_t n,
                     double lr, double beta1, double beta2, double eps, double weight_decay,
                     int64_t step);

#ifdef __cplusplus
}
#endif
