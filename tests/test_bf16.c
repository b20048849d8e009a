/* --precision bf16 end to end: every op with a GEMM and every registered model, forward and
 * backward, against the same computation in fp32 (within bf16's error, and far enough from it to
 * show the operands were rounded); finite differences of the bf16 ops; gradients that would
 * underflow in fp16; a 20-step training run that follows fp32 within 1% and resumes bit for bit;
 * the CLI's flags and errors. Everything but the CLI errors skips on a CPU without AVX512_BF16; the
 * tools' start-up error on such a CPU skips on one with it. */
#include <stdlib.h>
#include <unistd.h>

#include "../src/core/cpu_features.h"
#include "../src/core/precision.h"
#include "../src/cpu/elementwise.h"
#include "../src/cpu/bf16_store.h"
#include "../src/cpu/gemm_bf16.h"
#include "../src/cpu/mlp.h"
#include "../src/core/threads.h"
#include "../src/ops/op_table.h"
#include "../src/ops/ops.h"
#include "gradcheck.h"
#include "model_check.h"
#include "shell.h"
#include "tiny_run.h"

#define SKIP_WITHOUT_BF16()                                                                        \
    do {                                                                                           \
        if (cpu_bf16_error()) SKIP("this CPU lacks AVX512_BF16 (vdpbf16ps)");                       \
    } while (0)

typedef tensor *(*op_fn)(tensor **in, const void *ctx);

/* ‖a - b‖ / ‖b‖ over n floats */
static double norm_rel_diff(const float *a, const float *b, int64_t n) {
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / (s > 0 ? s : 1e-300));
}

typedef struct run_result {
    float *out, *grads[6];
} run_result;

static void zero_grad(tensor *t) {
    if (t->grad) memset(t->grad, 0, sizeof(float) * t->numel);
}

/* f's output and its inputs' gradients for a fixed upstream gradient (seed), in precision p */
static run_result run_in(precision p, op_fn f, const void *ctx, int n_in, tensor **in, uint64_t seed) {
    vitc_set_precision(p, NULL);
    for (int i = 0; i < n_in; i++) zero_grad(in[i]);
    tensor *y = f(in, ctx);
    run_result r = {.out = malloc(sizeof(float) * y->numel)};
    memcpy(r.out, y->data, sizeof(float) * y->numel);
    rng g;
    rng_seed(&g, seed, RNG_TEST);
    float *dy = malloc(sizeof(float) * y->numel);
    for (int64_t i = 0; i < y->numel; i++) dy[i] = rng_normal(&g);
    tape_backward_from(y, dy);
    free(dy);
    for (int i = 0; i < n_in; i++) {
        r.grads[i] = calloc(in[i]->numel, sizeof(float));
        if (in[i]->grad) memcpy(r.grads[i], in[i]->grad, sizeof(float) * in[i]->numel);
    }
    tape_reset();
    vitc_set_precision(PRECISION_FP32, NULL);
    return r;
}

static void run_free(run_result *r, int n_in) {
    free(r->out);
    for (int i = 0; i < n_in; i++) free(r->grads[i]);
}

/* The output and every input's gradient in bf16 within tol (normwise) of fp32, and the output and
 * some gradient at least 1e-5 from it: an fp32 GEMM in another order differs by ~1e-7, so a bf16
 * path that silently ran fp32 fails. With `single_gemm`, finite differences of the bf16 op itself:
 * on inputs snapped to multiples of 1/16 in [-4, 4], steps of 1/16, every operand and perturbed
 * operand is a bf16 number, so the rounding adds no noise to the differences; what is left is the
 * backward's rounding of the upstream gradient, within 2^-8 (where a second GEMM
 * reads a rounded intermediate, as in attention, it would: those ops are compared with fp32 only,
 * whose gradients their own tests check by finite differences). */
static bool bf16_follows_fp32(const char *name, op_fn f, const void *ctx, int n_in, tensor **in, double tol,
                              bool single_gemm) {
    int64_t out_n = 0;
    run_result a = run_in(PRECISION_FP32, f, ctx, n_in, in, 7), b = run_in(PRECISION_BF16, f, ctx, n_in, in, 7);
    {
        vitc_set_precision(PRECISION_FP32, NULL);
        bool prev = tape_set_grad_enabled(false);
        out_n = f(in, ctx)->numel;
        tape_set_grad_enabled(prev);
    }
    bool ok = true;
    double e = norm_rel_diff(b.out, a.out, out_n);
    if (!(e <= tol && e >= 1e-5)) {
        fprintf(stderr, "    %s output: bf16 vs fp32 %.3g (want 1e-5 .. %.3g)\n", name, e, tol);
        ok = false;
    }
    double largest = 0; /* a bias's gradient, a column sum, is exact: some other one must differ */
    for (int i = 0; i < n_in; i++) {
        if (!in[i]->requires_grad) continue;
        e = norm_rel_diff(b.grads[i], a.grads[i], in[i]->numel);
        largest = fmax(largest, e);
        if (!(e <= tol)) {
            fprintf(stderr, "    %s input %d gradient: bf16 vs fp32 %.3g (want <= %.3g)\n", name, i, e, tol);
            ok = false;
        }
    }
    if (largest < 1e-5) {
        fprintf(stderr, "    %s: every gradient within %.3g of fp32, as if nothing was rounded\n", name, largest);
        ok = false;
    }
    run_free(&a, n_in);
    run_free(&b, n_in);
    if (single_gemm) {
        for (int i = 0; i < n_in; i++)
            for (int64_t j = 0; j < in[i]->numel; j++)
                in[i]->data[j] = fminf(4.0f, fmaxf(-4.0f, roundf(16 * in[i]->data[j]) / 16));
        vitc_set_precision(PRECISION_BF16, NULL);
        ok = ok && gradcheck(name, f, ctx, n_in, in, (gradcheck_opts){.eps = 1.0 / 16, .tol = 1.0 / 256});
        vitc_set_precision(PRECISION_FP32, NULL);
    }
    return ok;
}

static tensor *linear_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_linear(in[0], in[1], in[2]);
}

/* q's, k's and v's rows 16..31 of each block of 32, with fp32 gradients (the concatenation's):
 * rounded, then one product over copies of the rows side by side (op_linear_chunks_backward) */
static tensor *strided_chunks_fn(tensor **in, const void *ctx) {
    (void)ctx;
    tensor *chunks[3];
    op_linear_strided_chunks(in[0], in[1], in[2], 3, 16, 16, 32, chunks);
    return op_concat(3, chunks, 2);
}

typedef struct {
    bool ta, tb;
} matmul_ctx;

static tensor *matmul_fn(tensor **in, const void *ctx) {
    const matmul_ctx *c = ctx;
    return op_matmul(in[0], in[1], c->ta, c->tb, 0.5f);
}

static tensor *attention_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_attention(in[0], in[1], in[2], 2, 0.25f, in[3], NULL, 1);
}

/* q, k and v without a gradient yet when attention's backward runs: written whole */
static tensor *attention_of_products_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_attention(op_scale(in[0], 0.9f), op_scale(in[1], 1.1f), op_scale(in[2], 0.8f), 2,
                        0.25f, in[3], NULL, 1);
}

static tensor *linear_attention_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_linear_attention(op_focus(in[0], in[3], 3), op_focus(in[1], in[3], 3), in[2], 2);
}

static tensor *softmax_linear_attention_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_softmax_linear_attention(in[0], in[1], in[2], 2, 8, 16);
}

static tensor *conv_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_conv2d(in[0], in[1], in[2], 2, 1, 1);
}

static tensor *layernorm_linear_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_layernorm_linear(in[0], in[1], in[2], 1e-5f, in[3], in[4], NULL);
}

static tensor *mlp_residual_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_mlp_residual(in[0], in[1], in[2], 1e-5f, in[3], in[4], in[5], NULL, NULL, NULL);
}

/* half the samples dropped: their rows are skipped in bf16 as in fp32 (op_mlp_residual) */
static tensor *mlp_residual_dropping_fn(tensor **in, const void *ctx) {
    (void)ctx;
    rng r;
    rng_seed(&r, 6, RNG_DROPOUT); /* samples 0, 1 and 3 of 4 dropped */
    return op_mlp_residual(in[0], in[1], in[2], 1e-5f, in[3], in[4], in[5], NULL,
                           DROP_PATH(0.5f, &r, in[0]), NULL);
}

