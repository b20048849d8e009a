/* Conv family: conv2d (groups, stride, padding) and depthwise conv against a naive reference,
 * adaptive pooling bins, bilinear resize values, and finite-difference gradients. */
#include "../src/ops/ops.h"
#include "gradcheck.h"

/* naive channels-last conv, PyTorch semantics */
static void conv_naive(float *out, const tensor *x, const tensor *w, const tensor *b, int stride,
                       int pad, int groups) {
    int B = x->shape[0], H = x->shape[1], W = x->shape[2], Cin = x->shape[3];
    int Cout = w->shape[0], kh = w->shape[2], kw = w->shape[3], cg = Cin / groups, og = Cout / groups;
    int Ho = (H + 2 * pad - kh) / stride + 1, Wo = (W + 2 * pad - kw) / stride + 1;
    for (int n = 0; n < B; n++)
        for (int oy = 0; oy < Ho; oy++)
            for (int ox = 0; ox < Wo; ox++)
                for (int co = 0; co < Cout; co++) {
                    double s = b ? b->data[co] : 0;
                    int gi = co / og;
                    for (int ci = 0; ci < cg; ci++)
                        for (int ky = 0; ky < kh; ky++)
                            for (int kx = 0; kx < kw; kx++) {
                                int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                s += (double)x->data[((n * H + iy) * W + ix) * Cin + gi * cg + ci] *
                                     w->data[((co * cg + ci) * kh + ky) * kw + kx];
                            }
                    out[((n * Ho + oy) * Wo + ox) * Cout + co] = (float)s;
                }
}

typedef struct {
    int stride, pad, groups;
    bool bias;
} conv_ctx;

static tensor *conv_fn(tensor **in, const void *ctx) {
    const conv_ctx *c = ctx;
    return op_conv2d(in[0], in[1], c->bias ? in[2] : NULL, c->stride, c->pad, c->groups);
}

TEST(conv2d_matches_naive_and_grad) {
    rng r;
    rng_seed(&r, 51, RNG_TEST);
    const conv_ctx cases[] = {{1, 1, 1, true}, {2, 1, 1, false}, {3, 0, 1, true}, {2, 2, 3, true},
                              {1, 1, 6, true}};
    const int ks[] = {3, 3, 3, 5, 3};
    for (int i = 0; i < 5; i++) {
        const conv_ctx *c = &cases[i];
        int cin = 6, cout = c->groups == 6 ? 6 : 9;
        tensor *x = LEAF(&r, 1, 2, 7, 5, cin);
        tensor *w = LEAF(&r, 0.5f, cout, cin / c->groups, ks[i], ks[i]), *b = LEAF(&r, 1, cout);
        tensor *y = conv_fn((tensor *[]){x, w, b}, c);
        tensor *ref = tensor_like(y);
        conv_naive(ref->data, x, w, c->bias ? b : NULL, c->stride, c->pad, c->groups);
        double err = max_rel_diff(y->data, ref->data, y->numel);
        EXPECT(err < 1e-5, "case %d: rel diff %g", i, err);
        if (c->bias) EXPECT(GRADCHECK(conv_fn, c, x, w, b), "case %d", i);
        else EXPECT(GRADCHECK(conv_fn, c, x, w), "case %d", i);
    }
    tensor *x = RANDN(&r, 1, 2, 7, 5, 6), *w = RANDN(&r, 1, 4, 4, 3, 3);
    EXPECT_ERROR(op_conv2d(x, w, NULL, 1, 1, 1), "conv2d: weight (4, 4, 3, 3) with groups 1");
}

static tensor *dw_fn(tensor **in, const void *ctx) {
    return op_dwconv2d(in[0], in[1], ctx ? in[2] : NULL);
}

/* an input another op made has no gradient yet: the backward writes it whole (the tests' arena
 * hands that memory out as NaN) */
static tensor *dw_of_product_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_dwconv2d(op_scale(in[0], 0.9f), in[1], in[2]);
}

/* the largest relative difference of w's gradient after seeding y = dwconv(x, w) with g from its
 * definition, dw(c, t) = sum over the pixels p of g(p) x(p + t) (zero outside): a tighter check of
 * the weight gradient's kernels than finite differences */
