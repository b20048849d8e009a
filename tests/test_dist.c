/* Data-parallel training under mpirun on the tiny task: N ranks follow the 1-process trajectory
 * (mixup off, which mixes within each rank; drop path on in the second block,
 * drawn per sample of the whole batch), two runs with the same ranks are bit-identical,
 * a checkpoint of N ranks resumes on M, evaluation sharded over ranks counts exactly as one process,
 * and a killed rank ends the job. */
#include <math.h>
#include <stdlib.h>

#include "../src/core/safetensors.h"
#include "shell.h"
#include "test.h"
#include "tiny_run.h"

/* as root OpenMPI wants both variables; 2 cores here, up to 3 ranks. Under make test SAN=1, leak
 * checks stay off under mpirun: OpenMPI never frees some of its own allocations, from plugins it has
 * unloaded by then (no name to suppress them by); vitc's own paths are leak-checked in 1 process */
#define MPIRUN "ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " \
               "mpirun --oversubscribe -np "
/* qkv_bias off: softmax ignores the key bias, whose gradient is then rounding noise that AdamW scales
 * into full steps of random sign, following no summation order */
#define SAME_PATH "--set aug.mixup=0 --set aug.cutmix=0 --set model.qkv_bias=false --set model.depths=[2] " \
                  "--set model.drop_path=0.3 --quiet"

static bool have_mpirun(void) {
    char out[256];
    return run(out, sizeof(out), "command -v mpirun") == 0;
}

/* trains the tiny task for `steps` optimizer steps on `ranks` processes (0: without mpirun) into
 * runs/<name>; returns the exit code */
static int train(int ranks, const char *name, int steps, char *out, size_t len) {
    char launcher[160] = "";
    if (ranks) snprintf(launcher, sizeof(launcher), MPIRUN "%d ", ranks);
    return run(out, len, "%s./train --config %s --out %s/runs --set run.name=%s --set run.stop_after_steps=%d "
               SAME_PATH, launcher, tiny_run_config(), tiny_run_dir(), name, steps);
}

/* How far the state of ranks may drift from one process in 10 steps. Their gradients differ only in
 * the order the batch's shares are summed (a few ulps), but AdamW divides each element's gradient by
 * its own running RMS, so an element whose batch gradient nearly cancels (Agent attention's position
 * biases here) carries that rounding into its update at full step size. Measured worst: 8.5e-6 with
 * OpenBLAS's forward products, 2.9e-5 with the register tiles on AVX2 (blocks.1.attn.ca_bias, 3
 * ranks); a lost or double-counted share moves the state by 1e-2 or more. */
#define STATE_DRIFT_MAX 1e-4

/* the largest relative L2 difference over the tensors of two runs' last.safetensors (weights, AdamW
 * moments, EMA), or INFINITY when they cannot be compared */
static double checkpoint_difference(const char *run_a, const char *run_b) {
    char path[2][600], err[1024];
    st_file f[2];
    snprintf(path[0], sizeof(path[0]), "%s/runs/%s/last.safetensors", tiny_run_dir(), run_a);
    snprintf(path[1], sizeof(path[1]), "%s/runs/%s/last.safetensors", tiny_run_dir(), run_b);
    if (!st_read(&f[0], path[0], err, sizeof(err))) return INFINITY;
    if (!st_read(&f[1], path[1], err, sizeof(err))) {
        st_close(&f[0]);
        return INFINITY;
    }
    double worst = f[0].n == f[1].n && f[0].n > 0 ? 0 : INFINITY;
    for (int i = 0; i < f[0].n && isfinite(worst); i++) {
        const st_entry *a = &f[0].entries[i], *b = st_find(&f[1], a->name);
        if (!b || b->numel != a->numel) {
            worst = INFINITY;
            break;
        }
        float *va = malloc(sizeof(float) * (size_t)(a->numel + 1)), *vb = malloc(sizeof(float) * (size_t)(a->numel + 1));
        st_to_f32(a, va);
        st_to_f32(b, vb);
        double diff = 0, norm = 0;
        for (int64_t k = 0; k < a->numel; k++) {
            diff += ((double)va[k] - vb[k]) * ((double)va[k] - vb[k]);
            norm += (double)va[k] * va[k];
        }
        double rel = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
        if (rel > worst) worst = rel;
        free(va);
        free(vb);
    }
    st_close(&f[0]);
    st_close(&f[1]);
    return worst;
}

