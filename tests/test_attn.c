/* Attention cores on known values: FLatten's golden vector (flatten.md §2.3, the official module
 * in float64). */
#include "../models/attn/attn.h"
#include "test.h"

static void flatten_golden(bool with_dwc, double *sum, float *y) {
    param_store ps;
    params_init(&ps);
    attn_spec spec = {.kind = ATTN_FLATTEN, .dim = 8, .heads = 2, .h = 4, .w = 4, .hk = 4, .wk = 4,
                      .dwc = true, .dwc_name = "dwc", .focusing_factor = 3, .dwc_kernel = 5};
    attn *a = attn_create(&ps, "attn", &spec);
    params_finalize(&ps);
    tensor *scale = params_find(&ps, "attn.scale"), *pe = params_find(&ps, "attn.positional_encoding");
    tensor *w = params_find(&ps, "attn.dwc.weight"), *b = params_find(&ps, "attn.dwc.bias");
    for (int c = 0; c < 8; c++) scale->data[c] = 0.1f * c - 0.3f;
    for (int n = 0; n < 16; n++)
        for (int c = 0; c < 8; c++) pe->data[n * 8 + c] = 0.01f * (n - c);
    for (int j = 0; j < 4; j++) {
        b->data[j] = with_dwc ? 0.01f * j : 0;
        for (int r = 0; r < 5; r++)
            for (int t = 0; t < 5; t++)
                w->data[(j * 5 + r) * 5 + t] = with_dwc ? 0.02f * (j + 1) * (float)(((5 * r + t) % 7) - 3) : 0;
    }
    tensor *q = TENSOR(1, 16, 8), *k = TENSOR(1, 16, 8), *v = TENSOR(1, 16, 8);
    for (int n = 0; n < 16; n++)
        for (int c = 0; c < 8; c++) {
            q->data[n * 8 + c] = sinf(0.37f * n + 0.11f * c + 0.2f);
            k->data[n * 8 + c] = cosf(0.23f * n - 0.17f * c + 0.1f);
            v->data[n * 8 + c] = sinf(0.05f * n * c + 0.3f * c - 0.1f * n);
        }
    tensor *out = attn_forward(a, q, k, v);
    *sum = 0;
    for (int i = 0; i < 128; i++) *sum += out->data[i];
    memcpy(y, out->data, sizeof(float) * 128);
    attn_destroy(a);
    params_free(&ps);
}

TEST(flatten_core_matches_the_official_golden_vector) {
    double sum;
    float y[128];
    flatten_golden(true, &sum, y);
    EXPECT(fabs(sum - 41.94258802806207) < 1e-4, "sum %.10f", sum);
    const int at[5][2] = {{0, 0}, {0, 7}, {5, 3}, {10, 4}, {15, 7}};
    const double want[5] = {-0.23777095846787538, 0.15229747603150542, 0.5528842998221714,
                            0.5335223326746434, -0.4680690371859805};
    for (int i = 0; i < 5; i++)
        EXPECT(fabs(y[at[i][0] * 8 + at[i][1]] - want[i]) < 1e-5, "y[%d][%d] = %.8f, want %.8f",
               at[i][0], at[i][1], y[at[i][0] * 8 + at[i][1]], want[i]);
    flatten_golden(false, &sum, y);
    const double lin[5] = {-0.25588768543741447, -0.1812224133788988, 0.8396075722112931,
                           0.5805900447435982, -0.4025521337464508};
    EXPECT(fabs(sum - 42.71998652707729) < 1e-4, "linear part sum %.10f", sum);
    for (int i = 0; i < 5; i++)
        EXPECT(fabs(y[at[i][0] * 8 + at[i][1]] - lin[i]) < 1e-5, "linear y[%d][%d] = %.8f", at[i][0],
               at[i][1], y[at[i][0] * 8 + at[i][1]]);
}
