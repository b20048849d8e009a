/* Loss kernels: cross entropy with soft targets (mixup, label smoothing), the targets of hard labels,
 * the mean squared error and DiT's diffusion loss. Each loss is one float, reduced in double; backward kernels accumulate
 * (+=) and read the loss gradient from memory (dloss[0]), so a device needs no host round trip. */
#pragma once
#include <stdint.h>

/* logits, target (B, K): probs (B, K) = softmax(logits) (saved for the backward), row_loss (B) =
 * -sum_k t log softmax(z) per sample, loss (1) = their mean. Rows in double. */
void cross_entropy_forward(float *loss, float *row_loss, float *probs, const float *logits,
                           const float *target, int B, int K);
/* dlogits (B, K) += dloss[0] / B * (probs * sum(t) - t) */
void cross_entropy_backward(float *dlogits, const float *dloss, const float *probs,
                            const float *target, int B, int K);
/* target (B, K) = on where k == labels[b], off elsewhere (labels checked in [0, K) by the caller) */
void label_targets(float *target, const int *labels, float on, float off, int B, int K);

/* loss (1) = mean over n of (pred - target)^2 */
void mse_forward(float *loss, const float *pred, const float *target, int64_t n);
/* dpred += 2 dloss[0] / n (pred - target), dtarget -= the same; either may be NULL */
void mse_backward(float *dpred, float *dtarget, const float *dloss, const float *pred,
                  const float *target, int64_t n);

/* DiT's loss with learned-range variance (ddpm_terms.h): out (B, P, 2C) channels-last holds eps_hat
 * in channels 0..C-1 and the variance values in C..2C-1; x0, xt, eps (B, P, C); coefs (B,
 * DDPM_COEFS) of each sample's time step. loss (1) = the mean of ddpm_element over the B P C
 * elements (= the official mean over samples of mse + vb), in double. */
void ddpm_loss_forward(float *loss, const float *out, const float *x0, const float *xt,
                       const float *eps, const float *coefs, int B, int64_t P, int C);
/* dout += dloss[0] / (B P C) times ddpm_element's derivatives in eps_hat and the variance value */
void ddpm_loss_backward(float *dout, const float *dloss, const float *out, const float *x0,
                        const float *xt, const float *eps, const float *coefs, int B, int64_t P,
                        int C);