static double dwconv_weight_grad_diff(const tensor *x, const tensor *w, const float *g, int k) {
    int B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3], r = k / 2;
    double worst = 0, scale = 0;
    for (int c = 0; c < C; c++)
        for (int t = 0; t < k * k; t++) {
            double want = 0;
            for (int b = 0; b < B; b++)
                for (int i = 0; i < H; i++)
                    for (int j = 0; j < W; j++) {
                        int iy = i + t / k - r, ix = j + t % k - r;
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                        want += (double)g[(((size_t)b * H + i) * W + j) * C + c] *
                                x->data[(((size_t)b * H + iy) * W + ix) * C + c];
                    }
            double diff = fabs(w->grad[c * k * k + t] - want);
            worst = diff > worst ? diff : worst;
            scale = fabs(want) > scale ? fabs(want) : scale;
        }
    return worst / (scale > 0 ? scale : 1);
}

TEST(dwconv2d_matches_grouped_conv_and_grad) {
    rng r;
    rng_seed(&r, 52, RNG_TEST);
    /* 5 channels: a partial vector only; 21: whole vectors (of 16 or 8) and a partial one (on rows
     * of channel blocks); 69: more than 64, each pixel's channels in a loop (conv.c). On 7 x 5
     * every pixel is near a border, on 11 x 9 some are not for every k. */
    const int channels[] = {5, 21, 69};
    for (int i = 0; i < 3; i++)
        for (int k = 3; k <= 7; k += 2)
            for (int big = 0; big < 2; big++) {
                int C = channels[i];
                tensor *x = LEAF(&r, 1, 3 - 2 * big, 7 + 4 * big, 5 + 4 * big, C);
                tensor *w = LEAF(&r, 0.5f, C, 1, k, k);
                tensor *b = LEAF(&r, 1, C);
                tensor *y = op_dwconv2d(x, w, b);
                tensor *ref = tensor_like(y);
                conv_naive(ref->data, x, w, b, 1, k / 2, C);
                double err = max_rel_diff(y->data, ref->data, y->numel);
                EXPECT(err < 1e-5, "C %d k %d grid %d: rel diff %g", C, k, big, err);
                tensor *g = RANDN(&r, 1, y->shape[0], y->shape[1], y->shape[2], C);
                tape_backward_from(y, g->data);
                err = dwconv_weight_grad_diff(x, w, g->data, k);
                EXPECT(err < 1e-5, "C %d k %d grid %d: w's gradient, rel diff %g", C, k, big, err);
                EXPECT(GRADCHECK(dw_fn, &k, x, w, b), "dwconv C %d k %d grid %d", C, k, big);
                EXPECT(GRADCHECK(dw_fn, NULL, x, w), "dwconv C %d k %d grid %d without bias", C, k,
                       big);
                EXPECT(GRADCHECK(dw_of_product_fn, NULL, x, w, b),
                       "dwconv C %d k %d grid %d, x made", C, k, big);
            }
    tensor *x = RANDN(&r, 1, 1, 5, 5, 4), *w = RANDN(&r, 1, 4, 1, 4, 4);
    EXPECT_ERROR(op_dwconv2d(x, w, NULL), "with k odd");
    EXPECT_ERROR(op_dwconv2d(x, RANDN(&r, 1, 4, 1, 9, 9), NULL), "with k odd and at most 7");
    EXPECT_ERROR(op_dwconv2d(x, RANDN(&r, 1, 3, 1, 3, 3), NULL), "(C or a divisor of C, 1, k, k)");
}

/* kernels shared by groups of channels (FLatten's heads): channel c takes kernel c mod Cw, which is
 * the plain depthwise conv with the kernels tiled over the channels */
