/* SiT (models/sit.c): the DiT ops against finite differences, the exact parameter counts of the
 * official code, the official initialisation, forward and every parameter gradient against the
 * PyTorch reference (tools/ref/sit.py), the tiny models' gradients and freed inference, label
 * dropout, and config errors. */
#include "../src/nn/layers.h"
#include "../src/ops/adaln.h"
#include "../src/train/transport.h"
#include "gradcheck.h"
#include "model_check.h"

#define SIT_FIXTURES "tests/fixtures/sit"
#define SIT_TOL 1e-4

/* ---- the ops ---- */

static tensor *silu_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_silu(in[0]);
}
static tensor *gelu_tanh_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_gelu_tanh(in[0]);
}
static tensor *ln_modulate_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_layernorm_modulate(in[0], in[1], in[2], 1e-6f);
}
static tensor *gated_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_gated_residual(in[0], in[1], in[2]);
}
static tensor *embedding_fn(tensor **in, const void *ctx) {
    return op_embedding(in[0], (const int *)ctx, 5);
}

TEST(sit_ops_match_known_values_and_finite_differences) {
    rng r;
    rng_seed(&r, 31, RNG_TEST);
    /* values: silu(1) = 1/(1+e^-1), gelu_tanh(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) */
    tensor *one = TENSOR(1);
    one->data[0] = 1.0f;
    EXPECT(fabsf(op_silu(one)->data[0] - 0.7310585786f) < 1e-6f, "silu(1) = %g",
           op_silu(one)->data[0]);
    EXPECT(fabsf(op_gelu_tanh(one)->data[0] - 0.8411920071f) < 1e-6f, "gelu_tanh(1) = %g",
           op_gelu_tanh(one)->data[0]);
    EXPECT(GRADCHECK(silu_fn, NULL, LEAF(&r, 2.0f, 3, 17)), "silu");
    EXPECT(GRADCHECK(gelu_tanh_fn, NULL, LEAF(&r, 2.0f, 3, 17)), "gelu_tanh");
    /* x (B, N, C) with per-sample shift/scale; and a 4-D x (B, H, W, C) */
    EXPECT(GRADCHECK(ln_modulate_fn, NULL, LEAF(&r, 1.0f, 2, 5, 70), LEAF(&r, 0.5f, 2, 70),
                     LEAF(&r, 0.5f, 2, 70)),
           "layernorm_modulate");
    EXPECT(GRADCHECK(ln_modulate_fn, NULL, LEAF(&r, 1.0f, 3, 2, 3, 9), LEAF(&r, 0.5f, 3, 9),
                     LEAF(&r, 0.5f, 3, 9)),
           "layernorm_modulate 4-D");
    EXPECT(GRADCHECK(gated_fn, NULL, LEAF(&r, 1.0f, 2, 5, 70), LEAF(&r, 1.0f, 2, 70),
                     LEAF(&r, 1.0f, 2, 5, 70)),
           "gated_residual");
    int idx[5] = {3, 0, 3, 5, 1}; /* a repeated row accumulates both samples */
    EXPECT(GRADCHECK(embedding_fn, idx, LEAF(&r, 1.0f, 6, 7)), "embedding");

    /* the fused op equals the composition it replaces: LayerNorm (weight 1, bias 0), then
     * x (1 + scale) + shift */
    tensor *x = LEAF(&r, 1.0f, 2, 5, 70), *shift = LEAF(&r, 0.5f, 2, 70),
           *scale = LEAF(&r, 0.5f, 2, 70);
    tensor *ones = TENSOR(70), *zeros = tensor_zeros(1, (int[]){70});
    for (int j = 0; j < 70; j++) ones->data[j] = 1.0f;
    tensor *fused = op_layernorm_modulate(x, shift, scale, 1e-6f);
    tensor *composed = op_add(op_mul(op_layernorm(x, ones, zeros, 1e-6f, NULL),
                                     op_add_scalar(RESHAPE(scale, 2, 1, 70), 1.0f)),
                              RESHAPE(shift, 2, 1, 70));
    EXPECT(max_rel_diff(fused->data, composed->data, fused->numel) < 1e-6,
           "fused vs composed forward");
    double d = backward_difference(fused, composed, 3, (tensor *[]){x, shift, scale});
    EXPECT(d < 1e-5, "fused vs composed backward differ by %g", d);
    EXPECT_ERROR(op_embedding(TENSOR(4, 3), (int[]){0, 4}, 2),
                 "embedding: index[1] = 4 outside [0, 4)");
    EXPECT_ERROR(op_gated_residual(TENSOR(2, 5, 7), TENSOR(2, 6), TENSOR(2, 5, 7)),
                 "gated_residual: per-sample");
    tape_reset();
    arena_reset(&vitc_arena);
}

