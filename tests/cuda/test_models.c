/* Whole models on the device against the CPU: every tiny model of configs/tiny (each backbone with
 * each of its attention types) from the same weights and input, its output and every parameter's
 * gradient after one backward from the same random upstream gradient. A network sums in another
 * order through many ops, so the bound is MODEL_TOL, not a single op's DEVICE_TOL. */
#include <dirent.h>
#include <stdlib.h>

#include "../../models/model.h"
#include "core/memory.h"
#include "device_check.h"
#include "ops/backend.h"

#define MODEL_TOL 1e-4

static void select_device(const char *name) {
    char err[1536];
    CHECK(backend_select(name, err, sizeof(err)), "%s", err);
}

typedef struct model_run {
    float *out, *grad; /* the output and the flat gradient block, on the host */
    int64_t n_out;
} model_run;

/* the model of mc on the selected device from the host weights w: forward of x (host), backward from
 * seed; SiT reads a time and a label per sample */
static model_run run_model(const model_config *mc, const float *w, const float *x, int B, const float *seed) {
    model *m = model_create(mc, 1);
    params_write(&m->ps, m->ps.data, w, m->ps.span);
    float t[8];
    int y[8];
    for (int b = 0; b < B; b++) t[b] = 0.3f + 0.2f * (float)b, y[b] = b % mc->num_classes;
    forward_opts fo = {.train = false, .t = t, .y = y};
    int64_t n_in = (int64_t)B * mc->img_size * mc->img_size * mc->in_chans;
    tensor *in = tensor_wrap((float *)backend_floats(x, n_in), 4, (int[]){B, mc->img_size, mc->img_size, mc->in_chans});
    tape_set_grad_enabled(true);
    params_zero_grad(&m->ps);
    tensor *out = model_forward(m, in, &fo);
    model_run r = {xmalloc(sizeof(float) * (size_t)out->numel), xmalloc(sizeof(float) * (size_t)m->ps.span),
                   out->numel};
    vitc_memory()->to_host(r.out, out->data, sizeof(float) * (size_t)out->numel);
    tape_backward_from(out, seed);
    const float *g = params_read(&m->ps, r.grad, m->ps.grad, m->ps.span);
    if (g != r.grad) memcpy(r.grad, g, sizeof(float) * (size_t)m->ps.span);
    tape_reset();
    arena_reset(&vitc_arena);
    model_free(m);
    return r;
}

/* the worst relative error of the model's output and parameter gradients, device against CPU */
static double compare_model(const char *path) {
    config c;
    config_init(&c);
    const char *files[1] = {path};
    model_config_load(&c, files, 1, NULL, 0);
    model_config mc;
    model_config_read(&mc, &c);
    config_free(&c);
    const int B = 2;
    select_device("cpu");
    model *m = model_create(&mc, 1);
    rng r;
    rng_seed(&r, 7, RNG_TEST);
    /* off the zero inits (SiT's adaLN-Zero gates pass no gradient to most parameters) */
    float *w = xmalloc(sizeof(float) * (size_t)m->ps.span);
    for (int64_t j = 0; j < m->ps.span; j++) w[j] = m->ps.data[j] + 0.1f * rng_normal(&r);
    int64_t n_in = (int64_t)B * mc.img_size * mc.img_size * mc.in_chans;
    float *x = xmalloc(sizeof(float) * (size_t)n_in);
    for (int64_t j = 0; j < n_in; j++) x[j] = rng_normal(&r);
    const param_store *ps = &m->ps; /* the names and offsets, for the report */
    int64_t n_out = !strcmp(mc.arch, "sit") ? n_in : (int64_t)B * mc.num_classes; /* velocity or logits */
    float *seed = xmalloc(sizeof(float) * (size_t)n_out);
    for (int64_t j = 0; j < n_out; j++) seed[j] = rng_normal(&r);
    model_run cpu = run_model(&mc, w, x, B, seed);
    select_device("cuda");
    model_run dev = run_model(&mc, w, x, B, seed);
    select_device("cpu");
    double worst = max_rel_diff(dev.out, cpu.out, (long)cpu.n_out);
    printf("    %-28s out %.2e", mc.name, worst);
    double worst_grad = 0;
    const char *worst_name = "";
    for (int i = 0; i < ps->n; i++) {
        int64_t off = ps->params[i]->data - ps->data;
        double e = max_rel_diff(dev.grad + off, cpu.grad + off, (long)ps->params[i]->numel);
        if (e > worst_grad || e != e) worst_grad = e, worst_name = ps->params[i]->name;
    }
    printf("  gradients %.2e (%s)\n", worst_grad, worst_name);
    if (worst_grad > worst || worst_grad != worst_grad) worst = worst_grad;
    free(cpu.out), free(cpu.grad), free(dev.out), free(dev.grad), free(w), free(x), free(seed);
    model_free(m);
    return worst;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

TEST(cuda_models_every_tiny_model_matches_the_cpu) {
    REQUIRE_ALL_KERNELS();
    DIR *d = opendir("configs/tiny");
    EXPECT(d, "configs/tiny: cannot open (run from the repository root)");
    char *names[64];
    int n = 0;
    for (struct dirent *e; n < 64 && (e = readdir(d));)
        if (strstr(e->d_name, ".json")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof(names[0]), by_name);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char path[300];
        snprintf(path, sizeof(path), "configs/tiny/%s", names[i]);
        double err = compare_model(path);
        if (!(err <= MODEL_TOL)) printf("    %s: max rel err %.2e above %.0e\n", path, err, MODEL_TOL), failed++;
        free(names[i]);
    }
    EXPECT(n >= 20 && !failed, "%d of %d tiny models differ from the CPU", failed, n);
}
