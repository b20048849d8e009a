/* bench: times one model's training step (forward + backward + AdamW) or inference at a batch size,
 * synthetic input, warm-up then the median of several runs; prints one JSON line with img/s and the
 * peak RSS (training: also kept_mib, the data arena in use when the forward ends: the activations
 * the tape keeps for the backward). tools/bench.sh runs it next to the PyTorch reference in the same
 * invocation.
 * --precision bf16 runs the GEMMs in bf16 (core/precision.h); --device cuda runs the step on the GPU
 * (the batch uploaded each step, as train does).
 * bench --sgemm M,K,N times bare cblas_sgemm instead (gemm_bf16 under --precision bf16): the
 * yardstick of the FLOP-efficiency line; with --model too, a few such calls run before each timed
 * step, so that the yardstick and the model see the same machine (a shared one's load changes
 * within seconds), and both medians are printed.
 * Under mpirun the training step is data-parallel as in train (--batch is the global batch): it also
 * prints the time per step spent waiting for the gradient allreduce, and the time the same allreduce
 * takes alone after the step, whose ratio is the share the overlap with the backward hid.
 * --profile also prints to stderr where a timed step's time goes, op by op (forward and backward
 * milliseconds a step, calls a step: core/tape.h says how an op's time is counted), the rest (the
 * optimizer, the loss's seed) as "outside the ops". */
#define SGEMM_CALLS_PER_STEP 5
#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../models/model.h"
#include "core/arena.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/flags.h"
#include "core/memory.h"
#include "core/precision.h"
#include "core/tape.h"
#include "core/threads.h"
#include "cpu/gemm_bf16.h"
#include "dist/dist.h"
#include "ops/backend.h"
#include "ops/op_table.h"
#include "train/grad_sync.h"
#include "train/optim.h"

/* bare cblas_sgemm of C (M, N) = A (M, K) · B (N, K)ᵀ, as a linear layer's forward */
typedef struct sgemm_ref {
    int M, K, N;
    float *a, *b, *c;
} sgemm_ref;

static bool sgemm_ref_init(sgemm_ref *g, const char *mkn) {
    int mkn_ints[3];
    if (!flag_ints(mkn, 3, 1, mkn_ints)) {
        fprintf(stderr, "error: --sgemm %s: expected M,K,N\n", mkn);
        return false;
    }
    g->M = mkn_ints[0], g->K = mkn_ints[1], g->N = mkn_ints[2];
    /* on cache lines, as the arena places tensors: calloc's large blocks start 16 bytes past a
     * page, and AMX tile stores into C rows that straddle lines ran the bare bf16 GEMM 1.5-2x
     * slower than the same product on the arena's tensors */
    float **blocks[3] = {&g->a, &g->b, &g->c};
    size_t floats[3] = {(size_t)g->M * g->K, (size_t)g->K * g->N, (size_t)g->M * g->N};
    for (int i = 0; i < 3; i++) {
        *blocks[i] = host_memory.alloc(sizeof(float) * floats[i]);
        host_memory.zero(*blocks[i], sizeof(float) * floats[i]);
    }
    return true;
}

/* the bare GEMM of the precision: cblas_sgemm, or under bf16 gemm_bf16 from fp32 operands */
static const char *sgemm_name(void) { return vitc_precision() == PRECISION_BF16 ? "gemm_bf16" : "cblas_sgemm"; }

static double sgemm_seconds(const sgemm_ref *g) {
    double t0 = clock_seconds();
    if (vitc_precision() == PRECISION_BF16)
        gemm_bf16(false, true, g->M, g->N, g->K, 1.0f, g->a, g->K, g->b, g->K, 0.0f, g->c, g->N, vitc_threads());
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->M, g->N, g->K, 1.0f, g->a, g->K, g->b, g->K,
                    0.0f, g->c, g->N);
    return clock_seconds() - t0;
}

static double sgemm_gflop_s(const sgemm_ref *g, double seconds) { return 2.0 * g->M * g->K * g->N / seconds / 1e9; }