/* ---- parameter counts ---- */

/* the model section of a config file */
static void file_config(model_config *mc, const char *path, const char *set) {
    config c;
    config_init(&c);
    const char *files[1] = {path};
    const char *sets[1] = {set};
    model_config_load(&c, files, 1, sets, set ? 1 : 0);
    model_config_read(mc, &c);
    config_free(&c);
}

/* sum(p.numel()) of the official SiT (pos_embed included) at 256² (latent 32x32x4, learn_sigma,
 * 1000 classes + the null class), computed by tools/ref/sit.py counts; DiT's are the same */
TEST(sit_param_counts_equal_the_official_code) {
    const struct {
        const char *config, *set;
        int64_t params;
    } counts[] = {
        {"configs/sit_s2.json", NULL, 32963360},
        {"configs/sit_s2_med4.json", NULL, 33056096},
        {"configs/sit_s2_med16.json", NULL, 33196064},
        {"configs/sit_s2_med64.json", NULL, 33755936},
        {"configs/sit_b2_med16.json", NULL, 130977824},
        {"configs/sit_l2_med16.json", NULL, 459343904},
        {"configs/sit_xl2_med16.json", NULL, 676613408},
        {"configs/sit_xl2.json", NULL, 675129632},
        /* the other sizes of the table (vanilla), by overriding the mediator config */
        {"configs/sit_b2_med16.json", "model.attn=native", 130512416},
        {"configs/sit_l2_med16.json", "model.attn=native", 458102816},
        {"configs/sit_b2_med16.json", "model.mediator_num=64", 132097568},
        {"configs/sit_xl2_med16.json", "model.mediator_num=4", 675742496},
        /* DiT is the same network (DiT-XL/2: 675,129,632 in DiT's own code) */
        {"configs/dit_s2.json", NULL, 32963360},
        {"configs/dit_s2_med16.json", NULL, 33196064},
        {"configs/sit_xl2.json", "model.arch=dit", 675129632},
    };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        model_config mc;
        file_config(&mc, counts[i].config, counts[i].set);
        param_store ps; /* declared, not allocated: XL is 2.7 GB of floats */
        model_declare(&mc, &ps);
        EXPECT(ps.numel == counts[i].params, "%s %s: %lld parameters, official %lld",
               counts[i].config, counts[i].set ? counts[i].set : "", (long long)ps.numel,
               (long long)counts[i].params);
        params_free(&ps);
    }
}

/* ---- parity with the PyTorch reference ---- */

/* mean((out - target)²): SiT's velocity loss with target = x1 - x0 */
static tensor *mse(tensor *out, tensor *target) {
    tensor *d = op_add(out, op_scale(target, -1.0f));
    tensor *sq = op_mul(d, d);
    return op_mean(RESHAPE(sq, 1, (int)sq->numel), 1, false);
}

