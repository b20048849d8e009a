/* Dropout, and the residual branch ending in a linear layer with per-sample drop path (stochastic
 * depth). Each sample's draws come from its own stream, keyed by one draw of the op's stream and the
 * sample's index in the whole batch, so a seed gives the same mask whatever the thread count, and a
 * data-parallel rank draws for its samples what one process draws for them. */
#include <string.h>

#include "../core/arena.h"
#include "../core/check.h"
#include "../core/memory.h"
#include "../core/precision.h"
#include "../core/tape.h"
#include "backend.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

/* `per` draws of keep (1/(1-p)) or 0 for each of `samples` samples, drawn on the host and moved to
 * the device's memory; *host (when given) = a copy on the host for the step, apart from the mask,
 * whose memory goes back after its node's backward (on the CPU, the mask is the draws) */
static tensor *draw_mask(int id, float p, rng *r, int64_t samples, int64_t per,
                         const float **host) {
    CHECK(r, "%s with p %g needs a random stream", op_table[id].name, p);
    int n = (int)(samples * per);
    float *draws = arena_alloc(&vitc_arena, sizeof(float) * (size_t)n), keep = 1.0f / (1.0f - p);
    uint64_t key = rng_u64(r);
    for (int64_t s = 0; s < samples; s++) {
        rng g;
        rng_seed(&g, key + (uint64_t)(r->first_sample + s), RNG_DROP_PATH);
        for (int64_t j = 0; j < per; j++) draws[s * per + j] = rng_uniform(&g) >= p ? keep : 0.0f;
    }
    if (host) *host = memcpy(arena_alloc_small(&vitc_arena, sizeof(float) * (size_t)n), draws,
                             sizeof(float) * (size_t)n);
    return tensor_wrap((float *)backend_floats(draws, n), 1, &n);
}

tensor *op_dropout(tensor *x, float p, rng *r) {
    CHECK(p >= 0 && p < 1, "dropout: probability %g outside [0, 1)", p);
    if (p == 0) return x;
    tensor *mask = draw_mask(OP_DROPOUT, p, r, x->shape[0], x->numel / x->shape[0], NULL);
    tensor *out = tensor_like(x);
    kernels->scale_groups(out->data, x->data, mask->data, x->numel, 1, false);
    tape_node *n = tape_record(OP_DROPOUT, out, 1, (tensor *[]){x});
    if (n) n->saved[0] = mask;
    return out;
}

