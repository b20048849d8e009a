/* The elementwise ops (src/ops/elementwise.c) on the device against the CPU: broadcasting in both
 * directions through every case of the broadcast plan and both reductions of the backward, expand,
 * the scalar ops and the activations. */
#include "device_check.h"
#include "ops/ops.h"

static tensor *apply(int op, tensor *a, tensor *b) {
    return op == 0 ? op_add(a, b) : op == 1 ? op_mul(a, b) : op_div(a, b);
}

/* ctx: 0 add, 1 mul, 2 div; applied twice, so the second backward adds to the first's gradients */
static tensor *binary(tensor **in, const void *ctx) {
    int op = *(const int *)ctx;
    return op_add(apply(op, in[0], in[1]), op_scale(apply(op, in[0], in[1]), 0.5f));
}

static double worse(double worst, double e) { return e > worst || e != e ? e : worst; }

/* the worst error of a + b, a * b and a / b for a of shape sa and b of shape sb (b kept away from
 * zero), each from fresh gradients */
static double check_binary(rng *r, int nda, const int *sa, int ndb, const int *sb) {
    tensor *a = test_leaf(r, 1.0f, nda, sa), *b = test_leaf(r, 1.0f, ndb, sb);
    for (int64_t i = 0; i < b->numel; i++) b->data[i] = copysignf(0.5f + fabsf(b->data[i]), b->data[i]);
    double worst = 0;
    for (int op = 0; op < 3; op++) {
        a->grad = b->grad = NULL;
        worst = worse(worst, DEVICE_CHECK(binary, &op, a, b));
    }
    return worst;
}
/* the rank and the dims of a shape, as check_binary takes them */
#define SHAPE(...) (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__}

TEST(cuda_op_binary_broadcast_small) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 2, RNG_TEST);
    double worst = 0;
    worst = worse(worst, check_binary(&r, SHAPE(3, 1, 5), SHAPE(4, 1)));             /* both broadcast */
    worst = worse(worst, check_binary(&r, SHAPE(4, 1), SHAPE(3, 1, 5)));             /* and the other way */
    worst = worse(worst, check_binary(&r, SHAPE(6, 7), SHAPE(6, 7)));                /* same shapes */
    worst = worse(worst, check_binary(&r, SHAPE(5, 6, 7), SHAPE(6, 7)));             /* b a suffix of a */
    worst = worse(worst, check_binary(&r, SHAPE(7), SHAPE(2, 5, 7)));                /* a a suffix of b */
    worst = worse(worst, check_binary(&r, SHAPE(2, 9, 13), SHAPE(2, 9, 1)));         /* b one per row */
    worst = worse(worst, check_binary(&r, SHAPE(2, 1, 3, 1, 5), SHAPE(4, 1, 6, 1))); /* five dims */
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}

/* preimages long enough for a block per reduced element: contiguous rows, a few columns summed over
 * strided rows, and both at once */
TEST(cuda_op_binary_broadcast_long_reductions) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 3, RNG_TEST);
    double worst = 0;
    worst = worse(worst, check_binary(&r, SHAPE(3, 7, 301), SHAPE(3, 7, 1)));
    worst = worse(worst, check_binary(&r, SHAPE(41), SHAPE(2, 3, 67, 41)));
    worst = worse(worst, check_binary(&r, SHAPE(5, 1, 200), SHAPE(3, 1)));
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}

static tensor *expand(tensor **in, const void *ctx) {
    (void)ctx;
    return op_expand(in[0], 4, (int[]){2, 3, 4, 5});
}

static tensor *expand_long(tensor **in, const void *ctx) {
    (void)ctx;
    return op_expand(in[0], 3, (int[]){3, 150, 7});
}

TEST(cuda_op_expand) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 3, 1, 5), *y = LEAF(&r, 1.0f, 1, 7);
    double e1 = DEVICE_CHECK(expand, NULL, x), e2 = DEVICE_CHECK(expand_long, NULL, y);
    EXPECT(e1 <= DEVICE_TOL && e2 <= DEVICE_TOL, "max rel err %.2e, %.2e", e1, e2);
}

static tensor *scale_shift(tensor **in, const void *ctx) {
    (void)ctx;
    return op_add_scalar(op_scale(in[0], -1.7f), 0.3f);
}

TEST(cuda_op_scale_add_scalar) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 5, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 3, 37, 5);
    double err = DEVICE_CHECK(scale_shift, NULL, x);
    EXPECT(err <= DEVICE_TOL, "max rel err %.2e", err);
}

static tensor *gelu(tensor **in, const void *ctx) { (void)ctx; return op_gelu(in[0]); }
static tensor *relu(tensor **in, const void *ctx) { (void)ctx; return op_relu(in[0]); }
static tensor *softplus(tensor **in, const void *ctx) { (void)ctx; return op_softplus(in[0]); }
static tensor *power(tensor **in, const void *ctx) { return op_pow(in[0], *(const float *)ctx); }

TEST(cuda_op_activations) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 6, RNG_TEST);
    tensor *x = LEAF(&r, 2.0f, 3, 37, 11), *wide = LEAF(&r, 12.0f, 5, 61); /* softplus past 20 */
    x->data[0] = 0.0f; /* relu's kink */
    double worst = DEVICE_CHECK(gelu, NULL, x);
    x->grad = NULL;
    worst = worse(worst, DEVICE_CHECK(relu, NULL, x));
    worst = worse(worst, DEVICE_CHECK(softplus, NULL, wide));
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}

TEST(cuda_op_pow) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 7, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 4, 33), *pos = LEAF(&r, 1.0f, 4, 33);
    for (int64_t i = 0; i < pos->numel; i++) pos->data[i] = 0.1f + fabsf(pos->data[i]);
    float cube = 3.0f, square = 2.0f, frac = 2.5f;
    double worst = DEVICE_CHECK(power, &cube, x);
    x->grad = NULL;
    worst = worse(worst, DEVICE_CHECK(power, &square, x));
    worst = worse(worst, DEVICE_CHECK(power, &frac, pos));
    EXPECT(worst <= DEVICE_TOL, "max rel err %.2e", worst);
}
