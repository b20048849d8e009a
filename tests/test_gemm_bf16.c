/* bf16 GEMM: rounding to bf16 (ties, NaN, inf, subnormals), the vdpbf16ps kernel bit for bit
 * against a scalar reference that sums in its documented order, the AMX kernel (whose order within
 * a chunk is the hardware's) bit for bit where every order gives the same sums, and both against
 * the fp32 GEMM within the error bound of bf16 operands; the CPU probe and its message. Kernel
 * tests skip on a CPU without AVX512_BF16, the AMX kernel's on one without AMX-BF16. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../src/core/cpu_features.h"
#include "../src/cpu/bf16_store.h"
#include "../src/cpu/gemm_bf16.h"
#include "../src/cpu/matmul.h"
#include "test.h"

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static bf16 round_bits(uint32_t u) { return bf16_from_float(from_bits(u)); }

TEST(bf16_rounds_to_nearest_even) {
    static const uint32_t in[][2] = {
        {0x3f800000, 0x3f80}, /* 1 */
        {0x3f808000, 0x3f80}, /* halfway between 0x3f80 and 0x3f81: to the even one, down */
        {0x3f818000, 0x3f82}, /* halfway between 0x3f81 and 0x3f82: to the even one, up */
        {0x3f808001, 0x3f81}, /* just above half */
        {0x3f807fff, 0x3f80}, /* just below half */
        {0xbf808000, 0xbf80}, /* ties keep the sign */
        {0xbf818000, 0xbf82},
        {0x3fffc000, 0x4000}, /* the carry reaches the exponent: 1.99 -> 2 */
        {0x7f7f7fff, 0x7f7f}, /* the largest that stays finite */
        {0x7f7fffff, 0x7f80}, /* FLT_MAX rounds to inf */
        {0xff7fffff, 0xff80},
        {0x7f800000, 0x7f80}, /* inf */
        {0xff800000, 0xff80},
        {0x00000000, 0x0000},
        {0x80000000, 0x8000}, /* -0 */
        {0x00800000, 0x0080}, /* the smallest normal */
        {0x00808000, 0x0080}, /* a tie there */
        {0x00000001, 0x0000}, /* subnormals become 0, keeping the sign */
        {0x00400000, 0x0000},
        {0x807fffff, 0x8000}, /* even the largest, which would round up to the smallest normal */
        {0x80000001, 0x8000},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        EXPECT(round_bits(in[i][0]) == in[i][1], "0x%08x -> 0x%04x, want 0x%04x", in[i][0],
               round_bits(in[i][0]), in[i][1]);
}

TEST(bf16_keeps_nan_sign_and_makes_it_quiet) {
    static const uint32_t in[][2] = {
        {0x7fc00000, 0x7fc0}, /* quiet */
        {0x7f800001, 0x7fc0}, /* signalling, payload only in the dropped bits: still a NaN */
        {0x7fbfffff, 0x7fff}, /* rounding would have carried into the sign */
        {0xffffffff, 0xffff},
        {0xff800001, 0xffc0}, /* negative */
        {0x7fa50000, 0x7fe5}, /* payload's top kept */
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        EXPECT(round_bits(in[i][0]) == in[i][1], "0x%08x -> 0x%04x, want 0x%04x", in[i][0],
               round_bits(in[i][0]), in[i][1]);
}

TEST(bf16_round_trip_of_every_bf16) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        float x = bf16_to_float((bf16)h);
        EXPECT(bits(x) == h << 16, "0x%04x widens to 0x%08x", h, bits(x));
        bf16 want = isnan(x) ? (bf16)(h | 0x40) : (h & 0x7f80) == 0 ? (bf16)(h & 0x8000) : (bf16)h;
        bf16 back = bf16_from_float(x);
        EXPECT(back == want, "0x%04x -> 0x%04x, want 0x%04x", h, back, want);
    }
}

TEST(bf16_cpu_probe_and_message) {
    bool has = cpu_has_avx512_bf16();
    EXPECT(has == (cpu_bf16_error() == NULL), "probe %d, message %s", has,
           cpu_bf16_error() ? cpu_bf16_error() : "(none)");
    FILE *f = fopen("/proc/cpuinfo", "r"); /* Linux's view of the same flag */
    if (f) {
        char line[4096];
        bool listed = false;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "flags", 5)) {
                listed = strstr(line, " avx512_bf16") != NULL;
                break;
            }
        fclose(f);
        EXPECT(has == listed, "CPUID says %d, /proc/cpuinfo %d", has, listed);
    }
    cpu_features old = {.x86_64 = true, .avx512f = true, .avx512bw = true, .avx512vl = true,
                        .os_avx512 = true, .brand = "Intel(R) Xeon(R) Gold 6148"};
    char buf[400];
    const char *m = cpu_bf16_problem(&old, buf, sizeof buf);
    EXPECT(m && strstr(m, "--precision bf16") && strstr(m, "AVX512_BF16") &&
               strstr(m, "Xeon(R) Gold 6148") && strstr(m, "--precision fp32"),
           "%s", m ? m : "(none)");
    old.avx512_bf16 = true;
    EXPECT(cpu_bf16_problem(&old, buf, sizeof buf) == NULL, "a CPU with every feature");
    old.os_avx512 = false;
    m = cpu_bf16_problem(&old, buf, sizeof buf);
    EXPECT(m && strstr(m, "operating system"), "%s", m ? m : "(none)");
}

