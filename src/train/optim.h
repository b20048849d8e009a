/* Optimisation pieces of a training step, all flat loops over the parameter blocks: AdamW with
 * decoupled weight decay (torch.optim.AdamW arithmetic), the no-weight-decay rule of the official
 * repos, global-norm gradient clipping, EMA of the weights (timm ModelEma), and timm's per-step
 * cosine LR schedule with linear warm-up and cool-down. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "../core/params.h"

typedef struct adamw {
    float *m, *v;        /* first and second moments, flat like ps->data */
    /* a flag a line of PARAM_LINE_FLOATS floats (every parameter starts on one): 1 where weight
     * decay applies, else 0 */
    uint8_t *decay;
    double beta1, beta2, eps, weight_decay;
    int64_t step;        /* optimizer steps taken (bias correction) */
    int64_t numel;
    const struct memory_ops *mem; /* the parameters' memory, where m, v and decay live too */
} adamw;

/* Weight decay applies to every parameter except 1-D ones, names ending in ".bias", and the
 * no_weight_decay() names of the official models (pos_embed, cls_token,
 * relative_position_bias_table). Agent biases (an_bias, ...) are decayed, as in the official repo. */
bool param_decays(const tensor *p);
void adamw_init(adamw *o, const param_store *ps, double weight_decay, double beta1, double beta2,
                double eps);
void adamw_free(adamw *o);
void adamw_step(adamw *o, param_store *ps, double lr);

/* Scales the gradients so their global L2 norm is at most max_norm (torch clip_grad_norm_);
 * returns the norm before clipping. max_norm <= 0 only measures. */
double clip_grad_norm(param_store *ps, double max_norm);

/* ema = decay * ema + (1 - decay) * params, over all parameters */
void ema_update(float *ema, const param_store *ps, double decay);

typedef struct lr_schedule {
    double base_lr, warmup_lr, min_lr;
    int64_t warmup_steps, total_steps; /* total: the cosine part ends here (cool-down stays at min) */
} lr_schedule;

/* timm CosineLRScheduler (t_initial = total, warmup_t = warmup, cycle_limit 1, warmup not prefixed) */
double lr_at(const lr_schedule *s, int64_t step);
