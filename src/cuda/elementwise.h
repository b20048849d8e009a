/* CUDA versions of src/cpu/elementwise.h on device pointers, same semantics (the `broadcast` plan
 * stays a host struct). Backward kernels accumulate (+=); their reductions over broadcast dims are
 * deterministic (fixed order, no atomics). */
#pragma once
#include <stdint.h>

#include "../cpu/elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

void cuda_binary_forward(binary_op op, float *out, const float *a, const float *b, const broadcast *bc);
/* ga (shaped like a) += dL/da, gb += dL/db; either may be NULL. out is the forward result (div). */
void cuda_binary_backward(binary_op op, float *ga, float *gb, const float *gout, const float *a,
                          const float *b, const float *out, const broadcast *bc);
/* g_in (shape in5) += sum of g_out (shape out5) over the dims where in has size 1 */
void cuda_broadcast_reduce(float *g_in, const float *g_out, const int *in5, const int *out5);
/* out (shape out5) = x (shape in5) repeated along the dims where in has size 1 */
void cuda_expand_forward(float *out, const float *x, const int *in5, const int *out5);

void cuda_accumulate(float *dst, const float *src, int64_t n); /* dst += src */
/* dst = src, n floats of device memory */
void cuda_copy_floats(float *dst, const float *src, int64_t n);
void cuda_scale_forward(float *out, const float *x, float s, int64_t n);
void cuda_scale_backward(float *dx, const float *dout, float s, int64_t n);
void cuda_add_scalar_forward(float *out, const float *x, float s, int64_t n);

void cuda_gelu_forward(float *out, const float *x, int64_t n);
void cuda_gelu_backward(float *dx, const float *dout, const float *x, int64_t n);
/* out = gelu(x) and slope = gelu'(x), for a backward that recomputes the activation */
void cuda_gelu_value_and_slope(float *out, float *slope, const float *x, int64_t n);
/* the same from a bf16 hidden layer, out rounded to bf16 (src/cpu/elementwise.h) */
void cuda_gelu_bf16_value_and_slope(uint16_t *out, float *slope, const uint16_t *x, int64_t n);
void cuda_relu_forward(float *out, const float *x, int64_t n);
void cuda_relu_backward(float *dx, const float *dout, const float *x, int64_t n);
void cuda_softplus_forward(float *out, const float *x, int64_t n);
void cuda_softplus_backward(float *dx, const float *dout, const float *x, int64_t n);
void cuda_pow_forward(float *out, const float *x, float p, int64_t n);
void cuda_pow_backward(float *dx, const float *dout, const float *x, float p, int64_t n);

#ifdef __cplusplus
}
#endif
