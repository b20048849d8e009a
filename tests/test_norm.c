/* Norm family: layernorm, L2 norm, softmax with bias, mean — naive double references and gradients. */
#include "../src/cpu/fast_exp.h"
#include "../src/cpu/reduce.h"
#include "../src/ops/ops.h"
#include "gradcheck.h"

static tensor *layernorm_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_layernorm(in[0], in[1], in[2], 1e-5f, NULL);
}

TEST(layernorm_matches_reference_and_grad) {
    rng r;
    rng_seed(&r, 41, RNG_TEST);
    tensor *x = LEAF(&r, 2, 3, 5, 7), *w = LEAF(&r, 1, 7), *b = LEAF(&r, 1, 7);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] += 3.0f; /* an offset the mean must remove */
    tensor *y = layernorm_fn((tensor *[]){x, w, b}, NULL);
    for (int row = 0; row < 15; row++) {
        double m = 0, v = 0;
        for (int j = 0; j < 7; j++) m += x->data[row * 7 + j];
        m /= 7;
        for (int j = 0; j < 7; j++) v += (x->data[row * 7 + j] - m) * (x->data[row * 7 + j] - m);
        v /= 7;
        for (int j = 0; j < 7; j++) {
            double want = (x->data[row * 7 + j] - m) / sqrt(v + 1e-5) * w->data[j] + b->data[j];
            EXPECT(fabs(y->data[row * 7 + j] - want) < 1e-5, "row %d col %d", row, j);
        }
    }
    EXPECT(GRADCHECK(layernorm_fn, NULL, x, w, b), "layernorm");
    tensor *bad = RANDN(&r, 1, 6);
    EXPECT_ERROR(op_layernorm(x, bad, bad, 1e-5f, NULL), "layernorm: weight (6)");
}

static tensor *l2norm_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_l2norm(in[0]);
}

TEST(l2norm_values_and_grad) {
    rng r;
    rng_seed(&r, 42, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7);
    tensor *y = l2norm_fn((tensor *[]){x}, NULL);
    EXPECT(y->ndim == 3 && y->shape[2] == 1, "keeps the dim");
    double s = 0;
    for (int j = 0; j < 7; j++) s += x->data[7 + j] * x->data[7 + j];
    EXPECT(fabs(y->data[1] - sqrt(s)) < 1e-5, "value");
    EXPECT(GRADCHECK(l2norm_fn, NULL, x), "l2norm");
}

static tensor *softmax_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_softmax(in[0], in[1]);
}

static tensor *softmax_nobias_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_softmax(in[0], NULL);
}

TEST(softmax_with_bias_matches_reference_and_grad) {
    rng r;
    rng_seed(&r, 43, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 3, 5, 7);
    for (int bias_dims = 2; bias_dims <= 3; bias_dims++) {
        tensor *bias = bias_dims == 2 ? LEAF(&r, 1, 5, 7) : LEAF(&r, 1, 3, 5, 7);
        tensor *y = softmax_fn((tensor *[]){x, bias}, NULL);
        for (int row = 0; row < 30; row++) {
            double mx = -1e30, sum = 0, z[7];
            for (int j = 0; j < 7; j++) {
                z[j] = x->data[row * 7 + j] + bias->data[(row * 7 + j) % bias->numel];
                if (z[j] > mx) mx = z[j];
            }
            for (int j = 0; j < 7; j++) sum += exp(z[j] - mx);
            for (int j = 0; j < 7; j++)
                EXPECT(fabs(y->data[row * 7 + j] - exp(z[j] - mx) / sum) < 1e-6, "row %d", row);
        }
        EXPECT(GRADCHECK(softmax_fn, NULL, x, bias), "softmax with bias of %d dims", bias_dims);
    }
    EXPECT(GRADCHECK(softmax_nobias_fn, NULL, x), "softmax without bias");
    tensor *big = TENSOR(1, 3);
    big->data[0] = 80, big->data[1] = 81, big->data[2] = 79; /* exp(81) overflows without the max shift */
    tensor *p = op_softmax(big, NULL);
    EXPECT(fabsf(p->data[1] - 0.66524096f) < 1e-6f, "stable softmax %g", p->data[1]);
    tensor *bad = RANDN(&r, 1, 7, 5);
    EXPECT_ERROR(op_softmax(x, bad), "softmax: bias (7, 5) must equal the trailing dims");
}

/* softmax's row pieces in each machine's vector code (AVX-512, AVX2, or plain loops) against their
 * scalar definitions, at every length up to several vectors and a tail: the maximum exactly, NaN
 * ignored as `x > m` ignores it; the exponentials within fast_expf's error, below e^-87 nearly 0,
 * NaN passed on */
