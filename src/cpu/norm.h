/* Normalisation and reduction kernels over rows: layernorm, L2 norm, softmax, mean over a dim.
 * Backward kernels accumulate (+=). */
#pragma once
#include <stdint.h>

/* x (M, C) -> out (M, C); writes the row mean and rstd (M) for the backward */
void layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int64_t M, int C, float eps);
/* layernorm_forward of the map x (B, H, W, C) written as its windows (window_copy's layout: of the
 * map rolled by -shift), in fp32 to out or, where out_bf16 is given, rounded to bf16 there (out
 * unused); mean and rstd in the map's order. One pass: no map-order copy of the result. */
void layernorm_windows_forward(float *out, uint16_t *out_bf16, float *mean, float *rstd,
                               const float *x, const float *w, const float *b, int B, int H, int W,
                               int C, int wh, int ww, int shift, float eps);
/* out = the layernorm of x with the row statistics layernorm_forward wrote (a recomputation) */
void layernorm_apply(float *out, const float *x, const float *mean, const float *rstd,
                     const float *w, const float *b, int64_t M, int C);
/* dx (M, C), dw, db (C) += gradients; dw/db NULL to skip */
void layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                        const float *mean, const float *rstd, const float *w, int64_t M, int C);

/* out (M) = |x_r|_2 over rows of x (M, C) */
void l2norm_forward(float *out, const float *x, int64_t M, int C);
void l2norm_backward(float *dx, const float *dout, const float *x, const float *out, int64_t M, int C);

/* p (n) = softmax(p), in place; returns the log-sum-exp of the input */
float softmax_row(float *p, int n);
/* out (M, N) = softmax over rows of x + bias, bias (NB) repeating every NB elements (NB = N * k,
 * NB divides M*N) or NULL */
void softmax_forward(float *out, const float *x, const float *bias, int64_t M, int N, int64_t NB);
/* dlogits (M, N) = y * (g - sum(g * y)) written (not accumulated) */
void softmax_backward(float *dlogits, const float *dout, const float *y, int64_t M, int N);

/* x (outer, len, inner) -> out (outer, inner) mean over len */
void mean_forward(float *out, const float *x, int64_t outer, int len, int64_t inner);
void mean_backward(float *dx, const float *dout, int64_t outer, int len, int64_t inner);
