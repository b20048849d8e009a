/* SiT transport: the mse op (hand value, finite differences), the interpolant and target, the
 * training loss against a hand computation, the Euler-Maruyama step, the samplers on a stub
 * velocity and on a zero-initialised SiT (adaLN-Zero: velocity 0), guidance. */
#include <math.h>
#include <string.h>

#include "../models/model.h"
#include "../src/core/arena.h"
#include "../src/core/tape.h"
#include "../src/ops/ops.h"
#include "../src/train/mediator_schedule.h"
#include "../src/train/transport.h"
#include "gradcheck.h"

static tensor *mse_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_mse(in[0], in[1]);
}

TEST(transport_mse_hand_case_and_gradients) {
    tensor *p = TENSOR(2, 2), *t = TENSOR(2, 2);
    const float pv[4] = {1, 2, 3, 4}, tv[4] = {0, 2, 5, 3};
    memcpy(p->data, pv, sizeof(pv)), memcpy(t->data, tv, sizeof(tv));
    p->requires_grad = true;
    tensor *l = op_mse(p, t);
    EXPECT(fabsf(l->data[0] - 1.5f) < 1e-7f, "loss %g, want (1 + 0 + 4 + 1) / 4", l->data[0]);
    tape_backward(l);
    const float want[4] = {0.5f, 0, -1.0f, 0.5f}; /* 2 (p - t) / 4 */
    for (int i = 0; i < 4; i++)
        EXPECT(fabsf(p->grad[i] - want[i]) < 1e-7f, "grad[%d] %g want %g", i, p->grad[i], want[i]);
    tape_reset();
    rng r;
    rng_seed(&r, 5, RNG_TEST);
    tensor *a = LEAF(&r, 1, 3, 4, 5), *b = LEAF(&r, 1, 3, 4, 5);
    EXPECT(GRADCHECK(mse_fn, NULL, a, b), "mse, both inputs");
    EXPECT_ERROR(op_mse(a, TENSOR(3, 4, 4)), "differ in shape");
}

/* x_t = t x1 + (1 - t) x0, u = x1 - x0 with t, x0 from the sample's own stream */
TEST(transport_draw_is_the_linear_interpolant_per_sample) {
    enum { B = 3, PER = 7 };
    float x1[B * PER], t[B], xt[B * PER], u[B * PER];
    for (int i = 0; i < B * PER; i++) x1[i] = sinf((float)i);
    transport_draw(x1, B, PER, 1234, 10, t, xt, u);
    for (int b = 0; b < B; b++) {
        rng g;
        rng_seed(&g, 1234 + 10 + (uint64_t)b, RNG_TRANSPORT);
        float tb = rng_uniform(&g);
        EXPECT(t[b] == tb && tb >= 0 && tb < 1, "t[%d] %g want %g", b, t[b], tb);
        for (int i = 0; i < PER; i++) {
            float x0 = rng_normal(&g), d = x1[b * PER + i];
            EXPECT(xt[b * PER + i] == tb * d + (1 - tb) * x0 && u[b * PER + i] == d - x0, "sample %d elem %d", b, i);
        }
    }
    /* a rank holding samples 1-2 of the batch draws what one process draws for them */
    float t2[2], xt2[2 * PER], u2[2 * PER];
    transport_draw(x1 + PER, 2, PER, 1234, 11, t2, xt2, u2);
    EXPECT(t2[0] == t[1] && !memcmp(xt2, xt + PER, sizeof(xt2)) && !memcmp(u2, u + PER, sizeof(u2)), "shard");
}

static model *tiny_sit(int in_chans, double dropout) {
    config c;
    config_init(&c);
    const char *files[1] = {"configs/tiny/sit_mediator.json"};
    char s1[64], s2[64];
    snprintf(s1, sizeof(s1), "model.in_chans=%d", in_chans);
    snprintf(s2, sizeof(s2), "model.class_dropout_prob=%g", dropout);
    const char *sets[2] = {s1, s2};
    model_config_load(&c, files, 1, sets, 2);
    model_config mc;
    model_config_read(&mc, &c);
    config_free(&c);
    return model_create(&mc, 3);
}

/* the loss of a batch equals mean (model(x_t, t, y) - u)^2 computed by hand, and its gradient with
 * respect to the prediction is 2 (v - u) / numel (checked through the network's output) */
