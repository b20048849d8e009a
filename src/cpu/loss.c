/* The loss kernels of loss.h on the host. */
#include "loss.h"

#include <math.h>
#include <stddef.h>

/* Samples one after another: the mean adds the rows' double values in order, so the loss does not
 * depend on the thread count. */
void cross_entropy_forward(float *loss, float *row_loss, float *probs, const float *logits,
                           const float *target, int B, int K) {
    double total = 0;
    for (int b = 0; b < B; b++) {
        const float *z = logits + (size_t)b * K, *t = target + (size_t)b * K;
        float *p = probs + (size_t)b * K;
        float mx = -INFINITY;
        for (int k = 0; k < K; k++) mx = z[k] > mx ? z[k] : mx;
        double sum = 0;
        for (int k = 0; k < K; k++) sum += exp((double)z[k] - mx);
        double lse = mx + log(sum), row = 0;
        for (int k = 0; k < K; k++) {
            p[k] = (float)exp((double)z[k] - lse);
            row -= t[k] * ((double)z[k] - lse);
        }
        row_loss[b] = (float)row;
        total += row;
    }
    loss[0] = (float)(total / B);
}

void cross_entropy_backward(float *dlogits, const float *dloss, const float *probs,
                            const float *target, int B, int K) {
    float g = dloss[0] / B;
    /* d/dz of -sum t log softmax(z) = softmax(z) sum(t) - t */
    for (int b = 0; b < B; b++) {
        const float *p = probs + (size_t)b * K, *t = target + (size_t)b * K;
        float mass = 0;
        for (int k = 0; k < K; k++) mass += t[k];
        for (int k = 0; k < K; k++) dlogits[(size_t)b * K + k] += g * (p[k] * mass - t[k]);
    }
}

void label_targets(float *target, const int *labels, float on, float off, int B, int K) {
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++) target[(size_t)b * K + k] = k == labels[b] ? on : off;
}

void mse_forward(float *loss, const float *pred, const float *target, int64_t n) {
    double sum = 0; /* in double, in order: a batch of images is 1e5-1e7 terms */
    for (int64_t i = 0; i < n; i++) {
        double d = (double)pred[i] - target[i];
        sum += d * d;
    }
    loss[0] = (float)(sum / (double)n);
}

void mse_backward(float *dpred, float *dtarget, const float *dloss, const float *pred,
                  const float *target, int64_t n) {
    /* d/dp mean (p - t)^2 = 2 (p - t) / n, and the negative for t */
    float g = 2.0f * dloss[0] / (float)n;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float d = g * (pred[i] - target[i]);
        if (dpred) dpred[i] += d;
        if (dtarget) dtarget[i] -= d;
    }
}
