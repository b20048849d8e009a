#include "ddpm.h"

#include <math.h>
#include <stdlib.h>

#include "../core/arena.h"
#include "../core/check.h"
#include "../cpu/ddpm_terms.h"
#include "../ops/backend.h"
#include "../ops/ops.h"

void ddpm_schedule_init(ddpm_schedule *s, int steps) {
    CHECK(steps >= 2 && steps <= DDPM_TRAIN_STEPS, "DDPM: %d steps; the respaced process needs 2 to %d",
          steps, DDPM_TRAIN_STEPS);
    const int T = DDPM_TRAIN_STEPS;
    *s = (ddpm_schedule){.steps = steps, .timestep = xmalloc(sizeof(int) * (size_t)steps)};
    double **fields[] = {&s->beta, &s->alphas_cumprod, &s->post_logvar_clipped, &s->post_coef1,
                         &s->post_coef2, &s->fixed_large_logvar};
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++)
        *fields[f] = xmalloc(sizeof(double) * (size_t)steps);
    /* space_timesteps(T, [steps]): round(k (T - 1) / (steps - 1)), the fraction accumulated by
     * repeated addition and rounded half to even, as Python's round */
    double stride = (double)(T - 1) / (steps - 1), at = 0;
    for (int k = 0; k < steps; k++, at += stride) s->timestep[k] = (int)rint(at);
    /* the kept steps' betas from the base process's alphas_cumprod (linear betas, numpy's
     * linspace) */
    double base_cumprod = 1, kept_cumprod = 1;
    for (int i = 0, k = 0; i < T && k < steps; i++) {
        double beta = i == T - 1 ? 0.02 : 1e-4 + i * ((0.02 - 1e-4) / (T - 1));
        base_cumprod *= 1.0 - beta;
        if (i != s->timestep[k]) continue;
        s->beta[k] = 1.0 - base_cumprod / kept_cumprod;
        kept_cumprod = base_cumprod;
        k++;
    }
    double *post_var = xmalloc(sizeof(double) * (size_t)steps), cumprod = 1;
    for (int k = 0; k < steps; k++) {
        double prev = cumprod;
        cumprod *= 1.0 - s->beta[k];
        s->alphas_cumprod[k] = cumprod;
        post_var[k] = s->beta[k] * (1.0 - prev) / (1.0 - cumprod);
        s->post_coef1[k] = s->beta[k] * sqrt(prev) / (1.0 - cumprod);
        s->post_coef2[k] = (1.0 - prev) * sqrt(1.0 - s->beta[k]) / (1.0 - cumprod);
    }
    /* the posterior variance is 0 at step 0: its log takes step 1's value there */
    for (int k = 0; k < steps; k++) {
        s->post_logvar_clipped[k] = log(post_var[k ? k : 1]);
        s->fixed_large_logvar[k] = log(k ? s->beta[k] : post_var[1]);
    }
    free(post_var);
}

void ddpm_schedule_free(ddpm_schedule *s) {
    free(s->timestep), free(s->beta), free(s->alphas_cumprod), free(s->post_logvar_clipped);
    free(s->post_coef1), free(s->post_coef2), free(s->fixed_large_logvar);
}

void ddpm_coefs(const ddpm_schedule *s, int i, float *k) {
    double ac = s->alphas_cumprod[i];
    k[DDPM_SQRT_RECIP_AC] = (float)sqrt(1.0 / ac);
    k[DDPM_SQRT_RECIPM1_AC] = (float)sqrt(1.0 / ac - 1.0);
    k[DDPM_POST_COEF1] = (float)s->post_coef1[i];
    k[DDPM_POST_COEF2] = (float)s->post_coef2[i];
    k[DDPM_POST_LOGVAR] = (float)s->post_logvar_clipped[i];
    k[DDPM_LOG_BETA] = (float)log(s->beta[i]);
    k[DDPM_FIRST] = i == 0;
}

