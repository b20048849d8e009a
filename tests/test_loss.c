/* Cross entropy: a hand case, a double reference with soft targets, label smoothing, gradients. */
#include "../src/ops/ops.h"
#include "gradcheck.h"

TEST(cross_entropy_hand_case) {
    tensor *z = TENSOR(1, 2);
    z->data[0] = 0, z->data[1] = logf(3.0f); /* softmax = (1/4, 3/4) */
    tensor *l = op_cross_entropy_labels(z, (int[]){1}, 0.0f);
    EXPECT(fabsf(l->data[0] - logf(4.0f / 3.0f)) < 1e-6f, "loss %g", l->data[0]);
}

static tensor *ce_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_cross_entropy(in[0], in[1]);
}

static tensor *ce_labels_fn(tensor **in, const void *ctx) {
    return op_cross_entropy_labels(in[0], ctx, 0.1f);
}

TEST(cross_entropy_soft_targets_reference_and_grad) {
    rng r;
    rng_seed(&r, 81, RNG_TEST);
    tensor *z = LEAF(&r, 3, 5, 7), *t = RANDN(&r, 1, 5, 7);
    for (int b = 0; b < 5; b++) { /* rows of t: a probability distribution */
        double s = 0;
        for (int k = 0; k < 7; k++) s += t->data[b * 7 + k] = fabsf(t->data[b * 7 + k]);
        for (int k = 0; k < 7; k++) t->data[b * 7 + k] /= (float)s;
    }
    tensor *l = ce_fn((tensor *[]){z, t}, NULL);
    double want = 0;
    for (int b = 0; b < 5; b++) {
        double mx = -1e30, s = 0;
        for (int k = 0; k < 7; k++) mx = fmax(mx, z->data[b * 7 + k]);
        for (int k = 0; k < 7; k++) s += exp(z->data[b * 7 + k] - mx);
        for (int k = 0; k < 7; k++) want -= t->data[b * 7 + k] * (z->data[b * 7 + k] - mx - log(s));
    }
    want /= 5;
    EXPECT(fabs(l->data[0] - want) < 1e-5 * fabs(want), "loss %g want %g", l->data[0], want);
    EXPECT(GRADCHECK(ce_fn, NULL, z, t), "soft cross entropy");
    static const int labels[5] = {0, 6, 3, 3, 1};
    EXPECT(GRADCHECK(ce_labels_fn, labels, z), "hard labels with smoothing");
    /* smoothing 0.1 over 7 classes: target 0.9 + 0.1/7 on the label, 0.1/7 elsewhere */
    tensor *zz = TENSOR(1, 7);
    for (int k = 0; k < 7; k++) zz->data[k] = 0;
    tensor *ls = op_cross_entropy_labels(zz, (int[]){2}, 0.1f);
    EXPECT(fabsf(ls->data[0] - logf(7.0f)) < 1e-6f, "uniform logits: loss log K whatever the target");
    EXPECT_ERROR(op_cross_entropy_labels(zz, (int[]){7}, 0.0f), "label[0] = 7 outside [0, 7)");
}
