/* Row-wise ops: layernorm, L2 norm, softmax with an additive bias, mean over a dim. */
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/elementwise.h"
#include "../cpu/matmul.h"
#include "../cpu/norm.h"
#include "../cpu/spatial.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

/* x's shape with `samples` leading and `last` features */
static tensor *branch_output(const tensor *x, int samples, int last, bool bf16) {
    int shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[0] = samples, shape[x->ndim - 1] = last;
    return bf16 ? tensor_new_bf16(x->ndim, shape) : tensor_new(x->ndim, shape);
}

/* Given a drop path that keeps some samples alone (drop_path_kept), these ops output the rows of
 * those, one sample after another, and keep the row statistics at the rows of x (the dropped
 * samples' left unset); their backwards take the same runs of kept samples (n->ptr). */
tensor *op_layernorm(tensor *x, tensor *w, tensor *b, float eps, const drop_path *d) {
    int C = x->shape[x->ndim - 1], B = x->shape[0];
    CHECK(w->numel == C && b->numel == C, "layernorm: weight %s / bias %s do not match %s",
          SHAPE_STR(w), SHAPE_STR(b), SHAPE_STR(x));
    const float *keep = drop_path_kept(d, x, "layernorm");
    int64_t M = x->numel / C;
    int samples = keep ? B : 1; /* (without a drop path, x's rows are one run) */
    int64_t rows = M / samples;
    tensor *out = branch_output(x, keep ? d->kept : B, C, false);
    tensor *mean = TENSOR((int)M), *rstd = TENSOR((int)M);
    for (int s = 0, j = 0, e; next_kept_run(keep, samples, samples, &s, &e); j += e - s, s = e)
        kernels->layernorm_forward(out->data + j * rows * C, mean->data + s * rows,
                                   rstd->data + s * rows, x->data + s * rows * C, w->data, b->data,
                                   (e - s) * rows, C, eps);
    op_macs += 5.0 * (double)out->numel;
    tape_node *n = tape_record(OP_LAYERNORM, out, 3, (tensor *[]){x, w, b});
    if (n) n->saved[0] = mean, n->saved[1] = rstd, n->ptr = keep;
    return out;
}

void op_layernorm_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int C = x->shape[x->ndim - 1], samples = n->ptr ? x->shape[0] : 1;
    int64_t rows = x->numel / C / samples;
    float *dx = x->requires_grad ? tensor_grad(x) : NULL;
    float *dw = w->requires_grad ? tensor_grad(w) : NULL;
    float *db = b->requires_grad ? tensor_grad(b) : NULL;
    const float *mean = n->saved[0]->data, *rstd = n->saved[1]->data;
    for (int s = 0, j = 0, e; next_kept_run(n->ptr, samples, samples, &s, &e); j += e - s, s = e)
        kernels->layernorm_backward(dx ? dx + s * rows * C : NULL, dw, db,
                                    n->out->grad + j * rows * C, x->data + s * rows * C,
                                    mean + s * rows, rstd + s * rows, w->data, (e - s) * rows, C);
}

static tensor *layernorm_linear(tensor *x, tensor *ln_w, tensor *ln_b, float eps, tensor *w,
                                tensor *b, bool out_bf16, const drop_path *d) {
    int C = x->shape[x->ndim - 1], B = x->shape[0];
    CHECK(ln_w->numel == C && ln_b->numel == C, "layernorm_linear: weight %s / bias %s do not match %s",
          SHAPE_STR(ln_w), SHAPE_STR(ln_b), SHAPE_STR(x));
    CHECK(w->ndim == 2 && w->shape[1] == C, "layernorm_linear: input %s does not match weight %s",
          SHAPE_STR(x), SHAPE_STR(w));
    CHECK(!b || b->numel == w->shape[0], "layernorm_linear: bias %s does not match weight %s",
          SHAPE_STR(b), SHAPE_STR(w));
    const float *keep = drop_path_kept(d, x, "layernorm_linear");
    int64_t M = x->numel / C;
    int N = w->shape[0], samples = keep ? B : 1; /* (without a drop path, x's rows are one run) */
    int64_t per_sample = M / samples;
    tensor *out = branch_output(x, keep ? d->kept : B, N, out_bf16);
    tensor *mean = TENSOR((int)M), *rstd = TENSOR((int)M);
    /* bf16: each pass's fp32 output in scratch, then rounded into out */
    int64_t pass = items_per_pass(M, out_bf16 ? C + N : C, 1);
    float *y = scratch_floats((size_t)(pass * C)), *part = out_bf16 ? scratch_floats((size_t)(pass * N)) : NULL;
    for (int s = 0, j = 0, e; next_kept_run(keep, samples, samples, &s, &e); j += e - s, s = e) {
        int64_t from = s * per_sample, to = j * per_sample, end = e * per_sample;
        for (int64_t r0 = from; r0 < end; r0 += pass) {
            int64_t rows = r0 + pass < end ? pass : end - r0, at = to + r0 - from;
            kernels->layernorm_forward(y, mean->data + r0, rstd->data + r0, x->data + r0 * C,
                                       ln_w->data, ln_b->data, rows, C, eps);
            kernels->linear_forward(part ? part : out->data + at * N, y, w->data,
                                    b ? b->data : NULL, (int)rows, C, N);
            if (part) kernels->bf16_store(tensor_bf16(out) + at * N, part, rows * N);
        }
    }
    scratch_done(part, (size_t)(pass * N));
    scratch_done(y, (size_t)(pass * C));
    int64_t out_rows = out->numel / N;
    op_macs += 5.0 * (double)out_rows * C + (double)out_rows * C * N;
    tape_node *n = tape_record(OP_LAYERNORM_LINEAR, out, 5, (tensor *[]){x, ln_w, ln_b, w, b});
    if (n) n->saved[0] = mean, n->saved[1] = rstd, n->ptr = keep;
    return out;
}

