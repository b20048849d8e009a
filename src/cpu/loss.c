/* The loss kernels of loss.h on the host. */
#include "loss.h"

#include "ddpm_terms.h"

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

void ddpm_loss_forward(float *loss, const float *out, const float *x0, const float *xt,
                       const float *eps, const float *coefs, int B, int64_t P, int C) {
    double sum = 0; /* in order: the loss does not depend on the thread count */
    for (int b = 0; b < B; b++)
        for (int64_t p = 0; p < P; p++)
            for (int c = 0; c < C; c++) {
                int64_t i = ((int64_t)b * P + p) * C + c, o = ((int64_t)b * P + p) * 2 * C + c;
                double de, dv;
                sum += ddpm_element(coefs + (size_t)b * DDPM_COEFS, out[o], out[o + C], x0[i], xt[i],
                                    eps[i], &de, &dv);
            }
    loss[0] = (float)(sum / ((double)B * P * C));
}

void ddpm_loss_backward(float *dout, const float *dloss, const float *out, const float *x0,
                        const float *xt, const float *eps, const float *coefs, int B, int64_t P,
                        int C) {
    double g = dloss[0] / ((double)B * P * C);
#pragma omp parallel for schedule(static)
    for (int64_t bp = 0; bp < (int64_t)B * P; bp++)
        for (int c = 0; c < C; c++) {
            int64_t i = bp * C + c, o = bp * 2 * C + c;
            double de, dv;
            ddpm_element(coefs + (size_t)(bp / P) * DDPM_COEFS, out[o], out[o + C], x0[i], xt[i], eps[i],
                         &de, &dv);
            dout[o] += (float)(g * de);
            dout[o + C] += (float)(g * dv);
        }
}
