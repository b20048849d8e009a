/* The vector pieces of the bf16 kernels (gemm_bf16.c, attention_bf16.c): rounding 32 floats to bf16,
 * interleaving two rows into the pairs vdpbf16ps multiplies.
 * VITC_BF16_KERNELS is defined where the compiler knows AVX512_BF16 (GCC >= 10, Clang >= 9, x86-64);
 * the code carries the target attribute, so the rest of the build needs no -mavx512bf16 and runs on
 * any x86-64 (the kernels check the CPU before their first instruction). */
#pragma once
#if defined(__x86_64__) &&                                                                         \
    ((defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && __GNUC__ >= 10))
#define VITC_BF16_KERNELS 1
/* AMX's intrinsics came with GCC 11 and Clang 12 */
#if (defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11)
#define VITC_AMX_KERNELS 1
#else
#define VITC_AMX_KERNELS 0
#endif
#include <immintrin.h>
#include <stdint.h>

#include "simd.h"

#define BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))
#define INLINE static inline __attribute__((always_inline))

/* the m (<= 32) floats at x as 32 bf16 in order, zeros past m: 16 pairs. vcvtne2ps2bf16 rounds as
 * bf16_from_float does, bit for bit. */
BF16_TARGET INLINE __m512i bf16_of_32(const float *x, int m) {
    __m512 x0 = _mm512_maskz_loadu_ps(lanes(m), x),
           x1 = _mm512_maskz_loadu_ps(lanes(m - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
}

/* 16 bf16 as the floats they stand for */
BF16_TARGET INLINE __m512 bf16_widen16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* lane l: the pair (lo[l], hi[l]) of bf16, lo in the lower half, as vdpbf16ps reads a pair */
BF16_TARGET INLINE __m512i pairs16(__m512 lo, __m512 hi) {
    static const uint16_t interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                            21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                            11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(interleave),
                                    (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* the 16-bit lanes of lo (0-15) and hi (32-47) in pairs, as _mm512_permutex2var_epi16 takes them */
static const uint16_t low_half_pairs[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                            37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                            11, 43, 12, 44, 13, 45, 14, 46, 15, 47};

/* the pairs (lo[l], hi[l]) of 32 bf16 lanes: lanes 0-15 in *first, 16-31 in *second; pairs16 for
 * operands already in bf16 */
BF16_TARGET INLINE void pairs32_bf16(__m512i lo, __m512i hi, __m512i *first, __m512i *second) {
    __m512i order = _mm512_loadu_si512(low_half_pairs);
    *first = _mm512_permutex2var_epi16(lo, order, hi);
    *second = _mm512_permutex2var_epi16(lo, _mm512_add_epi16(order, _mm512_set1_epi16(16)), hi);
}

/* t[l] (l < 16) = the pairs (x[2s][l], x[2s + 1][l]) of s = p0 .. p0 + 15 as 16 lanes: pairs of x's
 * rows (stride ld) turned, the columns `cols` (masked) of each, rows from `rows` on as zero. A
 * transposed operand's pairs, 16 columns at a time. */
BF16_TARGET INLINE void turned_pairs16(vec16 t[16], const float *x, size_t ld, int p0, int rows,
                                       __mmask16 cols) {
    for (int s = 0; s < 16; s++) {
        int r = 2 * (p0 + s);
        __m512 lo = r < rows ? _mm512_maskz_loadu_ps(cols, x + r * ld) : _mm512_setzero_ps();
        __m512 hi = r + 1 < rows ? _mm512_maskz_loadu_ps(cols, x + (r + 1) * ld) : _mm512_setzero_ps();
        t[s] = (vec16)pairs16(lo, hi);
    }
    transpose16(t);
}

/* turned_pairs16 for an operand stored in bf16: the pairs of rows 2s, 2s + 1 of x (16 columns, the
 * masked ones `cols`), turned */
BF16_TARGET INLINE void turned_pairs16_bf16(vec16 t[16], const uint16_t *x, size_t ld, int p0,
                                            int rows, __mmask16 cols) {
    __m512i order = _mm512_loadu_si512(low_half_pairs);
    for (int s = 0; s < 16; s++) {
        int r = 2 * (p0 + s);
        __m512i lo = r < rows ? _mm512_maskz_loadu_epi16(cols, x + r * ld) : _mm512_setzero_si512();
        __m512i hi = r + 1 < rows ? _mm512_maskz_loadu_epi16(cols, x + (r + 1) * ld)
                                  : _mm512_setzero_si512();
        t[s] = (vec16)_mm512_permutex2var_epi16(lo, order, hi);
    }
    transpose16(t);
}
#endif