TEST(dwconv2d_shared_kernels_equal_tiled_kernels_and_grad) {
    rng r;
    rng_seed(&r, 55, RNG_TEST);
    const int heads = 3, d = 2, k = 3;
    tensor *x = LEAF(&r, 1, 2, 5, 4, heads * d), *w = LEAF(&r, 0.5f, d, 1, k, k), *b = LEAF(&r, 1, d);
    tensor *tiled_w = TENSOR(heads * d, 1, k, k), *tiled_b = TENSOR(heads * d);
    for (int c = 0; c < heads * d; c++) {
        for (int t = 0; t < k * k; t++) tiled_w->data[c * k * k + t] = w->data[(c % d) * k * k + t];
        tiled_b->data[c] = b->data[c % d];
    }
    tensor *shared = op_dwconv2d(x, w, b), *tiled = op_dwconv2d(x, tiled_w, tiled_b);
    EXPECT(max_rel_diff(shared->data, tiled->data, tiled->numel) == 0, "shared kernels differ from tiled ones");
    EXPECT(GRADCHECK(dw_fn, &k, x, w, b), "shared-kernel dwconv");
    EXPECT_ERROR(op_dwconv2d(x, w, RANDN(&r, 1, 6)), "bias (6) for 2 kernels");
}

typedef struct {
    int oh, ow;
} pool_ctx;

static tensor *pool_fn(tensor **in, const void *ctx) {
    const pool_ctx *c = ctx;
    return op_adaptive_avg_pool2d(in[0], c->oh, c->ow);
}

TEST(adaptive_pool_overlapping_bins_and_grad) {
    rng r;
    rng_seed(&r, 53, RNG_TEST);
    /* 7 -> 3 has overlapping bins [0,3) [2,5) [4,7); 14 -> 3: [0,5) [4,10) [9,14) */
    tensor *x = LEAF(&r, 1, 2, 7, 14, 3);
    pool_ctx c = {3, 3};
    tensor *y = pool_fn((tensor *[]){x}, &c);
    int y0 = 2, y1 = 5, x0 = 4, x1 = 10; /* cell (1, 1) */
    double s = 0;
    for (int yy = y0; yy < y1; yy++)
        for (int xx = x0; xx < x1; xx++) s += x->data[((1 * 7 + yy) * 14 + xx) * 3 + 2];
    EXPECT(fabs(y->data[((1 * 3 + 1) * 3 + 1) * 3 + 2] - s / 18) < 1e-5, "overlapping bin mean");
    EXPECT(GRADCHECK(pool_fn, &c, x), "pool 7x14 -> 3x3");
    pool_ctx same = {7, 14};
    tensor *id = pool_fn((tensor *[]){x}, &same);
    EXPECT(max_rel_diff(id->data, x->data, x->numel) == 0, "pooling to the same size is the identity");
    EXPECT_ERROR(op_adaptive_avg_pool2d(x, 8, 3), "cannot pool");
}

typedef struct {
    int ho, wo;
} interp_ctx;

static tensor *interp_fn(tensor **in, const void *ctx) {
    const interp_ctx *c = ctx;
    return op_interp_bilinear(in[0], c->ho, c->wo);
}

TEST(interp_bilinear_known_values_and_grad) {
    tensor *x = TENSOR(1, 1, 2);
    x->data[0] = 0, x->data[1] = 1;
    tensor *y = op_interp_bilinear(x, 1, 4); /* [0, 1] -> [0, 0.25, 0.75, 1] */
    EXPECT(y->data[0] == 0 && y->data[1] == 0.25f && y->data[2] == 0.75f && y->data[3] == 1,
           "%g %g %g %g", y->data[0], y->data[1], y->data[2], y->data[3]);
    rng r;
    rng_seed(&r, 54, RNG_TEST);
    tensor *t = LEAF(&r, 1, 3, 7, 7);
    tensor *same = op_interp_bilinear(t, 7, 7);
    EXPECT(max_rel_diff(same->data, t->data, t->numel) == 0, "7 -> 7 is the identity");
    const interp_ctx cases[] = {{14, 9}, {5, 3}, {56, 56}};
    for (int i = 0; i < 3; i++) EXPECT(GRADCHECK(interp_fn, &cases[i], t), "case %d", i);
    /* downsampling 4 -> 2: src = 2 (o + 0.5) - 0.5 = 0.5, 2.5 -> averages of neighbours */
    tensor *d = TENSOR(1, 1, 4);
    for (int i = 0; i < 4; i++) d->data[i] = (float)i;
    tensor *dd = op_interp_bilinear(d, 1, 2);
    EXPECT(dd->data[0] == 0.5f && dd->data[1] == 2.5f, "%g %g", dd->data[0], dd->data[1]);
}

