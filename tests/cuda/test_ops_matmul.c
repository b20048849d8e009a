/* The GEMM ops (src/ops/matmul.c) on the device against the CPU, and the CUDA GEMMs in the other
 * precisions: tf32 against the CPU's fp32, bf16 against a scalar reference on operands rounded with
 * bf16_from_float (the CPU's bf16 GEMM needs AVX512_BF16, which a test machine may lack). */
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "core/precision.h"
#include "cpu/gemm_bf16.h"
#include "cuda/bf16_store.h"
#include "cuda/matmul.h"
#include "device_check.h"
#include "ops/ops.h"

/* what a bf16 or tf32 product may differ from fp32 by, relative to the largest output */
#define PRECISION_TOL 3e-3

static tensor *linear(tensor **in, const void *ctx) {
    (void)ctx;
    return op_linear(in[0], in[1], in[2]);
}

static tensor *linear_rows(tensor **in, const void *ctx) {
    const int *rows = ctx;
    return op_linear_rows(in[0], in[1], in[2], rows[0], rows[1]);
}

typedef struct {
    bool ta, tb;
    float alpha;
} matmul_ctx;

static tensor *matmul(tensor **in, const void *ctx) {
    const matmul_ctx *c = ctx;
    return op_matmul(in[0], in[1], c->ta, c->tb, c->alpha);
}

TEST(cuda_op_linear) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 51, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 3, 37, 97), *w = LEAF(&r, 0.1f, 53, 97), *b = LEAF(&r, 1.0f, 53);
    double err = DEVICE_CHECK(linear, NULL, x, w, b);
    EXPECT(err <= DEVICE_TOL, "with bias: max rel err %.2e", err);
    err = DEVICE_CHECK(linear, NULL, x, w, NULL);
    EXPECT(err <= DEVICE_TOL, "without bias: max rel err %.2e", err);
    /* output rows 5..21 of the weight (a qkv projection's k) */
    err = DEVICE_CHECK(linear_rows, ((int[]){5, 17}), x, w, b);
    EXPECT(err <= DEVICE_TOL, "rows 5..21: max rel err %.2e", err);
}

TEST(cuda_op_matmul) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 52, RNG_TEST);
    /* batch (2, 3) of (29, 41) products over 19, every layout */
    for (int t = 0; t < 4; t++) {
        matmul_ctx c = {t & 2, t & 1, 0.7f};
        tensor *a = c.ta ? LEAF(&r, 1.0f, 2, 3, 19, 29) : LEAF(&r, 1.0f, 2, 3, 29, 19);
        tensor *b = c.tb ? LEAF(&r, 1.0f, 2, 3, 41, 19) : LEAF(&r, 1.0f, 2, 3, 19, 41);
        double err = DEVICE_CHECK(matmul, &c, a, b);
        EXPECT(err <= DEVICE_TOL, "trans_a %d trans_b %d: max rel err %.2e", c.ta, c.tb, err);
    }
}

/* ---- precisions ---- */

static void set_precision(precision p) {
    const char *why = "";
    CHECK(vitc_set_precision(p, &why), "%s", why);
}

TEST(cuda_op_tf32_follows_fp32) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 53, RNG_TEST);
    tensor *x = LEAF(&r, 1.0f, 3, 37, 197), *w = LEAF(&r, 0.1f, 53, 197), *b = LEAF(&r, 1.0f, 53);
    matmul_ctx c = {false, true, 0.5f};
    tensor *qa = LEAF(&r, 1.0f, 3, 37, 64), *kb = LEAF(&r, 1.0f, 3, 41, 64);
    /* the device runs its GEMMs in tf32 (set while it is selected), the CPU in fp32 */
    cuda_test_select("cuda");
    set_precision(PRECISION_TF32);
    double err = DEVICE_CHECK(linear, NULL, x, w, b), err_mm = DEVICE_CHECK(matmul, &c, qa, kb);
    set_precision(PRECISION_FP32);
    EXPECT(err <= PRECISION_TOL, "linear: max rel err %.2e", err);
    EXPECT(err_mm <= PRECISION_TOL, "matmul: max rel err %.2e", err_mm);
}

/* C (M, N) = alpha op(A) op(B) + beta C in double, row-major with row strides; operands rounded to
 * bf16 first when `round` */
static void reference(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc, bool round) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                float b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                if (round) a = bf16_to_float(bf16_from_float(a)), b = bf16_to_float(bf16_from_float(b));
                s += (double)a * b;
            }
            /* beta 0 does not read C, as in BLAS: the batch's reference C is uninitialised */
            double c = beta ? (double)beta * C[(size_t)i * ldc + j] : 0.0;
            C[(size_t)i * ldc + j] = (float)(alpha * s + c);
        }
}