/* the step losses of two runs agree within rel */
static void expect_same_losses(const char *run_a, const char *run_b, int steps, double rel) {
    char dir[600], a[64][32], b[64][32];
    snprintf(dir, sizeof(dir), "%s/runs/%s", tiny_run_dir(), run_a);
    int na = tiny_run_step_losses(dir, a, 64);
    snprintf(dir, sizeof(dir), "%s/runs/%s", tiny_run_dir(), run_b);
    int nb = tiny_run_step_losses(dir, b, 64);
    EXPECT(na == steps && nb == steps, "%s logged %d steps, %s %d, expected %d", run_a, na, run_b, nb, steps);
    for (int i = 0; i < steps; i++) {
        double x = atof(a[i]), y = atof(b[i]);
        EXPECT(fabs(x - y) <= rel * fabs(x), "step %d: loss %s (%s) vs %s (%s)", i + 1, a[i], run_a, b[i], run_b);
    }
}

TEST(dist_two_and_three_ranks_follow_one_process) {
    if (!have_mpirun()) SKIP("needs mpirun (Debian's openmpi-bin, which make test installs as root)");
    char out[16384];
    int code = train(0, "one", 10, out, sizeof(out));
    EXPECT(code == 0, "1 process exited %d:\n%s", code, out);
    code = train(2, "two", 10, out, sizeof(out));
    EXPECT(code == 0, "2 ranks exited %d:\n%s", code, out);
    code = train(3, "three", 10, out, sizeof(out));
    EXPECT(code == 0, "3 ranks exited %d:\n%s", code, out);
    expect_same_losses("one", "two", 10, 1e-5);
    expect_same_losses("one", "three", 10, 1e-5);
    double d2 = checkpoint_difference("one", "two"), d3 = checkpoint_difference("one", "three");
    EXPECT(d2 <= STATE_DRIFT_MAX && d3 <= STATE_DRIFT_MAX, "after 10 steps the weights, moments and EMA differ from 1 process by %.2e "
           "(2 ranks) and %.2e (3 ranks)", d2, d3);
}

TEST(dist_two_runs_on_two_ranks_are_bit_identical) {
    if (!have_mpirun()) SKIP("needs mpirun (Debian's openmpi-bin, which make test installs as root)");
    char out[16384];
    int code = train(2, "twice_a", 10, out, sizeof(out));
    EXPECT(code == 0, "exited %d:\n%s", code, out);
    code = train(2, "twice_b", 10, out, sizeof(out));
    EXPECT(code == 0, "exited %d:\n%s", code, out);
    expect_same_losses("twice_a", "twice_b", 10, 0);
    double d = checkpoint_difference("twice_a", "twice_b");
    EXPECT(d == 0, "two 2-rank runs differ by %.2e", d);
}

/* 2 ranks stop at step 4 (mid-epoch: 6 steps per epoch), 3 ranks resume to step 10 */
TEST(dist_checkpoint_of_two_ranks_resumes_on_three) {
    if (!have_mpirun()) SKIP("needs mpirun (Debian's openmpi-bin, which make test installs as root)");
    char out[16384];
    int code = train(0, "straight", 10, out, sizeof(out));
    EXPECT(code == 0, "exited %d:\n%s", code, out);
    code = train(2, "moved", 4, out, sizeof(out));
    EXPECT(code == 0, "exited %d:\n%s", code, out);
    code = run(out, sizeof(out), MPIRUN "3 ./train --resume %s/runs/moved/last.safetensors "
               "--set run.stop_after_steps=10 --quiet", tiny_run_dir());
    EXPECT(code == 0, "the resume on 3 ranks exited %d:\n%s", code, out);
    expect_same_losses("straight", "moved", 10, 1e-5);
    double d = checkpoint_difference("straight", "moved");
    EXPECT(d <= STATE_DRIFT_MAX, "resumed on 3 ranks, the state differs from 1 process by %.2e", d);
}

