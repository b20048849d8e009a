/* CUDA versions of src/cpu/conv.h on device pointers, same semantics (channels-last maps, nn.Conv2d
 * weights): conv2d as im2col + cuBLAS per group, the depthwise conv, adaptive average pooling and
 * bilinear resize as direct kernels. Backward kernels accumulate (+=) and gather: every output
 * element is summed by one thread in a fixed order (no atomics), so results repeat bit for bit. */
#pragma once
#include <stdint.h>

#include "../cpu/conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* g is a host struct; scratch: conv2d_scratch_floats (B*Ho*Wo * (Cin/groups)*kh*kw of it used) */
void cuda_conv2d_forward(float *out, const float *x, const float *w, const float *b,
                         const conv_geom *g, float *scratch);
/* dx, dw, db may be NULL; scratch twice the forward's (cols and dcols) */
void cuda_conv2d_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                          const float *w, const conv_geom *g, float *scratch);

/* out = base + depthwise k x k conv (see dwconv2d_forward); wt is not needed here */
void cuda_dwconv2d_forward(float *out, const float *x, int xC, const float *w, const float *b,
                           const float *base, int B, int H, int W, int lead, int C, int Cw, int k,
                           float *wt);
/* partial: DW_CHUNKS * (k*k + 1) * C floats, the row chunks' sums of dw and db, added in order */
void cuda_dwconv2d_backward(float *dx, float dx_beta, float *dw, float *db, const float *dout,
                            const float *x, int xC, const float *w, int B, int H, int W, int lead,
                            int C, int Cw, int k, float *wt, float *partial);

void cuda_adaptive_avg_pool2d_forward(float *out, const float *x, int B, int H, int W, int lead,
                                      int C, int oh, int ow);
void cuda_adaptive_avg_pool2d_backward(float *dx, const float *dout, int B, int H, int W, int lead,
                                       int C, int oh, int ow);

void cuda_interp_bilinear_forward(float *out, const float *x, int P, int hi, int wi, int ho,
                                  int wo);
void cuda_interp_bilinear_backward(float *dx, const float *dout, int P, int hi, int wi, int ho,
                                   int wo);

#ifdef __cplusplus
}
#endif
