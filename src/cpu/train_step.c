#include "train_step.h"

#include <math.h>

void adamw_update(float *p, float *m, float *v, const float *g, const uint8_t *decay, int run,
                  int64_t n, double lr, double beta1, double beta2, double eps, double weight_decay,
                  int64_t step) {
    /* p *= 1 - lr*wd; m, v updated; p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps) */
    const float b1 = (float)beta1, b2 = (float)beta2, e = (float)eps, wd = (float)(lr * weight_decay);
    const double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
    const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    int64_t runs = (n + run - 1) / run;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < runs; r++) {
        const float keep = 1.0f - wd * (float)decay[r];
        for (int64_t i = r * run, end = i + run < n ? i + run : n; i < end; i++) {
            p[i] *= keep;
            m[i] = b1 * m[i] + (1.0f - b1) * g[i];
            v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
            p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + e);
        }
    }
}

void ema_update_flat(float *ema, const float *p, int64_t n, double decay) {
    const float d = (float)decay, rest = (float)(1.0 - decay);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) ema[i] = ema[i] * d + rest * p[i];
}

double sum_squares(const float *x, int64_t n) {
    double part[SUM_SQUARES_CHUNKS] = {0}, sum = 0;
    int64_t per = (n + SUM_SQUARES_CHUNKS - 1) / SUM_SQUARES_CHUNKS;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < SUM_SQUARES_CHUNKS; c++) {
        int64_t lo = c * per, hi = lo + per < n ? lo + per : n;
        double s = 0;
        for (int64_t i = lo; i < hi; i++) s += (double)x[i] * x[i];
        part[c] = s;
    }
    for (int c = 0; c < SUM_SQUARES_CHUNKS; c++) sum += part[c];
    return sum;
}

void scale_floats(float *x, int64_t n, float s) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}