TEST(bf16_ops_follow_fp32_and_finite_differences) {
    SKIP_WITHOUT_BF16();
    rng r;
    rng_seed(&r, 17, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 9, 37), *w = LEAF(&r, 0.3f, 11, 37), *b = LEAF(&r, 1, 11);
    EXPECT(bf16_follows_fp32("linear (odd K)", linear_fn, NULL, 3, (tensor *[]){x, w, b}, 1e-2, true), "linear");
    tensor *w3 = LEAF(&r, 0.3f, 96, 37), *b3 = LEAF(&r, 1, 96);
    EXPECT(bf16_follows_fp32("linear, strided chunks", strided_chunks_fn, NULL, 3, (tensor *[]){x, w3, b3}, 1e-2, false),
           "strided chunks");
    for (int t = 0; t < 4; t++) {
        matmul_ctx c = {t & 1, t >> 1};
        tensor *a = c.ta ? LEAF(&r, 1, 3, 12, 10) : LEAF(&r, 1, 3, 10, 12);
        tensor *bm = c.tb ? LEAF(&r, 1, 3, 7, 12) : LEAF(&r, 1, 3, 12, 7);
        EXPECT(bf16_follows_fp32("matmul", matmul_fn, &c, 2, (tensor *[]){a, bm}, 1e-2, true), "trans %d %d", c.ta, c.tb);
    }
    tensor *q = LEAF(&r, 1, 2, 10, 16), *k = LEAF(&r, 1, 2, 13, 16), *v = LEAF(&r, 1, 2, 13, 16);
    tensor *bias = LEAF(&r, 0.5f, 2, 10, 13);
    EXPECT(bf16_follows_fp32("attention", attention_fn, NULL, 4, (tensor *[]){q, k, v, bias}, 2e-2, false), "attention");
    /* heads of 32 channels, which fp32 runs on its own register tiles */
    tensor *qt = LEAF(&r, 0.5f, 2, 20, 64), *kt = LEAF(&r, 0.5f, 2, 20, 64), *vt = LEAF(&r, 1, 2, 20, 64);
    tensor *bias_t = LEAF(&r, 0.5f, 2, 20, 20);
    EXPECT(bf16_follows_fp32("attention d=32", attention_fn, NULL, 4, (tensor *[]){qt, kt, vt, bias_t}, 2e-2, false),
           "attention of 32-channel heads");
    EXPECT(bf16_follows_fp32("attention d=32, fresh gradients", attention_of_products_fn, NULL, 4,
                             (tensor *[]){qt, kt, vt, bias_t}, 2e-2, false),
           "attention of 32-channel heads writing q's, k's and v's gradients whole");
    tensor *temperature = RANDN(&r, 0, 16);
    for (int i = 0; i < 16; i++) temperature->data[i] = 1.0f + 0.1f * i;
    EXPECT(bf16_follows_fp32("flatten linear attention", linear_attention_fn, NULL, 4,
                             (tensor *[]){q, k, v, temperature}, 2e-2, false), "linear attention");
    tensor *q2 = LEAF(&r, 1, 2, 10, 24), *k2 = LEAF(&r, 1, 2, 13, 24), *v2 = LEAF(&r, 1, 2, 13, 24);
    EXPECT(bf16_follows_fp32("elfatt softmax linear attention", softmax_linear_attention_fn, NULL, 3,
                             (tensor *[]){q2, k2, v2}, 2e-2, false), "softmax linear attention");
    tensor *img = LEAF(&r, 1, 2, 8, 8, 3), *cw = LEAF(&r, 0.3f, 6, 3, 3, 3), *cb = LEAF(&r, 1, 6);
    EXPECT(bf16_follows_fp32("conv2d", conv_fn, NULL, 3, (tensor *[]){img, cw, cb}, 1e-2, true), "conv2d");
    /* 16 channels: the columns rounded as they are cut (conv2d_forward), and every product in bf16 */
    tensor *map = LEAF(&r, 1, 2, 7, 7, 16), *mw = LEAF(&r, 0.2f, 8, 16, 3, 3), *mb = LEAF(&r, 1, 8);
    EXPECT(bf16_follows_fp32("conv2d, 16 channels", conv_fn, NULL, 3, (tensor *[]){map, mw, mb}, 1e-2, true),
           "conv2d of 16 channels");
    tensor *h = LEAF(&r, 1, 2, 9, 24), *lw = LEAF(&r, 0.2f, 24), *lb = LEAF(&r, 0.2f, 24);
    tensor *w1 = LEAF(&r, 0.3f, 40, 24), *b1 = LEAF(&r, 0.3f, 40), *w2 = LEAF(&r, 0.3f, 24, 40);
    for (int i = 0; i < 24; i++) lw->data[i] += 1;
    EXPECT(bf16_follows_fp32("layernorm_linear", layernorm_linear_fn, NULL, 5, (tensor *[]){h, lw, lb, w1, b1}, 1e-2, false),
           "layernorm_linear");
    EXPECT(bf16_follows_fp32("mlp_residual", mlp_residual_fn, NULL, 6, (tensor *[]){h, lw, lb, w1, b1, w2}, 2e-2, false),
           "mlp_residual");
    tensor *h4 = LEAF(&r, 1, 4, 9, 24);
    EXPECT(bf16_follows_fp32("mlp_residual, drop path", mlp_residual_dropping_fn, NULL, 6,
                             (tensor *[]){h4, lw, lb, w1, b1, w2}, 2e-2, false),
           "mlp_residual with dropped samples");
    enum { WIDE = MLP_CHUNKED_MAX_CHANNELS_BF16 + 8 }; /* the MLP step as two ops */
    tensor *hw = LEAF(&r, 1, 2, 5, WIDE), *lww = LEAF(&r, 0.2f, WIDE), *lbw = LEAF(&r, 0.2f, WIDE);
    tensor *w1w = LEAF(&r, 0.1f, 40, WIDE), *b1w = LEAF(&r, 0.3f, 40), *w2w = LEAF(&r, 0.3f, WIDE, 40);
    for (int i = 0; i < WIDE; i++) lww->data[i] += 1;
    EXPECT(bf16_follows_fp32("mlp_residual, two ops", mlp_residual_fn, NULL, 6,
                             (tensor *[]){hw, lww, lbw, w1w, b1w, w2w}, 2e-2, false),
           "mlp_residual as two ops");
    tensor *hw4 = LEAF(&r, 1, 4, 5, WIDE);
    EXPECT(bf16_follows_fp32("mlp_residual, two ops, drop path", mlp_residual_dropping_fn, NULL, 6,
                             (tensor *[]){hw4, lww, lbw, w1w, b1w, w2w}, 2e-2, false),
           "mlp_residual as two ops with dropped samples");
    arena_reset(&vitc_arena);
}

/* Under bf16 the MLP step keeps its hidden layer (fc1's output, the largest activation it saves) as
 * bf16, on both of its paths (row chunks, and the two ops above MLP_CHUNKED_MAX_CHANNELS_BF16): the
 * step takes 2 bytes a hidden value fewer from the arena than in fp32, the kept values are fc1's
 * output rounded, and the step's output is fc2 of the GELU of those rounded values. */
TEST(bf16_mlp_keeps_its_hidden_layer_in_bf16) {
    SKIP_WITHOUT_BF16();
    rng r;
    rng_seed(&r, 23, RNG_TEST);
    static const int channels[2] = {24, MLP_CHUNKED_MAX_CHANNELS_BF16 + 8};
    for (int c = 0; c < 2; c++) {
        int C = channels[c], H = 3 * C, M = 32; /* M H 2 bytes: whole 64-byte arena blocks */
        tensor *res = LEAF(&r, 1, 2, 16, C), *lw = LEAF(&r, 0.2f, C), *lb = LEAF(&r, 0.2f, C);
        tensor *w1 = LEAF(&r, 0.3f, H, C), *b1 = LEAF(&r, 0.3f, H), *w2 = LEAF(&r, 0.3f, C, H), *b2 = LEAF(&r, 0.3f, C);
        for (int i = 0; i < C; i++) lw->data[i] += 1;
        size_t used[3];
        tensor *y = NULL, *h = NULL;
        for (int p = 0; p < 2; p++) {
            vitc_set_precision(p ? PRECISION_BF16 : PRECISION_FP32, NULL);
            used[p] = vitc_data_arena()->used;
            y = op_mlp_residual(res, lw, lb, 1e-5f, w1, b1, w2, b2, NULL, NULL);
            used[p + 1] = vitc_data_arena()->used;
            h = tape_node_at(tape_size() - 2)->out;
            tape_reset();
        }
        size_t saved = (used[1] - used[0]) - (used[2] - used[1]);
        EXPECT(h->bf16 && saved == (size_t)M * H * sizeof(bf16), "%d channels: the hidden layer is %s, %zu bytes saved",
               C, h->bf16 ? "bf16" : "fp32", saved);
        if (!h->bf16) continue;
        bool was = tape_set_grad_enabled(false);
        tensor *pre = op_layernorm_linear(res, lw, lb, 1e-5f, w1, b1, NULL);
        int off = 0;
        for (int64_t i = 0; i < pre->numel; i++) {
            off += tensor_bf16(h)[i] != bf16_from_float(pre->data[i]);
            pre->data[i] = bf16_to_float(bf16_from_float(pre->data[i]));
        }
        tensor *want = op_add(res, op_linear(op_gelu(pre), w2, b2));
        tape_set_grad_enabled(was);
        vitc_set_precision(PRECISION_FP32, NULL);
        double e = max_rel_diff(y->data, want->data, y->numel);
        EXPECT(off == 0, "%d channels: %d of %d kept values are not fc1's output rounded", C, off, M * H);
        EXPECT(e < 1e-5, "%d channels: output %.3g from fc2(gelu(rounded fc1))", C, e);
    }
    /* no other op reads the bf16 form: given one, it stops instead of reading half-floats as floats */
    tensor *x = LEAF(&r, 1, 4, 8), *lw = LEAF(&r, 0.2f, 8), *lb = LEAF(&r, 0.2f, 8), *w = LEAF(&r, 0.3f, 16, 8);
    tensor *h = op_layernorm_linear_bf16(x, lw, lb, 1e-5f, w, NULL, NULL);
    EXPECT(h->bf16, "the hidden layer of a recorded step is bf16");
    EXPECT_ERROR(op_gelu(h), "op gelu was given input 0 (4, 16) stored as bf16");
    tensor *w2 = LEAF(&r, 0.3f, 8, 16); /* residual_linear reads it only through its GELU */
    EXPECT_ERROR(op_residual_linear(x, h, w2, NULL, false, NULL),
                 "a bf16 input (4, 16) is an MLP's hidden layer");
    tape_reset();
    vitc_set_precision(PRECISION_FP32, NULL);
    arena_reset(&vitc_arena);
}