TEST(transport_loss_equals_the_hand_computation) {
    model *m = tiny_sit(4, 0.1);
    rng r;
    rng_seed(&r, 9, RNG_TEST);
    for (int64_t i = 0; i < m->ps.span; i++) m->ps.data[i] += 0.05f * rng_normal(&r); /* v != 0 */
    enum { B = 2 };
    int S = m->cfg.img_size, C = m->cfg.in_chans, y[B] = {1, 10};
    int64_t per = (int64_t)S * S * C;
    tensor *x1 = RANDN(&r, 1, B, S, S, C);
    bool prev = tape_set_grad_enabled(false);
    tensor *loss = transport_loss(m, x1->data, y, B, 77, 0, (forward_opts){.train = false});
    float t[B], *xt = xmalloc(sizeof(float) * B * per), *u = xmalloc(sizeof(float) * B * per);
    transport_draw(x1->data, B, per, 77, 0, t, xt, u);
    tensor *v = model_forward(m, tensor_wrap(xt, 4, (int[]){B, S, S, C}), &(forward_opts){.t = t, .y = y});
    double want = 0;
    for (int64_t i = 0; i < B * per; i++) want += ((double)v->data[i] - u[i]) * ((double)v->data[i] - u[i]);
    want /= (double)(B * per);
    EXPECT(fabs(loss->data[0] - want) < 1e-6 * want, "loss %.8g want %.8g", loss->data[0], want);
    tape_set_grad_enabled(prev);
    free(xt), free(u);
    tape_reset();
    arena_reset(&vitc_arena);
    model_free(m);
}

TEST(transport_sde_step_hand_computation) {
    float x[3] = {0.5f, -1.0f, 2.0f}, v[3] = {1.0f, 0.25f, -0.5f}, eps[3] = {0.3f, -1.2f, 0.0f};
    double t = 0.3, dt = 0.1, norm = 1.0;
    float want[3];
    for (int i = 0; i < 3; i++) {
        /* drift = v + w(t) score, w = 1 - t, score = (t v - x) / (1 - t) */
        double w = norm * (1 - t), score = (t * v[i] - x[i]) / (1 - t), drift = v[i] + w * score;
        want[i] = (float)(x[i] + drift * dt + sqrt(2 * w) * sqrt(dt) * eps[i]);
    }
    transport_sde_step(x, v, eps, 3, t, dt, norm);
    for (int i = 0; i < 3; i++) EXPECT(fabsf(x[i] - want[i]) < 1e-6f, "x[%d] %g want %g", i, x[i], want[i]);
}

/* v = a x + b t: Euler and Heun on linspace(0, 1, steps) by hand */
static void linear_velocity(void *ctx, const float *x, float t, int B, float *v) {
    const float *ab = ctx;
    for (int i = 0; i < B * 2; i++) v[i] = ab[0] * x[i] + ab[1] * t;
}

TEST(transport_ode_samplers_on_a_stub_velocity) {
    float ab[2] = {-0.7f, 0.4f};
    for (int heun = 0; heun < 2; heun++) {
        float x[2] = {1.0f, -2.0f};
        double want[2] = {1.0, -2.0};
        sampler_opts o = sampler_defaults(heun ? SAMPLER_HEUN : SAMPLER_ODE);
        o.steps = 5; /* 4 steps of 0.25 */
        transport_sample(linear_velocity, ab, x, 1, 2, &o, NULL);
        for (int k = 0; k < 4; k++) {
            double t = k * 0.25, dt = 0.25;
            for (int i = 0; i < 2; i++) {
                double f0 = ab[0] * want[i] + ab[1] * t, pred = want[i] + dt * f0;
                want[i] = heun ? want[i] + 0.5 * dt * (f0 + ab[0] * pred + ab[1] * (t + dt)) : pred;
            }
        }
        for (int i = 0; i < 2; i++)
            EXPECT(fabs(x[i] - want[i]) < 1e-5, "%s x[%d] %g want %g", heun ? "heun" : "euler", i, x[i], want[i]);
    }
}

/* zero adaLN and final layer: the velocity is exactly 0, so the ODE returns its initial noise and
 * the SDE of 2 grid points is x0 (1 - 0.96) + sqrt(2 * 0.96) eps, then times (1 - 0.04) */
