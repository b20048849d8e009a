#include "trainer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../models/model.h"
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/clock.h"
#include "../core/file.h"
#include "../core/memory.h"
#include "../core/precision.h"
#include "../core/tape.h"
#include "../core/threads.h"
#include "../data/data.h"
#include "../dist/dist.h"
#include "../ops/backend.h"
#include "../ops/ops.h"
#include "checkpoint.h"
#include "ddpm.h"
#include "grad_sync.h"
#include "mixup.h"
#include "optim.h"
#include "real_labels.h"
#include "transport.h"

/* Ctrl-C, or SIGTERM (kill's, a batch scheduler's before its time limit): the step ends, the
 * checkpoint is saved and the exit code is 128 + the signal's number */
static volatile sig_atomic_t interrupted, stop_signal;
static void on_stop_signal(int sig) {
    stop_signal = sig;
    interrupted = 1;
}

typedef struct train_config {
    int epochs, cooldown_epochs, warmup_epochs, batch, accum, workers, log_every, stop_after, save_every;
    double lr, warmup_lr, min_lr, lr_scale_batch, weight_decay, clip_grad, beta1, beta2, eps;
    uint64_t seed;
    mixup_config mix;
    bool ema, ema_warmup;
    double ema_decay;
    bool diffusion; /* train.task "diffusion": SiT's transport or DiT's DDPM objective; else "classify" */
    precision prec; /* train.precision: of the GEMMs (core/precision.h) */
    const char *device; /* train.device: cpu, cuda or cuda:N (ops/backend.h) */
    const char *train_dir, *val_dir, *run_name, *out;
    const char *init; /* a checkpoint whose parameters start a new run ("": the seed's) */
    bool init_ema;    /* from its EMA weights instead */
    const char *init_class_map; /* the file whose lines pick the rows of init's head ("": none) */
} train_config;

static const char *const task_names[] = {"classify", "diffusion", NULL};

/* train.task: "diffusion" by default for model.arch "sit" and "dit" (no logits), else "classify" */
static bool diffusion_task(config *c, const model_config *mc) {
    bool model_diffuses = model_is_diffusion(mc);
    bool diffusion = !strcmp(config_str(c, "train.task", model_diffuses ? "diffusion" : "classify", task_names),
                             "diffusion");
    if (diffusion != model_diffuses)
        config_error("train.task", "model.arch \"%s\" trains with train.task \"%s\"", mc->arch,
                     model_diffuses ? "diffusion" : "classify");
    return diffusion;
}

/* the objective of train.task "diffusion": SiT's transport or DiT's DDPM */
static tensor *diffusion_loss(model *m, const float *images, const int *y, int B, uint64_t key,
                              int64_t first_sample, forward_opts fo) {
    return (strcmp(m->cfg.arch, "dit") ? transport_loss : ddpm_loss)(m, images, y, B, key, first_sample, fo);
}

/* A diffusion model learns the images themselves: unless the config says otherwise they are only
 * resized (the whole image, bicubic) and mapped to [-1, 1] (SiT's pixel convention), with SiT's
 * random horizontal flip; no RandAugment, colour jitter, random erasing or crop */
static void diffusion_aug_defaults(config *c) {
    static const char *const defaults[] = {
        "aug.randaugment=\"\"", "aug.color_jitter=0", "aug.reprob=0", "aug.scale=[1.0, 1.0]",
        "aug.ratio=[1.0, 1.0]", "aug.crop_pct=1.0", "aug.mixup=0", "aug.cutmix=0", "train.smoothing=0",
        "data.mean=0.5", "data.std=0.5"};
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        char path[64];
        snprintf(path, sizeof(path), "%.*s", (int)(strchr(defaults[i], '=') - defaults[i]), defaults[i]);
        if (!config_has(c, path)) config_set(c, defaults[i]);
    }
}

static void train_config_read(train_config *t, config *c, const model_config *mc) {
    const char *model_name = mc->name;
    t->diffusion = diffusion_task(c, mc);
    t->train_dir = config_str(c, "data.train", "", NULL); /* required: read_all says so, after typos */
    t->val_dir = config_str(c, "data.val", "", NULL);
    t->workers = config_int(c, "data.workers", 2, 1, 64);
    precision_parse(config_str(c, "train.precision", "fp32", precision_names), &t->prec);
    t->device = config_str(c, "train.device", "cpu", NULL); /* checked where it is selected */
    t->init = config_str(c, "train.init", "", NULL);        /* read where the model is made */
    t->init_ema = config_bool(c, "train.init_ema", false);
    t->init_class_map = config_str(c, "train.init_class_map", "", NULL);
    if (t->init_class_map[0] && !t->init[0])
        config_error("train.init_class_map", "picks rows of train.init's head: set train.init too");
    if (t->init_class_map[0] && t->diffusion)
        config_error("train.init_class_map",
                     "picks rows of a classifier's head; a diffusion model's class embedding is "
                     "its conditioning");
    t->epochs = config_int(c, "train.epochs", 300, 1, 100000);
    t->cooldown_epochs = config_int(c, "train.cooldown_epochs", 0, 0, 100000);
    t->warmup_epochs = config_int(c, "train.warmup_epochs", 20, 0, 100000);
    t->batch = config_int(c, "train.batch", 128, 1, 1 << 16);
    t->accum = config_int(c, "train.accum_steps", 1, 1, 1024);
    t->lr = config_float(c, "train.lr", 5e-4, 0, 1e12);
    t->warmup_lr = config_float(c, "train.warmup_lr", 5e-7, 0, 10);
    t->min_lr = config_float(c, "train.min_lr", 5e-6, 0, 10);
    t->lr_scale_batch = config_float(c, "train.lr_scale_batch", 512, 0, 1 << 20);
    t->weight_decay = config_float(c, "train.weight_decay", 0.05, 0, 10);
    t->clip_grad = config_float(c, "train.clip_grad", 5.0, 0, 1e9);
    double betas[2], def_betas[2] = {0.9, 0.999};
    config_float_array(c, "train.betas", 2, def_betas, betas, 0, 0.999999);
    t->beta1 = betas[0];
    t->beta2 = betas[1];
    t->eps = config_float(c, "train.eps", 1e-8, 0, 1);
    t->seed = (uint64_t)config_int(c, "train.seed", 0, 0, 2147483647);
    t->mix.smoothing = config_float(c, "train.smoothing", 0.1, 0, 0.999);
    t->mix.mixup_alpha = config_float(c, "aug.mixup", 0.8, 0, 100);
    t->mix.cutmix_alpha = config_float(c, "aug.cutmix", 1.0, 0, 100);
    t->mix.prob = config_float(c, "aug.mixup_prob", 1.0, 0, 1);
    t->mix.switch_prob = config_float(c, "aug.mixup_switch_prob", 0.5, 0, 1);
    t->ema = config_bool(c, "ema.enabled", false);
    t->ema_decay = config_float(c, "ema.decay", 0.9999, 0, 1);
    t->ema_warmup = config_bool(c, "ema.warmup", false);
    t->run_name = config_str(c, "run.name", model_name, NULL);
    /* one folder under run.out: a path would put the run elsewhere than --out says */
    if (!t->run_name[0] || strchr(t->run_name, '/') || !strcmp(t->run_name, ".") ||
        !strcmp(t->run_name, ".."))
        config_error("run.name",
                     "\"%s\" is not a folder name (one, not '.' or '..', without '/'); "
                     "run.out or --out says where runs go",
                     t->run_name);
    t->out = config_str(c, "run.out", "checkpoints", NULL);
    t->log_every = config_int(c, "run.log_every", 50, 1, 1 << 30);
    t->stop_after = config_int(c, "run.stop_after_steps", 0, 0, 2147483647);
    /* a paper config's step is 1024-4096 images, ~2.5 minutes on 2 cores: a checkpoint every ~25 */
    t->save_every = config_int(c, "run.save_every_steps", 10, 0, 2147483647);
    if (t->diffusion && (t->mix.mixup_alpha > 0 || t->mix.cutmix_alpha > 0))
        config_error(t->mix.mixup_alpha > 0 ? "aug.mixup" : "aug.cutmix",
                     "train.task \"diffusion\" mixes no images (set 0)");
}

