/* The train and eval commands end to end on a tiny synthetic dataset: loss falls, resume continues
 * the exact trajectory, and every bad input gives its message and exit code. */
#include <stb_image.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/core/safetensors.h"
#include "shell.h"
#include "test.h"
#include "tiny_run.h"

static const char *work;

static void setup(void) { work = tiny_run_dir(); }

static const char *config_path(void) { return tiny_run_config(); }

TEST(cli_train_loss_falls_and_eval_reports) {
    setup();
    char out[16384];
    int code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=a --threads 2 --quiet --device cpu",
                   config_path(), work);
    EXPECT(code == 0, "train exited %d:\n%s", code, out);
    char losses[64][32];
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/runs/a", work);
    int n = tiny_run_step_losses(dir, losses, 64);
    EXPECT(n == 18, "%d step lines (3 epochs of 6 steps)", n);
    EXPECT(atof(losses[n - 1]) < atof(losses[0]), "loss did not fall: %s -> %s", losses[0], losses[n - 1]);
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --data %s/val", dir, work);
    EXPECT(code == 0 && strstr(out, "top-1") && strstr(out, "(12 images"), "eval exited %d:\n%s", code, out);
    /* a batch larger than the set is the set (it allocated the batch asked for: out of memory) */
    char scores[128] = "";
    if (strstr(out, "top-1")) snprintf(scores, sizeof(scores), "%.*s", 48, strstr(out, "top-1"));
    code = run(out, sizeof(out),
               "./eval --ckpt %s/last.safetensors --data %s/val --batch 1000000000", dir, work);
    EXPECT(code == 0 && scores[0] && strstr(out, scores),
           "eval --batch 1000000000 exited %d (want %s):\n%s", code, scores, out);
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --ema", dir);
    EXPECT(code == 0 && strstr(out, "(EMA)"), "eval --ema exited %d:\n%s", code, out);
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --image %s/val/c1/000.png", dir, work);
    EXPECT(code == 0 && strstr(out, "(class ") && strstr(out, "c1"), "eval --image:\n%s", out);
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --image %s/val/c1/000.png --attn-map %s/map.png "
               "--attn-query 3,12", dir, work, work);
    EXPECT(code == 0 && strstr(out, "attention map of block 0 (agent), query cell (0, 3) of 4x4"), "eval --attn-map:\n%s", out);
    char png[400];
    snprintf(png, sizeof(png), "%s/map.png", work);
    int w = 0, h = 0, ch = 0;
    EXPECT(stbi_info(png, &w, &h, &ch) && w == 224 && h == 224 && ch == 3, "%s: %dx%dx%d", png, w, h, ch);
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --image %s/val/c1/000.png --attn-map %s/map.png "
               "--attn-block 1", dir, work, work);
    EXPECT(code == 2 && strstr(out, "--attn-block 1: the model has blocks 0 to 0"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --attn-map %s/map.png", dir, work);
    EXPECT(code == 2 && strstr(out, "need --image"), "exit %d:\n%s", code, out);
    const struct {
        const char *args, *message;
        int code;
    } bad_maps[] = {
        {"--attn-map %s/map.png --attn-query 3", "--attn-query 3: expected X,Y", 2},
        {"--attn-map %s/map.png --attn-query 300,4", "--attn-query 300,4: outside the 16x16 input", 2},
        {"--attn-map %s/map.png --attn-query 99999999999,4", "--attn-query 99999999999,4: expected X,Y", 2},
        {"--attn-map %s/map.png --attn-block -1", "--attn-block -1: expected an integer >= 0", 2},
        {"--attn-block 0", "need --attn-map OUT.png", 2},
        {"--attn-map %s/no_such_dir/map.png", "no_such_dir: No such file or directory", 1},
    };
    for (size_t i = 0; i < sizeof(bad_maps) / sizeof(bad_maps[0]); i++) {
        char args[600];
        snprintf(args, sizeof(args), bad_maps[i].args, work);
        code = run(out, sizeof(out), "./eval --ckpt %s/last.safetensors --image %s/val/c1/000.png %s", dir, work, args);
        EXPECT(code == bad_maps[i].code && strstr(out, bad_maps[i].message), "%s: exit %d:\n%s", args, code, out);
    }
}

TEST(cli_resume_continues_the_exact_trajectory) {
    setup();
    char out[16384], full[64][32], resumed[64][32], dir[400];
    int code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=full --threads 2 --quiet",
                   config_path(), work);
    EXPECT(code == 0, "full run exited %d:\n%s", code, out);
    /* stop mid-epoch 2 (after step 3 of 6), then resume from the saved checkpoint */
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=part --set run.stop_after_steps=3 --threads 2 --quiet",
               config_path(), work);
    EXPECT(code == 0 && strstr(out, "stopping at step 3"), "stopped run exited %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train --resume %s/runs/part/last.safetensors --set run.stop_after_steps=0 --threads 2 --quiet", work);
    EXPECT(code == 0, "resumed run exited %d:\n%s", code, out);
    snprintf(dir, sizeof(dir), "%s/runs/full", work);
    int nf = tiny_run_step_losses(dir, full, 64);
    snprintf(dir, sizeof(dir), "%s/runs/part", work);
    int nr = tiny_run_step_losses(dir, resumed, 64);
    EXPECT(nf == 18 && nr == 18, "%d and %d step lines", nf, nr);
    for (int i = 0; i < nf; i++)
        EXPECT(!strcmp(full[i], resumed[i]), "step %d: %s uninterrupted vs %s resumed", i + 1, full[i], resumed[i]);
    /* another number of steps an epoch would put the checkpoint's step outside its epoch (a
     * segfault, with train.batch halved) */
    code = run(out, sizeof(out),
               "./train --resume %s/runs/full/last.safetensors --set train.batch=3 "
               "--set train.epochs=4 --quiet",
               work);
    EXPECT(code == 1 &&
               strstr(out, "error: --resume: the checkpoint's run took 6 steps an epoch, and "
                           "this one would take 12 (train.batch 3 x train.accum_steps 1"),
           "exit %d:\n%s", code, out);
    /* a finished run resumed says there is nothing left to do */
    code = run(out, sizeof(out), "./train --resume %s/runs/full/last.safetensors --quiet", work);
    EXPECT(code == 0 &&
               strstr(out, "note: the run has finished 3 epochs of 3: nothing left to train"),
           "exit %d:\n%s", code, out);
    /* the run started again without --resume, or resumed from a copy of its checkpoint kept
     * elsewhere, stops before writing over its checkpoints (a new run wrote over them in silence);
     * --overwrite starts over */
    char expect[1200];
    snprintf(expect, sizeof(expect),
             "error: %s/runs/full holds the checkpoints of a run, which this one would write over: "
             "continue it with --resume %s/runs/full/last.safetensors,",
             work, work);
    code = run(out, sizeof(out),
               "cp %s/runs/full/last.safetensors %s/kept.safetensors && ./train --config %s --out "
               "%s/runs --set run.name=full --quiet",
               work, work, config_path(), work);
    EXPECT(code == 1 && strstr(out, expect), "exit %d (want \"%s\"):\n%s", code, expect, out);
    code = run(out, sizeof(out),
               "./train --resume %s/kept.safetensors --set train.epochs=4 --quiet", work);
    EXPECT(code == 1 && strstr(out, expect), "exit %d (want \"%s\"):\n%s", code, expect, out);
    code =
        run(out, sizeof(out), "cmp %s/runs/full/last.safetensors %s/kept.safetensors", work, work);
    EXPECT(code == 0, "the checkpoint changed:\n%s", out);
    /* (and without a validation set, the other run's best is not left to pass for this one's) */
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=full --set train.epochs=1 --set "
               "data.val= --quiet --overwrite && ! cmp -s %s/runs/full/last.safetensors "
               "%s/kept.safetensors && ! test -e %s/runs/full/best.safetensors",
               config_path(), work, work, work, work);
    EXPECT(code == 0, "--overwrite exited %d:\n%s", code, out);
}