TEST(transport_samplers_on_a_zero_initialised_sit) {
    model *m = tiny_sit(4, 0.1);
    enum { B = 2 };
    int S = m->cfg.img_size, C = m->cfg.in_chans, y[B] = {3, 7};
    int64_t per = (int64_t)S * S * C;
    float *x = xmalloc(sizeof(float) * B * per), *x0 = xmalloc(sizeof(float) * B * per);
    rng noise[B], copy[B];
    for (int b = 0; b < B; b++) {
        rng_seed(&noise[b], 100 + (uint64_t)b, RNG_SAMPLE);
        for (int64_t i = 0; i < per; i++) x0[b * per + i] = rng_normal(&noise[b]);
        copy[b] = noise[b];
    }
    for (int kind = 0; kind < 3; kind++) {
        memcpy(x, x0, sizeof(float) * B * per);
        for (int b = 0; b < B; b++) noise[b] = copy[b];
        sampler_opts o = sampler_defaults((sampler_kind)kind);
        o.steps = kind == SAMPLER_SDE ? 2 : 6;
        o.cfg = kind == SAMPLER_HEUN ? 4.0 : 1.0; /* guidance of zeros is zero too */
        transport_net net = {.m = m, .y = y, .cfg = o.cfg, .guided_chans = o.guided_chans};
        transport_sample(transport_net_velocity, &net, x, B, per, &o, noise);
        for (int b = 0; b < B; b++)
            for (int64_t i = 0; i < per; i++) {
                float want = x0[b * per + i];
                if (kind == SAMPLER_SDE) {
                    float eps = rng_normal(&copy[b]);
                    want = (float)(want + (-want) * 0.96 + sqrt(2.0) * sqrt(0.96) * eps);
                    want = (float)(want + (-want) * 0.04);
                }
                float got = x[b * per + i];
                if (kind == SAMPLER_SDE ? fabsf(got - want) > 1e-5f : got != want) {
                    EXPECT(false, "sampler %d sample %d elem %lld: %g want %g", kind, b, (long long)i, got, want);
                    b = B;
                    break;
                }
            }
    }
    free(x), free(x0);
    model_free(m);
}

/* channels c < guided: u + s (c - u); the rest: the conditional output */
TEST(transport_guidance_combines_the_official_channels) {
    enum { B = 1, PER = 8, C = 4 }; /* 2 pixels of 4 channels */
    float out[2 * B * PER], v[B * PER];
    for (int i = 0; i < PER; i++) out[i] = (float)i, out[PER + i] = 10.0f + (float)i * 0.5f;
    transport_cfg_combine(out, B, PER, C, 3, 1.5, v);
    for (int i = 0; i < PER; i++) {
        float want = i % C < 3 ? out[PER + i] + 1.5f * (out[i] - out[PER + i]) : out[i];
        EXPECT(fabsf(v[i] - want) < 1e-6f, "v[%d] %g want %g", i, v[i], want);
    }
}

/* the switching rule of the time-step-wise mediator schedule on scripted distances */
TEST(mediator_schedule_switches_on_a_scripted_distance_sequence) {
    mediator_schedule s;
    /* K = 3: mu = (1.0 + 1.2 + 0.8) / 3 = 1; rho1 = 0.5, rho2 = 0.2 */
    mediator_schedule_init(&s, 3, 3, (double[]){0.5, 0.2});
    const double d[] = {99, 1.0, 1.2, 0.8, 0.6, 0.45, 0.3, 0.9, 0.15, 0.1};
    const int active_after[] = {0, 0, 0, 0, 0, 1, 1, 1, 2, 2};
    for (int k = 0; k < 10; k++) {
        mediator_schedule_observe(&s, k, d[k]);
        EXPECT(s.active == active_after[k], "after step %d (d %g): network %d, want %d", k, d[k], s.active,
               active_after[k]);
    }
    EXPECT(s.switched_after[0] == 5 && s.switched_after[1] == 8, "switched after %d and %d", s.switched_after[0],
           s.switched_after[1]);
    /* a calibrating step never switches, however small; one step below rho2 mu switches twice */
    mediator_schedule_init(&s, 3, 2, (double[]){0.5, 0.2});
    mediator_schedule_observe(&s, 1, 1.0);
    mediator_schedule_observe(&s, 2, 0.0);
    EXPECT(s.active == 0, "switched while calibrating");
    mediator_schedule_observe(&s, 3, 0.05); /* mu = 0.5: 0.05 < 0.2 mu = 0.1 */
    EXPECT(s.active == 2 && s.switched_after[0] == 3 && s.switched_after[1] == 3, "active %d after %d, %d", s.active,
           s.switched_after[0], s.switched_after[1]);
    /* two networks: a distance equal to rho mu does not switch */
    mediator_schedule_init(&s, 2, 1, (double[]){0.5});
    mediator_schedule_observe(&s, 1, 2.0);
    mediator_schedule_observe(&s, 2, 1.0);
    EXPECT(s.active == 0, "switched at d = rho mu");
    mediator_schedule_observe(&s, 3, 0.999);
    EXPECT(s.active == 1 && s.switched_after[0] == 3, "active %d", s.active);
}
