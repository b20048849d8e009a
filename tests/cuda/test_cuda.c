/* The CUDA kernels of src/cuda against the CPU kernels of src/cpu (the reference) on random inputs
 * of odd shapes: each test runs both on the same data and prints the largest relative error, max
 * |cuda - cpu| / max |cpu| per output (the measure of tests/main.c's max_rel_diff). Backward
 * kernels start from prefilled gradients on both sides, so a kernel that wrote instead of adding
 * (or added where the CPU writes) fails. Without a GPU each kernel test is skipped ("no CUDA
 * device"); the device-selection test runs either way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/check.h"
#include "core/memory.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/tape.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "cpu/elementwise.h"
#include "cpu/matmul.h"
#include "cpu/norm.h"
#include "cpu/train_step.h"
#include "cuda/device.h"
#include "cuda/elementwise.h"
#include "cuda/loss.h"
#include "cuda/matmul.h"
#include "cuda/norm.h"
#include "cuda/train_step.h"
#include "ops/ops.h"
#include "train/optim.h"
#include "device_check.h"

static rng R;

/* ---- helpers: host and device buffers of n floats ---- */

static float *host_randn(size_t n, float scale, float shift) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = shift + scale * rng_normal(&R);
    return p;
}

static float *dev_from(const float *host, size_t n) {
    float *d = cuda_alloc_floats(n);
    cuda_to_device(d, host, n);
    return d;
}

/* compares n floats of device memory with the CPU's result: fails the test beyond DEVICE_TOL */
static void compare(const char *what, const float *dev, const float *cpu, size_t n) {
    float *got = xmalloc(n * sizeof(float));
    cuda_to_host(got, dev, n);
    double err = max_rel_diff(got, cpu, (long)n);
    printf("    %-14s max rel err %.2e\n", what, err);
    if (!(err <= DEVICE_TOL)) test_fail(__FILE__, __LINE__, "%s: max rel err %.2e above %.0e", what, err, DEVICE_TOL);
    free(got);
}

static void expect(bool cond, const char *what) {
    if (!cond) test_fail(__FILE__, __LINE__, "%s", what);
}

/* ---- kernel tests (need a device) ---- */

TEST(cuda_kernel_layernorm) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    const int M = 37, C = 197;
    float *x = host_randn((size_t)M * C, 2.0f, 0.5f), *w = host_randn(C, 1, 1),
          *b = host_randn(C, 1, 0);
    float *out = xmalloc(sizeof(float) * M * C), *mean = xmalloc(sizeof(float) * M),
          *rstd = xmalloc(sizeof(float) * M);
    layernorm_forward(out, mean, rstd, x, w, b, M, C, 1e-5f);
    float *dx_ = dev_from(x, (size_t)M * C), *dw_ = dev_from(w, C), *db_ = dev_from(b, C);
    float *dout_ = cuda_alloc_floats((size_t)M * C), *dmean = cuda_alloc_floats(M),
          *drstd = cuda_alloc_floats(M);
    cuda_layernorm_forward(dout_, dmean, drstd, dx_, dw_, db_, M, C, 1e-5f);
    compare("out", dout_, out, (size_t)M * C);
    compare("mean", dmean, mean, M);
    compare("rstd", drstd, rstd, M);

    /* backward into prefilled gradients, with the CPU's statistics on both sides */
    float *g = host_randn((size_t)M * C, 1, 0), *gx = host_randn((size_t)M * C, 1, 0),
          *gw = host_randn(C, 1, 0), *gb = host_randn(C, 1, 0);
    float *g_ = dev_from(g, (size_t)M * C), *gx_ = dev_from(gx, (size_t)M * C),
          *gw_ = dev_from(gw, C), *gb_ = dev_from(gb, C);
    cuda_to_device(dmean, mean, M);
    cuda_to_device(drstd, rstd, M);
    layernorm_backward(gx, gw, gb, g, x, mean, rstd, w, M, C);
    cuda_test_select("cuda");
    cuda_layernorm_backward(gx_, gw_, gb_, g_, dx_, dmean, drstd, dw_, M, C);
    cuda_test_select("cpu");
    compare("dx", gx_, gx, (size_t)M * C);
    compare("dw", gw_, gw, C);
    compare("db", gb_, gb, C);
    /* dw, db NULL: dx alone, accumulating onto the result above */
    layernorm_backward(gx, NULL, NULL, g, x, mean, rstd, w, M, C);
    cuda_test_select("cuda");
    cuda_layernorm_backward(gx_, NULL, NULL, g_, dx_, dmean, drstd, dw_, M, C);
    cuda_test_select("cpu");
    compare("dx (twice)", gx_, gx, (size_t)M * C);
    float *bufs[] = {x, w, b, out, mean, rstd, g, gx, gw, gb},
          *dbufs[] = {dx_, dw_, db_, dout_, dmean, drstd, g_, gx_, gw_, gb_};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]), cuda_free(dbufs[i]);
}

