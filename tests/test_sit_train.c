/* train.task "diffusion" end to end on the tiny image set (3 classes of 16x16 grey): a tiny
 * mediator SiT's transport loss falls over 30 steps, a resumed run continues the exact trajectory,
 * validation logs val_loss, and ./sample writes a grid of the right size; the same for DiT's DDPM
 * (model.arch "dit"). */
#include <math.h>
#include <stb_image.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/safetensors.h"
#include "shell.h"
#include "test.h"
#include "tiny_run.h"

static const char *sit_settings(void) {
    static char s[1024];
    const char *w = tiny_run_dir();
    snprintf(s, sizeof(s),
             "--config configs/tiny/sit_mediator.json --set data.train=%s/train --set data.val=%s/val "
             "--set data.workers=2 --set model.in_chans=1 --set model.img_size=16 --set model.num_classes=3 "
             "--set model.class_dropout_prob=0.1 --set train.batch=6 --set train.epochs=5 --set train.lr=3e-3 "
             "--set train.min_lr=3e-3 --set train.lr_scale_batch=0 --set train.warmup_epochs=0 "
             "--set train.weight_decay=0 --set ema.enabled=true --set ema.decay=0.9 --set run.log_every=1 "
             "--out %s/runs --threads 2 --quiet",
             w, w, w);
    return s;
}

static double mean_of(char losses[][32], int from, int n) {
    double s = 0;
    for (int i = from; i < from + n; i++) s += atof(losses[i]);
    return s / n;
}