#define NEEDS_BF16()                                                                               \
    do {                                                                                           \
        if (!cpu_has_avx512_bf16()) SKIP("needs AVX512_BF16 (vdpbf16ps), which this CPU lacks");  \
    } while (0)

#define NEEDS_AMX()                                                                                \
    do {                                                                                           \
        NEEDS_BF16();                                                                              \
        if (!gemm_bf16_amx_here())                                                                 \
            SKIP("needs AMX-BF16 (tdpbf16ps), which this CPU or build lacks");                    \
    } while (0)

static float *randn(rng *r, size_t n, float scale) {
    float *p = arena_alloc(&vitc_arena, n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = scale * rng_normal(r);
    return p;
}

/* the vector rounding of the packing (vcvtne2ps2bf16) against bf16_from_float, on values around
 * every rounding case: the plain row-major pack of an even K is the bf16 matrix itself */
TEST(bf16_packing_rounds_as_the_scalar_conversion) {
    NEEDS_BF16();
    rng r;
    rng_seed(&r, 10, RNG_TEST);
    enum { M = 3, K = 4096 };
    float *x = arena_alloc(&vitc_arena, sizeof(float) * M * K);
    for (int i = 0; i < M * K; i++) { /* random bits near ties, NaN, inf and subnormals */
        uint32_t u = (uint32_t)(rng_uniform_f64(&r) * 4294967296.0);
        if (i % 4 == 1) u = (u & 0xffff0000) | 0x8000;
        if (i % 8 == 2) u &= 0x807fffff;
        if (i % 16 == 3) u |= 0x7f800000;
        x[i] = from_bits(u);
    }
    bf16 *packed = arena_alloc(&vitc_arena, sizeof(bf16) * gemm_bf16_a_size(M, K));
    gemm_bf16_pack_a(packed, false, M, K, x, K, 1);
    for (int i = 0; i < M * K; i++)
        EXPECT(packed[i] == bf16_from_float(x[i]), "0x%08x packs to 0x%04x, rounds to 0x%04x",
               bits(x[i]), packed[i], bf16_from_float(x[i]));
}

/* bf16_store (the storage form of saved activations) rounds as bf16_from_float and leaves the
 * rounded values in its source; bf16_load gives them back exactly. On a CPU without AVX512_BF16
 * this checks the scalar path, which is what runs there. */
TEST(bf16_store_rounds_as_the_scalar_conversion) {
    rng r;
    rng_seed(&r, 11, RNG_TEST);
    enum { N = 4099 }; /* not a multiple of 16: the masked tail */
    float *x = arena_alloc(&vitc_arena, sizeof(float) * N), *kept = arena_alloc(&vitc_arena, sizeof(float) * N);
    float *back = arena_alloc(&vitc_arena, sizeof(float) * N);
    bf16 *h = arena_alloc(&vitc_arena, sizeof(bf16) * (N + 1));
    for (int i = 0; i < N; i++) { /* as the packing test: ties, NaN, inf, subnormals */
        uint32_t u = (uint32_t)(rng_uniform_f64(&r) * 4294967296.0);
        if (i % 4 == 1) u = (u & 0xffff0000) | 0x8000;
        if (i % 8 == 2) u &= 0x807fffff;
        if (i % 16 == 3) u |= 0x7f800000;
        x[i] = kept[i] = from_bits(u);
    }
    h[N] = 0x1234; /* past the end: untouched */
    bf16_store(h, x, N);
    bf16_load(back, h, N);
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        bf16 want = bf16_from_float(kept[i]);
        wrong += h[i] != want || bits(x[i]) != bits(bf16_to_float(want)) || bits(back[i]) != bits(x[i]);
        if (h[i] != want) fprintf(stderr, "    0x%08x stored as 0x%04x, rounds to 0x%04x\n", bits(kept[i]), h[i], want);
    }
    EXPECT(wrong == 0 && h[N] == 0x1234, "%d of %d values stored, kept or loaded wrong; past the end 0x%04x", wrong,
           N, h[N]);
}

/* op(A)[i][k] and op(B)[k][j] of the stored operands, rounded to bf16 */
static float a_at(bool ta, const float *A, int lda, int i, int k) {
    return bf16_to_float(bf16_from_float(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]));
}
static float b_at(bool tb, const float *B, int ldb, int k, int j) {
    return bf16_to_float(bf16_from_float(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]));
}