TEST(cuda_kernel_softmax) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    /* rows of N = 49 (a 7x7 window) with a bias repeating every 37 rows, as a relative position
     * bias over 3 windows; then without a bias */
    const int M = 111, N = 49;
    const int64_t NB = 37 * N;
    float *x = host_randn((size_t)M * N, 3, 0), *bias = host_randn(NB, 2, 0);
    float *y = xmalloc(sizeof(float) * M * N);
    float *x_ = dev_from(x, (size_t)M * N), *bias_ = dev_from(bias, NB),
          *y_ = cuda_alloc_floats((size_t)M * N);
    softmax_forward(y, x, bias, M, N, NB);
    cuda_softmax_forward(y_, x_, bias_, M, N, NB);
    compare("out (bias)", y_, y, (size_t)M * N);
    softmax_forward(y, x, NULL, M, N, N);
    cuda_softmax_forward(y_, x_, NULL, M, N, N);
    compare("out", y_, y, (size_t)M * N);

    /* backward: the CPU writes dlogits (no +=); both start from the same garbage */
    float *g = host_randn((size_t)M * N, 1, 0), *d = host_randn((size_t)M * N, 1, 0);
    float *g_ = dev_from(g, (size_t)M * N), *d_ = dev_from(d, (size_t)M * N);
    softmax_backward(d, g, y, M, N);
    cuda_softmax_backward(d_, g_, y_, M, N);
    compare("dlogits", d_, d, (size_t)M * N);
    float *bufs[] = {x, bias, y, g, d}, *dbufs[] = {x_, bias_, y_, g_, d_};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]), cuda_free(dbufs[i]);
}

TEST(cuda_kernel_gelu) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    const int64_t n = 37 * 197;
    float *x = host_randn(n, 3, 0); /* reaches both tails */
    float *out = xmalloc(sizeof(float) * n), *slope = xmalloc(sizeof(float) * n);
    float *g = host_randn(n, 1, 0), *dx = host_randn(n, 1, 0);
    float *x_ = dev_from(x, n), *out_ = cuda_alloc_floats(n), *slope_ = cuda_alloc_floats(n),
          *g_ = dev_from(g, n), *dx_ = dev_from(dx, n);
    gelu_forward(out, x, n);
    cuda_gelu_forward(out_, x_, n);
    compare("out", out_, out, n);
    gelu_backward(dx, g, x, n);
    cuda_gelu_backward(dx_, g_, x_, n);
    compare("dx", dx_, dx, n);
    gelu_value_and_slope(out, slope, x, n);
    cuda_gelu_value_and_slope(out_, slope_, x_, n);
    compare("value", out_, out, n);
    compare("slope", slope_, slope, n);
    float *bufs[] = {x, out, slope, g, dx}, *dbufs[] = {x_, out_, slope_, g_, dx_};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]), cuda_free(dbufs[i]);
}

