/* The bf16 storage form of saved activations on the device, as src/cpu/bf16_store.c. */
#include "bf16_store.h"
#include "common.cuh"

static __global__ void store_kernel(uint16_t *dst, float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        const uint16_t h = bf16_bits(x[i]);
        dst[i] = h;
        x[i] = bf16_value(h);
    }
}

static __global__ void load_kernel(float *dst, const uint16_t *src, int64_t n) {
    GRID_STRIDE_LOOP(i, n) dst[i] = bf16_value(src[i]);
}

extern "C" void cuda_bf16_store(uint16_t *dst, float *x, int64_t n) {
    if (n == 0) return;
    store_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dst, x, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_bf16_load(float *dst, const uint16_t *src, int64_t n) {
    if (n == 0) return;
    load_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dst, src, n);
    CUDA_LAUNCHED();
}
