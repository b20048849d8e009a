/* Dropout and the drop-path residual add: keep rates, scaling, determinism, gradients through a
 * fixed mask. */
#include "../src/ops/ops.h"
#include "gradcheck.h"

typedef struct {
    float p;
} drop_ctx;

static tensor *drop_fn(tensor **in, const void *ctx) {
    const drop_ctx *c = ctx;
    rng r;
    rng_seed(&r, 99, RNG_DROPOUT); /* the same mask at every evaluation */
    return op_dropout(in[0], c->p, &r);
}

static tensor *drop_path_add_fn(tensor **in, const void *ctx) {
    const drop_ctx *c = ctx;
    rng r;
    rng_seed(&r, 99, RNG_DROPOUT);
    return op_drop_path_add(in[0], in[1], c->p, &r);
}

TEST(dropout_keep_rate_scale_and_grad) {
    rng r;
    rng_seed(&r, 71, RNG_TEST);
    tensor *x = RANDN(&r, 1, 100, 1000);
    drop_ctx c = {0.3f};
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

TEST(drop_path_add_per_sample_and_grad) {
    rng r;
    rng_seed(&r, 72, RNG_TEST);
    tensor *x = RANDN(&r, 1, 2000, 3, 4), *y = RANDN(&r, 1, 2000, 3, 4);
    drop_ctx c = {0.25f};
    tensor *out = drop_path_add_fn((tensor *[]){x, y}, &c);
    long kept = 0;
    for (int b = 0; b < 2000; b++) {
        bool keep = out->data[b * 12] != x->data[b * 12] || y->data[b * 12] == 0;
        kept += keep;
        for (int j = 0; j < 12; j++) {
            int i = b * 12 + j;
            EXPECT(out->data[i] == x->data[i] + (keep ? y->data[i] * (1.0f / 0.75f) : 0.0f),
                   "sample %d of y is dropped or kept whole", b);
        }
    }
    EXPECT(fabs(kept / 2000.0 - 0.75) < 0.03, "kept fraction %g", kept / 2000.0);
    tensor *xl = LEAF(&r, 1, 5, 3, 7), *yl = LEAF(&r, 1, 5, 3, 7);
    EXPECT(GRADCHECK(drop_path_add_fn, &c, xl, yl), "drop path add");
    tensor *sum = op_drop_path_add(x, y, 0, NULL);
    EXPECT(sum->data[7] == x->data[7] + y->data[7], "p = 0 is the plain add");
    EXPECT_ERROR(op_drop_path_add(x, RANDN(&r, 1, 2000, 12), 0.1f, &r), "shapes (2000, 3, 4) and (2000, 12) differ");
}
