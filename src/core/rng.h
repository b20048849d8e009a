/* Seeded random numbers: xoshiro256** seeded through splitmix64 from (seed, stream), so each purpose
 * (init, data order, augmentation, mixup, drop path, ...) has its own independent stream. */
#pragma once
#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
    /* for per-sample draws (drop path, dropout): the index in the whole batch of the first sample
     * drawn for (0 but in a data-parallel rank, which holds part of the batch) */
    int64_t first_sample;
} rng;

typedef enum {
    RNG_INIT = 1,
    RNG_DATA_ORDER,
    RNG_AUGMENT,
    RNG_MIXUP,
    RNG_DROP_PATH,
    RNG_DROPOUT,
    RNG_TEST,
    RNG_TRANSPORT, /* the diffusion objective's t and noise (after RNG_TEST: its value keeps) */
    RNG_SAMPLE,    /* a sampler's initial and injected noise */
    RNG_ANALYSIS   /* the query pairs of the attention redundancy score */
} rng_stream;

void rng_seed(rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_u64(rng *r);
uint32_t rng_below(rng *r, uint32_t n); /* uniform in [0, n) */
float rng_uniform(rng *r);              /* uniform in [0, 1) with 24 random bits */
double rng_uniform_f64(rng *r);         /* uniform in [0, 1) with 53 random bits */
float rng_normal(rng *r);               /* standard normal (Box-Muller) */
/* Gamma(shape, 1) (Marsaglia-Tsang) and Beta(a, b) from two gammas (mixup's lambda). */
double rng_gamma(rng *r, double shape);
double rng_beta(rng *r, double a, double b);
/* Normal(0, std) redrawn until inside [lo, hi], as timm's trunc_normal_ (bounds are absolute). */
float rng_trunc_normal(rng *r, float std, float lo, float hi);
