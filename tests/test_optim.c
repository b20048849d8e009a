/* Optimisation pieces: timm's cosine schedule values, AdamW against torch's update formula, the
 * no-weight-decay rule, gradient clipping, EMA, mixup/cutmix semantics. */
#include "../src/train/mixup.h"
#include "../src/train/optim.h"
#include "test.h"

TEST(lr_schedule_matches_timm_cosine) {
    /* timm 0.4.12 CosineLRScheduler(t_initial=20, lr_min=1e-5, warmup_lr_init=1e-6, warmup_t=5,
     * cycle_limit=1, t_in_epochs=False)._get_lr(t) with base lr 1e-3 */
    const int64_t t[] = {0, 3, 5, 9, 14, 19, 20, 25};
    const double want[] = {9.9999999999999995e-07, 0.00060040000000000017, 0.00085501785668734098,
                           0.00058243506019491434, 0.00021404630011522585, 1.6094271405406858e-05,
                           1.0000000000000001e-05, 1.0000000000000001e-05};
    lr_schedule s = {1e-3, 1e-6, 1e-5, 5, 20};
    for (int i = 0; i < 8; i++)
        EXPECT(fabs(lr_at(&s, t[i]) - want[i]) < 1e-15, "t=%lld: %.17g vs %.17g", (long long)t[i],
               lr_at(&s, t[i]), want[i]);
}

static void one_param_store(param_store *ps, const char *name, int n) {
    params_init(ps);
    params_add(ps, name, 1, (int[]){n});
    params_finalize(ps);
}

TEST(adamw_matches_torch_formula) {
    param_store ps;
    params_init(&ps);
    /* a weight over three lines of the flat block (each with its decay flag), then a bias */
    enum { NW = 35, N = NW + 2 };
    tensor *w = PARAM(&ps, "blocks.0.mlp.fc1.weight", 5, 7);
    tensor *b = PARAM(&ps, "blocks.0.mlp.fc1.bias", 2);
    params_finalize(&ps);
    adamw o;
    adamw_init(&o, &ps, 0.1, 0.9, 0.999, 1e-8);
    double p[N], m[N] = {0}, v[N] = {0};
    /* element i of the weight (i < NW), then of the bias */
#define DATA(i) ((i) < NW ? &w->data[i] : &b->data[(i) - NW])
#define GRAD(i) ((i) < NW ? &w->grad[i] : &b->grad[(i) - NW])
    for (int i = 0; i < N; i++) *DATA(i) = (float)(p[i] = 0.5 - 0.03 * i);
    for (int step = 1; step <= 3; step++) {
        for (int i = 0; i < N; i++) *GRAD(i) = (float)(0.01 * (i + 1) * (step % 2 ? 1 : -1));
        adamw_step(&o, &ps, 0.01);
        /* torch.optim.AdamW reference in double */
        for (int i = 0; i < N; i++) {
            double g = *GRAD(i), wd = i < NW ? 0.1 : 0.0; /* the bias is not decayed */
            p[i] *= 1 - 0.01 * wd;
            m[i] = 0.9 * m[i] + 0.1 * g;
            v[i] = 0.999 * v[i] + 0.001 * g * g;
            double bc1 = 1 - pow(0.9, step), bc2 = 1 - pow(0.999, step);
            p[i] -= 0.01 / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + 1e-8);
        }
    }
    for (int i = 0; i < N; i++)
        EXPECT(fabs(*DATA(i) - p[i]) < 1e-6, "param %d: %g vs %g", i, *DATA(i), p[i]);
#undef DATA
#undef GRAD
    /* each parameter from a cache line, the floats between them zero and left so by the steps */
    EXPECT(w->data == ps.data && b->data == ps.data + 48 && ps.span == 64 && ps.numel == N,
           "layout: bias at %td, span %lld, numel %lld", b->data - ps.data, (long long)ps.span,
           (long long)ps.numel);
    bool on_lines = (uintptr_t)ps.data % 64 == 0 && (uintptr_t)ps.grad % 64 == 0;
    EXPECT(on_lines, "blocks at %p and %p", (void *)ps.data, (void *)ps.grad);
    for (int64_t i = 0; i < ps.span; i++)
        if ((i >= NW && i < 48) || i >= 50)
            EXPECT(ps.data[i] == 0 && o.m[i] == 0 && o.v[i] == 0, "float %lld between the parameters: %g",
                   (long long)i, ps.data[i]);
    adamw_free(&o);
    params_free(&ps);
}

