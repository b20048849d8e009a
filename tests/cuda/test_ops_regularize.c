/* The regularisation ops (src/ops/regularize.c) on the device against the CPU: dropout, the
 * residual linear step with drop path (plain, after a GELU, of two inputs, from windows), a branch
 * on the samples drop path keeps, and the MLP step on both of its paths. Masks are drawn on the
 * host from a stream seeded afresh on each run, so the CPU and the device draw the same: with p 0.3
 * or 0.4 it drops samples 3 and 4. */
#include "core/cpu_features.h"
#include "core/precision.h"
#include "core/tape.h"
#include "device_check.h"
#include "ops/ops.h"

typedef struct {
    float p;
    bool gelu;
    int wh, ww, shift; /* residual_linear_windows */
    bool *hidden_bf16; /* mlp_residual: whether the last call kept its hidden layer as bf16 */
} reg_ctx;

static rng stream(void) {
    rng r;
    rng_seed(&r, 2024, RNG_DROP_PATH);
    return r;
}

static tensor *dropout(tensor **in, const void *ctx) {
    const reg_ctx *c = ctx;
    rng r = stream();
    return op_dropout(in[0], c->p, &r);
}

TEST(cuda_op_dropout) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 41, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 5, 7, 33);
    double err = DEVICE_CHECK(dropout, (&(reg_ctx){.p = 0.3f}), x);
    EXPECT(err <= DEVICE_TOL, "p 0.3: max rel err %.2e", err);
}

static tensor *residual_linear(tensor **in, const void *ctx) {
    const reg_ctx *c = ctx;
    rng r = stream();
    return op_residual_linear(in[0], in[1], in[2], in[3], c->gelu, DROP_PATH(c->p, &r, in[0]));
}

TEST(cuda_op_residual_linear) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 42, RNG_TEST);
    /* 8 samples of 37 rows */
    tensor *res = LEAF(&r, 1.0f, 8, 37, 24), *h = LEAF(&r, 1.0f, 8, 37, 40), *w = LEAF(&r, 0.2f, 24, 40),
           *b = LEAF(&r, 1.0f, 24);
    for (int gelu = 0; gelu < 2; gelu++) {
        double err = DEVICE_CHECK(residual_linear, (&(reg_ctx){.p = 0.4f, .gelu = gelu}), res, h, w, b);
        EXPECT(err <= DEVICE_TOL, "drop path 0.4, gelu %d: max rel err %.2e", gelu, err);
        err = DEVICE_CHECK(residual_linear, (&(reg_ctx){.p = 0, .gelu = gelu}), res, h, w, NULL);
        EXPECT(err <= DEVICE_TOL, "no drop path, no bias, gelu %d: max rel err %.2e", gelu, err);
    }
}

static tensor *residual_linear_split(tensor **in, const void *ctx) {
    const reg_ctx *c = ctx;
    rng r = stream();
    return op_residual_linear_split(in[0], in[1], in[2], in[3], in[4], DROP_PATH(c->p, &r, in[0]));
}

TEST(cuda_op_residual_linear_split) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 43, RNG_TEST);
    tensor *res = LEAF(&r, 1.0f, 6, 9, 24), *h0 = LEAF(&r, 1.0f, 6, 9, 13), *h1 = LEAF(&r, 1.0f, 6, 9, 19),
           *w = LEAF(&r, 0.2f, 24, 32), *b = LEAF(&r, 1.0f, 24);
    double err = DEVICE_CHECK(residual_linear_split, (&(reg_ctx){.p = 0.4f}), res, h0, h1, w, b);
    EXPECT(err <= DEVICE_TOL, "drop path 0.4: max rel err %.2e", err);
    err = DEVICE_CHECK(residual_linear_split, (&(reg_ctx){.p = 0}), res, h0, h1, w, NULL);
    EXPECT(err <= DEVICE_TOL, "no drop path, no bias: max rel err %.2e", err);
}

static tensor *residual_linear_windows(tensor **in, const void *ctx) {
    const reg_ctx *c = ctx;
    rng r = stream();
    return op_residual_linear_windows(in[0], in[1], in[2], in[3], c->wh, c->ww, c->shift,
                                      DROP_PATH(c->p, &r, in[0]));
}

TEST(cuda_op_residual_linear_windows) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 44, RNG_TEST);
    /* 5 maps of 8x12 in 2x4 windows shifted by 1, and in 4x4 windows unshifted */
    tensor *res = LEAF(&r, 1.0f, 5, 8, 12, 16), *w = LEAF(&r, 0.2f, 16, 20), *b = LEAF(&r, 1.0f, 16);
    tensor *h = LEAF(&r, 1.0f, 5 * 4 * 3, 8, 20), *h4 = LEAF(&r, 1.0f, 5 * 2 * 3, 16, 20);
    double err = DEVICE_CHECK(residual_linear_windows, (&(reg_ctx){.p = 0.4f, .wh = 2, .ww = 4, .shift = 1}),
                              res, h, w, b);
    EXPECT(err <= DEVICE_TOL, "2x4 windows shifted, drop path 0.4: max rel err %.2e", err);
    err = DEVICE_CHECK(residual_linear_windows, (&(reg_ctx){.p = 0, .wh = 4, .ww = 4}), res, h4, w, NULL);
    EXPECT(err <= DEVICE_TOL, "4x4 windows: max rel err %.2e", err);
}

/* a branch on the samples its drop path keeps (p 0.4: all but 3 and 4): the layernorm that begins
 * it takes their rows, in windows or not, and the residual step puts its output back onto them */
