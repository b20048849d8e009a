/* Dropout and the drop-path residual step: keep rates, scaling, determinism, gradients through a
 * fixed mask. */
#include "../src/core/cpu_features.h"
#include "../src/core/precision.h"
#include "../src/core/threads.h"
#include "../src/cpu/mlp.h"
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

typedef struct {
    float p;
    bool gelu, bias;
    bool h_read_after; /* h's gradient exists when the op's backward runs: it adds to it */
} residual_ctx;

static tensor *residual_fn(tensor **in, const void *ctx) {
    const residual_ctx *c = ctx;
    rng r;
    rng_seed(&r, 99, RNG_DROPOUT); /* the same mask at every evaluation */
    tensor *b = c->bias ? in[3] : NULL;
    tensor *out = op_residual_linear(in[0], in[1], in[2], b, c->gelu, DROP_PATH(c->p, &r, in[0]));
    return c->h_read_after ? op_add(out, op_linear(in[1], in[2], NULL)) : out;
}

TEST(residual_linear_drops_whole_samples_and_grad) {
    rng r;
    rng_seed(&r, 72, RNG_TEST);
    const int B = 400;
    tensor *res = RANDN(&r, 1, B, 3, 4), *h = RANDN(&r, 1, B, 3, 5), *w = RANDN(&r, 0.5f, 4, 5);
    tensor *b = RANDN(&r, 1, 4);
    for (int gelu = 0; gelu < 2; gelu++) {
        tensor *branch = op_linear(gelu ? op_gelu(h) : h, w, b);
        residual_ctx c = {0.25f, gelu, true, false};
        tensor *out = residual_fn((tensor *[]){res, h, w, b}, &c);
        long kept = 0;
        bool whole = true;
        for (int s = 0; s < B; s++) {
            bool keep = fabsf(out->data[s * 12] - res->data[s * 12]) > 1e-6f;
            kept += keep;
            for (int j = 0; j < 12; j++) {
                int i = s * 12 + j;
                whole &= fabsf(out->data[i] - res->data[i] - (keep ? branch->data[i] / 0.75f : 0.0f)) < 1e-5f;
            }
        }
        EXPECT(whole, "gelu %d: each sample's branch is dropped or kept whole, scaled by 1/(1-p)", gelu);
        EXPECT(fabs(kept / (double)B - 0.75) < 0.06, "gelu %d: kept fraction %g", gelu, kept / (double)B);
        tensor *plain = op_residual_linear(res, h, w, b, gelu, NULL), *sum = op_add(res, branch);
        EXPECT(max_rel_diff(plain->data, sum->data, sum->numel) < 1e-5, "gelu %d: p = 0 is res + linear", gelu);
    }
    for (int t = 0; t < 6; t++) {
        residual_ctx c = {t < 2 || t > 3 ? 0.4f : 0.0f, t % 2, t != 3, t > 3};
        tensor *rl = LEAF(&r, 1, 6, 2, 3), *hl = LEAF(&r, 1, 6, 2, 5), *wl = LEAF(&r, 0.5f, 3, 5);
        tensor *bl = LEAF(&r, 1, 3);
        bool ok = c.bias ? GRADCHECK(residual_fn, &c, rl, hl, wl, bl) : GRADCHECK(residual_fn, &c, rl, hl, wl);
        EXPECT(ok, "p %g, gelu %d, bias %d, h read after %d", c.p, c.gelu, c.bias, c.h_read_after);
    }
    EXPECT_ERROR(op_residual_linear(res, RANDN(&r, 1, B, 4, 5), w, b, false, NULL),
                 "residual (400, 3, 4), input (400, 4, 5), weight (4, 5) do not match");
    EXPECT_ERROR(op_residual_linear(res, h, w, RANDN(&r, 1, 5), false, NULL),
                 "bias (5) for 4 outputs");
}

/* large enough that the backward (and the forward, unevenly) runs in passes of fewer samples: the
 * gradients equal those of the unfused chain res + mask * linear(gelu(h)) */