/* element (i, j) of a part of K, k_begin..k_end, as gemm_bf16.h sums it from c */
static float part_reference(bool ta, bool tb, int i, int j, int k_begin, int k_end, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta, float c) {
    for (int k0 = k_begin; k0 < k_end; k0 += GEMM_BF16_KC) {
        int k1 = k_end - k0 < GEMM_BF16_KC ? k_end : k0 + GEMM_BF16_KC;
        float s = 0.0f;
        for (int k = k0; k < k1; k += 2) {
            float a1 = k + 1 < k1 ? a_at(ta, A, lda, i, k + 1) : 0.0f;
            float b1 = k + 1 < k1 ? b_at(tb, B, ldb, k + 1, j) : 0.0f;
            s += a1 * b1; /* exact products: contracting to an fma changes nothing */
            s += a_at(ta, A, lda, i, k) * b_at(tb, B, ldb, k, j);
        }
        if (k0 > k_begin) c = fmaf(alpha, s, c);
        else c = beta == 0.0f ? alpha * s : fmaf(alpha, s, beta * c);
    }
    return c;
}

/* the parts of K of gemm_bf16.h: P and where part p starts */
static int reference_parts(bool ta, int M, int K) {
    int parts = 1;
    while (ta && M <= GEMM_BF16_PARTS_MAX_ROWS && 2 * parts <= GEMM_BF16_PARTS_MAX &&
           2 * parts * GEMM_BF16_PART_MIN <= K)
        parts *= 2;
    return parts;
}
static int reference_part_start(int K, int p, int parts) {
    int blocks = (K + GEMM_BF16_KC - 1) / GEMM_BF16_KC, k = blocks * p / parts * GEMM_BF16_KC;
    return k < K ? k : K;
}

/* the order of gemm_bf16.h, one element at a time */
static void gemm_bf16_reference(bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                                int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    int parts = reference_parts(ta, M, K);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float *c = C + (size_t)i * ldc + j;
            if (K == 0) *c = beta == 0.0f ? 0.0f : beta * *c;
            *c = part_reference(ta, tb, i, j, 0, reference_part_start(K, 1, parts), alpha, A, lda,
                                B, ldb, beta, *c);
            for (int p = 1; p < parts; p++)
                *c += part_reference(ta, tb, i, j, reference_part_start(K, p, parts),
                                     reference_part_start(K, p + 1, parts), alpha, A, lda, B, ldb,
                                     0.0f, 0.0f);
        }
}

static bool same(float x, float y) { return bits(x) == bits(y) || (isnan(x) && isnan(y)); }

typedef struct shape {
    int M, N, K;
} shape;

/* odd sizes around the tiles (6 rows, 32 columns), row blocks (192), the blocks of K, the thread
 * split (rows from 512, else panels) and the parts of K (transposed A: 2 parts, and 4 of uneven
 * blocks with a short last one) */
enum { KC = GEMM_BF16_KC };
static const shape shapes[] = {{1, 1, 1},          {5, 7, 2},          {13, 37, 21},
                               {7, 5, 2 * KC + 1}, {31, 70, KC + 217}, {200, 33, 3},
                               {515, 41, KC + 1},  {6, 96, KC},        {9, 33, 8 * KC + 3},
                               {3, 40, 18 * KC + 101}};

/* n small integers (-8..8) and halves of them: every sum of up to 2^16 of their products, in any
 * order, is exact in fp32 */
static float *small_integers(rng *r, size_t n) {
    float *p = arena_alloc(&vitc_arena, n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)((int)(rng_uniform(r) * 17) - 8) * 0.5f;
    return p;
}

/* gemm_bf16 and gemm_bf16_packed against the reference, bit for bit, with strides past the rows;
 * with exact_sums, on operands and a C whose sums every order gives alike (the AMX kernel's test:
 * with alpha 1 its tiles start from C) */
