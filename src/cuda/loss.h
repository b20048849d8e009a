/* CUDA version of the cross entropy with soft targets of src/ops/loss.c (op_cross_entropy and its
 * backward, which have no separate CPU kernel) on device pointers, with the same arithmetic. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* logits, target (B, K): probs (B, K) = softmax(logits) (saved for the backward), row_loss (B) =
 * -sum_k t log softmax(z) per sample, loss (1) = their mean. Rows in double, as the CPU. */
void cuda_cross_entropy_forward(float *loss, float *row_loss, float *probs, const float *logits,
                                const float *target, int B, int K);
/* dlogits (B, K) += dloss[0] / B * (probs * sum(t) - t); dloss is the loss gradient on the device
 * (reading it there needs no host synchronisation) */
void cuda_cross_entropy_backward(float *dlogits, const float *dloss, const float *probs,
                                 const float *target, int B, int K);

#ifdef __cplusplus
}
#endif
