/* Dropout, and the residual branch ending in a linear layer with per-sample drop path (stochastic
 * depth). The random draws are serial and in a fixed order, so a seed gives the same mask whatever
 * the thread count. */
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/elementwise.h"
#include "../cpu/matmul.h"
#include "../cpu/spatial.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"

/* `groups` draws of keep (1/(1-p)) or 0 */
static tensor *draw_mask(int id, float p, rng *r, int64_t groups) {
    CHECK(r, "%s with p %g needs a random stream", op_table[id].name, p);
    tensor *mask = TENSOR((int)groups);
    float keep = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < groups; i++) mask->data[i] = rng_uniform(r) >= p ? keep : 0.0f;
    return mask;
}

tensor *op_dropout(tensor *x, float p, rng *r) {
    CHECK(p >= 0 && p < 1, "dropout: probability %g outside [0, 1)", p);
    if (p == 0) return x;
    tensor *mask = draw_mask(OP_DROPOUT, p, r, x->numel), *out = tensor_like(x);
    const float *src = x->data, *m = mask->data;
    float *dst = out->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < x->numel; i++) dst[i] = src[i] * m[i];
    tape_node *n = tape_record(OP_DROPOUT, out, 1, (tensor *[]){x});
    if (n) n->saved[0] = mask;
    return out;
}

void op_dropout_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (!x->requires_grad) return;
    float *gx = tensor_grad(x);
    const float *g = n->out->grad, *m = n->saved[0]->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < x->numel; i++) gx[i] += g[i] * m[i];
}

/* the map geometry of a residual step whose branch is in window order (H == 0: none) */
typedef struct window_geom {
    int H, W, wh, ww, shift;
} window_geom;

static tensor *residual_linear(tensor *res, tensor *h, tensor *w, tensor *b, bool gelu,
                               window_geom g, float p, rng *r) {
    CHECK(p >= 0 && p < 1, "residual_linear: probability %g outside [0, 1)", p);
    int K = h->shape[h->ndim - 1], N = res->shape[res->ndim - 1];
    CHECK(w->ndim == 2 && w->shape[0] == N && w->shape[1] == K && h->numel / K == res->numel / N &&
              (g.H || h->shape[0] == res->shape[0]),
          "residual_linear: residual %s, input %s, weight %s do not match", SHAPE_STR(res),
          SHAPE_STR(h), SHAPE_STR(w));
    CHECK(!b || b->numel == N, "residual_linear: bias %s for %d outputs", SHAPE_STR(b), N);
    int B = res->shape[0], M = (int)(res->numel / N), rows = M / B;
    tensor *mask = p > 0 ? draw_mask(OP_RESIDUAL_LINEAR, p, r, B) : NULL;
    tensor *out = tensor_like(res);
    /* passes of a few samples: the GELU, or the branch in window order, is scratch */
    int64_t per_sample = gelu ? (int64_t)rows * K : g.H ? (int64_t)rows * N : 0;
    int group = per_sample ? (int)items_per_pass(B, per_sample) : B;
    size_t n_scratch = (size_t)group * per_sample;
    float *scratch = per_sample ? scratch_floats(n_scratch) : NULL, *branch = NULL;
    if (g.H) {
        copy_floats(out->data, res->data, res->numel);
        branch = scratch;
    }
    for (int s0 = 0; s0 < B; s0 += group) {
        int gs = s0 + group < B ? group : B - s0;
        size_t r0 = (size_t)s0 * rows, n_act = (size_t)gs * rows * K;
        const float *act = h->data + r0 * K, *keep = mask ? mask->data + s0 : NULL;
        if (gelu) {
            gelu_forward(scratch, act, (int64_t)n_act);
            act = scratch;
        }
        if (!g.H) {
            residual_linear_forward(out->data + r0 * N, res->data + r0 * N, act, w->data,
                                    b ? b->data : NULL, keep, gs, gs * rows, K, N);
            continue;
        }
        residual_linear_forward(branch, NULL, act, w->data, b ? b->data : NULL, keep, gs, gs * rows, K, N);
        window_copy(branch, out->data + r0 * N, gs, g.H, g.W, N, g.wh, g.ww, g.shift, false, true);
    }
    scratch_done(scratch, n_scratch);
    op_macs += (double)M * K * N;
    tape_node *n = tape_record(OP_RESIDUAL_LINEAR, out, 4, (tensor *[]){res, h, w, b});
    if (n) {
        n->saved[0] = mask;
        n->iarg[0] = gelu;
        n->iarg[1] = g.H, n->iarg[2] = g.W, n->iarg[3] = g.wh, n->iarg[4] = g.ww, n->iarg[5] = g.shift;
    }
    return out;
}