/* The GELUs that write bf16 (the MLP step's activation, fc2's operand), on every bf16 input (the
 * kept hidden layer's values; the forward's x rounded first, from floats that round to them): above
 * -6 the fp32 GELU's value rounded by bf16_from_float, bit for bit, NaN for NaN; from -6 down, where
 * the GELU is under 6e-9 in magnitude, at most that (the fp32 form's own tail runs off there for the
 * largest inputs); the slope within 1e-5 of the fp32 one (NaN at the infinities: infinity times a
 * density of zero). On AVX-512 they run polynomials on pieces, elsewhere the fp32 form. */
TEST(bf16_gelus_round_the_fp32_gelu) {
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof(float)), *raw = malloc(N * sizeof(float));
    float *act = malloc(N * sizeof(float)), *slope = malloc(N * sizeof(float));
    float *slope16 = malloc(N * sizeof(float));
    bf16 *x16 = malloc(N * sizeof(bf16)), *out = malloc(N * sizeof(bf16));
    bf16 *out_fwd = malloc(N * sizeof(bf16)), *out_kept = malloc(N * sizeof(bf16));
    bf16 *kept = malloc(N * sizeof(bf16));
    for (int i = 0; i < N; i++) {
        x16[i] = (bf16)i;
        x[i] = bf16_to_float(x16[i]);
        uint32_t below_half = ((uint32_t)i << 16) | 0x3fff; /* rounds (to nearest) to x16[i] */
        if (isfinite(x[i])) memcpy(&raw[i], &below_half, sizeof(float));
        else raw[i] = x[i];
    }
    gelu_value_and_slope(act, slope, x, N);
    gelu_bf16_value_and_slope(out, slope16, x16, N);
    gelu_forward_bf16(out_fwd, NULL, x, N);
    gelu_forward_bf16(out_kept, kept, raw, N);
    int off = 0;
    for (int i = 0; i < N; i++) {
        bf16 want = bf16_from_float(act[i]), got[3] = {out[i], out_fwd[i], out_kept[i]};
        /* (vcvtneps2bf16 takes a subnormal for a zero, and quiets a NaN) */
        bool ok = kept[i] == x16[i] || (x16[i] & 0x7f80) == 0 ||
                  (isnan(x[i]) && isnan(bf16_to_float(kept[i])));
        for (int k = 0; k < 3; k++) {
            float v = bf16_to_float(got[k]);
            if (isnan(x[i])) ok &= isnan(v);
            else if (x[i] > -6.0f) ok &= got[k] == want;
            else ok &= fabsf(v) <= 6e-9f || (isinf(x[i]) && isnan(v) && isnan(act[i]));
        }
        if (isfinite(x[i])) ok &= fabsf(slope16[i] - slope[i]) <= 1e-5f;
        if (!ok && off++ < 5)
            fprintf(stderr,
                    "    x = %a: gelu %a, bf16 %#x, %#x and %#x (want %#x), kept %#x (want %#x), "
                    "slope %a (want %a)\n",
                    x[i], act[i], out[i], out_fwd[i], out_kept[i], want, kept[i], x16[i],
                    slope16[i], slope[i]);
    }
    EXPECT(off == 0, "%d of %d values differ from the fp32 GELU rounded", off, N);
    /* floats at and beside the ends of the pieces (33 of them, 0.375 apart from -6): within a bf16
     * step of the fp32 GELU rounded */
    enum { EDGES = 33 * 3 };
    float edge[EDGES], edge_act[EDGES], edge_slope[EDGES];
    bf16 edge_out[EDGES];
    for (int e = 0; e < 33; e++) {
        float at = -6.0f + 0.375f * (float)e;
        edge[3 * e] = nextafterf(at, -INFINITY), edge[3 * e + 1] = at;
        edge[3 * e + 2] = nextafterf(at, INFINITY);
    }
    gelu_value_and_slope(edge_act, edge_slope, edge, EDGES);
    gelu_forward_bf16(edge_out, NULL, edge, EDGES);
    int far = 0;
    for (int e = 0; e < EDGES; e++) {
        bf16 want = bf16_from_float(edge_act[e]);
        bool ok = edge[e] <= -6.0f ? fabsf(bf16_to_float(edge_out[e])) <= 6e-9f
                                   : abs((int)edge_out[e] - (int)want) <= 1;
        if (!ok && far++ < 5)
            fprintf(stderr, "    x = %a: bf16 %#x, want %#x\n", edge[e], edge_out[e], want);
    }
    EXPECT(far == 0, "%d of %d values at the pieces' ends are off", far, EDGES);
    free(x), free(raw), free(act), free(slope), free(slope16);
    free(x16), free(out), free(out_fwd), free(out_kept), free(kept);
}

/* The MLP step's backward from its bf16 hidden layer recomputes the activation in bf16 and hands
 * it to fc2's weight gradient as stored: output and every gradient bit for bit those of the same
 * step given the hidden layer in fp32 (the same rounded values), which the products round as they
 * pack them; the hidden layer's own gradient is kept in bf16, the fp32 one rounded, but for the
 * few values the bf16 GELU's slope (within 1e-5 of the fp32 one) rounds one bf16 step apart. With
 * drop path and several passes of samples. */
TEST(bf16_mlp_backward_from_the_bf16_hidden_layer_is_the_fp32_one) {
    SKIP_WITHOUT_BF16();
    rng r;
    rng_seed(&r, 37, RNG_TEST);
    int C = 24, H = 300, B = 4, T = 1600; /* items_per_pass: two passes of two samples */
    tensor *res = LEAF(&r, 1, B, T, C), *w2 = LEAF(&r, 0.3f, C, H), *b2 = LEAF(&r, 0.3f, C);
    tensor *h32 = LEAF(&r, 1, B, T, H), *h16 = tensor_new_bf16(3, (int[]){B, T, H});
    h16->requires_grad = true;
    for (int64_t i = 0; i < h32->numel; i++) {
        tensor_bf16(h16)[i] = bf16_from_float(h32->data[i]);
        h32->data[i] = bf16_to_float(tensor_bf16(h16)[i]);
    }
    float *out[2], *grads[2][4];
    for (int k = 0; k < 2; k++) {
        tensor *h = k ? h16 : h32, *in[4] = {res, h, w2, b2};
        for (int i = 0; i < 4; i++)
            if (in[i]->grad) memset(in[i]->grad, 0, sizeof(float) * in[i]->numel);
        vitc_set_precision(PRECISION_BF16, NULL);
        rng drop;
        rng_seed(&drop, 5, RNG_TEST);
        tensor *y = op_residual_linear(res, h, w2, b2, true, DROP_PATH(0.25f, &drop, res));
        out[k] = malloc(sizeof(float) * y->numel);
        memcpy(out[k], y->data, sizeof(float) * y->numel);
        float *dy = malloc(sizeof(float) * y->numel);
        for (int64_t i = 0; i < y->numel; i++) dy[i] = sinf(0.37f * (float)i);
        tape_backward_from(y, dy);
        free(dy);
        for (int i = 0; i < 4; i++) {
            grads[k][i] = malloc(sizeof(float) * in[i]->numel);
            if (in[i]->grad_bf16)
                bf16_load(grads[k][i], (const bf16 *)in[i]->grad, in[i]->numel);
            else
                memcpy(grads[k][i], tensor_grad(in[i]), sizeof(float) * in[i]->numel);
        }
        EXPECT(h->grad_bf16 == (k == 1), "the %s hidden layer's gradient is %s", k ? "bf16" : "fp32",
               h->grad_bf16 ? "bf16" : "floats");
        if (k == 1) /* it is not read as floats */
            EXPECT_ERROR(tensor_grad(h), "the gradient of (4, 1600, 300) is kept in bf16");
        tape_reset();
        vitc_set_precision(PRECISION_FP32, NULL);
    }
    EXPECT(!memcmp(out[0], out[1], sizeof(float) * res->numel), "outputs differ");
    static const char *names[4] = {"residual", "hidden layer", "fc2 weight", "fc2 bias"};
    const int64_t sizes[4] = {res->numel, h32->numel, w2->numel, b2->numel};
    /* the bf16 gradient: the fp32 one rounded, zeros of either sign alike (a product of zero
     * keeps its sign there, where the floats added it to +0) */
    int64_t off = 0, far = 0;
    for (int64_t i = 0; i < h32->numel; i++) {
        bf16 want = bf16_from_float(grads[0][1][i]), got = bf16_from_float(grads[1][1][i]);
        bool differs = bf16_to_float(want) != grads[1][1][i];
        int step = abs((int)(want & 0x7fff) - (int)(got & 0x7fff));
        bool same_sign = !((want ^ got) & 0x8000) || !(want & 0x7fff) || !(got & 0x7fff);
        off += differs;
        far += differs && (step > 1 || !same_sign);
        grads[0][1][i] = grads[1][1][i];
    }
    EXPECT(off <= h32->numel / 1000 && far == 0,
           "%lld values of the hidden layer's bf16 gradient are not the fp32 one rounded, %lld of "
           "them more than a step apart", (long long)off, (long long)far);
    for (int i = 0; i < 4; i++) {
        EXPECT(!memcmp(grads[0][i], grads[1][i], sizeof(float) * sizes[i]),
               "the gradient of the %s differs from the fp32 hidden layer's", names[i]);
        free(grads[0][i]), free(grads[1][i]);
    }
    free(out[0]), free(out[1]);
    arena_reset(&vitc_arena);
}

typedef struct windows_ctx {
    int wh, ww, shift;
    bool unfused; /* op_layernorm then op_window_partition: the normalised windows in fp32 */
} windows_ctx;

