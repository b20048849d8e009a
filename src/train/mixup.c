#include "mixup.h"

#include <math.h>
#include <string.h>

static void soft_targets(float *targets, const int *labels, int n, int K, double lam, double smoothing) {
    float off = (float)(smoothing / K), on = (float)(1.0 - smoothing + smoothing / K);
    for (int i = 0; i < n; i++) {
        float *t = targets + (size_t)i * K;
        for (int k = 0; k < K; k++) t[k] = off * (float)lam + off * (float)(1.0 - lam);
        t[labels[i]] += (on - off) * (float)lam;
        t[labels[n - 1 - i]] += (on - off) * (float)(1.0 - lam);
    }
}

/* timm rand_bbox: a box of (1-lam) area fraction centred uniformly, clipped to the image */
static void cut_box(int H, int W, double lam, rng *r, int *y0, int *y1, int *x0, int *x1) {
    double cut = sqrt(1.0 - lam);
    int ch = (int)(H * cut), cw = (int)(W * cut);
    int cy = (int)rng_below(r, (uint32_t)H), cx = (int)rng_below(r, (uint32_t)W);
    *y0 = cy - ch / 2 < 0 ? 0 : cy - ch / 2;
    *y1 = cy + ch / 2 > H ? H : cy + ch / 2;
    *x0 = cx - cw / 2 < 0 ? 0 : cx - cw / 2;
    *x1 = cx + cw / 2 > W ? W : cx + cw / 2;
}

double mixup_apply(const mixup_config *m, float *images, int n, int H, int W, int C,
                   const int *labels, int K, float *targets, rng *r) {
    double lam = 1.0;
    bool cutmix = false;
    if (rng_uniform_f64(r) < m->prob) {
        if (m->mixup_alpha > 0 && m->cutmix_alpha > 0) cutmix = rng_uniform_f64(r) < m->switch_prob;
        else cutmix = m->cutmix_alpha > 0;
        double alpha = cutmix ? m->cutmix_alpha : m->mixup_alpha;
        if (alpha > 0) lam = rng_beta(r, alpha, alpha);
        else cutmix = false;
    }
    size_t per = (size_t)H * W * C;
    if (lam < 1.0 && !cutmix) {
        /* x_i = lam x_i + (1 - lam) x_{n-1-i}, computed pairwise from the originals */
        float l = (float)lam;
        for (int i = 0; i < n / 2; i++) {
            float *a = images + i * per, *b = images + (size_t)(n - 1 - i) * per;
            for (size_t j = 0; j < per; j++) {
                float x = a[j], y = b[j];
                a[j] = x * l + y * (1.0f - l);
                b[j] = y * l + x * (1.0f - l);
            }
        }
    } else if (lam < 1.0) {
        int y0, y1, x0, x1;
        cut_box(H, W, lam, r, &y0, &y1, &x0, &x1);
        lam = 1.0 - (double)(y1 - y0) * (x1 - x0) / ((double)H * W);
        size_t row = (size_t)(x1 - x0) * C;
        for (int i = 0; i < n / 2; i++) { /* swapping the boxes of i and n-1-i pastes both ways */
            float *a = images + i * per, *b = images + (size_t)(n - 1 - i) * per;
            for (int y = y0; y < y1; y++) {
                float *pa = a + ((size_t)y * W + x0) * C, *pb = b + ((size_t)y * W + x0) * C;
                for (size_t j = 0; j < row; j++) {
                    float t = pa[j];
                    pa[j] = pb[j];
                    pb[j] = t;
                }
            }
        }
    }
    soft_targets(targets, labels, n, K, lam, m->smoothing);
    return lam;
}
