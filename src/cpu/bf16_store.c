#include "bf16_store.h"

#include <string.h>

#include "../core/cpu_features.h"
#include "bf16_simd.h"
#include "gemm_bf16.h"

/* values a thread takes at a time */
#define STORE_BLOCK 4096

#ifdef VITC_BF16_KERNELS
/* (the parallel loop stays outside: clang does not give a parallel region's body the target) */
BF16_TARGET static void store_vectors(uint16_t *dst, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes((int)(n - i < 16 ? n - i : 16));
        __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
        _mm256_mask_storeu_epi16(dst + i, m, h);
        _mm512_mask_storeu_ps(x + i, m, bf16_widen16(h));
    }
}

BF16_TARGET static void round_vectors(uint16_t *dst, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes((int)(n - i < 16 ? n - i : 16));
        _mm256_mask_storeu_epi16(dst + i, m,
                                 (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#endif

void bf16_round(uint16_t *dst, const float *x, int64_t n) {
#ifdef VITC_BF16_KERNELS
    if (cpu_has_avx512_bf16()) {
        round_vectors(dst, x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_from_float(x[i]);
}

void bf16_store(uint16_t *dst, float *x, int64_t n) {
#ifdef VITC_BF16_KERNELS
    if (cpu_has_avx512_bf16()) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += STORE_BLOCK)
            store_vectors(dst + i, x + i, n - i < STORE_BLOCK ? n - i : STORE_BLOCK);
        return;
    }
#endif
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        dst[i] = bf16_from_float(x[i]);
        x[i] = bf16_to_float(dst[i]);
    }
}

void bf16_load(float *dst, const uint16_t *src, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(dst + i, &u, sizeof u);
    }
}
