#include "mlp.h"

#include "../core/threads.h"
#include "bf16_store.h"
#include "elementwise.h"
#include "matmul.h"
#include "norm.h"

/* a chunk's normalised rows, hidden rows and fc2 rows in about 1 MiB, in whole vectors of 16 */
int mlp_chunk_rows(const mlp_dims *d) {
    int rows = (int)((1 << 18) / (2 * d->C + d->hidden)) / 16 * 16;
    return rows < 16 ? 16 : rows;
}

size_t mlp_scratch_floats(const mlp_dims *d) {
    return (size_t)vitc_threads() * mlp_chunk_rows(d) * (2 * d->C + d->hidden);
}

void mlp_residual_forward(float *out, float *h, uint16_t *h_bf16, float *mean, float *rstd,
                          const float *res, const float *ln_w, const float *ln_b, float eps,
                          const float *w1, const float *b1, const float *w2, const float *b2,
                          const float *keep, const mlp_dims *d, float *scratch) {
    int C = d->C, H = d->hidden, R = mlp_chunk_rows(d);
    int64_t chunks = (d->M + R - 1) / R;
#pragma omp parallel for schedule(dynamic)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t r0 = c * R;
        int rows = (int)(r0 + R <= d->M ? R : d->M - r0);
        float *y = scratch + (size_t)vitc_thread_id() * R * (2 * C + H), *act = y + (size_t)R * C;
        float *branch = act + (size_t)R * H, *pre = h ? h + r0 * H : act;
        layernorm_forward(y, mean + r0, rstd + r0, res + r0 * C, ln_w, ln_b, rows, C, eps);
        linear_forward(pre, y, w1, b1, rows, C, H);
        if (h_bf16) bf16_store(h_bf16 + r0 * H, pre, (int64_t)rows * H);
        gelu_forward(act, pre, (int64_t)rows * H);
        linear_forward(branch, act, w2, b2, rows, H, C);
        for (int i = 0; i < rows; i++) {
            float k = keep ? keep[(r0 + i) / d->rows_per_sample] : 1.0f;
            const float *src = res + (r0 + i) * C, *add = branch + (size_t)i * C;
            float *dst = out + (r0 + i) * C;
            for (int j = 0; j < C; j++) dst[j] = src[j] + k * add[j];
        }
    }
}

void scale_groups(float *dst, const float *x, const float *scale, int64_t groups, int64_t per,
                  bool accumulate) {
    if (per == 1 && accumulate) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < groups; i++) dst[i] += x[i] * scale[i];
    } else if (per == 1) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < groups; i++) dst[i] = x[i] * scale[i];
    } else if (accumulate) {
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t g = 0; g < groups; g++)
            for (int64_t j = 0; j < per; j++) dst[g * per + j] += x[g * per + j] * scale[g];
    } else {
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t g = 0; g < groups; g++)
            for (int64_t j = 0; j < per; j++) dst[g * per + j] = x[g * per + j] * scale[g];
    }
}
