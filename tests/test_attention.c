/* Fused softmax attention: a naive double reference and finite differences, with and without bias
 * and window mask, on both schedules (one (sequence, head) pair runs with threaded GEMMs and split
 * rows; eight pairs run one per thread on machines up to 4 threads), and on the register tiles of
 * heads with 16 to 64 channels (several row blocks, padded key counts, every vector width). */
#include <stdlib.h>
#include <math.h>

#include "../src/ops/ops.h"
#include "gradcheck.h"

typedef struct {
    int heads, windows;
    bool bias; /* in[3] is the bias */
    float scale;
    const float *mask;
} attention_ctx;

static tensor *attention_fn(tensor **in, const void *ctx) {
    const attention_ctx *c = ctx;
    return op_attention(in[0], in[1], in[2], c->heads, c->scale, c->bias ? in[3] : NULL, c->mask, c->windows);
}

/* out[s, i, h*d + e] = sum_j softmax_j(scale q_i·k_j + bias[h,i,j] + mask[s % w,i,j]) v[s, j, h*d + e] */
static void attention_naive(float *out, const tensor *q, const tensor *k, const tensor *v,
                            const attention_ctx *c, const float *bias) {
    int b = q->shape[0], n = q->shape[1], m = k->shape[1], C = q->shape[2], d = C / c->heads;
    double logit[128];
    for (int s = 0; s < b; s++)
        for (int h = 0; h < c->heads; h++)
            for (int i = 0; i < n; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < m; j++) {
                    double dot = 0;
                    for (int e = 0; e < d; e++)
                        dot += (double)q->data[(s * n + i) * C + h * d + e] * k->data[(s * m + j) * C + h * d + e];
                    logit[j] = c->scale * dot + (bias ? bias[(h * n + i) * m + j] : 0) +
                               (c->mask ? c->mask[((s % c->windows) * n + i) * m + j] : 0);
                    mx = fmax(mx, logit[j]);
                }
                for (int j = 0; j < m; j++) sum += logit[j] = exp(logit[j] - mx);
                for (int e = 0; e < d; e++) {
                    double o = 0;
                    for (int j = 0; j < m; j++) o += logit[j] / sum * v->data[(s * m + j) * C + h * d + e];
                    out[(s * n + i) * C + h * d + e] = (float)o;
                }
            }
}

TEST(attention_matches_naive_reference_and_grad) {
    rng r;
    rng_seed(&r, 31, RNG_TEST);
    const int n = 5, m = 6, windows = 2;
    float mask[2 * 5 * 6];
    for (int i = 0; i < windows * n * m; i++) mask[i] = i % 7 == 3 ? -100.0f : 0.0f;
    struct { int seqs, heads; bool bias, mask; } cases[] = {
        {1, 1, false, false}, {4, 2, false, false}, {1, 1, true, false},
        {4, 2, true, false},  {4, 2, true, true},   {2, 1, false, true},
    };
    for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        int b = cases[t].seqs, H = cases[t].heads, C = 3 * H;
        bool square = cases[t].mask; /* a window mask means keys are the queries' window */
        int mk = square ? n : m;
        tensor *q = LEAF(&r, 1, b, n, C), *k = LEAF(&r, 1, b, mk, C), *v = LEAF(&r, 1, b, mk, C);
        tensor *bias = cases[t].bias ? LEAF(&r, 1, H, n, mk) : NULL;
        float mask_sq[2 * 5 * 5];
        for (int i = 0; i < windows * n * n; i++) mask_sq[i] = mask[i];
        attention_ctx c = {H, windows, cases[t].bias, 0.6f, cases[t].mask ? mask_sq : NULL};
        tensor *y = attention_fn((tensor *[]){q, k, v, bias}, &c);
        float ref[4 * 5 * 6];
        attention_naive(ref, q, k, v, &c, bias ? bias->data : NULL);
        double worst = 0;
        for (int64_t i = 0; i < y->numel; i++) worst = max_error(worst, fabs(y->data[i] - ref[i]));
        EXPECT(worst < 1e-5, "case %zu: forward differs from the reference by %g", t, worst);
        bool ok = bias ? GRADCHECK(attention_fn, &c, q, k, v, bias) : GRADCHECK(attention_fn, &c, q, k, v);
        EXPECT(ok, "case %zu (seqs %d, heads %d, bias %d, mask %d)", t, b, H, cases[t].bias,
               cases[t].mask);
    }
}