/* q, k and v of normalised windows, each by its own GEMM as in Swin and CSwin, concatenated */
static tensor *windows_qkv_fn(tensor **in, const void *ctx) {
    const windows_ctx *c = ctx;
    int C = in[0]->shape[3];
    tensor *win =
        c->unfused ? op_window_partition(op_layernorm(in[0], in[1], in[2], 1e-5f, NULL), c->wh,
                                         c->ww, c->shift)
                   : op_layernorm_windows(in[0], in[1], in[2], 1e-5f, c->wh, c->ww, c->shift, NULL);
    tensor *qkv[3];
    for (int i = 0; i < 3; i++) qkv[i] = op_linear_rows(win, in[3], in[4], i * C, C);
    return op_concat(3, qkv, 2);
}

/* The fused backward of a bf16 hidden layer gives the bits of the three passes it replaces
 * (gelu_bf16_value_and_slope, the product g w2, scale_groups' product) with dh rounded to bf16, or
 * leaves dh alone without it, on one thread or two: row chunks and a short last one, fewer rows
 * than a chunk, a hidden width whose chunks are the fewest rows, two blocks of the product's inner
 * dimension. */
TEST(bf16_mlp_hidden_backward_is_the_three_passes_it_fuses) {
    SKIP_WITHOUT_BF16();
    static const struct { int M, C, H; } shapes[] = {
        {1000, 24, 300}, {77, 96, 384}, {150, 40, 2900}, {200, 400, 96}};
    int threads = vitc_threads();
    rng r;
    rng_seed(&r, 41, RNG_TEST);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s].M, C = shapes[s].C, H = shapes[s].H;
        size_t n = (size_t)M * H;
        bf16 *h = malloc(n * sizeof(bf16)), *act[2] = {malloc(n * sizeof(bf16)), malloc(n * sizeof(bf16))};
        float *g = malloc(sizeof(float) * M * C), *w2 = malloc(sizeof(float) * C * H);
        float *dh = malloc(sizeof(float) * n);
        bf16 *dh16 = malloc(n * sizeof(bf16));
        float *slope = malloc(sizeof(float) * n), *dact = malloc(sizeof(float) * n);
        for (size_t i = 0; i < n; i++) h[i] = bf16_from_float(i == 5 ? NAN : 3.0f * rng_normal(&r));
        for (int i = 0; i < M * C; i++) g[i] = rng_normal(&r);
        for (int i = 0; i < C * H; i++) w2[i] = 0.2f * rng_normal(&r);
        for (int t = 1; t <= 2; t++)
            for (int with_dh = 0; with_dh < 2; with_dh++) {
                vitc_set_threads(t);
                for (size_t i = 0; i < n; i++) dh16[i] = (bf16)(i % 97);
                gelu_bf16_value_and_slope(act[0], slope, h, (int64_t)n);
                gemm_bf16(false, false, M, H, C, 1.0f, g, C, w2, H, 0.0f, dact, H, t);
                scale_groups(dh, dact, slope, (int64_t)n, 1, false);
                mlp_dims d = {M, C, H, M};
                float *scratch = malloc(sizeof(float) * mlp_hidden_backward_scratch_floats(&d));
                mlp_hidden_backward_bf16(with_dh ? dh16 : NULL, act[1], h, g, w2, &d, scratch);
                free(scratch);
                EXPECT(!memcmp(act[0], act[1], n * sizeof(bf16)),
                       "%d x %d x %d, %d threads: the activation differs", M, C, H, t);
                size_t off = 0;
                for (size_t i = 0; i < n; i++)
                    off += dh16[i] != (with_dh ? bf16_from_float(dh[i]) : (bf16)(i % 97));
                EXPECT(off == 0, "%d x %d x %d, %d threads, %s dh: %zu values of its gradient %s",
                       M, C, H, t, with_dh ? "with" : "without", off,
                       with_dh ? "differ from the three passes' rounded" : "were written");
            }
        free(h), free(act[0]), free(act[1]), free(g), free(w2), free(dh), free(dh16);
        free(slope), free(dact);
    }
    vitc_set_threads(threads);
}

/* Under bf16 the gradient of an MLP's hidden layer is kept in bf16 where residual_linear is its
 * one reader (tensor_grad_bf16): fc1's backward (layernorm_linear) reads it as stored, and for a
 * producer that cannot (here layer norm into windows) the tape widens it first. Every gradient is
 * bit for bit that of the same chain whose hidden layer has a second reader, a linear layer of zero
 * weight, which keeps the gradient in floats: the same rounded values, summed in the same order. */
TEST(bf16_mlp_hidden_gradient_is_kept_in_bf16) {
    SKIP_WITHOUT_BF16();
    int B = 2, T = 1600, C = 24, H = 96; /* windows: (B, 40, 40) tokens in windows of 4 x 4 */
    for (int producer = 0; producer < 2; producer++) {
        float *grads[2][8];
        int64_t sizes[8];
        int n_grads = 0;
        for (int second_reader = 0; second_reader < 2; second_reader++) {
            rng r;
            rng_seed(&r, 43, RNG_TEST);
            vitc_set_precision(PRECISION_BF16, NULL);
            int K = producer ? C : H; /* the hidden layer's width */
            tensor *x = producer ? LEAF(&r, 1, B, 40, 40, C) : LEAF(&r, 1, B, T, C);
            tensor *lw = LEAF(&r, 0.2f, C), *lb = LEAF(&r, 0.2f, C);
            tensor *w1 = LEAF(&r, 0.3f, H, C), *b1 = LEAF(&r, 0.3f, H);
            tensor *w2 = LEAF(&r, 0.3f, C, K), *b2 = LEAF(&r, 0.3f, C);
            tensor *h = producer ? op_layernorm_windows(x, lw, lb, 1e-5f, 4, 4, 0, NULL)
                                 : op_layernorm_linear_bf16(x, lw, lb, 1e-5f, w1, b1, NULL);
            tensor *res = producer ? LEAF(&r, 1, B * 100, 16, C) : LEAF(&r, 1, B, T, C);
            EXPECT(h->bf16, "the hidden layer is bf16");
            rng drop;
            rng_seed(&drop, 5, RNG_TEST);
            tensor *y = op_residual_linear(res, h, w2, b2, true, DROP_PATH(0.25f, &drop, res));
            if (second_reader) {
                tensor *zero = tensor_zeros(2, (int[]){C, K});
                zero->requires_grad = true;
                y = op_add(y, op_linear(h, zero, NULL));
            }
            float *dy = malloc(sizeof(float) * y->numel);
            for (int64_t i = 0; i < y->numel; i++) dy[i] = sinf(0.37f * (float)i);
            tape_backward_from(y, dy);
            free(dy);
            tensor *in[7] = {x, lw, lb, res, w2, b2, w1};
            n_grads = producer ? 6 : 7;
            for (int i = 0; i < n_grads; i++) {
                sizes[i] = in[i]->numel;
                grads[second_reader][i] = malloc(sizeof(float) * sizes[i]);
                memcpy(grads[second_reader][i], tensor_grad(in[i]), sizeof(float) * sizes[i]);
            }
            if (!producer) { /* and fc1's bias, the sums of the gradient's columns */
                sizes[n_grads] = b1->numel;
                grads[second_reader][n_grads] = malloc(sizeof(float) * b1->numel);
                memcpy(grads[second_reader][n_grads], tensor_grad(b1), sizeof(float) * b1->numel);
            }
            tape_reset();
            vitc_set_precision(PRECISION_FP32, NULL);
            arena_reset(&vitc_arena);
        }
        if (!producer) n_grads++;
        static const char *names[] = {"input", "norm weight", "norm bias", "residual",
                                      "fc2 weight", "fc2 bias", "fc1 weight", "fc1 bias"};
        for (int i = 0; i < n_grads; i++) {
            EXPECT(!memcmp(grads[0][i], grads[1][i], sizeof(float) * sizes[i]),
                   "%s: the gradient of the %s differs from the float hidden gradient's",
                   producer ? "windows" : "layernorm_linear", names[i]);
            free(grads[0][i]), free(grads[1][i]);
        }
    }
}

/* Under bf16 the normalised windows the tape keeps (Swin's and CSwin's norm1, read only by the qkv
 * products) are bf16: the fp32 windows rounded, and the output and every gradient bit for bit
 * those of the same chain with the windows in fp32, which the products round as they pack them.
 * Shifted windows and a single one (CSwin's last stage), an even and an odd channel count. */