static float *device_copy(const float *host, size_t n) {
    float *d = tensor_new(1, (int[]){(int)n})->data;
    vitc_memory()->from_host(d, host, sizeof(float) * n);
    return d;
}

TEST(cuda_gemm_bf16_multiplies_rounded_operands) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 54, RNG_TEST);
    const int M = 37, N = 53, K = 197, pad = 3, batch = 3; /* pad: row strides longer than the rows */
    const size_t na = (size_t)(K + pad) * (K + pad), nb = na, nc = (size_t)M * (N + pad);
    float *A = malloc(sizeof(float) * na), *B = malloc(sizeof(float) * nb), *C0 = malloc(sizeof(float) * nc);
    float *exact = malloc(sizeof(float) * nc), *rounded = malloc(sizeof(float) * nc), *got = malloc(sizeof(float) * nc);
    for (size_t i = 0; i < na; i++) A[i] = rng_normal(&r), B[i] = rng_normal(&r);
    for (size_t i = 0; i < nc; i++) C0[i] = rng_normal(&r);
    cuda_test_select("cuda");
    /* the CPU's bf16 needs AVX512_BF16; the device's does not */
    set_precision(PRECISION_BF16);
    float *A_ = device_copy(A, na), *B_ = device_copy(B, nb), *C_ = device_copy(C0, nc);
    static const char *what[4] = {"A B", "A Bᵀ", "Aᵀ B", "Aᵀ Bᵀ"};
    for (int t = 0; t < 4; t++) {
        bool ta = t & 2, tb = t & 1;
        int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
        memcpy(exact, C0, sizeof(float) * nc);
        memcpy(rounded, C0, sizeof(float) * nc);
        reference(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, exact, ldc, false);
        reference(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, rounded, ldc, true);
        vitc_memory()->from_host(C_, C0, sizeof(float) * nc);
        cuda_gemm_strided(ta, tb, M, N, K, 0.7f, A_, lda, B_, ldb, 0.3f, C_, ldc);
        vitc_memory()->to_host(got, C_, sizeof(float) * nc);
        double e_round = max_rel_diff(got, rounded, (long)nc), e_fp32 = max_rel_diff(got, exact, (long)nc);
        printf("    %-6s max rel err %.2e (rounded operands), %.2e (fp32)\n", what[t], e_round, e_fp32);
        EXPECT(e_round <= 1e-5 && e_fp32 <= PRECISION_TOL, "%s: %.2e, %.2e", what[t], e_round, e_fp32);
    }
    /* a batch of contiguous products, as attention's */
    const size_t sa = (size_t)M * K, sb = (size_t)K * N, sc = (size_t)M * N;
    float *c_ = tensor_new(1, (int[]){(int)(batch * sc)})->data;
    cuda_matmul_forward(c_, A_, B_, batch, M, N, K, false, true, 1.0f);
    float *want = malloc(sizeof(float) * batch * sc), *have = malloc(sizeof(float) * batch * sc);
    for (int i = 0; i < batch; i++)
        reference(false, true, M, N, K, 1.0f, A + i * sa, K, B + i * sb, K, 0.0f, want + i * sc, N, true);
    vitc_memory()->to_host(have, c_, sizeof(float) * batch * sc);
    double e_batch = max_rel_diff(have, want, (long)(batch * sc));
    printf("    batch  max rel err %.2e (rounded operands)\n", e_batch);
    EXPECT(e_batch <= 1e-5, "batched: %.2e", e_batch);
    set_precision(PRECISION_FP32);
    cuda_test_select("cpu");
    float *bufs[] = {A, B, C0, exact, rounded, got, want, have};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]);
}

/* the storage form of saved activations: rounded as bf16_from_float (ties, NaN, inf, subnormals),
 * the source left holding the rounded values, widened back exactly */
TEST(cuda_bf16_store_rounds_as_the_cpu) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 55, RNG_TEST);
    enum { N = 1001 };
    float x[N], kept[N], back[N];
    uint16_t h[N];
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)(rng_uniform_f64(&r) * 4294967296.0);
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u;
        if (i % 8 == 2) u &= 0x807fffffu;
        if (i % 16 == 3) u |= 0x7f800000u;
        memcpy(&x[i], &u, sizeof u);
    }
    cuda_test_select("cuda");
    float *x_ = device_copy(x, N), *back_ = tensor_new(1, (int[]){N})->data;
    uint16_t *h_ = tensor_bf16(tensor_new_bf16(1, (int[]){N}));
    cuda_bf16_store(h_, x_, N);
    cuda_bf16_load(back_, h_, N);
    vitc_memory()->to_host(h, h_, sizeof(h));
    vitc_memory()->to_host(kept, x_, sizeof(kept));
    vitc_memory()->to_host(back, back_, sizeof(back));
    cuda_test_select("cpu");
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        float want = bf16_to_float(bf16_from_float(x[i]));
        wrong += h[i] != bf16_from_float(x[i]) || memcmp(&kept[i], &want, 4) || memcmp(&back[i], &want, 4);
    }
    EXPECT(wrong == 0, "%d of %d values stored, kept or loaded other than bf16_from_float", wrong, N);
}