TEST(cuda_kernel_gemm) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    const int M = 37, N = 53, K = 197, pad = 3; /* pad: leading dims larger than the rows */
    float *A = host_randn((size_t)(M + pad) * (K + pad), 1, 0),
          *B = host_randn((size_t)(K + pad) * (N + pad), 1, 0);
    float *C = host_randn((size_t)M * (N + pad), 1, 0);
    float *A_ = dev_from(A, (size_t)(M + pad) * (K + pad)),
          *B_ = dev_from(B, (size_t)(K + pad) * (N + pad));
    float *C_ = dev_from(C, (size_t)M * (N + pad));
    static const char *what[4] = {"A B", "A Bᵀ", "Aᵀ B", "Aᵀ Bᵀ"};
    for (int t = 0; t < 4; t++) {
        bool ta = t & 2, tb = t & 1;
        /* beta 0.3 onto the previous result: C is prefilled */
        gemm(ta, tb, M, N, K, 0.7f, A, B, 0.3f, C);
        cuda_gemm(ta, tb, M, N, K, 0.7f, A_, B_, 0.3f, C_);
        compare(what[t], C_, C, (size_t)M * N);
        int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
        gemm_strided(ta, tb, M, N, K, -1.3f, A, lda, B, ldb, 1.0f, C, ldc);
        cuda_gemm_strided(ta, tb, M, N, K, -1.3f, A_, lda, B_, ldb, 1.0f, C_, ldc);
        compare("strided", C_, C, (size_t)M * ldc);
    }
    float *bufs[] = {A, B, C}, *dbufs[] = {A_, B_, C_};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]), cuda_free(dbufs[i]);
}

/* The sums over rows behind every bias and layernorm weight gradient, at row counts around the
 * chunk sizes of column_sums.cuh (one chunk, a short last chunk, the cap of 128 chunks), against
 * the CPU; and the same bits on a second run. */
TEST(cuda_column_sums_add_every_row_once) {
    REQUIRE_DEVICE();
    rng_seed(&R, 7, RNG_TEST);
    const int shapes[][2] = {{1, 1}, {63, 33}, {64, 32}, {65, 200}, {8193, 5}, {20011, 97}};
    for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
        const int M = shapes[t][0], N = shapes[t][1];
        float *x = host_randn((size_t)M * N, 1, 0), *sums = host_randn(N, 1, 0);
        float *x_ = dev_from(x, (size_t)M * N), *first_ = dev_from(sums, N), *second_ = dev_from(sums, N);
        add_column_sums(sums, x, M, N);
        cuda_test_select("cuda");
        cuda_add_column_sums(first_, x_, M, N);
        cuda_add_column_sums(second_, x_, M, N);
        cuda_test_select("cpu");
        printf("    M %d, N %d:\n", M, N);
        compare("sums", first_, sums, N);
        float *first = xmalloc(sizeof(float) * N), *second = xmalloc(sizeof(float) * N);
        cuda_to_host(first, first_, N);
        cuda_to_host(second, second_, N);
        expect(memcmp(first, second, sizeof(float) * N) == 0, "two runs give the same bits");
        free(first), free(second), free(x), free(sums);
        cuda_free(x_), cuda_free(first_), cuda_free(second_);
    }

    /* layernorm's dw alone (db NULL) over many chunks, with the CPU's statistics */
    const int M = 9001, C = 40;
    float *x = host_randn((size_t)M * C, 2, 0.5f), *w = host_randn(C, 1, 1), *b = host_randn(C, 1, 0);
    float *out = xmalloc(sizeof(float) * M * C), *mean = xmalloc(sizeof(float) * M),
          *rstd = xmalloc(sizeof(float) * M), *g = host_randn((size_t)M * C, 1, 0),
          *gw = host_randn(C, 1, 0);
    layernorm_forward(out, mean, rstd, x, w, b, M, C, 1e-5f);
    float *x_ = dev_from(x, (size_t)M * C), *w_ = dev_from(w, C), *g_ = dev_from(g, (size_t)M * C),
          *gw_ = dev_from(gw, C), *mean_ = dev_from(mean, M), *rstd_ = dev_from(rstd, M);
    layernorm_backward(NULL, gw, NULL, g, x, mean, rstd, w, M, C);
    cuda_test_select("cuda");
    cuda_layernorm_backward(NULL, gw_, NULL, g_, x_, mean_, rstd_, w_, M, C);
    cuda_test_select("cpu");
    compare("layernorm dw", gw_, gw, C);
    free(x), free(w), free(b), free(out), free(mean), free(rstd), free(g), free(gw);
    cuda_free(x_), cuda_free(w_), cuda_free(g_), cuda_free(gw_), cuda_free(mean_), cuda_free(rstd_);
}