TEST(bf16_normalised_windows_are_kept_in_bf16) {
    SKIP_WITHOUT_BF16();
    rng r;
    rng_seed(&r, 29, RNG_TEST);
    static const windows_ctx cases[] = {{2, 3, 1, false}, {4, 6, 0, false}};
    static const int channels[] = {16, 9};
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 2; i++) {
            int C = channels[c];
            tensor *x = LEAF(&r, 1, 2, 4, 6, C), *lw = LEAF(&r, 0.2f, C), *lb = LEAF(&r, 0.2f, C);
            tensor *w = LEAF(&r, 0.3f, 3 * C, C), *b = LEAF(&r, 0.3f, 3 * C);
            for (int j = 0; j < C; j++) lw->data[j] += 1;
            tensor *in[5] = {x, lw, lb, w, b};
            windows_ctx fused = cases[i], unfused = fused;
            unfused.unfused = true;
            tensor *plain =
                op_layernorm_windows(x, lw, lb, 1e-5f, fused.wh, fused.ww, fused.shift, NULL);
            vitc_set_precision(PRECISION_BF16, NULL);
            tensor *kept =
                op_layernorm_windows(x, lw, lb, 1e-5f, fused.wh, fused.ww, fused.shift, NULL);
            bool was = tape_set_grad_enabled(false); /* inference passes them on in bf16 too */
            tensor *passed =
                op_layernorm_windows(x, lw, lb, 1e-5f, fused.wh, fused.ww, fused.shift, NULL);
            tape_set_grad_enabled(was);
            tape_reset();
            vitc_set_precision(PRECISION_FP32, NULL);
            EXPECT(kept->bf16 && passed->bf16 && !plain->bf16,
                   "%d channels, case %d: recorded windows %s, unrecorded %s, fp32 %s", C, i,
                   kept->bf16 ? "bf16" : "fp32", passed->bf16 ? "bf16" : "fp32",
                   plain->bf16 ? "bf16" : "fp32");
            if (!kept->bf16 || !passed->bf16) continue;
            int off = 0;
            for (int64_t j = 0; j < plain->numel; j++) {
                bf16 rounded = bf16_from_float(plain->data[j]);
                off += tensor_bf16(kept)[j] != rounded || tensor_bf16(passed)[j] != rounded;
            }
            EXPECT(off == 0, "%d channels, case %d: %d of %lld kept or passed values are not the fp32 "
                   "windows rounded", C, i, off, (long long)plain->numel);
            run_result a = run_in(PRECISION_BF16, windows_qkv_fn, &fused, 5, in, 3);
            run_result u = run_in(PRECISION_BF16, windows_qkv_fn, &unfused, 5, in, 3);
            int64_t out_n = (int64_t)x->numel / C * 3 * C;
            EXPECT(!memcmp(a.out, u.out, sizeof(float) * out_n), "%d channels, case %d: output differs from fp32 windows",
                   C, i);
            for (int j = 0; j < 5; j++)
                EXPECT(!memcmp(a.grads[j], u.grads[j], sizeof(float) * in[j]->numel),
                       "%d channels, case %d: gradient of input %d differs from fp32 windows", C, i, j);
            run_free(&a, 5);
            run_free(&u, 5);
            EXPECT(bf16_follows_fp32("windows qkv", windows_qkv_fn, &fused, 5, in, 1e-2, false), "windows qkv");
        }
    /* no op but linear reads the bf16 windows */
    vitc_set_precision(PRECISION_BF16, NULL);
    tensor *x = LEAF(&r, 1, 1, 2, 2, 8), *lw = LEAF(&r, 0.2f, 8), *lb = LEAF(&r, 0.2f, 8);
    tensor *win = op_layernorm_windows(x, lw, lb, 1e-5f, 2, 2, 0, NULL);
    EXPECT_ERROR(op_gelu(win), "op gelu was given input 0 (1, 4, 8) stored as bf16");
    tape_reset();
    vitc_set_precision(PRECISION_FP32, NULL);
    arena_reset(&vitc_arena);
}

typedef struct local_ctx {
    int heads;
    bool kept; /* q's and k's blocks by op_window_partition_channels_bf16 */
} local_ctx;

/* ELFATT's local heads: channels 8..24 of q, k, v (B, 4, 6, 24) in 2 x 3 blocks, attention in each */
static tensor *local_attention_fn(tensor **in, const void *ctx) {
    const local_ctx *c = ctx;
    tensor *blk[3];
    for (int i = 0; i < 3; i++)
        blk[i] = i < 2 && c->kept ? op_window_partition_channels_bf16(in[i], 8, 16, 2, 3, 0)
                                  : op_window_partition_channels(in[i], 8, 16, 2, 3, 0);
    return op_attention(blk[0], blk[1], blk[2], c->heads, 0.25f, NULL, NULL, 1);
}

/* ELFATT's local q and k blocks, read only by attention's products, are kept in bf16 under bf16:
 * the blocks rounded, and the output and gradients bit for bit those from fp32 blocks, which the
 * products round (on the bf16 tiles, one head of 16 channels, and through the GEMMs, two of 8) */
TEST(bf16_local_attention_keeps_q_and_k_in_bf16) {
    SKIP_WITHOUT_BF16();
    rng r;
    rng_seed(&r, 31, RNG_TEST);
    for (int heads = 1; heads <= 2; heads++) {
        tensor *q = LEAF(&r, 1, 2, 4, 6, 24), *k = LEAF(&r, 1, 2, 4, 6, 24), *v = LEAF(&r, 1, 2, 4, 6, 24);
        tensor *in[3] = {q, k, v};
        local_ctx kept = {heads, true}, plain = {heads, false};
        vitc_set_precision(PRECISION_BF16, NULL);
        tensor *blk = op_window_partition_channels_bf16(q, 8, 16, 2, 3, 0);
        bool was = tape_set_grad_enabled(false);
        tensor *ref = op_window_partition_channels(q, 8, 16, 2, 3, 0);
        tape_set_grad_enabled(was);
        tape_reset();
        vitc_set_precision(PRECISION_FP32, NULL);
        EXPECT(blk->bf16, "%d heads: recorded q blocks are %s", heads, blk->bf16 ? "bf16" : "fp32");
        if (!blk->bf16) continue;
        int off = 0;
        for (int64_t j = 0; j < ref->numel; j++) off += tensor_bf16(blk)[j] != bf16_from_float(ref->data[j]);
        EXPECT(off == 0, "%d heads: %d of %lld kept values are not the blocks rounded", heads, off, (long long)ref->numel);
        run_result a = run_in(PRECISION_BF16, local_attention_fn, &kept, 3, in, 5);
        run_result u = run_in(PRECISION_BF16, local_attention_fn, &plain, 3, in, 5);
        EXPECT(!memcmp(a.out, u.out, sizeof(float) * ref->numel), "%d heads: output differs from fp32 blocks", heads);
        for (int j = 0; j < 3; j++)
            EXPECT(!memcmp(a.grads[j], u.grads[j], sizeof(float) * in[j]->numel),
                   "%d heads: gradient of input %d differs from fp32 blocks", heads, j);
        run_free(&a, 3);
        run_free(&u, 3);
        EXPECT(bf16_follows_fp32("local attention", local_attention_fn, &kept, 3, in, 2e-2, false), "%d heads", heads);
    }
    vitc_set_precision(PRECISION_BF16, NULL);
    tensor *x = LEAF(&r, 1, 1, 2, 2, 8);
    EXPECT_ERROR(op_gelu(op_window_partition_channels_bf16(x, 0, 4, 2, 2, 0)),
                 "op gelu was given input 0 (1, 4, 4) stored as bf16");
    tape_reset();
    vitc_set_precision(PRECISION_FP32, NULL);
    arena_reset(&vitc_arena);
}

/* The linear layer in bf16 is exactly a product of the rounded operands summed in fp32: against an
 * fp32 GEMM of bf16-rounded x and w it differs only by the order of the fp32 sums */
TEST(bf16_linear_is_the_product_of_rounded_operands) {
    SKIP_WITHOUT_BF16();
    rng r;
    rng_seed(&r, 5, RNG_TEST);
    tensor *x = RANDN(&r, 1, 64, 96), *w = RANDN(&r, 1, 48, 96), *xr = RANDN(&r, 1, 64, 96), *wr = RANDN(&r, 1, 48, 96);
    for (int64_t i = 0; i < x->numel; i++) xr->data[i] = bf16_to_float(bf16_from_float(x->data[i]));
    for (int64_t i = 0; i < w->numel; i++) wr->data[i] = bf16_to_float(bf16_from_float(w->data[i]));
    vitc_set_precision(PRECISION_BF16, NULL);
    tensor *y = op_linear(x, w, NULL);
    vitc_set_precision(PRECISION_FP32, NULL);
    tensor *y_rounded = op_linear(xr, wr, NULL), *y_fp32 = op_linear(x, w, NULL);
    double to_rounded = max_rel_diff(y->data, y_rounded->data, y->numel);
    double to_fp32 = max_rel_diff(y->data, y_fp32->data, y->numel);
    arena_reset(&vitc_arena);
    EXPECT(to_rounded < 1e-6, "bf16 vs fp32 of rounded operands: %g", to_rounded);
    EXPECT(to_fp32 > 1e-4, "bf16 vs fp32: %g, as if nothing was rounded", to_fp32);
}

/* fp16 would flush gradients of 1e-30 to zero (its smallest subnormal is 6e-8) and need loss
 * scaling; bf16 has fp32's exponent range, so they keep their value to bf16's precision */
TEST(bf16_tiny_gradients_do_not_underflow) {
    SKIP_WITHOUT_BF16();
    rng r;
    rng_seed(&r, 9, RNG_TEST);
    tensor *x = LEAF(&r, 1, 16, 32), *w = LEAF(&r, 1, 8, 32);
    const float scales[] = {1e-30f, 1e-36f};
    for (int s = 0; s < 2; s++) {
        float dy[16 * 8], gx[2][16 * 32], gw[2][8 * 32];
        rng_seed(&r, 10, RNG_TEST);
        for (int i = 0; i < 16 * 8; i++) dy[i] = scales[s] * rng_normal(&r);
        for (int p = 0; p < 2; p++) {
            vitc_set_precision(p ? PRECISION_BF16 : PRECISION_FP32, NULL);
            zero_grad(x);
            zero_grad(w);
            tape_backward_from(op_linear(x, w, NULL), dy);
            memcpy(gx[p], x->grad, sizeof(gx[p]));
            memcpy(gw[p], w->grad, sizeof(gw[p]));
            tape_reset();
        }
        vitc_set_precision(PRECISION_FP32, NULL);
        double ex = norm_rel_diff(gx[1], gx[0], 16 * 32), ew = norm_rel_diff(gw[1], gw[0], 8 * 32);
        int zeros = 0;
        for (int i = 0; i < 16 * 32; i++) zeros += gx[1][i] == 0 && fabsf(gx[0][i]) >= 0x1p-126f; /* FTZ aside */
        EXPECT(ex < 1e-2 && ew < 1e-2 && zeros == 0, "scale %g: dx %g, dw %g off fp32, %d normal gradients lost", scales[s], ex, ew,
               zeros);
    }
    arena_reset(&vitc_arena);
}

