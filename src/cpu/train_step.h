/* The flat loops of a training step outside the network, over the parameter blocks: the AdamW
 * update, the EMA of the weights and the two halves of gradient-norm clipping. */
#pragma once
#include <stdint.h>

/* One torch.optim.AdamW step over n parameters p with gradients g and moments m, v: decoupled
 * weight decay where decay[i / run] is 1 (a flag a run of `run` floats, the parameter store's
 * lines), none where 0; `step` counts this one (bias correction) */
void adamw_update(float *p, float *m, float *v, const float *g, const uint8_t *decay, int run,
                  int64_t n, double lr, double beta1, double beta2, double eps, double weight_decay,
                  int64_t step);
/* ema = decay * ema + (1 - decay) * p */
void ema_update_flat(float *ema, const float *p, int64_t n, double decay);
/* the sum of x[i]² in double, over SUM_SQUARES_CHUNKS fixed chunks added in order: the same value
 * whatever the thread count */
#define SUM_SQUARES_CHUNKS 64
double sum_squares(const float *x, int64_t n);
/* x *= s */
void scale_floats(float *x, int64_t n, float s);