TEST(softmax_row_pieces_match_their_scalar_definitions) {
    rng r;
    rng_seed(&r, 45, RNG_TEST);
    float x[70], y[70];
    for (int n = 1; n <= 70; n++) {
        for (int j = 0; j < n; j++) x[j] = j % 7 == 3 ? NAN : 20.0f * rng_normal(&r);
        x[n - 1] = -INFINITY;
        float want = -INFINITY;
        for (int j = 0; j < n; j++) want = x[j] > want ? x[j] : want;
        float got = reduce_max(x, n);
        EXPECT(got == want, "max of %d: %g, want %g", n, got, want);
        float shift = isinf(want) ? 0.0f : want;
        for (int j = 0; j < n; j++) y[j] = x[j];
        exp_shifted_row(y, n, shift);
        for (int j = 0; j < n; j++) {
            float d = x[j] - shift;
            double e = exp((double)d);
            if (isnan(d)) EXPECT(isnan(y[j]), "e^NaN at %d of %d: %g", j, n, y[j]);
            else if (d < -87.0f)
                EXPECT(y[j] >= 0 && y[j] < 2e-38f, "e^%g at %d of %d: %g", d, j, n, y[j]);
            else
                EXPECT(fabs(y[j] - e) <= 4e-7 * e, "e^%g at %d of %d: %g, want %g", d, j, n, y[j],
                       e);
        }
    }
}

typedef struct {
    int dim;
    bool keep;
} mean_ctx;

static tensor *mean_fn(tensor **in, const void *ctx) {
    const mean_ctx *c = ctx;
    return op_mean(in[0], c->dim, c->keep);
}

TEST(mean_values_and_grad) {
    rng r;
    rng_seed(&r, 44, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7);
    for (int dim = 0; dim < 3; dim++)
        for (int keep = 0; keep < 2; keep++) {
            mean_ctx c = {dim, keep};
            tensor *y = mean_fn((tensor *[]){x}, &c);
            EXPECT(y->ndim == (keep ? 3 : 2), "rank");
            int sizes[3] = {3, 5, 7};
            double s = 0;
            for (int l = 0; l < sizes[dim]; l++) {
                int idx[3] = {1, 1, 1};
                idx[dim] = l;
                s += x->data[(idx[0] * 5 + idx[1]) * 7 + idx[2]];
            }
            int o[3] = {1, 1, 1};
            o[dim] = 0;
            int osz[3] = {3, 5, 7};
            osz[dim] = 1;
            EXPECT(fabs(y->data[(o[0] * osz[1] + o[1]) * osz[2] + o[2]] - s / sizes[dim]) < 1e-5,
                   "dim %d", dim);
            EXPECT(GRADCHECK(mean_fn, &c, x), "mean dim %d keep %d", dim, keep);
        }
}

static tensor *ln_linear_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_layernorm_linear(in[0], in[1], in[2], 1e-5f, in[3], in[4], NULL);
}

TEST(layernorm_linear_equals_the_chain_and_grad) {
    rng r;
    rng_seed(&r, 34, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 3, 8), *lw = LEAF(&r, 1, 8), *lb = LEAF(&r, 1, 8), *w = LEAF(&r, 0.5f, 5, 8);
    tensor *b = LEAF(&r, 1, 5);
    EXPECT(GRADCHECK(ln_linear_fn, NULL, x, lw, lb, w, b), "layernorm_linear");
    /* 7000 rows of 400: the recomputation runs in two passes; gradients equal the chain's */
    x = LEAF(&r, 1, 7000, 400), lw = LEAF(&r, 1, 400), lb = LEAF(&r, 1, 400), w = LEAF(&r, 0.05f, 6, 400);
    b = LEAF(&r, 1, 6);
    tensor *inputs[5] = {x, lw, lb, w, b};
    tensor *chain = op_linear(op_layernorm(x, lw, lb, 1e-5f, NULL), w, b),
           *fused = ln_linear_fn(inputs, NULL);
    EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) < 1e-5, "forward");
    double err = backward_difference(chain, fused, 5, inputs);
    EXPECT(err < 1e-4, "gradients differ from the chain's by %g", err);
    EXPECT_ERROR(op_layernorm_linear(x, lw, lb, 1e-5f, RANDN(&r, 1, 6, 399), NULL, NULL),
                 "does not match weight (6, 399)");
    EXPECT_ERROR(op_layernorm_linear(x, lw, lb, 1e-5f, w, RANDN(&r, 1, 5), NULL),
                 "bias (5) does not match weight (6, 400)");
    EXPECT_ERROR(op_layernorm_linear(x, RANDN(&r, 1, 399), lb, 1e-5f, w, b, NULL),
                 "weight (399) / bias (400) do not match");
}