TEST(residual_linear_in_sample_passes_matches_the_op_chain) {
    rng r;
    rng_seed(&r, 73, RNG_TEST);
    const int B = 3, rows = 3100, K = 1100, N = 4;
    tensor *res = LEAF(&r, 1, B, rows, N), *h = LEAF(&r, 1, B, rows, K), *w = LEAF(&r, 0.05f, N, K);
    tensor *b = LEAF(&r, 1, N);
    rng dr;
    rng_seed(&dr, 9, RNG_DROPOUT);
    tensor *fused = op_residual_linear(res, h, w, b, true, DROP_PATH(0.5f, &dr, res));
    tensor *branch = op_linear(op_gelu(h), w, b), *mask = TENSOR(B, 1, 1);
    for (int s = 0; s < B; s++) /* each sample's branch is dropped (0) or doubled (1 / (1 - 0.5)) */
        mask->data[s] = fabsf(fused->data[s * rows * N] - res->data[s * rows * N]) > 1e-6f ? 2.0f : 0.0f;
    tensor *chain = op_add(res, op_mul(branch, mask));
    EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) < 1e-5, "forward");
    double err = backward_difference(chain, fused, 4, (tensor *[]){res, h, w, b});
    EXPECT(err < 1e-4, "gradients differ from the chain's by %g", err);
}

typedef struct {
    float p;
    int wh, ww, shift;
} residual_windows_ctx;

static tensor *residual_windows_fn(tensor **in, const void *ctx) {
    const residual_windows_ctx *c = ctx;
    rng r;
    rng_seed(&r, 99, RNG_DROPOUT);
    return op_residual_linear_windows(in[0], in[1], in[2], in[3], c->wh, c->ww, c->shift,
                                      DROP_PATH(c->p, &r, in[0]));
}

/* the branch in (shifted) windows: as putting the windows back, then the plain residual step */
TEST(residual_linear_windows_matches_window_reverse_then_residual_linear_and_grad) {
    rng r;
    rng_seed(&r, 74, RNG_TEST);
    const int B = 4, H = 4, W = 6, wh = 2, ww = 3, K = 5, N = 3, windows = B * (H / wh) * (W / ww);
    for (int shift = 0; shift < 2; shift++) {
        tensor *res = LEAF(&r, 1, B, H, W, N), *h = LEAF(&r, 1, windows, wh * ww, K);
        tensor *w = LEAF(&r, 0.5f, N, K), *b = LEAF(&r, 1, N);
        rng d1, d2;
        rng_seed(&d1, 5, RNG_DROPOUT);
        rng_seed(&d2, 5, RNG_DROPOUT);
        tensor *fused =
            op_residual_linear_windows(res, h, w, b, wh, ww, shift, DROP_PATH(0.4f, &d1, res));
        tensor *map = RESHAPE(op_window_reverse(h, H, W, wh, ww, shift), B, H * W, K);
        tensor *chain = op_residual_linear(RESHAPE(res, B, H * W, N), map, w, b, false,
                                           DROP_PATH(0.4f, &d2, res));
        EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) < 1e-5, "shift %d: forward", shift);
        double err = backward_difference(chain, fused, 4, (tensor *[]){res, h, w, b});
        EXPECT(err < 1e-4, "shift %d: gradients differ from the chain's by %g", shift, err);
        residual_windows_ctx c = {0.4f, wh, ww, shift};
        EXPECT(GRADCHECK(residual_windows_fn, &c, res, h, w, b), "shift %d", shift);
    }
    /* 64x64 maps of 300 channels: one sample per pass */
    tensor *res = LEAF(&r, 1, 3, 64, 64, 300), *h = LEAF(&r, 1, 3 * 64, 64, 8);
    tensor *w = LEAF(&r, 0.5f, 300, 8), *b = LEAF(&r, 1, 300);
    tensor *fused = op_residual_linear_windows(res, h, w, b, 8, 8, 4, NULL);
    tensor *map = RESHAPE(op_window_reverse(h, 64, 64, 8, 8, 4), 3, 64 * 64, 8);
    tensor *chain = op_residual_linear(RESHAPE(res, 3, 64 * 64, 300), map, w, b, false, NULL);
    EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) < 1e-5, "passes: forward");
    double err = backward_difference(chain, fused, 4, (tensor *[]){res, h, w, b});
    EXPECT(err < 1e-4, "passes: gradients differ from the chain's by %g", err);
    res = RANDN(&r, 1, 2, H, W, N), w = RANDN(&r, 1, N, K);
    EXPECT_ERROR(op_residual_linear_windows(res, RANDN(&r, 1, 8, 6, K), w, NULL, 4, 4, 0, NULL),
                 "4x4 windows do not tile the residual (2, 4, 6, 3)");
    EXPECT_ERROR(op_residual_linear_windows(res, RANDN(&r, 1, 8, 5, K), w, NULL, 2, 3, 0, NULL),
                 "input (8, 5, 5) is not (8 windows, 6, K)");
}