/* a run without EMA: eval --ema says so (it said "missing tensor ema.cls_token"), and a resume
 * that turns EMA on starts it from the weights (it stopped on the same message) */
TEST(cli_ema_turned_on_at_resume_starts_from_the_weights) {
    setup();
    char out[16384], ckpt[600];
    int code = run(out, sizeof(out),
                   "./train --config %s --out %s/runs --set run.name=no_ema "
                   "--set ema.enabled=false --set train.epochs=1 --quiet",
                   config_path(), work);
    EXPECT(code == 0, "exit %d:\n%s", code, out);
    snprintf(ckpt, sizeof(ckpt), "%s/runs/no_ema/last.safetensors", work);
    code = run(out, sizeof(out), "./eval --ckpt %s --ema", ckpt);
    EXPECT(code == 1 && strstr(out, "has no EMA weights (its run had ema.enabled false)"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out),
               "./train --resume %s --set ema.enabled=true --set train.epochs=2 --quiet", ckpt);
    EXPECT(code == 0 &&
               strstr(out, "has no EMA weights (its run had ema.enabled false): the EMA starts "
                           "from its weights"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./eval --ckpt %s --ema", ckpt);
    EXPECT(code == 0 && strstr(out, "(EMA) on") && strstr(out, "top-1"), "exit %d:\n%s", code, out);
    /* the metrics log the EMA's top-1 where there is an EMA, validation's where there is a
     * validation set (they logged zeros) */
    code = run(out, sizeof(out),
               "./train --resume %s --set data.val= --set train.epochs=3 --quiet && "
               "grep '\"type\": \"epoch\"' %s/runs/no_ema/metrics.jsonl",
               ckpt, work);
    char *epoch[3] = {strstr(out, "\"epoch\": 1,"), strstr(out, "\"epoch\": 2,"),
                      strstr(out, "\"epoch\": 3,")};
    bool lines = code == 0 && epoch[0] && epoch[1] && epoch[2];
    EXPECT(lines, "exit %d:\n%s", code, out);
    for (int i = 2; lines && i >= 0; i--) { /* each line on its own */
        char *nl = strchr(epoch[i], '\n');
        if (nl) *nl = 0;
    }
    if (lines) {
        EXPECT(strstr(epoch[0], "val_top1") && !strstr(epoch[0], "ema_top1"), "epoch 1: %s",
               epoch[0]);
        EXPECT(strstr(epoch[1], "val_top1") && strstr(epoch[1], "ema_top1"), "epoch 2: %s",
               epoch[1]);
        EXPECT(!strstr(epoch[2], "val_") && !strstr(epoch[2], "ema_"), "epoch 3: %s", epoch[2]);
    }
}

/* kill -9 at random moments of a run with step checkpoints, resumed each time until it ends: the
 * metrics.jsonl equals the uninterrupted run's line for line, timings aside (epoch train losses
 * over all their steps included). A kill lands once the log has grown a random number of lines, so
 * it falls between checkpoints, with steps logged that the resumed run must take back. */
TEST(cli_kill_9_then_resume_logs_the_uninterrupted_metrics) {
    setup();
    char out[16384];
    const char *strip_timing = "sed -E 's/, \"(img_s|time_s|train_img_s)\": [0-9.e+-]+//g'";
    const char *settings = "--set train.epochs=4 --set train.batch=2 --set run.save_every_steps=20 --threads 2 --quiet";
    int code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=steady %s", config_path(), work,
                   settings);
    EXPECT(code == 0, "uninterrupted run exited %d:\n%s", code, out);
    rng r;
    rng_seed(&r, (uint64_t)getpid(), RNG_TEST);
    char dir[400], kills_at[256] = "";
    snprintf(dir, sizeof(dir), "%s/runs/killed", work);
    int kills = 0;
    for (int attempt = 0; attempt < 20; attempt++) {
        int more_lines = 1 + (int)rng_below(&r, 30);
        code = run(out, sizeof(out),
                   "log=%s/metrics.jsonl; lines() { cat $log 2>/dev/null | wc -l; }; target=$(( $(lines) + %d )); "
                   "if [ -f %s/last.safetensors ]; then ./train --resume %s/last.safetensors --threads 2 --quiet & "
                   "else ./train --config %s --out %s/runs --set run.name=killed %s & fi; pid=$!; "
                   "while [ $(lines) -lt $target ] && kill -0 $pid 2>/dev/null; do :; done; "
                   "kill -9 $pid 2>/dev/null; wait $pid",
                   dir, more_lines, dir, dir, config_path(), work, settings);
        size_t len = strlen(kills_at);
        snprintf(kills_at + len, sizeof(kills_at) - len, "%s+%d lines (exit %d)", attempt ? ", " : "", more_lines,
                 code);
        if (code != 137) break;
        kills++;
    }
    EXPECT(code == 0 && kills >= 2, "kills at %s: the run was killed %d times, then exited %d:\n%s", kills_at, kills,
           code, out);
    code = run(out, sizeof(out), "%s %s/runs/steady/metrics.jsonl > %s/steady.jsonl && %s %s/metrics.jsonl > "
               "%s/killed.jsonl && diff %s/steady.jsonl %s/killed.jsonl", strip_timing, work, work, strip_timing, dir,
               work, work, work);
    EXPECT(code == 0, "kills at %s: metrics differ from the uninterrupted run:\n%s", kills_at, out);
}

TEST(cli_bad_inputs_name_the_problem) {
    setup();
    char out[16384], path[400];
    struct {
        const char *args, *message;
        int code;
    } cases[] = {
        {"--set model.colour=1", "model.colour: unknown key", 1},
        {"--set train.lr=-1", "train.lr: -1 is out of range", 1},
        {"--set train.lr=fast", "train.lr: expected a number, got \"fast\"", 1},
        {"--set aug.mixup_prob=1.5", "aug.mixup_prob: 1.5 is out of range", 1},
        {"--set train.batch=0", "train.batch: 0 is out of range", 1},
        {"--set model.attn=fast", "model.attn: unknown attention \"fast\"", 1},
        {"--set model.agent_num=[5]", "model.agent_num[0]: 5 is not a perfect square", 1},
        {"--set data.train=/nonexistent/train", "/nonexistent/train", 1},
        {"--bogus", "unknown or incomplete argument '--bogus'", 2},
        {"--device tpu", "--device tpu: expected cpu, cuda or cuda:N", 2},
        {"--device cuda:4294967296", "--device cuda:4294967296: expected cpu, cuda or cuda:N", 2},
        {"--set 'aug.randaugment=\"rand-n99999-m9-inc1\"'", "(n at most 16;", 1},
        /* a run in a folder other than --out's */
        {"--set run.name=../elsewhere", "run.name: \"../elsewhere\" is not a folder name", 1},
        {"--set run.name=a/b", "run.name: \"a/b\" is not a folder name", 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=bad %s --quiet",
                       config_path(), work, cases[i].args);
        EXPECT(code == cases[i].code && strstr(out, cases[i].message),
               "%s: exit %d (want %d), output:\n%s", cases[i].args, code, cases[i].code, out);
    }
    snprintf(path, sizeof(path), "%s/broken.json", work);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"model\": {\"name\": \"deit_t\",\n \"img_size\": }}");
    fclose(f);
    int code = run(out, sizeof(out), "./train --config %s", path);
    EXPECT(code == 1 && strstr(out, "broken.json: invalid JSON near line 2"), "exit %d:\n%s", code, out);
    f = fopen(path, "w");
    fprintf(f, "{\"model\": {\"name\": \"deit_x\"}}");
    fclose(f);
    code = run(out, sizeof(out), "./train --config %s", path);
    EXPECT(code == 1 && strstr(out, "model.name: unknown model \"deit_x\" (valid: deit_t"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train");
    EXPECT(code == 2 && strstr(out, "--config is required"), "exit %d:\n%s", code, out);
    char many[17 * 420] = "";
    for (int i = 0; i < 17; i++) snprintf(many + strlen(many), sizeof(many) - strlen(many), " --config %s", path);
    code = run(out, sizeof(out), "./train%s", many);
    EXPECT(code == 2 && strstr(out, "at most 16 config files"), "17 --config: exit %d:\n%s", code, out);
    char sets[257 * 12 + 1] = ""; /* 257 of " --set a.b=1" */
    for (int i = 0; i < 257; i++) strcat(sets, " --set a.b=1");
    code = run(out, sizeof(out), "./train --config %s%s", path, sets);
    EXPECT(code == 2 && strstr(out, "error: --set a.b=1: at most 256 overrides"), "257 --set: exit %d:\n%s",
           code, out);
    code = run(out, sizeof(out), "./train --config configs");
    EXPECT(code == 1 && strstr(out, "cannot read config file configs: is a directory"), "exit %d:\n%s", code, out);
}

TEST(cli_bad_data_and_checkpoints) {
    setup();
    char out[16384], path[600];
    /* an empty class folder is an error naming it */
    snprintf(path, sizeof(path), "%s/emptyset/c0", work);
    char parent[600];
    snprintf(parent, sizeof(parent), "%s/emptyset", work);
    mkdir(parent, 0755);
    mkdir(path, 0755);
    int code = run(out, sizeof(out), "./train --config %s --set data.train=%s --quiet", config_path(), parent);
    EXPECT(code == 1 && strstr(out, "emptyset/c0 is empty"), "exit %d:\n%s", code, out);
    /* a corrupt image is skipped with a warning naming it, and counted */
    snprintf(path, sizeof(path), "%s/train/c0/zz_corrupt.png", work);
    FILE *f = fopen(path, "w");
    fprintf(f, "garbage");
    fclose(f);
    code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=corrupt --set train.epochs=1 --set train.warmup_epochs=0",
               config_path(), work);
    EXPECT(code == 0 && strstr(out, "skipping") && strstr(out, "zz_corrupt.png: cannot decode (") &&
               strstr(out, "unreadable files skipped"),
           "exit %d:\n%s", code, out);
    unlink(path);
    /* a list of files none of which can be read: each step says so and updates nothing, and the
     * epoch ends in an error (a batch with no file read reached the model: "tensor dim 0 has size
     * 0") */
    char list[600];
    snprintf(list, sizeof(list), "%s/unreadable.txt", work);
    f = fopen(list, "w");
    fprintf(f, "none_0.png 0\nnone_1.png 1\nnone_2.png 2\n");
    fclose(f);
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=unreadable "
               "--set data.train=%s --set data.val= --set train.batch=3 --quiet",
               config_path(), work, list);
    EXPECT(code == 1 &&
               strstr(out, "none_0.png: No such file or directory") && /* (stb: "can't fopen") */
               strstr(out, "warning: step 1: no file of its batch could be read: no update") &&
               strstr(out, "error: data.train: no file of epoch 1 could be read") &&
               !strstr(out, "tensor dim"),
           "exit %d:\n%s", code, out);
    /* nor is a validation set none of whose files can be read scored 0%: an error, the epoch's
     * weights saved */
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=unreadable_val "
               "--set data.val=%s --set train.epochs=1 --quiet",
               config_path(), work, list);
    snprintf(path, sizeof(path), "%s/runs/unreadable_val/last.safetensors", work);
    EXPECT(code == 1 && strstr(out, "error: data.val: none of its files could be read") &&
               access(path, F_OK) == 0,
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./eval --ckpt %s --data %s", path, list);
    EXPECT(code == 1 && strstr(out, "error: --data: none of the 3 files of") &&
               !strstr(out, "top-1"),
           "exit %d:\n%s", code, out);
    /* truncated / missing checkpoints are errors naming the file */
    char ckpt[600], cut[600];
    snprintf(ckpt, sizeof(ckpt), "%s/runs/corrupt/last.safetensors", work);
    snprintf(cut, sizeof(cut), "%s/cut.safetensors", work);
    code = run(out, sizeof(out), "head -c 2000 %s > %s && ./eval --ckpt %s", ckpt, cut, cut);
    EXPECT(code == 1 && strstr(out, "cut.safetensors"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./eval --ckpt %s/none.safetensors", work);
    EXPECT(code == 1 && strstr(out, "none.safetensors: No such file"), "exit %d:\n%s", code, out);
    /* an official checkpoint as torch.save writes it (a zip) is told how to convert it */
    code = run(out, sizeof(out),
               "printf 'PK\\003\\004%%060d' 0 > %s/official.pth && ./eval --ckpt %s/official.pth",
               work, work);
    EXPECT(code == 1 && strstr(out, "official.pth: header length") &&
               strstr(out, "(a PyTorch file: convert it with tools/convert_pth.py"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./eval --ckpt %s", work);
    EXPECT(code == 1 && strstr(out, "is a directory, not a file"), "eval --ckpt DIR: exit %d:\n%s", code, out);
    /* a checkpoint of another vitc format, to eval, to resume, and as a fine-tuning's start */
    const char *newer_says =
        "newer.safetensors: format \"vitc-checkpoint-2\", which this vitc cannot read";
    code = run(out, sizeof(out),
               "sed 's/\"vitc-checkpoint-1\"/\"vitc-checkpoint-2\"/' %s > %s/newer.safetensors",
               ckpt, work);
    EXPECT(code == 0, "%s", out);
    code = run(out, sizeof(out), "./eval --ckpt %s/newer.safetensors", work);
    EXPECT(code == 1 && strstr(out, newer_says), "eval: exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train --resume %s/newer.safetensors", work);
    EXPECT(code == 1 && strstr(out, newer_says), "train --resume: exit %d:\n%s", code, out);
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=newer --set "
               "train.init=%s/newer.safetensors "
               "--quiet",
               config_path(), work, work);
    EXPECT(code == 1 && strstr(out, newer_says), "train.init: exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train --resume %s", cut);
    EXPECT(code == 1 && strstr(out, "cut.safetensors"), "exit %d:\n%s", code, out);
    /* class folders whose sorted order gives a class another's label, against the training data's
     * or a checkpoint's: refused before any step */
    char renamed[600];
    snprintf(renamed, sizeof(renamed), "%s/renamed", work);
    code = run(out, sizeof(out),
               "mkdir -p %s && cp -r %s/val/c0 %s/val/c2 %s && cp -r %s/val/c1 %s/d1", renamed,
               work, work, renamed, work, renamed);
    EXPECT(code == 0, "%s", out);
    const char *shifted = "renamed/c2 would take label 1, which";
    code = run(out, sizeof(out), "./train --config %s --set data.val=%s --quiet", config_path(),
               renamed);
    EXPECT(code == 1 && strstr(out, "error: data.val: class folder") && strstr(out, shifted) &&
               strstr(out, "gives to 'c1' (its label for 'c2' is 2)") && !strstr(out, "epoch"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./eval --ckpt %s --data %s", ckpt, renamed);
    EXPECT(code == 1 && strstr(out, "error: --data: class folder") && strstr(out, shifted) &&
               strstr(out, "which the checkpoint gives to 'c1'"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "./train --resume %s --set data.train=%s --set data.val= --quiet",
               ckpt, renamed);
    EXPECT(code == 1 && strstr(out, "error: data.train: class folder") && strstr(out, shifted),
           "exit %d:\n%s", code, out);
    /* a metrics.jsonl that cannot be written (a full disk: /dev/full) stops the run, at the start
     * or, resumed, before a checkpoint that would claim a log that is not there */
    code = run(
        out, sizeof(out),
        "mkdir -p %s/runs/full_a %s/runs/full_b && ln -sf /dev/full %s/runs/full_a/metrics.jsonl "
        "&& ln -sf /dev/full %s/runs/full_b/metrics.jsonl",
        work, work, work, work);
    EXPECT(code == 0, "%s", out);
    code = run(out, sizeof(out), "./train --config %s --out %s/runs --set run.name=full_a --quiet",
               config_path(), work);
    EXPECT(code == 1 && strstr(out, "full_a/metrics.jsonl: No space left on device") &&
               !strstr(out, "epoch 1"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out),
               "./train --resume %s --set run.name=full_b --set train.epochs=2 --quiet; "
               "test -e %s/runs/full_b/last.safetensors && echo written",
               ckpt, work);
    EXPECT(strstr(out, "full_b/metrics.jsonl: No space left on device") && !strstr(out, "written"),
           "%s", out);
    /* a NaN loss stops the run and keeps the last good checkpoint */
    char before[64], after[64];
    run(before, sizeof(before), "md5sum < %s", ckpt);
    code = run(out, sizeof(out), "./train --resume %s --set train.epochs=3 --set train.lr=1e9 --quiet", ckpt);
    run(after, sizeof(after), "md5sum < %s", ckpt);
    EXPECT(code == 1 && strstr(out, "loss is") && strstr(out, "is kept"), "exit %d:\n%s", code, out);
    EXPECT(!strcmp(before, after), "the last good checkpoint was overwritten");
}

TEST(cli_ctrl_c_saves_a_resumable_checkpoint) {
    setup();
    char out[16384];
    /* a run far too long to finish, signalled once it logs its first step: SIGINT (Ctrl-C) and
     * SIGTERM (kill's, a batch scheduler's before its time limit, which ended the process with the
     * steps since the last checkpoint) save last.safetensors and exit 128 + the signal */
    const struct {
        const char *signal, *run;
        int code;
    } cases[] = {{"INT", "interrupted", 130}, {"TERM", "terminated", 143}};
    for (int i = 0; i < 2; i++) {
        const char *name = cases[i].run;
        int code = run(out, sizeof(out),
                       "./train --config %s --out %s/runs --set run.name=%s --set "
                       "train.epochs=100000 --quiet & pid=$!; i=0; until grep -qs '\"type\": "
                       "\"step\"' %s/runs/%s/metrics.jsonl || [ $i -ge 600 ]; do sleep 0.05; "
                       "i=$((i + 1)); done; kill -%s $pid; wait $pid",
                       config_path(), work, name, work, name, cases[i].signal);
        EXPECT(code == cases[i].code && strstr(out, "interrupted at step"), "SIG%s: exit %d:\n%s",
               cases[i].signal, code, out);
        code = run(out, sizeof(out),
                   "./train --resume %s/runs/%s/last.safetensors --set train.epochs=1 --quiet",
                   work, name);
        EXPECT(code == 0, "resuming the %s run exited %d:\n%s", name, code, out);
    }
}

/* the number of lines of a file containing needle */
static int count_lines(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof(line), f)) n += strstr(line, needle) != NULL;
    if (f) fclose(f);
    return n;
}

TEST(cli_sweep_runs_the_grid_resumes_and_tabulates) {
    setup();
    char out[16384], path[600];
    const char *sweep = "tools/sweep.sh --config %s --out %s/sweep --grid model.attn=agent,native --seeds 1,2 "
                        "-j 2 --set train.epochs=1 --set run.log_every=1";
    /* first pass: every run stops after 2 of its 6 steps, unfinished */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s --set run.stop_after_steps=2", sweep);
    int code = run(out, sizeof(out), cmd, config_path(), work);
    EXPECT(code == 0 && strstr(out, "4 runs: 4 run now, 0 already finished") && strstr(out, "no finished runs"),
           "first pass exited %d:\n%s", code, out);
    /* second pass: the four resume from their checkpoints and finish */
    snprintf(cmd, sizeof(cmd), "%s --set run.stop_after_steps=0", sweep);
    code = run(out, sizeof(out), cmd, config_path(), work);
    EXPECT(code == 0 && strstr(out, "4 runs: 4 run now, 0 already finished"), "second pass exited %d:\n%s", code, out);
    snprintf(path, sizeof(path), "%s/sweep/runs/attn=agent_seed=2/metrics.jsonl", work);
    EXPECT(count_lines(path, "\"type\": \"step\"") == 6 && count_lines(path, "\"type\": \"end\"") == 1,
           "%s: %d step lines, %d end lines", path, count_lines(path, "\"type\": \"step\""),
           count_lines(path, "\"type\": \"end\""));
    code = run(out, sizeof(out), cmd, config_path(), work);
    EXPECT(code == 0 && strstr(out, "4 runs: 0 run now, 4 already finished"), "third pass exited %d:\n%s", code, out);
    /* one row per attention, two seeds each; the agent model has more parameters (biases, DWC) */
    snprintf(path, sizeof(path), "%s/sweep/results.csv", work);
    FILE *f = fopen(path, "r");
    char line[512], attn[2][32] = {{0}};
    long params[2] = {0};
    int seeds[2] = {0}, rows = 0;
    double top1[2] = {0};
    while (f && fgets(line, sizeof(line), f)) {
        const char *head = "model.attn,params,macs_m,top1_mean,top1_std,seeds,img_s,wall_s";
        if (rows == 0 && !strncmp(line, head, strlen(head))) {
            rows++;
            continue;
        }
        if (rows >= 1 && rows <= 2 &&
            sscanf(line, "%31[^,],%ld,%*f,%lf,%*f,%d", attn[rows - 1], &params[rows - 1], &top1[rows - 1],
                   &seeds[rows - 1]) == 4)
            rows++;
    }
    if (f) fclose(f);
    EXPECT(rows == 3, "%s: header and 2 rows expected, parsed %d", path, rows);
    EXPECT(!strcmp(attn[0], "agent") && !strcmp(attn[1], "native") && seeds[0] == 2 && seeds[1] == 2,
           "rows %s (%d seeds), %s (%d seeds)", attn[0], seeds[0], attn[1], seeds[1]);
    EXPECT(params[0] > params[1] && top1[0] > 0 && top1[0] <= 100, "params %ld vs %ld, top-1 %.2f", params[0],
           params[1], top1[0]);
    code = run(out, sizeof(out), "tools/sweep.sh --config %s --out %s/bad --grid model.attn", config_path(), work);
    EXPECT(code == 2 && strstr(out, "--grid model.attn: expected KEY=V1,V2"), "exit %d:\n%s", code, out);
}

TEST(cli_sweep_then_plot_writes_pngs) {
    setup();
    char out[16384];
    if (run(out, sizeof(out), "command -v gnuplot") != 0) SKIP("gnuplot is not installed (apt-get install gnuplot-nox)");
    if (run(out, sizeof(out), "test -f %s/sweep/results.csv", work) != 0) SKIP("needs the sweep of the test before");
    int code = run(out, sizeof(out), "tools/plot.sh --sweep %s/sweep --out %s/plots/s && tools/plot.sh --run "
                   "%s/sweep/runs/attn=agent_seed=1 --out %s/plots/a", work, work, work, work);
    EXPECT(code == 0, "plot.sh exited %d:\n%s", code, out);
    const char *names[] = {"s_loss", "s_acc", "s_macs", "s_speed", "a_loss", "a_acc"};
    for (int i = 0; i < 6; i++) {
        char path[600];
        snprintf(path, sizeof(path), "%s/plots/%s.png", work, names[i]);
        int w = 0, h = 0, c = 0;
        EXPECT(stbi_info(path, &w, &h, &c) && w == 900 && h == 560, "%s: %dx%d", path, w, h);
    }
    code = run(out, sizeof(out), "tools/plot.sh --run %s/nonexistent --out %s/plots/x", work, work);
    EXPECT(code == 2 && strstr(out, "nonexistent/metrics.jsonl: no such file"), "exit %d:\n%s", code, out);
}

TEST(cli_sweep_table_refreshes_a_document) {
    setup();
    char out[16384];
    if (run(out, sizeof(out), "test -f %s/sweep/results.md", work) != 0) SKIP("needs the sweep of the test before");
    int code = run(out, sizeof(out), "printf 'intro\\n<!-- results %s/sweep -->\\nstale row\\n<!-- /results -->\\n"
                   "outro\\n' > %s/doc.md && tools/doc_tables.sh %s/doc.md && cat %s/doc.md", work, work, work, work);
    EXPECT(code == 0, "doc_tables.sh exited %d:\n%s", code, out);
    EXPECT(!strstr(out, "stale row") && strstr(out, "intro\n<!-- results ") && strstr(out, "| agent |") &&
               strstr(out, "| native |") && strstr(out, "<!-- /results -->\noutro\n"), "document:\n%s", out);
    code = run(out, sizeof(out), "printf '<!-- results %s/none -->\\n<!-- /results -->\\n' > %s/bad.md && "
               "tools/doc_tables.sh %s/bad.md", work, work, work);
    EXPECT(code == 2 && strstr(out, "none/results.md: no such table"), "exit %d:\n%s", code, out);
}

/* tools/ab.sh: HEAD built in a worktree of its own against the working tree, in turn; its rows are
 * medians of the runs' own figures */
TEST(cli_ab_benches_two_revisions_in_turn) {
    char out[16384];
    if (run(out, sizeof(out), "git rev-parse --verify --quiet HEAD") != 0) SKIP("not a git checkout with a commit");
    int code = run(out, sizeof(out), "ROUNDS=2 OPS=attention tools/ab.sh HEAD -- --model deit_t --mode infer "
                   "--batch 1 --img 32 --iters 1 --threads 2");
    EXPECT(code == 0 && strstr(out, "tools/ab.sh: HEAD against the working tree, 2 rounds in turn"),
           "ab.sh exited %d:\n%s", code, out);
    const char *img = strstr(out, "\nimg_s "), *attn = strstr(out, "\nattention forward_ms ");
    double base = 0, fresh = 0, ratio = 0, attn_base = 0, attn_new = 0;
    int img_read = img ? sscanf(img, " img_s %lf %lf %lf", &base, &fresh, &ratio) : 0;
    int attn_read = attn ? sscanf(attn, " attention forward_ms %lf %lf", &attn_base, &attn_new) : 0;
    EXPECT(img_read == 3 && base > 0 && fresh > 0 && fabs(ratio - fresh / base) < 2e-3 * ratio + 1e-3,
           "img/s row: %.3f, %.3f, ratio %.3f:\n%s", base, fresh, ratio, out);
    EXPECT(attn_read == 2 && attn_base > 0 && attn_new > 0, "attention's row:\n%s", out);
    code = run(out, sizeof(out), "tools/ab.sh no-such-rev");
    EXPECT(code == 2 && strstr(out, "no-such-rev: not a commit of this repository"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "ROUNDS=0 tools/ab.sh HEAD");
    EXPECT(code == 2 && strstr(out, "ROUNDS=0: expected a whole number >= 1"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "OPS=attn tools/ab.sh HEAD -- --model deit_t --mode infer --batch 1 --img 32 "
               "--iters 1");
    /* the list is in the profile's order, by time: attention may come first (under SAN it does) */
    const char *ops = strstr(out, "OPS: attn: not an op of this step's profile (");
    EXPECT(code == 2 && ops && (strstr(ops, "(attention ") || strstr(ops, " attention ")),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "tools/ab.sh HEAD -- --model nosuch --iters 1");
    EXPECT(code == 2 && strstr(out, "tools/ab.sh: bench --model nosuch --iters 1:") &&
               strstr(out, "unknown model \"nosuch\""), "exit %d:\n%s", code, out);
}

/* the base run's checkpoint fine-tuned on classes c0 and c1 with the class map whose text is map
 * (printf's), into run mapped_head */
static int fine_tune_with_class_map(char *out, size_t len, const char *map, const char *args) {
    return run(
        out, len,
        "printf '%s' > %s/class_map && ./train --config %s --out %s/runs --set "
        "run.name=mapped_head --set data.train=%s/two/train --set model.num_classes=2 --set "
        "train.init=%s/runs/base/last.safetensors --set train.init_class_map=%s/class_map %s",
        map, work, config_path(), work, work, work, work, args);
}

/* train.init: a run on other classes starts from a checkpoint's parameters, its head afresh: set
 * to 0 as Agent-Attention's fine-tuning does, or DeiT's initial head */
TEST(cli_fine_tuning_starts_from_a_checkpoint) {
    setup();
    char out[16384];
    int code = run(out, sizeof(out),
                   "./train --config %s --out %s/runs --set run.name=base --set "
                   "run.stop_after_steps=2 --quiet && mkdir -p %s/two/train && cp -r %s/train/c0 "
                   "%s/train/c1 %s/two/train",
                   config_path(), work, work, work, work, work);
    EXPECT(code == 0, "exit %d:\n%s", code, out);
    /* at lr 0 the fine-tuned run's weights (and their EMA) stay the checkpoint's, bit for bit */
    const char *still = "--set train.lr=0 --set train.warmup_lr=0 --set train.min_lr=0 --set "
                        "run.stop_after_steps=1 --set data.val= --quiet";
    code =
        run(out, sizeof(out),
            "./train --config %s --out %s/runs --set run.name=tuned --set data.train=%s/two/train "
            "--set model.num_classes=2 --set train.init=%s/runs/base/last.safetensors %s",
            config_path(), work, work, work, still);
    EXPECT(code == 0 &&
               strstr(out, "note: train.init: head.weight, head.bias set to 0 (the file's head "
                           "is for 3 classes, the model's for 2), as Agent-Attention's "
                           "load_pretrained does"),
           "exit %d:\n%s", code, out);
    char runs[300], err[512];
    snprintf(runs, sizeof(runs), "%s/runs", work);
    st_file base, tuned;
    bool read = tiny_run_read_pair(runs, "base", "tuned", &base, &tuned, err, sizeof(err));
    EXPECT(read, "%s", err);
    if (read) {
        /* all but head.weight and head.bias equal the checkpoint's parameters bit for bit, and so
         * does the EMA, which starts from them (but for the rounding of its average's two terms) */
        int equal, differ, ema_equal, ema_differ;
        tiny_run_compare(&base, "", &tuned, "", 0, &equal, &differ);
        tiny_run_compare(&base, "", &tuned, "ema.", 1e-6, &ema_equal, &ema_differ);
        const st_entry *head = st_find(&tuned, "head.weight");
        EXPECT(head && head->shape[0] == 2 && differ == 2 && equal > 20 && ema_differ == 2 &&
                   ema_equal == equal,
               "head %lld wide; parameters: %d equal the checkpoint's, %d differ; EMA: %d, %d",
               head ? (long long)head->shape[0] : -1, equal, differ, ema_equal, ema_differ);
        EXPECT(tiny_run_abs_max(&tuned, "head.weight") == 0 &&
                   tiny_run_abs_max(&tuned, "head.bias") == 0,
               "the head is 0 at lr 0: |head.weight| up to %g, |head.bias| up to %g",
               tiny_run_abs_max(&tuned, "head.weight"), tiny_run_abs_max(&tuned, "head.bias"));
        st_close(&tuned), st_close(&base);
    }
    /* the same with native attention (DeiT's main.py --finetune): the model's initial head */
    code =
        run(out, sizeof(out),
            "./train --config %s --out %s/runs --set run.name=base_native --set model.attn=native "
            "--set run.stop_after_steps=1 --quiet && ./train --config %s --out %s/runs --set "
            "run.name=tuned_native --set model.attn=native --set data.train=%s/two/train --set "
            "model.num_classes=2 --set train.init=%s/runs/base_native/last.safetensors %s",
            config_path(), work, config_path(), work, work, work, still);
    EXPECT(code == 0 && strstr(out, "note: train.init: head.weight, head.bias start from their "
                                    "initial values (the file has no head for 2 classes)"),
           "exit %d:\n%s", code, out);
    read = tiny_run_read_pair(runs, "base_native", "tuned_native", &base, &tuned, err, sizeof(err));
    EXPECT(read, "%s", err);
    if (read) {
        EXPECT(tiny_run_abs_max(&tuned, "head.weight") > 0, "DeiT's initial head is not 0");
        st_close(&tuned), st_close(&base);
    }
    /* train.init_class_map: each class's row of the head from the row of the file's it names */
    code = fine_tune_with_class_map(out, sizeof(out), "2\\n\\n0\\n", still);
    EXPECT(code == 0 && strstr(out, "note: train.init: head.weight, head.bias: the class map's "
                                    "rows of the file's head for 3 classes"),
           "exit %d:\n%s", code, out);
    read = tiny_run_read_pair(runs, "base", "mapped_head", &base, &tuned, err, sizeof(err));
    EXPECT(read, "%s", err);
    if (read) {
        const char *head[] = {"head.weight", "head.bias"};
        for (int i = 0; i < 2; i++) {
            int rows[] = {2, 0};
            EXPECT(tiny_run_rows_equal(&tuned, &base, head[i], rows, 2),
                   "%s: not rows 2 and 0 of the checkpoint's", head[i]);
        }
        st_close(&tuned), st_close(&base);
    }
    code = fine_tune_with_class_map(out, sizeof(out), "2\\n3\\n", still);
    EXPECT(code == 1 && strstr(out, "error: train.init: train.init_class_map: ") &&
               strstr(out, "/class_map line 2: 3 is not among the checkpoint's head rows (0 to 2)"),
           "exit %d:\n%s", code, out);
    code = fine_tune_with_class_map(out, sizeof(out), "2\\n", still);
    EXPECT(code == 1 && strstr(out, "error: train.init: train.init_class_map: ") &&
               strstr(out, "/class_map: 1 rows for the model's 2 classes (model.num_classes)"),
           "exit %d:\n%s", code, out);
    /* a checkpoint without a head has no rows to pick */
    char from[600], headless[600];
    snprintf(from, sizeof(from), "%s/base/last.safetensors", runs);
    snprintf(headless, sizeof(headless), "%s/headless.safetensors", work);
    EXPECT(tiny_run_copy_without(from, headless, "head.weight", err, sizeof(err)), "%s", err);
    code = run(out, sizeof(out),
               "printf '2\\n0\\n' > %s/class_map && ./train --config %s --out %s/runs --set "
               "run.name=headless_map --set data.train=%s/two/train --set model.num_classes=2 "
               "--set train.init=%s --set train.init_class_map=%s/class_map %s",
               work, config_path(), work, work, headless, work, still);
    EXPECT(code == 1 && strstr(out, "/headless.safetensors has no classifier head (head.weight) "
                                    "for train.init_class_map "),
           "exit %d:\n%s", code, out);
    /* the same classes: every tensor loads, no note */
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=same --set "
               "train.init=%s/runs/base/last.safetensors %s",
               config_path(), work, work, still);
    EXPECT(code == 0 && !strstr(out, "note: train.init"), "exit %d:\n%s", code, out);
    /* train.init_ema: from the checkpoint's EMA weights instead (CSwin's 384 fine-tune) */
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=from_ema --set "
               "train.init=%s/runs/base/last.safetensors --set train.init_ema=true %s",
               config_path(), work, work, still);
    EXPECT(code == 0, "exit %d:\n%s", code, out);
    read = tiny_run_read_pair(runs, "base", "from_ema", &base, &tuned, err, sizeof(err));
    EXPECT(read, "%s", err);
    if (read) {
        int from_ema, not_ema, from_weights, not_weights;
        tiny_run_compare(&tuned, "", &base, "ema.", 0, &from_ema, &not_ema);
        tiny_run_compare(&tuned, "", &base, "", 0, &from_weights, &not_weights);
        EXPECT(not_ema == 0 && from_ema > 20 && not_weights > 10,
               "%d parameters equal the checkpoint's EMA, %d do not; %d differ from its weights",
               from_ema, not_ema, not_weights);
        st_close(&tuned), st_close(&base);
    }
    code = run(
        out, sizeof(out),
        "./train --config %s --out %s/runs --set run.name=tuned_no_ema --set ema.enabled=false %s "
        "&& ./train --config %s --out %s/runs --set run.name=from_none --set "
        "train.init=%s/runs/tuned_no_ema/last.safetensors --set train.init_ema=true %s",
        config_path(), work, still, config_path(), work, work, still);
    EXPECT(code == 1 && strstr(out, "error: train.init: ") &&
               strstr(out,
                      "tuned_no_ema/last.safetensors has no EMA weights (train.init_ema): its run "
                      "had ema.enabled false"),
           "exit %d:\n%s", code, out);
    /* another input size (16 -> 24 pixels, 4x4 -> 6x6 patches): pos_embed's grid and Agent
     * attention's biases along the grid's rows and columns are resized, as the official
     * fine-tuning does (the resizes themselves: parity_grid_resize_with_pytorch_interpolate) */
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=larger --set model.img_size=24 "
               "--set train.init=%s/runs/base/last.safetensors %s",
               config_path(), work, work, still);
    EXPECT(code == 0 && strstr(out, "note: train.init: pos_embed resized from 4x4 to 6x6 "
                                    "(bicubic); blocks.0.attn.ah_bias and 3 more agent biases "
                                    "resized from 4 to 6 (linear)\n"),
           "exit %d:\n%s", code, out);
    /* gray images from an RGB model: its first convolution summed over R, G and B, as timm does */
    code = run(out, sizeof(out),
               "./train --config %s --out %s/runs --set run.name=rgb --set model.in_chans=3 %s && "
               "./train --config %s --out %s/runs --set run.name=gray --set "
               "train.init=%s/runs/rgb/last.safetensors %s",
               config_path(), work, still, config_path(), work, work, still);
    EXPECT(code == 0 && strstr(out, "note: train.init: patch_embed.proj.weight summed over the "
                                    "file's 3 input channels for gray images"),
           "exit %d:\n%s", code, out);
    st_file rgb, gray;
    read = tiny_run_read_pair(runs, "rgb", "gray", &rgb, &gray, err, sizeof(err));
    EXPECT(read, "%s", err);
    if (read) {
        const st_entry *w3 = st_find(&rgb, "patch_embed.proj.weight"),
                       *w1 = st_find(&gray, "patch_embed.proj.weight");
        float a[16 * 3 * 16], b[16 * 16];
        bool shaped = w3 && w1 && w3->numel == 16 * 3 * 16 && w1->numel == 16 * 16 &&
                      st_to_f32(w3, a) && st_to_f32(w1, b);
        double worst = shaped ? 0 : 1;
        for (int o = 0; shaped && o < 16; o++)
            for (int j = 0; j < 16; j++)
                worst = fmax(worst, fabs(b[o * 16 + j] - (a[o * 48 + j] + a[o * 48 + 16 + j] +
                                                          a[o * 48 + 32 + j])));
        EXPECT(worst < 1e-6, "the gray kernels are off the sums of RGB's by %.2e", worst);
        st_close(&gray), st_close(&rgb);
    }
    /* and a fine-tuning of another model or of no file: an error naming each tensor, or the file
     * (another number of agents is another model, not another grid) */
    const char *refused[][2] = {
        {"--set model.agent_num=[9]", "wrong shape: blocks.0.attn.ah_bias is (1, 2, 4, 4, 1), the "
                                      "model has (1, 2, 9, 4, 1)"},
        {"--set model.embed_dim=[32]", "base/last.safetensors does not match the model:\n  wrong "
                                       "shape: cls_token is (1, 1, 16), the model has (1, 1, 32)"},
        {"--set train.init=none.safetensors", "none.safetensors: No such file or directory"},
    };
    for (int i = 0; i < 3; i++) {
        code = run(out, sizeof(out),
                   "./train --config %s --out %s/runs --set run.name=refused%d --set "
                   "train.init=%s/runs/base/last.safetensors %s %s",
                   config_path(), work, i, work, refused[i][0], still);
        EXPECT(code == 1 && strstr(out, "error: train.init: ") && strstr(out, refused[i][1]),
               "%s: exit %d:\n%s", refused[i][0], code, out);
    }
}

/* the text of out from "top-1" to the image count: the scores eval reports */
static void scores_of(const char *out, char *scores, size_t len) {
    const char *at = strstr(out, "top-1"), *end = at ? strstr(at, " images") : NULL;
    snprintf(scores, len, "%.*s", end ? (int)(end - at) : 0, at ? at : "");
}

TEST(cli_eval_scores_the_classes_valid_labels_names) {
    setup();
    char out[16384], plain[128], picked[128];
    const char *still = "--set train.lr=0 --set train.warmup_lr=0 --set train.min_lr=0 --set "
                        "run.stop_after_steps=1 --set data.val= --quiet";
    /* a model of classes c0 and c2 alone, whose head is the 3-class model's rows 0 and 2 (at lr 0,
     * the rest its weights): eval scores it on c0 and c2 as eval --valid-labels scores the 3-class
     * model, only the listed classes' scores counting */
    int code =
        run(out, sizeof(out),
            "./train --config %s --out %s/runs --set run.name=of_three --set "
            "run.stop_after_steps=2 --quiet && mkdir -p %s/02/train %s/02/val && cp -r "
            "%s/train/c0 %s/train/c2 %s/02/train && cp -r %s/val/c0 %s/val/c2 %s/02/val && "
            "printf '0\\n2\\n' > %s/02/map && ./train --config %s --out %s/runs --set "
            "run.name=of_two --set data.train=%s/02/train --set model.num_classes=2 --set "
            "train.init=%s/runs/of_three/last.safetensors --set train.init_class_map=%s/02/map %s "
            "&& ./eval --ckpt %s/runs/of_two/last.safetensors --data %s/02/val",
            config_path(), work, work, work, work, work, work, work, work, work, work,
            config_path(), work, work, work, work, still, work, work);
    scores_of(out, plain, sizeof(plain));
    EXPECT(code == 0 && plain[0] && strstr(out, "(8 images"), "exit %d:\n%s", code, out);
    code = run(
        out, sizeof(out),
        "./eval --ckpt %s/runs/of_three/last.safetensors --data %s/02/val --valid-labels %s/02/map",
        work, work, work);
    scores_of(out, picked, sizeof(picked));
    EXPECT(code == 0 && strstr(out, "scoring the classes of ") && picked[0] &&
               !strcmp(plain, picked),
           "exit %d (the 2-class model: %s):\n%s", code, plain, out);
    /* all the classes, in order: eval's own scores */
    code = run(
        out, sizeof(out),
        "./eval --ckpt %s/runs/of_three/last.safetensors --data %s/val && printf '0\\n1\\n2\\n' > "
        "%s/012 && ./eval --ckpt %s/runs/of_three/last.safetensors --data %s/val --valid-labels "
        "%s/012",
        work, work, work, work, work, work);
    scores_of(out, plain, sizeof(plain));
    scores_of(strstr(out, "scoring") ? strstr(out, "scoring") : "", picked, sizeof(picked));
    EXPECT(code == 0 && plain[0] && !strcmp(plain, picked), "exit %d:\n%s", code, out);
    /* a map whose classes are not the data's, or past the model's */
    const char *bad[][2] = {
        {"2\\n0\\n", "--valid-labels: class folder "},
        {"0\\n3\\n", "/bad_map line 2: 3 is not among the model's classes (0 to 2)"},
        {"0\\nc2\\n", "line 2: \"c2\" is not a row number"},
    };
    for (int i = 0; i < 3; i++) {
        code = run(
            out, sizeof(out),
            "printf '%s' > %s/bad_map && ./eval --ckpt %s/runs/of_three/last.safetensors --data "
            "%s/02/val --valid-labels %s/bad_map",
            bad[i][0], work, work, work, work);
        EXPECT(code == 1 && strstr(out, bad[i][1]) && !strstr(out, "top-1"), "%s: exit %d:\n%s",
               bad[i][0], code, out);
    }
}

/* a class map where no classes are there to pick, or none to pick from */
TEST(cli_class_maps_refuse_what_has_no_classes_to_pick) {
    setup();
    char out[16384];
    int code = run(out, sizeof(out), "./train --config %s --set train.init_class_map=%s/map",
                   config_path(), work);
    EXPECT(code == 1 && strstr(out, "error: config: train.init_class_map: picks rows of "
                                    "train.init's head: set train.init too"),
           "exit %d:\n%s", code, out);
    const char *sit = "--config configs/tiny/sit_native.json --set model.in_chans=1 --set "
                      "model.num_classes=3";
    code = run(out, sizeof(out),
               "./train %s --set train.init=%s/none.safetensors --set train.init_class_map=%s/map",
               sit, work, work);
    EXPECT(code == 1 && strstr(out, "error: config: train.init_class_map: picks rows of a "
                                    "classifier's head; a diffusion model's class embedding"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out),
               "./train %s --set data.train=%s/train --set data.val= --set train.batch=4 --set "
               "run.stop_after_steps=1 --quiet --out %s/runs --set run.name=sit_map && printf "
               "'0\\n' > %s/sit_map && ./eval --ckpt %s/runs/sit_map/last.safetensors --data "
               "%s/val --valid-labels %s/sit_map",
               sit, work, work, work, work, work, work);
    EXPECT(code == 2 && strstr(out, "error: --valid-labels: tiny_sit_native is a diffusion model, "
                                    "which scores no classes"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out),
               "./eval --ckpt %s/runs/sit_map/last.safetensors --image %s/val/c1/000.png "
               "--valid-labels %s/sit_map",
               work, work, work);
    EXPECT(code == 2 && strstr(out, "error: --valid-labels scores a folder of images (--data), "
                                    "not --image"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out),
               "printf '[[0]]' > %s/sit_real && ./eval --ckpt %s/runs/sit_map/last.safetensors "
               "--data %s/val --real-labels %s/sit_real",
               work, work, work, work);
    EXPECT(code == 2 && strstr(out, "error: --real-labels: tiny_sit_native is a diffusion model, "
                                    "which scores no classes"),
           "exit %d:\n%s", code, out);
}

/* ImageNet-V2's class folders are named 0 to 999 by class number: against a checkpoint of named
 * classes (a converted one's), folder 10 is class 10, so a 12-class model scores the same images
 * alike in folders k00 to k11 (its classes) and 0 to 11 (sorted as text, "10" would be class 2) */
TEST(cli_eval_reads_numbered_class_folders_as_class_numbers) {
    setup();
    char out[16384], named[128], numbered[128];
    /* the 12 classes: rows 0, 1, 2, 0, 1, ... of the head of a 3-class model trained until its
     * scores tell the classes apart, folder k holding class k mod 3's images (at lr 0, the 12-class
     * model is the 3-class one 4 times over) */
    int code = run(
        out, sizeof(out),
        "./train --config %s --out %s/runs --set run.name=of_three_learnt --set aug.mixup=0 --set "
        "train.epochs=8 --set train.lr=0.03 --set train.smoothing=0 --set "
        "aug.cutmix=0 --set data.val= --quiet && rm -f %s/map12 && for k in 0 1 2 3 4 5 6 7 8 9 10 "
        "11; do c=$((k %% 3)); n=$(printf k%%02d $k); echo $c >> %s/map12; mkdir -p "
        "%s/k12/train/$n %s/k12/val/$n %s/v2/$k && cp %s/train/c$c/* %s/k12/train/$n && cp "
        "%s/val/c$c/* %s/k12/val/$n && cp %s/val/c$c/* %s/v2/$k; done && ./train --config %s "
        "--out %s/runs --set run.name=twelve --set data.train=%s/k12/train --set "
        "model.num_classes=12 --set train.init=%s/runs/of_three_learnt/last.safetensors --set "
        "train.init_class_map=%s/map12 --set train.lr=0 --set train.warmup_lr=0 --set "
        "train.min_lr=0 --set run.stop_after_steps=1 --set data.val= --quiet && ./eval --ckpt "
        "%s/runs/twelve/last.safetensors --data %s/k12/val",
        config_path(), work, work, work, work, work, work, work, work, work, work, work, work,
        config_path(), work, work, work, work, work, work);
    scores_of(out, named, sizeof(named));
    code |= run(out, sizeof(out), "./eval --ckpt %s/runs/twelve/last.safetensors --data %s/v2",
                work, work);
    scores_of(out, numbered, sizeof(numbered));
    EXPECT(code == 0 && named[0] && !strcmp(named, numbered) &&
               strstr(out, "names its classes apart from the checkpoint ('0' against 'k00' for "
                           "label 0): its class folders are numbered (as ImageNet-V2's): folder K "
                           "is class K"),
           "exit %d (named: %s):\n%s", code, named, out);
}

/* ImageNet-ReaL's labels, a set of right classes per validation image found by its file name: the
 * 12 validation images renamed ILSVRC2012_val_00000001 to 12 (backwards, so that their order in
 * the folders is not theirs in the list), each given a set made from the class eval --image ranks
 * first for it: none (left out), that class, another, or another and that class; eval --real-labels
 * then counts 6 of the 9 labelled images right at top-1, and every one at top-5 (of 3 classes) */
TEST(cli_eval_scores_real_labels_by_file_name) {
    setup();
    char out[16384], plain[128], with_real[128];
    int code = run(out, sizeof(out),
                   "./train --config %s --out %s/runs --set run.name=real_labelled --set "
                   "run.stop_after_steps=2 --set data.val= --quiet && for c in 0 1 2; do mkdir -p "
                   "%s/real/c$c; for i in 0 1 2 3; do cp %s/val/c$c/00$i.png $(printf "
                   "%s/real/c$c/ILSVRC2012_val_%%08d.JPEG $((12 - 4 * c - i))); done; done",
                   config_path(), work, work, work, work);
    EXPECT(code == 0, "exit %d:\n%s", code, out);
    int first[13] = {0};
    for (int j = 1; j <= 12; j++) {
        code = run(out, sizeof(out),
                   "./eval --ckpt %s/runs/real_labelled/last.safetensors --image "
                   "%s/real/c%d/ILSVRC2012_val_%08d.JPEG",
                   work, work, (12 - j) / 4, j);
        const char *at = strstr(out, "(class ");
        bool ranked = at && sscanf(at, "(class %d)", &first[j]) == 1;
        EXPECT(code == 0 && ranked, "exit %d:\n%s", code, out);
    }
    char path[600];
    snprintf(path, sizeof(path), "%s/real.json", work);
    FILE *f = fopen(path, "w");
    EXPECT(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputc('[', f);
    for (int j = 1; j <= 12; j++) {
        int k = first[j], other = (k + 1) % 3;
        const char *sets[] = {"[]", "[%d]", "[%d]", "[%d, %d]"};
        fprintf(f, j > 1 ? ", " : "");
        if (j % 4 == 0)
            fprintf(f, sets[0]);
        else if (j % 4 == 1)
            fprintf(f, sets[1], k);
        else if (j % 4 == 2)
            fprintf(f, sets[2], other);
        else
            fprintf(f, sets[3], other, k);
    }
    fputs("]\n", f);
    fclose(f);
    code = run(out, sizeof(out),
               "./eval --ckpt %s/runs/real_labelled/last.safetensors --data %s/real --batch 5",
               work, work);
    scores_of(out, plain, sizeof(plain));
    code |= run(out, sizeof(out),
                "./eval --ckpt %s/runs/real_labelled/last.safetensors --data %s/real --batch 5 "
                "--real-labels %s",
                work, work, path);
    scores_of(out, with_real, sizeof(with_real));
    const char *expected = "/real.json: top-1 66.67%  top-5 100.00%  (9 of the 12 images labelled)";
    EXPECT(code == 0 && plain[0] && !strcmp(plain, with_real) && strstr(out, expected),
           "exit %d (without --real-labels: %s):\n%s", code, plain, out);
    /* files it has no entry for, classes past the model's, not such a list */
    const struct {
        const char *json, *data, *message;
    } bad[] = {
        {"[[0], [1]]", "real",
         "labels ImageNet's validation images ILSVRC2012_val_00000001 to ILSVRC2012_val_00000002 "
         "(by file name); "},
        {"[[0], [1], [2], [1, 3]]", "real",
         "/bad_real: entry 3 (ILSVRC2012_val_00000004): 3 is not among the model's classes (0 to "
         "2)"},
        {"[[0], 1]", "real", "/bad_real: entry 1 (ILSVRC2012_val_00000002) is not a list"},
        {"{}", "real", "/bad_real: not a JSON list of class lists"},
        {"[[0]]", "val", "/val/c0/000.png is not one of them"},
    };
    for (int i = 0; i < 5; i++) {
        code = run(out, sizeof(out),
                   "printf '%s' > %s/bad_real && ./eval --ckpt "
                   "%s/runs/real_labelled/last.safetensors --data %s/%s --real-labels %s/bad_real",
                   bad[i].json, work, work, work, bad[i].data, work);
        EXPECT(code == 1 && strstr(out, bad[i].message) && !strstr(out, "top-1"),
               "%s: exit %d:\n%s", bad[i].json, code, out);
    }
    /* usage errors: with --valid-labels, with --image */
    const struct {
        const char *data, *also, *message;
    } refused[] = {
        {"--data", "--valid-labels", "error: --real-labels are of all the model's classes: drop"},
        {"--image", "", "error: --real-labels scores a folder of images (--data), not --image"},
    };
    for (int i = 0; i < 2; i++) {
        code = run(out, sizeof(out),
                   "./eval --ckpt %s/runs/real_labelled/last.safetensors %s %s/real%s "
                   "--real-labels %s %s %s",
                   work, refused[i].data, work, i ? "/c0/ILSVRC2012_val_00000012.JPEG" : "", path,
                   refused[i].also, refused[i].also[0] ? path : "");
        EXPECT(code == 2 && strstr(out, refused[i].message), "%s: exit %d:\n%s", refused[i].also,
               code, out);
    }
}
