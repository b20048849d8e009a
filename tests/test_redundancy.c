/* The JSD redundancy score (vitc definition) of ./sample --jsd: hand-computed rows, and the
 * recorder's attention rows against op_attention's own. */
#include <stdlib.h>

#include "../models/attn/attn_redundancy.h"
#include "../src/core/params.h"
#include "../src/ops/ops.h"
#include "test.h"

TEST(jsd_redundancy_of_hand_computed_rows) {
    /* rows: a = (1, 0), b = (0.5, 0.5), c = (0, 1); identical rows give 1, disjoint ones 0 */
    const float A[] = {1, 0, 0.5f, 0.5f, 0, 1, 1, 0};
    EXPECT(fabs(jsd_redundancy(A, 2, (int[]){0, 3}, 1) - 1.0) < 1e-12, "identical rows");
    EXPECT(fabs(jsd_redundancy(A, 2, (int[]){0, 2}, 1)) < 1e-12, "disjoint rows");
    /* JSD(a, b) = 1/2 ln(1 / 0.75) + 1/4 ln(0.5 / 0.75) + 1/4 ln(0.5 / 0.25) = 0.2157616 nats */
    double jsd_ab = 0.5 * log(4.0 / 3.0) + 0.25 * log(2.0 / 3.0) + 0.25 * log(2.0);
    double r = jsd_redundancy(A, 2, (int[]){0, 1}, 1);
    EXPECT(fabs(jsd_ab - 0.2157616) < 1e-7 && fabs(r - (1 - jsd_ab / log(2.0))) < 1e-7, "R(a, b) = %.7f", r);
    /* the mean over pairs: (a, b), (b, c) alike, (a, c) disjoint */
    r = jsd_redundancy(A, 2, (int[]){0, 1, 1, 2, 0, 2}, 3);
    EXPECT(fabs(r - (1 - (2 * jsd_ab + log(2.0)) / 3 / log(2.0))) < 1e-7, "mean of three pairs %.7f", r);
}

TEST(jsd_redundancy_recorder_reads_the_softmax_attention) {
    /* one head whose values are the identity: op_attention's output is the attention matrix */
    enum { N = 6, H = 2, D = 6, C = H * D };
    param_store ps;
    params_init(&ps);
    attn_spec spec = {.kind = ATTN_NATIVE, .dim = C, .heads = H, .h = 2, .w = 3, .hk = 2, .wk = 3,
                      .flavour = NATIVE_GLOBAL, .block = 1};
    attn *a = attn_create(&ps, "blocks.1.attn", &spec);
    params_finalize(&ps);
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    tensor *q = RANDN(&r, 1.5f, 2, N, C), *k = RANDN(&r, 1.5f, 2, N, C), *v = RANDN(&r, 0, 2, N, C);
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < N; j++)
            for (int h = 0; h < H; h++) v->data[(b * N + j) * C + h * D + j] = 1.0f;
    double sum[2 * H] = {0};
    int count[2 * H] = {0};
    attn_redundancy rec = {.blocks = 2, .heads = H, .max_pairs = 100, .max_sequences = 1, .sum = sum, .count = count};
    attn_redundancy_set(&rec);
    tensor *out = attn_forward(a, q, k, v);
    attn_redundancy_set(NULL);
    int pairs[2 * N * (N - 1) / 2], n_pairs = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) pairs[2 * n_pairs] = i, pairs[2 * n_pairs + 1] = j, n_pairs++;
    for (int h = 0; h < H; h++) {
        float A[N * N];
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) A[i * N + j] = out->data[i * C + h * D + j]; /* sequence 0 */
        double want = jsd_redundancy(A, N, pairs, n_pairs);
        EXPECT(count[H + h] == 1 && count[h] == 0, "head %d: %d sequences recorded in block 1", h, count[H + h]);
        EXPECT(fabs(sum[H + h] - want) < 1e-5 && want > 0 && want < 1, "head %d: %.6f vs %.6f", h, sum[H + h], want);
    }
    attn_destroy(a);
    params_free(&ps);
    arena_reset(&vitc_arena);
}