typedef struct {
    float p;
} split_ctx;

static tensor *residual_split_fn(tensor **in, const void *ctx) {
    const split_ctx *c = ctx;
    rng r;
    rng_seed(&r, 99, RNG_DROPOUT);
    return op_residual_linear_split(in[0], in[1], in[2], in[3], in[4], DROP_PATH(c->p, &r, in[0]));
}

/* two inputs: as their concatenation, which is never stored */
TEST(residual_linear_split_matches_the_concatenated_input_and_grad) {
    rng r;
    rng_seed(&r, 75, RNG_TEST);
    for (int t = 0; t < 2; t++) {
        float p = t ? 0.4f : 0.0f;
        tensor *res = LEAF(&r, 1, 6, 5, 4), *h0 = LEAF(&r, 1, 6, 5, 3), *h1 = LEAF(&r, 1, 6, 5, 2);
        tensor *w = LEAF(&r, 0.5f, 4, 5), *b = LEAF(&r, 1, 4);
        rng d1, d2;
        rng_seed(&d1, 5, RNG_DROPOUT);
        rng_seed(&d2, 5, RNG_DROPOUT);
        tensor *fused = op_residual_linear_split(res, h0, h1, w, b, DROP_PATH(p, &d1, res));
        tensor *chain = op_residual_linear(res, op_concat(2, (tensor *[]){h0, h1}, 2), w, b, false,
                                           DROP_PATH(p, &d2, res));
        EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) < 1e-6, "p %g: forward", p);
        double err = backward_difference(chain, fused, 5, (tensor *[]){res, h0, h1, w, b});
        EXPECT(err < 1e-5, "p %g: gradients differ from the concatenation's by %g", p, err);
        split_ctx c = {p};
        EXPECT(GRADCHECK(residual_split_fn, &c, res, h0, h1, w, b), "p %g", p);
    }
    tensor *res = RANDN(&r, 1, 6, 5, 4), *h0 = RANDN(&r, 1, 6, 5, 3), *w = RANDN(&r, 1, 4, 5);
    EXPECT_ERROR(op_residual_linear_split(res, h0, h0, w, NULL, NULL),
                 "residual (6, 5, 4), inputs (6, 5, 3) and (6, 5, 3), weight (4, 5) do not match");
}

/* A dropped sample's rows are the residual itself, and the residual's gradient there is the
 * output's, exactly: in row chunks, where the forward skips those rows and writes zeros for the
 * backward, and as two ops. The kept samples follow the two ops' chain. */
