/* CUDA versions of the loss kernels of src/cpu/loss.h on device pointers, with the same arithmetic:
 * cross entropy with soft targets, the targets of hard labels, mean squared error, DiT's loss. Each loss is
 * reduced in a fixed order (deterministic, no atomics); backward kernels accumulate (+=). */
#pragma once
#include <stdint.h>

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
/* target (B, K) = on where k == labels[b] (labels: B ints on the device), off elsewhere */
void cuda_label_targets(float *target, const int *labels, float on, float off, int B, int K);

/* loss (1) = mean over n of (pred - target)^2, summed in double */
void cuda_mse_forward(float *loss, const float *pred, const float *target, int64_t n);
/* dpred += 2 dloss[0] / n (pred - target), dtarget -= the same; either may be NULL */
void cuda_mse_backward(float *dpred, float *dtarget, const float *dloss, const float *pred,
                       const float *target, int64_t n);

/* DiT's loss of src/cpu/loss.h: the same per-element terms (src/cpu/ddpm_terms.h), one block's
 * fixed-order sum in double */
void cuda_ddpm_loss_forward(float *loss, const float *out, const float *x0, const float *xt,
                            const float *eps, const float *coefs, int B, int64_t P, int C);
void cuda_ddpm_loss_backward(float *dout, const float *dloss, const float *out, const float *x0,
                             const float *xt, const float *eps, const float *coefs, int B, int64_t P,
                             int C);

#ifdef __cplusplus
}
#endif
