/* The collectives of src/dist on device memory (NCCL behind dist.h): one rank through the NCCL layer
 * itself (src/cuda/nccl_comm.h); two ranks under mpirun through dist.h's gradient reducer and
 * broadcast, called as the trainer calls them, on small integers whose sums are exact, so the
 * results must match bit for bit; and the trainer on two ranks against one CPU process. On the
 * emulator NCCL is tests/cuda/emu's stand-in, which combines the ranks over MPI; on GPUs the two
 * ranks need two devices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../models/model.h"
#include "../shell.h"
#include "../tiny_run.h"
#include "core/check.h"
#include "core/safetensors.h"
#include "cuda/device.h"
#include "cuda/nccl_comm.h"
#include "cuda/train_step.h"
#include "device_check.h"
#include "dist/dist.h"
#include "ops/backend.h"
#include "train/trainer.h"

/* rank r's gradient at float i */
static float grad_value(int64_t i, int r) { return (float)((i % 97) - 48) * (float)(r + 1); }

static float *upload(const float *host, int64_t n) {
    float *d = cuda_alloc_floats((size_t)n);
    cuda_to_device(d, host, (size_t)n);
    return d;
}

/* the floats of device memory d that differ from want */
static int64_t mismatches(const float *d, const float *want, int64_t n) {
    float *got = xmalloc(sizeof(float) * (size_t)n);
    cuda_to_host(got, d, (size_t)n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += got[i] != want[i];
    free(got);
    return bad;
}

static void select_device(void) {
    char err[512];
    CHECK(backend_select_partial("cuda", err, sizeof(err)), "%s", err);
}

TEST(cuda_nccl_one_rank) {
    REQUIRE_DEVICE();
    select_device();
    const int64_t n = 5003;
    float *host = xmalloc(sizeof(float) * n), *want = xmalloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) host[i] = grad_value(i, 0), want[i] = host[i] * 0.25f;
    float *d = upload(host, n);
    EXPECT(cuda_is_device_memory(d) && cuda_is_device_memory(d + n - 1), "device memory not recognised");
    EXPECT(!cuda_is_device_memory(host), "host memory taken for device memory");
    unsigned char id[CUDA_NCCL_ID_BYTES];
    cuda_nccl_unique_id(id);
    cuda_nccl_init(id, 0, 1);
    cuda_nccl_sum_start(d + 2000, n - 2000);
    cuda_nccl_sum_start(d, 2000);
    cuda_nccl_wait();
    cuda_scale_floats(d, n, 0.25f);
    cuda_nccl_broadcast(d, sizeof(float) * n, 0);
    int64_t bad = mismatches(d, want, n);
    printf("    sum, scale, broadcast: %lld of %lld floats differ\n", (long long)bad, (long long)n);
    EXPECT(bad == 0, "%lld floats differ", (long long)bad);
    cuda_nccl_free();
    cuda_free(d);
    free(host);
    free(want);
    char err[64];
    backend_select("cpu", err, sizeof(err));
}

/* One rank of cuda_nccl_two_ranks, which runs this binary under mpirun with this test alone. */
TEST(cuda_nccl_rank_of_two) {
    if (!getenv("OMPI_COMM_WORLD_SIZE")) SKIP("a rank of cuda_nccl_two_ranks, which starts it under mpirun");
    dist_init(NULL, NULL);
    dist_startup_done(true);
    select_device(); /* "cuda": this rank's device among its host's */
    const int rank = dist_rank(), size = dist_size();
    const int64_t n = 10007;
    const float scale = 1.0f / (float)size;
    float *host = xmalloc(sizeof(float) * n), *want = xmalloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) {
        host[i] = grad_value(i, rank);
        want[i] = grad_value(i, 0) * (float)(size * (size + 1) / 2) * scale; /* sum over the ranks, scaled */
    }
    float *grad = upload(host, n);
    /* buckets of 1000 floats, final in steps of 1500 from the end as a backward pass makes them */
    dist_reducer *red = dist_reducer_create(grad, n, 1000 * sizeof(float));
    for (int round = 0; round < 2; round++) { /* a reducer serves every step */
        cuda_to_device(grad, host, (size_t)n);
        for (int64_t from = n; from > 0; from -= 1500) dist_reducer_ready(red, from);
        dist_reducer_finish(red, scale);
        int64_t bad = mismatches(grad, want, n);
        printf("    rank %d of %d, step %d: %lld of %lld averaged floats differ\n", rank, size, round + 1,
               (long long)bad, (long long)n);
        EXPECT(bad == 0, "step %d: %lld floats differ", round + 1, (long long)bad);
    }
    /* rank 0's parameters to every rank, on the device, and a host value beside them over MPI */
    for (int64_t i = 0; i < n; i++) want[i] = grad_value(i, 0);
    cuda_to_device(grad, host, (size_t)n);
    int64_t step = 100 + rank;
    dist_broadcast(grad, sizeof(float) * n, 0);
    dist_broadcast(&step, sizeof(step), 0);
    int64_t bad = mismatches(grad, want, n);
    printf("    rank %d: broadcast: %lld floats differ, host value %lld\n", rank, (long long)bad, (long long)step);
    EXPECT(bad == 0 && step == 100, "broadcast: %lld floats differ, host value %lld", (long long)bad,
           (long long)step);
    dist_reducer_free(red);
    cuda_free(grad);
    free(host);
    free(want);
    char err[64];
    backend_select("cpu", err, sizeof(err));
    dist_finalize();
}