TEST(mlp_residual_skips_the_dropped_samples) {
    rng r;
    rng_seed(&r, 77, RNG_TEST);
    const int B = 4, rows = 300, H = 24;
    static const int channels[2] = {8, MLP_CHUNKED_MAX_CHANNELS_FP32 + 8};
    for (int c = 0; c < 2; c++) {
        int C = channels[c];
        tensor *res = LEAF(&r, 1, B, rows, C), *lw = LEAF(&r, 1, C), *lb = LEAF(&r, 1, C);
        tensor *w1 = LEAF(&r, 0.3f, H, C), *b1 = LEAF(&r, 1, H), *w2 = LEAF(&r, 0.3f, C, H);
        tensor *b2 = LEAF(&r, 1, C), *inputs[7] = {res, lw, lb, w1, b1, w2, b2};
        rng d1, d2;
        rng_seed(&d1, 2, RNG_DROPOUT); /* samples 0 and 2 of 4 dropped */
        rng_seed(&d2, 2, RNG_DROPOUT);
        tensor *y = op_mlp_residual(res, lw, lb, 1e-5f, w1, b1, w2, b2, DROP_PATH(0.5f, &d1, res), NULL);
        tensor *chain =
            op_residual_linear(res, op_layernorm_linear(res, lw, lb, 1e-5f, w1, b1, NULL), w2, b2,
                               true, DROP_PATH(0.5f, &d2, res));
        EXPECT(max_rel_diff(y->data, chain->data, chain->numel) < 1e-5, "%d channels: forward", C);
        int dropped = 0, per = rows * C;
        for (int s = 0; s < B; s++)
            dropped += !memcmp(y->data + s * per, res->data + s * per, sizeof(float) * per);
        EXPECT(dropped == 2, "%d channels: %d of %d samples the bare residual (2 dropped)", C,
               dropped, B);
        double err = backward_difference(chain, y, 7, inputs);
        EXPECT(err < 1e-4, "%d channels: gradients differ from the two ops' by %g", C, err);
        float *seed = malloc(sizeof(float) * (size_t)y->numel);
        for (int64_t i = 0; i < y->numel; i++) seed[i] = (float)(i % 7) - 3;
        rng_seed(&d1, 2, RNG_DROPOUT);
        y = op_mlp_residual(res, lw, lb, 1e-5f, w1, b1, w2, b2, DROP_PATH(0.5f, &d1, res), NULL);
        res->grad = NULL;
        tape_backward_from(y, seed);
        int passed = 0;
        for (int s = 0; s < B; s++)
            passed += !memcmp(res->grad + s * per, seed + s * per, sizeof(float) * per);
        EXPECT(passed == 2, "%d channels: %d samples' residual gradient is the output's", C,
               passed);
        tape_reset();
        free(seed);
    }
}

/* Where drop path drops samples, the MLP step's backward runs on the kept samples' rows alone,
 * taken run by run of kept samples into passes (here of 3 samples in residual_linear's backward,
 * so that some masks cut a run at a pass's end): every gradient as the two ops', which compute
 * the dropped samples' zeros */
static void expect_kept_backward_as_the_two_ops(bool bf16) {
    rng r;
    rng_seed(&r, 78, RNG_TEST);
    const int B = 5, rows = 1600, C = 8, H = 340, per = rows * C;
    tensor *res = LEAF(&r, 1, B, rows, C), *lw = LEAF(&r, 1, C), *lb = LEAF(&r, 1, C);
    tensor *w1 = LEAF(&r, 0.3f, H, C), *b1 = LEAF(&r, 1, H), *w2 = LEAF(&r, 0.3f, C, H);
    tensor *b2 = LEAF(&r, 1, C), *inputs[7] = {res, lw, lb, w1, b1, w2, b2};
    int masks = 0;
    for (int seed = 1; seed <= 4; seed++) {
        rng d1, d2;
        rng_seed(&d1, (uint64_t)seed, RNG_DROPOUT);
        rng_seed(&d2, (uint64_t)seed, RNG_DROPOUT);
        tensor *y = op_mlp_residual(res, lw, lb, 1e-5f, w1, b1, w2, b2, DROP_PATH(0.4f, &d1, res), NULL);
        tensor *h = bf16 ? op_layernorm_linear_bf16(res, lw, lb, 1e-5f, w1, b1, NULL)
                         : op_layernorm_linear(res, lw, lb, 1e-5f, w1, b1, NULL);
        tensor *chain = op_residual_linear(res, h, w2, b2, true, DROP_PATH(0.4f, &d2, res));
        int dropped = 0;
        for (int s = 0; s < B; s++)
            dropped += !memcmp(y->data + s * per, res->data + s * per, sizeof(float) * per);
        masks += dropped > 0 && dropped < B;
        double err = backward_difference(chain, y, 7, inputs);
        EXPECT(err < (bf16 ? 1e-3 : 1e-4),
               "%s, mask %d (%d of %d samples dropped): gradients differ from the two ops' by %g",
               bf16 ? "bf16" : "fp32", seed, dropped, B, err);
    }
    EXPECT(masks >= 2, "%d of 4 masks dropped some samples and kept others", masks);
}

