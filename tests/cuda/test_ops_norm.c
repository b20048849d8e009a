/* The norm ops (src/ops/norm.c) on the device against the CPU. */
#include "device_check.h"
#include "ops/ops.h"

static tensor *layernorm(tensor **in, const void *ctx) {
    (void)ctx;
    return op_layernorm(in[0], in[1], in[2], 1e-5f);
}

TEST(cuda_op_layernorm) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 1, RNG_TEST);
    tensor *x = LEAF(&r, 2.0f, 3, 37, 197), *w = LEAF(&r, 1.0f, 197), *b = LEAF(&r, 1.0f, 197);
    double err = DEVICE_CHECK(layernorm, NULL, x, w, b);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}