TEST(dist_killed_rank_ends_the_job_and_the_checkpoint_resumes) {
    if (!have_mpirun()) SKIP("needs mpirun (Debian's openmpi-bin, which make test installs as root)");
    char out[16384];
    const char *dir = tiny_run_dir();
    /* a long run; rank 1 is killed once a few step checkpoints exist */
    int code = run(out, sizeof(out),
                   MPIRUN "2 ./train --config %s/tiny.json --out %s/runs --set run.name=rank_killed --set train.epochs=400 "
                   "--set run.save_every_steps=5 --quiet & mpi=$!; "
                   "while [ $(cat %s/runs/rank_killed/metrics.jsonl 2>/dev/null | wc -l) -lt 40 ] && kill -0 $mpi; "
                   "do sleep 0.05; done; killed=no; "
                   "for p in $(pgrep -P $mpi); do grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/$p/environ && "
                   "kill -9 $p && killed=yes; done; "
                   "start=$(date +%%s); wait $mpi; status=$?; end=$(date +%%s); "
                   "echo \"rank 1 killed: $killed; mpirun exit $status after $((end - start)) s\"; "
                   "[ $killed = yes ] && [ $status -ne 0 ] && [ $((end - start)) -le 30 ]",
                   dir, dir, dir);
    EXPECT(code == 0, "a killed rank must end the job non-zero within 30 s:\n%s", out);
    /* on 1 process, to 5 steps past the last one the killed job logged */
    code = run(out, sizeof(out), "m=%s/runs/rank_killed/metrics.jsonl; "
               "last=$(grep -o '\"step\": [0-9]*' $m | tail -n 1 | grep -o '[0-9]*$'); "
               "./train --resume %s/runs/rank_killed/last.safetensors --set run.stop_after_steps=$((last + 5)) --quiet && "
               "tail -n 1 $m | grep -o '\"step\": [0-9]*' | grep -qx \"\\\"step\\\": $((last + 5))\"",
               dir, dir);
    EXPECT(code == 0, "1 process resumes the checkpoint of the killed job and goes on (exit %d):\n%s", code, out);
}

/* evaluation under mpirun: every rank takes part of every batch (uneven parts: batches of 5 over 2
 * and 3 ranks, the last batch 2 images), and the counts add up to the 1-process result exactly,
 * ImageNet-ReaL's too (the 12 images renamed as ImageNet's validation files, with label sets of
 * their own) */
