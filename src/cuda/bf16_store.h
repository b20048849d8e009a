/* CUDA versions of src/cpu/bf16_store.h on device pointers. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void cuda_bf16_store(uint16_t *dst, float *x, int64_t n);
void cuda_bf16_load(float *dst, const uint16_t *src, int64_t n);

#ifdef __cplusplus
}
#endif