TEST(mlp_residual_backward_takes_the_kept_samples_alone) {
    expect_kept_backward_as_the_two_ops(false);
}

TEST(mlp_residual_backward_takes_the_kept_samples_alone_in_bf16) {
    if (cpu_bf16_error()) SKIP("this CPU lacks AVX512_BF16 (vdpbf16ps)");
    vitc_set_precision(PRECISION_BF16, NULL);
    expect_kept_backward_as_the_two_ops(true);
    vitc_set_precision(PRECISION_FP32, NULL);
}

static tensor *mlp_fn(tensor **in, const void *ctx) {
    (void)ctx;
    rng r;
    rng_seed(&r, 99, RNG_DROPOUT); /* the same mask at every evaluation */
    return op_mlp_residual(in[0], in[1], in[2], 1e-5f, in[3], in[4], in[5], in[6],
                           DROP_PATH(0.4f, &r, in[0]), NULL);
}

/* the MLP step in row chunks (few channels): as op_layernorm_linear then op_residual_linear, with and
 * without recording, the chunk boundary inside a sample */
TEST(mlp_residual_in_row_chunks_matches_the_two_ops_and_grad) {
    rng r;
    rng_seed(&r, 76, RNG_TEST);
    const int B = 3, rows = 2500, C = 8, H = 32; /* chunks of 3760 rows on two threads: a sample cut */
    tensor *res = LEAF(&r, 1, B, rows, C), *lw = LEAF(&r, 1, C), *lb = LEAF(&r, 1, C);
    tensor *w1 = LEAF(&r, 0.3f, H, C), *b1 = LEAF(&r, 1, H), *w2 = LEAF(&r, 0.3f, C, H), *b2 = LEAF(&r, 1, C);
    tensor *inputs[7] = {res, lw, lb, w1, b1, w2, b2};
    for (int t = 0; t < 2; t++) {
        float p = t ? 0.5f : 0.0f;
        rng d1, d2;
        rng_seed(&d1, 5, RNG_DROPOUT);
        rng_seed(&d2, 5, RNG_DROPOUT);
        tensor *fused = op_mlp_residual(res, lw, lb, 1e-5f, w1, b1, w2, b2, DROP_PATH(p, &d1, res), NULL);
        tensor *chain =
            op_residual_linear(res, op_layernorm_linear(res, lw, lb, 1e-5f, w1, b1, NULL), w2, b2,
                               true, DROP_PATH(p, &d2, res));
        EXPECT(max_rel_diff(fused->data, chain->data, chain->numel) < 1e-5, "p %g: forward", p);
        double err = backward_difference(chain, fused, 7, inputs);
        EXPECT(err < 1e-4, "p %g: gradients differ from the two ops' by %g", p, err);
    }
    bool was = tape_set_grad_enabled(false);
    tensor *plain = op_mlp_residual(res, lw, lb, 1e-5f, w1, b1, w2, b2, NULL, NULL);
    tensor *chain = op_residual_linear(res, op_layernorm_linear(res, lw, lb, 1e-5f, w1, b1, NULL),
                                       w2, b2, true, NULL);
    /* into: the output in its storage when nothing is recorded, the same values; ignored when
     * recording (the backward reads the tensor it would overwrite) */
    tensor *dead = TENSOR(B, rows, C), *into = op_mlp_residual(res, lw, lb, 1e-5f, w1, b1, w2, b2,
                                                                NULL, dead);
    EXPECT(into->data == dead->data && !memcmp(into->data, plain->data, sizeof(float) * res->numel),
           "without recording, into: %s", into->data == dead->data ? "other values" : "not its storage");
    tape_set_grad_enabled(was);
    EXPECT(max_rel_diff(plain->data, chain->data, chain->numel) < 1e-5, "without recording");
    tensor *recorded = op_mlp_residual(res, lw, lb, 1e-5f, w1, b1, w2, b2, NULL, dead);
    EXPECT(recorded->data != dead->data, "recording, the output took into's storage");
    EXPECT_ERROR(op_mlp_residual(res, lw, lb, 1e-5f, w2, b1, w2, b2, NULL, NULL),
                 "fc1 (8, 32), fc2 (8, 32) do not match");
    tensor *xs = LEAF(&r, 1, 2, 3, 4), *lws = LEAF(&r, 1, 4), *lbs = LEAF(&r, 1, 4), *w1s = LEAF(&r, 0.5f, 6, 4);
    tensor *b1s = LEAF(&r, 1, 6), *w2s = LEAF(&r, 0.5f, 4, 6), *b2s = LEAF(&r, 1, 4);
    EXPECT(GRADCHECK(mlp_fn, NULL, xs, lws, lbs, w1s, b1s, w2s, b2s), "mlp_residual");
}

