/* Convolution-family kernels on channels-last maps (B, H, W, C), weights in nn.Conv2d's layout
 * (Cout, Cin/groups, kh, kw): im2col + the products of matmul.h (under bf16, gemm_bf16's on
 * columns cut in bf16) for the general conv, a direct depthwise kernel, adaptive average pooling,
 * bilinear resize (align_corners=False). Backward kernels accumulate. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct conv_geom {
    int B, H, W, Cin, Cout, kh, kw, stride, pad, groups, Ho, Wo;
} conv_geom;

/* the columns of the output pixels, B*Ho*Wo x (Cin/groups)*kh*kw, and the weights (Cout of those
 * rows); the backward's twice (also their gradients) */
static inline size_t conv2d_scratch_floats(const conv_geom *g, bool backward) {
    size_t K = (size_t)(g->Cin / g->groups) * g->kh * g->kw;
    return (backward ? 2 : 1) * ((size_t)g->B * g->Ho * g->Wo + g->Cout) * K;
}

/* scratch: conv2d_scratch_floats(g, false) */
void conv2d_forward(float *out, const float *x, const float *w, const float *b, const conv_geom *g,
                    float *scratch);
/* dx, dw, db may be NULL; scratch: conv2d_scratch_floats(g, true) */
void conv2d_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, const conv_geom *g, float *scratch);

/* out = base + depthwise k x k conv, stride 1, zero padding k/2: x (B, H, W, C) read as the first C
 * of xC channels, w (Cw, k*k), b (Cw)
 * or NULL with Cw dividing C, channel c taking kernel c mod Cw; base shaped like out, or NULL; wt
 * scratch: (k*k + 1) * C floats (the weights spread over the channels so the channel loop is
 * contiguous, then the bias). Each image of x, out and base (and of the backward's dout and dx) is
 * lead + H*W pixels, the grid after `lead` other tokens (a class token), which the conv neither
 * reads nor writes. */
void dwconv2d_forward(float *out, const float *x, int xC, const float *w, const float *b,
                      const float *base, int B, int H, int W, int lead, int C, int Cw, int k,
                      float *wt);
/* k odd and at most DW_MAX_K; dx = dx_beta dx + x's gradient (dx_beta 0: dx unset, not read), dw
 * and db added into; partial: scratch of DW_CHUNKS * (k*k + 1) * C floats for the deterministic
 * dw/db reduction */
#define DW_CHUNKS 16
#define DW_MAX_K 7
void dwconv2d_backward(float *dx, float dx_beta, float *dw, float *db, const float *dout,
                       const float *x, int xC, const float *w, int B, int H, int W, int lead,
                       int C, int Cw, int k, float *wt, float *partial);

/* x (B, H, W, C) -> out (B, oh, ow, C), bins [floor(i*H/oh), ceil((i+1)*H/oh)); each image of x
 * (and dx) is lead + H*W pixels, as dwconv2d's */
void adaptive_avg_pool2d_forward(float *out, const float *x, int B, int H, int W, int lead, int C,
                                 int oh, int ow);
void adaptive_avg_pool2d_backward(float *dx, const float *dout, int B, int H, int W, int lead,
                                  int C, int oh, int ow);

/* planes x (P, hi, wi) -> out (P, ho, wo) */
void interp_bilinear_forward(float *out, const float *x, int P, int hi, int wi, int ho, int wo);
void interp_bilinear_backward(float *dx, const float *dout, int P, int hi, int wi, int ho, int wo);