/* Why two ranks cannot run here (NULL when they can): the emulator's one device serves both ranks,
 * while NCCL wants a GPU per rank */
static const char *two_ranks_missing(void) {
    static char why[64];
    char name[256];
    select_device();
    bool emulated = strstr(cuda_device_name(name, sizeof(name)), "emulation") != NULL;
    int devices = cuda_device_count();
    backend_select("cpu", why, sizeof(why));
    if (!emulated && devices < 2) return snprintf(why, sizeof(why), "needs 2 GPUs (%d here)", devices), why;
    char out[256];
    if (run(out, sizeof(out), "command -v mpirun") != 0) return "needs mpirun (Debian's openmpi-bin)";
    return NULL;
}

/* runs this test binary's test `name` on 2 ranks under mpirun, with the environment settings env;
 * returns how many ranks passed it, its output in out */
static int on_two_ranks(const char *name, const char *env, char *out, size_t len) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    CHECK(n > 0, "cannot find this test binary");
    self[n] = 0;
    int status = run(out, len, "%s OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 600 "
                     "mpirun --oversubscribe -np 2 %s %s", env, self, name);
    int passed = 0;
    char ok[128];
    snprintf(ok, sizeof(ok), "ok   %s\n", name);
    for (const char *s = out; (s = strstr(s, ok)); s++) passed++;
    return status == 0 ? passed : 0;
}

TEST(cuda_nccl_two_ranks) {
    REQUIRE_DEVICE();
    const char *missing = two_ranks_missing();
    if (missing) SKIP("%s", missing);
    char out[16384];
    int passed = on_two_ranks("cuda_nccl_rank_of_two", "", out, sizeof(out));
    EXPECT(passed == 2, "%d of 2 ranks passed:\n%s", passed, out);
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, "    rank ")) printf("%s\n", line);
}

/* ---- the trainer on two ranks ---- */

#define TRAIN_STEPS 4
#define TRAIN_TOL 1e-4

/* train_run of tiny_run.c's task (config at `tiny`) for TRAIN_STEPS steps on device_name into
 * out/run, on the path where ranks follow one process (tests/test_dist.c): no mixup or cutmix, no
 * qkv bias, drop path drawn per sample of the whole batch */
static int train_tiny(const char *tiny, const char *device_name, const char *out) {
    char run_out[400], device_set[64], steps[64];
    snprintf(run_out, sizeof(run_out), "run.out=\"%s\"", out);
    snprintf(device_set, sizeof(device_set), "train.device=\"%s\"", device_name);
    snprintf(steps, sizeof(steps), "run.stop_after_steps=%d", TRAIN_STEPS);
    const char *sets[] = {run_out, device_set, steps, "run.name=\"run\"", "aug.mixup=0", "aug.cutmix=0",
                          "model.qkv_bias=false", "model.depths=[2]", "model.drop_path=0.3"};
    config c;
    config_init(&c);
    model_config_load(&c, &tiny, 1, sets, (int)(sizeof(sets) / sizeof(sets[0])));
    train_options o = {.quiet = true};
    int code = train_run(&c, &o);
    config_free(&c);
    char err[512];
    CHECK(backend_select("cpu", err, sizeof(err)), "%s", err);
    return code;
}

