/* Dropout and drop path: keep rates, scaling, determinism, gradients through a fixed mask. */
#include "../src/ops/ops.h"
#include "gradcheck.h"

typedef struct {
    float p;
    bool per_sample;
} drop_ctx;

static tensor *drop_fn(tensor **in, const void *ctx) {
    const drop_ctx *c = ctx;
    rng r;
    rng_seed(&r, 99, RNG_DROPOUT); /* the same mask at every evaluation */
    return c->per_sample ? op_drop_path(in[0], c->p, &r) : op_dropout(in[0], c->p, &r);
}

TEST(dropout_keep_rate_scale_and_grad) {
    rng r;
    rng_seed(&r, 71, RNG_TEST);
    tensor *x = RANDN(&r, 1, 100, 1000);
    drop_ctx c = {0.3f, false};
    tensor *y = drop_fn((tensor *[]){x}, &c), *y2 = drop_fn((tensor *[]){x}, &c);
    long kept = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        if (y->data[i] != 0) {
            kept++;
            EXPECT(y->data[i] == x->data[i] * (1.0f / 0.7f), "kept value scaled by 1/(1-p)");
        }
        EXPECT(y->data[i] == y2->data[i], "same seed, same mask");
    }
    EXPECT(fabs(kept / 1e5 - 0.7) < 0.01, "kept fraction %g", kept / 1e5);
    tensor *leaf = LEAF(&r, 1, 3, 5, 7);
    EXPECT(GRADCHECK(drop_fn, &c, leaf), "dropout");
    EXPECT(op_dropout(x, 0, NULL) == x, "p = 0 is the identity");
    EXPECT_ERROR(op_dropout(x, 1.0f, &r), "probability 1 outside [0, 1)");
}

TEST(drop_path_per_sample_and_grad) {
    rng r;
    rng_seed(&r, 72, RNG_TEST);
    tensor *x = RANDN(&r, 1, 2000, 3, 4);
    drop_ctx c = {0.25f, true};
    tensor *y = drop_fn((tensor *[]){x}, &c);
    long kept = 0;
    for (int b = 0; b < 2000; b++) {
        bool keep = y->data[b * 12] != 0 || x->data[b * 12] == 0;
        kept += keep;
        for (int j = 0; j < 12; j++)
            EXPECT(y->data[b * 12 + j] == (keep ? x->data[b * 12 + j] * (1.0f / 0.75f) : 0.0f),
                   "sample %d is dropped or kept whole", b);
    }
    EXPECT(fabs(kept / 2000.0 - 0.75) < 0.03, "kept fraction %g", kept / 2000.0);
    tensor *leaf = LEAF(&r, 1, 5, 3, 7);
    EXPECT(GRADCHECK(drop_fn, &c, leaf), "drop path");
}
