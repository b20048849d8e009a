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
static tensor *draw_mask(const char *what, float p, rng *r, int64_t samples, int64_t per,
                         const float **host) {
    CHECK(r, "%s with p %g needs a random stream", what, p);
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

drop_path op_drop_path(float p, rng *r, int samples) {
    CHECK(p >= 0 && p < 1, "drop path: probability %g outside [0, 1)", p);
    drop_path d = {.samples = samples, .kept = samples};
    if (p > 0) {
        d.mask = draw_mask("drop path", p, r, samples, 1, &d.keep);
        d.kept = kept_samples(d.keep, samples);
    }
    return d;
}

const float *drop_path_kept(const drop_path *d, const tensor *x, const char *op) {
    CHECK(!d || d->samples == x->shape[0], "%s: drop path drawn for %d samples, input %s", op,
          d ? d->samples : 0, SHAPE_STR(x));
    return d && d->mask && d->kept > 0 && d->kept < d->samples ? d->keep : NULL;
}

tensor *op_dropout(tensor *x, float p, rng *r) {
    CHECK(p >= 0 && p < 1, "dropout: probability %g outside [0, 1)", p);
    if (p == 0) return x;
    tensor *mask = draw_mask("dropout", p, r, x->shape[0], x->numel / x->shape[0], NULL);
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

/* out's rows of `count` kept samples from sample *first on (the residual already there) += each
 * sample's factor times (its rows of act · wᵀ + b): act holds those samples' rows one after
 * another; a run of kept samples is one product, straight into out. *first ends past them. */
static void add_branch_onto_kept(float *out, const float *act, const float *w, const float *b,
                                 const float *keep, const float *factors, int samples, int *first,
                                 int count, int rows, int K, int N) {
    for (int s = *first, e, j = 0; next_kept_run(keep, samples, count - j, &s, &e);
         j += e - s, s = e) {
        float *to = out + (size_t)s * rows * N;
        kernels->residual_linear_forward(to, to, act + (size_t)j * rows * K, w, b, factors + s,
                                         e - s, (e - s) * rows, K, N);
        *first = e;
    }
}

static tensor *residual_linear(tensor *res, tensor *h, tensor *w, tensor *b, bool gelu,
                               window_geom g, const drop_path *d) {
    int K = h->shape[h->ndim - 1], N = res->shape[res->ndim - 1], B = res->shape[0];
    int M = (int)(res->numel / N), rows = M / B;
    const float *keep = drop_path_kept(d, res, "residual_linear");
    if (keep && h->numel / K == M) keep = NULL; /* a branch run on every sample */
    int taken = keep ? d->kept : B;             /* the samples whose rows h holds */
    CHECK(w->ndim == 2 && w->shape[0] == N && w->shape[1] == K &&
              h->numel / K == (int64_t)taken * rows && (g.H || h->shape[0] == taken),
          "residual_linear: residual %s, input %s, weight %s do not match", SHAPE_STR(res),
          SHAPE_STR(h), SHAPE_STR(w));
    CHECK(!b || b->numel == N, "residual_linear: bias %s for %d outputs", SHAPE_STR(b), N);
    CHECK(!h->bf16 || gelu, "residual_linear: a bf16 input %s is an MLP's hidden layer, for the GELU",
          SHAPE_STR(h));
    tensor *mask = d ? d->mask : NULL, *out = tensor_like(res);
    /* in map order the branch goes to scratch, then into out */
    bool put = g.H != 0;
    /* passes of a few samples: the GELU and the put branch are scratch (as many samples a pass
     * whatever the mask) */
    int64_t per_sample = (gelu ? (int64_t)rows * K : 0) + (put ? (int64_t)rows * N : 0);
    int group = per_sample ? (int)items_per_pass(B, per_sample, rows) : B;
    size_t n_act = gelu ? (size_t)group * rows * K : 0,
           n_branch = put ? (size_t)group * rows * N : 0;
    float *act_scratch = gelu ? scratch_floats(n_act) : NULL;
    float *branch = put ? scratch_floats(n_branch) : NULL;
    const float *bias = b ? b->data : NULL;
    if (put || keep) kernels->copy_floats(out->data, res->data, res->numel);
    for (int j0 = 0, s = 0; j0 < taken; j0 += group) {
        int gs = j0 + group < taken ? group : taken - j0;
        size_t r0 = (size_t)j0 * rows, n_pass = (size_t)gs * rows * K;
        const float *act = h->data + r0 * K, *factors = mask && !keep ? mask->data + j0 : NULL;
        if (h->bf16) {
            kernels->bf16_load(act_scratch, tensor_bf16(h) + r0 * K, (int64_t)n_pass);
            act = act_scratch;
        }
        if (gelu) {
            kernels->gelu_forward(act_scratch, act, (int64_t)n_pass);
            act = act_scratch;
        }
        if (!put) {
            if (keep)
                add_branch_onto_kept(out->data, act, w->data, bias, keep, mask->data, B, &s, gs,
                                     rows, K, N);
            else
                kernels->residual_linear_forward(out->data + r0 * N, res->data + r0 * N, act,
                                                 w->data, bias, factors, gs, gs * rows, K, N);
            continue;
        }
        kernels->residual_linear_forward(branch, NULL, act, w->data, bias, factors, gs, gs * rows,
                                         K, N);
        if (!keep) {
            kernels->window_copy(branch, out->data + r0 * N, gs, g.H, g.W, N, g.wh, g.ww, g.shift,
                                 false, true, 1.0f);
            continue;
        }
        for (int e, j = j0; next_kept_run(keep, B, j0 + gs - j, &s, &e); j += e - s, s = e) {
            float *run = branch + (size_t)(j - j0) * rows * N,
                  *to = out->data + (size_t)s * rows * N;
            kernels->scale_groups(run, run, mask->data + s, e - s, (int64_t)rows * N, false);
            kernels->window_copy(run, to, e - s, g.H, g.W, N, g.wh, g.ww, g.shift, false, true,
                                 1.0f);
        }
    }
    scratch_done(branch, n_branch);
    scratch_done(act_scratch, n_act);
    op_macs += (double)taken * rows * K * N;
    tape_node *n = tape_record(OP_RESIDUAL_LINEAR, out, 4, (tensor *[]){res, h, w, b});
    if (n) {
        n->saved[0] = mask;
        n->iarg[0] = gelu;
        n->iarg[1] = g.H, n->iarg[2] = g.W, n->iarg[3] = g.wh, n->iarg[4] = g.ww, n->iarg[5] = g.shift;
        n->ptr = keep;
    }
    return out;
}

tensor *op_residual_linear(tensor *res, tensor *h, tensor *w, tensor *b, bool gelu,
                           const drop_path *d) {
    return residual_linear(res, h, w, b, gelu, (window_geom){0}, d);
}

tensor *op_residual_linear_windows(tensor *res, tensor *h, tensor *w, tensor *b, int wh, int ww,
                                   int shift, const drop_path *d) {
    CHECK(res->ndim == 4 && wh >= 1 && ww >= 1 && res->shape[1] % wh == 0 && res->shape[2] % ww == 0,
          "residual_linear_windows: %dx%d windows do not tile the residual %s (B, H, W, C)", wh, ww,
          SHAPE_STR(res));
    int per_sample = (res->shape[1] / wh) * (res->shape[2] / ww), windows = h->shape[0];
    bool every = windows == res->shape[0] * per_sample;
    CHECK(h->ndim == 3 && h->shape[1] == wh * ww &&
              (every || (drop_path_kept(d, res, "residual_linear_windows") &&
                         windows == d->kept * per_sample)),
          "residual_linear_windows: input %s is not (%d windows, %d, K)", SHAPE_STR(h),
          res->shape[0] * per_sample, wh * ww);
    window_geom g = {res->shape[1], res->shape[2], wh, ww, shift};
    return residual_linear(res, h, w, b, false, g, d);
}

/* The branch's gradient is taken run by run of the samples it ran on (n->ptr: the kept samples'
 * alone, else all of them), scaled by their drop-path factors and in window order where the branch
 * is: passes of `group` such samples, whose products run together. h's gradient holds their rows
 * one sample after another, and so does h, unless it is the MLP step's hidden layer, whose forward
 * left it every sample's rows (op_mlp_residual: dropped ones not computed). */
void op_residual_linear_backward(tape_node *n) {
    tensor *res = n->in[0], *h = n->in[1], *w = n->in[2], *b = n->in[3], *mask = n->saved[0];
    bool gelu = n->iarg[0];
    window_geom geom = {n->iarg[1], n->iarg[2], n->iarg[3], n->iarg[4], n->iarg[5]};
    int K = h->shape[h->ndim - 1], N = w->shape[0], B = res->shape[0], M = (int)(res->numel / N);
    int rows = M / B;
    const float *keep = n->ptr;
    bool h_every = h->numel / K == M;
    CHECK(!keep || !h_every || (gelu && !h->grad && h->readers == 1),
          "residual_linear: only the MLP step's own hidden layer takes the kept samples' gradient");
    /* a bf16 hidden layer's gradient is bf16 too where this op is its one reader: fc1's products,
     * its only other reader, round it anyway (op_takes_bf16_grad) */
    bool grad16 = gelu && h->bf16 && h->requires_grad && h->readers == 1 && !h->grad;
    uint16_t *dh16 = grad16 ? tensor_grad_bf16(h) : NULL;
    /* without the GELU the product writes h's gradient whole (dh_beta 0 where h has none yet) */
    float dh_beta = 1.0f, *dh = NULL;
    if (h->requires_grad && !grad16) dh = gelu ? tensor_grad(h) : tensor_grad_whole(h, &dh_beta);
    float *dw = w->requires_grad ? tensor_grad(w) : NULL, *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    bool own_g = mask || geom.H; /* the branch's gradient: masked, or in window order */
    /* (passes of the same samples whether h is kept in fp32 or bf16, whatever the mask: the weight
     * and bias gradients add up their passes in the same order, in scratch of the same size) */
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
    int64_t per = (int64_t)rows * N;
    /* passes of `group` samples the branch ran on; j counts those before a run */
    for (int s = 0, j = 0; s < B;) {
        int j0 = j;
        for (int e; next_kept_run(keep, B, group - (j - j0), &s, &e); j += e - s, s = e) {
            size_t at = (size_t)(j - j0) * rows, from = (size_t)s * rows;
            size_t h_at = h_every ? from : (size_t)j * rows, run = (size_t)(e - s) * rows;
            float *g = n->out->grad + from * N;
            /* each sample's gradient scaled by its drop-path factor: a run of kept samples shares
             * it (1 / (1 - p)), put into window order with it */
            bool shared = keep != NULL;
            if (geom.H) {
                kernels->window_copy(gm + at * N, g, e - s, geom.H, geom.W, N, geom.wh, geom.ww,
                                     geom.shift, true, false, shared ? keep[s] : 1.0f);
                g = gm + at * N;
            }
            if (mask && !(geom.H && shared)) {
                kernels->scale_groups(gm + at * N, g, mask->data + s, e - s, per, false);
                g = gm + at * N;
            }
            if (!gelu) continue;
            /* the activation is recomputed, not kept */
            if (h->bf16) {
                hidden.M = (int64_t)run;
                uint16_t *dh16s = dh16     ? dh16 + (size_t)j * rows * K
                                  : pass16 ? pass16 + at * K
                                           : NULL;
                kernels->mlp_hidden_backward_bf16(dh16s, act16 + at * K, tensor_bf16(h) + h_at * K,
                                                  g, w->data, &hidden, hidden_scratch);
            } else {
                kernels->gelu_value_and_slope(act + at * K, slope + at * K, h->data + h_at * K,
                                              (int64_t)run * K);
            }
        }
        if (j == j0) break;
        int pass_rows = (j - j0) * rows;
        size_t r0 = (size_t)j0 * rows; /* (with every sample's gradient, sample j0 is s's first) */
        const float *g = own_g ? gm : n->out->grad + r0 * N;
        float *dhs = dh ? dh + r0 * K : NULL;
        if (!gelu) {
            if (dhs) kernels->gemm(false, false, pass_rows, K, N, 1.0f, g, w->data, dh_beta, dhs);
            kernels->linear_backward(NULL, dw, db, g, h->data + r0 * K, w->data, pass_rows, K, N);
            continue;
        }
        if (h->bf16) {
            kernels->linear_backward_bf16_input(NULL, dw, db, g, act16, w->data, pass_rows, K, N);
            if (widen) {
                kernels->bf16_load(widened, pass16, (int64_t)pass_rows * K);
                kernels->accumulate(dhs, widened, (int64_t)pass_rows * K);
            }
            continue;
        }
        kernels->linear_backward(NULL, dw, db, g, act, w->data, pass_rows, K, N);
        if (dhs) {
            float *dact = act; /* consumed: its buffer takes d(loss)/d(activation) */
            kernels->gemm(false, false, pass_rows, K, N, 1.0f, g, w->data, 0.0f, dact);
            kernels->scale_groups(dhs, dact, slope, (int64_t)pass_rows * K, 1, true);
        }
    }
    scratch_done(widened, widen ? most * K : 0);
    scratch_done((float *)pass16, widen ? n_act16 : 0);
    scratch_done(hidden_scratch, n_hidden);
    scratch_done((float *)act16, n_act16);
    scratch_done(gm, own_g ? most * N : 0);
    scratch_done(act, gelu32 ? most * K : 0);
    scratch_done(slope, gelu32 ? most * K : 0);
    if (res->requires_grad) pass_grad(res, n->out);
}

/* columns [k0, k0 + K) of m (N, Kw) into part (N, K), or added back from it */
static void copy_columns(float *part, const float *m, int N, int Kw, int k0, int K) {
    kernels->block_copy(part, K, m, Kw, N, 1, 0, k0, K, 0);
}

static void add_columns(float *m, const float *part, int N, int Kw, int k0, int K) {
    kernels->block_copy(m, Kw, part, K, N, 1, k0, 0, K, 1);
}

tensor *op_residual_linear_split(tensor *res, tensor *h0, tensor *h1, tensor *w, tensor *b,
                                 const drop_path *d) {
    int K0 = h0->shape[h0->ndim - 1], K1 = h1->shape[h1->ndim - 1], N = res->shape[res->ndim - 1];
    int B = res->shape[0], M = (int)(res->numel / N), rows = M / B;
    const float *keep = drop_path_kept(d, res, "residual_linear_split");
    if (keep && h0->numel / K0 == M) keep = NULL; /* a branch run on every sample */
    int taken = keep ? d->kept : B, taken_rows = taken * rows;
    CHECK(w->ndim == 2 && w->shape[0] == N && w->shape[1] == K0 + K1 &&
              h0->numel / K0 == taken_rows && h1->numel / K1 == taken_rows &&
              h0->shape[0] == taken && h1->shape[0] == taken,
          "residual_linear_split: residual %s, inputs %s and %s, weight %s do not match",
          SHAPE_STR(res), SHAPE_STR(h0), SHAPE_STR(h1), SHAPE_STR(w));
    CHECK(!b || b->numel == N, "residual_linear_split: bias %s for %d outputs", SHAPE_STR(b), N);
    tensor *mask = d ? d->mask : NULL, *out = tensor_like(res), *h[2] = {h0, h1};
    const float *factors = mask && !keep ? mask->data : NULL;
    size_t n_part = (size_t)N * (K0 > K1 ? K0 : K1);
    float *w_part = scratch_floats(n_part);
    if (keep) kernels->copy_floats(out->data, res->data, res->numel);
    for (int i = 0, k0 = 0; i < 2; k0 += h[i]->shape[h[i]->ndim - 1], i++) {
        int K = h[i]->shape[h[i]->ndim - 1], first = 0;
        const float *bias = i == 0 && b ? b->data : NULL;
        copy_columns(w_part, w->data, N, K0 + K1, k0, K);
        if (keep)
            add_branch_onto_kept(out->data, h[i]->data, w_part, bias, keep, mask->data, B, &first,
                                 taken, rows, K, N);
        else
            kernels->residual_linear_forward(out->data, i ? out->data : res->data, h[i]->data,
                                             w_part, bias, factors, taken, taken_rows, K, N);
    }
    scratch_done(w_part, n_part);
    op_macs += (double)taken_rows * (K0 + K1) * N;
    tape_node *n = tape_record(OP_RESIDUAL_LINEAR_SPLIT, out, 5, (tensor *[]){res, h0, h1, w, b});
    if (n) n->saved[0] = mask, n->ptr = keep;
    return out;
}

void op_residual_linear_split_backward(tape_node *n) {
    tensor *res = n->in[0], *h[2] = {n->in[1], n->in[2]}, *w = n->in[3], *b = n->in[4], *mask = n->saved[0];
    const float *keep = n->ptr; /* the branch ran on the kept samples alone */
    int N = w->shape[0], Kw = w->shape[1], B = res->shape[0], rows = (int)(res->numel / N) / B;
    int M = (keep ? kept_samples(keep, B) : B) * rows; /* the branch's rows */
    float *dw = w->requires_grad ? tensor_grad(w) : NULL, *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    const float *g = n->out->grad;
    float *gm = NULL;
    if (mask) { /* each sample's gradient scaled by its drop-path factor, run by run */
        gm = scratch_floats((size_t)M * N);
        for (int s = 0, j = 0, e; next_kept_run(keep, B, B, &s, &e); j += e - s, s = e)
            kernels->scale_groups(gm + (size_t)j * rows * N, g + (size_t)s * rows * N,
                                  mask->data + s, e - s, (int64_t)rows * N, false);
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
                        tensor *w2, tensor *b2, const drop_path *d, tensor *into) {
    int C = res->shape[res->ndim - 1], H = w1->shape[0];
    bool record = tape_grad_enabled(), keep_bf16 = record && op_keeps_bf16();
    if (C > mlp_chunked_max_channels()) {
        tensor *h = keep_bf16 ? op_layernorm_linear_bf16(res, ln_w, ln_b, eps, w1, b1, d)
                              : op_layernorm_linear(res, ln_w, ln_b, eps, w1, b1, d);
        return op_residual_linear(res, h, w2, b2, true, d);
    }
    CHECK(ln_w->numel == C && ln_b->numel == C && w1->ndim == 2 && w1->shape[1] == C &&
              (!b1 || b1->numel == H) && w2->ndim == 2 && w2->shape[0] == C && w2->shape[1] == H &&
              (!b2 || b2->numel == C),
          "mlp_residual: input %s, norm %s, fc1 %s, fc2 %s do not match", SHAPE_STR(res), SHAPE_STR(ln_w),
          SHAPE_STR(w1), SHAPE_STR(w2));
    int B = res->shape[0];
    mlp_dims dims = {res->numel / C, C, H, (int)(res->numel / C / B)};
    tensor *mask = d ? d->mask : NULL;
    /* the backwards' samples: the kept ones where d keeps some alone, and also where it drops all
     * (their rows of h are not computed) */
    const float *kept =
        drop_path_kept(d, res, "mlp_residual") || (mask && !d->kept) ? d->keep : NULL;
    bool in_into = !record && into && into->numel == res->numel && !into->bf16 &&
                   into->data != res->data;
    tensor *out = in_into ? tensor_view(into, res->ndim, res->shape) : tensor_like(res);
    tensor *mean = TENSOR((int)dims.M), *rstd = TENSOR((int)dims.M), *h = NULL;
    if (record) {
        int shape[TENSOR_MAX_DIMS];
        for (int i = 0; i < res->ndim; i++) shape[i] = res->shape[i];
        shape[res->ndim - 1] = H;
        h = keep_bf16 ? tensor_new_bf16(res->ndim, shape) : tensor_new(res->ndim, shape);
    }
    size_t n_scratch = kernels->mlp_scratch_floats(&dims);
    float *scratch = scratch_floats(n_scratch);
    float *h32 = h && !h->bf16 ? h->data : NULL;
    uint16_t *h16 = h && h->bf16 ? tensor_bf16(h) : NULL;
    kernels->mlp_residual_forward(out->data, h32, h16, mean->data, rstd->data, res->data,
                                  ln_w->data, ln_b->data, eps, w1->data, b1 ? b1->data : NULL,
                                  w2->data, b2 ? b2->data : NULL, mask ? mask->data : NULL, &dims,
                                  scratch);
    scratch_done(scratch, n_scratch);
    op_macs += 5.0 * (double)res->numel + 2.0 * (double)dims.M * C * H;
    if (!record) {
        tape_profile_op(OP_LAYERNORM_LINEAR);
        return out;
    }
    /* the two nodes op_layernorm_linear and op_residual_linear record: their backwards run over the
     * kept samples alone, h's gradient holding their rows */
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