TEST(no_weight_decay_rule_follows_the_official_repos) {
    const char *decayed[] = {"blocks.0.attn.qkv.weight", "blocks.0.attn.an_bias", "pos_embed1",
                             "layers.0.blocks.0.attn.positional_encoding", "patch_embed.proj.weight"};
    const char *not_decayed[] = {"blocks.0.attn.qkv.bias", "pos_embed", "cls_token",
                                 "layers.0.blocks.1.attn.relative_position_bias_table"};
    for (int i = 0; i < 5; i++) {
        tensor t = {.name = decayed[i], .ndim = 2};
        EXPECT(param_decays(&t), "%s should be decayed", decayed[i]);
    }
    for (int i = 0; i < 4; i++) {
        tensor t = {.name = not_decayed[i], .ndim = 2};
        EXPECT(!param_decays(&t), "%s should not be decayed", not_decayed[i]);
    }
    tensor ln = {.name = "norm.weight", .ndim = 1};
    EXPECT(!param_decays(&ln), "1-D parameters are not decayed");
}

TEST(clip_grad_norm_and_ema) {
    param_store ps;
    one_param_store(&ps, "w", 4);
    float g[4] = {3, 0, 4, 0};
    memcpy(ps.grad, g, sizeof(g));
    double norm = clip_grad_norm(&ps, 1.0);
    EXPECT(fabs(norm - 5) < 1e-9, "norm %g", norm);
    EXPECT(fabsf(ps.grad[0] - 0.6f) < 1e-6f && fabsf(ps.grad[2] - 0.8f) < 1e-6f, "clipped %g %g", ps.grad[0], ps.grad[2]);
    memcpy(ps.grad, g, sizeof(g));
    clip_grad_norm(&ps, 10.0);
    EXPECT(ps.grad[0] == 3, "no clipping below the threshold");
    for (int i = 0; i < 4; i++) ps.data[i] = 1.0f;
    float *ema = calloc((size_t)ps.span, sizeof(float)); /* a flat block: span floats */
    ema_update(ema, &ps, 0.9);
    ema_update(ema, &ps, 0.9);
    EXPECT(fabsf(ema[0] - 0.19f) < 1e-6f, "ema %g", ema[0]);
    free(ema);
    params_free(&ps);
}

TEST(mixup_and_cutmix_follow_timm_batch_mode) {
    rng r;
    rng_seed(&r, 5, RNG_MIXUP);
    const int n = 4, S = 8, K = 3;
    float img[4 * 8 * 8], orig[4 * 8 * 8], t[4 * 3];
    for (int i = 0; i < n * S * S; i++) orig[i] = img[i] = (float)(i / (S * S)); /* sample i is all i */
    int labels[4] = {0, 1, 2, 1};
    mixup_config mix = {0.8, 0, 1.0, 0.5, 0.1};
    double lam = mixup_apply(&mix, img, n, S, S, 1, labels, K, t, &r);
    EXPECT(lam > 0 && lam < 1, "lambda %g", lam);
    /* x_i = lam x_i + (1-lam) x_{n-1-i}: sample 0 (zeros) mixed with sample 3 (threes) */
    EXPECT(fabsf(img[0] - (float)(3 * (1 - lam))) < 1e-5f, "mixup pixel %g", img[0]);
    /* targets: lam * smooth(onehot(y_i)) + (1 - lam) * smooth(onehot(y_{n-1-i})) */
    float off = 0.1f / 3, on = 0.9f + off;
    EXPECT(fabsf(t[0] - (float)(lam * on + (1 - lam) * off)) < 1e-6f, "target %g", t[0]);
    EXPECT(fabsf(t[1] - (float)(lam * off + (1 - lam) * on)) < 1e-6f, "partner target %g", t[1]);
    for (int i = 0; i < n; i++) {
        double s = t[i * 3] + t[i * 3 + 1] + t[i * 3 + 2];
        EXPECT(fabs(s - 1) < 1e-6, "row %d sums to %g", i, s);
    }
    memcpy(img, orig, sizeof(img));
    mixup_config cut = {0, 1.0, 1.0, 0.5, 0.0};
    lam = mixup_apply(&cut, img, n, S, S, 1, labels, K, t, &r);
    int pasted = 0;
    for (int p = 0; p < S * S; p++) pasted += img[p] == 3.0f;
    /* the corrected lambda is exactly 1 - box area / image area */
    EXPECT(fabs(lam - (1.0 - pasted / 64.0)) < 1e-9, "cutmix lambda %g, pasted %d", lam, pasted);
    mixup_config off_cfg = {0.8, 1.0, 0.0, 0.5, 0.1};
    memcpy(img, orig, sizeof(img));
    lam = mixup_apply(&off_cfg, img, n, S, S, 1, labels, K, t, &r);
    EXPECT(lam == 1.0 && memcmp(img, orig, sizeof(img)) == 0 && fabsf(t[0] - on) < 1e-6f,
           "prob 0 leaves the batch and gives smoothed one-hot targets");
}