/* the chunks' backward from bf16 gradients (q's, k's and v's, attention's under bf16 on the CPU):
 * x's, w's and b's gradients added to, against a double reference on the bf16 values, from x in
 * fp32 and kept in bf16 */
TEST(cuda_chunks_backward_from_bf16_gradients) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 56, RNG_TEST);
    const int M = 75, K = 40, N = 24, chunks = 3, W = chunks * N;
    float *g = malloc(sizeof(float) * chunks * M * N), *x = malloc(sizeof(float) * M * K);
    float *w = malloc(sizeof(float) * W * K), *init = malloc(sizeof(float) * (M * K + W * K + W));
    uint16_t *g16 = malloc(sizeof(uint16_t) * chunks * M * N), *x16 = malloc(sizeof(uint16_t) * M * K);
    for (int i = 0; i < chunks * M * N; i++) g16[i] = bf16_from_float(rng_normal(&r)), g[i] = bf16_to_float(g16[i]);
    for (int i = 0; i < M * K; i++) x[i] = rng_normal(&r), x16[i] = bf16_from_float(x[i]);
    for (int i = 0; i < W * K; i++) w[i] = 0.3f * rng_normal(&r);
    for (int i = 0; i < M * K + W * K + W; i++) init[i] = rng_normal(&r);
    float *want = malloc(sizeof(float) * (M * K + W * K + W)), *got = malloc(sizeof(float) * (M * K + W * K + W));
    memcpy(want, init, sizeof(float) * (M * K + W * K + W));
    float *wdx = want, *wdw = want + M * K, *wdb = wdw + W * K;
#define R(v) bf16_to_float(bf16_from_float(v))
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            double s = wdx[m * K + k];
            for (int o = 0; o < W; o++) s += (double)g[(size_t)(o / N) * M * N + m * N + o % N] * R(w[o * K + k]);
            wdx[m * K + k] = (float)s;
        }
    for (int o = 0; o < W; o++) {
        const float *gi = g + (size_t)(o / N) * M * N;
        double sb = wdb[o];
        for (int m = 0; m < M; m++) sb += gi[m * N + o % N];
        wdb[o] = (float)sb;
        for (int k = 0; k < K; k++) {
            double s = wdw[o * K + k];
            for (int m = 0; m < M; m++) s += (double)gi[m * N + o % N] * R(x[m * K + k]);
            wdw[o * K + k] = (float)s;
        }
    }
#undef R
    cuda_test_select("cuda");
    set_precision(PRECISION_BF16);
    const uint16_t *dg[3];
    for (int i = 0; i < chunks; i++) {
        tensor *t = tensor_new_bf16(1, (int[]){M * N});
        vitc_memory()->from_host(t->data, g16 + (size_t)i * M * N, sizeof(uint16_t) * M * N);
        dg[i] = tensor_bf16(t);
    }
    tensor *x16_ = tensor_new_bf16(1, (int[]){M * K});
    vitc_memory()->from_host(x16_->data, x16, sizeof(uint16_t) * M * K);
    float *x_ = device_copy(x, (size_t)M * K), *w_ = device_copy(w, (size_t)W * K);
    for (int kept = 0; kept < 2; kept++) {
        float *out_ = device_copy(init, (size_t)(M * K + W * K + W));
        cuda_linear_chunks_backward_bf16_grad(out_, 1.0f, out_ + M * K, out_ + M * K + W * K, dg,
                                              chunks, kept ? NULL : x_,
                                              kept ? tensor_bf16(x16_) : NULL, w_, M, K, N);
        vitc_memory()->to_host(got, out_, sizeof(float) * (M * K + W * K + W));
        double e = max_rel_diff(got, want, M * K + W * K + W);
        printf("    x in %s: max rel err %.2e\n", kept ? "bf16" : "fp32", e);
        EXPECT(e <= 1e-5, "x in %s: max rel err %.2e", kept ? "bf16" : "fp32", e);
    }
    set_precision(PRECISION_FP32);
    cuda_test_select("cpu");
    free(g), free(x), free(w), free(init), free(g16), free(x16), free(want), free(got);
}
