/* The trainer on the device against the CPU: 20 steps of tests/tiny_run.c's tiny Agent-DeiT task
 * (mixup and cutmix, drop path, label smoothing, clipping, AdamW, EMA, a validation at each epoch's
 * end), and an epoch (6 steps) of a tiny SiT's diffusion training on the same images, each run in
 * this process by train_run with train.device "cpu", then "cuda"; and the SiT samplers with
 * guidance. Every step's loss and the final weights, EMA and optimizer moments agree to TRAIN_TOL:
 * the same draws on both devices, arithmetic summed in other orders. */
#include <stdlib.h>

#include "../../models/model.h"
#include "../tiny_run.h"
#include "device_check.h"
#include "ops/backend.h"
#include "train/trainer.h"
#include "train/transport.h"

#define TRAIN_TOL 1e-4
#define MAX_SETS 24

static void select_device(const char *name) {
    char err[1536];
    CHECK(backend_select(name, err, sizeof(err)), "%s", err);
}

/* train_run of the config file with the settings sets (n of them) on device_name, into out/run */
static int train_on(const char *device_name, const char *out, const char *file, const char *const *sets, int n) {
    char run_out[400], device_set[64];
    snprintf(run_out, sizeof(run_out), "run.out=\"%s\"", out);
    snprintf(device_set, sizeof(device_set), "train.device=\"%s\"", device_name);
    const char *all[MAX_SETS] = {run_out, device_set, "run.name=\"run\"", "run.log_every=1"};
    CHECK(n + 4 <= MAX_SETS, "%d settings", n);
    memcpy(all + 4, sets, sizeof(char *) * (size_t)n);
    config c;
    config_init(&c);
    model_config_load(&c, &file, 1, all, n + 4);
    train_options o = {.quiet = true};
    int code = train_run(&c, &o);
    config_free(&c);
    select_device("cpu");
    return code;
}

/* sqrt(sum (a - b)²) / sqrt(sum b²) over the tensors of two checkpoints whose names start with
 * prefix ("": the parameters), as tests/test_train_parity.c measures weights */