void op_dropout_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (!x->requires_grad) return;
    kernels->scale_groups(tensor_grad(x), n->out->grad, n->saved[0]->data, x->numel, 1, true);
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
    CHECK(!h->bf16 || gelu, "residual_linear: a bf16 input %s is an MLP's hidden layer, for the GELU",
          SHAPE_STR(h));
    int B = res->shape[0], M = (int)(res->numel / N), rows = M / B;
    tensor *mask = p > 0 ? draw_mask(OP_RESIDUAL_LINEAR, p, r, B, 1, NULL) : NULL;
    tensor *out = tensor_like(res);
    /* passes of a few samples: the GELU, or the branch in window order, is scratch */
    int64_t per_sample = gelu ? (int64_t)rows * K : g.H ? (int64_t)rows * N : 0;
    int group = per_sample ? (int)items_per_pass(B, per_sample, rows) : B;
    size_t n_scratch = (size_t)group * per_sample;
    float *scratch = per_sample ? scratch_floats(n_scratch) : NULL, *branch = NULL;
    if (g.H) {
        kernels->copy_floats(out->data, res->data, res->numel);
        branch = scratch;
    }
    for (int s0 = 0; s0 < B; s0 += group) {
        int gs = s0 + group < B ? group : B - s0;
        size_t r0 = (size_t)s0 * rows, n_act = (size_t)gs * rows * K;
        const float *act = scratch, *keep = mask ? mask->data + s0 : NULL;
        if (h->bf16)
            kernels->bf16_load(scratch, tensor_bf16(h) + r0 * K, (int64_t)n_act);
        else
            act = h->data + r0 * K;
        if (gelu) {
            kernels->gelu_forward(scratch, act, (int64_t)n_act);
            act = scratch;
        }
        if (!g.H) {
            kernels->residual_linear_forward(out->data + r0 * N, res->data + r0 * N, act, w->data,
                                    b ? b->data : NULL, keep, gs, gs * rows, K, N);
            continue;
        }
        kernels->residual_linear_forward(branch, NULL, act, w->data, b ? b->data : NULL, keep, gs, gs * rows, K, N);
        kernels->window_copy(branch, out->data + r0 * N, gs, g.H, g.W, N, g.wh, g.ww, g.shift, false, true);
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

/* The MLP step's backward over the samples drop path keeps, where it dropped any (op_mlp_residual
 * leaves the host's copy of the mask in both of its nodes): a dropped sample's branch adds nothing
 * to any gradient, so the GELU and the products run on the kept samples' rows, taken run by run
 * of kept samples, and h's gradient holds those rows one sample after another, as
 * op_layernorm_linear_backward reads them (h has no other reader). */
static void mlp_kept_backward(tape_node *n) {
    tensor *res = n->in[0], *h = n->in[1], *w = n->in[2], *b = n->in[3], *mask = n->saved[0];
    const float *keep = n->ptr;
    int K = h->shape[h->ndim - 1], N = w->shape[0], B = res->shape[0];
    int rows = (int)(res->numel / N / B);
    CHECK(n->iarg[0] && mask && !h->grad && h->readers == 1,
          "residual_linear: the kept samples' backward is the MLP step's own");
    uint16_t *dh16 = h->requires_grad && h->bf16 ? tensor_grad_bf16(h) : NULL;
    float *dh = h->requires_grad && !h->bf16 ? tensor_grad(h) : NULL;
    float *dw = w->requires_grad ? tensor_grad(w) : NULL;
    float *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    /* passes of as many kept samples as the whole step's passes take: the same scratch whatever
     * the mask */
    int group = (int)items_per_pass(B, (int64_t)rows * (2 * K + N), rows);
    size_t most = (size_t)group * rows, n_act16 = h->bf16 ? (most * K + 1) / 2 : 0;
    float *gm = scratch_floats(most * N);
    float *act = h->bf16 ? NULL : scratch_floats(most * K);
    float *slope = h->bf16 ? NULL : scratch_floats(most * K);
    uint16_t *act16 = h->bf16 ? (uint16_t *)scratch_floats(n_act16) : NULL;
    mlp_dims hidden = {(int64_t)most, N, K, rows};
    size_t n_hidden = h->bf16 ? kernels->mlp_hidden_backward_scratch_floats(&hidden) : 0;
    float *hidden_scratch = h->bf16 ? scratch_floats(n_hidden) : NULL;
    /* passes of `group` kept samples; j counts the kept samples before a pass's rows */
    for (int s = 0, j = 0; s < B;) {
        int j0 = j;
        for (int e; next_kept_run(keep, B, group - (j - j0), &s, &e); s = e) {
            size_t at = (size_t)(j - j0) * rows, from = (size_t)s * rows;
            size_t run = (size_t)(e - s) * rows;
            kernels->scale_groups(gm + at * N, n->out->grad + from * N, mask->data + s, e - s,
                                  (int64_t)rows * N, false);
            if (h->bf16) {
                hidden.M = (int64_t)run;
                kernels->mlp_hidden_backward_bf16(dh16 ? dh16 + (size_t)j * rows * K : NULL,
                                                  act16 + at * K, tensor_bf16(h) + from * K,
                                                  gm + at * N, w->data, &hidden, hidden_scratch);
            } else {
                kernels->gelu_value_and_slope(act + at * K, slope + at * K, h->data + from * K,
                                              (int64_t)run * K);
            }
            j += e - s;
        }
        if (j == j0) break;
        int pass_rows = (j - j0) * rows;
        if (h->bf16) {
            kernels->linear_backward_bf16_input(NULL, dw, db, gm, act16, w->data, pass_rows, K, N);
            continue;
        }
        kernels->linear_backward(NULL, dw, db, gm, act, w->data, pass_rows, K, N);
        if (dh) { /* act, consumed, takes d(loss)/d(activation) */
            kernels->gemm(false, false, pass_rows, K, N, 1.0f, gm, w->data, 0.0f, act);
            kernels->scale_groups(dh + (size_t)j0 * rows * K, act, slope, (int64_t)pass_rows * K, 1,
                                  true);
        }
    }
    scratch_done(hidden_scratch, n_hidden);
    scratch_done((float *)act16, n_act16);
    scratch_done(slope, h->bf16 ? 0 : most * K);
    scratch_done(act, h->bf16 ? 0 : most * K);
    scratch_done(gm, most * N);
    if (res->requires_grad) pass_grad(res, n->out);
}

void op_residual_linear_backward(tape_node *n) {
    if (n->ptr) {
        mlp_kept_backward(n);
        return;
    }
    tensor *res = n->in[0], *h = n->in[1], *w = n->in[2], *b = n->in[3], *mask = n->saved[0];
    bool gelu = n->iarg[0];
    window_geom geom = {n->iarg[1], n->iarg[2], n->iarg[3], n->iarg[4], n->iarg[5]};
    int K = h->shape[h->ndim - 1], N = w->shape[0], B = res->shape[0], M = (int)(res->numel / N);
    int rows = M / B;
    /* a bf16 hidden layer's gradient is bf16 too where this op is its one reader: fc1's products,
     * its only other reader, round it anyway (op_takes_bf16_grad) */
    bool grad16 = gelu && h->bf16 && h->requires_grad && h->readers == 1 && !h->grad;
    uint16_t *dh16 = grad16 ? tensor_grad_bf16(h) : NULL;
    /* without the GELU the product writes h's gradient whole (dh_beta 0 where h has none yet) */
    float dh_beta = 1.0f, *dh = NULL;
    if (h->requires_grad && !grad16) dh = gelu ? tensor_grad(h) : tensor_grad_whole(h, &dh_beta);
    float *dw = w->requires_grad ? tensor_grad(w) : NULL, *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    bool own_g = mask || geom.H; /* the branch's gradient: masked, or in window order */
    /* (passes of the same samples whether h is kept in fp32 or bf16: the weight and bias gradients
     * add up their passes in the same order) */
    int group = gelu || own_g ? (int)items_per_pass(B, (int64_t)rows * (gelu ? 2 * K + N : N), rows) : B;
    bool gelu32 = gelu && !h->bf16; /* in fp32: the activation and its slope in scratch */
    size_t most = (size_t)group * rows;
    float *gm = own_g ? scratch_floats(most * N) : NULL;
    float *act = gelu32 ? scratch_floats(most * K) : NULL, *slope = gelu32 ? scratch_floats(most * K) : NULL;
    /* a bf16 hidden layer's activation is recomputed as bf16, the operand fc2's weight gradient
     * would round it to: the product reads half the bytes and rounds nothing */
    size_t n_act16 = h->bf16 ? (most * K + 1) / 2 : 0;
    uint16_t *act16 = h->bf16 ? (uint16_t *)scratch_floats(n_act16) : NULL;
    /* a bf16 hidden layer read elsewhere too: its gradient, floats, adds each pass's widened */
    bool widen = h->bf16 && dh;
    uint16_t *pass16 = widen ? (uint16_t *)scratch_floats(n_act16) : NULL;
    float *widened = widen ? scratch_floats(most * K) : NULL;
    mlp_dims hidden = {(int64_t)most, N, K, rows};
    size_t n_hidden = h->bf16 ? kernels->mlp_hidden_backward_scratch_floats(&hidden) : 0;
    float *hidden_scratch = h->bf16 ? scratch_floats(n_hidden) : NULL;
    for (int s0 = 0; s0 < B; s0 += group) {
        int gs = s0 + group < B ? group : B - s0, gm_rows = gs * rows;
        size_t r0 = (size_t)s0 * rows;
        const float *g = n->out->grad + r0 * N;
        float *dhs = dh ? dh + r0 * K : NULL;
        if (geom.H) {
            kernels->window_copy(gm, (float *)g, gs, geom.H, geom.W, N, geom.wh, geom.ww, geom.shift, true, false);
            g = gm;
        }
        if (mask) { /* the branch's gradient: each sample's scaled by its drop-path factor */
            kernels->scale_groups(gm, g, mask->data + s0, gs, (int64_t)rows * N, false);
            g = gm;
        }
        if (!gelu) {
            if (dhs) kernels->gemm(false, false, gm_rows, K, N, 1.0f, g, w->data, dh_beta, dhs);
            kernels->linear_backward(NULL, dw, db, g, h->data + r0 * K, w->data, gm_rows, K, N);
            continue;
        }
        /* the activation is recomputed, not kept */
        if (h->bf16) {
            hidden.M = gm_rows;
            uint16_t *dh16s = dh16 ? dh16 + r0 * K : pass16;
            kernels->mlp_hidden_backward_bf16(dh16s, act16, tensor_bf16(h) + r0 * K, g, w->data,
                                              &hidden, hidden_scratch);
            kernels->linear_backward_bf16_input(NULL, dw, db, g, act16, w->data, gm_rows, K, N);
            if (widen) {
                kernels->bf16_load(widened, pass16, (int64_t)gm_rows * K);
                kernels->accumulate(dhs, widened, (int64_t)gm_rows * K);
            }
            continue;
        }
        int64_t n_act = (int64_t)gm_rows * K;
        kernels->gelu_value_and_slope(act, slope, h->data + r0 * K, n_act);
        kernels->linear_backward(NULL, dw, db, g, act, w->data, gm_rows, K, N);
        if (dhs) {
            float *dact = act; /* consumed: its buffer takes d(loss)/d(activation) */
            kernels->gemm(false, false, gm_rows, K, N, 1.0f, g, w->data, 0.0f, dact);
            kernels->scale_groups(dhs, dact, slope, n_act, 1, true);
        }
    }
    scratch_done(widened, widen ? most * K : 0);
    scratch_done((float *)pass16, widen ? n_act16 : 0);
    scratch_done(hidden_scratch, n_hidden);
    scratch_done((float *)act16, n_act16);
    scratch_done(gm, most * N);
    scratch_done(act, most * K);
    scratch_done(slope, most * K);
    if (res->requires_grad) pass_grad(res, n->out);
}

/* columns [k0, k0 + K) of m (N, Kw) into part (N, K), or added back from it */
static void copy_columns(float *part, const float *m, int N, int Kw, int k0, int K) {
    kernels->block_copy(part, K, m, Kw, N, 1, 0, k0, K, 0);
}

static void add_columns(float *m, const float *part, int N, int Kw, int k0, int K) {
    kernels->block_copy(m, Kw, part, K, N, 1, k0, 0, K, 1);
}

tensor *op_residual_linear_split(tensor *res, tensor *h0, tensor *h1, tensor *w, tensor *b, float p, rng *r) {
    CHECK(p >= 0 && p < 1, "residual_linear_split: probability %g outside [0, 1)", p);
    int K0 = h0->shape[h0->ndim - 1], K1 = h1->shape[h1->ndim - 1], N = res->shape[res->ndim - 1];
    int B = res->shape[0], M = (int)(res->numel / N);
    CHECK(w->ndim == 2 && w->shape[0] == N && w->shape[1] == K0 + K1 && h0->numel / K0 == M &&
              h1->numel / K1 == M && h0->shape[0] == B && h1->shape[0] == B,
          "residual_linear_split: residual %s, inputs %s and %s, weight %s do not match", SHAPE_STR(res),
          SHAPE_STR(h0), SHAPE_STR(h1), SHAPE_STR(w));
    CHECK(!b || b->numel == N, "residual_linear_split: bias %s for %d outputs", SHAPE_STR(b), N);
    tensor *mask = p > 0 ? draw_mask(OP_RESIDUAL_LINEAR_SPLIT, p, r, B, 1, NULL) : NULL;
    tensor *out = tensor_like(res), *h[2] = {h0, h1};
    size_t n_part = (size_t)N * (K0 > K1 ? K0 : K1);
    float *w_part = scratch_floats(n_part);
    for (int i = 0, k0 = 0; i < 2; k0 += h[i]->shape[h[i]->ndim - 1], i++) {
        int K = h[i]->shape[h[i]->ndim - 1];
        copy_columns(w_part, w->data, N, K0 + K1, k0, K);
        kernels->residual_linear_forward(out->data, i ? out->data : res->data, h[i]->data, w_part,
                                i == 0 && b ? b->data : NULL, mask ? mask->data : NULL, B, M, K, N);
    }
    scratch_done(w_part, n_part);
    op_macs += (double)M * (K0 + K1) * N;
    tape_node *n = tape_record(OP_RESIDUAL_LINEAR_SPLIT, out, 5, (tensor *[]){res, h0, h1, w, b});
    if (n) n->saved[0] = mask;
    return out;
}

void op_residual_linear_split_backward(tape_node *n) {
    tensor *res = n->in[0], *h[2] = {n->in[1], n->in[2]}, *w = n->in[3], *b = n->in[4], *mask = n->saved[0];
    int N = w->shape[0], Kw = w->shape[1], B = res->shape[0], M = (int)(res->numel / N), rows = M / B;
    float *dw = w->requires_grad ? tensor_grad(w) : NULL, *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    const float *g = n->out->grad;
    float *gm = NULL;
    if (mask) {
        gm = scratch_floats((size_t)M * N);
        kernels->scale_groups(gm, g, mask->data, B, (int64_t)rows * N, false);
        g = gm;
    }
    size_t n_part = (size_t)N * Kw; /* room for either part */
    float *w_part = scratch_floats(n_part), *dw_part = scratch_floats(n_part);
    for (int i = 0, k0 = 0; i < 2; k0 += h[i]->shape[h[i]->ndim - 1], i++) {
        int K = h[i]->shape[h[i]->ndim - 1];
        copy_columns(w_part, w->data, N, Kw, k0, K);
        if (dw) vitc_memory()->zero(dw_part, sizeof(float) * (size_t)N * K);
        if (h[i]->requires_grad) product_input_grad(h[i], g, w_part, M, K, N);
        kernels->linear_backward(NULL, dw ? dw_part : NULL, i == 0 ? db : NULL, g, h[i]->data,
                                 w_part, M, K, N);
        if (dw) add_columns(dw, dw_part, N, Kw, k0, K);
    }
    scratch_done(w_part, n_part);
    scratch_done(dw_part, n_part);
    scratch_done(gm, (size_t)M * N);
    if (res->requires_grad) pass_grad(res, n->out);
}

int mlp_chunked_max_channels(void) {
    return vitc_precision() == PRECISION_BF16 ? MLP_CHUNKED_MAX_CHANNELS_BF16
                                              : MLP_CHUNKED_MAX_CHANNELS_FP32;
}

tensor *op_mlp_residual(tensor *res, tensor *ln_w, tensor *ln_b, float eps, tensor *w1, tensor *b1,
                        tensor *w2, tensor *b2, float p, rng *r) {
    int C = res->shape[res->ndim - 1], H = w1->shape[0];
    bool record = tape_grad_enabled(), keep_bf16 = record && op_keeps_bf16();
    if (C > mlp_chunked_max_channels()) {
        tensor *h = keep_bf16 ? op_layernorm_linear_bf16(res, ln_w, ln_b, eps, w1, b1)
                              : op_layernorm_linear(res, ln_w, ln_b, eps, w1, b1);
        return op_residual_linear(res, h, w2, b2, true, p, r);
    }
    CHECK(p >= 0 && p < 1, "mlp_residual: probability %g outside [0, 1)", p);
    CHECK(ln_w->numel == C && ln_b->numel == C && w1->ndim == 2 && w1->shape[1] == C &&
              (!b1 || b1->numel == H) && w2->ndim == 2 && w2->shape[0] == C && w2->shape[1] == H &&
              (!b2 || b2->numel == C),
          "mlp_residual: input %s, norm %s, fc1 %s, fc2 %s do not match", SHAPE_STR(res), SHAPE_STR(ln_w),
          SHAPE_STR(w1), SHAPE_STR(w2));
    int B = res->shape[0];
    mlp_dims d = {res->numel / C, C, H, (int)(res->numel / C / B)};
    const float *keep = NULL;
    tensor *mask = p > 0 ? draw_mask(OP_RESIDUAL_LINEAR, p, r, B, 1, &keep) : NULL;
    tensor *out = tensor_like(res), *mean = TENSOR((int)d.M), *rstd = TENSOR((int)d.M), *h = NULL;
    if (record) {
        int shape[TENSOR_MAX_DIMS];
        for (int i = 0; i < res->ndim; i++) shape[i] = res->shape[i];
        shape[res->ndim - 1] = H;
        h = keep_bf16 ? tensor_new_bf16(res->ndim, shape) : tensor_new(res->ndim, shape);
    }
    size_t n_scratch = kernels->mlp_scratch_floats(&d);
    float *scratch = scratch_floats(n_scratch);
    float *h32 = h && !h->bf16 ? h->data : NULL;
    uint16_t *h16 = h && h->bf16 ? tensor_bf16(h) : NULL;
    kernels->mlp_residual_forward(out->data, h32, h16, mean->data, rstd->data, res->data, ln_w->data,
                         ln_b->data, eps, w1->data, b1 ? b1->data : NULL, w2->data, b2 ? b2->data : NULL,
                         mask ? mask->data : NULL, &d, scratch);
    scratch_done(scratch, n_scratch);
    op_macs += 5.0 * (double)res->numel + 2.0 * (double)d.M * C * H;
    if (!record) {
        tape_profile_op(OP_LAYERNORM_LINEAR);
        return out;
    }
    /* the two nodes op_layernorm_linear and op_residual_linear record: their backwards run, over
     * the kept samples alone where drop path drops any (kept_samples) */
    const float *kept = keep && kept_samples(keep, B) < B ? keep : NULL;
    tape_node *n = tape_record(OP_LAYERNORM_LINEAR, h, 5, (tensor *[]){res, ln_w, ln_b, w1, b1});
    if (n) n->saved[0] = mean, n->saved[1] = rstd, n->ptr = kept;
    n = tape_record(OP_RESIDUAL_LINEAR, out, 4, (tensor *[]){res, h, w2, b2});
    if (n) {
        n->saved[0] = mask;
        n->iarg[0] = 1; /* gelu */
        n->ptr = kept;
    }
    return out;
}
