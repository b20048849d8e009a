/* The linear attention ops (src/ops/linear_attention.c) on the device against the CPU: FLatten's
 * focusing function (rows of a whole block, and many rows per block of the backward's temperature
 * sums) and linear attention, ELFATT's softmax linear attention on a slice of the channels. */
#include <math.h>

#include "device_check.h"
#include "ops/ops.h"

static tensor *focus(tensor **in, const void *ctx) { return op_focus(in[0], in[1], *(const float *)ctx); }

/* x (b, n, C) with a row of only negative values (features of 1e-6 alone), temperature in [0.7, 1.3] */
static double check_focus(int b, int n, int C, float p, uint64_t seed) {
    rng r;
    rng_seed(&r, seed, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, b, n, C), *t = LEAF(&r, 0.3f, C);
    for (int j = 0; j < C; j++) t->data[j] = 0.7f + fabsf(t->data[j]);
    for (int j = 0; j < C; j++) x->data[C + j] = -fabsf(x->data[C + j]);
    return DEVICE_CHECK(focus, &p, x, t);
}

TEST(cuda_op_focus) {
    REQUIRE_DEVICE();
    double err = check_focus(3, 7, 37, 3.0f, 1);
    EXPECT(err <= DEVICE_TOL, "37 channels, p 3: max rel err %.2e", err);
    err = check_focus(2, 3, 300, 2.5f, 2);
    EXPECT(err <= DEVICE_TOL, "300 channels, p 2.5: max rel err %.2e", err);
}

/* the backward's blocks of 16 rows, the last one partial: 13 rows of temperature gradients summed */
TEST(cuda_op_focus_many_rows) {
    REQUIRE_DEVICE();
    double err = check_focus(5, 41, 7, 3.0f, 3);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

static tensor *linear_attention(tensor **in, const void *ctx) {
    return op_linear_attention(in[0], in[1], in[2], *(const int *)ctx);
}

TEST(cuda_op_linear_attention) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 5, RNG_TEST);
    int b = 3, n = 7, m = 9, heads = 2, C = heads * 17;
    /* positive features, as the focusing function gives */
    tensor *q = LEAF(&r, 1.0f, b, n, C), *k = LEAF(&r, 1.0f, b, m, C), *v = LEAF(&r, 1.0f, b, m, C);
    for (int64_t i = 0; i < q->numel; i++) q->data[i] = 0.2f + fabsf(q->data[i]);
    for (int64_t i = 0; i < k->numel; i++) k->data[i] = 0.2f + fabsf(k->data[i]);
    double err = DEVICE_CHECK(linear_attention, &heads, q, k, v);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
    k->requires_grad = false, q->grad = v->grad = NULL; /* device_check wants inputs without gradients */
    err = DEVICE_CHECK(linear_attention, &heads, q, k, v);
    EXPECT(err <= DEVICE_TOL, "dq, dv: max rel err %.2e", err);
}

typedef struct {
    int heads, c0, channels;
} softmax_lin_ctx;

static tensor *softmax_linear_attention(tensor **in, const void *ctx) {
    const softmax_lin_ctx *c = ctx;
    return op_softmax_linear_attention(in[0], in[1], in[2], c->heads, c->c0, c->channels);
}

/* 2 heads of 6 channels at channel 6 of 24: channels on both sides untouched */
TEST(cuda_op_softmax_linear_attention) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 6, RNG_TEST);
    int b = 3, n = 7, m = 10, C = 24;
    softmax_lin_ctx c = {2, 6, 12};
    tensor *q = LEAF(&r, 2.0f, b, n, C), *k = LEAF(&r, 2.0f, b, m, C), *v = LEAF(&r, 1.0f, b, m, C);
    double err = DEVICE_CHECK(softmax_linear_attention, &c, q, k, v);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
    q->requires_grad = false, k->grad = v->grad = NULL;
    err = DEVICE_CHECK(softmax_linear_attention, &c, q, k, v);
    EXPECT(err <= DEVICE_TOL, "dk, dv: max rel err %.2e", err);
}