static double checkpoint_rel_l2(const st_file *a, const st_file *b, const char *prefix, int *tensors) {
    double num = 0, den = 0;
    *tensors = 0;
    for (int i = 0; i < b->n; i++) {
        const st_entry *eb = &b->entries[i], *ea = st_find(a, eb->name);
        bool moment_or_ema = !strncmp(eb->name, "optim.", 6) || !strncmp(eb->name, "ema.", 4);
        if (prefix[0] ? strncmp(eb->name, prefix, strlen(prefix)) != 0 : moment_or_ema) continue;
        if (!ea || ea->numel != eb->numel) return INFINITY;
        float *x = xmalloc(sizeof(float) * (size_t)eb->numel), *y = xmalloc(sizeof(float) * (size_t)eb->numel);
        st_to_f32(ea, x);
        st_to_f32(eb, y);
        for (int64_t j = 0; j < eb->numel; j++) {
            num += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
            den += (double)y[j] * y[j];
        }
        free(x), free(y);
        ++*tensors;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* the run of file + sets on the CPU and on the device, `steps` steps each: losses and final blocks */
static void compare_runs(const char *name, const char *file, const char *const *sets, int n, int steps) {
    char cpu_dir[400], dev_dir[400];
    snprintf(cpu_dir, sizeof(cpu_dir), "%s/cuda_%s_cpu", tiny_run_dir(), name);
    snprintf(dev_dir, sizeof(dev_dir), "%s/cuda_%s_cuda", tiny_run_dir(), name);
    EXPECT(train_on("cpu", cpu_dir, file, sets, n) == 0, "the CPU run failed");
    EXPECT(train_on("cuda", dev_dir, file, sets, n) == 0, "the CUDA run failed");
    char losses[2][64][32], path[2][500];
    snprintf(path[0], sizeof(path[0]), "%s/run", cpu_dir);
    snprintf(path[1], sizeof(path[1]), "%s/run", dev_dir);
    int n_cpu = tiny_run_step_losses(path[0], losses[0], 64), n_dev = tiny_run_step_losses(path[1], losses[1], 64);
    EXPECT(n_cpu == steps && n_dev == steps, "%d and %d step lines, not %d", n_cpu, n_dev, steps);
    double worst = 0;
    for (int s = 0; s < steps; s++) {
        double a = atof(losses[0][s]), b = atof(losses[1][s]), e = fabs(b - a) / fabs(a);
        if (e > worst || e != e) worst = e;
        EXPECT(e <= TRAIN_TOL, "step %d: loss %s on the CPU, %s on the device", s + 1, losses[0][s], losses[1][s]);
    }
    st_file f[2];
    char err[1024];
    for (int k = 0; k < 2; k++) {
        snprintf(path[k] + strlen(path[k]), sizeof(path[k]) - strlen(path[k]), "/last.safetensors");
        EXPECT(st_read(&f[k], path[k], err, sizeof(err)), "%s", err);
    }
    const char *blocks[] = {"", "ema.", "optim.exp_avg."};
    double e[3];
    int tensors[3];
    for (int b = 0; b < 3; b++) e[b] = checkpoint_rel_l2(&f[1], &f[0], blocks[b], &tensors[b]);
    printf("    %d steps: worst loss rel err %.1e; final weights %.1e, EMA %.1e, AdamW m %.1e (rel L2)\n", steps, worst,
           e[0], e[1], e[2]);
    st_close(&f[0]);
    st_close(&f[1]);
    EXPECT(tensors[0] > 0 && tensors[0] == tensors[1] && tensors[0] == tensors[2], "%d weights, %d EMA, %d moments",
           tensors[0], tensors[1], tensors[2]);
    EXPECT(e[0] <= TRAIN_TOL && e[1] <= TRAIN_TOL && e[2] <= TRAIN_TOL, "weights %.2e, EMA %.2e, AdamW m %.2e",
           e[0], e[1], e[2]);
}

TEST(cuda_train_20_steps_follow_the_cpu) {
    REQUIRE_ALL_KERNELS();
    const char *sets[] = {"train.epochs=4", "run.stop_after_steps=20"}; /* 6 steps an epoch */
    compare_runs("classify", tiny_run_config(), sets, 2, 20);
}

/* train.task "diffusion" (transport_loss, evaluate_diffusion) on the same images, as test_sit_train */
static const char *const sit_sets[] = {
    "data.train=\"%s/train\"", "data.val=\"%s/val\"", "data.workers=2", "model.in_chans=1", "model.img_size=16",
    "model.num_classes=3", "model.patch_size=4", "model.class_dropout_prob=0.1", "train.batch=6", "train.epochs=1",
    "train.lr=3e-3",
    "train.lr_scale_batch=0", "train.warmup_epochs=0", "ema.enabled=true", "ema.decay=0.9"};

TEST(cuda_train_diffusion_follows_the_cpu) {
    REQUIRE_ALL_KERNELS();
    enum { N = sizeof(sit_sets) / sizeof(sit_sets[0]) };
    char text[N][400];
    const char *sets[N];
    for (int i = 0; i < N; i++) snprintf(text[i], sizeof(text[i]), sit_sets[i], tiny_run_dir()), sets[i] = text[i];
    compare_runs("diffusion", "configs/tiny/sit_mediator.json", sets, N, 6);
}

/* the SiT samplers step on the host around the network's velocity on the device: ODE with
 * guidance and the SDE, from the same noise, the images agree */
TEST(cuda_sampler_follows_the_cpu) {
    REQUIRE_ALL_KERNELS();
    const char *file = "configs/tiny/sit_mediator.json", *sets[] = {"model.class_dropout_prob=0.1"};
    config c;
    config_init(&c);
    model_config_load(&c, &file, 1, sets, 1);
    model_config mc;
    model_config_read(&mc, &c);
    config_free(&c);
    const int B = 2;
    int64_t per = (int64_t)mc.img_size * mc.img_size * mc.in_chans;
    float *x[2][2], *w = NULL;
    const int labels[2] = {1, 3};
    rng r;
    rng_seed(&r, 5, RNG_TEST);
    for (int d = 0; d < 2; d++) {
        select_device(d ? "cuda" : "cpu");
        model *m = model_create(&mc, 5);
        if (!w) { /* off adaLN-Zero's init, whose velocity is 0 */
            w = xmalloc(sizeof(float) * (size_t)m->ps.span);
            for (int64_t j = 0; j < m->ps.span; j++) w[j] = m->ps.data[j] + 0.1f * rng_normal(&r);
        }
        params_write(&m->ps, m->ps.data, w, m->ps.span);
        for (int k = 0; k < 2; k++) {
            sampler_opts so = sampler_defaults(k ? SAMPLER_SDE : SAMPLER_ODE);
            so.steps = 3;
            so.cfg = k ? 1.0 : 2.0;
            rng noise[2];
            x[d][k] = xmalloc(sizeof(float) * (size_t)(B * per));
            for (int b = 0; b < B; b++) {
                rng_seed(&noise[b], 11 + (uint64_t)b, RNG_SAMPLE);
                for (int64_t j = 0; j < per; j++) x[d][k][b * per + j] = rng_normal(&noise[b]);
            }
            transport_net net = {.m = m, .y = labels, .cfg = so.cfg, .guided_chans = so.guided_chans};
            transport_sample(transport_net_velocity, &net, x[d][k], B, per, &so, noise);
        }
        model_free(m);
    }
    select_device("cpu");
    double ode = max_rel_diff(x[1][0], x[0][0], (long)(B * per)), sde = max_rel_diff(x[1][1], x[0][1], (long)(B * per));
    printf("    ODE with guidance: max rel err %.2e; SDE: %.2e\n", ode, sde);
    for (int d = 0; d < 2; d++) free(x[d][0]), free(x[d][1]);
    free(w);
    EXPECT(ode <= TRAIN_TOL && sde <= TRAIN_TOL, "ODE %.2e, SDE %.2e", ode, sde);
}