static bool make_dirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST) return false;
            *p = '/';
        }
    return !mkdir(buf, 0755) || errno == EEXIST;
}

/* the rank of class k in row (K scores): how many classes score higher, ties going to the lower
 * class */
static int rank_of(const float *row, int K, int k) {
    int above = 0;
    for (int j = 0; j < K; j++) above += row[j] > row[k] || (row[j] == row[k] && j < k);
    return above;
}

eval_result evaluate(model *m, loader *l, const int *classes, int n_classes,
                     const label_sets *real) {
    CHECK(!(classes && real), "evaluate: real label sets are of all the model's classes");
    eval_result r = {0};
    bool prev = tape_set_grad_enabled(false);
    forward_opts fo = {.train = false};
    double t0 = clock_seconds(), loss_sum = 0;
    long correct1 = 0, correct5 = 0, real1 = 0, real5 = 0, real_n = 0;
    const model_config *mc = &m->cfg;
    loader_start_epoch(l, 0, 0);
    batch b;
    while (loader_next(l, &b)) {
        if (!b.n) continue; /* this rank's part of a short last batch, or only unreadable files */
        int S = mc->img_size, K = mc->num_classes;
        const float *images = backend_floats(b.images, (int64_t)b.n * S * S * mc->in_chans);
        tensor *logits = model_forward(m, tensor_wrap((float *)images, 4, (int[]){b.n, S, S, mc->in_chans}), &fo);
        const float *scores =
            backend_read(arena_alloc(&vitc_arena, sizeof(float) * (size_t)b.n * K), logits->data,
                         (int64_t)b.n * K);
        if (classes) { /* the loss and the ranks over those classes' scores alone */
            float *picked = arena_alloc(&vitc_arena, sizeof(float) * (size_t)b.n * n_classes);
            for (int i = 0; i < b.n; i++)
                for (int k = 0; k < n_classes; k++)
                    picked[(size_t)i * n_classes + k] = scores[(size_t)i * K + classes[k]];
            scores = picked, K = n_classes;
            logits =
                tensor_wrap((float *)backend_floats(picked, (int64_t)b.n * K), 2, (int[]){b.n, K});
        }
        tensor *loss = op_cross_entropy_labels(logits, b.labels, 0.0f);
        float value;
        loss_sum += *backend_read(&value, loss->data, 1) * b.n;
        for (int i = 0; i < b.n; i++) {
            const float *row = scores + (size_t)i * K;
            int above = rank_of(row, K, b.labels[i]);
            correct1 += above < 1;
            correct5 += above < 5;
            if (!real) continue;
            const int *set = real->classes + real->start[b.samples[i]];
            int set_n = real->start[b.samples[i] + 1] - real->start[b.samples[i]], best = K;
            if (!set_n) continue;
            for (int j = 0; j < set_n; j++) {
                int rank = rank_of(row, K, set[j]);
                best = rank < best ? rank : best;
            }
            real_n++;
            real1 += best < 1;
            real5 += best < 5;
        }
        r.n += b.n;
        tape_reset();
        arena_reset(&vitc_arena);
    }
    tape_set_grad_enabled(prev);
    /* each rank evaluated its part of every batch: the counts add up to one process's exactly */
    int64_t counts[6] = {correct1, correct5, r.n, real1, real5, real_n};
    dist_sum_i64(counts, 6);
    dist_sum_f64(&loss_sum, 1);
    r.n = (int)counts[2], r.real_n = (int)counts[5];
    if (r.n) {
        r.top1 = 100.0 * (double)counts[0] / r.n;
        r.top5 = 100.0 * (double)counts[1] / r.n;
        r.loss = loss_sum / r.n;
    }
    if (r.real_n) {
        r.real_top1 = 100.0 * (double)counts[3] / r.real_n;
        r.real_top5 = 100.0 * (double)counts[4] / r.real_n;
    }
    r.img_per_s = r.n / (clock_seconds() - t0);
    return r;
}