TEST(cuda_kernel_linear) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    const int M = 394, K = 197, N = 53; /* 2 x 197 tokens */
    float *x = host_randn((size_t)M * K, 1, 0), *w = host_randn((size_t)N * K, 0.1f, 0),
          *b = host_randn(N, 1, 0);
    float *out = xmalloc(sizeof(float) * M * N), *g = host_randn((size_t)M * N, 1, 0);
    float *gx = host_randn((size_t)M * K, 1, 0), *gw = host_randn((size_t)N * K, 1, 0),
          *gb = host_randn(N, 1, 0);
    float *x_ = dev_from(x, (size_t)M * K), *w_ = dev_from(w, (size_t)N * K), *b_ = dev_from(b, N),
          *out_ = cuda_alloc_floats((size_t)M * N), *g_ = dev_from(g, (size_t)M * N),
          *gx_ = dev_from(gx, (size_t)M * K), *gw_ = dev_from(gw, (size_t)N * K),
          *gb_ = dev_from(gb, N);
    linear_forward(out, x, w, b, M, K, N);
    cuda_linear_forward(out_, x_, w_, b_, M, K, N);
    compare("out", out_, out, (size_t)M * N);
    linear_forward(out, x, w, NULL, M, K, N);
    cuda_linear_forward(out_, x_, w_, NULL, M, K, N);
    compare("out (no bias)", out_, out, (size_t)M * N);
    linear_backward(gx, gw, gb, g, x, w, M, K, N);
    cuda_test_select("cuda");
    cuda_linear_backward(gx_, gw_, gb_, g_, x_, w_, M, K, N);
    cuda_test_select("cpu");
    compare("dx", gx_, gx, (size_t)M * K);
    compare("dw", gw_, gw, (size_t)N * K);
    compare("db", gb_, gb, N);
    float *bufs[] = {x, w, b, out, g, gx, gw, gb}, *dbufs[] = {x_, w_, b_, out_, g_, gx_, gw_, gb_};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]), cuda_free(dbufs[i]);
}

TEST(cuda_kernel_matmul) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    /* per-head products: 3 heads of q (37, 29) kᵀ (29, 41) and the like */
    const int batch = 3, M = 37, N = 41, K = 29;
    const size_t na = (size_t)batch * M * K, nb = (size_t)batch * K * N, nc = (size_t)batch * M * N;
    float *a = host_randn(na, 1, 0), *b = host_randn(nb, 1, 0), *c = xmalloc(sizeof(float) * nc);
    float *dc = host_randn(nc, 1, 0), *da = host_randn(na, 1, 0), *db = host_randn(nb, 1, 0);
    float *a_ = dev_from(a, na), *b_ = dev_from(b, nb), *c_ = cuda_alloc_floats(nc),
          *dc_ = dev_from(dc, nc), *da_ = dev_from(da, na), *db_ = dev_from(db, nb);
    static const char *what[4] = {"A B", "A Bᵀ", "Aᵀ B", "Aᵀ Bᵀ"};
    for (int t = 0; t < 4; t++) {
        bool ta = t & 2, tb = t & 1;
        matmul_forward(c, a, b, batch, M, N, K, ta, tb, 0.5f);
        cuda_matmul_forward(c_, a_, b_, batch, M, N, K, ta, tb, 0.5f);
        compare(what[t], c_, c, nc);
        /* the gradients keep accumulating across the four layouts */
        matmul_backward(da, db, dc, a, b, batch, M, N, K, ta, tb, 0.5f);
        cuda_matmul_backward(da_, db_, dc_, a_, b_, batch, M, N, K, ta, tb, 0.5f);
        compare("da", da_, da, na);
        compare("db", db_, db, nb);
    }
    float *bufs[] = {a, b, c, dc, da, db}, *dbufs[] = {a_, b_, c_, dc_, da_, db_};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]), cuda_free(dbufs[i]);
}

