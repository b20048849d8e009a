/* Elementwise ops: broadcasting against a naive index reference, activations against known values,
 * and finite-difference gradients of every op and both operands. */
#include "../src/ops/ops.h"
#include "gradcheck.h"

typedef struct {
    int op; /* 0 add, 1 mul, 2 div */
} bin_ctx;

static tensor *binary_fn(tensor **in, const void *ctx) {
    int op = ((const bin_ctx *)ctx)->op;
    return op == 0 ? op_add(in[0], in[1]) : op == 1 ? op_mul(in[0], in[1]) : op_div(in[0], in[1]);
}

/* naive numpy-broadcast reference over 5-D padded shapes */
static float naive_at(const tensor *t, const int *idx5) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) {
        int i = idx5[5 - t->ndim + d];
        off = off * t->shape[d] + (t->shape[d] == 1 ? 0 : i);
    }
    return t->data[off];
}

static bool check_binary_values(tensor *a, tensor *b, int op) {
    tensor *out = binary_fn((tensor *[]){a, b}, &(bin_ctx){op});
    int o5[5];
    for (int d = 0; d < 5; d++) o5[d] = d < 5 - out->ndim ? 1 : out->shape[d - (5 - out->ndim)];
    for (int64_t i = 0; i < out->numel; i++) {
        int idx[5];
        int64_t r = i;
        for (int d = 4; d >= 0; d--) idx[d] = (int)(r % o5[d]), r /= o5[d];
        float x = naive_at(a, idx), y = naive_at(b, idx);
        float want = op == 0 ? x + y : op == 1 ? x * y : x / y;
        if (fabsf(out->data[i] - want) > 1e-6f * (1 + fabsf(want))) return false;
    }
    return true;
}

/* pairs covering: same shape, bias suffix, a-suffix, middle broadcast, both stretch, 5-D */
static const int shapes[][2][6] = {
    {{3, 3, 5, 7}, {3, 3, 5, 7}},       {{3, 3, 5, 7}, {1, 7}},          {{2, 5, 7}, {3, 2, 5, 7}},
    {{3, 3, 5, 7}, {3, 3, 5, 1}},       {{3, 3, 1, 5}, {3, 1, 4, 1}},    {{5, 2, 3, 1, 5, 3}, {3, 3, 1, 3}},
    {{4, 1, 3, 5, 1}, {5, 2, 1, 1, 5, 7}},
};

static tensor *make(rng *r, const int *spec, bool positive) {
    tensor *t = test_leaf(r, 1.0f, spec[0], spec + 1);
    if (positive)
        for (int64_t i = 0; i < t->numel; i++) t->data[i] = 0.5f + fabsf(t->data[i]);
    return t;
}

TEST(elementwise_broadcast_matches_naive_reference) {
    rng r;
    rng_seed(&r, 21, RNG_TEST);
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int op = 0; op < 3; op++) {
            tensor *a = make(&r, shapes[s][0], false), *b = make(&r, shapes[s][1], op == 2);
            EXPECT(check_binary_values(a, b, op), "pair %zu op %d", s, op);
            EXPECT(check_binary_values(b, a, op == 2 ? 1 : op), "swapped pair %zu op %d", s, op);
        }
}

TEST(grad_add_mul_div_broadcast) {
    rng r;
    rng_seed(&r, 22, RNG_TEST);
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int op = 0; op < 3; op++) {
            tensor *a = make(&r, shapes[s][0], false), *b = make(&r, shapes[s][1], op == 2);
            bin_ctx c = {op};
            EXPECT(GRADCHECK(binary_fn, &c, a, b), "pair %zu op %d", s, op);
            if (op != 2) EXPECT(GRADCHECK(binary_fn, &c, b, a), "swapped pair %zu op %d", s, op);
        }
}

TEST(broadcast_shape_error_names_both_shapes) {
    rng r;
    rng_seed(&r, 23, RNG_TEST);
    tensor *a = RANDN(&r, 1, 3, 5), *b = RANDN(&r, 1, 4);
    EXPECT_ERROR(op_add(a, b), "add: shapes (3, 5) and (4) do not broadcast");
    EXPECT_ERROR(op_expand(a, 2, (int[]){3, 6}), "expand: (3, 5) cannot broadcast");
}

static tensor *expand_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_expand(in[0], 4, (int[]){3, 2, 5, 7});
}

TEST(grad_and_values_expand) {
    rng r;
    rng_seed(&r, 24, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 1, 7);
    tensor *y = expand_fn((tensor *[]){x}, NULL);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 5; k++)
                for (int l = 0; l < 7; l++)
                    EXPECT(y->data[((i * 2 + j) * 5 + k) * 7 + l] == x->data[j * 7 + l], "value");
    EXPECT(GRADCHECK(expand_fn, NULL, x), "expand");
}

static tensor *scale_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_add_scalar(op_scale(in[0], -1.7f), 0.3f);
}

