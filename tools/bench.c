/* bench: times one model's training step (forward + backward + AdamW) or inference at a batch size,
 * synthetic input, warm-up then the median of several runs; prints one JSON line with img/s and the
 * peak RSS. tools/bench.sh runs it next to the PyTorch reference in the same invocation.
 * bench --sgemm M,K,N times bare cblas_sgemm instead: the yardstick of the FLOP-efficiency line. */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../models/model.h"
#include "core/arena.h"
#include "core/tape.h"
#include "core/threads.h"
#include "train/optim.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_sgemm(const char *mkn, int iters, int threads) {
    int M, K, N;
    if (sscanf(mkn, "%d,%d,%d", &M, &K, &N) != 3 || M < 1 || K < 1 || N < 1) {
        fprintf(stderr, "error: --sgemm %s: expected M,K,N\n", mkn);
        return 2;
    }
    vitc_set_threads(threads);
    float *a = calloc((size_t)M * K, sizeof(float)), *b = calloc((size_t)K * N, sizeof(float));
    float *c = calloc((size_t)M * N, sizeof(float));
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int it = -2; it < iters; it++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        if (it >= 0) t[it] = now() - t0;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp);
    printf("{\"sgemm\": \"%dx%dx%d\", \"threads\": %d, \"median_s\": %.6f, \"gflop_s\": %.2f}\n", M, K, N,
           vitc_threads(), t[iters / 2], 2.0 * M * K * N / t[iters / 2] / 1e9);
    free(a), free(b), free(c), free(t);
    return 0;
}

int main(int argc, char **argv) {
    const char *name = NULL, *mode = "train", *sgemm = NULL;
    bool print_model = false;
    int batch = 16, iters = 5, img = 0, threads = 0;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--print-model")) {
            print_model = true;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--model")) name = argv[i + 1];
        else if (!strcmp(argv[i], "--mode")) mode = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--img")) img = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sgemm")) sgemm = argv[i + 1];
        else {
            fprintf(stderr, "error: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (iters < 1) {
        fprintf(stderr, "error: --iters %d: expected at least 1\n", iters);
        return 2;
    }
    if (sgemm) return bench_sgemm(sgemm, iters, threads);
    if (!name || batch < 1 || (strcmp(mode, "train") && strcmp(mode, "infer"))) {
        fprintf(stderr, "usage: bench --model NAME [--mode train|infer] [--batch N] [--iters K] [--img S] [--threads N]\n"
                        "       bench --sgemm M,K,N [--iters K] [--threads N]\n");
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
    adamw opt;
    adamw_init(&opt, &m->ps, 0.05, 0.9, 0.999, 1e-8);
    tensor *x = NULL;
    int *labels = calloc((size_t)batch, sizeof(int));
    float *pixels = malloc(sizeof(float) * (size_t)batch * mc.img_size * mc.img_size * mc.in_chans);
    rng r;
    rng_seed(&r, 1, RNG_TEST);
    for (size_t i = 0; i < (size_t)batch * mc.img_size * mc.img_size * mc.in_chans; i++) pixels[i] = rng_normal(&r);
    tape_set_grad_enabled(train);
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int it = -2; it < iters; it++) { /* two warm-up runs */
        double t0 = now();
        x = tensor_wrap(pixels, 4, (int[]){batch, mc.img_size, mc.img_size, mc.in_chans});
        forward_opts fo = {.train = train, .rng = &r};
        tensor *logits = model_forward(m, x, &fo);
        if (train) {
            params_zero_grad(&m->ps);
            static const float one = 1.0f; /* the training step's backward, as train runs it */
            tape_backward_consuming(op_cross_entropy_labels(logits, labels, 0.1f), &one);
            adamw_step(&opt, &m->ps, 1e-4);
        }
        tape_reset();
        arena_reset(&vitc_arena);
        if (it >= 0) t[it] = now() - t0;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"model\": \"%s\", \"mode\": \"%s\", \"batch\": %d, \"img\": %d, \"threads\": %d, "
           "\"median_s\": %.6f, \"img_s\": %.3f, \"peak_rss_mib\": %.1f, \"gmacs\": %.4f}\n",
           name, mode, batch, mc.img_size, vitc_threads(), t[iters / 2], batch / t[iters / 2],
           ru.ru_maxrss / 1024.0, model_macs(m) / 1e9);
    free(t);
    free(pixels);
    free(labels);
    adamw_free(&opt);
    model_free(m);
    config_free(&c);
    return 0;
}
