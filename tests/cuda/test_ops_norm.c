/* The norm ops (src/ops/norm.c) on the device against the CPU. */
#include "core/cpu_features.h"
#include "core/precision.h"
#include "device_check.h"
#include "ops/ops.h"

static tensor *layernorm(tensor **in, const void *ctx) {
    (void)ctx;
    return op_layernorm(in[0], in[1], in[2], 1e-5f, NULL);
}

TEST(cuda_op_layernorm) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 1, RNG_TEST);
    tensor *x = LEAF(&r, 2.0f, 3, 37, 197), *w = LEAF(&r, 1.0f, 197), *b = LEAF(&r, 1.0f, 197);
    double err = DEVICE_CHECK(layernorm, NULL, x, w, b);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

static tensor *layernorm_linear(tensor **in, const void *ctx) {
    (void)ctx;
    return op_layernorm_linear(in[0], in[1], in[2], 1e-5f, in[3], in[4], NULL);
}

TEST(cuda_op_layernorm_linear) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 2, RNG_TEST);
    for (int bias = 1; bias >= 0; bias--) {
        tensor *x = LEAF(&r, 2.0f, 2, 37, 197), *ln_w = LEAF(&r, 1.0f, 197),
               *ln_b = LEAF(&r, 1.0f, 197);
        tensor *w = LEAF(&r, 0.1f, 53, 197), *b = bias ? LEAF(&r, 1.0f, 53) : NULL;
        double err = DEVICE_CHECK(layernorm_linear, NULL, x, ln_w, ln_b, w, b);
        EXPECT(err <= DEVICE_TOL, "bias %d: max rel err %.2e", bias, err);
    }
}

typedef struct {
    int wh, ww, shift;
} window_ctx;

static tensor *layernorm_windows(tensor **in, const void *ctx) {
    const window_ctx *c = ctx;
    return op_layernorm_windows(in[0], in[1], in[2], 1e-5f, c->wh, c->ww, c->shift, NULL);
}

TEST(cuda_op_layernorm_windows) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 3, RNG_TEST);
    /* a (B, H, W, C) map with W != H: shifted 4x4 windows, 2x12 stripes, the whole map */
    const window_ctx cases[] = {{4, 4, 2}, {2, 12, 0}, {8, 12, 0}};
    for (int i = 0; i < 3; i++) {
        tensor *x = LEAF(&r, 2.0f, 2, 8, 12, 19), *w = LEAF(&r, 1.0f, 19), *b = LEAF(&r, 1.0f, 19);
        double err = DEVICE_CHECK(layernorm_windows, &cases[i], x, w, b);
        EXPECT(err <= DEVICE_TOL, "%dx%d windows, shift %d: max rel err %.2e", cases[i].wh,
               cases[i].ww, cases[i].shift, err);
    }
}

typedef struct {
    window_ctx windows;
    bool *kept_bf16; /* whether the last call's windows were bf16 */
} windows_qkv_ctx;

/* q, k, v of the normalised windows by three GEMMs, as Swin and CSwin compute them */
static tensor *windows_qkv(tensor **in, const void *ctx) {
    const windows_qkv_ctx *c = ctx;
    int C = in[0]->shape[3];
    tensor *win = op_layernorm_windows(in[0], in[1], in[2], 1e-5f, c->windows.wh, c->windows.ww,
                                       c->windows.shift, NULL);
    *c->kept_bf16 = win->bf16;
    tensor *qkv[3];
    for (int i = 0; i < 3; i++) qkv[i] = op_linear_rows(win, in[3], in[4], i * C, C);
    return op_concat(3, qkv, 2);
}

/* under bf16 the device keeps the windows as bf16 too, and its products read them as stored */
TEST(cuda_op_layernorm_windows_qkv_bf16) {
    REQUIRE_DEVICE();
    if (cpu_bf16_error()) SKIP("the CPU's bf16 products, the reference, need AVX512_BF16");
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    CHECK(vitc_set_precision(PRECISION_BF16, NULL), "bf16 on this CPU");
    const window_ctx cases[] = {{4, 4, 2}, {8, 12, 0}};
    for (int i = 0; i < 2; i++) {
        tensor *x = LEAF(&r, 2.0f, 2, 8, 12, 20), *ln_w = LEAF(&r, 1.0f, 20), *ln_b = LEAF(&r, 1.0f, 20);
        tensor *w = LEAF(&r, 0.1f, 60, 20), *b = LEAF(&r, 1.0f, 60);
        bool kept_bf16 = false;
        double err = DEVICE_CHECK(windows_qkv, (&(windows_qkv_ctx){cases[i], &kept_bf16}), x, ln_w, ln_b, w, b);
        EXPECT(kept_bf16 && err <= 1e-2, "%dx%d windows: %s on the device, max rel err %.2e", cases[i].wh,
               cases[i].ww, kept_bf16 ? "bf16" : "fp32", err);
    }
    vitc_set_precision(PRECISION_FP32, NULL);
}

static tensor *l2norm(tensor **in, const void *ctx) {
    (void)ctx;
    return op_l2norm(in[0]);
}

TEST(cuda_op_l2norm) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 3, 37, 197);
    for (int j = 0; j < 197; j++) x->data[5 * 197 + j] = 0; /* a row at the origin: gradient 0 */
    double err = DEVICE_CHECK(l2norm, NULL, x);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

static tensor *softmax(tensor **in, const void *ctx) {
    (void)ctx;
    return op_softmax(in[0], in[1]);
}

TEST(cuda_op_softmax) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 5, RNG_TEST);
    /* the bias repeats over the batch (a relative position bias of 3 heads), a bias row, none */
    const int bias_dims[] = {3, 1, 0};
    for (int i = 0; i < 3; i++) {
        tensor *x = LEAF(&r, 3.0f, 2, 3, 37, 49);
        tensor *bias = bias_dims[i] == 3 ? LEAF(&r, 1.0f, 3, 37, 49)
                       : bias_dims[i]    ? LEAF(&r, 1.0f, 49)
                                         : NULL;
        double err = DEVICE_CHECK(softmax, NULL, x, bias);
        EXPECT(err <= DEVICE_TOL, "a bias of %d dims: max rel err %.2e", bias_dims[i], err);
    }
}

typedef struct {
    int dim;
    bool keepdim;
} mean_ctx;

static tensor *mean(tensor **in, const void *ctx) {
    const mean_ctx *c = ctx;
    return op_mean(in[0], c->dim, c->keepdim);
}

TEST(cuda_op_mean) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 6, RNG_TEST);
    const mean_ctx cases[] = {{1, false}, {0, true}, {-1, true}};
    for (int i = 0; i < 3; i++) {
        tensor *x = LEAF(&r, 1.0f, 3, 37, 197);
        double err = DEVICE_CHECK(mean, &cases[i], x);
        EXPECT(err <= DEVICE_TOL, "dim %d: max rel err %.2e", cases[i].dim, err);
    }
}