eval_result evaluate_diffusion(model *m, loader *l, uint64_t seed, int batch_size) {
    eval_result r = {0};
    bool prev = tape_set_grad_enabled(false);
    double t0 = clock_seconds(), loss_sum = 0;
    rng g; /* a key of its own, apart from every training step's */
    rng_seed(&g, ~seed, RNG_TRANSPORT);
    uint64_t key = rng_u64(&g);
    loader_start_epoch(l, 0, 0);
    batch b;
    /* the same (t, x0) for sample i of the set in every evaluation and on any number of ranks:
     * this rank's part of batch k starts at sample k batch + its offset (loader_shard's split) */
    for (int64_t k = 0; loader_next(l, &b); k++) {
        int64_t whole = b.n, offset = 0; /* the whole batch's size, of which this rank holds b.n */
        if (dist_size() > 1) {
            dist_sum_i64(&whole, 1);
            offset = whole * dist_rank() / dist_size();
        }
        if (!b.n) continue;
        tensor *loss = diffusion_loss(m, b.images, b.labels, b.n, key, k * batch_size + offset,
                                      (forward_opts){.train = false});
        float value;
        loss_sum += (double)*backend_read(&value, loss->data, 1) * b.n;
        r.n += b.n;
        tape_reset();
        arena_reset(&vitc_arena);
    }
    tape_set_grad_enabled(prev);
    int64_t n = r.n;
    dist_sum_i64(&n, 1);
    dist_sum_f64(&loss_sum, 1);
    r.n = (int)n;
    if (r.n) r.loss = loss_sum / r.n;
    r.img_per_s = r.n / (clock_seconds() - t0);
    return r;
}

/* a bar redrawn at most 5 times a second on a terminal; one line per log step otherwise */
static void progress(bool quiet, bool log_step, int epoch, int epochs, int done, int total,
                     double loss, double lr, double img_s, double eta_s, size_t mem) {
    static double last_draw;
    static int tty = -1;
    if (quiet) return;
    if (tty < 0) tty = isatty(fileno(stderr));
    if (tty ? clock_seconds() - last_draw < 0.2 && done < total : !log_step) return;
    last_draw = clock_seconds();
    int width = 24, filled = total ? width * done / total : width;
    char bar[32];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[width] = 0;
    fprintf(stderr, "%sepoch %d/%d [%s] %d/%d loss %.4f lr %.2e %.0f img/s ETA %d:%02d mem %zu MiB%s",
            tty ? "\r" : "", epoch + 1, epochs, bar, done, total, loss, lr, img_s, (int)eta_s / 60,
            (int)eta_s % 60, mem >> 20, tty ? " " : "\n");
    fflush(stderr);
}

/* every section of a training config, validated; unknown keys are errors */
static void read_all(config *c, model_config *mc, augment_config *ac, train_config *t) {
    model_config_read(mc, c);
    if (diffusion_task(c, mc)) diffusion_aug_defaults(c);
    augment_config_read(ac, c);
    train_config_read(t, c, mc);
    /* a typo first: it is often why a required key looks missing */
    config_check_unknown(c);
    if (!t->train_dir[0]) config_error("data.train", "required key is missing");
}

void train_check_config(config *c) {
    model_config mc;
    augment_config ac;
    train_config t;
    read_all(c, &mc, &ac, &t);
}

/* A micro-batch ready for its step: the loader's batch, mixed (classification), with its images and
 * soft targets as the kernels see them (on a device, copies under way: backend_stage) */
typedef struct micro_batch {
    batch b;
    const float *images, *targets;
    bool ready;
} micro_batch;

/* A run between its steps: what train_run opens, the epoch loop uses and train_run closes. */
typedef struct run {
    train_config t;
    model_config mc;
    augment_config ac;
    bool quiet, lead; /* lead: rank 0, the one process that logs and writes checkpoints */
    dataset train_ds, val_ds;
    loader *train_l, *val_l;
    model *m;
    adamw opt;
    float *ema;             /* beside the parameters (their memory) */
    float *targets;         /* the batch's soft labels (batch, classes) after mixup, on the host */
    backend_stager *images_stage, *targets_stage; /* classification: the batches' way to the device */
    micro_batch next;       /* fetched while the previous micro-batch computed */
    train_state st;
    lr_schedule sched;
    int steps_per_epoch, total_epochs;
    char *resolved, *classes; /* the resolved config and the class names, as JSON */
    FILE *metrics;
    grad_sync *sync;        /* data-parallel runs */
    double *step_reduced;   /* per step, summed over the ranks: micro-batch loss sums and samples,
                               skipped files, Ctrl-C */
    char metrics_path[1200], last_path[1200], best_path[1200];
    /* the epoch under way in this process: timing, and what the progress line shows */
    double t_epoch, t_log, lr;
    float last_loss;
    bool step_empty; /* the last step had no readable file: no loss to log */
    int timed_batches, since_log;
    size_t mem;
} run;

enum {
    RUN_OK = 0,
    RUN_ERROR = 1,
    RUN_SIGNALLED = 128, /* + the signal's number, the shells' convention */
    RUN_STOPPED = -1 /* run.stop_after_steps */
};

static bool open_datasets(run *r) {
    char err[4096];
    if (!dataset_open(&r->train_ds, r->t.train_dir, err, sizeof(err))) {
        fprintf(stderr, "error: data.train: %s\n", err);
        return false;
    }
    if (r->lead) dataset_note(&r->train_ds, "data.train");
    if (r->train_ds.n_classes != r->mc.num_classes) {
        fprintf(stderr, "error: model.num_classes is %d but %s has %d classes\n", r->mc.num_classes,
                r->t.train_dir, r->train_ds.n_classes);
        return false;
    }
    cJSON *class_list = cJSON_CreateStringArray((const char *const *)r->train_ds.class_names,
                                                r->train_ds.n_classes);
    r->classes = cJSON_PrintUnformatted(class_list);
    cJSON_Delete(class_list);
    if (r->t.val_dir[0] && !dataset_open(&r->val_ds, r->t.val_dir, err, sizeof(err))) {
        fprintf(stderr, "error: data.val: %s\n", err);
        return false;
    }
    if (!r->t.val_dir[0]) return true;
    if (r->lead) dataset_note(&r->val_ds, "data.val");
    char whose[4200];
    snprintf(whose, sizeof(whose), "data.train (%s)", r->t.train_dir);
    class_match match = dataset_numbered_classes(
        &r->val_ds, dataset_match_classes(&r->val_ds, (const char *const *)r->train_ds.class_names,
                                          r->train_ds.n_classes, whose, err, sizeof(err)));
    return dataset_classes_agree(match, "data.val", err, dist_rank() == 0);
}

