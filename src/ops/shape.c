/* Shape ops: reshape (free: shares data), permute/transpose, concat, slice/split. */
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/elementwise.h"
#include "../cpu/shape.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

tensor *op_reshape(tensor *x, int ndim, const int *shape) {
    CHECK(shape_numel(ndim, shape) == x->numel, "reshape: %s has %lld elements, the new shape %lld",
          SHAPE_STR(x), (long long)x->numel, (long long)shape_numel(ndim, shape));
    tensor *out = tensor_view(x, ndim, shape);
    if (tape_record(OP_RESHAPE, out, 1, (tensor *[]){x})) out->view_of = x;
    return out;
}

void op_reshape_backward(tape_node *n) {
    if (n->in[0]->requires_grad) pass_grad(n->in[0], n->out);
}

void pass_grad(tensor *x, tensor *out) {
    if (x->grad == out->grad) { /* a view's, taken from x (tensor_grad) */
        out->grad = NULL;
    } else if (!x->grad) {
        x->grad = out->grad;
        out->grad = NULL;
    } else {
        kernels->accumulate(x->grad, out->grad, x->numel);
    }
}

tensor *op_permute(tensor *x, const int *perm) {
    int shape[TENSOR_MAX_DIMS], seen = 0;
    for (int k = 0; k < x->ndim; k++) {
        CHECK(perm[k] >= 0 && perm[k] < x->ndim && !(seen & (1 << perm[k])),
              "permute: entry %d (%d) is not a permutation of the %d dims of %s", k, perm[k],
              x->ndim, SHAPE_STR(x));
        seen |= 1 << perm[k];
        shape[k] = x->shape[perm[k]];
    }
    tensor *out = tensor_new(x->ndim, shape);
    kernels->permute_forward(out->data, x->data, x->ndim, x->shape, perm);
    tape_node *n = tape_record(OP_PERMUTE, out, 1, (tensor *[]){x});
    if (n)
        for (int k = 0; k < x->ndim; k++) n->iarg[k] = perm[k];
    return out;
}

void op_permute_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (x->requires_grad) kernels->permute_backward(tensor_grad(x), n->out->grad, x->ndim, x->shape, n->iarg);
}

tensor *op_transpose(tensor *x, int d0, int d1) {
    d0 = tensor_dim(x, d0);
    d1 = tensor_dim(x, d1);
    int perm[TENSOR_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) perm[k] = k;
    perm[d0] = d1;
    perm[d1] = d0;
    return op_permute(x, perm);
}

tensor *op_concat(int n, tensor *const *xs, int dim) {
    CHECK(n >= 1 && n <= TAPE_MAX_INPUTS, "concat: %d inputs (1 to %d)", n, TAPE_MAX_INPUTS);
    int d = tensor_dim(xs[0], dim), shape[TENSOR_MAX_DIMS], total = 0;
    for (int i = 0; i < n; i++) {
        CHECK(xs[i]->ndim == xs[0]->ndim, "concat: %s and %s differ in rank", SHAPE_STR(xs[0]),
              SHAPE_STR(xs[i]));
        for (int k = 0; k < xs[0]->ndim; k++)
            CHECK(k == d || xs[i]->shape[k] == xs[0]->shape[k],
                  "concat along dim %d: %s and %s differ in dim %d", d, SHAPE_STR(xs[0]),
                  SHAPE_STR(xs[i]), k);
        total += xs[i]->shape[d];
    }
    for (int k = 0; k < xs[0]->ndim; k++) shape[k] = xs[0]->shape[k];
    shape[d] = total;
    tensor *out = tensor_new(xs[0]->ndim, shape);
    int64_t outer = tensor_span(out, 0, d), inner = tensor_span(out, d + 1, out->ndim);
    for (int i = 0, start = 0; i < n; i++) {
        kernels->block_copy(out->data, total, xs[i]->data, xs[i]->shape[d], outer, inner, start, 0,
                   xs[i]->shape[d], 0);
        start += xs[i]->shape[d];
    }
    tape_node *node = tape_record(OP_CONCAT, out, n, xs);
    if (node) node->iarg[0] = d;
    return out;
}

void op_concat_backward(tape_node *n) {
    tensor *out = n->out;
    int d = n->iarg[0];
    int64_t outer = tensor_span(out, 0, d), inner = tensor_span(out, d + 1, out->ndim);
    for (int i = 0, start = 0; i < n->n_in; i++) {
        tensor *x = n->in[i];
        if (x->requires_grad)
            kernels->block_copy(tensor_grad(x), x->shape[d], out->grad, out->shape[d], outer, inner, 0, start,
                       x->shape[d], 1);
        start += x->shape[d];
    }
}

tensor *op_slice(tensor *x, int dim, int start, int len) {
    int d = tensor_dim(x, dim);
    CHECK(start >= 0 && len > 0 && start + len <= x->shape[d],
          "slice [%d, %d) of dim %d is outside %s", start, start + len, d, SHAPE_STR(x));
    int shape[TENSOR_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) shape[k] = x->shape[k];
    shape[d] = len;
    tensor *out = tensor_new(x->ndim, shape);
    int64_t outer = tensor_span(x, 0, d), inner = tensor_span(x, d + 1, x->ndim);
    kernels->block_copy(out->data, len, x->data, x->shape[d], outer, inner, 0, start, len, 0);
    tape_node *n = tape_record(OP_SLICE, out, 1, (tensor *[]){x});
    if (n) n->iarg[0] = d, n->iarg[1] = start;
    return out;
}

void op_slice_backward(tape_node *n) {
    tensor *x = n->in[0], *out = n->out;
    if (!x->requires_grad) return;
    int d = n->iarg[0];
    int64_t outer = tensor_span(x, 0, d), inner = tensor_span(x, d + 1, x->ndim);
    kernels->block_copy(tensor_grad(x), x->shape[d], out->grad, out->shape[d], outer, inner, n->iarg[1], 0,
               out->shape[d], 1);
}

void op_split(tensor *x, int dim, int n, const int *sizes, tensor **out) {
    int d = tensor_dim(x, dim), total = 0;
    for (int i = 0; i < n; i++) total += sizes[i];
    CHECK(total == x->shape[d], "split: sizes sum to %d, dim %d of %s is %d", total, d,
          SHAPE_STR(x), x->shape[d]);
    for (int i = 0, start = 0; i < n; i++) {
        out[i] = op_slice(x, d, start, sizes[i]);
        start += sizes[i];
    }
}