/* one fixture of tools/ref/sit.py: output, loss and every parameter gradient within SIT_TOL */
static bool check_fixture(const char *path) {
    char err[4096];
    st_file f;
    if (!st_read(&f, path, err, sizeof(err))) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    config c;
    model *m = model_create_from_json(&c, st_meta(&f, "config"), path, 0);
    /* the fresh model's frozen sin-cos table is the reference's (which the fixture keeps
     * unperturbed) */
    tensor *pos = fixture_tensor(&f, path, "param/pos_embed"),
           *mine = params_find(&m->ps, "pos_embed");
    bool ok = mine && mine->numel == pos->numel;
    double e_pos = ok ? max_rel_diff(mine->data, pos->data, pos->numel) : 1;
    if (e_pos > 1e-6)
        test_fail(__FILE__, __LINE__, "%s: sin-cos pos_embed differs by %g", path, e_pos),
            ok = false;
    if (!model_load_state(m, &f, "param/", err, sizeof(err)))
        test_fail(__FILE__, __LINE__, "%s: state does not match the reference:\n%s", path, err),
            ok = false;
    tensor *x = fixture_tensor(&f, path, "input"), *tt = fixture_tensor(&f, path, "t");
    tensor *yy = fixture_tensor(&f, path, "y"), *target = fixture_tensor(&f, path, "target");
    tensor *ref_out = fixture_tensor(&f, path, "output");
    int B = x->shape[0], labels[B];
    for (int b = 0; b < B; b++) labels[b] = (int)yy->data[b];
    forward_opts o = {.train = false, .t = tt->data, .y = labels};
    params_zero_grad(&m->ps);
    tensor *out = model_forward(m, x, &o);
    if (!tensor_same_shape(out, ref_out)) {
        test_fail(__FILE__, __LINE__, "%s: output %s, reference %s", path, SHAPE_STR(out),
                  SHAPE_STR(ref_out));
        ok = false;
        goto done;
    }
    tensor *loss = mse(out, target);
    float ref_loss = fixture_tensor(&f, path, "loss")->data[0];
    double e_out = rel_l2(out->data, ref_out->data, out->numel);
    double e_loss = fabs(loss->data[0] - ref_loss) / fabs(ref_loss);
    tape_backward(loss);
    const char *worst_name;
    double worst = worst_grad_error(m, &f, path, &worst_name);
    printf("    %-32s output %.1e  loss %.1e  worst grad %.1e (%s)\n", strrchr(path, '/') + 1,
           e_out, e_loss, worst, worst_name);
    if (e_out > SIT_TOL || e_loss > SIT_TOL)
        test_fail(__FILE__, __LINE__, "%s: output rel err %.2e, loss %g vs %g", path, e_out,
                  loss->data[0], ref_loss),
            ok = false;
    if (worst > SIT_TOL || worst != worst)
        test_fail(__FILE__, __LINE__, "%s: gradient of %s rel err %.2e", path, worst_name, worst),
            ok = false;
done:
    model_free(m);
    config_free(&c);
    st_close(&f);
    tape_reset();
    arena_reset(&vitc_arena);
    return ok;
}

TEST(sit_parity_with_pytorch_reference) {
    /* mediators with learn_sigma and the null class; softmax attention without either */
    const char *names[] = {"sit_mediator.safetensors", "sit_native_no_sigma.safetensors"};
    for (int i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof(path), SIT_FIXTURES "/%s", names[i]);
        FILE *probe = fopen(path, "rb");
        if (!probe) SKIP("no %s (make parity writes it)", path);
        fclose(probe);
        check_fixture(path);
    }
}

/* One step of each sampler against tools/ref/sit.py's reference of the official samplers (spec §5,
 * §6) on the tiny mediator SiT: Euler-Maruyama with guidance and the given noise, the final "Mean"
 * step, an Euler ODE step and a guided Heun step. */
