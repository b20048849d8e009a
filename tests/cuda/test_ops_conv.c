/* The convolution-family ops (src/ops/conv.c) on the device against the CPU: grouped and strided
 * conv2d, depthwise conv with shared kernels and onto a base, pooling to uneven overlapping bins
 * (both also of the grid of tokens after a class token), bilinear resize up and down. */
#include "device_check.h"
#include "ops/ops.h"

typedef struct {
    int stride, pad, groups;
} conv_ctx;

static tensor *conv2d(tensor **in, const void *ctx) {
    const conv_ctx *c = ctx;
    return op_conv2d(in[0], in[1], in[2], c->stride, c->pad, c->groups);
}

TEST(cuda_op_conv2d) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 31, RNG_TEST);
    /* groups 2, stride 2, padding 1 on an odd map */
    tensor *x = LEAF(&r, 1.0f, 2, 9, 11, 6), *w = LEAF(&r, 0.3f, 8, 3, 3, 3), *b = LEAF(&r, 1.0f, 8);
    double err = DEVICE_CHECK(conv2d, (&(conv_ctx){2, 1, 2}), x, w, b);
    EXPECT(err <= DEVICE_TOL, "3x3 groups 2 stride 2 pad 1: max rel err %.2e", err);
    /* a 2x3 kernel, no bias, padding 2 (outputs see only padding at the corners), stride 3 */
    tensor *w2 = LEAF(&r, 0.3f, 5, 6, 2, 3);
    err = DEVICE_CHECK(conv2d, (&(conv_ctx){3, 2, 1}), x, w2, NULL);
    EXPECT(err <= DEVICE_TOL, "2x3 stride 3 pad 2: max rel err %.2e", err);
    /* a patch embedding: 4x4 patches, stride 4, 3 groups of 2 channels */
    tensor *x3 = LEAF(&r, 1.0f, 3, 8, 12, 6), *w3 = LEAF(&r, 0.3f, 9, 2, 4, 4), *b3 = LEAF(&r, 1.0f, 9);
    err = DEVICE_CHECK(conv2d, (&(conv_ctx){4, 0, 3}), x3, w3, b3);
    EXPECT(err <= DEVICE_TOL, "4x4 patches, groups 3: max rel err %.2e", err);
}

static tensor *dwconv2d(tensor **in, const void *ctx) {
    (void)ctx;
    return op_dwconv2d(in[0], in[1], in[2]);
}

static tensor *dwconv2d_add(tensor **in, const void *ctx) {
    (void)ctx;
    return op_dwconv2d_add(in[0], in[1], in[2], in[3]);
}

/* the base is consumed: a copy of the input (scaled by 1) is, so the input keeps its values */
static tensor *dwconv2d_add_into(tensor **in, const void *ctx) {
    const int *c0 = ctx;
    return op_dwconv2d_add_into(in[0], *c0, in[3]->shape[3], in[1], in[2], op_scale(in[3], 1.0f));
}

static tensor *dwconv2d_add_tokens_into(tensor **in, const void *ctx) {
    (void)ctx;
    return op_dwconv2d_add_tokens_into(in[0], 2, 7, 9, in[1], in[2], op_scale(in[3], 1.0f));
}

TEST(cuda_op_dwconv2d) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 32, RNG_TEST);
    /* 4 kernels shared by 12 channels (Cw dividing C), and one 5x5 kernel per channel */
    tensor *x = LEAF(&r, 1.0f, 2, 7, 9, 12), *w = LEAF(&r, 0.5f, 4, 1, 3, 3), *b = LEAF(&r, 1.0f, 4);
    double err = DEVICE_CHECK(dwconv2d, NULL, x, w, b);
    EXPECT(err <= DEVICE_TOL, "3x3, 4 kernels for 12 channels: max rel err %.2e", err);
    tensor *w5 = LEAF(&r, 0.5f, 12, 1, 5, 5);
    err = DEVICE_CHECK(dwconv2d, NULL, x, w5, NULL);
    EXPECT(err <= DEVICE_TOL, "5x5 per channel, no bias: max rel err %.2e", err);
    /* onto a base that needs a gradient */
    tensor *base = LEAF(&r, 1.0f, 2, 7, 9, 12);
    err = DEVICE_CHECK(dwconv2d_add, NULL, x, w, b, base);
    EXPECT(err <= DEVICE_TOL, "onto a base: max rel err %.2e", err);
    /* channels 4..11 of a 20-channel input into a base of 8 */
    tensor *x20 = LEAF(&r, 1.0f, 2, 7, 9, 20), *w8 = LEAF(&r, 0.5f, 8, 1, 3, 3), *b8 = LEAF(&r, 1.0f, 8),
           *base8 = LEAF(&r, 1.0f, 2, 7, 9, 8);
    err = DEVICE_CHECK(dwconv2d_add_into, (&(int){4}), x20, w8, b8, base8);
    EXPECT(err <= DEVICE_TOL, "channels 4..11 into a base: max rel err %.2e", err);
    /* tokens: 7x9 grids after 2 lead tokens that pass through (Agent DeiT's class token) */
    tensor *xt = LEAF(&r, 1.0f, 2, 2 + 7 * 9, 12), *baset = LEAF(&r, 1.0f, 2, 2 + 7 * 9, 12);
    err = DEVICE_CHECK(dwconv2d_add_tokens_into, NULL, xt, w, b, baset);
    EXPECT(err <= DEVICE_TOL, "tokens after 2 others: max rel err %.2e", err);
}

static tensor *pool(tensor **in, const void *ctx) {
    const int *o = ctx;
    return op_adaptive_avg_pool2d(in[0], o[0], o[1]);
}

static tensor *pool_tokens(tensor **in, const void *ctx) {
    (void)ctx;
    return op_adaptive_avg_pool2d_tokens(in[0], 1, 11, 13, 4, 5);
}

TEST(cuda_op_adaptive_avg_pool2d) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 33, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 2, 11, 13, 5);
    /* uneven overlapping bins (11 to 4, 13 to 5), the whole map, one axis kept */
    static const int outs[][2] = {{4, 5}, {1, 1}, {11, 3}, {7, 13}};
    for (int i = 0; i < 4; i++) {
        double err = DEVICE_CHECK(pool, outs[i], x);
        EXPECT(err <= DEVICE_TOL, "11x13 to %dx%d: max rel err %.2e", outs[i][0], outs[i][1], err);
    }
    tensor *tokens = LEAF(&r, 1.0f, 2, 1 + 11 * 13, 5);
    double err = DEVICE_CHECK(pool_tokens, NULL, tokens);
    EXPECT(err <= DEVICE_TOL, "the 11x13 grid after a token to 4x5: max rel err %.2e", err);
}

static tensor *interp(tensor **in, const void *ctx) {
    const int *o = ctx;
    return op_interp_bilinear(in[0], o[0], o[1]);
}

TEST(cuda_op_interp_bilinear) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 34, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 3, 9, 11);
    /* up in one axis and down in the other, up 8x (7 to 56 style), down, the same size */
    static const int outs[][2] = {{13, 5}, {72, 88}, {4, 3}, {9, 11}, {1, 17}};
    for (int i = 0; i < 5; i++) {
        double err = DEVICE_CHECK(interp, outs[i], x);
        EXPECT(err <= DEVICE_TOL, "9x11 to %dx%d: max rel err %.2e", outs[i][0], outs[i][1], err);
    }
}
