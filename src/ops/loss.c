/* Cross entropy with soft targets (mixup, label smoothing) and with hard labels; mean squared error;
 * DiT's diffusion loss.
 * Each loss is a one-element tensor on the device of its inputs. */
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/ddpm_terms.h"
#include "backend.h"
#include "backward.h"
#include "kernels.h"
#include "op_table.h"
#include "ops.h"

tensor *op_cross_entropy(tensor *logits, tensor *target) {
    CHECK(logits->ndim == 2 && tensor_same_shape(logits, target),
          "cross_entropy: logits %s and target %s must both be (B, K)", SHAPE_STR(logits),
          SHAPE_STR(target));
    int B = logits->shape[0], K = logits->shape[1];
    tensor *probs = tensor_like(logits), *out = TENSOR(1);
    float *row_loss = scratch_floats((size_t)B);
    kernels->cross_entropy_forward(out->data, row_loss, probs->data, logits->data, target->data, B, K);
    scratch_done(row_loss, (size_t)B);
    tape_node *n = tape_record(OP_CROSS_ENTROPY, out, 2, (tensor *[]){logits, target});
    if (n) n->saved[0] = probs;
    return out;
}

void op_cross_entropy_backward(tape_node *n) {
    tensor *logits = n->in[0], *target = n->in[1], *probs = n->saved[0];
    if (!logits->requires_grad) return;
    kernels->cross_entropy_backward(tensor_grad(logits), n->out->grad, probs->data, target->data,
                                    logits->shape[0], logits->shape[1]);
}

tensor *op_cross_entropy_labels(tensor *logits, const int *labels, float smoothing) {
    CHECK(logits->ndim == 2, "cross_entropy: logits %s must be (B, K)", SHAPE_STR(logits));
    int B = logits->shape[0], K = logits->shape[1];
    for (int b = 0; b < B; b++)
        CHECK(labels[b] >= 0 && labels[b] < K, "cross_entropy: label[%d] = %d outside [0, %d)", b,
              labels[b], K);
    tensor *target = TENSOR(B, K);
    float off = smoothing / K, on = 1.0f - smoothing + off;
    kernels->label_targets(target->data, backend_ints(labels, B), on, off, B, K);
    return op_cross_entropy(logits, target);
}

tensor *op_mse(tensor *pred, tensor *target) {
    CHECK(tensor_same_shape(pred, target), "mse: prediction %s and target %s differ in shape",
          SHAPE_STR(pred), SHAPE_STR(target));
    CHECK(pred->numel > 0, "mse: empty prediction %s", SHAPE_STR(pred));
    tensor *out = TENSOR(1);
    kernels->mse_forward(out->data, pred->data, target->data, pred->numel);
    tape_record(OP_MSE, out, 2, (tensor *[]){pred, target});
    return out;
}

void op_mse_backward(tape_node *n) {
    tensor *pred = n->in[0], *target = n->in[1];
    kernels->mse_backward(pred->requires_grad ? tensor_grad(pred) : NULL,
                          target->requires_grad ? tensor_grad(target) : NULL, n->out->grad, pred->data,
                          target->data, pred->numel);
}

tensor *op_ddpm_loss(tensor *out, tensor *x0, tensor *xt, tensor *eps, tensor *coefs) {
    CHECK(x0->ndim == 4 && tensor_same_shape(x0, xt) && tensor_same_shape(x0, eps),
          "ddpm_loss: x0 %s, xt %s and eps %s must be one (B, H, W, C) shape", SHAPE_STR(x0),
          SHAPE_STR(xt), SHAPE_STR(eps));
    int B = x0->shape[0], C = x0->shape[3];
    CHECK(out->ndim == 4 && out->shape[0] == B && out->shape[1] == x0->shape[1] &&
              out->shape[2] == x0->shape[2] && out->shape[3] == 2 * C,
          "ddpm_loss: out %s must be x0 %s with twice the channels (eps and variance)",
          SHAPE_STR(out), SHAPE_STR(x0));
    CHECK(coefs->numel == (int64_t)B * DDPM_COEFS, "ddpm_loss: coefs %s must hold %d per sample",
          SHAPE_STR(coefs), DDPM_COEFS);
    int64_t P = (int64_t)x0->shape[1] * x0->shape[2];
    tensor *loss = TENSOR(1);
    kernels->ddpm_loss_forward(loss->data, out->data, x0->data, xt->data, eps->data, coefs->data, B,
                               P, C);
    tape_record(OP_DDPM_LOSS, loss, 5, (tensor *[]){out, x0, xt, eps, coefs});
    return loss;
}

void op_ddpm_loss_backward(tape_node *n) {
    tensor *out = n->in[0], *x0 = n->in[1];
    if (!out->requires_grad) return;
    kernels->ddpm_loss_backward(tensor_grad(out), n->out->grad, out->data, x0->data, n->in[2]->data,
                                n->in[3]->data, n->in[4]->data, x0->shape[0],
                                (int64_t)x0->shape[1] * x0->shape[2], x0->shape[3]);
}