TEST(cuda_kernel_adamw) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    /* a decayed weight and an undecayed bias in one flat block, three steps (bias correction moves)
     */
    param_store ps;
    params_init(&ps);
    PARAM(&ps, "fc.weight", 37, 197);
    PARAM(&ps, "fc.bias", 197);
    params_finalize(&ps);
    const size_t n = (size_t)ps.span;
    for (size_t i = 0; i < n; i++) ps.data[i] = rng_normal(&R);
    adamw o;
    adamw_init(&o, &ps, 0.05, 0.9, 0.999, 1e-8);
    float *p_ = dev_from(ps.data, n), *g_ = cuda_alloc_floats(n), *m_ = cuda_alloc_floats(n),
          *v_ = cuda_alloc_floats(n);
    size_t lines = n / PARAM_LINE_FLOATS;
    uint8_t *decay_ = cuda_memory.alloc(lines);
    cuda_memory.from_host(decay_, o.decay, lines);
    cuda_zero_floats(m_, n);
    cuda_zero_floats(v_, n);
    for (int s = 0; s < 3; s++) {
        for (size_t i = 0; i < n; i++) ps.grad[i] = (s + 1) * rng_normal(&R);
        cuda_to_device(g_, ps.grad, n);
        double lr = 1e-3 * (s + 1);
        adamw_step(&o, &ps, lr);
        cuda_adamw_update(p_, m_, v_, g_, decay_, PARAM_LINE_FLOATS, (int64_t)n, lr, o.beta1,
                          o.beta2, o.eps, o.weight_decay, o.step);
    }
    compare("p", p_, ps.data, n);
    compare("m", m_, o.m, n);
    compare("v", v_, o.v, n);
    float *dbufs[] = {p_, g_, m_, v_};
    for (size_t i = 0; i < sizeof(dbufs) / sizeof(dbufs[0]); i++) cuda_free(dbufs[i]);
    cuda_memory.free(decay_);
    adamw_free(&o);
    params_free(&ps);
}

TEST(cuda_kernel_cross_entropy) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    /* soft targets as mixup with label smoothing gives them: two smoothed one-hots mixed */
    const int B = 37, K = 197;
    tensor *logits = TENSOR(B, K), *target = TENSOR(B, K);
    for (int i = 0; i < B * K; i++) logits->data[i] = 3 * rng_normal(&R);
    for (int b = 0; b < B; b++) {
        int c1 = (int)rng_below(&R, K), c2 = (int)rng_below(&R, K);
        float lam = rng_uniform(&R), off = 0.1f / K;
        for (int k = 0; k < K; k++)
            target->data[b * K + k] = off + lam * 0.9f * (k == c1) + (1 - lam) * 0.9f * (k == c2);
    }
    logits->requires_grad = true;
    float *grad = host_randn((size_t)B * K, 1, 0); /* prefilled: the CPU backward adds into it */
    logits->grad = grad;
    float *logits_ = dev_from(logits->data, (size_t)B * K),
          *target_ = dev_from(target->data, (size_t)B * K), *grad_ = dev_from(grad, (size_t)B * K),
          *probs_ = cuda_alloc_floats((size_t)B * K), *rows_ = cuda_alloc_floats(B),
          *loss_ = cuda_alloc_floats(1), *dloss_ = cuda_alloc_floats(1);
    tensor *loss = op_cross_entropy(logits, target);
    const tensor *probs = tape_node_at(tape_size() - 1)->saved[0];
    cuda_cross_entropy_forward(loss_, rows_, probs_, logits_, target_, B, K);
    compare("loss", loss_, loss->data, 1);
    compare("probs", probs_, probs->data, (size_t)B * K);
    /* the CPU tape seeds d loss = 1; the CUDA backward reads it from the device */
    const float one = 1.0f;
    cuda_to_device(dloss_, &one, 1);
    tape_backward(loss);
    cuda_cross_entropy_backward(grad_, dloss_, probs_, target_, B, K);
    compare("dlogits", grad_, grad, (size_t)B * K);
    float *dbufs[] = {logits_, target_, grad_, probs_, rows_, loss_, dloss_};
    for (size_t i = 0; i < sizeof(dbufs) / sizeof(dbufs[0]); i++) cuda_free(dbufs[i]);
    free(grad);
}

