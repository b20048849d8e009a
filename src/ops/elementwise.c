/* Elementwise ops: broadcasting add/mul/div, expand, scalar scale/shift, activations. */
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/elementwise.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

static tensor *binary(int id, binary_op op, tensor *a, tensor *b) {
    broadcast bc;
    CHECK(broadcast_plan(&bc, a->ndim, a->shape, b->ndim, b->shape),
          "%s: shapes %s and %s do not broadcast", op_table[id].name, SHAPE_STR(a), SHAPE_STR(b));
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    tensor *out = tensor_new(nd, bc.out + 5 - nd);
    kernels->binary_forward(op, out->data, a->data, b->data, &bc);
    tape_record(id, out, 2, (tensor *[]){a, b});
    return out;
}

static void binary_grad(tape_node *n, binary_op op) {
    tensor *a = n->in[0], *b = n->in[1];
    broadcast bc;
    broadcast_plan(&bc, a->ndim, a->shape, b->ndim, b->shape);
    kernels->binary_backward(op, a->requires_grad ? tensor_grad(a) : NULL, b->requires_grad ? tensor_grad(b) : NULL,
                    n->out->grad, a->data, b->data, n->out->data, &bc);
}

tensor *op_add(tensor *a, tensor *b) { return binary(OP_ADD, BIN_ADD, a, b); }
tensor *op_mul(tensor *a, tensor *b) { return binary(OP_MUL, BIN_MUL, a, b); }
tensor *op_div(tensor *a, tensor *b) { return binary(OP_DIV, BIN_DIV, a, b); }
void op_add_backward(tape_node *n) { binary_grad(n, BIN_ADD); }
void op_mul_backward(tape_node *n) { binary_grad(n, BIN_MUL); }
void op_div_backward(tape_node *n) { binary_grad(n, BIN_DIV); }

tensor *op_expand(tensor *x, int ndim, const int *shape) {
    broadcast bc;
    CHECK(ndim >= x->ndim && broadcast_plan(&bc, x->ndim, x->shape, ndim, shape),
          "expand: %s cannot broadcast to %d dims", SHAPE_STR(x), ndim);
    for (int i = 0; i < ndim; i++)
        CHECK(bc.out[5 - ndim + i] == shape[i], "expand: %s cannot broadcast to dim %d of size %d",
              SHAPE_STR(x), i, shape[i]);
    tensor *out = tensor_new(ndim, shape);
    int x5[5];
    for (int d = 0; d < 5; d++) x5[d] = d < 5 - x->ndim ? 1 : x->shape[d - (5 - x->ndim)];
    kernels->expand_forward(out->data, x->data, x5, bc.out);
    tape_record(OP_EXPAND, out, 1, (tensor *[]){x});
    return out;
}

void op_expand_backward(tape_node *n) {
    tensor *x = n->in[0], *out = n->out;
    if (!x->requires_grad) return;
    int x5[5], o5[5];
    for (int d = 0; d < 5; d++) {
        x5[d] = d < 5 - x->ndim ? 1 : x->shape[d - (5 - x->ndim)];
        o5[d] = d < 5 - out->ndim ? 1 : out->shape[d - (5 - out->ndim)];
    }
    kernels->broadcast_reduce(tensor_grad(x), out->grad, x5, o5);
}

tensor *op_scale(tensor *x, float s) {
    tensor *out = tensor_like(x);
    kernels->scale_forward(out->data, x->data, s, x->numel);
    tape_node *n = tape_record(OP_SCALE, out, 1, (tensor *[]){x});
    if (n) n->farg[0] = s;
    return out;
}

void op_scale_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (x->requires_grad) kernels->scale_backward(tensor_grad(x), n->out->grad, n->farg[0], x->numel);
}

tensor *op_add_scalar(tensor *x, float s) {
    tensor *out = tensor_like(x);
    kernels->add_scalar_forward(out->data, x->data, s, x->numel);
    tape_record(OP_ADD_SCALAR, out, 1, (tensor *[]){x});
    return out;
}

void op_add_scalar_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (x->requires_grad) pass_grad(x, n->out);
}

/* unary activations share one shape: forward kernel, then backward from the saved input */
#define UNARY_OP(name, ID)                                                                         \
    tensor *op_##name(tensor *x) {                                                                 \
        tensor *out = tensor_like(x);                                                              \
        kernels->name##_forward(out->data, x->data, x->numel);                                     \
        tape_record(ID, out, 1, (tensor *[]){x});                                                  \
        return out;                                                                                \
    }                                                                                              \
    void op_##name##_backward(tape_node *n) {                                                      \
        tensor *x = n->in[0];                                                                      \
        if (x->requires_grad)                                                                      \
            kernels->name##_backward(tensor_grad(x), n->out->grad, x->data, x->numel);             \
    }

UNARY_OP(gelu, OP_GELU)
UNARY_OP(relu, OP_RELU)
UNARY_OP(softplus, OP_SOFTPLUS)

tensor *op_pow(tensor *x, float p) {
    tensor *out = tensor_like(x);
    kernels->pow_forward(out->data, x->data, p, x->numel);
    tape_node *n = tape_record(OP_POW, out, 1, (tensor *[]){x});
    if (n) n->farg[0] = p;
    return out;
}

void op_pow_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (x->requires_grad) kernels->pow_backward(tensor_grad(x), n->out->grad, x->data, n->farg[0], x->numel);
}
