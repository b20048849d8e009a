/* Cross entropy with soft targets (mixup, label smoothing) and with hard labels. */
#include <math.h>

#include "../core/check.h"
#include "../core/tape.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"

tensor *op_cross_entropy(tensor *logits, tensor *target) {
    CHECK(logits->ndim == 2 && tensor_same_shape(logits, target),
          "cross_entropy: logits %s and target %s must both be (B, K)", SHAPE_STR(logits),
          SHAPE_STR(target));
    int B = logits->shape[0], K = logits->shape[1];
    tensor *probs = tensor_like(logits), *out = TENSOR(1);
    double total = 0;
    for (int b = 0; b < B; b++) {
        const float *z = logits->data + (size_t)b * K, *t = target->data + (size_t)b * K;
        float *p = probs->data + (size_t)b * K;
        float mx = -INFINITY;
        for (int k = 0; k < K; k++) mx = z[k] > mx ? z[k] : mx;
        double sum = 0;
        for (int k = 0; k < K; k++) sum += exp((double)z[k] - mx);
        double lse = mx + log(sum), row = 0;
        for (int k = 0; k < K; k++) {
            p[k] = (float)exp((double)z[k] - lse);
            row -= t[k] * ((double)z[k] - lse);
        }
        total += row;
    }
    out->data[0] = (float)(total / B);
    tape_node *n = tape_record(OP_CROSS_ENTROPY, out, 2, (tensor *[]){logits, target});
    if (n) n->saved[0] = probs;
    return out;
}

void op_cross_entropy_backward(tape_node *n) {
    tensor *logits = n->in[0], *target = n->in[1], *probs = n->saved[0];
    if (!logits->requires_grad) return;
    int B = logits->shape[0];
    float g = n->out->grad[0] / B, *gz = tensor_grad(logits);
    /* d/dz of -sum t log softmax(z) = softmax(z) sum(t) - t */
    for (int b = 0; b < B; b++) {
        int K = logits->shape[1];
        const float *p = probs->data + (size_t)b * K, *t = target->data + (size_t)b * K;
        float mass = 0;
        for (int k = 0; k < K; k++) mass += t[k];
        for (int k = 0; k < K; k++) gz[(size_t)b * K + k] += g * (p[k] * mass - t[k]);
    }
}

tensor *op_cross_entropy_labels(tensor *logits, const int *labels, float smoothing) {
    CHECK(logits->ndim == 2, "cross_entropy: logits %s must be (B, K)", SHAPE_STR(logits));
    int B = logits->shape[0], K = logits->shape[1];
    tensor *target = TENSOR(B, K);
    float off = smoothing / K, on = 1.0f - smoothing + off;
    for (int b = 0; b < B; b++) {
        CHECK(labels[b] >= 0 && labels[b] < K, "cross_entropy: label[%d] = %d outside [0, %d)", b,
              labels[b], K);
        for (int k = 0; k < K; k++) target->data[(size_t)b * K + k] = k == labels[b] ? on : off;
    }
    return op_cross_entropy(logits, target);
}

tensor *op_mse(tensor *pred, tensor *target) {
    CHECK(tensor_same_shape(pred, target), "mse: prediction %s and target %s differ in shape",
          SHAPE_STR(pred), SHAPE_STR(target));
    int64_t n = pred->numel;
    CHECK(n > 0, "mse: empty prediction %s", SHAPE_STR(pred));
    tensor *out = TENSOR(1);
    double sum = 0; /* in double: a batch of images is 1e5-1e7 terms */
    for (int64_t i = 0; i < n; i++) {
        double d = (double)pred->data[i] - target->data[i];
        sum += d * d;
    }
    out->data[0] = (float)(sum / (double)n);
    tape_record(OP_MSE, out, 2, (tensor *[]){pred, target});
    return out;
}

void op_mse_backward(tape_node *n) {
    tensor *pred = n->in[0], *target = n->in[1];
    int64_t N = pred->numel;
    /* d/dp mean (p - t)^2 = 2 (p - t) / N, and the negative for t */
    float g = 2.0f * n->out->grad[0] / (float)N;
    float *gp = pred->requires_grad ? tensor_grad(pred) : NULL;
    float *gt = target->requires_grad ? tensor_grad(target) : NULL;
    for (int64_t i = 0; i < N; i++) {
        float d = g * (pred->data[i] - target->data[i]);
        if (gp) gp[i] += d;
        if (gt) gt[i] -= d;
    }
}