static void sgemm_ref_free(sgemm_ref *g) { free(g->a), free(g->b), free(g->c); }

typedef struct op_share {
    int op;
    double ms;
} op_share;

static int by_time(const void *a, const void *b) {
    double x = ((const op_share *)a)->ms, y = ((const op_share *)b)->ms;
    return (x < y) - (x > y);
}

/* the ops' times a step, the most first, and what the steps spent outside them */
static void print_profile(const char *name, const char *mode, int batch, const double *t,
                          int iters) {
    const tape_op_time *times = tape_profile();
    op_share rows[OP_COUNT];
    int n = 0;
    double step_ms = 0, ops_ms = 0;
    for (int i = 0; i < iters; i++) step_ms += 1e3 * t[i] / iters;
    for (int op = 0; op < OP_COUNT; op++) {
        double ms = 1e3 * (times[op].forward_s + times[op].backward_s) / iters;
        if (times[op].forward_calls + times[op].backward_calls) rows[n++] = (op_share){op, ms};
        ops_ms += ms;
    }
    qsort(rows, (size_t)n, sizeof(op_share), by_time);
    fprintf(stderr, "profile: %s %s batch %d %s, ms a step (mean of %d: %.1f ms)\n", name, mode,
            batch, precision_name(vitc_precision()), iters, step_ms);
    fprintf(stderr, "%-26s %10s %10s %7s %8s %8s\n", "op", "forward", "backward", "share", "calls",
            "bw calls");
    for (int i = 0; i < n; i++) {
        const tape_op_time *o = &times[rows[i].op];
        fprintf(stderr, "%-26s %10.2f %10.2f %6.1f%% %8.1f %8.1f\n", op_table[rows[i].op].name,
                1e3 * o->forward_s / iters, 1e3 * o->backward_s / iters, 100 * rows[i].ms / step_ms,
                (double)o->forward_calls / iters, (double)o->backward_calls / iters);
    }
    fprintf(stderr, "%-26s %21.2f %6.1f%%\n", "outside the ops", step_ms - ops_ms,
            100 * (step_ms - ops_ms) / step_ms);
}

static int bench_sgemm(const char *mkn, int iters, int threads) {
    sgemm_ref g;
    if (!sgemm_ref_init(&g, mkn)) return 2;
    vitc_set_threads(threads);
    double *t = xmalloc(sizeof(double) * (size_t)iters);
    for (int it = -2; it < iters; it++) {
        double s = sgemm_seconds(&g);
        if (it >= 0) t[it] = s;
    }
    double median_s = median_seconds(t, iters);
    printf("{\"sgemm\": \"%dx%dx%d\", \"kernel\": \"%s\", \"threads\": %d, \"median_s\": %.6f, \"gflop_s\": %.2f}\n",
           g.M, g.K, g.N, sgemm_name(), vitc_threads(), median_s, sgemm_gflop_s(&g, median_s));
    sgemm_ref_free(&g);
    free(t);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench --model NAME [--mode train|infer] [--batch N] [--iters K] [--img S] [--threads N]\n"
               "                    [--sgemm M,K,N] [--precision P] [--device cpu|cuda[:N]]\n"
               "                    [--profile]\n"
               "       bench --sgemm M,K,N [--iters K] [--threads N]\n");
}