static void check_exact(rng *r, bool ta, bool tb, shape s, float alpha, float beta, int threads,
                        bool specials, bool exact_sums) {
    int lda = (ta ? s.M : s.K) + 3, ldb = (tb ? s.K : s.N) + 2, ldc = s.N + 1;
    size_t na = (size_t)(ta ? s.K : s.M) * lda, nb = (size_t)(tb ? s.N : s.K) * ldb,
           nc = (size_t)s.M * ldc;
    float *A = exact_sums ? small_integers(r, na) : randn(r, na, 1),
          *B = exact_sums ? small_integers(r, nb) : randn(r, nb, 1),
          *C0 = exact_sums ? small_integers(r, nc) : randn(r, nc, 1);
    if (specials) { /* inf and NaN travel as in the reference; beta 0 never reads C's NaN */
        A[na / 2] = INFINITY, B[nb / 3] = NAN, A[0] = -INFINITY;
        if (beta == 0.0f) C0[nc / 2] = NAN;
    }
    float *want = arena_alloc(&vitc_arena, nc * sizeof(float)),
          *got = arena_alloc(&vitc_arena, nc * sizeof(float)),
          *got_packed = arena_alloc(&vitc_arena, nc * sizeof(float));
    memcpy(want, C0, nc * sizeof(float));
    memcpy(got, C0, nc * sizeof(float));
    memcpy(got_packed, C0, nc * sizeof(float));
    gemm_bf16_reference(ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, beta, want, ldc);
    gemm_bf16(ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, beta, got, ldc, threads);
    bf16 *ap = arena_alloc(&vitc_arena, gemm_bf16_a_size(s.M, s.K) * sizeof(bf16) + 1),
         *bp = arena_alloc(&vitc_arena, gemm_bf16_b_size(s.N, s.K) * sizeof(bf16) + 1);
    gemm_bf16_pack_a(ap, ta, s.M, s.K, A, lda, threads);
    gemm_bf16_pack_b(bp, tb, s.N, s.K, B, ldb, threads);
    gemm_bf16_packed(ta, s.M, s.N, s.K, alpha, ap, bp, beta, got_packed, ldc, threads);
    for (int i = 0; i < s.M; i++)
        for (int j = 0; j < ldc; j++) {
            size_t o = (size_t)i * ldc + j;
            EXPECT(same(got[o], want[o]) && same(got_packed[o], want[o]),
                   "trans %d%d %dx%dx%d alpha %g beta %g threads %d: C[%d][%d] = %a (packed %a), "
                   "want %a",
                   ta, tb, s.M, s.N, s.K, alpha, beta, threads, i, j, got[o], got_packed[o],
                   want[o]);
        }
}

/* vdpbf16ps's kernel (gemm_bf16_allow_amx(false)) against the reference in its order, and the AMX
 * kernel against it where the sums are exact: with its own order the packing, blocks, edges,
 * alpha, beta and specials must still give the reference's bits */
static void check_orders(uint64_t seed, bool amx) {
    rng r;
    rng_seed(&r, seed, RNG_TEST);
    bool was = gemm_bf16_allow_amx(amx);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !test_failed(); i++)
        for (int t = 0; t < 4 && !test_failed(); t++)
            check_exact(&r, t & 1, t >> 1, shapes[i], 1.0f, 0.0f, 2, false, amx);
    static const float ab[][2] = {{0.75f, 0.0f}, {1.0f, 1.0f}, {-1.5f, 0.5f}};
    static const shape few[] = {{13, 37, 21}, {515, 41, KC + 1}, {3, 4, 0},         {0, 5, 3},
                                {5, 3, 8 * KC + 1}, {0, 3, 8 * KC},   {4, 0, 8 * KC}};
    for (size_t i = 0; i < sizeof few / sizeof few[0] && !test_failed(); i++)
        for (int t = 0; t < 4 && !test_failed(); t++)
            for (int v = 0; v < 3 && !test_failed(); v++)
                for (int threads = 1; threads <= 2 && !test_failed(); threads++)
                    check_exact(&r, t & 1, t >> 1, few[i], ab[v][0], ab[v][1], threads, v == 0,
                                amx);
    gemm_bf16_allow_amx(was);
}

TEST(bf16_gemm_sums_in_the_documented_order) {
    NEEDS_BF16();
    check_orders(11, false);
}

TEST(bf16_gemm_amx_gives_the_reference_where_every_order_is_exact) {
    NEEDS_AMX();
    check_orders(12, true);
}

/* The AMX kernel's own sums, on random operands: the same bits on one thread, two (rows split, or
 * panels, or a part of K each) and four (two to a part) and from the packed operands */