void ddpm_draw(const ddpm_schedule *s, const float *x0, int B, int64_t per, uint64_t key,
               int64_t first_sample, int *t, float *xt, float *eps) {
    CHECK(s->steps == DDPM_TRAIN_STEPS, "DDPM: training draws from the %d-step process, not %d steps",
          DDPM_TRAIN_STEPS, s->steps);
    for (int b = 0; b < B; b++) {
        rng g;
        rng_seed(&g, key + (uint64_t)(first_sample + b), RNG_TRANSPORT);
        int tb = t[b] = (int)rng_below(&g, DDPM_TRAIN_STEPS);
        double a = sqrt(s->alphas_cumprod[tb]), sigma = sqrt(1.0 - s->alphas_cumprod[tb]);
        const float *d = x0 + (size_t)b * per;
        for (int64_t i = 0; i < per; i++) {
            float e = eps[(size_t)b * per + i] = rng_normal(&g);
            xt[(size_t)b * per + i] = (float)(a * d[i] + sigma * e);
        }
    }
}

tensor *ddpm_loss(model *m, const float *x0, const int *y, int B, uint64_t key, int64_t first_sample,
                  forward_opts fo) {
    const model_config *mc = &m->cfg;
    int S = mc->img_size, C = mc->in_chans;
    int64_t per = (int64_t)S * S * C, n = B * per;
    /* drawn on the host (the same draws on every device), then moved where the kernels run; the
     * model reads t on the host */
    int *t = arena_alloc(&vitc_arena, sizeof(int) * (size_t)B);
    float *ts = arena_alloc(&vitc_arena, sizeof(float) * (size_t)B);
    float *xt = arena_alloc(&vitc_arena, sizeof(float) * (size_t)n);
    float *eps = arena_alloc(&vitc_arena, sizeof(float) * (size_t)n);
    float *coefs = arena_alloc(&vitc_arena, sizeof(float) * (size_t)B * DDPM_COEFS);
    ddpm_schedule s;
    ddpm_schedule_init(&s, DDPM_TRAIN_STEPS);
    ddpm_draw(&s, x0, B, per, key, first_sample, t, xt, eps);
    for (int b = 0; b < B; b++) {
        ts[b] = (float)t[b];
        ddpm_coefs(&s, t[b], coefs + (size_t)b * DDPM_COEFS);
    }
    ddpm_schedule_free(&s);
    fo.t = ts;
    fo.y = y;
    int shape[4] = {B, S, S, C};
    tensor *out = model_forward(m, tensor_wrap((float *)backend_floats(xt, n), 4, shape), &fo);
    tensor *noise = tensor_wrap((float *)backend_floats(eps, n), 4, shape);
    if (!mc->learn_sigma) return op_mse(out, noise);
    return op_ddpm_loss(out, tensor_wrap((float *)backend_floats(x0, n), 4, shape),
                        tensor_wrap((float *)backend_floats(xt, n), 4, shape), noise,
                        tensor_wrap((float *)backend_floats(coefs, (int64_t)B * DDPM_COEFS), 2,
                                    (int[]){B, DDPM_COEFS}));
}

void ddpm_step(const ddpm_schedule *s, int i, float *x, const float *out, const float *noise, int B,
               int64_t P, int C, int Co) {
    float k[DDPM_COEFS];
    ddpm_coefs(s, i, k);
    bool learned = Co == 2 * C;
    for (int64_t bp = 0; bp < (int64_t)B * P; bp++)
        for (int c = 0; c < C; c++) {
            int64_t j = bp * C + c;
            const float *o = out + bp * Co + c;
            double logvar, mean = ddpm_model_mean(k, x[j], o[0], learned ? o[C] : -1.0, &logvar);
            if (!learned) logvar = s->fixed_large_logvar[i];
            x[j] = (float)(mean + (noise && i > 0 ? exp(0.5 * logvar) * noise[j] : 0.0));
        }
}

void ddpm_sample(velocity_fn f, void *ctx, float *x, int B, int64_t P, int C, int Co, int steps,
                 rng *noise) {
    CHECK(Co == C || Co == 2 * C, "DDPM: the network gives %d channels for %d (eps, variance)", Co, C);
    ddpm_schedule s;
    ddpm_schedule_init(&s, steps);
    int64_t n = (int64_t)B * P * C;
    float *out = xmalloc(sizeof(float) * (size_t)B * P * Co), *eps = xmalloc(sizeof(float) * (size_t)n);
    for (int i = steps - 1; i >= 0; i--) {
        f(ctx, x, (float)s.timestep[i], B, out);
        for (int b = 0; b < B && i > 0; b++)
            for (int64_t j = 0; j < P * C; j++) eps[b * P * C + j] = rng_normal(&noise[b]);
        ddpm_step(&s, i, x, out, eps, B, P, C, Co);
    }
    free(out);
    free(eps);
    ddpm_schedule_free(&s);
}
