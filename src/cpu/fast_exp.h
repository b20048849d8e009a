/* e^x for softmax and GELU: in plain arithmetic the compiler vectorises (libm's expf stops it), and
 * with AVX-512 or AVX2 in their own instructions, 16 or 8 lanes at a time. */
#pragma once
#include <stdint.h>
#include <string.h>

/* on [-87, 88]: x = k ln2 + r, e^r by its degree-6 Taylor polynomial on |r| <= ln2/2 (relative
 * error < 2e-7), 2^k via the exponent bits; below -87 it returns e^-87 (~1.6e-38), not 0 */
static inline float fast_expf(float in) {
    float x = in < -87.0f ? -87.0f : in > 88.0f ? 88.0f : in;
    x = x == x ? x : 0.0f; /* NaN: computed on 0, returned as NaN below (no undefined conversion) */
    /* round to nearest by the 1.5 * 2^23 trick: libm's roundf would block vectorisation */
    float k = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    float r = x - k * 0.693145752f - k * 1.42860677e-6f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666667f + r * (0.0416666667f + r * (0.00833333333f + r * 0.00138888889f)))));
    uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return in == in ? p * scale : in;
}

#include "simd.h"

#ifdef __x86_64__
/* fast_expf on 16 lanes with AVX-512's own steps: rounding k by vrndscaleps and 2^k by vscalefps
 * leave no clamp at the top (it overflows to inf) and none for NaN (it passes through); below -100
 * the result is 0. About half the instructions of the vectorised fast_expf. Its own target, so that
 * the bf16 kernels (bf16_simd.h) call it in builds for any x86-64. */
__attribute__((target("avx512f"))) static inline __m512 fast_exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-100.0f), x); /* vmaxps returns a NaN second operand */
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(0.00138888889f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.00833333333f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.0416666667f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.166666667f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/* fast_expf on 8 lanes in AVX2's own steps (vroundps, 2^k by the exponent bits), for the code
 * written in intrinsics; a NaN passes through (vmaxps and vminps return their second operand) */
static inline __m256 fast_exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.0f), x));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145752f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.42860677e-6f), r);
    __m256 p = _mm256_set1_ps(0.00138888889f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.00833333333f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.0416666667f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.166666667f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
#endif

#if VEC == 16 || (defined(__AVX2__) && defined(__FMA__))
#define HAVE_FAST_EXP_VEC
/* fast_exp16 or fast_exp8: the machine's vector (simd.h) */
static inline __attribute__((always_inline)) vecf fast_exp_vec(vecf x) {
#if VEC == 16
    return (vecf)fast_exp16((__m512)x);
#else
    return (vecf)fast_exp8((__m256)x);
#endif
}
#endif

/* p[j] = e^(p[j] - shift) over a row: softmax's exponentials */
static inline void exp_shifted_row(float *p, int n, float shift) {
#ifdef HAVE_FAST_EXP_VEC
    int j = 0;
    for (; j + VEC <= n; j += VEC) store_vec(p + j, fast_exp_vec(load_vec(p + j) - shift));
    if (j < n) store_lanes(p + j, fast_exp_vec(load_lanes(p + j, n - j) - shift), n - j);
#else
    for (int j = 0; j < n; j++) p[j] = fast_expf(p[j] - shift);
#endif
}
