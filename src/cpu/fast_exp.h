/* e^x in plain arithmetic the compiler vectorises (libm's expf stops it), for softmax and GELU. */
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
