/* CUDA versions of src/cpu/adaln.h on device pointers, same semantics: SiLU, tanh GELU, the adaLN
 * modulation of a LayerNorm, the gated residual, the embedding gather (idx on the device). Backward
 * kernels accumulate (+=). x (B, N, C) holds B samples of N rows; shift, scale, gate are (B, C). */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out = x sigmoid(x) */
void cuda_silu_forward(float *out, const float *x, int64_t n);
void cuda_silu_backward(float *dx, const float *dout, const float *x, int64_t n);
/* out = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))) */
void cuda_gelu_tanh_forward(float *out, const float *x, int64_t n);
void cuda_gelu_tanh_backward(float *dx, const float *dout, const float *x, int64_t n);
/* out[b, i] = x̂[b, i] (1 + scale[b]) + shift[b], x̂ the row-wise LayerNorm (no affine) of x; mean,
 * rstd (B*N) for the backward */
void cuda_layernorm_modulate_forward(float *out, float *mean, float *rstd, const float *x,
                                     const float *shift, const float *scale, int B, int N, int C,
                                     float eps);
/* any of dx, dshift, dscale may be NULL */
void cuda_layernorm_modulate_backward(float *dx, float *dshift, float *dscale, const float *dout,
                                      const float *x, const float *mean, const float *rstd,
                                      const float *scale, int B, int N, int C);
/* out[b, i] = res[b, i] + gate[b] h[b, i] */
void cuda_gated_residual_forward(float *out, const float *res, const float *gate, const float *h,
                                 int B, int N, int C);
/* dres, dgate, dh may be NULL */
void cuda_gated_residual_backward(float *dres, float *dgate, float *dh, const float *dout,
                                  const float *gate, const float *h, int B, int N, int C);
/* out[b] = table[idx[b]] (rows of D floats); dtable[idx[b]] += dout[b], samples sharing a label
 * added in b order */
void cuda_embedding_forward(float *out, const float *table, const int *idx, int B, int D);
void cuda_embedding_backward(float *dtable, const float *dout, const int *idx, int B, int D);

#ifdef __cplusplus
}
#endif