TEST(bf16_gemm_amx_same_bits_whatever_the_threads) {
    NEEDS_AMX();
    rng r;
    rng_seed(&r, 15, RNG_TEST);
    static const shape split[] = {{515, 41, KC + 1}, {40, 300, 2 * KC + 33}, {3152, 96, 64},
                                  {40, 70, 8 * KC + 33}};
    for (size_t i = 0; i < sizeof split / sizeof split[0] && !test_failed(); i++)
        for (int t = 0; t < 4 && !test_failed(); t++) {
            bool ta = t & 1, tb = t >> 1;
            shape s = split[i];
            int lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N;
            size_t nc = (size_t)s.M * s.N;
            float *A = randn(&r, (size_t)s.M * s.K, 1), *B = randn(&r, (size_t)s.K * s.N, 1);
            float *one = arena_alloc(&vitc_arena, nc * sizeof(float)),
                  *two = arena_alloc(&vitc_arena, nc * sizeof(float)),
                  *four = arena_alloc(&vitc_arena, nc * sizeof(float)),
                  *packed = arena_alloc(&vitc_arena, nc * sizeof(float));
            gemm_bf16(ta, tb, s.M, s.N, s.K, 1.0f, A, lda, B, ldb, 0.0f, one, s.N, 1);
            gemm_bf16(ta, tb, s.M, s.N, s.K, 1.0f, A, lda, B, ldb, 0.0f, two, s.N, 2);
            gemm_bf16(ta, tb, s.M, s.N, s.K, 1.0f, A, lda, B, ldb, 0.0f, four, s.N, 4);
            bf16 *ap = arena_alloc(&vitc_arena, gemm_bf16_a_size(s.M, s.K) * sizeof(bf16)),
                 *bp = arena_alloc(&vitc_arena, gemm_bf16_b_size(s.N, s.K) * sizeof(bf16));
            gemm_bf16_pack_a(ap, ta, s.M, s.K, A, lda, 2);
            gemm_bf16_pack_b(bp, tb, s.N, s.K, B, ldb, 2);
            gemm_bf16_packed(ta, s.M, s.N, s.K, 1.0f, ap, bp, 0.0f, packed, s.N, 2);
            for (size_t o = 0; o < nc; o++)
                EXPECT(same(one[o], two[o]) && same(one[o], four[o]) && same(one[o], packed[o]),
                       "trans %d%d %dx%dx%d: C[%zu] = %a on 1 thread, %a on 2, %a on 4, %a packed",
                       ta, tb, s.M, s.N, s.K, o, one[o], two[o], four[o], packed[o]);
        }
    arena_reset(&vitc_arena);
}

/* gemm_bf16_bias is bit for bit C preset to the bias's rows with beta 1, the linear layer's
 * forward before it, on every shape, transposition and thread count (K = 0: C is the bias) */
TEST(bf16_gemm_bias_epilogue_is_the_preset_bias) {
    NEEDS_BF16();
    rng r;
    rng_seed(&r, 13, RNG_TEST);
    static const shape more[] = {{3, 4, 0}, {515, 70, 2 * KC + 5}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] + 2; i++) {
        shape s = i < sizeof shapes / sizeof shapes[0] ? shapes[i] : more[i - sizeof shapes / sizeof shapes[0]];
        for (int t = 0; t < 8; t++) /* alpha 1 too: AMX's tiles then start from the bias */
            for (int threads = 1; threads <= 2; threads++) {
                bool ta = t & 1, tb = t >> 1 & 1;
                float alpha = t < 4 ? 0.75f : 1.0f;
                int lda = (ta ? s.M : s.K) + 3, ldb = (tb ? s.K : s.N) + 2, ldc = s.N + 1;
                size_t nc = (size_t)s.M * ldc;
                float *A = randn(&r, (size_t)(ta ? s.K : s.M) * lda, 1);
                float *B = randn(&r, (size_t)(tb ? s.N : s.K) * ldb, 1), *bias = randn(&r, s.N, 1);
                float *want = randn(&r, nc, 1), *got = arena_alloc(&vitc_arena, nc * sizeof(float));
                memcpy(got, want, nc * sizeof(float));
                for (int m = 0; m < s.M; m++) memcpy(want + (size_t)m * ldc, bias, sizeof(float) * s.N);
                gemm_bf16(ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, 1.0f, want, ldc, threads);
                gemm_bf16_bias(ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, bias, got, ldc,
                               threads);
                for (size_t o = 0; o < nc; o++)
                    EXPECT(same(got[o], want[o]), "trans %d%d %dx%dx%d threads %d: C[%zu] = %a, want %a",
                           ta, tb, s.M, s.N, s.K, threads, o, got[o], want[o]);
                if (test_failed()) return;
            }
    }
}

/* A layer's weights packed once (the MLP's row chunks) give each product the bits of packing them
 * per product: with a bias, and without (beta 0), on both kernels where the CPU has AMX */
