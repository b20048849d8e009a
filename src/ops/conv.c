/* Convolution-family ops on channels-last maps: conv2d (groups, stride, padding), depthwise conv,
 * adaptive average pooling, bilinear resize of planes. */
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/conv.h"
#include "../cpu/elementwise.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

static conv_geom geom_of(const tensor *x, const tensor *w, int stride, int pad, int groups) {
    conv_geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2],
                   w->shape[3], stride, pad, groups, 0, 0};
    g.Ho = (g.H + 2 * pad - g.kh) / stride + 1;
    g.Wo = (g.W + 2 * pad - g.kw) / stride + 1;
    return g;
}

tensor *op_conv2d(tensor *x, tensor *w, tensor *b, int stride, int pad, int groups) {
    CHECK(x->ndim == 4 && w->ndim == 4, "conv2d: input %s (B, H, W, C) and weight %s (O, I, kh, kw)",
          SHAPE_STR(x), SHAPE_STR(w));
    CHECK(stride >= 1 && pad >= 0 && groups >= 1 && x->shape[3] % groups == 0 &&
              w->shape[0] % groups == 0 && w->shape[1] * groups == x->shape[3],
          "conv2d: weight %s with groups %d does not fit input %s", SHAPE_STR(w), groups,
          SHAPE_STR(x));
    CHECK(!b || b->numel == w->shape[0], "conv2d: bias %s for %d output channels", SHAPE_STR(b),
          w->shape[0]);
    conv_geom g = geom_of(x, w, stride, pad, groups);
    CHECK(g.Ho >= 1 && g.Wo >= 1, "conv2d: kernel %dx%d larger than the padded input %s", g.kh,
          g.kw, SHAPE_STR(x));
    tensor *out = TENSOR(g.B, g.Ho, g.Wo, g.Cout);
    size_t n_scratch = conv2d_scratch_floats(&g, false);
    float *scratch = scratch_floats(n_scratch);
    kernels->conv2d_forward(out->data, x->data, w->data, b ? b->data : NULL, &g, scratch);
    op_macs += (double)out->numel * (g.Cin / groups) * g.kh * g.kw;
    scratch_done(scratch, n_scratch);
    tape_node *n = tape_record(OP_CONV2D, out, 3, (tensor *[]){x, w, b});
    if (n) n->iarg[0] = stride, n->iarg[1] = pad, n->iarg[2] = groups;
    return out;
}

void op_conv2d_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    conv_geom g = geom_of(x, w, n->iarg[0], n->iarg[1], n->iarg[2]);
    float *dx = x->requires_grad ? tensor_grad(x) : NULL;
    float *dw = w->requires_grad ? tensor_grad(w) : NULL;
    float *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    size_t n_scratch = conv2d_scratch_floats(&g, true);
    float *scratch = scratch_floats(n_scratch);
    kernels->conv2d_backward(dx, dw, db, n->out->grad, x->data, w->data, &g, scratch);
    scratch_done(scratch, n_scratch);
}

/* The grid of x: (B, H, W, C) maps (lead 0), or (B, lead + H*W, C) tokens whose grid follows `lead`
 * others (a class token), from op_dwconv2d_add_tokens_into and op_adaptive_avg_pool2d_tokens. */
typedef struct grid {
    int B, H, W, lead;
} grid;

static grid map_grid(const tensor *x) { return (grid){x->shape[0], x->shape[1], x->shape[2], 0}; }

static grid token_grid(const char *op, const tensor *x, int lead, int h, int w) {
    CHECK(x->ndim == 3 && lead >= 0 && h >= 1 && w >= 1 && x->shape[1] == lead + h * w,
          "%s: input %s is not (B, %d + %d x %d tokens, C)", op, SHAPE_STR(x), lead, h, w);
    return (grid){x->shape[0], h, w, lead};
}