TEST(cuda_kernel_clip_and_ema) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    /* more floats than fit evenly in SUM_SQUARES_CHUNKS, then fewer than the chunks */
    const size_t sizes[] = {100003, 5};
    for (int k = 0; k < 2; k++) {
        const size_t n = sizes[k];
        float *g = host_randn(n, 2.0f, 0.1f), *p = host_randn(n, 1, 0), *ema = host_randn(n, 1, 0);
        float *g_ = dev_from(g, n), *p_ = dev_from(p, n), *ema_ = dev_from(ema, n);
        double cpu = sum_squares(g, (int64_t)n), dev = cuda_sum_squares(g_, (int64_t)n);
        printf("    sum_squares of %zu  rel err %.2e\n", n, fabs(dev - cpu) / cpu);
        expect(fabs(dev - cpu) <= 1e-12 * cpu, "sum_squares: the device's double sum differs from the CPU's");
        expect(cuda_sum_squares(g_, (int64_t)n) == dev, "sum_squares: another value on the second run");
        scale_floats(g, (int64_t)n, 0.37f);
        cuda_scale_floats(g_, (int64_t)n, 0.37f);
        compare("scaled", g_, g, n);
        ema_update_flat(ema, p, (int64_t)n, 0.9);
        cuda_ema_update_flat(ema_, p_, (int64_t)n, 0.9);
        compare("ema", ema_, ema, n);
        free(g), free(p), free(ema), cuda_free(g_), cuda_free(p_), cuda_free(ema_);
    }
    expect(cuda_sum_squares(NULL, 0) == 0, "the sum of no squares is 0");
}

TEST(cuda_stager_moves_batches_in_turn) {
    REQUIRE_DEVICE();
    rng_seed(&R, 42, RNG_TEST);
    const size_t n = 1000;
    float *a = host_randn(n, 1, 0), *b = host_randn(n, 1, 0), *c = host_randn(n, 1, 0);
    cuda_stager *s = cuda_stager_create(n);
    const float *da = cuda_stage(s, a, n), *db = cuda_stage(s, b, 700);
    expect(da != db, "two batches in a row go to two device buffers");
    compare("first", da, a, n);
    compare("second", db, b, 700);
    expect(cuda_stage(s, c, n) == da, "the third batch takes the first one's buffer");
    compare("third", da, c, n);
    cuda_stager_free(s);
    free(a), free(b), free(c);
}

/* ---- host-only test ---- */

TEST(cuda_select_names_the_missing_or_wrong_device) {
    char err[256] = "";
    int count = cuda_device_count();
    if (count == 0) {
        /* no driver or no GPU: a clear refusal, no abort */
        expect(!cuda_select(0, err, sizeof(err)), "cuda_select(0) fails without a device");
        printf("    message: %s\n", err);
        expect(strstr(err, "--device cuda: no CUDA device (cudaGetDeviceCount") != NULL,
               "the message names the missing device and the failing call");
    } else {
        expect(!cuda_select(count, err, sizeof(err)), "cuda_select(count) fails");
        printf("    message: %s\n", err);
        expect(strstr(err, "does not exist") != NULL, "the message says the device does not exist");
        expect(cuda_select(0, err, sizeof(err)), "cuda_select(0) succeeds");
    }
}