/* One rank of cuda_nccl_train_two_ranks_follow_one_process, which starts it under mpirun. */
TEST(cuda_nccl_train_rank_of_two) {
    const char *tiny = getenv("VITC_TEST_TINY"), *out = getenv("VITC_TEST_OUT");
    if (!getenv("OMPI_COMM_WORLD_SIZE") || !tiny || !out)
        SKIP("a rank of cuda_nccl_train_two_ranks_follow_one_process, which starts it under mpirun");
    dist_init(NULL, NULL);
    int code = train_tiny(tiny, "cuda", out);
    dist_finalize();
    EXPECT(code == 0, "train_run exited %d", code);
}

/* rel L2 difference of the tensors whose names start with prefix, a against b */
static double checkpoint_rel_l2(const st_file *a, const st_file *b, const char *prefix) {
    double num = 0, den = 0;
    for (int i = 0; i < b->n; i++) {
        const st_entry *eb = &b->entries[i], *ea = st_find(a, eb->name);
        if (strncmp(eb->name, prefix, strlen(prefix))) continue;
        if (!ea || ea->numel != eb->numel) return INFINITY;
        float *x = xmalloc(sizeof(float) * (size_t)eb->numel), *y = xmalloc(sizeof(float) * (size_t)eb->numel);
        st_to_f32(ea, x);
        st_to_f32(eb, y);
        for (int64_t j = 0; j < eb->numel; j++) num += ((double)x[j] - y[j]) * ((double)x[j] - y[j]), den += (double)y[j] * y[j];
        free(x), free(y);
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}

/* Two CUDA ranks (the start-up broadcast and the gradient buckets through NCCL) against one CPU
 * process: the same losses, and the same AdamW moments, which also catch a sum left unaveraged
 * (AdamW's step is blind to the gradients' scale). */
TEST(cuda_nccl_train_two_ranks_follow_one_process) {
    REQUIRE_ALL_KERNELS();
    const char *missing = two_ranks_missing();
    if (missing) SKIP("%s", missing);
    char cpu_dir[400], dev_dir[400], env[1400], out[16384];
    snprintf(cpu_dir, sizeof(cpu_dir), "%s/nccl_train_cpu", tiny_run_dir());
    snprintf(dev_dir, sizeof(dev_dir), "%s/nccl_train_cuda", tiny_run_dir());
    EXPECT(train_tiny(tiny_run_config(), "cpu", cpu_dir) == 0, "the CPU run failed");
    snprintf(env, sizeof(env), "VITC_TEST_TINY=%s VITC_TEST_OUT=%s", tiny_run_config(), dev_dir);
    int passed = on_two_ranks("cuda_nccl_train_rank_of_two", env, out, sizeof(out));
    EXPECT(passed == 2, "%d of 2 ranks passed:\n%s", passed, out);
    char losses[2][16][32], path[2][500];
    snprintf(path[0], sizeof(path[0]), "%s/run", cpu_dir);
    snprintf(path[1], sizeof(path[1]), "%s/run", dev_dir);
    int n_cpu = tiny_run_step_losses(path[0], losses[0], 16), n_dev = tiny_run_step_losses(path[1], losses[1], 16);
    EXPECT(n_cpu == TRAIN_STEPS && n_dev == TRAIN_STEPS, "%d and %d step lines, not %d", n_cpu, n_dev, TRAIN_STEPS);
    double worst = 0;
    for (int s = 0; s < TRAIN_STEPS; s++) {
        double a = atof(losses[0][s]), b = atof(losses[1][s]), e = fabs(b - a) / fabs(a);
        worst = e > worst || e != e ? e : worst;
    }
    st_file f[2];
    char err[1024];
    for (int k = 0; k < 2; k++) {
        strcat(path[k], "/last.safetensors");
        EXPECT(st_read(&f[k], path[k], err, sizeof(err)), "%s", err);
    }
    double weights = checkpoint_rel_l2(&f[1], &f[0], "blocks.");
    double moments = checkpoint_rel_l2(&f[1], &f[0], "optim.exp_avg.");
    st_close(&f[0]);
    st_close(&f[1]);
    printf("    2 CUDA ranks against 1 CPU process, %d steps: worst loss rel err %.1e; final block weights %.1e, "
           "AdamW m %.1e (rel L2)\n", TRAIN_STEPS, worst, weights, moments);
    EXPECT(worst <= TRAIN_TOL && weights <= TRAIN_TOL && moments <= TRAIN_TOL, "losses %.2e, weights %.2e, m %.2e",
           worst, weights, moments);
}
