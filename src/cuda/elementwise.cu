/* The exact GELU, x Φ(x), as the CPU (which evaluates Φ through a rational fit of the Mills ratio
 * accurate to 4e-7): here Φ is CUDA's normcdff and φ(x) = e^(-x²/2) / sqrt(2π). */
#include "common.cuh"
#include "elementwise.h"

static __device__ __forceinline__ float normal_pdf(float x) {
    return 0.3989422804f * expf(-0.5f * x * x);
}

static __global__ void gelu_forward_kernel(float *out, const float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = x[i] * normcdff(x[i]);
}

/* d/dx x Φ(x) = Φ(x) + x φ(x) */
static __global__ void gelu_backward_kernel(float *dx, const float *dout, const float *x,
                                            int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    dx[i] += dout[i] * (normcdff(x[i]) + x[i] * normal_pdf(x[i]));
}

static __global__ void gelu_value_and_slope_kernel(float *out, float *slope, const float *x,
                                                   int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        float v = x[i], cdf = normcdff(v);
        out[i] = v * cdf; /* read x first: out may be x */
        slope[i] = cdf + v * normal_pdf(v);
    }
}

extern "C" void cuda_gelu_forward(float *out, const float *x, int64_t n) {
    if (n == 0) return;
    gelu_forward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, x, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_gelu_backward(float *dx, const float *dout, const float *x, int64_t n) {
    if (n == 0) return;
    gelu_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dx, dout, x, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_gelu_value_and_slope(float *out, float *slope, const float *x, int64_t n) {
    if (n == 0) return;
    gelu_value_and_slope_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, slope, x, n);
    CUDA_LAUNCHED();
}