tensor *op_layernorm_linear(tensor *x, tensor *ln_w, tensor *ln_b, float eps, tensor *w, tensor *b,
                            const drop_path *d) {
    return layernorm_linear(x, ln_w, ln_b, eps, w, b, false, d);
}

tensor *op_layernorm_linear_bf16(tensor *x, tensor *ln_w, tensor *ln_b, float eps, tensor *w,
                                 tensor *b, const drop_path *d) {
    return layernorm_linear(x, ln_w, ln_b, eps, w, b, tape_grad_enabled(), d);
}

/* In passes of whole samples: of the kept ones alone where the op ran on them (n->ptr; or where
 * the MLP step did, whose output's gradient alone holds them so: op_mlp_residual), one sample after
 * another in the output's gradient, each run of them meeting its own rows of x; without a drop
 * path, in passes of rows (each row a sample). */
void op_layernorm_linear_backward(tape_node *n) {
    tensor *x = n->in[0], *ln_w = n->in[1], *ln_b = n->in[2], *w = n->in[3], *b = n->in[4];
    const float *keep = n->ptr, *mean = n->saved[0]->data, *rstd = n->saved[1]->data;
    int C = x->shape[x->ndim - 1], N = w->shape[0];
    int samples = keep ? x->shape[0] : (int)(x->numel / C), rows = (int)(x->numel / C / samples);
    /* (as many samples a pass whatever the mask: the same scratch) */
    int group = (int)items_per_pass(samples, 2 * (int64_t)rows * C, rows); /* y and dy */
    float *dx = x->requires_grad ? tensor_grad(x) : NULL;
    float *dln_w = ln_w->requires_grad ? tensor_grad(ln_w) : NULL;
    float *dln_b = ln_b->requires_grad ? tensor_grad(ln_b) : NULL;
    float *dw = w->requires_grad ? tensor_grad(w) : NULL;
    float *db = b && b->requires_grad ? tensor_grad(b) : NULL;
    size_t most = (size_t)group * rows;
    float *y = scratch_floats(most * C), *dy = scratch_floats(most * C);
    /* (an MLP's hidden layer: its gradient kept in bf16, op_takes_bf16_grad) */
    bool g16 = n->out->grad_bf16;
    for (int s = 0, j = 0; s < samples;) {
        int j0 = j, s0 = s;
        for (int e; next_kept_run(keep, samples, group - (j - j0), &s, &e); j += e - s, s = e) {
            size_t at = (size_t)(j - j0) * rows * C, from = (size_t)s * rows;
            kernels->layernorm_apply(y + at, x->data + from * C, mean + from, rstd + from,
                                     ln_w->data, ln_b->data, (int64_t)(e - s) * rows, C);
        }
        if (j == j0) break;
        int pass_rows = (j - j0) * rows;
        size_t g_at = (size_t)j0 * rows * N;
        if (g16) {
            kernels->linear_backward_bf16_grad(dy, dw, db, (const uint16_t *)n->out->grad + g_at, y,
                                               w->data, pass_rows, C, N);
        } else {
            const float *g = n->out->grad + g_at;
            kernels->gemm(false, false, pass_rows, C, N, 1.0f, g, w->data, 0.0f, dy);
            kernels->linear_backward(NULL, dw, db, g, y, w->data, pass_rows, C, N);
        }
        for (int e, k = j0; next_kept_run(keep, samples, j - k, &s0, &e); k += e - s0, s0 = e) {
            size_t at = (size_t)(k - j0) * rows * C, from = (size_t)s0 * rows;
            kernels->layernorm_backward(dx ? dx + from * C : NULL, dln_w, dln_b, dy + at,
                                        x->data + from * C, mean + from, rstd + from, ln_w->data,
                                        (int64_t)(e - s0) * rows, C);
        }
    }
    scratch_done(dy, most * C);
    scratch_done(y, most * C);
}