TEST(sit_train_loss_falls_resume_is_exact_and_sample_writes_a_grid) {
    const char *work = tiny_run_dir();
    char out[16384], dir[400], full[64][32], resumed[64][32];
    int code = run(out, sizeof(out), "./train %s --set run.name=sit_full", sit_settings());
    EXPECT(code == 0, "train exited %d:\n%s", code, out);
    snprintf(dir, sizeof(dir), "%s/runs/sit_full", work);
    int n = tiny_run_step_losses(dir, full, 64);
    EXPECT(n == 30, "%d step lines (5 epochs of 6 steps)", n);
    for (int i = 0; i < n; i++) EXPECT(atof(full[i]) > 0 && atof(full[i]) < 10, "step %d loss %s", i + 1, full[i]);
    /* t is drawn per sample, so single steps are noisy: the last 5 against the first 5 */
    EXPECT(mean_of(full, n - 5, 5) < 0.8 * mean_of(full, 0, 5), "loss did not fall: %.4f -> %.4f",
           mean_of(full, 0, 5), mean_of(full, n - 5, 5));
    code = run(out, sizeof(out), "grep '\"type\": \"epoch\"' %s/metrics.jsonl | tail -1", dir);
    EXPECT(code == 0 && strstr(out, "\"val_loss\": ") && strstr(out, "\"ema_val_loss\": ") && !strstr(out, "top1"),
           "epoch line: %s", out);
    code = run(out, sizeof(out), "grep -c '\"best_val_loss\"' %s/metrics.jsonl", dir);
    EXPECT(code == 0 && atoi(out) == 1, "end line: %s", out);
    /* eval draws the same (t, noise) per validation image as training's validation (seed 0) */
    code = run(out, sizeof(out), "grep '\"type\": \"epoch\"' %s/metrics.jsonl | tail -1 | sed -E 's/.*\"val_loss\": ([0-9.e+-]+).*/\\1/'", dir);
    double logged = atof(out);
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --data %s/val --batch 5", dir, work);
    char *p = strstr(out, "transport loss ");
    EXPECT(code == 0 && p && fabs(atof(p + 15) - logged) < 1e-3 * logged, "eval: %s (logged val_loss %g)", out, logged);

    code = run(out, sizeof(out), "./train %s --set run.name=sit_part --set run.stop_after_steps=9", sit_settings());
    EXPECT(code == 0 && strstr(out, "stopping at step 9"), "stopped run exited %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train --resume %s/runs/sit_part/last.safetensors --set run.stop_after_steps=0 "
               "--threads 2 --quiet", work);
    EXPECT(code == 0, "resumed run exited %d:\n%s", code, out);
    snprintf(dir, sizeof(dir), "%s/runs/sit_part", work);
    int nr = tiny_run_step_losses(dir, resumed, 64);
    EXPECT(nr == n, "%d and %d step lines", n, nr);
    for (int i = 0; i < n && i < nr; i++)
        EXPECT(!strcmp(full[i], resumed[i]), "step %d: %s uninterrupted vs %s resumed", i + 1, full[i], resumed[i]);
    code = run(out, sizeof(out), "sed -E 's/, \"(img_s|time_s|train_img_s)\": [0-9.e+-]+//g' %s/runs/sit_full/metrics.jsonl"
               " > %s/a.jsonl && sed -E 's/, \"(img_s|time_s|train_img_s)\": [0-9.e+-]+//g' %s/metrics.jsonl > %s/b.jsonl"
               " && diff %s/a.jsonl %s/b.jsonl", work, work, dir, work, work, work);
    EXPECT(code == 0, "metrics (val_loss included) differ after the resume:\n%s", out);

    const struct {
        const char *args;
        int w, h;
    } grids[] = {{"--n 4 --steps 5", 64, 48}, {"--class 2 --n 3 --steps 4 --sampler ode --cfg 2 --ema", 48, 16},
                 {"--class 0 --n 2 --steps 3 --sampler heun --seed 5", 32, 16}};
    for (int i = 0; i < 3; i++) {
        code = run(out, sizeof(out), "./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/grid.png %s --threads 2",
                   work, work, grids[i].args);
        EXPECT(code == 0 && strstr(out, "wrote"), "sample %s exited %d:\n%s", grids[i].args, code, out);
        char png[400];
        snprintf(png, sizeof(png), "%s/grid.png", work);
        int w = 0, h = 0, ch = 0;
        EXPECT(stbi_info(png, &w, &h, &ch) && w == grids[i].w && h == grids[i].h && ch == 1, "%s: %s is %dx%dx%d",
               grids[i].args, png, w, h, ch);
    }
    /* class 2's row is the same whether one class or all are drawn */
    code = run(out, sizeof(out), "./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/all.png --n 2 --steps 4 "
               "--threads 2 && ./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/one.png --class 2 --n 2 "
               "--steps 4 --threads 2", work, work, work, work);
    EXPECT(code == 0, "exit %d:\n%s", code, out);
    char p1[400], p2[400];
    snprintf(p1, sizeof(p1), "%s/all.png", work), snprintf(p2, sizeof(p2), "%s/one.png", work);
    int w1, h1, c1, w2, h2, c2;
    unsigned char *all = stbi_load(p1, &w1, &h1, &c1, 1), *one = stbi_load(p2, &w2, &h2, &c2, 1);
    EXPECT(all && one && w1 == 32 && h1 == 48 && w2 == 32 && h2 == 16 && !memcmp(all + 32 * 32, one, 32 * 16),
           "class 2's row differs");
    stbi_image_free(all), stbi_image_free(one);
    const struct {
        const char *args, *message;
        int code;
    } bad[] = {{"--class 3", "--class 3: the model has classes 0 to 2", 2},
               {"--sampler dopri5", "--sampler dopri5: expected sde, ode, heun or ddpm", 2},
               {"--steps 1", "--steps 1: expected an integer >= 2", 2},
               {"--cfg 1e308", "--cfg 1e308: expected a guidance scale from 0 to 1000", 2},
               {"--sampler ddpm", "--sampler ddpm: model.arch \"sit\" samples with sde, ode or heun", 2}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        code = run(out, sizeof(out), "./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/x.png %s", work,
                   work, bad[i].args);
        EXPECT(code == bad[i].code && strstr(out, bad[i].message), "%s: exit %d:\n%s", bad[i].args, code, out);
    }
    /* the mediator schedule over two copies of one network: it switches after the K = 3 calibrating
     * steps (ratio 1000) and draws what the network alone draws */
    code = run(out, sizeof(out), "./sample --ckpts %s/runs/sit_full/last.safetensors,%s/runs/sit_full/last.safetensors "
               "--switch-ratios 1000 --out %s/sched.png --class 1 --n 2 --steps 8 --threads 2 && ./sample --ckpt "
               "%s/runs/sit_full/last.safetensors --out %s/alone.png --class 1 --n 2 --steps 8 --threads 2",
               work, work, work, work, work);
    EXPECT(code == 0 && strstr(out, "class 1: network 1, network 2 from step 5 (of 8)") &&
           strstr(out, "network evaluations: 5 3"), "exit %d:\n%s", code, out);
    snprintf(p1, sizeof(p1), "%s/sched.png", work), snprintf(p2, sizeof(p2), "%s/alone.png", work);
    unsigned char *sched = stbi_load(p1, &w1, &h1, &c1, 1), *alone = stbi_load(p2, &w2, &h2, &c2, 1);
    EXPECT(sched && alone && w1 == w2 && h1 == h2 && !memcmp(sched, alone, (size_t)w1 * h1), "schedule differs");
    stbi_image_free(sched), stbi_image_free(alone);
    const struct {
        const char *args, *message;
    } bad_sched[] = {{"--switch-ratios 0.5 --sampler ode", "switches in the SDE sampler only"},
                     {"", "--ckpts needs --switch-ratios with 1 ratio"},
                     {"--switch-ratios 0.5,0.2", "--switch-ratios 0.5,0.2: expected 1 positive number"},
                     {"--switch-ratios 0.5 --switch-distance l2", "--switch-distance l2: expected mae or mse"}};
    for (int i = 0; i < 4; i++) {
        code = run(out, sizeof(out), "./sample --ckpts %s/runs/sit_full/last.safetensors,%s/runs/sit_full/last.safetensors "
                   "--out %s/x.png %s", work, work, work, bad_sched[i].args);
        EXPECT(code == 2 && strstr(out, bad_sched[i].message), "%s: exit %d:\n%s", bad_sched[i].args, code, out);
    }
    code = run(out, sizeof(out), "./sample --ckpts %s/runs/sit_full/last.safetensors --out %s/x.png", work, work);
    EXPECT(code == 2 && strstr(out, "expected 2 or 3 checkpoint paths"), "one path: exit %d:\n%s", code, out);
    /* --jsd: a native-attention SiT's redundancy at every evaluation, layer and head, and its plot */
    code = run(out, sizeof(out), "./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/x.png --jsd %s/r.csv",
               work, work, work);
    EXPECT(code == 2 && strstr(out, "--jsd: the score reads softmax attention; block 0"), "exit %d:\n%s", code, out);
    bool plots = run(out, sizeof(out), "command -v gnuplot") == 0;
    if (!plots) printf("    the --jsd plot is left out: gnuplot is not installed (apt-get install gnuplot-nox)\n");
    char plot[400] = "";
    if (plots) snprintf(plot, sizeof(plot), " && tools/plot.sh --jsd %s/r.csv --out %s/plot", work, work);
    code = run(out, sizeof(out), "./train %s --set run.name=sit_native --set model.attn=native --set train.epochs=1 && "
               "./sample --ckpt %s/runs/sit_native/last.safetensors --out %s/x.png --n 2 --steps 5 --jsd %s/r.csv "
               "--threads 2%s", sit_settings(), work, work, work, plot);
    EXPECT(code == 0 && strstr(out, "at 5 network evaluations") && strstr(out, "wrote"), "exit %d:\n%s", code, out);
    char csv[400];
    snprintf(csv, sizeof(csv), "%s/r.csv", work);
    FILE *f = fopen(csv, "r");
    EXPECT(f, "%s missing", csv);
    char line[256];
    int rows = 0, bad_rows = 0;
    while (fgets(line, sizeof(line), f)) {
        int e, layer, head, images;
        double t, red;
        if (line[0] == '#' || !strncmp(line, "eval,", 5)) continue;
        rows++;
        bad_rows += sscanf(line, "%d,%lf,%d,%d,%lf,%d", &e, &t, &layer, &head, &red, &images) != 6 || !(red >= 0 && red <= 1) ||
                    images != 6;
    }
    fclose(f);
    EXPECT(rows == 5 * 2 * 2 && bad_rows == 0, "%d rows (want 5 evaluations x 2 layers x 2 heads), %d bad", rows, bad_rows);
    if (plots) {
        code = run(out, sizeof(out), "test -s %s/plot_jsd.png", work);
        EXPECT(code == 0, "no plot");
    }
    /* --judge with a tiny classifier of the same 3 classes: the share classified as their class and
     * the Frechet distance to the 12 real validation images */
    code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=judge_clf --set train.epochs=1 "
               "--threads 2 --quiet && ./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/x.png --n 4 --steps 4 "
               "--judge %s/runs/judge_clf/last.safetensors", tiny_run_config(), work, work, work, work);
    double share = -1, fd = -1;
    const char *share_at = strstr(out, "% of 12 samples classified as their class");
    const char *fd_line = strstr(out, "to 12 real images of ");
    if (share_at) {
        while (share_at > out && share_at[-1] != ' ') share_at--;
        share = atof(share_at);
    }
    if (fd_line && (fd_line = strstr(fd_line, ": "))) fd = atof(fd_line + 2);
    EXPECT(code == 0 && share >= 0 && share <= 100 && fd > 0 && isfinite(fd), "exit %d (share %g, FD %g):\n%s", code,
           share, fd, out);
    code = run(out, sizeof(out), "./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/x.png --n 2 --steps 3 "
               "--judge %s/runs/sit_full/last.safetensors", work, work, work);
    /* a wrong judge stops the run before it samples (no grid written) */
    EXPECT(code == 1 && strstr(out, "is not a classifier of 1-channel images") &&
               !strstr(out, "wrote "),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/x.png --n 2 --steps 3 "
               "--judge %s/runs/judge_clf/last.safetensors --judge-real %s/nowhere", work, work, work, work);
    EXPECT(code == 1 && strstr(out, "--judge-real: ") && strstr(out, "nowhere") &&
               !strstr(out, "wrote "),
           "exit %d:\n%s", code, out);
    /* a classifier of other classes (one class folder renamed: c2 takes label 1) would count
     * samples of one class as another's */
    code =
        run(out, sizeof(out),
            "mkdir -p %s/other && cp -r %s/train/c0 %s/train/c2 %s/other && "
            "cp -r %s/train/c1 %s/other/d1 && ./train --config %s --out %s/runs --set "
            "run.name=other_clf "
            "--set data.train=%s/other --set data.val= --set train.epochs=1 --threads 2 --quiet && "
            "./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/x.png --n 2 --steps 3 "
            "--judge %s/runs/other_clf/last.safetensors",
            work, work, work, work, work, work, tiny_run_config(), work, work, work, work, work);
    EXPECT(code == 1 &&
               strstr(out, "other_clf/last.safetensors does not classify the model's classes: "
                           "its class 1 is 'c2', the model's 'c1'") &&
               !strstr(out, "wrote "),
           "exit %d:\n%s", code, out);
    /* nor do two networks of other classes share a schedule */
    code = run(out, sizeof(out),
               "./train %s --set run.name=other_sit --set data.train=%s/other --set data.val= "
               "--set train.epochs=1 && ./sample --ckpts "
               "%s/runs/sit_full/last.safetensors,%s/runs/other_sit/"
               "last.safetensors --switch-ratios 0.5 --out %s/x.png --n 2 --steps 3",
               sit_settings(), work, work, work, work);
    EXPECT(code == 1 && strstr(out, "other_sit/last.safetensors does not sample the classes") &&
               strstr(out, "its class 1 is 'c2', the model's 'c1'"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./sample --ckpt %s/runs/sit_full/last.safetensors --out %s/x.png --switch-ratios 0.5",
               work, work);
    EXPECT(code == 2 && strstr(out, "--switch-ratios needs --ckpts"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./sample --ckpts %s/runs/sit_full/last.safetensors,%s/runs/sit_full/last.safetensors "
               "--switch-ratios 0.5 --out %s/x.png --jsd %s/r.csv", work, work, work, work);
    EXPECT(code == 2 && strstr(out, "--jsd reads one network's attention"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train %s --set run.name=bad --set aug.mixup=0.8", sit_settings());
    EXPECT(code == 1 && strstr(out, "aug.mixup") && strstr(out, "mixes no images"), "mixup: exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train %s --set run.name=bad --set train.task=classify", sit_settings());
    EXPECT(code == 1 && strstr(out, "train.task"), "classify a SiT: exit %d:\n%s", code, out);
}

/* train.init for a diffusion run: as the Attention Mediators' resolution fine-tune
 * (train_256to512.py), the weights and the EMA each from the checkpoint's, the agent biases
 * resized with align_corners=True, the fixed pos_embed the new model's own */
TEST(sit_fine_tunes_from_a_checkpoint_as_the_mediators_do) {
    const char *work = tiny_run_dir();
    char out[16384];
    /* at lr 0 and an EMA decay of 1 the fine-tuned run's weights and EMA stay the checkpoint's */
    const char *still = "--set train.lr=0 --set train.min_lr=0 --set train.warmup_lr=0 --set "
                        "ema.decay=1 --set ema.warmup=false --set run.stop_after_steps=1";
    int code = run(out, sizeof(out),
                   "./train %s --set run.name=sit_base --set run.stop_after_steps=3 && ./train %s "
                   "--set run.name=sit_tuned --set train.init=%s/runs/sit_base/last.safetensors %s",
                   sit_settings(), sit_settings(), work, still);
    EXPECT(code == 0 && strstr(out, "note: train.init: the EMA starts from the checkpoint's\n"),
           "exit %d:\n%s", code, out);
    char runs[300], err[512];
    snprintf(runs, sizeof(runs), "%s/runs", work);
    st_file base, tuned;
    bool read = tiny_run_read_pair(runs, "sit_base", "sit_tuned", &base, &tuned, err, sizeof(err));
    EXPECT(read, "%s", err);
    if (read) {
        int equal, weights, ema_equal, ema;
        tiny_run_compare(&base, "", &tuned, "", 0, &equal, &weights);
        tiny_run_compare(&base, "ema.", &tuned, "ema.", 0, &ema_equal, &ema);
        EXPECT(weights == 0 && ema == 0 && equal > 20 && ema_equal == equal,
               "%d parameters, %d EMA tensors differ from the checkpoint's", weights, ema);
        st_close(&tuned), st_close(&base);
    }
    /* 16 -> 32 pixels: 8 -> 16 patches a side */
    code = run(out, sizeof(out),
               "./train %s --set run.name=sit_larger --set model.img_size=32 --set "
               "train.init=%s/runs/sit_base/last.safetensors %s",
               sit_settings(), work, still);
    EXPECT(code == 0 &&
               strstr(out, "note: train.init: pos_embed: the model's own for its grid (fixed, not "
                           "trained); blocks.0.attn.ah_bias and 7 more agent biases resized from 8 "
                           "to 16 (linear, corners aligned); the EMA starts from the checkpoint's"),
           "exit %d:\n%s", code, out);
}

/* model.arch "dit": DiT's loss falls, eval reports it, ./sample draws with DDPM (guided, respaced)
 * and refuses SiT's samplers and the mediator schedule */
TEST(dit_trains_evaluates_and_samples_with_ddpm) {
    const char *work = tiny_run_dir();
    char out[16384], dir[400], losses[64][32];
    int code = run(out, sizeof(out), "./train %s --set model.arch=dit --set run.name=dit", sit_settings());
    EXPECT(code == 0, "train exited %d:\n%s", code, out);
    snprintf(dir, sizeof(dir), "%s/runs/dit", work);
    int n = tiny_run_step_losses(dir, losses, 64);
    EXPECT(n == 30, "%d step lines", n);
    EXPECT(mean_of(losses, n - 5, 5) < 0.8 * mean_of(losses, 0, 5), "loss did not fall: %.4f -> %.4f",
           mean_of(losses, 0, 5), mean_of(losses, n - 5, 5));
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --data %s/val --batch 5", dir, work);
    EXPECT(code == 0 && strstr(out, "diffusion loss "), "eval: exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./sample --ckpt %s/last.safetensors --out %s/dit.png --n 3 --steps 6 --cfg 2 --ema "
               "--threads 2", dir, work);
    char png[400];
    snprintf(png, sizeof(png), "%s/dit.png", work);
    int w = 0, h = 0, ch = 0;
    EXPECT(code == 0 && strstr(out, "(ddpm, 6 steps, cfg 2, EMA)") && stbi_info(png, &w, &h, &ch) && w == 48 &&
               h == 48 && ch == 1, "exit %d, %dx%dx%d:\n%s", code, w, h, ch, out);
    const struct {
        const char *args, *message;
    } bad[] = {{"--sampler sde", "--sampler sde: model.arch \"dit\" samples with ddpm"},
               {"--steps 1001", "--steps 1001: DiT's process has 1000 steps"}};
    for (int i = 0; i < 2; i++) {
        code = run(out, sizeof(out), "./sample --ckpt %s/last.safetensors --out %s/x.png %s", dir, work, bad[i].args);
        EXPECT(code == 2 && strstr(out, bad[i].message), "%s: exit %d:\n%s", bad[i].args, code, out);
    }
    code = run(out, sizeof(out), "./sample --ckpts %s/last.safetensors,%s/last.safetensors --switch-ratios 0.5 "
               "--out %s/x.png", dir, dir, work);
    EXPECT(code == 2 && strstr(out, "switches in SiT's SDE loop"), "--ckpts: exit %d:\n%s", code, out);
}
