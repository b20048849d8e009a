/* FLatten's fused ops: the focusing function against the chain of elementary ops it replaces, linear
 * attention against a naive double reference, finite differences on both schedules (one (sequence,
 * head) pair; eight pairs, one per thread on machines up to 4 threads), shape errors. */
#include <math.h>

#include "../src/ops/ops.h"
#include "gradcheck.h"

static tensor *focus_fn(tensor **in, const void *ctx) { return op_focus(in[0], in[1], *(const float *)ctx); }

/* f_p(relu(x) + 1e-6) / t written with the elementary ops */
static tensor *focus_chain(tensor *x, tensor *t, float p) {
    x = op_div(op_add_scalar(op_relu(x), 1e-6f), t);
    tensor *norm = op_l2norm(x);
    x = op_pow(x, p);
    return op_mul(op_div(x, op_l2norm(x)), norm);
}

TEST(focus_matches_the_op_chain_and_grad) {
    rng r;
    rng_seed(&r, 41, RNG_TEST);
    const float powers[2] = {3.0f, 2.5f};
    for (int i = 0; i < 2; i++) {
        float p = powers[i];
        tensor *x = LEAF(&r, 1, 2, 5, 6), *t = LEAF(&r, 0.2f, 1, 1, 6);
        for (int j = 0; j < 6; j++) t->data[j] = 0.7f + fabsf(t->data[j]);
        for (int j = 0; j < 6; j++) x->data[6 + j] = -fabsf(x->data[6 + j]); /* a row of only 1e-6s */
        tensor *fused = op_focus(x, t, p), *chain = focus_chain(x, t, p);
        double err = max_rel_diff(fused->data, chain->data, chain->numel);
        EXPECT(err < 1e-5, "p %g: differs from the op chain by %g", p, err);
        EXPECT(GRADCHECK(focus_fn, &p, x, t), "focus p %g", p);
    }
    EXPECT_ERROR(op_focus(RANDN(&r, 1, 2, 5), RANDN(&r, 1, 4), 3.0f), "temperature (4) for 5 channels");
    EXPECT_ERROR(op_focus(RANDN(&r, 1, 2, 5), RANDN(&r, 1, 5), 0.0f), "power 0 must be positive");
}

/* out[s, i, h*d + e] = sum_j q_i·k_j v_j[e] / m / (q_i · mean_j k_j + 1e-6) per head */
static void linear_attention_naive(float *out, const tensor *q, const tensor *k, const tensor *v, int heads) {
    int b = q->shape[0], n = q->shape[1], m = k->shape[1], C = q->shape[2], d = C / heads;
    for (int s = 0; s < b; s++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < n; i++) {
                const float *qi = q->data + (s * n + i) * C + h * d;
                double den = 0, num[8] = {0};
                for (int j = 0; j < m; j++) {
                    const float *kj = k->data + (s * m + j) * C + h * d, *vj = v->data + (s * m + j) * C + h * d;
                    double dot = 0;
                    for (int e = 0; e < d; e++) dot += (double)qi[e] * kj[e];
                    den += dot / m;
                    for (int e = 0; e < d; e++) num[e] += dot * vj[e] / m;
                }
                for (int e = 0; e < d; e++) out[(s * n + i) * C + h * d + e] = (float)(num[e] / (den + 1e-6));
            }
}

static tensor *linear_attention_fn(tensor **in, const void *ctx) {
    return op_linear_attention(in[0], in[1], in[2], *(const int *)ctx);
}

TEST(linear_attention_matches_naive_reference_and_grad) {
    rng r;
    rng_seed(&r, 42, RNG_TEST);
    const int shapes[2][2] = {{1, 1}, {4, 2}}; /* (sequences, heads) */
    for (int c = 0; c < 2; c++) {
        int b = shapes[c][0], H = shapes[c][1], C = 3 * H;
        /* positive features, as the focusing function gives */
        tensor *q = LEAF(&r, 1, b, 5, C), *k = LEAF(&r, 1, b, 6, C), *v = LEAF(&r, 1, b, 6, C);
        for (int64_t i = 0; i < q->numel; i++) q->data[i] = 0.2f + fabsf(q->data[i]);
        for (int64_t i = 0; i < k->numel; i++) k->data[i] = 0.2f + fabsf(k->data[i]);
        tensor *y = op_linear_attention(q, k, v, H);
        float ref[4 * 5 * 6];
        linear_attention_naive(ref, q, k, v, H);
        double err = max_rel_diff(y->data, ref, y->numel);
        EXPECT(err < 1e-5, "sequences %d, heads %d: differs from the reference by %g", b, H, err);
        EXPECT(GRADCHECK(linear_attention_fn, &H, q, k, v), "sequences %d, heads %d", b, H);
    }
    tensor *q = RANDN(&r, 1, 2, 4, 6), *k = RANDN(&r, 1, 2, 5, 6);
    EXPECT_ERROR(op_linear_attention(q, k, q, 2), "are not (b, n, C), (b, m, C), (b, m, C)");
    EXPECT_ERROR(op_linear_attention(q, k, k, 4), "6 channels do not split into 4 heads");
}

