/* DiT's diffusion (model.arch "dit", src/train/ddpm.h): the schedule and its respacing against
 * tools/ref/dit.py, the loss op on hand cases and by finite differences (the bound's KL and the
 * decoder NLL with its edge bins), the per-sample draws, the tiny DiT's loss and every parameter
 * gradient against the reference, and the ancestral step with guidance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../models/model.h"
#include "../src/core/arena.h"
#include "../src/core/tape.h"
#include "../src/cpu/ddpm_terms.h"
#include "../src/core/safetensors.h"
#include "../src/ops/ops.h"
#include "../src/train/ddpm.h"
#include "gradcheck.h"
#include "model_check.h"

#define DIT_FIXTURE "tests/fixtures/sit/dit_ddpm.safetensors"
#define DIT_TOL 1e-4

static tensor *dit_tensor(const st_file *f, const char *name) {
    return fixture_tensor(f, DIT_FIXTURE, name);
}

TEST(ddpm_schedule_is_the_linear_one_and_respaces_as_the_official_code) {
    ddpm_schedule s;
    ddpm_schedule_init(&s, DDPM_TRAIN_STEPS);
    /* the process itself: every step kept, beta linear from 1e-4 to 0.02 */
    bool all = true;
    for (int k = 0; k < DDPM_TRAIN_STEPS; k++) all &= s.timestep[k] == k;
    EXPECT(all, "the 1000-step process keeps every step");
    EXPECT(fabs(s.beta[0] - 1e-4) < 1e-12 && fabs(s.beta[999] - 0.02) < 1e-9 &&
               fabs(s.beta[500] - (1e-4 + 500 * (0.02 - 1e-4) / 999)) < 1e-9,
           "betas %g %g %g", s.beta[0], s.beta[500], s.beta[999]);
    /* the posterior variance at step 0 is 0: its log is step 1's */
    EXPECT(s.post_logvar_clipped[0] == s.post_logvar_clipped[1], "clipped log variance");
    double product = 1;
    for (int k = 0; k < DDPM_TRAIN_STEPS; k++) product *= 1.0 - (1e-4 + k * (0.02 - 1e-4) / 999);
    EXPECT(fabs(s.alphas_cumprod[999] / product - 1) < 1e-9, "alphas_cumprod[999] %g want %g",
           s.alphas_cumprod[999], product);
    ddpm_schedule_free(&s);
    char err[4096];
    st_file f;
    if (!st_read(&f, DIT_FIXTURE, err, sizeof(err))) SKIP("no %s (make parity writes it): %s", DIT_FIXTURE, err);
    for (int steps = 50; steps <= 250; steps += 200) {
        ddpm_schedule r;
        ddpm_schedule_init(&r, steps);
        char name[64];
        snprintf(name, sizeof(name), "kept%d", steps);
        tensor *kept = dit_tensor(&f, name);
        int wrong = 0;
        for (int k = 0; k < steps; k++) wrong += r.timestep[k] != (int)kept->data[k];
        EXPECT(kept->numel == steps && !wrong, "%d steps: %d kept steps differ from space_timesteps'", steps, wrong);
        static const char *const fields[] = {"beta", "ac", "post_logvar", "coef1", "coef2"};
        const double *mine[] = {r.beta, r.alphas_cumprod, r.post_logvar_clipped, r.post_coef1, r.post_coef2};
        for (int i = 0; i < 5; i++) {
            snprintf(name, sizeof(name), "s%d/%s", steps, fields[i]);
            tensor *want = dit_tensor(&f, name); /* float32 of the reference's float64 */
            double worst = 0;
            for (int k = 0; k < steps; k++) {
                /* coef2 of the first step is 0 on both sides: relative to at least 1e-30 */
                double d = fabs(mine[i][k] - want->data[k]) / fmax(fabs(want->data[k]), 1e-30);
                worst = max_error(worst, d);
            }
            EXPECT(worst < 2e-7, "%s: rel err %.2e", name, worst);
        }
        ddpm_schedule_free(&r);
    }
    st_close(&f);
}

/* the loss as a function of the variance values alone: eps_hat's gradient is the mean term's only
 * (the bound holds eps_hat fixed), which finite differences of the whole loss would not give */
