#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rng_seed(rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    r->first_sample = 0;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_u64(rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t rng_below(rng *r, uint32_t n) { return (uint32_t)(((rng_u64(r) >> 32) * (uint64_t)n) >> 32); }

float rng_uniform(rng *r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

double rng_uniform_f64(rng *r) { return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

float rng_normal(rng *r) {
    double u1 = 1.0 - rng_uniform_f64(r); /* (0, 1]: log is finite */
    double u2 = rng_uniform_f64(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

float rng_trunc_normal(rng *r, float std, float lo, float hi) {
    for (;;) {
        float v = std * rng_normal(r);
        if (v >= lo && v <= hi) return v;
    }
}

double rng_gamma(rng *r, double shape) {
    if (shape < 1.0) { /* boost: Gamma(a) = Gamma(a + 1) * U^(1/a) */
        double u = 1.0 - rng_uniform_f64(r);
        return rng_gamma(r, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_normal(r), v = 1.0 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = 1.0 - rng_uniform_f64(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}

double rng_beta(rng *r, double a, double b) {
    double x = rng_gamma(r, a), y = rng_gamma(r, b);
    return x / (x + y);
}