tensor *op_residual_linear(tensor *res, tensor *h, tensor *w, tensor *b, bool gelu, float p, rng *r) {
    return residual_linear(res, h, w, b, gelu, (window_geom){0}, p, r);
}

tensor *op_residual_linear_windows(tensor *res, tensor *h, tensor *w, tensor *b, int wh, int ww,
                                   int shift, float p, rng *r) {
    CHECK(res->ndim == 4 && wh >= 1 && ww >= 1 && res->shape[1] % wh == 0 && res->shape[2] % ww == 0,
          "residual_linear_windows: %dx%d windows do not tile the residual %s (B, H, W, C)", wh, ww,
          SHAPE_STR(res));
    int windows = res->shape[0] * (res->shape[1] / wh) * (res->shape[2] / ww);
    CHECK(h->ndim == 3 && h->shape[0] == windows && h->shape[1] == wh * ww,
          "residual_linear_windows: input %s is not (%d windows, %d, K)", SHAPE_STR(h), windows, wh * ww);
    return residual_linear(res, h, w, b, false, (window_geom){res->shape[1], res->shape[2], wh, ww, shift}, p, r);
}

void op_residual_linear_backward(tape_node *n) {
    tensor *res = n->in[0], *h = n->in[1], *w = n->in[2], *b = n->in[3], *mask = n->saved[0];
    bool gelu = n->iarg[0];
    window_geom geom = {n->iarg[1], n->iarg[2], n->iarg[3], n->iarg[4], n->iarg[5]};
    int K = h->shape[h->ndim - 1], N = w->shape[0], B = res->shape[0], M = (int)(res->numel / N);
    int rows = M / B;
    float *dh = h->requires_grad ? tensor_grad(h) : NULL;
    float *dw = w->requires_grad ? tensor_grad(w) : NULL, *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    bool own_g = mask || geom.H; /* the branch's gradient: masked, or in window order */
    int group = gelu || own_g ? (int)items_per_pass(B, (int64_t)rows * (gelu ? 2 * K + N : N)) : B;
    size_t most = (size_t)group * rows;
    float *gm = own_g ? scratch_floats(most * N) : NULL;
    float *act = gelu ? scratch_floats(most * K) : NULL, *slope = gelu ? scratch_floats(most * K) : NULL;
    for (int s0 = 0; s0 < B; s0 += group) {
        int gs = s0 + group < B ? group : B - s0, gm_rows = gs * rows;
        size_t r0 = (size_t)s0 * rows;
        const float *g = n->out->grad + r0 * N, *hs = h->data + r0 * K;
        float *dhs = dh ? dh + r0 * K : NULL;
        if (geom.H) {
            window_copy(gm, (float *)g, gs, geom.H, geom.W, N, geom.wh, geom.ww, geom.shift, true, false);
            g = gm;
        }
        if (mask) { /* each sample's rows scaled by its mask */
            int64_t per = (int64_t)rows * N;
            const float *keep = mask->data + s0;
#pragma omp parallel for collapse(2) schedule(static)
            for (int s = 0; s < gs; s++)
                for (int64_t j = 0; j < per; j++) gm[s * per + j] = g[s * per + j] * keep[s];
            g = gm;
        }
        if (!gelu) {
            linear_backward(dhs, dw, db, g, hs, w->data, gm_rows, K, N);
            continue;
        }
        /* the activation is recomputed, not kept */
        int64_t n_act = (int64_t)gm_rows * K;
        gelu_value_and_slope(act, slope, hs, n_act);
        linear_backward(NULL, dw, db, g, act, w->data, gm_rows, K, N);
        if (dhs) {
            float *dact = act; /* consumed: its buffer takes d(loss)/d(activation) */
            gemm(false, false, gm_rows, K, N, 1.0f, g, w->data, 0.0f, dact);
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < n_act; i++) dhs[i] += dact[i] * slope[i];
        }
    }
    scratch_done(gm, most * N);
    scratch_done(act, most * K);
    scratch_done(slope, most * K);
    if (res->requires_grad) pass_grad(res, n->out);
}