TEST(sit_sampler_steps_match_the_pytorch_reference) {
    const char *path = SIT_FIXTURES "/sit_sampler_steps.safetensors";
    char err[4096];
    st_file f;
    if (!st_read(&f, path, err, sizeof(err))) SKIP("no %s (make parity writes it): %s", path, err);
    config c;
    model *m = model_create_from_json(&c, st_meta(&f, "config"), path, 0);
    bool loaded = model_load_state(m, &f, "param/", err, sizeof(err));
    /* on the heap: every network evaluation resets the arena */
    const st_entry *ex = st_find(&f, "x"), *eeps = st_find(&f, "eps"), *ey = st_find(&f, "y");
    CHECK(ex && eeps && ey, "%s lacks x, eps or y", path);
    int B = (int)ex->shape[0], y[8];
    int64_t n = 1;
    for (int i = 0; i < ex->ndim; i++) n *= ex->shape[i];
    CHECK(B <= 8, "%s: batch %d", path, B);
    float *x = xmalloc(sizeof(float) * (size_t)n), *eps = xmalloc(sizeof(float) * (size_t)n);
    float *want = xmalloc(sizeof(float) * (size_t)n), *labels = xmalloc(sizeof(float) * (size_t)B);
    st_to_f32(ex, x), st_to_f32(eeps, eps), st_to_f32(ey, labels);
    for (int b = 0; b < B; b++) y[b] = (int)labels[b];
    float *v = xmalloc(sizeof(float) * (size_t)n), *v2 = xmalloc(sizeof(float) * (size_t)n);
    float *got = xmalloc(sizeof(float) * (size_t)n), *pred = xmalloc(sizeof(float) * (size_t)n);
    transport_net net = {.m = m, .y = y, .guided_chans = sampler_defaults(SAMPLER_SDE).guided_chans};
    double worst = 0;
    const char *worst_name = "";
    for (int step = 0; step < 4; step++) {
        static const char *const names[] = {"sde", "mean", "euler", "heun"};
        static const double ts[] = {0.3, 0.96, 0.25, 0.5}, dts[] = {0.04, 0.04, 0.25, 0.25}, cfgs[] = {1.5, 1, 1, 1.5};
        double t = ts[step], dt = dts[step];
        net.cfg = cfgs[step];
        memcpy(got, x, sizeof(float) * (size_t)n);
        transport_net_velocity(&net, got, (float)t, B, v);
        if (step < 2) {
            transport_sde_step(got, v, step == 0 ? eps : NULL, n, t, dt, 1.0);
        } else if (step == 2) {
            for (int64_t i = 0; i < n; i++) got[i] += (float)(dt * v[i]);
        } else {
            for (int64_t i = 0; i < n; i++) pred[i] = (float)(got[i] + dt * v[i]);
            transport_net_velocity(&net, pred, (float)(t + dt), B, v2);
            for (int64_t i = 0; i < n; i++) got[i] += (float)(0.5 * dt * (v[i] + v2[i]));
        }
        const st_entry *e = st_find(&f, names[step]);
        CHECK(e, "%s has no tensor %s", path, names[step]);
        st_to_f32(e, want);
        double err_step = rel_l2(got, want, n);
        printf("    %-5s step: rel err %.1e\n", names[step], err_step);
        if (err_step > worst || err_step != err_step) worst = err_step, worst_name = names[step];
    }
    free(x), free(eps), free(want), free(labels), free(v), free(v2), free(got), free(pred);
    model_free(m);
    config_free(&c);
    st_close(&f);
    EXPECT(loaded, "%s: state does not match the reference:\n%s", path, err);
    EXPECT(worst <= SIT_TOL, "%s step: rel err %.2e", worst_name, worst);
}

/* ---- the official initialisation ---- */

static double max_abs(const tensor *t) {
    double v = 0;
    for (int64_t i = 0; i < t->numel; i++) v = max_error(v, fabs(t->data[i]));
    return v;
}

static double std_of(const tensor *t) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < t->numel; i++) s += t->data[i], s2 += (double)t->data[i] * t->data[i];
    return sqrt(s2 / t->numel - (s / t->numel) * (s / t->numel));
}

