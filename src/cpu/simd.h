/* Vector code: 16-float vectors (one AVX-512 register; GCC splits them on narrower machines) for
 * register-tiled kernels, and the attribute that lets loops the compiler vectorises use 512-bit
 * registers (GCC's default for these processors is 256). */
#pragma once
#include <string.h>

#if defined(__AVX512F__) && !defined(__clang__)
#define WIDE_VECTORS __attribute__((target("prefer-vector-width=512")))
#else
#define WIDE_VECTORS
#endif

/* vec16 is passed only between static inline functions, never across translation units, so GCC's
 * note that its calling convention depends on AVX-512 (builds without -march=native) does not apply */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float vec16 __attribute__((vector_size(64)));

static inline vec16 load16(const float *p) {
    vec16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store16(float *p, vec16 v) { memcpy(p, &v, sizeof v); }

/* written out, so that it compiles to one broadcast from memory ((vec16){0} + x does not: x + 0 is
 * not x for x = -0) */
static inline vec16 splat16(float x) { return (vec16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