static tensor *dwconv2d_add(tensor *x, grid g, int c0, int channels, tensor *w, tensor *b,
                            tensor *base, bool into_base) {
    int xC = x->shape[x->ndim - 1], k = w->shape[2];
    CHECK(c0 >= 0 && channels >= 1 && c0 + channels <= xC,
          "dwconv2d: channels %d..%d of input %s", c0, c0 + channels, SHAPE_STR(x));
    CHECK(w->ndim == 4 && w->shape[0] > 0 && channels % w->shape[0] == 0 && w->shape[1] == 1 &&
              w->shape[2] == w->shape[3] && w->shape[2] % 2 == 1 && w->shape[2] <= DW_MAX_K,
          "dwconv2d: weight %s must be (C or a divisor of C, 1, k, k) with k odd and at most %d "
          "for %d channels of input %s", SHAPE_STR(w), DW_MAX_K, channels, SHAPE_STR(x));
    CHECK(!b || b->numel == w->shape[0], "dwconv2d: bias %s for %d kernels", SHAPE_STR(b), w->shape[0]);
    int64_t pixels = (int64_t)g.B * (g.lead + g.H * g.W);
    CHECK(!base || base->numel == pixels * channels,
          "dwconv2d: base %s for %d channels of input %s", SHAPE_STR(base), channels, SHAPE_STR(x));
    int map_shape[4] = {g.B, g.H, g.W, channels};
    int token_shape[3] = {g.B, g.lead + g.H * g.W, channels};
    bool tokens = x->ndim == 3;
    tensor *out = into_base ? tensor_view(base, tokens ? 3 : 4, tokens ? token_shape : map_shape)
                           : tensor_new(4, map_shape);
    size_t n_wt = (size_t)(k * k + 1) * channels;
    float *wt = scratch_floats(n_wt);
    kernels->dwconv2d_forward(out->data, x->data + c0, xC, w->data, b ? b->data : NULL,
                              base ? base->data : NULL, g.B, g.H, g.W, g.lead, channels,
                              w->shape[0], k, wt);
    op_macs += (double)g.B * g.H * g.W * channels * k * k;
    scratch_done(wt, n_wt);
    tape_node *n = tape_record(OP_DWCONV2D, out, 4, (tensor *[]){x, w, b, base});
    if (n) {
        n->iarg[0] = c0, n->iarg[1] = g.B, n->iarg[2] = g.H;
        n->iarg[3] = g.W, n->iarg[4] = g.lead;
    }
    return out;
}

tensor *op_dwconv2d_add(tensor *x, tensor *w, tensor *b, tensor *base) {
    CHECK(x->ndim == 4, "dwconv2d: input %s is not (B, H, W, C)", SHAPE_STR(x));
    return dwconv2d_add(x, map_grid(x), 0, x->shape[3], w, b, base, false);
}

tensor *op_dwconv2d_add_into(tensor *x, int c0, int channels, tensor *w, tensor *b, tensor *base) {
    CHECK(x->ndim == 4, "dwconv2d: input %s is not (B, H, W, C)", SHAPE_STR(x));
    CHECK(base, "dwconv2d_add_into: no base to add into");
    return dwconv2d_add(x, map_grid(x), c0, channels, w, b, base, true);
}

tensor *op_dwconv2d_add_tokens_into(tensor *x, int lead, int h, int w, tensor *wt, tensor *b,
                                    tensor *base) {
    grid g = token_grid("dwconv2d", x, lead, h, w);
    CHECK(base && base->ndim == 3 && base->shape[0] == g.B && base->shape[1] == x->shape[1] &&
              base->shape[2] == x->shape[2],
          "dwconv2d_add_tokens_into: base %s is not shaped as input %s", SHAPE_STR(base),
          SHAPE_STR(x));
    return dwconv2d_add(x, g, 0, x->shape[2], wt, b, base, true);
}

tensor *op_dwconv2d(tensor *x, tensor *w, tensor *b) { return op_dwconv2d_add(x, w, b, NULL); }