static tensor *dw_add_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_dwconv2d_add(in[0], in[1], in[2], in[3]);
}

TEST(dwconv2d_add_equals_base_plus_conv_and_grad) {
    rng r;
    rng_seed(&r, 56, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 5, 4, 6), *w = LEAF(&r, 0.5f, 3, 1, 3, 3), *b = LEAF(&r, 1, 3);
    tensor *base = LEAF(&r, 1, 2, 5, 4, 6);
    tensor *fused = op_dwconv2d_add(x, w, b, base), *sum = op_add(base, op_dwconv2d(x, w, b));
    EXPECT(max_rel_diff(fused->data, sum->data, sum->numel) < 1e-6, "base + dwconv");
    EXPECT(GRADCHECK(dw_add_fn, NULL, x, w, b, base), "dwconv add");
    EXPECT_ERROR(op_dwconv2d_add(x, w, b, RANDN(&r, 1, 2, 5, 4)), "base (2, 5, 4) for 6 channels of input (2, 5, 4, 6)");
}

/* base is consumed: a fresh copy of the leaf at every evaluation */
static tensor *fresh_copy(tensor *t) { return op_add(t, tensor_zeros(1, (int[]){1})); }

/* ctx: a bool, true for an input made by an op (whose other channels' gradient is then 0) */
static tensor *dw_into_fn(tensor **in, const void *ctx) {
    bool made = *(const bool *)ctx;
    tensor *x = made ? op_scale(in[0], 0.9f) : in[0];
    return op_dwconv2d_add_into(x, 3, 6, in[1], in[2], fresh_copy(in[3]));
}

/* a channel range of the input, added into base's memory: as slicing the input and adding a copy */
TEST(dwconv2d_add_into_equals_the_sliced_input_and_grad) {
    rng r;
    rng_seed(&r, 57, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 5, 4, 10), *w = LEAF(&r, 0.5f, 3, 1, 3, 3), *b = LEAF(&r, 1, 3);
    tensor *base = LEAF(&r, 1, 2, 5, 4, 6);
    tensor *chain = op_dwconv2d_add(op_slice(x, 3, 3, 6), w, b, base), *copy = fresh_copy(base);
    tensor *fused = op_dwconv2d_add_into(x, 3, 6, w, b, copy);
    EXPECT(fused->data == copy->data, "the sum is not in base's memory");
    EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) == 0, "forward");
    double err = backward_difference(chain, fused, 4, (tensor *[]){x, w, b, base});
    EXPECT(err < 1e-5, "gradients differ from the sliced input's by %g", err);
    EXPECT(GRADCHECK(dw_into_fn, &(bool){false}, x, w, b, base), "channels 3..9");
    EXPECT(GRADCHECK(dw_into_fn, &(bool){true}, x, w, b, base),
           "channels 3..9 of an input made by an op");
    EXPECT_ERROR(op_dwconv2d_add_into(x, 6, 6, w, b, base), "channels 6..12 of input (2, 5, 4, 10)");
    EXPECT_ERROR(op_dwconv2d_add_into(x, 3, 6, w, b, NULL), "no base to add into");
}

/* the chain the token forms replace: the grid tokens sliced out, the sum concatenated after the
 * lead tokens of base */
static tensor *dw_tokens_chain(tensor *x, int lead, int h, int w, tensor *wt, tensor *b,
                               tensor *base) {
    int B = x->shape[0], C = x->shape[2], n = x->shape[1];
    tensor *grid = RESHAPE(op_slice(x, 1, lead, n - lead), B, h, w, C);
    tensor *patches = RESHAPE(op_slice(base, 1, lead, n - lead), B, h, w, C);
    tensor *sum = RESHAPE(op_dwconv2d_add(grid, wt, b, patches), B, n - lead, C);
    return op_concat(2, (tensor *[]){op_slice(base, 1, 0, lead), sum}, 1);
}

