/* Row reductions the compiler vectorises: float sums and maxima are not associative, so a plain loop
 * stays scalar (without -ffast-math); 16 independent lanes, combined at the end, are vector code. The
 * result depends only on n, not on threads or alignment. */
#pragma once
#include <math.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#define REDUCE_LANES 16

/* the lanes combined pairwise: 4 dependent steps instead of 16 (short rows, as attention's, were
 * bound by that chain) */
static inline float lanes_sum(float acc[REDUCE_LANES]) {
    for (int w = REDUCE_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

static inline float lanes_max(float acc[REDUCE_LANES]) {
    for (int w = REDUCE_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
    return acc[0];
}

static inline float reduce_sum(const float *x, int n) {
    float acc[REDUCE_LANES] = {0};
    int j = 0;
    for (; j + REDUCE_LANES <= n; j += REDUCE_LANES)
        for (int l = 0; l < REDUCE_LANES; l++) acc[l] += x[j + l];
    float s = 0;
    for (; j < n; j++) s += x[j];
    return s + lanes_sum(acc);
}

static inline float reduce_dot(const float *x, const float *y, int n) {
    float acc[REDUCE_LANES] = {0};
    int j = 0;
    for (; j + REDUCE_LANES <= n; j += REDUCE_LANES)
        for (int l = 0; l < REDUCE_LANES; l++) acc[l] += x[j + l] * y[j + l];
    float s = 0;
    for (; j < n; j++) s += x[j] * y[j];
    return s + lanes_sum(acc);
}

static inline float reduce_max(const float *x, int n) {
    float acc[REDUCE_LANES];
    int j = 0;
    /* GCC leaves the plain loop below scalar (attention's softmax spent more on its maxima than on
     * its exponentials); vmaxps(x, acc) is its comparison exactly, NaN in x ignored included */
#ifdef __AVX512F__
    __m512 maxima = _mm512_set1_ps(-INFINITY);
    for (; j + REDUCE_LANES <= n; j += REDUCE_LANES)
        maxima = _mm512_max_ps(_mm512_loadu_ps(x + j), maxima);
    _mm512_storeu_ps(acc, maxima);
#elif defined(__AVX2__)
    __m256 low = _mm256_set1_ps(-INFINITY), high = low; /* lanes 0-7 and 8-15 */
    for (; j + REDUCE_LANES <= n; j += REDUCE_LANES) {
        low = _mm256_max_ps(_mm256_loadu_ps(x + j), low);
        high = _mm256_max_ps(_mm256_loadu_ps(x + j + 8), high);
    }
    _mm256_storeu_ps(acc, low);
    _mm256_storeu_ps(acc + 8, high);
#else
    for (int l = 0; l < REDUCE_LANES; l++) acc[l] = -INFINITY;
    for (; j + REDUCE_LANES <= n; j += REDUCE_LANES)
        for (int l = 0; l < REDUCE_LANES; l++) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
#endif
    float m = lanes_max(acc);
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}