typedef struct {
    int heads, c0, channels;
} softmax_lin_ctx;

static tensor *softmax_lin_fn(tensor **in, const void *ctx) {
    const softmax_lin_ctx *c = ctx;
    return op_softmax_linear_attention(in[0], in[1], in[2], c->heads, c->c0, c->channels);
}

/* out[s, i, h*d + e] = sum_f softmax_f(q_i)[f] sum_j softmax_j(k[:, f])[j] v_j[e], channels from c0 */
static void softmax_lin_naive(float *out, const tensor *q, const tensor *k, const tensor *v,
                              const softmax_lin_ctx *c) {
    int b = q->shape[0], n = q->shape[1], m = k->shape[1], C = q->shape[2], d = c->channels / c->heads;
    for (int s = 0; s < b; s++)
        for (int h = 0; h < c->heads; h++) {
            int off = c->c0 + h * d;
            double ctx[80][80] = {{0}};
            for (int f = 0; f < d; f++) {
                double z = 0;
                for (int j = 0; j < m; j++) z += exp(k->data[(s * m + j) * C + off + f]);
                for (int j = 0; j < m; j++)
                    for (int e = 0; e < d; e++)
                        ctx[f][e] += exp(k->data[(s * m + j) * C + off + f]) / z * v->data[(s * m + j) * C + off + e];
            }
            for (int i = 0; i < n; i++) {
                double z = 0;
                for (int f = 0; f < d; f++) z += exp(q->data[(s * n + i) * C + off + f]);
                for (int e = 0; e < d; e++) {
                    double o = 0;
                    for (int f = 0; f < d; f++) o += exp(q->data[(s * n + i) * C + off + f]) / z * ctx[f][e];
                    out[(s * n + i) * c->channels + h * d + e] = (float)o;
                }
            }
        }
}

TEST(softmax_linear_attention_matches_naive_reference_and_grad) {
    rng r;
    rng_seed(&r, 43, RNG_TEST);
    /* (sequences, heads, head width): one pair, eight pairs, heads of 1 to 4 vectors and one
     * wider than the kernels hold in registers; the op's channels start at 2 of 2 + heads·d + 1 */
    const int shapes[5][3] = {{1, 1, 3}, {4, 2, 3}, {2, 1, 32}, {1, 2, 40}, {1, 1, 72}};
    for (int t = 0; t < 5; t++) {
        int b = shapes[t][0], H = shapes[t][1], d = shapes[t][2], C = H * d + 3;
        softmax_lin_ctx c = {H, 2, H * d};
        tensor *q = LEAF(&r, 1, b, 5, C), *k = LEAF(&r, 1, b, 6, C), *v = LEAF(&r, 1, b, 6, C);
        tensor *y = softmax_lin_fn((tensor *[]){q, k, v}, &c);
        float ref[2 * 5 * 80];
        softmax_lin_naive(ref, q, k, v, &c);
        double err = max_rel_diff(y->data, ref, y->numel);
        EXPECT(y->shape[2] == H * d && err < 1e-5, "sequences %d, heads %d of %d: differs by %g", b,
               H, d, err);
        EXPECT(GRADCHECK(softmax_lin_fn, &c, q, k, v), "sequences %d, heads %d of %d", b, H, d);
    }
    tensor *q = RANDN(&r, 1, 2, 4, 6);
    EXPECT_ERROR(op_softmax_linear_attention(q, q, q, 2, 4, 4), "channels 4..8 of (2, 4, 6) in 2 heads");
    EXPECT_ERROR(op_softmax_linear_attention(q, RANDN(&r, 1, 2, 5, 6), q, 2, 0, 4),
                 "are not (b, n, C), (b, m, C), (b, m, C)");
}