TEST(bf16_gemm_packed_weights_give_the_bits_of_packing_per_product) {
    NEEDS_BF16();
    rng r;
    rng_seed(&r, 14, RNG_TEST);
    bool was = gemm_bf16_uses_amx();
    for (int amx = 0; amx <= (int)gemm_bf16_amx_here(); amx++) {
        gemm_bf16_allow_amx(amx);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int t = 0; t < 4; t++)
                for (int threads = 1; threads <= 2; threads++) {
                    shape s = shapes[i];
                    bool tb = t & 1, with_bias = t & 2;
                    int lda = s.K + 3, ldb = (tb ? s.K : s.N) + 2, ldc = s.N + 1;
                    size_t nc = (size_t)s.M * ldc;
                    float *A = randn(&r, (size_t)s.M * lda, 1);
                    float *B = randn(&r, (size_t)(tb ? s.N : s.K) * ldb, 1);
                    float *bias = with_bias ? randn(&r, s.N, 1) : NULL;
                    float *want = randn(&r, nc, 1), *got = arena_alloc(&vitc_arena, nc * sizeof(float));
                    memcpy(got, want, nc * sizeof(float));
                    bf16 *bp = arena_alloc(&vitc_arena, gemm_bf16_b_size(s.N, s.K) * sizeof(bf16));
                    if (bias)
                        gemm_bf16_bias(false, tb, s.M, s.N, s.K, 1.0f, A, lda, B, ldb, bias, want, ldc,
                                       threads);
                    else
                        gemm_bf16(false, tb, s.M, s.N, s.K, 1.0f, A, lda, B, ldb, 0.0f, want, ldc,
                                  threads);
                    gemm_bf16_pack_b(bp, tb, s.N, s.K, B, ldb, threads);
                    gemm_bf16_packed_b_bias(s.M, s.N, s.K, A, lda, bp, bias, got, ldc, threads);
                    for (size_t o = 0; o < nc; o++)
                        EXPECT(same(got[o], want[o]),
                               "%s trans_b %d bias %d %dx%dx%d threads %d: C[%zu] = %a, want %a",
                               amx ? "amx" : "vdpbf16ps", tb, with_bias, s.M, s.N, s.K, threads, o,
                               got[o], want[o]);
                    if (test_failed()) return;
                }
    }
    gemm_bf16_allow_amx(was);
}

/* Each operand's rounding errs by at most u = 2^-8 relative, so a product of two by 2u + u^2; fp32
 * sums of K terms add at most K 2^-24 of the sum of |products| (both for the kernel and the fp32
 * GEMM). Per element: |bf16 - fp32| <= |alpha| (2u + u^2 + 2 K 2^-24) sum |a b| + 2^-23 |C|. */
static void check_within_bf16_error(bool amx) {
    rng r;
    rng_seed(&r, 13, RNG_TEST);
    const float alpha = 0.5f, beta = 1.0f, u = 1.0f / 256;
    const shape s = {97, 75, 1001};
    bool was = gemm_bf16_allow_amx(amx);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t >> 1;
        int lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N;
        float *A = randn(&r, (size_t)s.M * s.K, 1), *B = randn(&r, (size_t)s.K * s.N, 1),
              *C = randn(&r, (size_t)s.M * s.N, 1),
              *ref = arena_alloc(&vitc_arena, sizeof(float) * s.M * s.N);
        memcpy(ref, C, sizeof(float) * s.M * s.N);
        gemm_strided(ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, beta, ref, s.N);
        float *c0 = arena_alloc(&vitc_arena, sizeof(float) * s.M * s.N);
        memcpy(c0, C, sizeof(float) * s.M * s.N);
        gemm_bf16(ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, beta, C, s.N, 2);
        double worst = 0, rms = 0, scale = 0;
        for (int i = 0; i < s.M; i++)
            for (int j = 0; j < s.N; j++) {
                double abs_sum = 0;
                for (int k = 0; k < s.K; k++)
                    abs_sum += fabs((double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                                    (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]));
                size_t o = (size_t)i * s.N + j;
                double err = fabs((double)C[o] - ref[o]),
                       bound = fabs(alpha) * (2 * u + u * u + 2 * s.K * 0x1p-24) * abs_sum +
                               0x1p-23 * fabs(c0[o]);
                EXPECT(err <= bound, "%s trans %d%d C[%d][%d]: bf16 %g fp32 %g, bound %g",
                       amx ? "amx" : "vdpbf16ps", ta, tb, i, j, C[o], ref[o], bound);
                worst = max_error(worst, err / bound), rms += err * err, scale += ref[o] * ref[o];
            }
        /* independent roundings: typical errors are far below the worst case, about u / sqrt(3)
         * of each product's size summed in quadrature */
        EXPECT(sqrt(rms / scale) < 0.01,
               "%s trans %d%d: relative rms error %g (worst %.2f of the bound)",
               amx ? "amx" : "vdpbf16ps", ta, tb, sqrt(rms / scale), worst);
    }
    gemm_bf16_allow_amx(was);
}

TEST(bf16_gemm_within_bf16_error_of_fp32) {
    NEEDS_BF16();
    check_within_bf16_error(false);
}

TEST(bf16_gemm_amx_within_bf16_error_of_fp32) {
    NEEDS_AMX();
    check_within_bf16_error(true);
}

TEST(bf16_gemm_reads_subnormal_operands_as_zero) {
    NEEDS_BF16();
    /* 1e-39 is subnormal: rounded to bf16 it becomes 0, so 1e-39 * 1e38 gives 0, not 0.1,
     * whatever MXCSR says */
    float A[2] = {1e-39f, 0.0f}, B[2] = {1e38f, 0.0f}, C[1] = {5.0f};
    gemm_bf16(false, true, 1, 1, 2, 1.0f, A, 2, B, 2, 0.0f, C, 1, 1);
    EXPECT(C[0] == 0.0f, "C = %g", C[0]);
}