/* Every registered model (narrowed as in test_models.c) in bf16: logits and every parameter's
 * gradient follow fp32's on the same weights and input */
TEST(bf16_every_registered_model_follows_fp32) {
    SKIP_WITHOUT_BF16();
    for (int i = 0; i < model_registry_count(); i++) {
        const char *name = model_registry_name(i);
        model_config mc;
        registry_config_narrow(&mc, name, 5);
        model *m = model_create(&mc, 1);
        rng r;
        rng_seed(&r, 3, RNG_TEST);
        tensor *x = RANDN(&r, 1, 2, mc.img_size, mc.img_size, mc.in_chans);
        float logits[2][10];
        float *grads[2];
        for (int p = 0; p < 2; p++) {
            vitc_set_precision(p ? PRECISION_BF16 : PRECISION_FP32, NULL);
            forward_opts fo = {.train = false};
            params_zero_grad(&m->ps);
            tensor *y = model_forward(m, x, &fo);
            memcpy(logits[p], y->data, sizeof(logits[p]));
            tape_backward(op_cross_entropy_labels(y, (int[]){1, 3}, 0.1f));
            grads[p] = malloc(sizeof(float) * m->ps.span);
            memcpy(grads[p], m->ps.grad, sizeof(float) * m->ps.span);
            tape_reset();
        }
        vitc_set_precision(PRECISION_FP32, NULL);
        double el = norm_rel_diff(logits[1], logits[0], 10), eg = norm_rel_diff(grads[1], grads[0], m->ps.span);
        free(grads[0]);
        free(grads[1]);
        model_free(m);
        arena_reset(&vitc_arena);
        if (getenv("VITC_TEST_VERBOSE")) printf("    %-22s logits %.2e  gradients %.2e\n", name, el, eg);
        EXPECT(el < 2e-2 && el > 1e-5, "%s: logits bf16 vs fp32 %.3g", name, el);
        EXPECT(eg < 5e-2 && eg > 1e-5, "%s: gradients bf16 vs fp32 %.3g", name, eg);
    }
}

static int losses_of(const char *name, const char *extra, char losses[][32]) {
    char out[16384], dir[400];
    int code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=%s --set train.epochs=4 "
                   "--set run.stop_after_steps=20 --threads 2 --quiet %s", tiny_run_config(), tiny_run_dir(), name, extra);
    if (code) {
        fprintf(stderr, "    train %s exited %d:\n%s", name, code, out);
        return -1;
    }
    snprintf(dir, sizeof(dir), "%s/runs/%s", tiny_run_dir(), name);
    return tiny_run_step_losses(dir, losses, 64);
}

TEST(bf16_training_follows_fp32_within_1_percent_and_resumes_exactly) {
    SKIP_WITHOUT_BF16();
    char fp32[64][32], half[64][32], resumed[64][32], out[16384];
    int n32 = losses_of("prec_fp32", "", fp32), n16 = losses_of("prec_bf16", "--precision bf16", half);
    EXPECT(n32 == 20 && n16 == 20, "%d and %d step lines", n32, n16);
    double worst = 0;
    bool differ = false;
    for (int i = 0; i < 20; i++) {
        double a = atof(fp32[i]), b = atof(half[i]);
        worst = max_error(worst, fabs(b - a) / a);
        differ |= strcmp(fp32[i], half[i]) != 0;
    }
    EXPECT(worst < 0.01 && differ, "worst relative loss difference %.4f over 20 steps (bf16 ran: %d)", worst, differ);
    /* stopped at step 8 and resumed: the precision travels in the checkpoint's config */
    int code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=prec_part --set train.epochs=4 "
                   "--set run.stop_after_steps=8 --precision bf16 --threads 2 --quiet", tiny_run_config(), tiny_run_dir());
    EXPECT(code == 0, "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train --resume %s/runs/prec_part/last.safetensors --set run.stop_after_steps=20 "
               "--threads 2 --quiet", tiny_run_dir());
    EXPECT(code == 0, "resume exit %d:\n%s", code, out);
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/runs/prec_part", tiny_run_dir());
    int nr = tiny_run_step_losses(dir, resumed, 64);
    EXPECT(nr == 20, "%d step lines", nr);
    for (int i = 0; i < 20; i++)
        EXPECT(!strcmp(resumed[i], half[i]), "step %d: %s resumed vs %s uninterrupted", i + 1, resumed[i], half[i]);
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --precision bf16 --data %s/val", dir, tiny_run_dir());
    EXPECT(code == 0 && strstr(out, "top-1"), "eval --precision bf16 exit %d:\n%s", code, out);
}

TEST(bf16_flags_reject_unknown_precisions) {
    char out[16384];
    int code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=prec_bad --precision fp16",
                   tiny_run_config(), tiny_run_dir());
    EXPECT(code == 1 && strstr(out, "train.precision") && strstr(out, "fp16"), "train exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./eval --ckpt nowhere.safetensors --precision fp16");
    EXPECT(code == 2 && strstr(out, "--precision fp16: expected fp32, bf16 or tf32"), "eval exit %d:\n%s", code, out);
    /* tf32 is a precision of the CUDA device only: the CPU refuses it, naming the device it needs */
    code = run(out, sizeof(out), "./eval --ckpt nowhere.safetensors --precision tf32");
    EXPECT(code == 1 && strstr(out, "--precision tf32: tf32") && strstr(out, "--device cuda"), "eval exit %d:\n%s",
           code, out);
}

/* on a CPU without AVX512_BF16, each tool stops at start-up with that error (exit 1): train before
 * it writes its run's directory, eval before it opens the checkpoint */
TEST(bf16_tools_stop_at_start_up_on_a_cpu_without_it) {
    if (!cpu_bf16_error()) SKIP("this CPU has AVX512_BF16: --precision bf16 runs here");
    char out[16384], dir[400];
    snprintf(dir, sizeof(dir), "%s/runs/prec_refused", tiny_run_dir());
    int code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=prec_refused "
                   "--precision bf16 --quiet", tiny_run_config(), tiny_run_dir());
    EXPECT(code == 1 && strstr(out, "error: train.precision bf16: --precision bf16 needs a CPU with "
                                    "AVX512_BF16") && strstr(out, "use --precision fp32") &&
               access(dir, F_OK) != 0,
           "train exit %d (%s %s):\n%s", code, dir, access(dir, F_OK) ? "absent" : "written", out);
    code = run(out, sizeof(out), "./eval --ckpt nowhere.safetensors --precision bf16");
    EXPECT(code == 1 && strstr(out, "error: --precision bf16: --precision bf16 needs a CPU with "
                                    "AVX512_BF16") && !strstr(out, "nowhere"),
           "eval exit %d:\n%s", code, out);
}

/* the start-up error of a CPU without AVX512_BF16 comes from cpu_bf16_problem (tested with made-up
 * CPUs in test_gemm_bf16.c); here: vitc_set_precision passes it on and keeps the old precision */
TEST(bf16_set_precision_refuses_what_the_cpu_lacks) {
    const char *why = NULL;
    bool ok = vitc_set_precision(PRECISION_BF16, &why);
    EXPECT(ok == (cpu_bf16_error() == NULL), "set bf16: %d", ok);
    EXPECT(ok ? vitc_precision() == PRECISION_BF16 : (why && strstr(why, "AVX512_BF16") && vitc_precision() == PRECISION_FP32),
           "why: %s", why ? why : "(null)");
    vitc_set_precision(PRECISION_FP32, NULL);
    why = NULL;
    EXPECT(!vitc_set_precision(PRECISION_TF32, &why) && why && strstr(why, "--device cuda") &&
               vitc_precision() == PRECISION_FP32, "set tf32 on the CPU: %s", why ? why : "(null)");
    precision p;
    EXPECT(precision_parse("bf16", &p) && p == PRECISION_BF16 && precision_parse("tf32", &p) && p == PRECISION_TF32 &&
               !precision_parse("fp16", &p), "parse");
}

/* ---- Softmax attention's bf16 tiles against a reference of the same roundings ---- */

static double rounded(float x) { return bf16_to_float(bf16_from_float(x)); }

typedef struct attention_case {
    int seqs, n, m, heads, d, windows;
    float scale;
    const float *bias, *mask; /* (heads, n, m), (windows, n, m) or NULL */
} attention_case;

/* out, and dq, dk, dv, dbias (+=) for the upstream dout, in double from what --precision bf16
 * rounds: q, k (logits), the probabilities and v (output); dout and P (dv), dout and v (dP), dS and
 * k (dq), dS and q (dk); softmax, its gradient and the bias gradient unrounded. With round_all
 * false: the same without any rounding, i.e. fp32 attention's exact value. */
