/* CUDA versions of src/cpu/norm.h on device pointers, same semantics: layernorm, L2 norm, softmax,
 * mean over a dim. Backward kernels accumulate (+=) except softmax_backward, which writes, as on
 * the CPU. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x (M, C) -> out (M, C); writes the row mean and rstd (M) for the backward */
void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                            const float *b, int64_t M, int C, float eps);
/* layernorm_forward written as the map's windows, fp32 to out or bf16 to out_bf16 where given */
void cuda_layernorm_windows_forward(float *out, uint16_t *out_bf16, float *mean, float *rstd,
                                    const float *x, const float *w, const float *b, int B, int H,
                                    int W, int C, int wh, int ww, int shift, float eps);
/* out = the layernorm of x with the row statistics layernorm_forward wrote (a recomputation) */
void cuda_layernorm_apply(float *out, const float *x, const float *mean, const float *rstd,
                          const float *w, const float *b, int64_t M, int C);
/* dx (M, C), dw, db (C) += gradients; dw/db NULL to skip */
void cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                             const float *mean, const float *rstd, const float *w, int64_t M,
                             int C);
/* out (M) = |x_r|_2 over rows of x (M, C) */
void cuda_l2norm_forward(float *out, const float *x, int64_t M, int C);
void cuda_l2norm_backward(float *dx, const float *dout, const float *x, const float *out, int64_t M,
                          int C);
/* out (M, N) = softmax over rows of x + bias, bias (NB) repeating every NB elements (NB = N * k,
 * NB divides M*N) or NULL */
void cuda_softmax_forward(float *out, const float *x, const float *bias, int64_t M, int N,
                          int64_t NB);
/* dlogits (M, N) = y * (g - sum(g * y)) written (not accumulated) */
void cuda_softmax_backward(float *dlogits, const float *dout, const float *y, int64_t M, int N);
/* x (outer, len, inner) -> out (outer, inner) mean over len */
void cuda_mean_forward(float *out, const float *x, int64_t outer, int len, int64_t inner);
void cuda_mean_backward(float *dx, const float *dout, int64_t outer, int len, int64_t inner);

#ifdef __cplusplus
}
#endif