static tensor *ddpm_loss_of_variance(tensor **in, const void *ctx) {
    tensor *const *c = ctx; /* eps_hat, x0, xt, eps, coefs */
    return op_ddpm_loss(op_concat(2, (tensor *[]){c[0], in[0]}, 3), c[1], c[2], c[3], c[4]);
}

/* per sample b of 3: steps 0 (decoder NLL), 1 and 700 of the process */
static tensor *coefs_of(const int *steps, int B) {
    ddpm_schedule s;
    ddpm_schedule_init(&s, DDPM_TRAIN_STEPS);
    tensor *k = TENSOR(B, DDPM_COEFS);
    for (int b = 0; b < B; b++) ddpm_coefs(&s, steps[b], k->data + b * DDPM_COEFS);
    ddpm_schedule_free(&s);
    return k;
}

TEST(ddpm_loss_op_hand_cases_and_finite_differences) {
    enum { B = 3, H = 3, W = 2, C = 2 };
    int steps[B] = {0, 1, 700};
    tensor *k = coefs_of(steps, B);
    rng r;
    rng_seed(&r, 41, RNG_TEST);
    tensor *x0 = RANDN(&r, 0.5f, B, H, W, C), *eps = RANDN(&r, 1.0f, B, H, W, C), *xt = TENSOR(B, H, W, C);
    for (int b = 0; b < B; b++) { /* the first pixel of every sample in the edge bins */
        x0->data[b * H * W * C] = -1.0f;
        x0->data[b * H * W * C + 1] = 1.0f;
    }
    /* eps_hat = eps and the variance at the posterior's: the mean is the true one and the KL 0 */
    tensor *out = TENSOR(B, H, W, 2 * C);
    for (int i = 0; i < B * H * W; i++)
        for (int c = 0; c < C; c++) {
            const float *kb = k->data + (i / (H * W)) * DDPM_COEFS;
            double ac = 1.0 / ((double)kb[DDPM_SQRT_RECIP_AC] * kb[DDPM_SQRT_RECIP_AC]);
            xt->data[i * C + c] = (float)(sqrt(ac) * x0->data[i * C + c] + sqrt(1 - ac) * eps->data[i * C + c]);
            out->data[i * 2 * C + c] = eps->data[i * C + c];
            out->data[i * 2 * C + C + c] = -1.0f;
        }
    double nll = 0;
    for (int i = 0; i < H * W * C; i++) { /* sample 0's decoder NLL in bits, by the formula */
        const float *kb = k->data;
        double d, e = out->data[(i / C) * 2 * C + i % C], x = xt->data[i];
        double pred = kb[DDPM_SQRT_RECIP_AC] * x - (double)kb[DDPM_SQRT_RECIPM1_AC] * e;
        double mean = kb[DDPM_POST_COEF1] * pred + (double)kb[DDPM_POST_COEF2] * x, ls = 0.5 * kb[DDPM_POST_LOGVAR];
        double up = ddpm_cdf((x0->data[i] - mean + 1 / 255.0) * exp(-ls), &d);
        double lo = ddpm_cdf((x0->data[i] - mean - 1 / 255.0) * exp(-ls), &d);
        double p = x0->data[i] < -0.999 ? up : x0->data[i] > 0.999 ? 1 - lo : up - lo;
        nll -= log(p > 1e-12 ? p : 1e-12) / log(2.0);
    }
    float want = (float)(nll / (B * H * W * C)); /* samples 1, 2: mse 0, KL 0 */
    tensor *loss = op_ddpm_loss(out, x0, xt, eps, k);
    EXPECT(fabsf(loss->data[0] - want) <= 1e-5f * want, "loss %.8g want %.8g (sample 0's NLL alone)",
           loss->data[0], want);
    tape_reset();
    /* away from the optimum: the variance values' gradient by finite differences (the KL and the
     * decoder NLL with its edge bins), eps_hat's exactly the mean term's 2 (eps_hat - eps) / n */
    tensor *eps_hat = RANDN(&r, 1.0f, B, H, W, C), *v = LEAF(&r, 0.6f, B, H, W, C);
    tensor *with_eps_hat[5] = {eps_hat, x0, xt, eps, k};
    EXPECT(gradcheck("ddpm_loss", ddpm_loss_of_variance, with_eps_hat, 1, &v, (gradcheck_opts){.eps = 1e-3}),
           "the variance values' gradient against finite differences");
    tensor *o = LEAF(&r, 0.6f, B, H, W, 2 * C);
    tape_backward(op_ddpm_loss(o, x0, xt, eps, k));
    double worst = 0;
    for (int i = 0; i < B * H * W * C; i++) {
        int j = (i / C) * 2 * C + i % C;
        double want_grad = 2.0 * ((double)o->data[j] - eps->data[i]) / (B * H * W * C);
        double d = fabs(o->grad[j] - want_grad) / (fabs(want_grad) + 1e-6);
        worst = max_error(worst, d);
    }
    EXPECT(worst < 1e-5, "eps_hat's gradient: rel err %.2e", worst);
    EXPECT_ERROR(op_ddpm_loss(x0, x0, xt, eps, k), "twice the channels");
    EXPECT_ERROR(op_ddpm_loss(out, x0, xt, eps, TENSOR(B, 3)), "coefs");
    tape_reset();
    arena_reset(&vitc_arena);
}

