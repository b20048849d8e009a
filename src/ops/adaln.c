/* The DiT/SiT ops (adaln.h): shape checks, the kernels of the selected device, tape records. */
#include "adaln.h"

#include <string.h>

#include "../core/arena.h"
#include "../core/check.h"
#include "../cpu/adaln.h"
#include "backend.h"
#include "backward.h"
#include "kernels.h"
#include "op_table.h"

tensor *op_silu(tensor *x) {
    tensor *out = tensor_like(x);
    kernels->silu_forward(out->data, x->data, x->numel);
    tape_record(OP_SILU, out, 1, (tensor *[]){x});
    return out;
}

void op_silu_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (x->requires_grad) kernels->silu_backward(tensor_grad(x), n->out->grad, x->data, x->numel);
}

tensor *op_gelu_tanh(tensor *x) {
    tensor *out = tensor_like(x);
    kernels->gelu_tanh_forward(out->data, x->data, x->numel);
    tape_record(OP_GELU_TANH, out, 1, (tensor *[]){x});
    return out;
}

void op_gelu_tanh_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (x->requires_grad) kernels->gelu_tanh_backward(tensor_grad(x), n->out->grad, x->data, x->numel);
}

/* B, N (rows per sample) and C of x with a per-sample (B, C) operand */
static void per_sample_dims(const char *op, const tensor *x, const tensor *v, int *B, int *N,
                            int *C) {
    CHECK(x->ndim >= 2, "%s: x %s needs a batch and a channel dim", op, SHAPE_STR(x));
    *B = x->shape[0], *C = x->shape[x->ndim - 1];
    *N = (int)(x->numel / ((int64_t)*B * *C));
    CHECK(v->numel == (int64_t)*B * *C && v->shape[0] == *B && v->shape[v->ndim - 1] == *C,
          "%s: per-sample %s does not match x %s (expected (%d, %d))", op, SHAPE_STR(v),
          SHAPE_STR(x), *B, *C);
}

tensor *op_layernorm_modulate(tensor *x, tensor *shift, tensor *scale, float eps) {
    int B, N, C;
    per_sample_dims("layernorm_modulate", x, shift, &B, &N, &C);
    per_sample_dims("layernorm_modulate", x, scale, &B, &N, &C);
    tensor *out = tensor_like(x), *mean = TENSOR(B * N), *rstd = TENSOR(B * N);
    kernels->layernorm_modulate_forward(out->data, mean->data, rstd->data, x->data, shift->data, scale->data,
                               B, N, C, eps);
    op_macs += 5.0 * (double)x->numel;
    tape_node *n = tape_record(OP_LAYERNORM_MODULATE, out, 3, (tensor *[]){x, shift, scale});
    if (n) n->saved[0] = mean, n->saved[1] = rstd;
    return out;
}

void op_layernorm_modulate_backward(tape_node *n) {
    tensor *x = n->in[0], *shift = n->in[1], *scale = n->in[2];
    int B = x->shape[0], C = x->shape[x->ndim - 1], N = (int)(x->numel / ((int64_t)B * C));
    kernels->layernorm_modulate_backward(
        x->requires_grad ? tensor_grad(x) : NULL, shift->requires_grad ? tensor_grad(shift) : NULL,
        scale->requires_grad ? tensor_grad(scale) : NULL, n->out->grad, x->data, n->saved[0]->data,
        n->saved[1]->data, scale->data, B, N, C);
}

tensor *op_gated_residual(tensor *res, tensor *gate, tensor *h) {
    int B, N, C;
    CHECK(tensor_same_shape(res, h), "gated_residual: res %s and h %s differ", SHAPE_STR(res),
          SHAPE_STR(h));
    per_sample_dims("gated_residual", res, gate, &B, &N, &C);
    tensor *out = tensor_like(res);
    kernels->gated_residual_forward(out->data, res->data, gate->data, h->data, B, N, C);
    tape_record(OP_GATED_RESIDUAL, out, 3, (tensor *[]){res, gate, h});
    return out;
}

void op_gated_residual_backward(tape_node *n) {
    tensor *res = n->in[0], *gate = n->in[1], *h = n->in[2];
    int B = res->shape[0], C = res->shape[res->ndim - 1], N = (int)(res->numel / ((int64_t)B * C));
    kernels->gated_residual_backward(NULL, gate->requires_grad ? tensor_grad(gate) : NULL,
                            h->requires_grad ? tensor_grad(h) : NULL, n->out->grad, gate->data,
                            h->data, B, N, C);
    if (res->requires_grad) pass_grad(res, n->out); /* last: the output's gradient moves */
}

tensor *op_embedding(tensor *table, const int *idx, int B) {
    CHECK(table->ndim == 2 && B > 0, "embedding: table %s must be (K, D), %d indices",
          SHAPE_STR(table), B);
    int K = table->shape[0], D = table->shape[1];
    for (int b = 0; b < B; b++)
        CHECK(idx[b] >= 0 && idx[b] < K, "embedding: index[%d] = %d outside [0, %d)", b, idx[b], K);
    /* the indices where the kernels read them, kept for the backward (the caller's array may be
     * gone by then): a copy in this step's arena, on the device a copy of that */
    int *kept = arena_alloc(&vitc_arena, sizeof(int) * (size_t)B);
    memcpy(kept, idx, sizeof(int) * (size_t)B);
    const int *ids = backend_ints(kept, B);
    tensor *out = TENSOR(B, D);
    kernels->embedding_forward(out->data, table->data, ids, B, D);
    tape_node *n = tape_record(OP_EMBEDDING, out, 1, (tensor *[]){table});
    if (n) n->ptr = ids;
    return out;
}

void op_embedding_backward(tape_node *n) {
    tensor *table = n->in[0];
    if (table->requires_grad)
        kernels->embedding_backward(tensor_grad(table), n->out->grad, n->ptr, n->out->shape[0],
                                    table->shape[1]);
}
