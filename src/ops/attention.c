/* Fused softmax attention: the native attention of every backbone and both softmaxes of Agent
 * attention. Heads stay merged in the token layout and the backward keeps only each row's
 * log-sum-exp (it recomputes the probabilities), where the unfused chain kept split copies of q, k,
 * v, the logits, the probabilities and the merged output. */
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/attention.h"
#include "backend.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

static attn_dims dims_of(const tensor *q, const tensor *k, int heads, float scale,
                         const tensor *bias, const float *mask, int windows) {
    return (attn_dims){.seqs = q->shape[0], .n = q->shape[1], .m = k->shape[1], .heads = heads,
                       .d = q->shape[2] / heads, .scale = scale, .bias = bias ? bias->data : NULL,
                       .mask = mask, .windows = windows};
}

/* t's values as floats: its data, or under bf16 (q, k, v kept as bf16) widened into scratch, which
 * done_floats gives back */
static const float *floats_of(const tensor *t) {
    if (!t->bf16) return t->data;
    float *wide = scratch_floats((size_t)t->numel);
    kernels->bf16_load(wide, tensor_bf16(t), t->numel);
    return wide;
}
static void done_floats(const tensor *t, const float *p) {
    if (t->bf16) scratch_done((float *)p, (size_t)t->numel);
}

tensor *op_attention(tensor *q, tensor *k, tensor *v, int heads, float scale, tensor *bias,
                     const float *mask, int windows) {
    CHECK(q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && k->shape[0] == q->shape[0] &&
              v->shape[0] == q->shape[0] && v->shape[1] == k->shape[1] &&
              k->shape[2] == q->shape[2] && v->shape[2] == q->shape[2],
          "attention: q %s, k %s, v %s are not (b, n, C), (b, m, C), (b, m, C)", SHAPE_STR(q),
          SHAPE_STR(k), SHAPE_STR(v));
    CHECK(heads > 0 && q->shape[2] % heads == 0, "attention: %d channels do not split into %d heads",
          q->shape[2], heads);
    int b = q->shape[0], n = q->shape[1], m = k->shape[1];
    CHECK(!bias || bias->numel == (int64_t)heads * n * m,
          "attention: bias %s is not (heads %d, %d, %d)", SHAPE_STR(bias), heads, n, m);
    CHECK(!mask || (windows > 0 && b % windows == 0),
          "attention: %d sequences are not a whole number of %d-window images", b, windows);
    /* the kernels read the mask where they run: a device's cached copy of the host table */
    const float *mask_data = mask ? backend_constant(mask, sizeof(float) * (size_t)windows * n * m) : NULL;
    attn_dims a = dims_of(q, k, heads, scale, bias, mask_data, mask ? windows : 1);
    bool record = tape_grad_enabled() && (q->requires_grad || k->requires_grad ||
                                          v->requires_grad || (bias && bias->requires_grad));
    tensor *out = tensor_like(q);
    tensor *lse = record ? TENSOR(b, heads, n) : NULL;
    const float *qd = floats_of(q), *kd = floats_of(k), *vd = floats_of(v);
    size_t n_scratch = kernels->attention_scratch_floats(&a, false, false);
    float *scratch = scratch_floats(n_scratch);
    kernels->attention_forward(out->data, lse ? lse->data : NULL, qd, kd, vd, &a, scratch);
    scratch_done(scratch, n_scratch);
    done_floats(v, vd), done_floats(k, kd), done_floats(q, qd);
    op_macs += 2.0 * b * heads * n * m * a.d;
    tape_node *node = tape_record(OP_ATTENTION, out, 4, (tensor *[]){q, k, v, bias});
    if (node) {
        node->saved[0] = lse;
        node->iarg[0] = heads, node->iarg[1] = a.windows;
        node->farg[0] = scale;
        node->ptr = mask_data;
    }
    return out;
}

/* a gradient attention writes whole in bf16: under --precision bf16, for an input nothing else
 * reads (no other op adds to its gradient) made by an op that reads its gradient as a rounded
 * operand anyway (op_takes_bf16_grad: q, k and v of op_linear_chunks) */
static bool grad_in_bf16(const tensor *t, bool tiles16) {
    return tiles16 && t->requires_grad && !t->grad && t->readers == 1 && t->made_by &&
           op_takes_bf16_grad(t->made_by - 1);
}

void op_attention_backward(tape_node *node) {
    tensor *q = node->in[0], *k = node->in[1], *v = node->in[2], *bias = node->in[3];
    attn_dims a = dims_of(q, k, node->iarg[0], node->farg[0], bias, node->ptr, node->iarg[1]);
    bool tiles16 = op_keeps_bf16() && kernels->attention_grads_in_bf16(&a);
    attn_grads g = {0};
    tensor *qkv[3] = {q, k, v};
    float **g32[3] = {&g.dq, &g.dk, &g.dv};
    bool *whole[3] = {&g.dq_whole, &g.dk_whole, &g.dv_whole};
    uint16_t **g16[3] = {&g.dq16, &g.dk16, &g.dv16};
    for (int i = 0; i < 3; i++) {
        /* an input that is two of q, k and v gets both gradients added: the kernels' order of
         * writing them is theirs */
        bool once = qkv[i] != qkv[(i + 1) % 3] && qkv[i] != qkv[(i + 2) % 3];
        float beta = 1.0f;
        if (grad_in_bf16(qkv[i], tiles16)) *g16[i] = tensor_grad_bf16(qkv[i]);
        else if (qkv[i]->requires_grad && once) *g32[i] = tensor_grad_whole(qkv[i], &beta);
        else if (qkv[i]->requires_grad) *g32[i] = tensor_grad(qkv[i]);
        *whole[i] = beta == 0.0f;
    }
    float *dbias = bias && bias->requires_grad ? tensor_grad(bias) : NULL;
    const float *qd = floats_of(q), *kd = floats_of(k), *vd = floats_of(v);
    size_t n_scratch = kernels->attention_scratch_floats(&a, true, dbias);
    float *scratch = scratch_floats(n_scratch);
    kernels->attention_backward(&g, dbias, node->out->grad, node->saved[0]->data, qd, kd, vd, &a,
                                scratch);
    scratch_done(scratch, n_scratch);
    done_floats(v, vd), done_floats(k, kd), done_floats(q, qd);
}
