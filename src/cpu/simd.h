/* Vector code: vecf, the machine's own vector (16 floats with AVX-512, 8 with AVX2), for the
 * register-tiled kernels, which size their tiles by it; 16-float vectors for the bf16 kernels (built
 * for AVX-512 only); and the attribute that lets loops the compiler vectorises use 512-bit registers
 * (GCC's default for these processors is 256). */
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

#ifdef __x86_64__
#include <immintrin.h>

/* the lowest m (clamped to 0..16) lanes of an AVX-512 mask: a row's last, partial vector */
static inline __mmask16 lanes(int m) {
    return m >= 16 ? 0xffff : m <= 0 ? 0 : (__mmask16)((1u << m) - 1);
}
#endif

static inline vec16 load16(const float *p) {
    vec16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store16(float *p, vec16 v) { memcpy(p, &v, sizeof v); }

/* written out, so that it compiles to one broadcast from memory ((vec16){0} + x does not: x + 0 is
 * not x for x = -0) */
static inline vec16 splat16(float x) { return (vec16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }

/* a vector of 16 taken from the 32 elements of a then b, by constant indices: GCC and Clang spell it
 * differently */
#ifdef __clang__
#define SHUFFLE16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int idx16 __attribute__((vector_size(64)));
#define SHUFFLE16(a, b, ...) __builtin_shuffle(a, b, (idx16){__VA_ARGS__})
#endif
#define INDICES(...) __VA_ARGS__

/* One round of transposing the lanes x lanes block in x: rows r and r + b swap their off-diagonal
 * blocks of b (row r takes x[r]'s columns outside the block and x[r + b]'s shifted in, row r + b the
 * others). Rounds of b = lanes / 2, ..., 2, 1 transpose it. */
#define SWAP_BLOCKS(type, lanes, shuffle, b, lo, hi)                                               \
    _Pragma("GCC unroll 16") for (int r = 0; r < (lanes); r++) if (!(r & (b))) {                 \
        type top = x[r], bottom = x[r + (b)];                                                      \
        x[r] = shuffle(top, bottom, lo);                                                           \
        x[r + (b)] = shuffle(top, bottom, hi);                                                     \
    }

/* the 16 x 16 block in x transposed */
static inline __attribute__((always_inline)) void transpose16(vec16 x[16]) {
    SWAP_BLOCKS(vec16, 16, SHUFFLE16, 8,
                INDICES(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                INDICES(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
    SWAP_BLOCKS(vec16, 16, SHUFFLE16, 4,
                INDICES(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                INDICES(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31));
    SWAP_BLOCKS(vec16, 16, SHUFFLE16, 2,
                INDICES(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                INDICES(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31));
    SWAP_BLOCKS(vec16, 16, SHUFFLE16, 1,
                INDICES(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                INDICES(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
}

/* ---- The machine's vector. A tile sized for AVX-512's 32 registers of 16 floats but built from
 * vec16 on AVX2 (16 registers of 8) holds twice as many live vectors as there are registers and
 * spills (the attention tiles were 46% of a DeiT inference): the tiles size themselves by VEC. ---- */
#ifdef __AVX512F__
#define VEC 16
#else
#define VEC 8
#endif
typedef float vecf __attribute__((vector_size(4 * VEC)));

/* v is used from a register: GCC otherwise folds a vector read by several FMAs into each of them as
 * a memory operand, and the attention's logits tile on AVX2 (8 accumulators) then waits on 12 loads
 * per 8 FMAs (DeiT's attention forward 1.13x with it). So do AVX-512's tiles on a core that loads
 * one zmm a cycle (Zen 4: 20 loads per 16 FMAs; DeiT's fp32 attention forward 1.15-1.25x with it
 * in the logits and product tiles). */
#if defined(__GNUC__) && defined(__AVX__)
#define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define KEEP_IN_REGISTER(v) ((void)0)
#endif

static inline vecf load_vec(const float *p) {
    vecf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store_vec(float *p, vecf v) { memcpy(p, &v, sizeof v); }

/* The first n lanes (n up to VEC) at p: a row's or a channel block's last vector may be partial.
 * Always inlined: a vector passed out of line changes the ABI in builds without the machine's
 * vector instructions, and GCC split load_lanes's memcpy branch into a function of its own that
 * returns one (-Wpsabi, an error under -Werror). */
static inline __attribute__((always_inline)) vecf load_lanes(const float *p, int n) {
    if (n == VEC) return load_vec(p);
#if VEC == 16
    return (vecf)_mm512_maskz_loadu_ps(lanes(n), p);
#else
    vecf v = {0};
    memcpy(&v, p, sizeof(float) * (size_t)n);
    return v;
#endif
}

static inline __attribute__((always_inline)) void store_lanes(float *p, vecf v, int n) {
    if (n == VEC) store_vec(p, v);
    else
#if VEC == 16
        _mm512_mask_storeu_ps(p, lanes(n), (__m512)v);
#else
        memcpy(p, &v, sizeof(float) * (size_t)n);
#endif
}

#if VEC == 16
static inline vecf splat(float x) { return splat16(x); }

/* the VEC x VEC block in x transposed */
static inline __attribute__((always_inline)) void transpose_vec(vecf x[VEC]) { transpose16(x); }
#else
static inline vecf splat(float x) { return (vecf){x, x, x, x, x, x, x, x}; }

#ifdef __clang__
#define SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int idx8 __attribute__((vector_size(32)));
#define SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, (idx8){__VA_ARGS__})
#endif

static inline __attribute__((always_inline)) void transpose_vec(vecf x[VEC]) {
    SWAP_BLOCKS(vecf, 8, SHUFFLE8, 4, INDICES(0, 1, 2, 3, 8, 9, 10, 11),
                INDICES(4, 5, 6, 7, 12, 13, 14, 15));
    SWAP_BLOCKS(vecf, 8, SHUFFLE8, 2, INDICES(0, 1, 8, 9, 4, 5, 12, 13),
                INDICES(2, 3, 10, 11, 6, 7, 14, 15));
    SWAP_BLOCKS(vecf, 8, SHUFFLE8, 1, INDICES(0, 8, 2, 10, 4, 12, 6, 14),
                INDICES(1, 9, 3, 11, 5, 13, 7, 15));
}
#endif
