/* The bfloat16 number and its conversions, inline so that the loops over them vectorize (the GELU
 * of a bf16 hidden layer widens it; bf16_round rounds this way on a CPU without AVX512_BF16). */
#pragma once
#include <stdint.h>
#include <string.h>

/* a bfloat16: the upper half of a float32's bits (8 exponent bits, 7 of mantissa) */
typedef uint16_t bf16;

/* rounded to nearest, ties to even, as PyTorch's .to(torch.bfloat16); out of range becomes ±inf;
 * a NaN stays a NaN of the same sign, made quiet (PyTorch gives 0x7fc0 for every NaN); a subnormal
 * (|x| < 2^-126) becomes a signed 0, where PyTorch keeps a bf16 subnormal: bit for bit what
 * vcvtne2ps2bf16 does, so that scalar code and the packing agree, and what vitc's FTZ/DAZ mode and
 * vdpbf16ps (which reads bf16 subnormals as 0) do anyway. Selects, not branches: a loop over it
 * vectorizes. */
static inline bf16 bf16_from_float(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    /* adding 0x7fff rounds up what lies above half an ulp of the kept bits; the kept lowest bit
     * makes an exact half round up when that bit is odd: to even. A carry into the exponent is
     * right too (up to inf). Rounding would carry a NaN's mantissa into the exponent (or the
     * sign): a NaN is made quiet instead. */
    uint32_t rounded = (u + 0x7fff + (u >> 16 & 1)) >> 16, quiet = (u | 0x400000) >> 16;
    uint32_t bits = (u & 0x7fffffff) > 0x7f800000 ? quiet
                    : (u & 0x7f800000) == 0       ? u >> 16 & 0x8000 /* subnormal: a signed 0 */
                                                  : rounded;
    return (bf16)bits;
}

static inline float bf16_to_float(bf16 h) { /* exact */
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