TEST(dist_sharded_evaluation_counts_as_one_process) {
    if (!have_mpirun()) SKIP("needs mpirun (Debian's openmpi-bin, which make test installs as root)");
    char out[16384], lines[3][512], real[3][256];
    int code = train(0, "judged", 12, out, sizeof(out));
    EXPECT(code == 0, "exited %d:\n%s", code, out);
    const char *dir = tiny_run_dir();
    code = run(out, sizeof(out),
               "for c in 0 1 2; do mkdir -p %s/dist_real/c$c; for i in 0 1 2 3; do cp "
               "%s/val/c$c/00$i.png $(printf %s/dist_real/c$c/ILSVRC2012_val_%%08d.JPEG $((4 * c + "
               "i + 1))); done; done && echo '[[0], [], [1, 2], [2], [1], [0, 1], [], [2], [0], "
               "[1], [2, 0], [2]]' > %s/dist_real.json",
               dir, dir, dir, dir);
    EXPECT(code == 0, "exited %d:\n%s", code, out);
    for (int ranks = 1; ranks <= 3; ranks++) {
        char launcher[160] = "";
        if (ranks > 1) snprintf(launcher, sizeof(launcher), MPIRUN "%d ", ranks);
        code = run(out, sizeof(out),
                   "%s./eval --ckpt %s/runs/judged/last.safetensors --batch 5 --data %s/dist_real "
                   "--real-labels %s/dist_real.json",
                   launcher, dir, dir, dir);
        EXPECT(code == 0 && strstr(out, "top-1") && strstr(out, "ReaL labels of "),
               "eval on %d ranks exited %d:\n%s", ranks, code, out);
        snprintf(real[ranks - 1], sizeof(real[0]), "%.250s",
                 strstr(out, "ReaL labels of ") ? strstr(out, "ReaL labels of ") : "");
        /* the line without its throughput */
        char *comma = strstr(out, " images, ");
        if (comma) *comma = 0;
        snprintf(lines[ranks - 1], sizeof(lines[0]), "%.500s", out);
    }
    EXPECT(!strcmp(lines[0], lines[1]) && !strcmp(lines[0], lines[2]), "1 process: %s\n2 ranks: %s\n3 ranks: %s",
           lines[0], lines[1], lines[2]);
    EXPECT(!strcmp(real[0], real[1]) && !strcmp(real[0], real[2]) &&
               strstr(real[0], "(10 of the 12 images labelled)"),
           "1 process: %s\n2 ranks: %s\n3 ranks: %s", real[0], real[1], real[2]);
    EXPECT(strstr(lines[0], "(12"), "all 12 validation images: %s", lines[0]);
}

/* the same bad input on every rank: one message, a non-zero exit */
TEST(dist_bad_input_is_reported_once) {
    if (!have_mpirun()) SKIP("needs mpirun (Debian's openmpi-bin, which make test installs as root)");
    char out[16384];
    int code = run(out, sizeof(out), MPIRUN "2 ./train --config %s --out %s/runs --set run.name=dist_bad "
                   "--set data.train='\"%s/nowhere\"' --quiet", tiny_run_config(), tiny_run_dir(), tiny_run_dir());
    int errors = 0;
    for (const char *p = out; (p = strstr(p, "error: ")); p++) errors++;
    EXPECT(code != 0 && errors == 1 && strstr(out, "nowhere"), "exit %d, %d error lines:\n%s", code, errors, out);
    code = run(out, sizeof(out), MPIRUN "3 ./train --config %s --out %s/runs --set run.name=dist_bad --quiet "
               "--set train.batch=7", tiny_run_config(), tiny_run_dir());
    errors = 0;
    for (const char *p = out; (p = strstr(p, "error: ")); p++) errors++;
    EXPECT(code != 0 && errors == 1 && strstr(out, "must divide among the 3 processes"), "exit %d, %d error lines:\n%s",
           code, errors, out);
}

/* a rank whose part of a batch is all unreadable files adds no gradient, and the job goes on (its
 * empty batch reached the model: "tensor dim 0 has size 0", and the job ended) */
TEST(dist_rank_without_a_readable_file_sits_the_step_out) {
    if (!have_mpirun())
        SKIP("needs mpirun (Debian's openmpi-bin, which make test installs as root)");
    char out[16384], list[400], metrics[600];
    snprintf(list, sizeof(list), "%s/half_unreadable.txt", tiny_run_dir());
    FILE *f = fopen(list, "w");
    fprintf(f, "train/c0/000.png 0\nnone.png 2\n"); /* one file a rank at batch 2 */
    fclose(f);
    int code =
        run(out, sizeof(out),
            MPIRUN
            "2 ./train --config %s --out %s/runs --set run.name=half "
            "--set data.train=%s --set data.val= --set train.batch=2 --set train.epochs=2 --quiet",
            tiny_run_config(), tiny_run_dir(), list);
    snprintf(metrics, sizeof(metrics), "%s/runs/half/metrics.jsonl", tiny_run_dir());
    char lines[2048] = "";
    run(lines, sizeof(lines), "grep -c '\"type\": \"epoch\"' %s", metrics);
    EXPECT(code == 0 && atoi(lines) == 2 && !strstr(out, "no update"),
           "exit %d, %s epoch lines:\n%s", code, lines, out);
}