int main(int argc, char **argv) {
    dist_init(&argc, &argv);
    const char *name = NULL, *mode = "train", *sgemm = NULL, *precision_arg = "fp32", *device_arg = "cpu";
    bool print_model = false, profile = false;
    int batch = 16, iters = 5, img = 0, threads = 0;
    const tool_flag flags[] = {
        TEXT_FLAG("--model", &name),
        TEXT_FLAG("--mode", &mode),
        INT_FLAG("--batch", &batch, 1),
        INT_FLAG("--iters", &iters, 1),
        INT_FLAG("--img", &img, 1),
        RANGE_FLAG("--threads", &threads, 1, VITC_MAX_THREADS),
        TEXT_FLAG("--sgemm", &sgemm),
        TEXT_FLAG("--precision", &precision_arg),
        TEXT_FLAG("--device", &device_arg),
        SWITCH_FLAG("--profile", &profile),
        SWITCH_FLAG("--print-model", &print_model),
        FLAGS_END,
    };
    int status = flags_read(argc, argv, flags, usage);
    if (status >= 0) return status;
    status = backend_select_flag(device_arg); /* before the first tensor and the precision */
    if (!status) status = precision_select_flag(precision_arg);
    if (status) return status;
    if (sgemm && !name) return bench_sgemm(sgemm, iters, threads);
    if (profile && sgemm) {
        fprintf(stderr, "error: --profile with --sgemm: the bare GEMM's calls would count as the "
                        "first op's time\n");
        return 2;
    }
    if (profile && strcmp(device_arg, "cpu")) {
        fprintf(stderr, "error: --profile with --device %s: a device's ops return once queued, so "
                        "the host's clock would time their launches\n", device_arg);
        return 2;
    }
    if (!name || (strcmp(mode, "train") && strcmp(mode, "infer"))) {
        usage(stderr);
        return 2;
    }
    vitc_set_threads(threads);
    config c;
    config_init(&c);
    char text[256];
    snprintf(text, sizeof(text), "{\"model\": {\"name\": \"%s\"}}", name);
    model_config_load_text(&c, text, "bench");
    if (img) config_set(&c, (snprintf(text, sizeof(text), "model.img_size=%d", img), text));
    model_config mc;
    model_config_read(&mc, &c);
    if (print_model) { /* the resolved model section, for the PyTorch side of tools/bench.sh */
        char *json = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(c.root, "model"));
        printf("%s\n", json);
        free(json);
        return 0;
    }
    model *m = model_create(&mc, 0);
    bool train = !strcmp(mode, "train");
    int ranks = dist_size(), global_batch = batch;
    if (batch % ranks) {
        fprintf(stderr, "error: --batch %d must divide among the %d processes\n", batch, ranks);
        dist_abort(2);
    }
    batch /= ranks;
    grad_sync *sync = ranks > 1 && train ? grad_sync_create(&m->ps) : NULL;
    float *alone = sync ? xmalloc(sizeof(float) * (size_t)m->ps.span) : NULL;
    double *wait = xcalloc((size_t)iters, sizeof(double)), *comm = xcalloc((size_t)iters, sizeof(double));
    adamw opt = {0}; /* (inference has no optimizer state: eval allocates none) */
    if (train) adamw_init(&opt, &m->ps, 0.05, 0.9, 0.999, 1e-8);
    tensor *x = NULL;
    int *labels = xcalloc((size_t)batch, sizeof(int));
    float *pixels = xmalloc(sizeof(float) * (size_t)batch * mc.img_size * mc.img_size * mc.in_chans);
    rng r;
    rng_seed(&r, 1, RNG_TEST);
    for (size_t i = 0; i < (size_t)batch * mc.img_size * mc.img_size * mc.in_chans; i++) pixels[i] = rng_normal(&r);
    tape_set_grad_enabled(train);
    sgemm_ref g = {0};
    if (sgemm && !sgemm_ref_init(&g, sgemm)) return 2;
    double *t = xmalloc(sizeof(double) * (size_t)iters), kept_bytes = 0;
    double *ts = xmalloc(sizeof(double) * (size_t)iters * SGEMM_CALLS_PER_STEP);
    for (int it = -2; it < iters; it++) { /* two warm-up runs */
        if (profile && it == 0) tape_profile_start();
        for (int k = 0; sgemm && k < SGEMM_CALLS_PER_STEP; k++) {
            double s = sgemm_seconds(&g);
            if (it >= 0) ts[it * SGEMM_CALLS_PER_STEP + k] = s;
        }
        double t0 = clock_seconds();
        const float *images = backend_floats(pixels, (int64_t)batch * mc.img_size * mc.img_size * mc.in_chans);
        x = tensor_wrap((float *)images, 4, (int[]){batch, mc.img_size, mc.img_size, mc.in_chans});
        forward_opts fo = {.train = train, .rng = &r};
        tensor *logits = model_forward(m, x, &fo);
        kept_bytes = (double)vitc_data_arena()->used;
        if (train) {
            params_zero_grad(&m->ps);
            static const float one = 1.0f; /* the training step's backward, as train runs it */
            tensor *loss = op_cross_entropy_labels(logits, labels, 0.1f);
            if (sync) grad_sync_arm(sync);
            tape_backward_consuming(loss, &one);
            if (sync) grad_sync_finish(sync);
            adamw_step(&opt, &m->ps, 1e-4);
        }
        /* a device has queued the step, not run it: reading a weight back waits for it */
        float weight;
        params_read(&m->ps, &weight, m->ps.data, 1);
        tape_reset();
        arena_reset(&vitc_arena);
        if (it >= 0) t[it] = clock_seconds() - t0;
        if (sync) { /* the allreduce of the whole block again, alone: what the overlap hid of it */
            double waited = grad_sync_wait_seconds(sync);
            const float *grad = params_read(&m->ps, alone, m->ps.grad, m->ps.span);
            if (grad != alone) memcpy(alone, grad, sizeof(float) * (size_t)m->ps.span);
            dist_barrier();
            double c0 = clock_seconds();
            dist_reducer *whole =
                dist_reducer_create(alone, m->ps.span, grad_sync_bucket_bytes(&m->ps));
            dist_reducer_finish(whole, 1.0f);
            dist_reducer_free(whole);
            if (it >= 0) wait[it] = waited, comm[it] = clock_seconds() - c0;
        }
    }
    if (profile) tape_profile_stop();
    /* a step lasts as long as its slowest rank; that rank's wait (the least) is the communication
     * the backward did not hide, the others' also their head start */
    dist_max_f64(t, iters);
    for (int i = 0; i < iters; i++) wait[i] = -wait[i];
    dist_max_f64(wait, iters);
    for (int i = 0; i < iters; i++) wait[i] = -wait[i];
    dist_max_f64(comm, iters);
    double step_s = median_seconds(t, iters), wait_s = median_seconds(wait, iters),
           comm_s = median_seconds(comm, iters);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (dist_rank() == 0) {
        printf("{\"model\": \"%s\", \"mode\": \"%s\", \"batch\": %d, \"img\": %d, \"threads\": %d, "
               "\"ranks\": %d, \"precision\": \"%s\", \"median_s\": %.6f, \"img_s\": %.3f, \"peak_rss_mib\": %.1f, "
               "\"gmacs\": %.4f",
               name, mode, global_batch, mc.img_size, vitc_threads(), ranks, precision_name(vitc_precision()), step_s,
               global_batch / step_s, ru.ru_maxrss / 1024.0, model_macs(m) / 1e9);
        if (train) printf(", \"kept_mib\": %.1f", kept_bytes / (1 << 20));
        if (sync)
            printf(", \"grad_bytes\": %lld, \"allreduce_wait_s\": %.6f, \"allreduce_alone_s\": %.6f",
                   (long long)m->ps.span * 4, wait_s, comm_s);
    }
    if (sgemm && dist_rank() == 0) {
        double sgemm_s = median_seconds(ts, iters * SGEMM_CALLS_PER_STEP);
        printf(", \"sgemm\": \"%dx%dx%d\", \"sgemm_kernel\": \"%s\", \"sgemm_gflop_s\": %.2f", g.M, g.K, g.N,
               sgemm_name(), sgemm_gflop_s(&g, sgemm_s));
        sgemm_ref_free(&g);
    }
    if (dist_rank() == 0) printf("}\n");
    if (profile && dist_rank() == 0) {
        fflush(stdout);
        print_profile(name, mode, global_batch, t, iters);
    }
    free(wait);
    free(comm);
    free(alone);
    grad_sync_free(sync);
    free(ts);
    free(t);
    free(pixels);
    free(labels);
    if (train) adamw_free(&opt);
    model_free(m);
    config_free(&c);
    dist_finalize();
    return 0;
}
