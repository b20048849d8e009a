/* Kernels of the diffusion-transformer (DiT/SiT) ops: SiLU, tanh-approximated GELU, the adaLN
 * modulation of a LayerNorm without affine parameters, the gated residual, an embedding gather.
 * Backward kernels accumulate (+=). Shapes: x (B, N, C) holds B samples of N rows of C channels;
 * per-sample vectors (shift, scale, gate) are (B, C). */
#pragma once
#include <stdint.h>

/* out = x sigmoid(x) */
void silu_forward(float *out, const float *x, int64_t n);
void silu_backward(float *dx, const float *dout, const float *x, int64_t n);

/* out = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))): nn.GELU(approximate="tanh") */
void gelu_tanh_forward(float *out, const float *x, int64_t n);
void gelu_tanh_backward(float *dx, const float *dout, const float *x, int64_t n);

/* out[b, i] = x̂[b, i] (1 + scale[b]) + shift[b] with x̂ the row-wise LayerNorm (no affine) of x;
 * mean, rstd (B*N) for the backward */
void layernorm_modulate_forward(float *out, float *mean, float *rstd, const float *x,
                                const float *shift, const float *scale, int B, int N, int C,
                                float eps);
/* any of dx, dshift, dscale may be NULL */
void layernorm_modulate_backward(float *dx, float *dshift, float *dscale, const float *dout,
                                 const float *x, const float *mean, const float *rstd,
                                 const float *scale, int B, int N, int C);

/* out[b, i] = res[b, i] + gate[b] h[b, i] */
void gated_residual_forward(float *out, const float *res, const float *gate, const float *h, int B,
                            int N, int C);
/* dres, dgate, dh may be NULL */
void gated_residual_backward(float *dres, float *dgate, float *dh, const float *dout,
                             const float *gate, const float *h, int B, int N, int C);

/* out[b] = table[idx[b]] (rows of D floats) and its backward dtable[idx[b]] += dout[b] (rows that
 * share an index are added in b order) */
void embedding_forward(float *out, const float *table, const int *idx, int B, int D);
void embedding_backward(float *dtable, const float *dout, const int *idx, int B, int D);