TEST(grad_scale_and_add_scalar) {
    rng r;
    rng_seed(&r, 25, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7);
    tensor *y = scale_fn((tensor *[]){x}, NULL);
    EXPECT(fabsf(y->data[4] - (-1.7f * x->data[4] + 0.3f)) < 1e-6f, "value");
    EXPECT(GRADCHECK(scale_fn, NULL, x), "scale/add_scalar");
}

typedef struct {
    int which; /* 0 gelu 1 relu 2 softplus 3 pow3 4 pow-1 5 pow 2.5 */
} unary_ctx;

static tensor *unary_fn(tensor **in, const void *ctx) {
    switch (((const unary_ctx *)ctx)->which) {
    case 0: return op_gelu(in[0]);
    case 1: return op_relu(in[0]);
    case 2: return op_softplus(in[0]);
    case 3: return op_pow(in[0], 3.0f);
    case 4: return op_pow(in[0], -1.0f);
    default: return op_pow(in[0], 2.5f);
    }
}

TEST(activation_values) {
    tensor *x = TENSOR(5);
    float v[5] = {-2.0f, -0.5f, 0.0f, 1.0f, 25.0f};
    memcpy(x->data, v, sizeof(v));
    tensor *g = op_gelu(x), *s = op_softplus(x), *re = op_relu(x);
    /* GELU(1) = Phi(1) = 0.8413447, GELU(-0.5) = -0.5 * Phi(-0.5) = -0.1542687 */
    EXPECT(fabsf(g->data[3] - 0.8413447f) < 1e-6f && fabsf(g->data[1] + 0.1542687f) < 1e-6f,
           "gelu %g %g", g->data[3], g->data[1]);
    EXPECT(fabsf(s->data[2] - logf(2.0f)) < 1e-6f && s->data[4] == 25.0f, "softplus %g %g", s->data[2], s->data[4]);
    EXPECT(re->data[0] == 0 && re->data[3] == 1.0f, "relu");
    tensor *p = op_pow(x, 3.0f);
    EXPECT(p->data[0] == -8.0f && p->data[3] == 1.0f, "pow");
}

TEST(grad_activations) {
    rng r;
    rng_seed(&r, 26, RNG_TEST);
    for (int which = 0; which < 6; which++) {
        tensor *x = LEAF(&r, 1.5f, 2, 3, 5, 7);
        for (int64_t i = 0; i < x->numel; i++) {
            if (which == 1 && fabsf(x->data[i]) < 0.05f) x->data[i] = 0.3f; /* away from the kink */
            if (which >= 4) x->data[i] = 0.5f + fabsf(x->data[i]);
        }
        if (which == 2) x->data[3] = 22.0f; /* softplus linear region */
        EXPECT(GRADCHECK(unary_fn, &(unary_ctx){which}, x), "activation %d", which);
    }
}

/* the vectorised GELU (polynomial erf and exp) against libm's double erf */
TEST(gelu_fast_path_matches_libm_erf) {
    tensor *x = TENSOR(40001);
    for (int i = 0; i <= 40000; i++) x->data[i] = -12.0f + i * 6e-4f;
    tensor *y = op_gelu(x);
    double worst = 0, worst_rel = 0;
    for (int i = 0; i <= 40000; i++) {
        double xi = x->data[i], ref = 0.5 * xi * (1 + erf(xi / sqrt(2.0)));
        double e = fabs(y->data[i] - ref);
        if (e > worst) worst = e;
        if (fabs(xi) < 3 && e / (fabs(ref) + 1e-3) > worst_rel) worst_rel = e / (fabs(ref) + 1e-3);
    }
    EXPECT(worst < 1e-6 && worst_rel < 1e-5, "max abs error %g, relative %g", worst, worst_rel);
    /* far out, where the tail's rational terms overflowed into inf / inf (NaN) from 1e10 */
    static const float far[] = {1e10f, -1e10f, 1e20f, -1e20f, 3e38f, -3e38f};
    tensor *f = TENSOR(6);
    for (int i = 0; i < 6; i++) f->data[i] = far[i];
    tensor *g = op_gelu(f);
    for (int i = 0; i < 6; i++)
        EXPECT(far[i] > 0 ? g->data[i] == far[i] : g->data[i] == 0.0f && !isnan(g->data[i]),
               "gelu(%g) = %g", far[i], g->data[i]);
    /* a NaN passes through, in a vector's lanes and in a block's last, partial vector */
    tensor *n = TENSOR(19);
    for (int i = 0; i < 19; i++) n->data[i] = i == 3 || i == 17 ? NAN : 0.5f;
    tensor *gn = op_gelu(n);
    for (int i = 0; i < 19; i++)
        EXPECT(isnan(gn->data[i]) == (i == 3 || i == 17), "gelu(%g) = %g", n->data[i], gn->data[i]);
}
