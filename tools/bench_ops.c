/* Micro-benchmark: GFLOP/s of the linear op (forward, backward, both) at ViT shapes next to a bare
 * cblas_sgemm of the same size, measured in the same run (ratios, not wall times, are what count);
 * then the attention op alone at Swin's first-stage windows, DeiT's tokens and Agent-DeiT's two
 * attentions (49 agents over the tokens, the tokens over the agents) and the dense conv at CSwin's
 * merges and PVT's patch embeddings, in fp32 and in bf16 where the CPU has it; the depthwise conv
 * (fp32 in either) at the models' maps. Milliseconds are there to compare builds in turn
 * (docs/performance.md). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/arena.h"
#include "core/clock.h"
#include "core/precision.h"
#include "core/tape.h"
#include "core/threads.h"
#include "ops/op_table.h"
#include "ops/ops.h"

#define REPS 15

static double median(double *t) { return median_seconds(t, REPS); }

static void fill(float *p, long n, rng *r) {
    for (long i = 0; i < n; i++) p[i] = rng_normal(r) * 0.1f;
}

static void bench_linear(int M, int K, int N) {
    rng r;
    rng_seed(&r, 7, RNG_TEST);
    double flop = 2.0 * M * N * K;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K),
          *C = malloc(sizeof(float) * M * N);
    fill(A, (long)M * K, &r);
    fill(B, (long)N * K, &r);
    double t_gemm[REPS], t_fwd[REPS], t_bwd[REPS];
    /* the bare sgemm and the op alternate in one loop, so machine noise hits both alike */
    for (int rep = -1; rep < REPS; rep++) { /* rep -1 warms up */
        double tg = clock_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        if (rep >= 0) t_gemm[rep] = clock_seconds() - tg;
        tensor *x = TENSOR(M, K), *w = TENSOR(N, K), *b = TENSOR(N);
        fill(x->data, x->numel, &r);
        fill(w->data, w->numel, &r);
        fill(b->data, b->numel, &r);
        x->requires_grad = w->requires_grad = b->requires_grad = true;
        double t0 = clock_seconds();
        tensor *y = op_linear(x, w, b);
        double t1 = clock_seconds();
        fill(tensor_grad(y), y->numel, &r);
        tensor_grad(w), tensor_grad(b); /* parameter gradients exist before the step */
        double t2 = clock_seconds();
        tape_run_backward();
        double t3 = clock_seconds();
        if (rep >= 0) t_fwd[rep] = t1 - t0, t_bwd[rep] = t3 - t2;
        tape_reset();
        arena_reset(&vitc_arena);
    }
    double g = flop / median(t_gemm) * 1e-9, f = flop / median(t_fwd) * 1e-9,
           b = 2 * flop / median(t_bwd) * 1e-9;
    double both = 3 * flop / (median(t_fwd) + median(t_bwd)) * 1e-9;
    printf("linear %5dx%4d->%4d   sgemm %6.1f   fwd %6.1f (%3.0f%%)   bwd %6.1f (%3.0f%%)   "
           "fwd+bwd %6.1f GFLOP/s (%3.0f%% of sgemm)\n",
           M, K, N, g, f, 100 * f / g, b, 100 * b / g, both, 100 * both / g);
    free(A), free(B), free(C);
}

/* an op's forward and backward from the tape's profile, medians of REPS runs after a warm-up;
 * `record` draws the inputs from r, starts the profile (an op's forward counts from the record
 * before it) and records the op, whose output's gradient is then drawn */
typedef tensor *(*record_fn)(rng *r, const void *shape);

static void time_op(int op, record_fn record, const void *shape, double *fwd, double *bwd) {
    rng r;
    rng_seed(&r, 11, RNG_TEST);
    double t_fwd[REPS], t_bwd[REPS];
    for (int rep = -1; rep < REPS; rep++) {
        tensor *y = record(&r, shape);
        fill(tensor_grad(y), y->numel, &r);
        tape_run_backward();
        tape_profile_stop();
        const tape_op_time *t = &tape_profile()[op];
        if (rep >= 0) t_fwd[rep] = t->forward_s, t_bwd[rep] = t->backward_s;
        tape_reset();
        arena_reset(&vitc_arena);
    }
    *fwd = median(t_fwd), *bwd = median(t_bwd);
}

static tensor *input(rng *r, int ndim, const int *shape) {
    tensor *t = tensor_new(ndim, shape);
    fill(t->data, t->numel, r);
    t->requires_grad = true;
    return t;
}

/* softmax attention over `seqs` sequences of n queries and m keys, heads of d channels: q, k and v
 * from op_linear_chunks products as in the models (under bf16 their gradients are then bf16, as
 * there) */
typedef struct {
    const char *where; /* the model's layer these shapes are */
    int seqs, n, m, heads, d;
} attention_shape;

static tensor *record_attention(rng *r, const void *shape) {
    const attention_shape *a = shape;
    int C = a->heads * a->d;
    tensor *xq = input(r, 3, (int[]){a->seqs, a->n, C});
    tensor *xk = input(r, 3, (int[]){a->seqs, a->m, C});
    tensor *w = input(r, 2, (int[]){3 * C, C});
    xq->requires_grad = xk->requires_grad = false;
    tensor_grad(w);
    tape_profile_start();
    tensor *qkv[3], *other[3], **kv = qkv; /* keys and values from xk when m != n */
    op_linear_chunks(xq, w, NULL, 3, qkv);
    if (a->m != a->n) op_linear_chunks(xk, w, NULL, 3, other), kv = other;
    return op_attention(qkv[0], kv[1], kv[2], a->heads, 1.0f / sqrtf((float)a->d), NULL, NULL, 1);
}