/* the step's row chunks hold at most about 1 MiB each, in whole vectors of 16 rows, and there is at
 * least one a thread where there are 16 rows a thread: deit_t's batch-1 step was one chunk of its
 * 197 rows, and one thread idled */
TEST(mlp_residual_row_chunks_give_every_thread_work) {
    const int64_t Ms[] = {49, 197, 3152, 6304, 50176};
    const int Cs[] = {96, 192, 384, 768};
    int threads = vitc_threads();
    for (int t = 1; t <= 4; t++) {
        vitc_set_threads(t);
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 4; j++) {
                mlp_dims d = {Ms[i], Cs[j], 4 * Cs[j], (int)Ms[i]};
                int R = mlp_chunk_rows(&d);
                int64_t chunks = (d.M + R - 1) / R, floats = (int64_t)R * (2 * d.C + d.hidden);
                EXPECT((R & 15) == 0 && floats <= 1 << 18 && chunks >= (d.M / 16 < t ? d.M / 16 : t),
                       "%d threads, %lld rows of %d channels: %lld chunks of %d rows (%lld floats)",
                       t, (long long)d.M, d.C, (long long)chunks, R, (long long)floats);
            }
    }
    vitc_set_threads(threads);
}

/* ---- a residual branch on the samples drop path keeps ---- */

enum { KB = 5, KMAP = 40, KC = 640, KK = 12, KH = 340 }; /* samples, map side, channels, widths */

/* the four branch shapes the models build, from x (KB, KMAP, KMAP, KC) and the parameters in[1..7];
 * `first` goes to the branch's first op (the kept samples alone, or NULL: all), d to its residual
 * step */
static tensor *kept_branch(int shape, tensor *const *in, const drop_path *first,
                           const drop_path *d) {
    tensor *x = in[0], *lw = in[1], *lb = in[2], *wq = in[3], *wp = in[4], *bp = in[5];
    tensor *x3 = RESHAPE(x, KB, KMAP * KMAP, KC);
    if (shape == 0) { /* DeiT, PVT: layernorm, products, the projection */
        tensor *h = op_linear(op_layernorm(x3, lw, lb, 1e-5f, first), wq, NULL);
        return op_residual_linear(x3, h, wp, bp, false, d);
    }
    if (shape == 1) { /* Swin: shifted windows */
        tensor *win = op_layernorm_windows(x, lw, lb, 1e-5f, 4, 5, 1, first);
        return op_residual_linear_windows(x, op_linear(win, wq, NULL), wp, bp, 4, 5, 1, d);
    }
    if (shape == 2) { /* CSwin: two parts into one projection */
        tensor *h0 = op_linear(op_layernorm(x3, lw, lb, 1e-5f, first), wq, NULL);
        return op_residual_linear_split(x3, h0, op_gelu(h0), in[6], bp, d);
    }
    /* an MLP of two ops (wider than the row-chunked step) */
    tensor *h = vitc_precision() == PRECISION_BF16
                    ? op_layernorm_linear_bf16(x3, lw, lb, 1e-5f, in[7], NULL, first)
                    : op_layernorm_linear(x3, lw, lb, 1e-5f, in[7], NULL, first);
    return op_residual_linear(x3, h, in[8], bp, true, d);
}

