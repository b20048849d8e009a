/* The MLP step out = res + keep_s fc2(gelu(fc1(layernorm(res)))) on the device, as the CPU's chunks
 * but in passes of many rows (a GPU wants large GEMMs, not cache-sized ones), and the scaling of
 * groups of values by a factor each (dropout, drop path). */
#include "bf16_store.h"
#include "common.cuh"
#include "elementwise.h"
#include "matmul.h"
#include "mlp.h"
#include "norm.h"

/* a pass's normalised rows, hidden rows and fc2 rows: up to 64 MiB */
#define MLP_PASS_FLOATS ((int64_t)1 << 24)

static int64_t pass_rows(const mlp_dims *d) {
    const int64_t per_row = 2 * (int64_t)d->C + d->hidden, rows = MLP_PASS_FLOATS / per_row;
    return rows < 1 ? 1 : rows < d->M ? rows : d->M;
}

extern "C" size_t cuda_mlp_scratch_floats(const mlp_dims *d) {
    return (size_t)pass_rows(d) * (2 * (size_t)d->C + d->hidden);
}

/* out = res + k branch, k the row's sample factor (keep NULL: 1) */
static __global__ void residual_kernel(float *out, const float *res, const float *branch,
                                       const float *keep, int64_t row0, int rows_per_sample,
                                       int64_t n, int C) {
    GRID_STRIDE_LOOP(i, n) {
        const float k = keep ? keep[(row0 + i / C) / rows_per_sample] : 1.0f;
        out[i] = res[i] + k * branch[i];
    }
}

extern "C" void cuda_mlp_residual_forward(float *out, float *h, uint16_t *h_bf16, float *mean,
                                          float *rstd, const float *res, const float *ln_w,
                                          const float *ln_b, float eps, const float *w1,
                                          const float *b1, const float *w2, const float *b2,
                                          const float *keep, const mlp_dims *d, float *scratch) {
    const int C = d->C, H = d->hidden;
    const int64_t R = pass_rows(d);
    for (int64_t r0 = 0; r0 < d->M; r0 += R) {
        const int rows = (int)(r0 + R <= d->M ? R : d->M - r0);
        float *y = scratch, *act = y + (size_t)R * C, *branch = act + (size_t)R * H;
        float *pre = h ? h + r0 * H : act; /* without h, the GELU runs in place */
        cuda_layernorm_forward(y, mean + r0, rstd + r0, res + r0 * C, ln_w, ln_b, rows, C, eps);
        cuda_linear_forward(pre, y, w1, b1, rows, C, H);
        if (h_bf16) cuda_bf16_store(h_bf16 + r0 * H, pre, (int64_t)rows * H);
        cuda_gelu_forward(act, pre, (int64_t)rows * H);
        cuda_linear_forward(branch, act, w2, b2, rows, H, C);
        const int64_t n = (int64_t)rows * C;
        residual_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out + r0 * C, res + r0 * C, branch, keep,
                                                          r0, d->rows_per_sample, n, C);
        CUDA_LAUNCHED();
    }
}

/* passes of rows whose product g w2 and slope fill up to MLP_PASS_FLOATS */
static int64_t hidden_pass_rows(const mlp_dims *d) {
    const int64_t rows = MLP_PASS_FLOATS / (2 * (int64_t)d->hidden);
    return rows < 1 ? 1 : rows < d->M ? rows : d->M;
}

extern "C" size_t cuda_mlp_hidden_backward_scratch_floats(const mlp_dims *d) {
    return (size_t)hidden_pass_rows(d) * 2 * d->hidden;
}

extern "C" void cuda_mlp_hidden_backward_bf16(uint16_t *dh, uint16_t *act, const uint16_t *h,
                                              const float *g, const float *w2, const mlp_dims *d,
                                              float *scratch) {
    const int C = d->C, H = d->hidden;
    const int64_t R = hidden_pass_rows(d);
    for (int64_t r0 = 0; r0 < d->M; r0 += R) {
        const int rows = (int)(r0 + R <= d->M ? R : d->M - r0);
        const int64_t n = (int64_t)rows * H;
        float *dact = scratch, *slope = scratch + (size_t)R * H;
        cuda_gelu_bf16_value_and_slope(act + r0 * H, slope, h + r0 * H, n);
        if (!dh) continue;
        cuda_gemm(false, false, rows, H, C, 1.0f, g + r0 * C, w2, 0.0f, dact);
        cuda_scale_groups(dact, dact, slope, n, 1, false);
        cuda_bf16_store(dh + r0 * H, dact, n);
    }
}

static __global__ void scale_groups_kernel(float *dst, const float *x, const float *scale,
                                           int64_t per, int64_t n, bool accumulate) {
    GRID_STRIDE_LOOP(i, n) {
        const float v = x[i] * scale[i / per];
        dst[i] = accumulate ? dst[i] + v : v;
    }
}

extern "C" void cuda_scale_groups(float *dst, const float *x, const float *scale, int64_t groups,
                                  int64_t per, bool accumulate) {
    const int64_t n = groups * per;
    if (n == 0) return;
    scale_groups_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dst, x, scale, per, n, accumulate);
    CUDA_LAUNCHED();
}
