/* The losses (src/ops/loss.c) on the device against the CPU: cross entropy with soft targets (rows
 * wider than a block, targets not summing to one), with labels and smoothing, the mse and DiT's
 * loss. */
#include "cpu/ddpm_terms.h"
#include "device_check.h"
#include "ops/ops.h"
#include "train/ddpm.h"

static tensor *cross_entropy(tensor **in, const void *ctx) {
    (void)ctx;
    return op_cross_entropy(in[0], in[1]);
}

/* soft targets of mixup-like rows: positive, each row's mass near one */
static tensor *soft_targets(rng *r, int B, int K) {
    tensor *t = RANDN(r, 1.0f, B, K);
    for (int b = 0; b < B; b++) {
        float sum = 0;
        for (int k = 0; k < K; k++) sum += t->data[b * K + k] = t->data[b * K + k] * t->data[b * K + k];
        for (int k = 0; k < K; k++) t->data[b * K + k] *= (0.9f + 0.05f * (float)b) / sum;
    }
    return t;
}

TEST(cuda_op_cross_entropy) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 21, RNG_TEST);
    tensor *z = LEAF(&r, 3.0f, 7, 11), *t = soft_targets(&r, 7, 11);
    double worst = DEVICE_CHECK(cross_entropy, NULL, z, t);
    tensor *wide = LEAF(&r, 3.0f, 3, 1000), *tw = soft_targets(&r, 3, 1000);
    double e = DEVICE_CHECK(cross_entropy, NULL, wide, tw);
    worst = e > worst || e != e ? e : worst;
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}

struct labels_ctx {
    const int *labels;
    float smoothing;
};

static tensor *cross_entropy_labels(tensor **in, const void *ctx) {
    const struct labels_ctx *c = ctx;
    return op_cross_entropy_labels(in[0], c->labels, c->smoothing);
}

TEST(cuda_op_cross_entropy_labels) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 22, RNG_TEST);
    tensor *z = LEAF(&r, 3.0f, 9, 13);
    struct labels_ctx smooth = {(int[]){0, 12, 5, 5, 3, 7, 12, 1, 0}, 0.1f}, hard = {smooth.labels, 0.0f};
    double worst = DEVICE_CHECK(cross_entropy_labels, &smooth, z);
    z->grad = NULL;
    double e = DEVICE_CHECK(cross_entropy_labels, &hard, z);
    worst = e > worst || e != e ? e : worst;
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}

static tensor *mse(tensor **in, const void *ctx) {
    (void)ctx;
    return op_mse(in[0], in[1]);
}

TEST(cuda_op_mse) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 23, RNG_TEST);
    /* both sides with a gradient, then a target without one over more elements than the block */
    tensor *p = LEAF(&r, 1.0f, 3, 50, 7), *t = LEAF(&r, 1.0f, 3, 50, 7);
    double worst = DEVICE_CHECK(mse, NULL, p, t);
    tensor *big = LEAF(&r, 1.0f, 2, 4, 37, 41), *target = RANDN(&r, 1.0f, 2, 4, 37, 41);
    double e = DEVICE_CHECK(mse, NULL, big, target);
    worst = e > worst || e != e ? e : worst;
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}

static tensor *ddpm_loss_op(tensor **in, const void *ctx) {
    (void)ctx;
    return op_ddpm_loss(in[0], in[1], in[2], in[3], in[4]);
}

TEST(cuda_op_ddpm_loss) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 29, RNG_TEST);
    /* steps 0 (the decoder NLL, data in the edge bins too), 1, 500, 999; more elements than the block */
    enum { B = 4, H = 19, W = 17, C = 3 };
    static const int steps[B] = {0, 1, 500, 999};
    ddpm_schedule s;
    ddpm_schedule_init(&s, DDPM_TRAIN_STEPS);
    tensor *coefs = TENSOR(B, DDPM_COEFS);
    for (int b = 0; b < B; b++) ddpm_coefs(&s, steps[b], coefs->data + b * DDPM_COEFS);
    ddpm_schedule_free(&s);
    tensor *x0 = RANDN(&r, 0.6f, B, H, W, C), *xt = RANDN(&r, 1.0f, B, H, W, C), *eps = RANDN(&r, 1.0f, B, H, W, C);
    for (int64_t i = 0; i < x0->numel; i += 7) x0->data[i] = i % 2 ? 1.0f : -1.0f;
    tensor *out = LEAF(&r, 0.5f, B, H, W, 2 * C);
    double worst = DEVICE_CHECK(ddpm_loss_op, NULL, out, x0, xt, eps, coefs);
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}
