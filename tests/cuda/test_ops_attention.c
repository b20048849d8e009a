/* The fused softmax attention op (src/ops/attention.c) on the device against the CPU: heads of 17
 * channels (the CPU's GEMM path) and of 32 (its register tiles), n != m, a bias with its gradient,
 * a window mask taken by sequence, and backwards that need only some of the gradients. */
#include <math.h>
#include <stdlib.h>

#include "core/cpu_features.h"
#include "core/precision.h"
#include "device_check.h"
#include "ops/ops.h"

typedef struct {
    int heads, windows;
    bool bias; /* in[3] is the bias */
    float scale;
    const float *mask;
} attention_ctx;

static tensor *attention(tensor **in, const void *ctx) {
    const attention_ctx *c = ctx;
    return op_attention(in[0], in[1], in[2], c->heads, c->scale, c->bias ? in[3] : NULL, c->mask, c->windows);
}

/* (windows, n, m): 0 or -100 as Swin's shifted windows, a different pattern per window; every row
 * keeps some keys */
static float *window_mask(int windows, int n, int m) {
    float *mask = xmalloc(sizeof(float) * (size_t)windows * n * m);
    for (int w = 0; w < windows; w++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < m; j++) mask[((size_t)w * n + i) * m + j] = (i + j + w) % 3 == 2 ? -100.0f : 0.0f;
    return mask;
}

/* 4 sequences, n = 7 queries, m = 11 keys, 3 heads of d channels, bias (3, 7, 11) with a gradient,
 * the mask of 2 windows */
static double check_heads_of(int d) {
    rng r;
    rng_seed(&r, 7 + d, RNG_TEST);
    int b = 4, n = 7, m = 11, heads = 3, C = heads * d;
    float *mask = window_mask(2, n, m);
    attention_ctx c = {heads, 2, true, 0.37f, mask};
    tensor *q = LEAF(&r, 1.0f, b, n, C), *k = LEAF(&r, 1.0f, b, m, C), *v = LEAF(&r, 1.0f, b, m, C);
    tensor *bias = LEAF(&r, 0.5f, heads, n, m);
    double err = DEVICE_CHECK(attention, &c, q, k, v, bias);
    free(mask);
    return err;
}

TEST(cuda_op_attention_heads_of_17_bias_mask) {
    REQUIRE_DEVICE();
    double err = check_heads_of(17);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

TEST(cuda_op_attention_heads_of_32_bias_mask) {
    REQUIRE_DEVICE();
    double err = check_heads_of(32);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

/* cross attention without bias or mask (as agent attention's first softmax): 5 sequences of 13
 * queries over 9 keys */
TEST(cuda_op_attention_cross_no_bias) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 3, RNG_TEST);
    int b = 5, n = 13, m = 9, heads = 2, C = heads * 24;
    attention_ctx c = {heads, 1, false, 1.0f / sqrtf(24.0f), NULL};
    tensor *q = LEAF(&r, 2.0f, b, n, C), *k = LEAF(&r, 2.0f, b, m, C), *v = LEAF(&r, 1.0f, b, m, C);
    double err = DEVICE_CHECK(attention, &c, q, k, v);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

/* only some gradients: a constant bias with dq and dk, then dv alone */
TEST(cuda_op_attention_partial_gradients) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    int b = 2, n = 6, m = 5, heads = 3, C = heads * 8;
    attention_ctx c = {heads, 1, true, 0.5f, NULL};
    tensor *q = LEAF(&r, 1.0f, b, n, C), *k = LEAF(&r, 1.0f, b, m, C), *v = LEAF(&r, 1.0f, b, m, C);
    tensor *bias = LEAF(&r, 1.0f, heads, n, m);
    v->requires_grad = false, bias->requires_grad = false;
    double err = DEVICE_CHECK(attention, &c, q, k, v, bias);
    EXPECT(err <= DEVICE_TOL, "dq, dk: max rel err %.2e", err);
    q->requires_grad = k->requires_grad = false, v->requires_grad = true; /* and no gradient yet */
    err = DEVICE_CHECK(attention, &c, q, k, v, bias);
    EXPECT(err <= DEVICE_TOL, "dv: max rel err %.2e", err);
}

/* the bias gradient of 70 sequences: summed in groups of 3 sequences, then over the 24 groups */
TEST(cuda_op_attention_bias_summed_over_many_sequences) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 5, RNG_TEST);
    int b = 70, n = 5, m = 6, heads = 2, C = heads * 4;
    float *mask = window_mask(2, n, m);
    attention_ctx c = {heads, 2, true, 0.8f, mask};
    tensor *q = LEAF(&r, 1.0f, b, n, C), *k = LEAF(&r, 1.0f, b, m, C), *v = LEAF(&r, 1.0f, b, m, C);
    tensor *bias = LEAF(&r, 0.5f, heads, n, m);
    double err = DEVICE_CHECK(attention, &c, q, k, v, bias);
    free(mask);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

/* ELFATT's local heads under bf16: q's and k's blocks kept as bf16 (op_window_partition_channels_bf16),
 * which the device's attention widens as the CPU's does */
static tensor *local_attention(tensor **in, const void *ctx) {
    bool *kept_bf16 = (bool *)ctx;
    tensor *blk[3];
    for (int i = 0; i < 3; i++)
        blk[i] = i < 2 ? op_window_partition_channels_bf16(in[i], 8, 32, 2, 3, 0)
                       : op_window_partition_channels(in[i], 8, 32, 2, 3, 0);
    *kept_bf16 = blk[0]->bf16 && blk[1]->bf16;
    return op_attention(blk[0], blk[1], blk[2], 2, 0.25f, NULL, NULL, 1);
}

TEST(cuda_op_attention_bf16_blocks) {
    REQUIRE_DEVICE();
    if (cpu_bf16_error()) SKIP("the CPU's bf16 attention, the reference, needs AVX512_BF16");
    rng r;
    rng_seed(&r, 71, RNG_TEST);
    CHECK(vitc_set_precision(PRECISION_BF16, NULL), "bf16 on this CPU");
    tensor *q = LEAF(&r, 1.0f, 2, 4, 6, 40), *k = LEAF(&r, 1.0f, 2, 4, 6, 40), *v = LEAF(&r, 1.0f, 2, 4, 6, 40);
    bool kept_bf16 = false;
    double err = DEVICE_CHECK(local_attention, &kept_bf16, q, k, v);
    EXPECT(kept_bf16 && err <= 1e-2, "q and k blocks %s on the device, max rel err %.2e", kept_bf16 ? "bf16" : "fp32",
           err);
    vitc_set_precision(PRECISION_FP32, NULL);
}