static tensor *dw_tokens_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_dwconv2d_add_tokens_into(in[0], 2, 3, 4, in[1], in[2], fresh_copy(in[3]));
}

/* Agent and FLatten DeiT: the conv of v's patch tokens added to the attention output's, the class
 * token's row as it was: as slicing, adding and concatenating */
TEST(dwconv2d_add_tokens_into_equals_the_sliced_tokens_and_grad) {
    rng r;
    rng_seed(&r, 58, RNG_TEST);
    for (int k = 3; k <= 5; k += 2) { /* 5 > the 3 x 4 grid: every tap on the border */
        tensor *x = LEAF(&r, 1, 2, 2 + 3 * 4, 6), *w = LEAF(&r, 0.5f, 3, 1, k, k);
        tensor *b = LEAF(&r, 1, 3), *base = LEAF(&r, 1, 2, 2 + 3 * 4, 6);
        tensor *chain = dw_tokens_chain(x, 2, 3, 4, w, b, base), *copy = fresh_copy(base);
        tensor *fused = op_dwconv2d_add_tokens_into(x, 2, 3, 4, w, b, copy);
        EXPECT(fused->data == copy->data, "k %d: the sum is not in base's memory", k);
        EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) == 0, "k %d: forward", k);
        double err = backward_difference(chain, fused, 4, (tensor *[]){x, w, b, base});
        EXPECT(err < 1e-5, "k %d: gradients differ from the sliced tokens' by %g", k, err);
        EXPECT(GRADCHECK(dw_tokens_fn, NULL, x, w, b, base), "k %d", k);
    }
    tensor *x = RANDN(&r, 1, 2, 13, 6), *w = RANDN(&r, 1, 6, 1, 3, 3);
    EXPECT_ERROR(op_dwconv2d_add_tokens_into(x, 2, 3, 4, w, NULL, RANDN(&r, 1, 2, 13, 6)),
                 "input (2, 13, 6) is not (B, 2 + 3 x 4 tokens, C)");
    x = RANDN(&r, 1, 2, 14, 6);
    EXPECT_ERROR(op_dwconv2d_add_tokens_into(x, 2, 3, 4, w, NULL, RANDN(&r, 1, 2, 14, 3)),
                 "base (2, 14, 3) is not shaped as input (2, 14, 6)");
}

typedef struct {
    int lead, h, w, oh, ow;
} pool_tokens_ctx;

static tensor *pool_tokens_fn(tensor **in, const void *ctx) {
    const pool_tokens_ctx *c = ctx;
    return op_adaptive_avg_pool2d_tokens(in[0], c->lead, c->h, c->w, c->oh, c->ow);
}

/* Agent DeiT's agent tokens: pooled from the patch tokens after the class token, no copy first */
TEST(adaptive_pool_of_tokens_equals_the_pooled_slice_and_grad) {
    rng r;
    rng_seed(&r, 59, RNG_TEST);
    pool_tokens_ctx c = {1, 7, 5, 3, 2};
    tensor *x = LEAF(&r, 1, 2, 1 + 7 * 5, 4);
    tensor *y = pool_tokens_fn((tensor *[]){x}, &c);
    tensor *ref = op_adaptive_avg_pool2d(RESHAPE(op_slice(x, 1, 1, 35), 2, 7, 5, 4), 3, 2);
    EXPECT(max_rel_diff(y->data, ref->data, ref->numel) == 0, "forward");
    double err = backward_difference(ref, y, 1, (tensor *[]){x});
    EXPECT(err < 1e-6, "gradients differ from the pooled slice's by %g", err);
    EXPECT(GRADCHECK(pool_tokens_fn, &c, x), "7x5 after one token -> 3x2");
    EXPECT_ERROR(op_adaptive_avg_pool2d_tokens(x, 1, 5, 7, 6, 2), "cannot pool the 5x7 grid");
    EXPECT_ERROR(op_adaptive_avg_pool2d_tokens(x, 2, 7, 5, 3, 2), "is not (B, 2 + 7 x 5 tokens");
}