TEST(sit_init_follows_the_official_scheme) {
    model_config mc;
    file_config(&mc, "configs/sit_s2_med16.json", "model.depths=[2]");
    model *m = model_create(&mc, 7);
    const param_store *ps = &m->ps;
    const char *zero[] = {"blocks.0.adaLN_modulation.1.weight",
                          "blocks.1.adaLN_modulation.1.bias",
                          "final_layer.linear.weight",
                          "final_layer.linear.bias",
                          "final_layer.adaLN_modulation.1.weight",
                          "blocks.0.attn.qkv.bias",
                          "blocks.1.mlp.fc2.bias",
                          "x_embedder.proj.bias",
                          "t_embedder.mlp.0.bias"};
    for (size_t i = 0; i < sizeof(zero) / sizeof(*zero); i++)
        EXPECT(max_abs(params_find(ps, zero[i])) == 0, "%s is not zero", zero[i]);
    /* xavier_uniform_: U(±sqrt(6 / (fan_in + fan_out))), the patch conv on its (D, C p²) view */
    const struct {
        const char *name;
        double bound;
    } xavier[] = {{"blocks.0.attn.qkv.weight", sqrt(6.0 / (384 + 1152))},
                  {"blocks.1.attn.proj.weight", sqrt(6.0 / 768)},
                  {"blocks.0.mlp.fc1.weight", sqrt(6.0 / (384 + 1536))},
                  {"x_embedder.proj.weight", sqrt(6.0 / (16 + 384))}};
    for (size_t i = 0; i < sizeof(xavier) / sizeof(*xavier); i++) {
        const tensor *t = params_find(ps, xavier[i].name);
        double mx = max_abs(t), sd = std_of(t), want_sd = xavier[i].bound / sqrt(3.0);
        EXPECT(mx <= xavier[i].bound && mx > 0.99 * xavier[i].bound &&
                   fabs(sd / want_sd - 1) < 0.05,
               "%s: max %g std %g, xavier bound %g (std %g)", xavier[i].name, mx, sd,
               xavier[i].bound, want_sd);
    }
    const char *normal[] = {"t_embedder.mlp.0.weight", "t_embedder.mlp.2.weight",
                            "y_embedder.embedding_table.weight", "blocks.0.attn.an_bias"};
    for (size_t i = 0; i < sizeof(normal) / sizeof(*normal); i++) {
        double sd = std_of(params_find(ps, normal[i]));
        EXPECT(fabs(sd / 0.02 - 1) < 0.1, "%s: std %g, official 0.02", normal[i], sd);
    }
    /* the depthwise conv keeps PyTorch's default: U(±1/sqrt(9)) */
    double dwc = max_abs(params_find(ps, "blocks.0.attn.dwc.weight"));
    EXPECT(dwc <= 1.0 / 3 && dwc > 0.3, "dwc weight max %g, bound 1/3", dwc);
    EXPECT(params_find(ps, "y_embedder.embedding_table.weight")->shape[0] == 1001,
           "no null-class row");
    const tensor *pos = params_find(ps, "pos_embed");
    EXPECT(!pos->requires_grad, "pos_embed is trainable");
    /* token (r, q) = (1, 2), D = 384: channel 0 is sin(col · 1), channel 96 cos(col), 192 sin(row)
     */
    const float *e = pos->data + (1 * 16 + 2) * 384;
    EXPECT(fabsf(e[0] - sinf(2.0f)) < 1e-6f && fabsf(e[96] - cosf(2.0f)) < 1e-6f &&
               fabsf(e[192] - sinf(1.0f)) < 1e-6f && fabsf(e[288] - cosf(1.0f)) < 1e-6f,
           "pos_embed of (1, 2): %g %g %g %g", e[0], e[96], e[192], e[288]);
    /* adaLN-Zero: the freshly built network predicts exactly zero */
    rng r;
    rng_seed(&r, 8, RNG_TEST);
    tensor *x = RANDN(&r, 1, 2, 32, 32, 4);
    forward_opts fo = {.train = false, .t = (float[]){0.3f, 0.9f}, .y = (int[]){5, 1000}};
    bool prev = tape_set_grad_enabled(false);
    tensor *out = model_forward(m, x, &fo);
    tape_set_grad_enabled(prev);
    EXPECT(out->ndim == 4 && out->shape[0] == 2 && out->shape[1] == 32 && out->shape[3] == 4 &&
               max_abs(out) == 0,
           "zero-initialised SiT gives %s with max %g", SHAPE_STR(out), max_abs(out));
    model_free(m);
    arena_reset(&vitc_arena);
}