static bool resume_from(run *r, const char *path) {
    char err[4096];
    st_file f;
    char *saved_cfg = NULL;
    if (!checkpoint_open(&f, path, &saved_cfg, err, sizeof(err))) {
        fprintf(stderr, "error: --resume: %s\n", err);
        return false;
    }
    /* data.train may have changed (--set): its labels must still mean the checkpoint's classes */
    class_match match =
        checkpoint_match_classes(&f, &r->train_ds, r->mc.num_classes, NULL, 0, err, sizeof(err));
    bool ok = dataset_classes_agree(match, "data.train", err, dist_rank() == 0);
    free(saved_cfg);
    if (!ok) {
        st_close(&f);
        return false;
    }
    if (r->ema && !checkpoint_has_ema(&f) && r->lead)
        fprintf(stderr,
                "note: %s has no EMA weights (its run had ema.enabled false): the EMA "
                "starts from its weights\n",
                path);
    ok = checkpoint_restore(&f, path, r->m, &r->opt, r->ema, &r->st, err, sizeof(err));
    st_close(&f);
    if (!ok) fprintf(stderr, "error: --resume: %s\n", err);
    else if (!r->quiet)
        printf("resumed from %s at epoch %d, step %lld\n", path, r->st.epoch, (long long)r->st.step);
    return ok;
}

/* whether a resumed run takes as many steps an epoch as the checkpoint's (its train.batch,
 * train.accum_steps and data.train's size), so that the checkpoint's step falls in its epoch and
 * the schedule's place carries over */
static bool resume_fits(const run *r) {
    const train_state *st = &r->st;
    int64_t first = (int64_t)st->epoch * r->steps_per_epoch;
    bool same = st->steps_per_epoch == r->steps_per_epoch || st->steps_per_epoch == 0;
    if (same && st->step >= first && st->step <= first + r->steps_per_epoch) return true;
    char why[160];
    if (st->steps_per_epoch)
        snprintf(why, sizeof(why),
                 "the checkpoint's run took %d steps an epoch, and this one would take %d",
                 st->steps_per_epoch, r->steps_per_epoch);
    else /* (a checkpoint from before steps_per_epoch was kept) */
        snprintf(why, sizeof(why),
                 "the checkpoint's step %lld is not in its epoch %d at %d steps an epoch",
                 (long long)st->step, st->epoch + 1, r->steps_per_epoch);
    fprintf(
        stderr,
        "error: --resume: %s (train.batch %d x train.accum_steps %d over %d images): resume with "
        "the train.batch, train.accum_steps and data.train it had\n",
        why, r->t.batch, r->t.accum, r->train_ds.n);
    return false;
}

/* false after the error where metrics.jsonl lost a line (a full disk): a checkpoint must not claim
 * a log that is not there */
static bool metrics_written(run *r) {
    if (fflush(r->metrics) == 0 && !ferror(r->metrics)) return true;
    fprintf(stderr, "\nerror: cannot write %s: %s\n", r->metrics_path, strerror(errno));
    return false;
}

/* Whether dir holds a checkpoint of another run (its path, the last's or else the best's, in path),
 * which this run would write over: a run started without --resume, or resumed from a checkpoint
 * kept elsewhere. */
static const char *const run_checkpoints[] = {"last.safetensors", "best.safetensors"};

static bool holds_other_run(const char *dir, const char *resume, char *path, size_t len) {
    for (int i = 0; i < 2; i++) {
        snprintf(path, len, "%s/%s", dir, run_checkpoints[i]);
        if (access(path, F_OK) != 0) continue;
        if (!resume) return true;
        char from[PATH_MAX]; /* resumed from a file of this directory: the same run, going on */
        file_folder(resume, from, sizeof(from));
        char *a = realpath(dir, NULL), *b = realpath(from, NULL);
        bool same = a && b && !strcmp(a, b);
        free(a), free(b);
        return !same;
    }
    return false;
}

/* checkpoints/<run.name>/ with config.json and metrics.jsonl; a resumed run first cuts the metrics
 * logged after its checkpoint, which it is about to log again */