static void attention_reference(float *out, float *dq, float *dk, float *dv, float *dbias,
                                const float *dout, const float *q, const float *k, const float *v,
                                const attention_case *c, bool round_all) {
    int n = c->n, m = c->m, d = c->d, C = c->heads * d;
#define R(x) (round_all ? rounded(x) : (double)(x))
    double *P = malloc(sizeof(double) * n * m), *dS = malloc(sizeof(double) * n * m);
    for (int s = 0; s < c->seqs; s++)
        for (int h = 0; h < c->heads; h++) {
            const float *qs = q + (size_t)s * n * C + h * d, *ks = k + (size_t)s * m * C + h * d;
            const float *vs = v + (size_t)s * m * C + h * d, *gs = dout + (size_t)s * n * C + h * d;
            for (int i = 0; i < n; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < m; j++) {
                    double dot = 0;
                    for (int e = 0; e < d; e++) dot += R(qs[i * C + e]) * R(ks[j * C + e]);
                    P[i * m + j] = c->scale * dot + (c->bias ? c->bias[(h * n + i) * m + j] : 0) +
                                   (c->mask ? c->mask[((s % c->windows) * n + i) * m + j] : 0);
                    mx = fmax(mx, P[i * m + j]);
                }
                for (int j = 0; j < m; j++) sum += P[i * m + j] = exp(P[i * m + j] - mx);
                double dot_row = 0;
                for (int j = 0; j < m; j++) {
                    P[i * m + j] /= sum;
                    double dp = 0;
                    for (int e = 0; e < d; e++) dp += R(gs[i * C + e]) * R(vs[j * C + e]);
                    dS[i * m + j] = dp;
                    dot_row += dp * P[i * m + j];
                }
                for (int j = 0; j < m; j++) {
                    dS[i * m + j] = P[i * m + j] * (dS[i * m + j] - dot_row);
                    dbias[(h * n + i) * m + j] += (float)dS[i * m + j];
                }
                for (int e = 0; e < d; e++) {
                    double o = 0, g = 0;
                    for (int j = 0; j < m; j++) {
                        o += R((float)P[i * m + j]) * R(vs[j * C + e]);
                        g += R((float)dS[i * m + j]) * R(ks[j * C + e]);
                    }
                    out[(size_t)s * n * C + i * C + h * d + e] = (float)o;
                    dq[(size_t)s * n * C + i * C + h * d + e] += (float)(c->scale * g);
                }
            }
            for (int j = 0; j < m; j++)
                for (int e = 0; e < d; e++) {
                    double gv = 0, gk = 0;
                    for (int i = 0; i < n; i++) {
                        gv += R((float)P[i * m + j]) * R(gs[i * C + e]);
                        gk += R((float)dS[i * m + j]) * R(qs[i * C + e]);
                    }
                    dv[(size_t)s * m * C + j * C + h * d + e] += (float)gv;
                    dk[(size_t)s * m * C + j * C + h * d + e] += (float)(c->scale * gk);
                }
        }
#undef R
    free(P), free(dS);
}

/* Heads of 16 to 64 channels run on attention_bf16.c's tiles (several query blocks, key counts
 * that are not multiples of 16, odd row counts, masks and biases; the backward on the tiles when
 * there are pairs for every thread, on gemm_bf16 otherwise). Each rounding of an operand moves the
 * results by ~1.5e-3 (normwise), and they are 3.2-4.3e-3 from exact attention; from the reference
 * of the same roundings they are 1e-8 to 5e-5, but for a probability whose fp32 and double values
 * round to neighbouring bf16 (1-3 of the ~40k here: up to 9e-5). Bounds: within 3e-4 of the
 * reference, at least 1e-3 from exact attention, so a missed or extra rounding fails. */
static void check_attention_tiles(bool amx) {
    rng r;
    rng_seed(&r, 23, RNG_TEST);
    bool was = gemm_bf16_allow_amx(amx);
    float *mask = malloc(sizeof(float) * 2 * 70 * 70), *far = malloc(sizeof(float) * 20 * 33);
    for (int i = 0; i < 2 * 70 * 70; i++) mask[i] = i % 11 == 4 ? -100.0f : 0.0f;
    for (int i = 0; i < 20 * 33; i++) far[i] = -120.0f; /* every logit below where exp clamps */
    attention_case cases[] = {
        {4, 70, 70, 2, 16, 2, 0.25f, NULL, mask}, /* Swin-like windows, two query blocks */
        {3, 37, 197, 3, 64, 1, 0.125f, NULL, NULL}, /* agents over DeiT's tokens */
        {2, 131, 49, 2, 48, 1, 0.144f, NULL, NULL}, /* tokens over agents, three blocks */
        {1, 45, 33, 1, 32, 1, 0.177f, NULL, NULL},  /* one pair: the backward on gemm_bf16 */
        {2, 20, 33, 2, 32, 1, 0.177f, NULL, far},   /* the rows' maxima not the keys' padding */
        {2, 40, 9, 2, 32, 1, 0.177f, NULL, NULL},   /* tokens over 9 agents: half a word tile */
    };
    const char *kernel = amx ? "amx" : "vdpbf16ps";
    for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        attention_case c = cases[t];
        int C = c.heads * c.d;
        tensor *q = LEAF(&r, 1, c.seqs, c.n, C), *k = LEAF(&r, 1, c.seqs, c.m, C), *v = LEAF(&r, 1, c.seqs, c.m, C);
        tensor *bias = LEAF(&r, 0.5f, c.heads, c.n, c.m);
        c.bias = bias->data;
        size_t qn = q->numel, kn = k->numel, bn = bias->numel;
        float *dout = malloc(sizeof(float) * qn);
        for (size_t i = 0; i < qn; i++) dout[i] = rng_normal(&r);
        float *ref[2][5]; /* (rounded, exact) x (out, dq, dk, dv, dbias) */
        for (int exact = 0; exact < 2; exact++) {
            size_t sizes[5] = {qn, qn, kn, kn, bn};
            for (int i = 0; i < 5; i++) ref[exact][i] = calloc(sizes[i], sizeof(float));
            attention_reference(ref[exact][0], ref[exact][1], ref[exact][2], ref[exact][3], ref[exact][4],
                                dout, q->data, k->data, v->data, &c, !exact);
        }
        vitc_set_precision(PRECISION_BF16, NULL);
        tensor *y = op_attention(q, k, v, c.heads, c.scale, bias, c.mask, c.windows);
        tape_backward_from(y, dout);
        vitc_set_precision(PRECISION_FP32, NULL);
        const float *got[5] = {y->data, q->grad, k->grad, v->grad, bias->grad};
        const size_t sizes[5] = {qn, qn, kn, kn, bn};
        const char *names[5] = {"output", "dq", "dk", "dv", "dbias"};
        for (int i = 0; i < 5; i++) {
            double to_rounded = norm_rel_diff(got[i], ref[0][i], (int64_t)sizes[i]);
            double to_exact = norm_rel_diff(got[i], ref[1][i], (int64_t)sizes[i]);
            EXPECT(to_rounded < 3e-4, "%s case %zu %s: %.3g from the bf16 reference", kernel, t,
                   names[i], to_rounded);
            EXPECT(to_exact > 1e-3,
                   "%s case %zu %s: %.3g from exact attention, as if nothing was rounded", kernel,
                   t, names[i], to_exact);
        }
        for (int exact = 0; exact < 2; exact++)
            for (int i = 0; i < 5; i++) free(ref[exact][i]);
        free(dout);
        tape_reset();
        arena_reset(&vitc_arena);
    }
    free(mask), free(far);
    gemm_bf16_allow_amx(was);
}

/* vdpbf16ps's tiles, and AMX's where the processor has them */
TEST(bf16_attention_tiles_round_as_the_reference) {
    SKIP_WITHOUT_BF16();
    check_attention_tiles(false);
    if (gemm_bf16_amx_here()) check_attention_tiles(true);
}

/* what the backward hook saw: after attention's node, q's, k's and v's gradients as written; after
 * the chunks' node, its input's gradient */
typedef struct qkv_grads {
    tensor *x, *qkv[3];
    float *g[3], *dx;
    bool in_bf16[3];
} qkv_grads;

static void capture_qkv_grads(int node, void *ctx) {
    qkv_grads *c = ctx;
    int op = tape_node_at(node)->op;
    if (op == OP_LINEAR_CHUNKS) {
        c->dx = malloc(sizeof(float) * c->x->numel);
        memcpy(c->dx, c->x->grad, sizeof(float) * c->x->numel);
    }
    if (op != OP_ATTENTION) return;
    for (int i = 0; i < 3; i++) {
        tensor *t = c->qkv[i];
        c->in_bf16[i] = t->grad && t->grad_bf16;
        c->g[i] = calloc((size_t)t->numel, sizeof(float));
        if (c->in_bf16[i]) bf16_load(c->g[i], (const uint16_t *)t->grad, t->numel);
    }
}

/* Under bf16, attention writes the gradients of q, k and v from op_linear_chunks rounded to bf16
 * (their one reader): the fp32 gradients that the same tiles add into a leaf's, rounded. The chunks'
 * node then takes them in one product each for x's and w's gradient: x's, w's and b's gradients
 * are those sums of the bf16 values (products exact, sums within fp32 rounding of a double
 * reference), from x in fp32 and from Swin's windows kept in bf16 (two blocks of query rows), for
 * chunks of 48 columns, which the products cannot read as blocks (each chunk widened), and with x
 * read again after the chunks (the chunks' backward adds to the gradient it has; else it writes
 * it whole, from uninitialised memory: tensor_grad_whole). */
