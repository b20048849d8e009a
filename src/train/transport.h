/* SiT transport as LeapLabTHU/Attention-Mediators (= upstream willisma/SiT) trains and samples it:
 * the Linear path x_t = t x1 + (1 - t) x0 with t = 0 noise and t = 1 data, velocity prediction with
 * target u = x1 - x0, loss = mean over all elements of (v - u)^2; the Euler-Maruyama SDE sampler
 * (diffusion "sigma", last step "Mean") and fixed-grid Euler / Heun ODE samplers, with
 * classifier-free guidance. Leaves out: other paths (VP, GVP), noise/score prediction, loss
 * weighting, adaptive dopri5. The dynamic mediator schedule: mediator_schedule.h. */
#pragma once
#include <stdint.h>

#include "../../models/model.h"
#include "../core/rng.h"

/* For each sample b of B (per floats each) from its own stream (key + first_sample + b, so
 * data-parallel ranks draw what one process draws): t_b ~ U[0, 1) (train_eps = 0 for velocity on
 * the Linear path), x0 ~ N(0, I), x_t = t x1 + (1 - t) x0 and u = x1 - x0. t (B), xt, u (B, per). */
void transport_draw(const float *x1, int B, int64_t per, uint64_t key, int64_t first_sample,
                    float *t, float *xt, float *u);

/* The training loss of a batch x1 (B, S, S, C) with labels y: draws (t, x0) as transport_draw and
 * returns op_mse(model(x_t, t, y), u) on the tape. fo carries train / rng (label dropout); its t and
 * y are set here. */
tensor *transport_loss(model *m, const float *x1, const int *y, int B, uint64_t key,
                       int64_t first_sample, forward_opts fo);

/* SAMPLER_DDPM: DiT's ancestral sampler (ddpm.h), for model.arch "dit" */
typedef enum { SAMPLER_SDE, SAMPLER_ODE, SAMPLER_HEUN, SAMPLER_DDPM } sampler_kind;

typedef struct sampler_opts {
    sampler_kind kind;
    int steps;             /* num_sampling_steps: points of the time grid (>= 2) */
    double cfg;            /* guidance scale; <= 1: none (one network pass per evaluation) */
    int guided_chans;      /* channels guidance applies to: 3 officially (latent channels 0-2) */
    double diffusion_norm; /* SDE w(t) = norm (1 - t); 1 */
    double last_step;      /* SDE final deterministic step size; 0.04 */
    /* called with the velocity's ctx and the state x (n floats) after each SDE step k but the
     * final "Mean" one (the mediator schedule); NULL: none */
    void (*after_step)(void *ctx, int k, const float *x, int64_t n);
} sampler_opts;

/* The official defaults for kind: 250 steps, no guidance, 3 guided channels, norm 1, last 0.04. */
sampler_opts sampler_defaults(sampler_kind kind);

/* v (B, per) = the velocity at x (B, per) and time t (one t for the batch) */
typedef void (*velocity_fn)(void *ctx, const float *x, float t, int B, float *v);

/* The network's velocity with guidance: ctx is a transport_net. With cfg > 1 the network runs on
 * [x; x] with labels [y; null] and channels c < guided_chans (of C, channels-last) become
 * u + cfg (c - u); the others keep the conditional output (the official forward_with_cfg, whose
 * unconditional half of the state is discarded). For model.arch "dit" v is what DiT's network
 * gives, eps and the variance values ((B, H, W, 2C) with learn_sigma), guided on its channels
 * c < guided_chans as DiT's forward_with_cfg does. */
typedef struct transport_net {
    model *m;
    const int *y; /* B labels */
    double cfg;
    int guided_chans;
} transport_net;
void transport_net_velocity(void *ctx, const float *x, float t, int B, float *v);

/* Guidance of one doubled output out (2B, per) channels-last with C channels into v (B, per). */
void transport_cfg_combine(const float *out, int B, int64_t per, int C, int guided, double scale,
                           float *v);

/* One Euler-Maruyama step of the SDE in place: drift = v + norm (t v - x) (= v + w(t) score with
 * w = norm (1 - t), score = (t v - x) / (1 - t)); x += drift dt + sqrt(2 w(t)) sqrt(dt) eps.
 * eps may be NULL: the deterministic final "Mean" step. */
void transport_sde_step(float *x, const float *v, const float *eps, int64_t n, double t, double dt,
                        double norm);

/* Integrates x (B, per), holding the initial noise x0 ~ N(0, I) on entry, from t = 0 to data:
 * SDE: grid linspace(0, 1 - last_step, steps), steps - 1 Euler-Maruyama steps of dt = grid[1] -
 * grid[0], then the "Mean" step of last_step from 1 - last_step (no noise); ODE / Heun: grid
 * linspace(0, 1, steps), steps - 1 Euler (Heun 2nd-order) steps. noise: one stream per sample
 * (B of them), from which the SDE draws its injected noise in order. */
void transport_sample(velocity_fn f, void *ctx, float *x, int B, int64_t per, const sampler_opts *o,
                      rng *noise);