static bool open_run_dir(run *r, const train_options *o) {
    char dir[1024], path[1200];
    bool resumed = o->resume != NULL;
    snprintf(dir, sizeof(dir), "%s/%s", r->t.out, r->t.run_name);
    if (!o->overwrite && holds_other_run(dir, o->resume, path, sizeof(path))) {
        fprintf(stderr,
                "error: %s holds the checkpoints of a run, which this one would write over: "
                "continue it with --resume %s, give this run another run.name or --out, or start "
                "over with --overwrite\n",
                dir, path);
        return false;
    }
    if (!make_dirs(dir)) {
        fprintf(stderr, "error: cannot create run directory %s: %s\n", dir, strerror(errno));
        return false;
    }
    /* starting over: the other run's best must not pass for this one's (a run without a validation
     * set writes none) */
    for (int i = 0; !resumed && o->overwrite && i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, run_checkpoints[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            fprintf(stderr, "error: --overwrite: cannot remove %s: %s\n", path, strerror(errno));
            return false;
        }
    }
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *cf = fopen(path, "w");
    if (!cf) {
        fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    fputs(r->resolved, cf);
    fclose(cf);
    snprintf(r->metrics_path, sizeof(r->metrics_path), "%s/metrics.jsonl", dir);
    snprintf(r->last_path, sizeof(r->last_path), "%s/last.safetensors", dir);
    snprintf(r->best_path, sizeof(r->best_path), "%s/best.safetensors", dir);
    struct stat sb;
    if (resumed && r->st.metrics_bytes >= 0 && stat(r->metrics_path, &sb) == 0 && sb.st_size > r->st.metrics_bytes &&
        truncate(r->metrics_path, (off_t)r->st.metrics_bytes) != 0) {
        fprintf(stderr, "error: cannot truncate %s: %s\n", r->metrics_path, strerror(errno));
        return false;
    }
    r->metrics = fopen(r->metrics_path, resumed ? "a" : "w");
    if (!r->metrics) {
        fprintf(stderr, "error: cannot write %s: %s\n", r->metrics_path, strerror(errno));
        return false;
    }
    if (!resumed) {
        fprintf(r->metrics,
                "{\"type\": \"start\", \"model\": \"%s\", \"params\": %lld, \"macs\": %.0f, "
                "\"train_images\": %d, \"threads\": %d, \"epoch\": %d}\n",
                r->mc.name, (long long)r->m->ps.numel, model_macs(r->m), r->train_ds.n,
                vitc_threads(), r->st.epoch);
    }
    return metrics_written(r);
}

/* Every rank starts from rank 0's weights, optimizer state, EMA and training state (the same after
 * an initialisation from the same seed or a resume from the same file, but then it is certain). */
static void share_start(run *r) {
    if (dist_size() == 1) return;
    const param_store *ps = &r->m->ps;
    size_t bytes = sizeof(float) * (size_t)ps->span;
    /* device blocks travel through a host copy */
    float *host = ps->mem == &host_memory ? NULL : xmalloc(bytes);
    float *blocks[4] = {ps->data, r->opt.m, r->opt.v, r->ema};
    for (int i = 0; i < 4; i++) {
        if (!blocks[i]) continue;
        float *staged = (float *)params_read(ps, host, blocks[i], ps->span);
        dist_broadcast(staged, bytes, 0);
        params_write(ps, blocks[i], staged, ps->span);
    }
    free(host);
    dist_broadcast(&r->opt.step, sizeof(r->opt.step), 0);
    dist_broadcast(&r->st, sizeof(r->st), 0);
}

/* train.init: a fine-tuning starts from another run's (or an official, converted) checkpoint's
 * parameters; a head for other classes starts afresh. (A resumed run has its own.) */
static bool init_weights(run *r, bool *ema_set) {
    char note[1024], err[4608];
    /* a diffusion run's EMA from the checkpoint's, as the mediators' resolution fine-tune */
    float *ema = r->t.diffusion ? r->ema : NULL;
    if (!checkpoint_init_weights(r->t.init, r->t.init_ema, r->t.init_class_map, r->m, ema, ema_set,
                                 note, sizeof(note), err, sizeof(err))) {
        fprintf(stderr, "error: train.init: %s\n", err);
        return false;
    }
    if (r->lead && (note[0] || *ema_set))
        fprintf(stderr, "note: train.init: %s%s%s\n", note, note[0] && *ema_set ? "; " : "",
                *ema_set ? "the EMA starts from the checkpoint's" : "");
    return true;
}

/* what each rank prepares alone before the first step (rank 0 also its run directory); false after
 * printing the error */
static bool run_prepare(run *r, config *c, const train_options *o) {
    read_all(c, &r->mc, &r->ac, &r->t);
    const train_config *t = &r->t;
    r->lead = dist_rank() == 0;
    r->quiet = o->quiet || !r->lead;
    if (t->batch % dist_size()) {
        fprintf(stderr, "error: train.batch %d is the global batch and must divide among the %d processes\n",
                t->batch, dist_size());
        return false;
    }
    r->resolved = config_to_json(c);
    char err[1536];
    if (!backend_select(t->device, err, sizeof(err))) { /* before the first tensor */
        fprintf(stderr, "error: train.device: %s\n", err);
        return false;
    }
    const char *why;
    if (!vitc_set_precision(t->prec, &why)) {
        fprintf(stderr, "error: train.precision %s: %s\n", precision_name(t->prec), why);
        return false;
    }
    if (!open_datasets(r)) return false;
    r->m = model_create(&r->mc, t->seed);
    adamw_init(&r->opt, &r->m->ps, t->weight_decay, t->beta1, t->beta2, t->eps);
    size_t param_bytes = sizeof(float) * (size_t)r->m->ps.span;
    const memory_ops *mem = r->m->ps.mem;
    if (t->ema) r->ema = mem->alloc(param_bytes);
    bool ema_set = false;
    if (!o->resume && t->init[0] && !init_weights(r, &ema_set)) return false;
    if (r->ema && !ema_set) mem->copy(r->ema, r->m->ps.data, param_bytes);
    r->st = (train_state){.best_top1 = -1, .best_epoch = -1, .metrics_bytes = -1};
    if (o->resume && !resume_from(r, o->resume)) return false;
    r->train_l = loader_create(&r->train_ds, &r->ac, t->batch, true, t->workers, t->seed);
    loader_shard(r->train_l, dist_rank(), dist_size());
    if (r->t.val_dir[0]) {
        r->val_l = loader_create(&r->val_ds, &r->ac, t->batch, false, t->workers, t->seed);
        loader_shard(r->val_l, dist_rank(), dist_size());
    }
    int bpe = loader_batches_per_epoch(r->train_l);
    if (bpe < t->accum) {
        fprintf(stderr, "error: train.batch %d x train.accum_steps %d exceeds the %d training images of %s\n",
                t->batch, t->accum, r->train_ds.n, t->train_dir);
        return false;
    }
    r->steps_per_epoch = bpe / t->accum;
    if (o->resume && !resume_fits(r)) return false;
    r->st.steps_per_epoch = r->steps_per_epoch;
    r->total_epochs = t->epochs + t->cooldown_epochs;
    double scale = t->lr_scale_batch > 0 ? (double)t->batch * t->accum / t->lr_scale_batch : 1.0;
    r->sched = (lr_schedule){t->lr * scale, t->warmup_lr * scale, t->min_lr * scale,
                             (int64_t)t->warmup_epochs * r->steps_per_epoch,
                             (int64_t)t->epochs * r->steps_per_epoch};
    r->targets = xmalloc(sizeof(float) * (size_t)t->batch * r->mc.num_classes);
    if (!t->diffusion) { /* diffusion draws its inputs from the host images (transport_loss) */
        r->images_stage = backend_stager_create((int64_t)t->batch * r->mc.img_size * r->mc.img_size * r->mc.in_chans);
        r->targets_stage = backend_stager_create((int64_t)t->batch * r->mc.num_classes);
    }
    r->step_reduced = xmalloc(sizeof(double) * (size_t)(2 * t->accum + 2));
    return !r->lead || open_run_dir(r, o);
}

/* everything before the first step, every rank agreeing that it went well; false after the error */
static bool run_open(run *r, config *c, const train_options *o) {
    if (!dist_startup_done(run_prepare(r, c, o))) return false;
    share_start(r);
    if (dist_size() > 1) r->sync = grad_sync_create(&r->m->ps);
    if (!r->quiet)
        printf("vitc train: %s (%lld params) on %s: %d images, %d classes; %d steps/epoch, %d epochs; %s\n",
               r->mc.name, (long long)r->m->ps.numel, r->t.train_dir, r->train_ds.n, r->train_ds.n_classes,
               r->steps_per_epoch, r->total_epochs, precision_name(r->t.prec));
    fflush(stdout); /* before the progress lines on stderr, where both go to one file */
    if (r->lead && r->st.epoch >= r->total_epochs)
        fprintf(stderr,
                "note: the run has finished %d epochs of %d: nothing left to train (raise "
                "train.epochs to go on)\n",
                r->st.epoch, r->total_epochs);
    return true;
}

static void run_close(run *r) {
    if (r->metrics) fclose(r->metrics);
    free(r->targets);
    backend_stager_free(r->images_stage);
    backend_stager_free(r->targets_stage);
    free(r->step_reduced);
    grad_sync_free(r->sync);
    if (r->ema) r->m->ps.mem->free(r->ema);
    free(r->resolved);
    cJSON_free(r->classes);
    loader_free(r->train_l);
    loader_free(r->val_l);
    if (r->m) adamw_free(&r->opt);
    model_free(r->m);
    dataset_free(&r->train_ds);
    dataset_free(&r->val_ds);
}

/* mixup and drop path draw from (seed, micro-batch k of the run): a resumed run draws the same */
static uint64_t micro_stream(const train_config *t, int64_t k) { return t->seed * 1000003u + (uint64_t)k; }

/* micro-batch k of the run from the loader into r->next: classification mixes it on the host (every
 * rank its own part of the batch, with the same draws) and starts its move to the device; diffusion
 * draws its inputs from the host images in transport_loss */
static void fetch_micro_batch(run *r, int64_t k) {
    const train_config *t = &r->t;
    int K = r->mc.num_classes, S = r->mc.img_size, C = r->mc.in_chans;
    micro_batch *mb = &r->next;
    CHECK(loader_next(r->train_l, &mb->b), "the training loader ended before step %lld", (long long)(k / t->accum));
    if (!t->diffusion) {
        rng g;
        rng_seed(&g, micro_stream(t, k), RNG_MIXUP);
        mixup_apply(&t->mix, mb->b.images, mb->b.n, S, S, C, mb->b.labels, K, r->targets, &g);
        mb->images = backend_stage(r->images_stage, mb->b.images, (int64_t)mb->b.n * S * S * C);
        mb->targets = backend_stage(r->targets_stage, r->targets, (int64_t)mb->b.n * K);
    }
    mb->ready = true;
}

/* one optimizer step: train.accum_steps micro-batches forward and backward, clipping, AdamW, EMA;
 * false (after the error) on a non-finite loss, which leaves the last checkpoint as it was */
static bool train_step(run *r, int epoch) {
    const train_config *t = &r->t;
    int K = r->mc.num_classes, S = r->mc.img_size, C = r->mc.in_chans;
    int skipped = 0;
    const int64_t epoch_end = (int64_t)(epoch + 1) * r->steps_per_epoch * t->accum; /* in micro-batches */
    for (int micro = 0; micro < t->accum; micro++) {
        const int64_t k = r->st.step * t->accum + micro;
        if (!r->next.ready) fetch_micro_batch(r, k);
        micro_batch mb = r->next;
        r->next.ready = false;
        skipped += mb.b.skipped;
        bool last_micro = micro == t->accum - 1;
        if (micro == 0) params_zero_grad(&r->m->ps);
        r->step_reduced[micro] = r->step_reduced[t->accum + micro] = 0;
        r->timed_batches++;
        r->since_log++;
        if (mb.b.n == 0) { /* every file of this rank's part unreadable: it adds no gradient */
            if (k + 1 < epoch_end) fetch_micro_batch(r, k + 1);
            if (r->sync && last_micro) { /* (with nothing on the tape, every bucket at once) */
                grad_sync_arm(r->sync);
                grad_sync_finish(r->sync);
            }
            continue;
        }
        /* drop path draws per sample of the whole batch, as one process does */
        uint64_t stream = micro_stream(t, k);
        rng g;
        int64_t first_sample = (int64_t)dist_rank() * (t->batch / dist_size());
        tensor *loss;
        if (t->diffusion) {
            /* t and the noise x0 per sample of the whole batch from (seed, micro-batch); label
             * dropout (inside the model) from the drop-path stream, also per sample */
            rng_seed(&g, stream, RNG_TRANSPORT);
            uint64_t key = rng_u64(&g);
            rng_seed(&g, stream, RNG_DROP_PATH);
            g.first_sample = first_sample;
            loss = diffusion_loss(r->m, mb.b.images, mb.b.labels, mb.b.n, key, first_sample,
                                  (forward_opts){.train = true, .rng = &g});
        } else {
            rng_seed(&g, stream, RNG_DROP_PATH);
            g.first_sample = first_sample;
            forward_opts fo = {.train = true, .rng = &g};
            tensor *x = tensor_wrap((float *)mb.images, 4, (int[]){mb.b.n, S, S, C});
            tensor *y = tensor_wrap((float *)mb.targets, 2, (int[]){mb.b.n, K});
            loss = op_cross_entropy(model_forward(r->m, x, &fo), y);
        }
        float lv;
        lv = *backend_read(&lv, loss->data, 1);
        if (!isfinite(lv)) {
            fprintf(stderr, "\nerror: loss is %s at epoch %d, step %lld: stopping; the last good "
                    "checkpoint (%s) is kept\n", isnan(lv) ? "NaN" : "Inf", epoch + 1,
                    (long long)r->st.step, r->last_path);
            return false;
        }
        const float seed_grad = 1.0f / (float)t->accum;
        if (r->sync && last_micro) grad_sync_arm(r->sync);
        tape_backward_consuming(loss, &seed_grad);
        /* the next micro-batch of the epoch is read, mixed and moved while this one's backward
         * computes on a device (the loader's batch it replaces is no longer read: on the CPU the
         * backward is done, on a device it reads the copies) */
        if (k + 1 < epoch_end) fetch_micro_batch(r, k + 1);
        if (r->sync && last_micro) grad_sync_finish(r->sync);
        tape_reset();
        const arena *data = vitc_data_arena();
        r->mem = vitc_arena.peak + (data != &vitc_arena ? data->peak : 0) +
                 (size_t)r->m->ps.span * 4 * (t->ema ? 5 : 4);
        arena_reset(&vitc_arena);
        r->step_reduced[micro] = (double)lv * mb.b.n;
        r->step_reduced[t->accum + micro] = mb.b.n;
    }
    /* a micro-batch's loss is the mean over the samples of all ranks' parts; a Ctrl-C seen by any
     * rank stops all of them at this same step */
    double *reduced = r->step_reduced, samples = 0;
    reduced[2 * t->accum] = skipped;
    reduced[2 * t->accum + 1] = interrupted;
    if (dist_size() > 1) dist_sum_f64(reduced, 2 * t->accum + 2);
    for (int micro = 0; micro < t->accum; micro++) {
        double n = reduced[t->accum + micro], lv = n > 0 ? reduced[micro] / n : 0;
        if (n > 0) r->st.epoch_loss_sum += lv, r->st.epoch_batches++, r->last_loss = (float)lv;
        samples += n;
    }
    r->st.epoch_skipped += (int)reduced[2 * t->accum];
    if (reduced[2 * t->accum + 1] > 0) interrupted = 1;
    r->lr = lr_at(&r->sched, r->st.step);
    r->step_empty = samples == 0;
    if (r->step_empty) { /* no gradient to step with: the weights, moments and EMA stay */
        if (r->lead)
            fprintf(stderr, "\nwarning: step %lld: no file of its batch could be read: no update\n",
                    (long long)r->st.step + 1); /* (as the metrics number steps) */
        r->st.step++;
        return true;
    }
    clip_grad_norm(&r->m->ps, t->clip_grad);
    adamw_step(&r->opt, &r->m->ps, r->lr);
    if (r->ema) {
        double d = t->ema_warmup ? fmin(t->ema_decay, (1.0 + r->st.step) / (10.0 + r->st.step)) : t->ema_decay;
        ema_update(r->ema, &r->m->ps, d);
    }
    r->st.step++;
    return true;
}

/* a metrics line every run.log_every steps and at the epoch's end; the progress line */
static void log_step(run *r, int epoch) {
    const train_config *t = &r->t;
    int total = r->steps_per_epoch * t->accum;
    int done = (int)(r->st.step - (int64_t)epoch * r->steps_per_epoch) * t->accum;
    double img_s = (double)r->timed_batches * t->batch / fmax(clock_seconds() - r->t_epoch, 1e-9);
    bool logged = r->st.step % t->log_every == 0 || done == total;
    if (logged && r->lead && !r->step_empty) {
        fprintf(r->metrics,
                "{\"type\": \"step\", \"epoch\": %d, \"step\": %lld, \"loss\": %.8g, \"lr\": "
                "%.8g, \"img_s\": %.2f}\n",
                epoch + 1, (long long)r->st.step, r->last_loss, r->lr,
                r->since_log * t->batch / fmax(clock_seconds() - r->t_log, 1e-9));
        fflush(r->metrics);
        r->t_log = clock_seconds();
        r->since_log = 0;
    }
    progress(r->quiet, logged, epoch, r->total_epochs, done, total,
             r->st.epoch_loss_sum / fmax(r->st.epoch_batches, 1), r->lr, img_s,
             (total - done) * t->batch / fmax(img_s, 1e-9), r->mem);
}

/* last.safetensors, resumable from this very step */
static bool save_last(run *r) {
    if (!r->lead) return true;
    char err[4096];
    struct stat sb;
    if (!metrics_written(r)) return false;
    r->st.metrics_bytes = fstat(fileno(r->metrics), &sb) == 0 ? (int64_t)sb.st_size : -1;
    if (checkpoint_save(r->last_path, r->m, r->resolved, r->classes, &r->opt, r->ema, &r->st, err, sizeof(err)))
        return true;
    fprintf(stderr, "\nerror: %s\n", err);
    return false;
}

/* the steps of the epoch under way, from where a resumed run left it, with step checkpoints */
static int train_epoch(run *r) {
    const train_config *t = &r->t;
    int epoch = r->st.epoch;
    int64_t end_step = (int64_t)(epoch + 1) * r->steps_per_epoch;
    int done_steps = (int)(r->st.step - (int64_t)epoch * r->steps_per_epoch);
    loader_start_epoch(r->train_l, epoch, done_steps * t->accum);
    r->t_epoch = r->t_log = clock_seconds();
    r->timed_batches = r->since_log = 0;
    while (r->st.step < end_step) {
        if (!train_step(r, epoch)) return RUN_ERROR;
        log_step(r, epoch);
        if (interrupted || (t->stop_after && r->st.step >= t->stop_after)) {
            if (!save_last(r)) return RUN_ERROR;
            if (r->lead) fprintf(stderr, "\n%s at step %lld: saved a resumable checkpoint to %s\n",
                    interrupted ? "interrupted" : "stopping", (long long)r->st.step, r->last_path);
            /* (a rank stopped by another's signal exits as after Ctrl-C) */
            return interrupted ? RUN_SIGNALLED + (stop_signal ? stop_signal : SIGINT)
                               : RUN_STOPPED;
        }
        /* the epoch's end writes its own checkpoint */
        if (t->save_every && r->st.step % t->save_every == 0 && r->st.step < end_step && !save_last(r))
            return RUN_ERROR;
    }
    return RUN_OK;
}

/* validation of the weights and of their EMA (swapped in for it) */
static eval_result evaluate_one(run *r) {
    return r->t.diffusion ? evaluate_diffusion(r->m, r->val_l, r->t.seed, r->t.batch)
                          : evaluate(r->m, r->val_l, NULL, 0, NULL);
}

static void evaluate_run(run *r, eval_result *raw, eval_result *ev_ema) {
    if (!r->val_l) return;
    *raw = evaluate_one(r);
    if (!r->ema) return;
    size_t bytes = sizeof(float) * (size_t)r->m->ps.span;
    const memory_ops *mem = r->m->ps.mem;
    float *keep = mem->alloc(bytes);
    mem->copy(keep, r->m->ps.data, bytes);
    mem->copy(r->m->ps.data, r->ema, bytes);
    *ev_ema = evaluate_one(r);
    mem->copy(r->m->ps.data, keep, bytes);
    mem->free(keep);
}

/* the training loss and counts an epoch sums, before the next epoch's first step */
static void epoch_counters_clear(train_state *st) {
    st->epoch_loss_sum = 0;
    st->epoch_batches = st->epoch_skipped = 0;
}

/* validation, the epoch's summary (metrics and terminal), last and best checkpoints */
static int finish_epoch(run *r) {
    double t_trained = clock_seconds() - r->t_epoch;
    if (!r->quiet && isatty(fileno(stderr))) fputc('\n', stderr);
    train_state *st = &r->st;
    if (st->epoch_batches == 0) { /* (the same count on every rank) */
        if (r->lead)
            fprintf(stderr,
                    "\nerror: data.train: no file of epoch %d could be read (the warnings "
                    "above name them)\n",
                    st->epoch + 1);
        return RUN_ERROR;
    }
    st->epoch++;
    eval_result raw = {0}, ev_ema = {0};
    evaluate_run(r, &raw, &ev_ema);
    if (r->val_l && raw.n == 0) { /* (the count summed over the ranks) */
        if (r->lead)
            fprintf(stderr,
                    "\nerror: data.val: none of its files could be read (the warnings above "
                    "name them); the epoch's weights are saved in %s\n",
                    r->last_path);
        epoch_counters_clear(st);
        save_last(r);
        return RUN_ERROR;
    }
    bool best;
    if (r->t.diffusion) { /* best_top1 holds the lowest validation loss (raw or EMA) of diffusion */
        double loss = r->ema && ev_ema.loss < raw.loss ? ev_ema.loss : raw.loss;
        best = r->val_l && (st->best_top1 < 0 || loss < st->best_top1);
        if (best) st->best_top1 = loss, st->best_epoch = st->epoch;
    } else {
        double top1 = r->ema && ev_ema.top1 > raw.top1 ? ev_ema.top1 : raw.top1;
        best = r->val_l && top1 > st->best_top1;
        if (best) st->best_top1 = top1, st->best_epoch = st->epoch;
    }
    double train_loss = st->epoch_loss_sum / (st->epoch_batches ? st->epoch_batches : 1);
    double epoch_s = clock_seconds() - r->t_epoch;
    if (r->lead) { /* validation's figures where there was one, the EMA's where there is one */
        fprintf(r->metrics,
                "{\"type\": \"epoch\", \"epoch\": %d, \"step\": %lld, \"train_loss\": %.6g",
                st->epoch, (long long)st->step, train_loss);
        if (r->val_l && r->t.diffusion) {
            fprintf(r->metrics, ", \"val_loss\": %.6g", raw.loss);
            if (r->ema) fprintf(r->metrics, ", \"ema_val_loss\": %.6g", ev_ema.loss);
        } else if (r->val_l) {
            fprintf(r->metrics, ", \"val_top1\": %.4f, \"val_top5\": %.4f, \"val_loss\": %.6g",
                    raw.top1, raw.top5, raw.loss);
            if (r->ema)
                fprintf(r->metrics, ", \"ema_top1\": %.4f, \"ema_top5\": %.4f", ev_ema.top1,
                        ev_ema.top5);
        }
        fprintf(r->metrics, ", \"time_s\": %.2f, \"train_img_s\": %.2f, \"skipped_files\": %d}\n",
                epoch_s, r->timed_batches * r->t.batch / fmax(t_trained, 1e-9), st->epoch_skipped);
        fflush(r->metrics);
    }
    if (!r->quiet) {
        printf("epoch %d/%d: train loss %.4f", st->epoch, r->total_epochs, train_loss);
        if (r->val_l && r->t.diffusion) printf(", val loss %.4f", raw.loss);
        else if (r->val_l) printf(", val top-1 %.2f%% top-5 %.2f%% loss %.4f", raw.top1, raw.top5, raw.loss);
        if (r->val_l && r->ema && r->t.diffusion) printf(", EMA val loss %.4f", ev_ema.loss);
        else if (r->val_l && r->ema) printf(", EMA top-1 %.2f%%", ev_ema.top1);
        if (st->epoch_skipped) printf(", %d unreadable files skipped", st->epoch_skipped);
        printf(" (%.1fs)\n", epoch_s);
        fflush(stdout);
    }
    epoch_counters_clear(st);
    if (!save_last(r)) return RUN_ERROR;
    char err[4096];
    if (r->lead && best && !checkpoint_save(r->best_path, r->m, r->resolved, r->classes, &r->opt, r->ema, st, err,
                                 sizeof(err))) {
        fprintf(stderr, "error: %s\n", err);
        return RUN_ERROR;
    }
    return RUN_OK;
}

int train_run(config *c, const train_options *o) {
    run r = {0};
    if (!run_open(&r, c, o)) { /* every rank knows: each ends with its exit code */
        run_close(&r);
        return RUN_ERROR;
    }
    int code = RUN_OK;
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    interrupted = stop_signal = 0;
    while (code == RUN_OK && r.st.epoch < r.total_epochs) {
        code = train_epoch(&r);
        if (code == RUN_OK) code = finish_epoch(&r);
    }
    if (code == RUN_OK && r.lead) { /* marks a finished run (tools/sweep.sh skips these) */
        fprintf(r.metrics, r.t.diffusion ? "{\"type\": \"end\", \"epochs\": %d, \"best_val_loss\": %.6g, \"best_epoch\": %d}\n"
                                         : "{\"type\": \"end\", \"epochs\": %d, \"best_top1\": %.4f, \"best_epoch\": %d}\n",
                r.st.epoch, r.st.best_top1, r.st.best_epoch);
        if (!metrics_written(&r)) code = RUN_ERROR;
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    /* one rank's error during training ends every rank now: the others would wait for it */
    if (code == RUN_ERROR && dist_size() > 1) dist_abort(RUN_ERROR);
    run_close(&r);
    return code == RUN_STOPPED ? 0 : code;
}
