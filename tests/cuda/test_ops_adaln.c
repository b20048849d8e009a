/* The DiT/SiT ops (src/ops/adaln.c) on the device against the CPU. */
#include "device_check.h"
#include "ops/adaln.h"

static tensor *silu(tensor **in, const void *ctx) {
    (void)ctx;
    return op_silu(in[0]);
}

static tensor *gelu_tanh(tensor **in, const void *ctx) {
    (void)ctx;
    return op_gelu_tanh(in[0]);
}

TEST(cuda_op_silu_and_gelu_tanh) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 11, RNG_TEST);
    double err = DEVICE_CHECK(silu, NULL, LEAF(&r, 3.0f, 37, 197));
    EXPECT(err <= DEVICE_TOL, "silu: max rel err %.2e", err);
    err = DEVICE_CHECK(gelu_tanh, NULL, LEAF(&r, 3.0f, 37, 197));
    EXPECT(err <= DEVICE_TOL, "gelu_tanh: max rel err %.2e", err);
}

static tensor *layernorm_modulate(tensor **in, const void *ctx) {
    (void)ctx;
    return op_layernorm_modulate(in[0], in[1], in[2], 1e-6f);
}

TEST(cuda_op_layernorm_modulate) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 12, RNG_TEST);
    tensor *x = LEAF(&r, 2.0f, 3, 37, 197), *shift = LEAF(&r, 1.0f, 3, 197),
           *scale = LEAF(&r, 0.5f, 3, 197);
    double err = DEVICE_CHECK(layernorm_modulate, NULL, x, shift, scale);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

static tensor *gated_residual(tensor **in, const void *ctx) {
    (void)ctx;
    return op_gated_residual(in[0], in[1], in[2]);
}

TEST(cuda_op_gated_residual) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 13, RNG_TEST);
    tensor *res = LEAF(&r, 1.0f, 3, 37, 197), *gate = LEAF(&r, 1.0f, 3, 197),
           *h = LEAF(&r, 1.0f, 3, 37, 197);
    double err = DEVICE_CHECK(gated_residual, NULL, res, gate, h);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

typedef struct {
    const int *labels;
    int B;
} embedding_ctx;

static tensor *embedding(tensor **in, const void *ctx) {
    const embedding_ctx *c = ctx;
    return op_embedding(in[0], c->labels, c->B);
}

TEST(cuda_op_embedding) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 14, RNG_TEST);
    /* 10 classes and the null row 10; labels repeat (their gradients add in sample order) */
    tensor *table = LEAF(&r, 1.0f, 11, 197);
    const int labels[] = {3, 10, 3, 0, 10, 3, 7, 9, 10};
    embedding_ctx c = {labels, (int)(sizeof(labels) / sizeof(labels[0]))};
    double err = DEVICE_CHECK(embedding, &c, table);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}