static tensor *kept_branch(tensor **in, const void *ctx) {
    const reg_ctx *c = ctx;
    rng r = stream();
    drop_path d = op_drop_path(c->p, &r, in[0]->shape[0]);
    if (!c->wh) {
        tensor *h = op_linear(op_layernorm(in[0], in[1], in[2], 1e-5f, &d), in[3], NULL);
        return op_residual_linear(in[0], h, in[4], in[5], false, &d);
    }
    tensor *win = op_layernorm_windows(in[0], in[1], in[2], 1e-5f, c->wh, c->ww, c->shift, &d);
    return op_residual_linear_windows(in[0], op_linear(win, in[3], NULL), in[4], in[5], c->wh,
                                      c->ww, c->shift, &d);
}

TEST(cuda_branch_on_the_kept_samples) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 47, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 5, 8, 12, 16), *ln_w = LEAF(&r, 1.0f, 16), *ln_b = LEAF(&r, 1.0f, 16),
           *wq = LEAF(&r, 0.2f, 20, 16), *wp = LEAF(&r, 0.2f, 16, 20), *bp = LEAF(&r, 1.0f, 16);
    double err = DEVICE_CHECK(kept_branch, (&(reg_ctx){.p = 0.4f}), x, ln_w, ln_b, wq, wp, bp);
    EXPECT(err <= DEVICE_TOL, "tokens: max rel err %.2e", err);
    err = DEVICE_CHECK(kept_branch, (&(reg_ctx){.p = 0.4f, .wh = 2, .ww = 4, .shift = 1}), x, ln_w,
                       ln_b, wq, wp, bp);
    EXPECT(err <= DEVICE_TOL, "2x4 windows shifted: max rel err %.2e", err);
}

static tensor *mlp_residual(tensor **in, const void *ctx) {
    const reg_ctx *c = ctx;
    rng r = stream();
    tensor *out = op_mlp_residual(in[0], in[1], in[2], 1e-5f, in[3], in[4], in[5], in[6],
                                  DROP_PATH(c->p, &r, in[0]), NULL);
    if (c->hidden_bf16) *c->hidden_bf16 = tape_node_at(tape_size() - 2)->out->bf16;
    return out;
}

TEST(cuda_op_mlp_residual) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 45, RNG_TEST);
    /* in row chunks (48 channels) and as the two ops (above MLP_CHUNKED_MAX_CHANNELS_FP32) */
    static const int channels[2] = {48, MLP_CHUNKED_MAX_CHANNELS_FP32 + 8};
    for (int i = 0; i < 2; i++) {
        int C = channels[i], H = 3 * C;
        tensor *res = LEAF(&r, 1.0f, 6, 29, C), *ln_w = LEAF(&r, 1.0f, C), *ln_b = LEAF(&r, 1.0f, C),
               *w1 = LEAF(&r, 0.1f, H, C), *b1 = LEAF(&r, 1.0f, H), *w2 = LEAF(&r, 0.1f, C, H),
               *b2 = LEAF(&r, 1.0f, C);
        double err = DEVICE_CHECK(mlp_residual, (&(reg_ctx){.p = 0.3f}), res, ln_w, ln_b, w1, b1, w2, b2);
        EXPECT(err <= DEVICE_TOL, "%d channels, drop path 0.3: max rel err %.2e", C, err);
        err = DEVICE_CHECK(mlp_residual, (&(reg_ctx){.p = 0}), res, ln_w, ln_b, w1, NULL, w2, NULL);
        EXPECT(err <= DEVICE_TOL, "%d channels, no biases: max rel err %.2e", C, err);
    }
}

/* Under bf16 the device keeps the MLP step's hidden layer as bf16 too (bf16_store, bf16_load) and
 * follows the CPU's bf16 step on both paths: the sums' order differs, and a kept value that rounds
 * the other way moves the result by a bf16 ulp of it */
TEST(cuda_op_mlp_residual_bf16) {
    REQUIRE_DEVICE();
    if (cpu_bf16_error()) SKIP("the CPU's bf16 step, the reference, needs AVX512_BF16");
    rng r;
    rng_seed(&r, 46, RNG_TEST);
    static const int channels[2] = {48, MLP_CHUNKED_MAX_CHANNELS_BF16 + 8};
    CHECK(vitc_set_precision(PRECISION_BF16, NULL), "bf16 on this CPU");
    for (int i = 0; i < 2; i++) {
        int C = channels[i], H = 3 * C;
        tensor *res = LEAF(&r, 1.0f, 6, 29, C), *ln_w = LEAF(&r, 1.0f, C), *ln_b = LEAF(&r, 1.0f, C),
               *w1 = LEAF(&r, 0.1f, H, C), *b1 = LEAF(&r, 1.0f, H), *w2 = LEAF(&r, 0.1f, C, H),
               *b2 = LEAF(&r, 1.0f, C);
        bool hidden_bf16 = false;
        double err = DEVICE_CHECK(mlp_residual, (&(reg_ctx){.p = 0.3f, .hidden_bf16 = &hidden_bf16}), res, ln_w,
                                  ln_b, w1, b1, w2, b2);
        EXPECT(hidden_bf16 && err <= 1e-2, "%d channels: hidden layer %s on the device, max rel err %.2e", C,
               hidden_bf16 ? "bf16" : "fp32", err);
    }
    vitc_set_precision(PRECISION_FP32, NULL);
}