void op_dwconv2d_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *base = n->in[3], *out = n->out;
    int c0 = n->iarg[0], B = n->iarg[1], H = n->iarg[2], W = n->iarg[3], lead = n->iarg[4];
    int xC = x->shape[x->ndim - 1], C = out->shape[out->ndim - 1], k = w->shape[2];
    /* a gradient of x written whole here (all channels, no other tokens) is written whole where x
     * has none yet */
    float dx_beta = 1.0f, *dx = NULL;
    if (x->requires_grad)
        dx = (C == xC && !lead ? tensor_grad_whole(x, &dx_beta) : tensor_grad(x)) + c0;
    float *dw = w->requires_grad ? tensor_grad(w) : NULL;
    float *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    size_t n_wt = (size_t)(k * k + 1) * C;
    float *wt = scratch_floats(n_wt), *partial = scratch_floats(DW_CHUNKS * n_wt);
    kernels->dwconv2d_backward(dx, dx_beta, dw, db, out->grad, x->data + c0, xC, w->data, B, H, W,
                               lead, C, w->shape[0], k, wt, partial);
    scratch_done(wt, n_wt);
    scratch_done(partial, DW_CHUNKS * n_wt);
    if (base && base->requires_grad) pass_grad(base, out);
}

static tensor *adaptive_avg_pool2d(tensor *x, grid g, int oh, int ow) {
    CHECK(oh >= 1 && ow >= 1 && oh <= g.H && ow <= g.W,
          "adaptive_avg_pool2d: cannot pool the %dx%d grid of %s to %dx%d", g.H, g.W,
          SHAPE_STR(x), oh, ow);
    int C = x->shape[x->ndim - 1];
    tensor *out = TENSOR(g.B, oh, ow, C);
    kernels->adaptive_avg_pool2d_forward(out->data, x->data, g.B, g.H, g.W, g.lead, C, oh, ow);
    op_macs += (double)g.B * g.H * g.W * C;
    tape_node *n = tape_record(OP_ADAPTIVE_AVG_POOL2D, out, 1, (tensor *[]){x});
    if (n) n->iarg[0] = g.H, n->iarg[1] = g.W, n->iarg[2] = g.lead;
    return out;
}

tensor *op_adaptive_avg_pool2d(tensor *x, int oh, int ow) {
    CHECK(x->ndim == 4, "adaptive_avg_pool2d: cannot pool %s (B, H, W, C) to %dx%d", SHAPE_STR(x),
          oh, ow);
    return adaptive_avg_pool2d(x, map_grid(x), oh, ow);
}

tensor *op_adaptive_avg_pool2d_tokens(tensor *x, int lead, int h, int w, int oh, int ow) {
    return adaptive_avg_pool2d(x, token_grid("adaptive_avg_pool2d", x, lead, h, w), oh, ow);
}

void op_adaptive_avg_pool2d_backward(tape_node *n) {
    tensor *x = n->in[0], *out = n->out;
    if (x->requires_grad)
        kernels->adaptive_avg_pool2d_backward(tensor_grad(x), out->grad, x->shape[0], n->iarg[0],
                                              n->iarg[1], n->iarg[2], out->shape[3],
                                              out->shape[1], out->shape[2]);
}

tensor *op_interp_bilinear(tensor *x, int ho, int wo) {
    CHECK(x->ndim == 3 && ho >= 1 && wo >= 1, "interp_bilinear: planes %s (P, H, W) to %dx%d",
          SHAPE_STR(x), ho, wo);
    tensor *out = TENSOR(x->shape[0], ho, wo);
    kernels->interp_bilinear_forward(out->data, x->data, x->shape[0], x->shape[1], x->shape[2], ho, wo);
    op_macs += 4.0 * (double)out->numel;
    tape_record(OP_INTERP_BILINEAR, out, 1, (tensor *[]){x});
    return out;
}

void op_interp_bilinear_backward(tape_node *n) {
    tensor *x = n->in[0], *out = n->out;
    if (x->requires_grad)
        kernels->interp_bilinear_backward(tensor_grad(x), out->grad, x->shape[0], x->shape[1], x->shape[2],
                                 out->shape[1], out->shape[2]);
}