/* x_t = sqrt(ac_t) x0 + sqrt(1 - ac_t) eps with t and eps from the sample's own stream */
TEST(ddpm_draw_is_per_sample) {
    enum { B = 3, PER = 5 };
    float x0[B * PER], xt[B * PER], eps[B * PER], xt2[2 * PER], eps2[2 * PER];
    int t[B], t2[2];
    for (int i = 0; i < B * PER; i++) x0[i] = cosf((float)i);
    ddpm_schedule s;
    ddpm_schedule_init(&s, DDPM_TRAIN_STEPS);
    ddpm_draw(&s, x0, B, PER, 99, 4, t, xt, eps);
    for (int b = 0; b < B; b++) {
        rng g;
        rng_seed(&g, 99 + 4 + (uint64_t)b, RNG_TRANSPORT);
        EXPECT(t[b] == (int)rng_below(&g, DDPM_TRAIN_STEPS), "t[%d] = %d", b, t[b]);
        double a = s.alphas_cumprod[t[b]];
        for (int i = 0; i < PER; i++) {
            float e = rng_normal(&g), want = (float)(sqrt(a) * x0[b * PER + i] + sqrt(1 - a) * e);
            EXPECT(eps[b * PER + i] == e && fabsf(xt[b * PER + i] - want) < 1e-6f, "sample %d elem %d", b, i);
        }
    }
    ddpm_draw(&s, x0 + PER, 2, PER, 99, 5, t2, xt2, eps2); /* a rank holding samples 1-2 */
    ddpm_schedule_free(&s);
    EXPECT(t2[0] == t[1] && !memcmp(xt2, xt + PER, sizeof(xt2)) && !memcmp(eps2, eps + PER, sizeof(eps2)), "shard");
}

static model *fixture_model(st_file *f, config *c) {
    char err[4096];
    model *m = model_create_from_json(c, st_meta(f, "config"), DIT_FIXTURE, 0);
    CHECK(model_load_state(m, f, "param/", err, sizeof(err)), "%s: %s", DIT_FIXTURE, err);
    return m;
}