/* n values of x rounded and kept in bf16, and x set to their values as floats */
static bf16 *kept_bf16(float *x, size_t n) {
    bf16 *h = arena_alloc(&vitc_arena, n * sizeof(bf16) + 2);
    for (size_t i = 0; i < n; i++) h[i] = bf16_from_float(x[i]), x[i] = bf16_to_float(h[i]);
    return h;
}

/* An operand kept in bf16 (a linear layer's input under --precision bf16) gives the sums of
 * gemm_bf16 on its values as floats, bit for bit: A read in place (even K and stride) or packed
 * (odd), B packed from its pairs, with and without a bias, on every thread split */
TEST(bf16_gemm_reads_bf16_operands_as_stored) {
    NEEDS_BF16();
    rng r;
    rng_seed(&r, 14, RNG_TEST);
    static const shape more[] = {{515, 70, 2 * KC + 4}, {600, 288, 96}, {96, 288, 600}};
    enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };
    for (int i = 0; i < N_SHAPES + 3; i++) {
        shape s = i < N_SHAPES ? shapes[i] : more[i - N_SHAPES];
        for (int v = 0; v < 4; v++)
            for (int threads = 1; threads <= 2; threads++) {
                bool t = v & 1, with_bias = v >> 1;
                int lda = s.K + (v == 1 ? 1 : 0), ldb_f = (t ? s.K : s.N) + 2, ldc = s.N + 1;
                size_t nc = (size_t)s.M * ldc;
                float *A = randn(&r, (size_t)s.M * lda, 1), *B = randn(&r, (size_t)(t ? s.N : s.K) * ldb_f, 1);
                float *bias = with_bias ? randn(&r, s.N, 1) : NULL;
                bf16 *A16 = kept_bf16(A, (size_t)s.M * lda);
                for (int m = 0; m < s.M && lda > s.K; m++) /* columns past K are never read */
                    A16[(size_t)m * lda + s.K] = bf16_from_float(INFINITY);
                float *want = randn(&r, nc, 1), *got = arena_alloc(&vitc_arena, nc * sizeof(float));
                memcpy(got, want, nc * sizeof(float));
                if (bias) gemm_bf16_bias(false, t, s.M, s.N, s.K, 1.0f, A, lda, B, ldb_f, bias, want, ldc, threads);
                else gemm_bf16(false, t, s.M, s.N, s.K, 1.0f, A, lda, B, ldb_f, 0.0f, want, ldc, threads);
                gemm_bf16_a16_bias(t, s.M, s.N, s.K, A16, lda, B, ldb_f, bias, got, ldc, threads);
                for (size_t o = 0; o < nc; o++)
                    EXPECT(same(got[o], want[o]), "A in bf16, lda %d, trans_b %d, bias %d, %dx%dx%d threads %d: "
                           "C[%zu] = %a, want %a", lda, t, with_bias, s.M, s.N, s.K, threads, o, got[o], want[o]);
                /* and against B packed beforehand (the MLP step's fc2 on its bf16 activation) */
                bf16 *bp = arena_alloc(&vitc_arena, gemm_bf16_b_size(s.N, s.K) * sizeof(bf16));
                gemm_bf16_pack_b(bp, t, s.N, s.K, B, ldb_f, threads);
                memset(got, 0xff, nc * sizeof(float)); /* NaN: C is not read */
                gemm_bf16_a16_packed_b_bias(s.M, s.N, s.K, A16, lda, bp, bias, got, ldc, threads);
                for (int m = 0; m < s.M; m++)
                    for (int n = 0; n < s.N; n++) {
                        size_t o = (size_t)m * ldc + n;
                        EXPECT(same(got[o], want[o]),
                               "A in bf16, B packed, lda %d, trans_b %d, bias %d, %dx%dx%d "
                               "threads %d: C[%zu] = %a, want %a",
                               lda, t, with_bias, s.M, s.N, s.K, threads, o, got[o], want[o]);
                    }
                /* B (K, N) kept in bf16, A fp32 either way, accumulating into C */
                int lda_f = (t ? s.M : s.K) + 3, ldb = s.N + (v == 1 ? 1 : 0);
                float *A2 = randn(&r, (size_t)(t ? s.K : s.M) * lda_f, 1), *B2 = randn(&r, (size_t)s.K * ldb, 1);
                bf16 *B16 = kept_bf16(B2, (size_t)s.K * ldb);
                for (int k = 0; k < s.K && ldb > s.N; k++) B16[(size_t)k * ldb + s.N] = bf16_from_float(NAN);
                memcpy(got, want, nc * sizeof(float));
                gemm_bf16(t, false, s.M, s.N, s.K, 0.75f, A2, lda_f, B2, ldb, 1.0f, want, ldc, threads);
                gemm_bf16_b16(t, s.M, s.N, s.K, 0.75f, A2, lda_f, B16, ldb, 1.0f, got, ldc, threads);
                for (size_t o = 0; o < nc; o++)
                    EXPECT(same(got[o], want[o]), "B in bf16, ldb %d, trans_a %d, %dx%dx%d threads %d: "
                           "C[%zu] = %a, want %a", ldb, t, s.M, s.N, s.K, threads, o, got[o], want[o]);
                /* A kept in bf16 either way round (a gradient: dx = dy w, dw = dyᵀ x), with beta */
                int rows_a = t ? s.K : s.M, cols_a = t ? s.M : s.K, lda3 = cols_a + (v == 1 ? 1 : 0);
                float *A3 = randn(&r, (size_t)rows_a * lda3, 1);
                bf16 *A3_16 = kept_bf16(A3, (size_t)rows_a * lda3);
                for (int m = 0; m < rows_a && lda3 > cols_a; m++)
                    A3_16[(size_t)m * lda3 + cols_a] = bf16_from_float(INFINITY);
                memcpy(got, want, nc * sizeof(float));
                gemm_bf16(t, false, s.M, s.N, s.K, 0.75f, A3, lda3, B2, ldb, 1.0f, want, ldc, threads);
                gemm_bf16_a16(t, false, s.M, s.N, s.K, 0.75f, A3_16, lda3, B2, ldb, 1.0f, got, ldc,
                              threads);
                for (size_t o = 0; o < nc; o++)
                    EXPECT(same(got[o], want[o]), "A in bf16, lda %d, trans_a %d, %dx%dx%d threads %d: "
                           "C[%zu] = %a, want %a", lda3, t, s.M, s.N, s.K, threads, o, got[o], want[o]);
                if (test_failed()) return;
            }
    }
    arena_reset(&vitc_arena);
}