/* ---- the tiny models ---- */

static model *tiny_model(const char *path, const char *set, uint64_t seed) {
    model_config mc;
    file_config(&mc, path, set);
    model *m = model_create(&mc, seed);
    /* off the adaLN-Zero init (zero gates and final layer pass no gradient to most parameters) */
    rng r;
    rng_seed(&r, seed + 100, RNG_TEST);
    for (int i = 0; i < m->ps.n; i++) {
        tensor *p = m->ps.params[i];
        if (!p->requires_grad) continue;
        for (int64_t j = 0; j < p->numel; j++) p->data[j] += 0.1f * rng_normal(&r);
    }
    return m;
}

TEST(sit_tiny_models_run_and_every_parameter_gets_a_gradient) {
    const char *paths[] = {"configs/tiny/sit_native.json", "configs/tiny/sit_mediator.json"};
    for (int k = 0; k < 2; k++) {
        model *m = tiny_model(paths[k], NULL, 3);
        rng r;
        rng_seed(&r, 9, RNG_TEST);
        tensor *x = RANDN(&r, 1, 3, 8, 8, 4);
        float t[3] = {0.0f, 0.5f, 1.0f};
        int y[3] = {0, 9, 10};
        forward_opts fo = {.train = false, .t = t, .y = y};
        params_zero_grad(&m->ps);
        tensor *out = model_forward(m, x, &fo);
        EXPECT(out->ndim == 4 && out->shape[0] == 3 && out->shape[1] == 8 && out->shape[2] == 8 &&
                   out->shape[3] == 4,
               "%s: output %s", paths[k], SHAPE_STR(out));
        float taped[3 * 8 * 8 * 4];
        memcpy(taped, out->data, sizeof(taped));
        for (int64_t j = 0; j < out->numel; j++)
            EXPECT(isfinite(out->data[j]), "%s: non-finite output", paths[k]);
        tape_backward(mse(out, tensor_zeros(4, (int[]){3, 8, 8, 4})));
        for (int p = 0; p < m->ps.n; p++) {
            const tensor *w = m->ps.params[p];
            double s = 0;
            for (int64_t j = 0; j < w->numel; j++) s += fabs(w->grad[j]);
            if (!strcmp(w->name, "pos_embed")) {
                EXPECT(s == 0, "%s: the frozen pos_embed got a gradient", paths[k]);
                continue;
            }
            EXPECT(s > 0 && isfinite(s), "%s: %s gets no gradient", paths[k], w->name);
        }
        tape_reset();
        arena_reset(&vitc_arena);
        /* inference that frees each block's activations gives the taped forward's output */
        bool prev = tape_set_grad_enabled(false);
        rng_seed(&r, 9, RNG_TEST); /* the same x */
        tensor *again = model_forward(m, RANDN(&r, 1, 3, 8, 8, 4), &fo);
        tape_set_grad_enabled(prev);
        EXPECT(max_rel_diff(again->data, taped, again->numel) < 1e-6, "%s: freed inference differs",
               paths[k]);
        /* the output depends on t and on y */
        float t2[3] = {0.0f, 0.25f, 1.0f};
        int y2[3] = {1, 9, 10};
        forward_opts f2 = {.train = false, .t = t2, .y = y2};
        rng_seed(&r, 9, RNG_TEST);
        tensor *other = model_forward(m, RANDN(&r, 1, 3, 8, 8, 4), &f2);
        int per = 8 * 8 * 4;
        EXPECT(memcmp(other->data, taped, sizeof(float) * per) &&
                   memcmp(other->data + per, taped + per, sizeof(float) * per) &&
                   !memcmp(other->data + 2 * per, taped + 2 * per, sizeof(float) * per),
               "%s: samples 0 (y) and 1 (t) must change, sample 2 not", paths[k]);
        model_free(m);
        tape_reset();
        arena_reset(&vitc_arena);
    }
}