TEST(dit_loss_and_every_gradient_match_the_pytorch_reference) {
    char err[4096];
    st_file f;
    if (!st_read(&f, DIT_FIXTURE, err, sizeof(err))) SKIP("no %s (make parity writes it): %s", DIT_FIXTURE, err);
    config c;
    model *m = fixture_model(&f, &c);
    tensor *x0 = dit_tensor(&f, "x0"), *xt = dit_tensor(&f, "xt"), *eps = dit_tensor(&f, "eps");
    tensor *tt = dit_tensor(&f, "t");
    tensor *yy = dit_tensor(&f, "y"), *ref_out = dit_tensor(&f, "output");
    int B = x0->shape[0], labels[8], steps[8];
    CHECK(B <= 8, "batch %d", B);
    for (int b = 0; b < B; b++) labels[b] = (int)yy->data[b], steps[b] = (int)tt->data[b];
    params_zero_grad(&m->ps);
    tensor *out = model_forward(m, xt, &(forward_opts){.t = tt->data, .y = labels});
    EXPECT(tensor_same_shape(out, ref_out), "output %s, reference %s", SHAPE_STR(out), SHAPE_STR(ref_out));
    tensor *loss = op_ddpm_loss(out, x0, xt, eps, coefs_of(steps, B));
    double e_out = rel_l2(out->data, ref_out->data, out->numel);
    float ref_loss = dit_tensor(&f, "loss")->data[0];
    double e_loss = fabs(loss->data[0] - ref_loss) / fabs(ref_loss);
    tape_backward(loss);
    const char *worst_name;
    double worst = worst_grad_error(m, &f, DIT_FIXTURE, &worst_name);
    printf("    output %.1e  loss %.1e  worst grad %.1e (%s)\n", e_out, e_loss, worst, worst_name);
    EXPECT(e_out <= DIT_TOL && e_loss <= DIT_TOL, "output rel err %.2e, loss %.8g vs %.8g", e_out, loss->data[0],
           ref_loss);
    EXPECT(worst <= DIT_TOL, "gradient of %s: rel err %.2e", worst_name, worst);
    model_free(m);
    config_free(&c);
    st_close(&f);
    tape_reset();
    arena_reset(&vitc_arena);
}

/* step 37 of a 50-step respacing with guidance 1.5 and the given noise, and the last step (0), on
 * the network through transport_net_velocity as ./sample calls it */
TEST(dit_ancestral_steps_match_the_pytorch_reference) {
    char err[4096];
    st_file f;
    if (!st_read(&f, DIT_FIXTURE, err, sizeof(err))) SKIP("no %s (make parity writes it): %s", DIT_FIXTURE, err);
    config c;
    model *m = fixture_model(&f, &c);
    /* on the heap: every network evaluation resets the arena */
    const st_entry *ex = st_find(&f, "step_x"), *en = st_find(&f, "step_noise"), *ey = st_find(&f, "step_y");
    CHECK(ex && en && ey, "%s lacks the step's tensors", DIT_FIXTURE);
    int B = (int)ex->shape[0], S = m->cfg.img_size, C = m->cfg.in_chans, y[2];
    int64_t n = (int64_t)B * S * S * C;
    CHECK(B == 2, "step batch %d", B);
    float *x = xmalloc(sizeof(float) * (size_t)n), *noise = xmalloc(sizeof(float) * (size_t)n);
    float *got = xmalloc(sizeof(float) * (size_t)n), *want = xmalloc(sizeof(float) * (size_t)n);
    float *out = xmalloc(sizeof(float) * (size_t)(2 * n)), labels[2];
    st_to_f32(ex, x), st_to_f32(en, noise), st_to_f32(ey, labels);
    y[0] = (int)labels[0], y[1] = (int)labels[1];
    ddpm_schedule s;
    ddpm_schedule_init(&s, 50);
    transport_net net = {.m = m, .y = y, .guided_chans = 3};
    for (int step = 0; step < 2; step++) {
        int i = step == 0 ? 37 : 0;
        net.cfg = step == 0 ? 1.5 : 1.0;
        memcpy(got, x, sizeof(float) * (size_t)n);
        transport_net_velocity(&net, got, (float)s.timestep[i], B, out);
        ddpm_step(&s, i, got, out, noise, B, (int64_t)S * S, C, 2 * C);
        const st_entry *e = st_find(&f, step == 0 ? "step37" : "step0");
        CHECK(e, "%s lacks a step", DIT_FIXTURE);
        st_to_f32(e, want);
        double err_step = rel_l2(got, want, n);
        printf("    step %2d (guidance %g): rel err %.1e\n", i, net.cfg, err_step);
        EXPECT(err_step <= DIT_TOL, "step %d: rel err %.2e", i, err_step);
    }
    ddpm_schedule_free(&s);
    free(x), free(noise), free(got), free(want), free(out);
    model_free(m);
    config_free(&c);
    st_close(&f);
}