static tensor *ln_windows_fn(tensor **in, const void *ctx) {
    const int *shift = ctx;
    return op_layernorm_windows(in[0], in[1], in[2], 1e-5f, 2, 3, *shift, NULL);
}

/* CSwin's two branches: a 4 x 6 map's rows of 2 x 6 and columns of 4 x 2, side by side; *ctx's bits
 * pick the sets used (a set left out gets no gradient) */
static tensor *ln_window_sets_fn(tensor **in, const void *ctx) {
    int picked = *(const int *)ctx, n = 0;
    tensor *sets[2], *used[2];
    op_layernorm_window_sets(in[0], in[1], in[2], 1e-5f, 2, (int[]){2, 4}, (int[]){6, 2}, 0, NULL, sets);
    for (int i = 0; i < 2; i++)
        if (picked >> i & 1) used[n++] = RESHAPE(sets[i], sets[i]->numel / 5, 5);
    return n == 1 ? used[0] : op_concat(2, used, 0);
}

TEST(layernorm_window_sets_are_layernorm_windows_and_grad) {
    rng r;
    rng_seed(&r, 36, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 4, 6, 5), *w = LEAF(&r, 1, 5), *b = LEAF(&r, 1, 5), *sets[2];
    op_layernorm_window_sets(x, w, b, 1e-5f, 2, (int[]){2, 4}, (int[]){6, 2}, 0, NULL, sets);
    tensor *rows = op_layernorm_windows(x, w, b, 1e-5f, 2, 6, 0, NULL);
    tensor *cols = op_layernorm_windows(x, w, b, 1e-5f, 4, 2, 0, NULL);
    EXPECT(max_rel_diff(sets[0]->data, rows->data, rows->numel) == 0, "the rows' set");
    EXPECT(max_rel_diff(sets[1]->data, cols->data, cols->numel) == 0, "the columns' set");
    for (int picked = 1; picked <= 3; picked++)
        EXPECT(GRADCHECK(ln_window_sets_fn, &picked, x, w, b), "sets picked %d", picked);
    EXPECT_ERROR(op_layernorm_window_sets(x, w, b, 1e-5f, 2, (int[]){2, 3}, (int[]){6, 2}, 0, NULL, sets),
                 "3x2 windows do not tile (2, 4, 6, 5)");
    EXPECT_ERROR(op_layernorm_window_sets(x, w, b, 1e-5f, 3, (int[]){2, 4, 1}, (int[]){6, 2, 1}, 0, NULL, sets),
                 "3 sets of windows of (2, 4, 6, 5) (B, H, W, C; 1 to 2 sets)");
}

TEST(layernorm_windows_equals_partition_of_layernorm_and_grad) {
    rng r;
    rng_seed(&r, 35, RNG_TEST);
    for (int shift = 0; shift < 2; shift++) {
        tensor *x = LEAF(&r, 1, 2, 4, 6, 5), *w = LEAF(&r, 1, 5), *b = LEAF(&r, 1, 5);
        tensor *chain = op_window_partition(op_layernorm(x, w, b, 1e-5f, NULL), 2, 3, shift);
        tensor *fused = ln_windows_fn((tensor *[]){x, w, b}, &shift);
        EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) == 0, "shift %d: forward", shift);
        double err = backward_difference(chain, fused, 3, (tensor *[]){x, w, b});
        EXPECT(err < 1e-5, "shift %d: gradients differ from the chain's by %g", shift, err);
        EXPECT(GRADCHECK(ln_windows_fn, &shift, x, w, b), "layernorm_windows shift %d", shift);
    }
    /* one window of the whole map: a plain layernorm without a shift, a rolled one with */
    tensor *x = LEAF(&r, 1, 1, 2, 3, 4), *w = LEAF(&r, 1, 4), *b = LEAF(&r, 1, 4);
    for (int shift = 0; shift < 2; shift++) {
        tensor *chain = op_window_partition(op_layernorm(x, w, b, 1e-5f, NULL), 2, 3, shift);
        tensor *fused = op_layernorm_windows(x, w, b, 1e-5f, 2, 3, shift, NULL);
        EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) == 0, "one window, shift %d", shift);
        double err = backward_difference(chain, fused, 3, (tensor *[]){x, w, b});
        EXPECT(err < 1e-5, "one window, shift %d: gradients differ by %g", shift, err);
    }
    EXPECT_ERROR(op_layernorm_windows(RANDN(&r, 1, 1, 4, 5, 3), RANDN(&r, 1, 3), RANDN(&r, 1, 3),
                                      1e-5f, 2, 3, 0, NULL),
                 "2x3 windows do not tile (1, 4, 5, 3)");
    EXPECT_ERROR(op_layernorm_windows(x, RANDN(&r, 1, 3), b, 1e-5f, 2, 3, 0, NULL),
                 "weight (3) / bias (4) do not match");
}