void op_layernorm_window_sets(tensor *x, tensor *w, tensor *b, float eps, int n, const int *wh,
                              const int *ww, int shift, const drop_path *d, tensor **out) {
    CHECK(x->ndim == 4 && n >= 1 && n <= LAYERNORM_WINDOW_SETS_MAX,
          "layernorm_windows: %d sets of windows of %s (B, H, W, C; 1 to %d sets)", n,
          SHAPE_STR(x), LAYERNORM_WINDOW_SETS_MAX);
    int B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    for (int i = 0; i < n; i++)
        CHECK(wh[i] >= 1 && ww[i] >= 1 && H % wh[i] == 0 && W % ww[i] == 0,
              "layernorm_windows: %dx%d windows do not tile %s (B, H, W, C)", wh[i], ww[i],
              SHAPE_STR(x));
    CHECK(w->numel == C && b->numel == C, "layernorm_windows: weight %s / bias %s do not match %s",
          SHAPE_STR(w), SHAPE_STR(b), SHAPE_STR(x));
    const float *keep = drop_path_kept(d, x, "layernorm_windows");
    int taken = keep ? d->kept : B;
    int64_t M = x->numel / C, per_sample = (int64_t)H * W;
    /* under bf16 the windows are bf16: only the products of the linear layers after this op read
     * them (op_reads_bf16), the backward reading x */
    bool out_bf16 = op_keeps_bf16();
    tensor *mean = TENSOR((int)M), *rstd = TENSOR((int)M);
    for (int i = 0; i < n; i++) {
        int shape[3] = {taken * (H / wh[i]) * (W / ww[i]), wh[i] * ww[i], C};
        out[i] = out_bf16 ? tensor_new_bf16(3, shape) : tensor_new(3, shape);
        /* (each set normalises the rows again, writing the same statistics) */
        for (int s = 0, j = 0, e; next_kept_run(keep, B, B, &s, &e); j += e - s, s = e) {
            int64_t to = j * per_sample * C, from = s * per_sample;
            kernels->layernorm_windows_forward(
                out_bf16 ? NULL : out[i]->data + to, out_bf16 ? tensor_bf16(out[i]) + to : NULL,
                mean->data + from, rstd->data + from, x->data + from * C, w->data, b->data, e - s,
                H, W, C, wh[i], ww[i], shift, eps);
        }
        op_macs += 5.0 * (double)out[i]->numel;
    }
    tape_node *node = tape_record_outputs(OP_LAYERNORM_WINDOWS, n, out, 3, (tensor *[]){x, w, b});
    if (node) {
        node->saved[0] = mean, node->saved[1] = rstd;
        node->iarg[0] = shift;
        for (int i = 0; i < n; i++) node->iarg[1 + 2 * i] = wh[i], node->iarg[2 + 2 * i] = ww[i];
        node->ptr = keep;
    }
}

tensor *op_layernorm_windows(tensor *x, tensor *w, tensor *b, float eps, int wh, int ww, int shift,
                             const drop_path *d) {
    tensor *out;
    op_layernorm_window_sets(x, w, b, eps, 1, &wh, &ww, shift, d, &out);
    return out;
}

