/* CUDA versions of the GELU kernels of src/cpu/elementwise.h on device pointers, same semantics
 * (the exact GELU x Φ(x)); the broadcast binary ops and the other activations are not here yet.
 * Backward kernels accumulate (+=). */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void cuda_gelu_forward(float *out, const float *x, int64_t n);
void cuda_gelu_backward(float *dx, const float *dout, const float *x, int64_t n);
/* out = gelu(x) and slope = gelu'(x), for a backward that recomputes the activation */
void cuda_gelu_value_and_slope(float *out, float *slope, const float *x, int64_t n);

#ifdef __cplusplus
}
#endif