TEST(bf16_attention_writes_qkv_gradients_that_one_product_takes) {
    SKIP_WITHOUT_BF16();
    /* the bf16 tiles take the backward where its 6-9 pairs keep every thread busy: on 2 threads
     * (vitc_items_in_parallel); on 4 or more, the fp32 GEMM path, whose gradients are fp32 */
    vitc_set_threads(2);
    rng r;
    rng_seed(&r, 43, RNG_TEST);
    const int seqs = 3, n = 70;
    for (int t = 0; t < 5; t++) {
        int windows = t == 1, heads = t % 2 == 0 && t ? 3 : 2, d = heads == 3 ? 16 : 32;
        int C = heads * d, M = seqs * n;
        bool read_again = t >= 3;
        tensor *x = windows ? LEAF(&r, 1, seqs, 10, 7, C) : LEAF(&r, 1, seqs, n, C);
        tensor *ln_w = LEAF(&r, 0.5f, C), *ln_b = LEAF(&r, 0.5f, C);
        tensor *w = LEAF(&r, 0.2f, 3 * C, C), *b = LEAF(&r, 0.5f, 3 * C);
        float *dout = malloc(sizeof(float) * M * C);
        for (int i = 0; i < M * C; i++) dout[i] = rng_normal(&r);
        vitc_set_precision(PRECISION_BF16, NULL);
        qkv_grads c = {0};
        c.x = windows ? op_layernorm_windows(x, ln_w, ln_b, 1e-5f, 10, 7, 0, NULL) : x;
        float *xs = malloc(sizeof(float) * M * C);
        if (c.x->bf16) bf16_load(xs, tensor_bf16(c.x), (int64_t)M * C);
        else memcpy(xs, c.x->data, sizeof(float) * M * C);
        op_linear_chunks(c.x, w, b, 3, c.qkv);
        tensor *y = op_attention(c.qkv[0], c.qkv[1], c.qkv[2], heads, 0.177f, NULL, NULL, 1);
        if (read_again) y = op_add(y, x); /* x's gradient: dout before the chunks' */
        tape_set_backward_hook(capture_qkv_grads, &c);
        tape_backward_from(y, dout);
        tape_set_backward_hook(NULL, NULL);
        /* the same attention on leaves holding q, k and v: fp32 gradients */
        tensor *leaf[3];
        for (int i = 0; i < 3; i++) {
            leaf[i] = LEAF(&r, 0, seqs, n, C);
            memcpy(leaf[i]->data, c.qkv[i]->data, sizeof(float) * M * C);
        }
        tape_reset();
        tensor *y2 = op_attention(leaf[0], leaf[1], leaf[2], heads, 0.177f, NULL, NULL, 1);
        tape_backward_from(y2, dout);
        vitc_set_precision(PRECISION_FP32, NULL);
        static const char *names[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) {
            EXPECT(c.in_bf16[i], "%s's gradient is not kept in bf16", names[i]);
            int64_t off = 0;
            for (int j = 0; j < M * C; j++)
                off += c.g[i][j] != bf16_to_float(bf16_from_float(leaf[i]->grad[j]));
            EXPECT(off == 0, "%lld values of %s's bf16 gradient are not the fp32 one rounded",
                   (long long)off, names[i]);
        }
        /* x's, w's and b's gradients from the bf16 ones, in double */
        float *want_dx = calloc((size_t)M * C, sizeof(float));
        float *want_dw = calloc((size_t)3 * C * C, sizeof(float)), *want_db = calloc((size_t)3 * C, sizeof(float));
        for (int o = 0; o < 3 * C; o++) {
            const float *g = c.g[o / C];
            double sb = 0;
            for (int m = 0; m < M; m++) sb += g[m * C + o % C];
            want_db[o] = (float)sb;
            for (int k = 0; k < C; k++) {
                double s = 0;
                for (int m = 0; m < M; m++)
                    s += (double)g[m * C + o % C] * bf16_to_float(bf16_from_float(xs[m * C + k]));
                want_dw[o * C + k] = (float)s;
            }
        }
        for (int m = 0; m < M; m++)
            for (int k = 0; k < C; k++) {
                double s = 0;
                for (int o = 0; o < 3 * C; o++)
                    s += (double)c.g[o / C][m * C + o % C] *
                         bf16_to_float(bf16_from_float(w->data[o * C + k]));
                want_dx[m * C + k] = (float)(s + (read_again ? dout[m * C + k] : 0.0));
            }
        double e_dx = c.dx ? norm_rel_diff(c.dx, want_dx, (int64_t)M * C) : INFINITY;
        double e_dw = norm_rel_diff(w->grad, want_dw, 3 * C * C);
        double e_db = norm_rel_diff(b->grad, want_db, 3 * C);
        EXPECT(e_dx < 1e-5 && e_dw < 1e-5 && e_db < 1e-5,
               "%s, %d channels%s: dx %.2e, dw %.2e, db %.2e from the sums of the bf16 gradients",
               windows ? "bf16 windows" : "fp32 input", C, read_again ? ", x read again" : "", e_dx,
               e_dw, e_db);
        for (int i = 0; i < 3; i++) free(c.g[i]);
        free(c.dx), free(xs), free(dout), free(want_dx), free(want_dw), free(want_db);
        tape_reset();
        arena_reset(&vitc_arena);
    }
}

/* the gradients of a chunks node's outputs as they reach it: after attention's node, the last
 * before it */
typedef struct chunk_grads {
    tensor *out[4];
    float *g[4];
    bool in_bf16[4];
} chunk_grads;

static void capture_chunk_grads(int node, void *ctx) {
    chunk_grads *c = ctx;
    if (tape_node_at(node)->op != OP_ATTENTION) return;
    for (int i = 0; i < 4; i++) {
        tensor *t = c->out[i];
        c->g[i] = calloc((size_t)t->numel, sizeof(float));
        c->in_bf16[i] = t->grad && t->grad_bf16;
        if (c->in_bf16[i]) bf16_load(c->g[i], (const uint16_t *)t->grad, t->numel);
        else if (t->grad) memcpy(c->g[i], t->grad, sizeof(float) * t->numel);
    }
}

/* Under bf16, a chunks node whose gradients are not all bf16 rounds the fp32 ones, as its products
 * would while packing them, and takes a missing one as zeros: one product for x's gradient and one
 * for w's, as from attention's bf16 gradients. Here q is read twice (an fp32 gradient), k and v
 * once by attention (bf16), a fourth chunk never: x's, w's and b's gradients are the sums of the
 * rounded gradients (a double reference, within fp32 rounding). */
TEST(bf16_chunks_round_their_fp32_gradients_for_one_product) {
    SKIP_WITHOUT_BF16();
    vitc_set_threads(2); /* attention's 4 pairs on the bf16 tiles (as in the test above) */
    rng r;
    rng_seed(&r, 47, RNG_TEST);
    const int seqs = 2, n = 50, heads = 2, d = 32, C = heads * d, M = seqs * n;
    tensor *x = LEAF(&r, 1, seqs, n, C), *w = LEAF(&r, 0.2f, 4 * C, C), *b = LEAF(&r, 0.5f, 4 * C);
    float *dout = malloc(sizeof(float) * M * C);
    for (int i = 0; i < M * C; i++) dout[i] = rng_normal(&r);
    vitc_set_precision(PRECISION_BF16, NULL);
    chunk_grads c = {0};
    op_linear_chunks(x, w, b, 4, c.out);
    tensor *y = op_add(op_attention(c.out[0], c.out[1], c.out[2], heads, 0.177f, NULL, NULL, 1),
                       c.out[0]);
    tape_set_backward_hook(capture_chunk_grads, &c);
    tape_backward_from(y, dout);
    tape_set_backward_hook(NULL, NULL);
    vitc_set_precision(PRECISION_FP32, NULL);
    EXPECT(!c.in_bf16[0] && c.in_bf16[1] && c.in_bf16[2] && !c.out[3]->grad,
           "gradients q fp32, k and v bf16, the fourth none: got %d %d %d %d", c.in_bf16[0],
           c.in_bf16[1], c.in_bf16[2], c.out[3]->grad != NULL);
    float *want_dx = calloc((size_t)M * C, sizeof(float));
    float *want_dw = calloc((size_t)4 * C * C, sizeof(float));
    float *want_db = calloc((size_t)4 * C, sizeof(float));
#define ROUNDED(v) bf16_to_float(bf16_from_float(v))
    for (int o = 0; o < 4 * C; o++) {
        const float *g = c.g[o / C];
        double sb = 0;
        for (int m = 0; m < M; m++) sb += ROUNDED(g[m * C + o % C]);
        want_db[o] = (float)sb;
        for (int k = 0; k < C; k++) {
            double s = 0;
            for (int m = 0; m < M; m++)
                s += (double)ROUNDED(g[m * C + o % C]) * ROUNDED(x->data[m * C + k]);
            want_dw[o * C + k] = (float)s;
        }
    }
    for (int m = 0; m < M; m++)
        for (int k = 0; k < C; k++) {
            double s = 0;
            for (int o = 0; o < 4 * C; o++)
                s += (double)ROUNDED(c.g[o / C][m * C + o % C]) * ROUNDED(w->data[o * C + k]);
            want_dx[m * C + k] = (float)s;
        }
#undef ROUNDED
    double e_dx = norm_rel_diff(x->grad, want_dx, (int64_t)M * C);
    double e_dw = norm_rel_diff(w->grad, want_dw, 4 * C * C);
    double e_db = norm_rel_diff(b->grad, want_db, 4 * C);
    EXPECT(e_dx < 1e-5 && e_dw < 1e-5 && e_db < 1e-5,
           "dx %.2e, dw %.2e, db %.2e from the sums of the rounded gradients", e_dx, e_dw, e_db);
    for (int i = 0; i < 4; i++) free(c.g[i]);
    free(dout), free(want_dx), free(want_dw), free(want_db);
    tape_reset();
    arena_reset(&vitc_arena);
}
