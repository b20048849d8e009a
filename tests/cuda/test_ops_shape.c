/* The shape ops (src/ops/shape.c) on the device against the CPU: reshape, permute (the contiguous
 * and the strided walk), transpose, concat, slice and split. */
#include "device_check.h"
#include "ops/ops.h"

/* two reshapes of one input: the first takes the gradient's buffer, the second adds to it */
static tensor *reshape_twice(tensor **in, const void *ctx) {
    (void)ctx;
    tensor *a = op_reshape(in[0], 2, (int[]){6, 35}), *b = op_reshape(in[0], 3, (int[]){6, 5, 7});
    return op_mul(a, op_reshape(op_scale(b, 2.0f), 2, (int[]){6, 35}));
}

TEST(cuda_op_reshape) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 11, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 2, 3, 35);
    double err = DEVICE_CHECK(reshape_twice, NULL, x);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

static tensor *permute(tensor **in, const void *ctx) { return op_permute(in[0], (const int *)ctx); }

TEST(cuda_op_permute) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 12, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 2, 3, 5, 7, 4);
    double worst = DEVICE_CHECK(permute, ((int[]){2, 0, 4, 1, 3}), x); /* the last dim moves */
    x->grad = NULL;
    double e = DEVICE_CHECK(permute, ((int[]){3, 1, 0, 2, 4}), x); /* the last dim stays */
    worst = e > worst || e != e ? e : worst;
    tensor *y = LEAF(&r, 1.0f, 3, 9, 13);
    e = DEVICE_CHECK(permute, ((int[]){1, 2, 0}), y);
    worst = e > worst || e != e ? e : worst;
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}

static tensor *transpose(tensor **in, const void *ctx) {
    (void)ctx;
    return op_transpose(in[0], -1, -2);
}

TEST(cuda_op_transpose) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 13, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 3, 17, 33);
    double err = DEVICE_CHECK(transpose, NULL, x);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

static tensor *concat(tensor **in, const void *ctx) { return op_concat(3, in, *(const int *)ctx); }

TEST(cuda_op_concat) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 14, RNG_TEST);
    /* the middle input needs no gradient */
    tensor *a = LEAF(&r, 1.0f, 2, 3, 5), *b = RANDN(&r, 1.0f, 2, 4, 5), *c = LEAF(&r, 1.0f, 2, 1, 5);
    int dim = 1;
    double worst = DEVICE_CHECK(concat, &dim, a, b, c);
    tensor *d = LEAF(&r, 1.0f, 3, 2, 5), *e = LEAF(&r, 1.0f, 3, 2, 1), *f = LEAF(&r, 1.0f, 3, 2, 7);
    dim = -1;
    double err = DEVICE_CHECK(concat, &dim, d, e, f);
    worst = err > worst || err != err ? err : worst;
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}

/* split into three, put back in another order, times and plus overlapping slices of another dim
 * (their gradients add up in the same places) */
static tensor *slice_split(tensor **in, const void *ctx) {
    (void)ctx;
    tensor *parts[3];
    op_split(in[0], 1, 3, (int[]){2, 3, 4}, parts);
    tensor *shuffled = op_concat(3, (tensor *[]){parts[2], parts[0], parts[1]}, 1);
    tensor *lo = op_slice(in[0], -1, 0, 5), *hi = op_slice(in[0], -1, 2, 5);
    return op_add(op_mul(op_slice(shuffled, -1, 1, 5), lo), hi);
}

TEST(cuda_op_slice_split) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 15, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 3, 9, 7);
    double err = DEVICE_CHECK(slice_split, NULL, x);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}