/* A stored as blocks side by side (the gradients of q, k and v, each its own matrix) gives the bits
 * of gemm_bf16_a16 on the one matrix they make, both ways round, B in fp32 or bf16, on one thread
 * or two (thread splits of the turned A that fall inside a run of 16 rows), on AMX or not */
static void check_a_blocks(bool amx) {
    rng r;
    rng_seed(&r, 15, RNG_TEST);
    bool was = gemm_bf16_allow_amx(amx);
    static const struct { int M, K, chunks, cols; } cases[] = {
        {200, 40, 3, 64}, {77, 96, 3, 96}, {50, 24, 2, 32}, {1000, 20, 6, 32}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int M = cases[c].M, K = cases[c].K, chunks = cases[c].chunks, N = cases[c].cols;
        int W = chunks * N;
        float *G = randn(&r, (size_t)M * W, 1), *w = randn(&r, (size_t)W * K, 1);
        float *x = randn(&r, (size_t)M * K, 1);
        bf16 *G16 = kept_bf16(G, (size_t)M * W), *x16 = kept_bf16(x, (size_t)M * K);
        const bf16 *blocks[6];
        for (int i = 0; i < chunks; i++) {
            bf16 *b = arena_alloc(&vitc_arena, (size_t)M * N * sizeof(bf16));
            for (int m = 0; m < M; m++) memcpy(b + (size_t)m * N, G16 + (size_t)m * W + i * N, N * sizeof(bf16));
            blocks[i] = b;
        }
        for (int threads = 1; threads <= 2; threads++)
            for (int t = 0; t < 2; t++)
                for (int b16 = 0; b16 < 2; b16++) {
                    int rows = t ? W : M, cols = K, inner = t ? M : W;
                    const float *B = t ? x : w;
                    size_t nc = (size_t)rows * cols;
                    float *want = randn(&r, nc, 1), *got = arena_alloc(&vitc_arena, nc * sizeof(float));
                    memcpy(got, want, nc * sizeof(float));
                    gemm_bf16_a16(t, false, rows, cols, inner, 1.0f, G16, W, B, K, 1.0f, want, cols,
                                  threads);
                    gemm_bf16_a16_blocks(t, rows, cols, inner, blocks, N, b16 && t ? NULL : B,
                                         b16 && t ? x16 : NULL, K, 1.0f, got, cols, threads);
                    for (size_t o = 0; o < nc; o++)
                        EXPECT(same(got[o], want[o]),
                               "%s, %d blocks of %d x %d, trans_a %d, B in %s, threads %d: C[%zu] = "
                               "%a, want %a", amx ? "amx" : "vdpbf16ps", chunks, M, N, t,
                               b16 && t ? "bf16" : "fp32", threads, o, got[o], want[o]);
                    if (test_failed()) goto done;
                }
    }
done:
    gemm_bf16_allow_amx(was);
    arena_reset(&vitc_arena);
}

TEST(bf16_gemm_blocks_of_a_give_the_bits_of_one_matrix) {
    NEEDS_BF16();
    check_a_blocks(false);
    if (gemm_bf16_amx_here()) check_a_blocks(true);
}
