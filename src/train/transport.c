#include "transport.h"

#include <math.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../ops/backend.h"
#include "../ops/ops.h"

void transport_draw(const float *x1, int B, int64_t per, uint64_t key, int64_t first_sample,
                    float *t, float *xt, float *u) {
    for (int b = 0; b < B; b++) {
        rng g;
        rng_seed(&g, key + (uint64_t)(first_sample + b), RNG_TRANSPORT);
        /* t = U[0, 1) (t1 - t0) + t0 with t0 = 0, t1 = 1 */
        float tb = t[b] = rng_uniform(&g);
        const float *d = x1 + (size_t)b * per;
        float *xo = xt + (size_t)b * per, *uo = u + (size_t)b * per;
        for (int64_t i = 0; i < per; i++) {
            float x0 = rng_normal(&g);
            xo[i] = tb * d[i] + (1.0f - tb) * x0; /* ICPlan: alpha_t = t, sigma_t = 1 - t */
            uo[i] = d[i] - x0;                    /* d alpha / dt x1 + d sigma / dt x0 */
        }
    }
}

tensor *transport_loss(model *m, const float *x1, const int *y, int B, uint64_t key,
                       int64_t first_sample, forward_opts fo) {
    const model_config *mc = &m->cfg;
    int S = mc->img_size, C = mc->in_chans;
    int64_t per = (int64_t)S * S * C, n = B * per;
    /* drawn on the host (the same draws on every device), then moved where the kernels run; the
     * model reads t on the host */
    float *t = arena_alloc(&vitc_arena, sizeof(float) * (size_t)B);
    float *xt = arena_alloc(&vitc_arena, sizeof(float) * (size_t)n);
    float *u = arena_alloc(&vitc_arena, sizeof(float) * (size_t)n);
    transport_draw(x1, B, per, key, first_sample, t, xt, u);
    fo.t = t;
    fo.y = y;
    int shape[4] = {B, S, S, C};
    tensor *v = model_forward(m, tensor_wrap((float *)backend_floats(xt, n), 4, shape), &fo);
    return op_mse(v, tensor_wrap((float *)backend_floats(u, n), 4, shape));
}

sampler_opts sampler_defaults(sampler_kind kind) {
    return (sampler_opts){.kind = kind, .steps = 250, .cfg = 1.0, .guided_chans = 3,
                          .diffusion_norm = 1.0, .last_step = 0.04};
}

void transport_cfg_combine(const float *out, int B, int64_t per, int C, int guided, double scale,
                           float *v) {
    const float *cond = out, *uncond = out + (size_t)B * per;
    for (int64_t i = 0; i < (int64_t)B * per; i++) {
        int c = (int)(i % C); /* channels-last */
        v[i] = c < guided ? (float)(uncond[i] + scale * (cond[i] - uncond[i])) : cond[i];
    }
}

void transport_net_velocity(void *ctx, const float *x, float t, int B, float *v) {
    transport_net *n = ctx;
    const model_config *mc = &n->m->cfg;
    int S = mc->img_size, C = mc->in_chans;
    int64_t per = (int64_t)S * S * C;
    bool guide = n->cfg > 1.0, prev = tape_set_grad_enabled(false);
    CHECK(!guide || mc->class_dropout_prob > 0,
          "%s: guidance needs the null class (model.class_dropout_prob > 0)", mc->name);
    int R = guide ? 2 * B : B;
    float *in = arena_alloc(&vitc_arena, sizeof(float) * (size_t)R * per); /* on the host */
    float *ts = arena_alloc(&vitc_arena, sizeof(float) * (size_t)R);
    int *ys = arena_alloc(&vitc_arena, sizeof(int) * (size_t)R);
    for (int r = 0; r < R; r++) {
        memcpy(in + (size_t)r * per, x + (size_t)(r % B) * per, sizeof(float) * (size_t)per);
        ts[r] = t;
        ys[r] = r < B ? n->y[r] : mc->num_classes; /* the second half: the null class */
    }
    forward_opts fo = {.train = false, .t = ts, .y = ys};
    tensor *images = tensor_wrap((float *)backend_floats(in, R * per), 4, (int[]){R, S, S, C});
    tensor *out = model_forward(n->m, images, &fo);
    int64_t per_out = out->numel / R; /* dit: eps and the variance values, 2C channels */
    float *host = guide ? arena_alloc(&vitc_arena, sizeof(float) * (size_t)(R * per_out)) : v;
    const float *o = backend_read(host, out->data, R * per_out);
    if (guide) transport_cfg_combine(o, B, per_out, out->shape[3], n->guided_chans, n->cfg, v);
    else if (o != v) memcpy(v, o, sizeof(float) * (size_t)(B * per_out));
    tape_reset();
    arena_reset(&vitc_arena);
    tape_set_grad_enabled(prev);
}

void transport_sde_step(float *x, const float *v, const float *eps, int64_t n, double t, double dt,
                        double norm) {
    double w = norm * (1.0 - t), noise = sqrt(2.0 * w) * sqrt(dt);
    for (int64_t i = 0; i < n; i++) {
        double drift = v[i] + norm * (t * v[i] - x[i]);
        x[i] = (float)(x[i] + drift * dt + (eps ? noise * eps[i] : 0.0));
    }
}

void transport_sample(velocity_fn f, void *ctx, float *x, int B, int64_t per, const sampler_opts *o,
                      rng *noise) {
    CHECK(o->steps >= 2, "sampler: %d steps; the time grid needs at least 2 points", o->steps);
    int64_t n = (int64_t)B * per;
    float *v = xmalloc(sizeof(float) * (size_t)n), *eps = xmalloc(sizeof(float) * (size_t)n);
    if (o->kind == SAMPLER_SDE) {
        CHECK(o->last_step > 0 && o->last_step < 1, "sampler: last step %g outside (0, 1)", o->last_step);
        double t1 = 1.0 - o->last_step, dt = t1 / (o->steps - 1); /* linspace(0, t1, steps) */
        for (int k = 0; k < o->steps - 1; k++) {
            double t = t1 * k / (o->steps - 1);
            f(ctx, x, (float)t, B, v);
            for (int b = 0; b < B; b++)
                for (int64_t i = 0; i < per; i++) eps[b * per + i] = rng_normal(&noise[b]);
            transport_sde_step(x, v, eps, n, t, dt, o->diffusion_norm);
            if (o->after_step) o->after_step(ctx, k, x, n);
        }
        f(ctx, x, (float)t1, B, v);
        transport_sde_step(x, v, NULL, n, t1, o->last_step, o->diffusion_norm);
    } else {
        float *x2 = eps; /* Heun's Euler predictor */
        for (int k = 0; k < o->steps - 1; k++) {
            double t = (double)k / (o->steps - 1), t_next = (double)(k + 1) / (o->steps - 1);
            double dt = t_next - t;
            f(ctx, x, (float)t, B, v);
            if (o->kind == SAMPLER_ODE) {
                for (int64_t i = 0; i < n; i++) x[i] = (float)(x[i] + dt * v[i]);
                continue;
            }
            for (int64_t i = 0; i < n; i++) x2[i] = (float)(x[i] + dt * v[i]);
            float *v2 = xmalloc(sizeof(float) * (size_t)n);
            f(ctx, x2, (float)t_next, B, v2);
            for (int64_t i = 0; i < n; i++) x[i] = (float)(x[i] + 0.5 * dt * (v[i] + v2[i]));
            free(v2);
        }
    }
    free(v);
    free(eps);
}
