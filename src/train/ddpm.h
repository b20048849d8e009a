/* DiT's Gaussian diffusion as facebookresearch/DiT trains and samples it (its diffusion/ package,
 * from OpenAI's IDDPM/ADM), for model.arch "dit": the linear beta schedule from 1e-4 to 0.02 over
 * 1000 steps; the network predicts the noise eps and, with learn_sigma, a value in [-1, 1] per
 * element that places the log variance between the posterior's (clipped) and beta_t's; training
 * draws t uniformly from 0..999 and minimises mse(eps_hat, eps) + the variational bound of the
 * variance with eps_hat held fixed (loss "MSE"; without learn_sigma, the fixed large variance and
 * mse alone); sampling is ancestral on a respaced grid (space_timesteps), the network fed the
 * original step, with guidance on output channels 0-2 (transport_net_velocity) and no clipping of
 * the predicted x0 (DiT's sample.py). Leaves out: other schedules, x0 / x_{t-1} prediction, the KL
 * loss types, DDIM. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "../../models/model.h"
#include "../core/rng.h"
#include "transport.h"

#define DDPM_TRAIN_STEPS 1000

typedef struct ddpm_schedule {
    int steps;     /* of this process (respaced) */
    int *timestep; /* steps: the original step each one is, the network's t */
    double *beta, *alphas_cumprod, *post_logvar_clipped, *post_coef1, *post_coef2;
    double *fixed_large_logvar; /* learn_sigma false: log(post_var[1], beta[1], beta[2], ...) */
} ddpm_schedule;

/* The 1000-step process kept at `steps` (1..1000) evenly spaced steps, the official
 * space_timesteps(1000, [steps]) (steps = 1000: the process itself), with betas recomputed from the
 * kept alphas_cumprod as SpacedDiffusion does. */
void ddpm_schedule_init(ddpm_schedule *s, int steps);
void ddpm_schedule_free(ddpm_schedule *s);

/* The coefficients of step i (src/cpu/ddpm_terms.h's DDPM_COEFS floats) */
void ddpm_coefs(const ddpm_schedule *s, int i, float *k);

/* For each sample b of B (per floats each) from its own stream (key + first_sample + b): t_b
 * uniform in 0..999, eps ~ N(0, I), x_t = sqrt(alphas_cumprod[t]) x0 + sqrt(1 - alphas_cumprod[t])
 * eps, of the 1000-step process s. t (B), xt, eps (B, per). */
void ddpm_draw(const ddpm_schedule *s, const float *x0, int B, int64_t per, uint64_t key,
               int64_t first_sample, int *t, float *xt, float *eps);

/* The training loss of a batch x0 (B, S, S, C) with labels y on the tape: draws as ddpm_draw, the
 * network at (x_t, t, y); op_ddpm_loss with learn_sigma, else op_mse(eps_hat, eps). fo carries
 * train / rng (label dropout); its t and y are set here. transport_loss's signature. */
tensor *ddpm_loss(model *m, const float *x0, const int *y, int B, uint64_t key, int64_t first_sample,
                  forward_opts fo);

/* One ancestral step i of s in place on x (B, P, C): out (B, P, Co) the network's eps_hat and, for
 * Co = 2C, the variance values; noise (B, P, C) scaled by the step's standard deviation (none at
 * i = 0). */
void ddpm_step(const ddpm_schedule *s, int i, float *x, const float *out, const float *noise, int B,
               int64_t P, int C, int Co);

/* Samples x (B, P, C), holding the initial noise on entry, with `steps` respaced steps from the last
 * to 0; f gives the network's output (B, P, Co) at the original time step (transport_net_velocity
 * with a dit model: guided, Co channels). noise: one stream per sample. */
void ddpm_sample(velocity_fn f, void *ctx, float *x, int B, int64_t P, int C, int Co, int steps,
                 rng *noise);
