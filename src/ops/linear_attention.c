/* Linear attention ops. FLatten's core as two: the focusing function of the kernel features, and
 * linear attention with the mean normaliser; ELFATT's global heads as one. Each keeps what its
 * backward needs and nothing between (the unfused chains kept slices and split copies of q, k, v,
 * every softmax and the unnormalised outputs). */
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/linear_attention.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

tensor *op_focus(tensor *x, tensor *temperature, float p) {
    int C = x->shape[x->ndim - 1];
    CHECK(temperature->numel == C, "focus: temperature %s for %d channels", SHAPE_STR(temperature), C);
    CHECK(p > 0, "focus: power %g must be positive", p);
    tensor *out = tensor_like(x);
    kernels->focus_forward(out->data, x->data, temperature->data, p, x->numel / C, C);
    tape_node *n = tape_record(OP_FOCUS, out, 2, (tensor *[]){x, temperature});
    if (n) n->farg[0] = p;
    return out;
}

void op_focus_backward(tape_node *n) {
    tensor *x = n->in[0], *t = n->in[1];
    int C = x->shape[x->ndim - 1];
    float *dx = x->requires_grad ? tensor_grad(x) : NULL, *dt = t->requires_grad ? tensor_grad(t) : NULL;
    size_t n_partial = kernels->focus_scratch_floats(x->numel / C, C);
    float *partial = scratch_floats(n_partial);
    kernels->focus_backward(dx, dt, n->out->grad, x->data, t->data, n->farg[0], x->numel / C, C, partial);
    scratch_done(partial, n_partial);
}

tensor *op_linear_attention(tensor *q, tensor *k, tensor *v, int heads) {
    CHECK(q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && k->shape[0] == q->shape[0] &&
              v->shape[0] == q->shape[0] && v->shape[1] == k->shape[1] &&
              k->shape[2] == q->shape[2] && v->shape[2] == q->shape[2],
          "linear_attention: q %s, k %s, v %s are not (b, n, C), (b, m, C), (b, m, C)",
          SHAPE_STR(q), SHAPE_STR(k), SHAPE_STR(v));
    CHECK(heads > 0 && q->shape[2] % heads == 0,
          "linear_attention: %d channels do not split into %d heads", q->shape[2], heads);
    lin_attn_dims a = {q->shape[0], q->shape[1], k->shape[1], heads, q->shape[2] / heads};
    tensor *out = tensor_like(q), *kv = TENSOR(a.seqs, heads, a.d, a.d);
    tensor *kmean = TENSOR(a.seqs, heads, a.d), *z = TENSOR(a.seqs, heads, a.n);
    kernels->linear_attention_forward(out->data, kv->data, kmean->data, z->data, q->data, k->data, v->data, &a);
    /* as the matmuls of the unfused form: kᵀv, q·kv and q·mean(k) */
    op_macs += (double)a.seqs * heads * ((double)a.d * a.d * (a.m + a.n) + (double)a.n * a.d);
    tape_node *n = tape_record(OP_LINEAR_ATTENTION, out, 3, (tensor *[]){q, k, v});
    if (n) {
        n->saved[0] = kv, n->saved[1] = kmean, n->saved[2] = z;
        n->iarg[0] = heads;
    }
    return out;
}

void op_linear_attention_backward(tape_node *n) {
    tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    lin_attn_dims a = {q->shape[0], q->shape[1], k->shape[1], n->iarg[0], q->shape[2] / n->iarg[0]};
    float *dq = q->requires_grad ? tensor_grad(q) : NULL, *dk = k->requires_grad ? tensor_grad(k) : NULL;
    float *dv = v->requires_grad ? tensor_grad(v) : NULL;
    size_t n_scratch = kernels->linear_attention_scratch_floats(&a);
    float *scratch = scratch_floats(n_scratch);
    kernels->linear_attention_backward(dq, dk, dv, n->out->grad, q->data, k->data, v->data, n->saved[0]->data,
                              n->saved[1]->data, n->saved[2]->data, &a, scratch);
    scratch_done(scratch, n_scratch);
}

static softmax_lin_dims softmax_lin_dims_of(const tensor *q, const tensor *k, int heads, int c0, int channels) {
    return (softmax_lin_dims){q->shape[0], q->shape[1], k->shape[1], heads, channels / heads, q->shape[2], c0};
}

tensor *op_softmax_linear_attention(tensor *q, tensor *k, tensor *v, int heads, int c0, int channels) {
    CHECK(q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && k->shape[0] == q->shape[0] &&
              v->shape[0] == q->shape[0] && v->shape[1] == k->shape[1] &&
              k->shape[2] == q->shape[2] && v->shape[2] == q->shape[2],
          "softmax_linear_attention: q %s, k %s, v %s are not (b, n, C), (b, m, C), (b, m, C)",
          SHAPE_STR(q), SHAPE_STR(k), SHAPE_STR(v));
    CHECK(heads > 0 && channels > 0 && channels % heads == 0 && c0 >= 0 && c0 + channels <= q->shape[2],
          "softmax_linear_attention: channels %d..%d of %s in %d heads", c0, c0 + channels,
          SHAPE_STR(q), heads);
    softmax_lin_dims a = softmax_lin_dims_of(q, k, heads, c0, channels);
    tensor *out = TENSOR(a.seqs, a.n, channels), *ctx = TENSOR(a.seqs, heads, a.d, a.d);
    size_t n_scratch = kernels->softmax_linear_attention_scratch_floats(&a);
    float *scratch = scratch_floats(n_scratch);
    kernels->softmax_linear_attention_forward(out->data, ctx->data, q->data, k->data, v->data, &a, scratch);
    scratch_done(scratch, n_scratch);
    /* as the matmuls of the unfused form: softmax(k)ᵀv and softmax(q)·ctx */
    op_macs += (double)a.seqs * heads * a.d * a.d * ((double)a.m + a.n);
    tape_node *n = tape_record(OP_SOFTMAX_LINEAR_ATTENTION, out, 3, (tensor *[]){q, k, v});
    if (n) {
        n->saved[0] = ctx;
        n->iarg[0] = heads, n->iarg[1] = c0, n->iarg[2] = channels;
    }
    return out;
}

void op_softmax_linear_attention_backward(tape_node *n) {
    tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    softmax_lin_dims a = softmax_lin_dims_of(q, k, n->iarg[0], n->iarg[1], n->iarg[2]);
    float *dq = q->requires_grad ? tensor_grad(q) : NULL, *dk = k->requires_grad ? tensor_grad(k) : NULL;
    float *dv = v->requires_grad ? tensor_grad(v) : NULL;
    size_t n_scratch = kernels->softmax_linear_attention_scratch_floats(&a);
    float *scratch = scratch_floats(n_scratch);
    kernels->softmax_linear_attention_backward(dq, dk, dv, n->out->grad, q->data, k->data, v->data,
                                      n->saved[0]->data, &a, scratch);
    scratch_done(scratch, n_scratch);
}