TEST(sit_label_dropout_draws_the_null_class_in_training) {
    model *m = tiny_model("configs/tiny/sit_mediator.json", "model.class_dropout_prob=1", 4);
    rng r, drop;
    rng_seed(&r, 10, RNG_TEST);
    rng_seed(&drop, 11, RNG_DROPOUT);
    tensor *x = RANDN(&r, 1, 2, 8, 8, 4);
    float t[2] = {0.3f, 0.7f};
    bool prev = tape_set_grad_enabled(false);
    forward_opts train = {.train = true, .rng = &drop, .t = t, .y = (int[]){2, 3}};
    forward_opts null = {.train = false, .t = t, .y = (int[]){10, 10}};
    tensor *a = model_forward(m, x, &train), *b = model_forward(m, x, &null);
    EXPECT(!memcmp(a->data, b->data, sizeof(float) * a->numel), "p = 1 kept a label");
    forward_opts no_rng = {.train = true, .t = t, .y = (int[]){2, 3}};
    EXPECT_ERROR(model_forward(m, x, &no_rng),
                 "label dropout (class_dropout_prob 1) needs a random stream");
    forward_opts bad = {.train = false, .t = t, .y = (int[]){2, 11}};
    EXPECT_ERROR(model_forward(m, x, &bad),
                 "label 11 of sample 1 outside [0, 10] (the last is the null class)");
    tape_set_grad_enabled(prev);
    model_free(m);
    arena_reset(&vitc_arena);
    /* without label dropout there is no null row (the official use_cfg_embedding) */
    model_config mc;
    file_config(&mc, "configs/tiny/sit_native.json", "model.class_dropout_prob=0");
    param_store ps;
    model_declare(&mc, &ps);
    EXPECT(params_find(&ps, "y_embedder.embedding_table.weight")->shape[0] == 10,
           "a null row without dropout");
    params_free(&ps);
}

TEST(sit_config_errors_name_the_json_path) {
    model_config mc;
    file_config(&mc, "configs/tiny/sit_mediator.json", "model.mediator_num=5");
    EXPECT_ERROR(model_create(&mc, 0), "model.mediator_num: 5 is not a perfect square");
    file_config(&mc, "configs/tiny/sit_mediator.json", "model.mediator_num=25");
    EXPECT_ERROR(model_create(&mc, 0),
                 "model.mediator_num: 25 mediators pool to 5x5, larger than the 4x4");
    file_config(&mc, "configs/tiny/sit_mediator.json", "model.attn=flatten");
    EXPECT_ERROR(model_create(&mc, 0),
                 "model.attn: SiT takes \"native\" or \"mediator\" attention");
    file_config(&mc, "configs/tiny/sit_mediator.json", "model.patch_size=3");
    EXPECT_ERROR(model_create(&mc, 0),
                 "model.patch_size: 3 does not divide the latent size img_size 8");
    file_config(&mc, "configs/tiny/sit_mediator.json", "model.drop_path=0.1");
    EXPECT_ERROR(model_create(&mc, 0), "model.drop_path: SiT has no drop path");
    /* "mediator" is the agent core; "agent" names it too */
    file_config(&mc, "configs/tiny/sit_mediator.json", "model.attn=agent");
    EXPECT(mc.attn[0][0] == ATTN_AGENT && mc.mediator_num == 4, "attn agent / mediator_num");
}