static void bench_attention(attention_shape a) {
    double f, b, flop = 4.0 * a.seqs * a.heads * (double)a.n * a.m * a.d;
    time_op(OP_ATTENTION, record_attention, &a, &f, &b);
    char name[96];
    snprintf(name, sizeof name, "%s (%dx%d, %dx%d, %d)", a.where, a.seqs, a.heads, a.n, a.m, a.d);
    printf("attention %-44s %s   fwd %7.2f ms (%5.1f GFLOP/s)   bwd %7.2f ms (%5.1f GFLOP/s, "
           "5 products)\n",
           name, precision_name(vitc_precision()), 1e3 * f, flop / f * 1e-9, 1e3 * b,
           2.5 * flop / b * 1e-9);
}

/* the depthwise conv (op_dwconv2d_add, as Agent attention and LePE add it onto the attention's
 * output) on 16 maps of h x h x C, kernel k */
typedef struct {
    int h, C, k;
} dwconv_shape;

static tensor *record_dwconv(rng *r, const void *shape) {
    const dwconv_shape *s = shape;
    tensor *x = input(r, 4, (int[]){16, s->h, s->h, s->C});
    tensor *base = input(r, 4, (int[]){16, s->h, s->h, s->C});
    tensor *w = input(r, 4, (int[]){s->C, 1, s->k, s->k}), *b = input(r, 1, (int[]){s->C});
    tape_profile_start();
    return op_dwconv2d_add(x, w, b, base);
}

static void bench_dwconv(dwconv_shape s) {
    double f, b;
    time_op(OP_DWCONV2D, record_dwconv, &s, &f, &b);
    printf("dwconv 16 x %3d x %3d x %3d, k %d   fwd %7.2f ms   bwd %7.2f ms\n", s.h, s.h, s.C, s.k,
           1e3 * f, 1e3 * b);
}

/* a dense conv on 16 maps of h x h x C to O channels, kernel k, stride s, padding (k - 1) / 2 when
 * k > s (CSwin's merges) else 0 (PVT's patch embeddings); the input's gradient taken, as between
 * stages */
typedef struct {
    int h, C, O, k, stride;
} conv_shape;

static tensor *record_conv(rng *r, const void *shape) {
    const conv_shape *s = shape;
    tensor *x = input(r, 4, (int[]){16, s->h, s->h, s->C});
    tensor *w = input(r, 4, (int[]){s->O, s->C, s->k, s->k});
    tensor *b = input(r, 1, (int[]){s->O});
    tape_profile_start();
    return op_conv2d(x, w, b, s->stride, s->k > s->stride ? (s->k - 1) / 2 : 0, 1);
}

static void bench_conv(conv_shape s) {
    double f, b;
    time_op(OP_CONV2D, record_conv, &s, &f, &b);
    int ho = s.k > s.stride ? (s.h - 1) / s.stride + 1 : s.h / s.stride;
    double flop = 2.0 * 16 * ho * ho * s.O * s.C * s.k * s.k;
    printf("conv 16 x %3d x %3d x %3d -> %3d, k %d stride %d   %s   fwd %6.2f ms (%5.1f GFLOP/s)   "
           "bwd %6.2f ms (%5.1f GFLOP/s)\n",
           s.h, s.h, s.C, s.O, s.k, s.stride, precision_name(vitc_precision()), 1e3 * f,
           flop / f * 1e-9, 1e3 * b, 2 * flop / b * 1e-9);
}

int main(void) {
    printf("threads %d, OpenBLAS %s\n", vitc_threads(), openblas_get_config());
    bench_linear(6304, 192, 576);
    bench_linear(6304, 768, 192);
    bench_linear(6304, 192, 768);
    for (int p = 0; p < 2; p++) {
        const char *why = NULL;
        if (!vitc_set_precision(p ? PRECISION_BF16 : PRECISION_FP32, &why)) {
            printf("bf16 skipped: %s\n", why);
            break;
        }
        const attention_shape attention[] = {
            {"swin_t s1 windows", 1024, 49, 49, 3, 32},
            {"deit_t", 16, 197, 197, 3, 64},
            {"agent_deit_t agents", 16, 49, 197, 3, 64},
            {"agent_deit_t queries", 16, 197, 49, 3, 64},
            {"agent_swin_t s1 agents", 16, 9, 3136, 3, 32},
            {"agent_swin_t s1 queries", 16, 3136, 9, 3, 32},
            {"agent_swin_t s2 agents", 16, 16, 784, 6, 32},
            {"agent_swin_t s2 queries", 16, 784, 16, 6, 32}};
        for (size_t i = 0; i < sizeof attention / sizeof attention[0]; i++)
            bench_attention(attention[i]);
        const conv_shape convs[] = {{56, 64, 128, 3, 2}, {28, 128, 256, 3, 2}, {56, 64, 128, 2, 2},
                                    {28, 128, 320, 2, 2}};
        for (int i = 0; i < 4; i++) bench_conv(convs[i]);
    }
    vitc_set_precision(PRECISION_FP32, NULL);
    const dwconv_shape dw[] = {{56, 32, 3}, {28, 64, 3},  {56, 96, 3},
                               {56, 96, 5}, {28, 192, 3}, {14, 384, 3}};
    for (int i = 0; i < 6; i++) bench_dwconv(dw[i]);
    arena_free(&vitc_arena);
    return 0;
}