/* out is (seqs, n, heads·d) of q's shape; ref is checked against the naive reference */
static bool attention_case_ok(rng *r, int seqs, int heads, int d, int n, int m, bool bias,
                              int windows, const char *what) {
    int C = heads * d;
    float *mask = NULL;
    if (windows) { /* Swin's shift mask: blocks of 0 and -100 */
        mask = malloc(sizeof(float) * windows * n * m);
        for (int i = 0; i < windows * n * m; i++) mask[i] = (i / 7 + i % m) % 3 == 1 ? -100.0f : 0.0f;
    }
    tensor *q = LEAF(r, 1, seqs, n, C), *k = LEAF(r, 1, seqs, m, C), *v = LEAF(r, 1, seqs, m, C);
    tensor *b = bias ? LEAF(r, 1, heads, n, m) : NULL;
    attention_ctx c = {heads, windows ? windows : 1, bias, 1.0f / sqrtf((float)d), mask};
    tensor *y = attention_fn((tensor *[]){q, k, v, b}, &c);
    float *ref = malloc(sizeof(float) * y->numel);
    attention_naive(ref, q, k, v, &c, b ? b->data : NULL);
    double worst = 0;
    for (int64_t i = 0; i < y->numel; i++) worst = max_error(worst, fabs(y->data[i] - ref[i]));
    free(ref);
    bool ok = worst < 2e-5;
    if (!ok) test_fail(__FILE__, __LINE__, "%s: forward differs from the reference by %g", what, worst);
    else if (!(b ? GRADCHECK(attention_fn, &c, q, k, v, b) : GRADCHECK(attention_fn, &c, q, k, v)))
        ok = false, test_fail(__FILE__, __LINE__, "%s: gradient", what);
    free(mask);
    return ok;
}

TEST(attention_tiles_match_naive_reference_and_grad) {
    rng r;
    rng_seed(&r, 33, RNG_TEST);
    /* 8 pairs: the tiled backward for 32 channels; 70 query rows: two row blocks */
    EXPECT(attention_case_ok(&r, 4, 2, 32, 70, 19, true, 0, "d 32, 2 row blocks, bias"));
    EXPECT(attention_case_ok(&r, 4, 1, 32, 21, 21, true, 2, "d 32, bias and mask"));
    EXPECT(attention_case_ok(&r, 1, 1, 16, 5, 37, false, 0, "d 16, one pair"));
    /* one pair of 49 rows: the forward splits them into blocks of 16 so that every thread has some */
    EXPECT(attention_case_ok(&r, 1, 1, 32, 49, 40, true, 0, "d 32, one pair of 49 rows"));
    EXPECT(attention_case_ok(&r, 4, 2, 48, 9, 50, false, 0, "d 48"));
    EXPECT(attention_case_ok(&r, 2, 2, 64, 33, 64, true, 2, "d 64, bias and mask"));
}

/* q, k and v that another op made have no gradient yet when attention's backward runs: the
 * kernels write theirs whole (the tests' arena hands that memory out as NaN) */
static tensor *attention_of_products_fn(tensor **in, const void *ctx) {
    const attention_ctx *c = ctx;
    return op_attention(op_scale(in[0], 0.9f), op_scale(in[1], 1.1f), op_scale(in[2], 0.8f),
                        c->heads, c->scale, NULL, NULL, 1);
}

/* one tensor as q, k and v: its three gradients are added, none written over another */
static tensor *self_attention_of_product_fn(tensor **in, const void *ctx) {
    const attention_ctx *c = ctx;
    tensor *x = op_scale(in[0], 0.9f);
    return op_attention(x, x, x, c->heads, c->scale, NULL, NULL, 1);
}

TEST(attention_writes_gradients_that_have_no_value_yet_whole) {
    rng r;
    rng_seed(&r, 34, RNG_TEST);
    /* heads of 3 channels run on GEMMs, of 32 on the register tiles (bf16's: test_bf16) */
    for (int d = 3; d <= 32; d += 29) {
        attention_ctx c = {2, 1, false, 1.0f / sqrtf((float)d), NULL};
        tensor *q = LEAF(&r, 1, 3, 9, 2 * d), *k = LEAF(&r, 1, 3, 12, 2 * d);
        tensor *v = LEAF(&r, 1, 3, 12, 2 * d);
        EXPECT(GRADCHECK(attention_of_products_fn, &c, q, k, v), "heads of %d: q, k, v", d);
        EXPECT(GRADCHECK(self_attention_of_product_fn, &c, q), "heads of %d: x as q, k and v", d);
    }
}

TEST(attention_rejects_mismatched_shapes) {
    rng r;
    rng_seed(&r, 32, RNG_TEST);
    tensor *q = RANDN(&r, 1, 2, 4, 6), *k = RANDN(&r, 1, 2, 5, 6), *v = RANDN(&r, 1, 2, 4, 6);
    EXPECT_ERROR(op_attention(q, k, v, 2, 1.0f, NULL, NULL, 1), "are not (b, n, C), (b, m, C)");
    EXPECT_ERROR(op_attention(q, k, k, 4, 1.0f, NULL, NULL, 1), "6 channels do not split into 4 heads");
    EXPECT_ERROR(op_attention(q, k, k, 2, 1.0f, RANDN(&r, 1, 2, 4, 4), NULL, 1), "is not (heads 2, 4, 5)");
    float mask[3 * 4 * 5] = {0};
    EXPECT_ERROR(op_attention(q, k, k, 2, 1.0f, NULL, mask, 3), "2 sequences are not a whole number of 3-window");
}