/* The sets' gradients, in map order and added up, go through one layernorm backward. */
void op_layernorm_windows_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3], shift = n->iarg[0];
    float *dx = x->requires_grad ? tensor_grad(x) : NULL, *dw = w->requires_grad ? tensor_grad(w) : NULL;
    float *db = b->requires_grad ? tensor_grad(b) : NULL;
    int64_t per_sample = (int64_t)H * W, n_grad = n->out->numel;
    const float *mean = n->saved[0]->data, *rstd = n->saved[1]->data;
    tensor *sets[LAYERNORM_WINDOW_SETS_MAX];
    int n_sets = 0, with_grad = 0;
    for (tensor *o; (o = tape_node_output(n, n_sets)); n_sets++) {
        sets[n_sets] = o;
        with_grad += o->grad != NULL;
    }
    if (!with_grad) return;
    int wh0 = n->iarg[1], ww0 = n->iarg[2];
    float *g = n->out->grad, *map_order = NULL;
    bool whole_map = wh0 == H && ww0 == W && shift % H == 0 && shift % W == 0;
    if (!(n_sets == 1 && whole_map)) {
        g = map_order = scratch_floats((size_t)n_grad);
        int taken = (int)(n_grad / per_sample / C);
        bool first = true;
        for (int i = 0; i < n_sets; i++) {
            if (!sets[i]->grad) continue;
            kernels->window_copy(sets[i]->grad, g, taken, H, W, C, n->iarg[1 + 2 * i],
                                 n->iarg[2 + 2 * i], shift, false, !first, 1.0f);
            first = false;
        }
    }
    for (int s = 0, j = 0, e; next_kept_run(n->ptr, B, B, &s, &e); j += e - s, s = e) {
        int64_t from = s * per_sample;
        kernels->layernorm_backward(dx ? dx + from * C : NULL, dw, db, g + j * per_sample * C,
                                    x->data + from * C, mean + from, rstd + from, w->data,
                                    (e - s) * per_sample, C);
    }
    scratch_done(map_order, (size_t)n_grad);
}

tensor *op_l2norm(tensor *x) {
    int C = x->shape[x->ndim - 1], shape[TENSOR_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) shape[k] = x->shape[k];
    shape[x->ndim - 1] = 1;
    tensor *out = tensor_new(x->ndim, shape);
    kernels->l2norm_forward(out->data, x->data, x->numel / C, C);
    tape_record(OP_L2NORM, out, 1, (tensor *[]){x});
    return out;
}

void op_l2norm_backward(tape_node *n) {
    tensor *x = n->in[0];
    int C = x->shape[x->ndim - 1];
    if (x->requires_grad)
        kernels->l2norm_backward(tensor_grad(x), n->out->grad, x->data, n->out->data, x->numel / C, C);
}

tensor *op_softmax(tensor *x, tensor *bias) {
    int N = x->shape[x->ndim - 1];
    if (bias) {
        bool suffix = bias->ndim <= x->ndim;
        for (int k = 0; suffix && k < bias->ndim; k++)
            suffix = bias->shape[bias->ndim - 1 - k] == x->shape[x->ndim - 1 - k];
        CHECK(suffix, "softmax: bias %s must equal the trailing dims of %s", SHAPE_STR(bias),
              SHAPE_STR(x));
    }
    tensor *out = tensor_like(x);
    kernels->softmax_forward(out->data, x->data, bias ? bias->data : NULL, x->numel / N, N,
                    bias ? bias->numel : 0);
    tape_record(OP_SOFTMAX, out, 2, (tensor *[]){x, bias});
    return out;
}

void op_softmax_backward(tape_node *n) {
    tensor *x = n->in[0], *bias = n->in[1], *out = n->out;
    int N = x->shape[x->ndim - 1];
    int64_t M = x->numel / N;
    float *gx = x->requires_grad ? tensor_grad(x) : NULL;
    float *gbias = bias && bias->requires_grad ? tensor_grad(bias) : NULL;
    float *dlogits = scratch_floats((size_t)x->numel);
    kernels->softmax_backward(dlogits, out->grad, out->data, M, N);
    if (gx) kernels->accumulate(gx, dlogits, x->numel);
    if (gbias) {
        int in5[5] = {1, 1, 1, 1, (int)bias->numel};
        int out5[5] = {1, 1, 1, (int)(x->numel / bias->numel), (int)bias->numel};
        kernels->broadcast_reduce(gbias, dlogits, in5, out5);
    }
    scratch_done(dlogits, (size_t)x->numel);
}

tensor *op_mean(tensor *x, int dim, bool keepdim) {
    int d = tensor_dim(x, dim), shape[TENSOR_MAX_DIMS], nd = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (k != d) shape[nd++] = x->shape[k];
        else if (keepdim) shape[nd++] = 1;
    }
    if (nd == 0) shape[nd++] = 1;
    tensor *out = tensor_new(nd, shape);
    kernels->mean_forward(out->data, x->data, tensor_span(x, 0, d), x->shape[d], tensor_span(x, d + 1, x->ndim));
    tape_node *n = tape_record(OP_MEAN, out, 1, (tensor *[]){x});
    if (n) n->iarg[0] = d;
    return out;
}

void op_mean_backward(tape_node *n) {
    tensor *x = n->in[0];
    int d = n->iarg[0];
    if (x->requires_grad)
        kernels->mean_backward(tensor_grad(x), n->out->grad, tensor_span(x, 0, d), x->shape[d],
                      tensor_span(x, d + 1, x->ndim));
}