/* Each branch on the kept samples alone against the same branch on every sample, with the same
 * masks (p 0.4 over 5 samples: passes of 2 or 3 samples in the residual steps, so that runs of
 * kept samples cross them): outputs and every gradient */
static void expect_kept_branch_as_the_whole(bool bf16) {
    rng r;
    rng_seed(&r, 81, RNG_TEST);
    tensor *in[9] = {
        LEAF(&r, 1, KB, KMAP, KMAP, KC), LEAF(&r, 1, KC),        LEAF(&r, 1, KC),
        LEAF(&r, 0.3f, KK, KC),          LEAF(&r, 0.3f, KC, KK), LEAF(&r, 1, KC),
        LEAF(&r, 0.3f, KC, 2 * KK),      LEAF(&r, 0.1f, KH, KC), LEAF(&r, 0.1f, KC, KH)};
    const char *names[] = {"layernorm", "windows", "split", "mlp"};
    for (int shape = bf16 ? 1 : 0; shape < 4; shape += bf16 ? 2 : 1) { /* bf16: windows and MLP */
        int masks = 0;
        for (int seed = 1; seed <= 5; seed++) {
            rng d1, d2;
            rng_seed(&d1, (uint64_t)seed, RNG_DROPOUT);
            rng_seed(&d2, (uint64_t)seed, RNG_DROPOUT);
            drop_path kept = op_drop_path(0.4f, &d1, KB), all = op_drop_path(0.4f, &d2, KB);
            masks += drop_path_kept(&kept, in[0], "branch") != NULL;
            tensor *whole = kept_branch(shape, in, NULL, &all);
            tensor *part = kept_branch(shape, in, &kept, &kept);
            double fwd = max_rel_diff(part->data, whole->data, whole->numel);
            /* the inputs the shape reads: x, the norm's, and its products' */
            int pick[4][6] = {
                {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 6, 5}, {0, 1, 2, 7, 8, 5}};
            tensor *used[6];
            for (int i = 0; i < 6; i++) used[i] = in[pick[shape][i]];
            double err = backward_difference(whole, part, 6, used);
            EXPECT(fwd < 1e-5 && err < (bf16 ? 1e-3 : 1e-4),
                   "%s %s, mask %d (%d of %d kept): output differs by %g, gradients by %g",
                   bf16 ? "bf16" : "fp32", names[shape], seed, kept.kept, KB, fwd, err);
        }
        EXPECT(masks >= 2, "%s: %d of 5 masks kept some samples and dropped others", names[shape],
               masks);
    }
}

TEST(residual_branches_run_on_the_kept_samples_alone) { expect_kept_branch_as_the_whole(false); }

TEST(residual_branches_run_on_the_kept_samples_alone_in_bf16) {
    if (cpu_bf16_error()) SKIP("this CPU lacks AVX512_BF16 (vdpbf16ps)");
    vitc_set_precision(PRECISION_BF16, NULL);
    expect_kept_branch_as_the_whole(true);
    vitc_set_precision(PRECISION_FP32, NULL);
}

TEST(drop_path_of_another_batch_is_refused) {
    rng r, d;
    rng_seed(&r, 82, RNG_TEST);
    rng_seed(&d, 1, RNG_DROPOUT);
    tensor *x = RANDN(&r, 1, 5, 3, 4), *w = RANDN(&r, 1, 4), *b = RANDN(&r, 1, 4);
    drop_path four = op_drop_path(0.4f, &d, 4);
    EXPECT_ERROR(op_layernorm(x, w, b, 1e-5f, &four), "layernorm: drop path drawn for 4 samples, input (5, 3, 4)");
    EXPECT_ERROR(op_residual_linear(x, x, RANDN(&r, 1, 4, 4), NULL, false, &four),
                 "residual_linear: drop path drawn for 4 samples");
}
