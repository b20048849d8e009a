#include "trainer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../models/model.h"
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../core/threads.h"
#include "../data/data.h"
#include "../ops/ops.h"
#include "checkpoint.h"
#include "mixup.h"
#include "optim.h"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct train_config {
    int epochs, cooldown_epochs, warmup_epochs, batch, accum, workers, log_every, stop_after;
    double lr, warmup_lr, min_lr, lr_scale_batch, weight_decay, clip_grad, beta1, beta2, eps;
    uint64_t seed;
    mixup_config mix;
    bool ema, ema_warmup;
    double ema_decay;
    const char *train_dir, *val_dir, *run_name, *out;
} train_config;

static void train_config_read(train_config *t, config *c, const char *model_name) {
    t->train_dir = config_str(c, "data.train", NULL, NULL);
    t->val_dir = config_str(c, "data.val", "", NULL);
    t->workers = config_int(c, "data.workers", 2, 1, 64);
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
    t->out = config_str(c, "run.out", "checkpoints", NULL);
    t->log_every = config_int(c, "run.log_every", 50, 1, 1 << 30);
    t->stop_after = config_int(c, "run.stop_after_steps", 0, 0, 2147483647);
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

eval_result evaluate(model *m, loader *l) {
    eval_result r = {0};
    bool prev = tape_set_grad_enabled(false);
    forward_opts fo = {.train = false};
    double t0 = now_s(), loss_sum = 0;
    long correct1 = 0, correct5 = 0;
    const model_config *mc = &m->cfg;
    loader_start_epoch(l, 0);
    batch b;
    while (loader_next(l, &b)) {
        tensor *x = tensor_wrap(b.images, 4, (int[]){b.n, mc->img_size, mc->img_size, mc->in_chans});
        tensor *logits = model_forward(m, x, &fo);
        tensor *loss = op_cross_entropy_labels(logits, b.labels, 0.0f);
        loss_sum += loss->data[0] * b.n;
        int K = mc->num_classes;
        for (int i = 0; i < b.n; i++) {
            const float *row = logits->data + (size_t)i * K;
            float target = row[b.labels[i]];
            int above = 0; /* classes scoring higher than the true one (ties count against) */
            for (int k = 0; k < K; k++) above += row[k] > target || (row[k] == target && k < b.labels[i]);
            correct1 += above < 1;
            correct5 += above < 5;
        }
        r.n += b.n;
        tape_reset();
        arena_reset(&vitc_arena);
    }
    tape_set_grad_enabled(prev);
    if (r.n) {
        r.top1 = 100.0 * correct1 / r.n;
        r.top5 = 100.0 * correct5 / r.n;
        r.loss = loss_sum / r.n;
    }
    r.img_per_s = r.n / (now_s() - t0);
    return r;
}

/* a bar redrawn at most 5 times a second on a terminal; one line per log step otherwise */
static void progress(bool quiet, bool log_step, int epoch, int epochs, int done, int total,
                     double loss, double lr, double img_s, double eta_s, size_t mem) {
    static double last_draw;
    static int tty = -1;
    if (quiet) return;
    if (tty < 0) tty = isatty(fileno(stderr));
    if (tty ? now_s() - last_draw < 0.2 && done < total : !log_step) return;
    last_draw = now_s();
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
    augment_config_read(ac, c);
    train_config_read(t, c, mc->name);
    config_check_unknown(c);
}

void train_check_config(config *c) {
    model_config mc;
    augment_config ac;
    train_config t;
    read_all(c, &mc, &ac, &t);
}

int train_run(config *c, const train_options *o) {
    model_config mc;
    augment_config ac;
    train_config t;
    read_all(c, &mc, &ac, &t);
    char *resolved = config_to_json(c);
    char err[4096];

    dataset train_ds = {0}, val_ds = {0};
    if (!dataset_open(&train_ds, t.train_dir, err, sizeof(err))) {
        fprintf(stderr, "error: data.train: %s\n", err);
        return 1;
    }
    if (train_ds.n_classes != mc.num_classes) {
        fprintf(stderr, "error: model.num_classes is %d but %s has %d classes\n", mc.num_classes,
                t.train_dir, train_ds.n_classes);
        return 1;
    }
    cJSON *class_list = cJSON_CreateStringArray((const char *const *)train_ds.class_names,
                                                train_ds.n_classes);
    char *classes = cJSON_PrintUnformatted(class_list);
    cJSON_Delete(class_list);
    bool has_val = t.val_dir[0];
    if (has_val && !dataset_open(&val_ds, t.val_dir, err, sizeof(err))) {
        fprintf(stderr, "error: data.val: %s\n", err);
        return 1;
    }
    model *m = model_create(&mc, t.seed);
    adamw opt;
    adamw_init(&opt, &m->ps, t.weight_decay, t.beta1, t.beta2, t.eps);
    float *ema = NULL;
    if (t.ema) {
        ema = xmalloc(sizeof(float) * (size_t)m->ps.numel);
        memcpy(ema, m->ps.data, sizeof(float) * (size_t)m->ps.numel);
    }
    train_state st = {0, 0, -1, -1};
    if (o->resume) {
        st_file f;
        char *saved_cfg = NULL;
        if (!checkpoint_open(&f, o->resume, &saved_cfg, err, sizeof(err)) ||
            !checkpoint_restore(&f, o->resume, m, &opt, ema, &st, err, sizeof(err))) {
            fprintf(stderr, "error: --resume: %s\n", err);
            return 1;
        }
        free(saved_cfg);
        st_close(&f);
        if (!o->quiet) printf("resumed from %s at epoch %d, step %lld\n", o->resume, st.epoch, (long long)st.step);
    }

    char run_dir[1024], path[1200];
    snprintf(run_dir, sizeof(run_dir), "%s/%s", t.out, t.run_name);
    if (!make_dirs(run_dir)) {
        fprintf(stderr, "error: cannot create run directory %s: %s\n", run_dir, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof(path), "%s/config.json", run_dir);
    FILE *cf = fopen(path, "w");
    if (!cf) {
        fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    fputs(resolved, cf);
    fclose(cf);
    snprintf(path, sizeof(path), "%s/metrics.jsonl", run_dir);
    FILE *metrics = fopen(path, o->resume ? "a" : "w");
    if (!metrics) {
        fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }

    loader *train_l = loader_create(&train_ds, &ac, t.batch, true, t.workers, t.seed);
    loader *val_l = has_val ? loader_create(&val_ds, &ac, t.batch, false, t.workers, t.seed) : NULL;
    int bpe = loader_batches_per_epoch(train_l);
    if (bpe < t.accum) {
        fprintf(stderr, "error: train.batch %d x train.accum_steps %d exceeds the %d training images of %s\n",
                t.batch, t.accum, train_ds.n, t.train_dir);
        return 1;
    }
    int steps_per_epoch = bpe / t.accum;
    double scale = t.lr_scale_batch > 0 ? (double)t.batch * t.accum / t.lr_scale_batch : 1.0;
    lr_schedule sched = {t.lr * scale, t.warmup_lr * scale, t.min_lr * scale,
                         (int64_t)t.warmup_epochs * steps_per_epoch, (int64_t)t.epochs * steps_per_epoch};
    int total_epochs = t.epochs + t.cooldown_epochs;
    int K = mc.num_classes, S = mc.img_size, C = mc.in_chans;
    float *targets = xmalloc(sizeof(float) * (size_t)t.batch * K);
    char last_path[1200], best_path[1200];
    snprintf(last_path, sizeof(last_path), "%s/last.safetensors", run_dir);
    snprintf(best_path, sizeof(best_path), "%s/best.safetensors", run_dir);
    if (!o->quiet)
        printf("vitc train: %s (%lld params) on %s: %d images, %d classes; %d steps/epoch, %d epochs\n",
               mc.name, (long long)m->ps.numel, t.train_dir, train_ds.n, train_ds.n_classes,
               steps_per_epoch, total_epochs);

    fprintf(metrics,
            "{\"type\": \"start\", \"model\": \"%s\", \"params\": %lld, \"macs\": %.0f, "
            "\"train_images\": %d, \"threads\": %d, \"epoch\": %d}\n",
            mc.name, (long long)m->ps.numel, model_macs(m), train_ds.n, vitc_threads(), st.epoch);
    fflush(metrics);
    signal(SIGINT, on_sigint);
    interrupted = 0;
    int code = 0;
    for (int epoch = st.epoch; epoch < total_epochs && !code; epoch++) {
        loader_start_epoch(train_l, epoch);
        int skip = (int)(st.step * t.accum - (int64_t)epoch * steps_per_epoch * t.accum);
        double t_epoch = now_s(), loss_sum = 0, t_log = now_s(), t_trained = 0;
        int seen = 0, skipped_files = 0, since_log = 0;
        batch b;
        for (int bi = 0; bi < steps_per_epoch * t.accum && loader_next(train_l, &b); bi++) {
            skipped_files += b.skipped;
            if (bi < skip) continue;
            int micro = bi % t.accum;
            rng r;
            rng_seed(&r, t.seed * 1000003u + (uint64_t)(st.step * t.accum + micro), RNG_MIXUP);
            mixup_apply(&t.mix, b.images, b.n, S, S, C, b.labels, K, targets, &r);
            rng_seed(&r, t.seed * 1000003u + (uint64_t)(st.step * t.accum + micro), RNG_DROP_PATH);
            forward_opts fo = {.train = true, .rng = &r};
            if (micro == 0) params_zero_grad(&m->ps);
            tensor *x = tensor_wrap(b.images, 4, (int[]){b.n, S, S, C});
            tensor *y = tensor_wrap(targets, 2, (int[]){b.n, K});
            tensor *loss = op_cross_entropy(model_forward(m, x, &fo), y);
            float lv = loss->data[0];
            if (!isfinite(lv)) {
                fprintf(stderr, "\nerror: loss is %s at epoch %d, step %lld: stopping; the last good "
                        "checkpoint (%s) is kept\n", isnan(lv) ? "NaN" : "Inf", epoch + 1,
                        (long long)st.step, last_path);
                code = 1;
                break;
            }
            const float seed_grad = 1.0f / (float)t.accum;
            tape_backward_consuming(loss, &seed_grad);
            tape_reset();
            size_t mem = vitc_arena.peak + (size_t)m->ps.numel * 4 * (t.ema ? 5 : 4);
            arena_reset(&vitc_arena);
            loss_sum += lv;
            seen++;
            since_log++;
            if (micro < t.accum - 1) continue;
            double lr = lr_at(&sched, st.step);
            clip_grad_norm(&m->ps, t.clip_grad);
            adamw_step(&opt, &m->ps, lr);
            if (ema) {
                double d = t.ema_warmup ? fmin(t.ema_decay, (1.0 + st.step) / (10.0 + st.step)) : t.ema_decay;
                ema_update(ema, &m->ps, d);
            }
            st.step++;
            int done = bi + 1;
            double el = now_s() - t_epoch;
            double img_s = (double)done * t.batch / fmax(el, 1e-9);
            bool log_step = st.step % t.log_every == 0 || done == steps_per_epoch * t.accum;
            if (log_step) {
                double dt = now_s() - t_log;
                fprintf(metrics,
                        "{\"type\": \"step\", \"epoch\": %d, \"step\": %lld, \"loss\": %.8g, \"lr\": "
                        "%.8g, \"img_s\": %.2f}\n",
                        epoch + 1, (long long)st.step, lv, lr, since_log * t.batch / fmax(dt, 1e-9));
                fflush(metrics);
                t_log = now_s();
                since_log = 0;
            }
            progress(o->quiet, log_step, epoch, total_epochs, done, steps_per_epoch * t.accum, loss_sum / seen,
                     lr, img_s, (steps_per_epoch * t.accum - done) * t.batch / fmax(img_s, 1e-9), mem);
            if (interrupted || (t.stop_after && st.step >= t.stop_after)) {
                st.epoch = epoch;
                if (!checkpoint_save(last_path, m, resolved, classes, &opt, ema, &st, err, sizeof(err))) {
                    fprintf(stderr, "\nerror: %s\n", err);
                    return 1;
                }
                fprintf(stderr, "\n%s at step %lld: saved a resumable checkpoint to %s\n",
                        interrupted ? "interrupted" : "stopping", (long long)st.step, last_path);
                code = interrupted ? 130 : 0;
                goto done;
            }
        }
        if (code) break;
        t_trained = now_s() - t_epoch;
        if (!o->quiet && isatty(fileno(stderr))) fputc('\n', stderr);
        st.epoch = epoch + 1;
        eval_result raw = {0}, ev_ema = {0};
        if (val_l) {
            raw = evaluate(m, val_l);
            if (ema) { /* swap the EMA weights in for evaluation */
                float *keep = xmalloc(sizeof(float) * (size_t)m->ps.numel);
                memcpy(keep, m->ps.data, sizeof(float) * (size_t)m->ps.numel);
                memcpy(m->ps.data, ema, sizeof(float) * (size_t)m->ps.numel);
                ev_ema = evaluate(m, val_l);
                memcpy(m->ps.data, keep, sizeof(float) * (size_t)m->ps.numel);
                free(keep);
            }
        }
        double top1 = ema && ev_ema.top1 > raw.top1 ? ev_ema.top1 : raw.top1;
        bool best = val_l && top1 > st.best_top1;
        if (best) st.best_top1 = top1, st.best_epoch = st.epoch;
        double train_s = now_s() - t_epoch;
        fprintf(metrics,
                "{\"type\": \"epoch\", \"epoch\": %d, \"step\": %lld, \"train_loss\": %.6g, "
                "\"val_top1\": %.4f, \"val_top5\": %.4f, \"val_loss\": %.6g, \"ema_top1\": %.4f, "
                "\"ema_top5\": %.4f, \"time_s\": %.2f, \"train_img_s\": %.2f, \"skipped_files\": %d}\n",
                st.epoch, (long long)st.step, loss_sum / (seen ? seen : 1), raw.top1, raw.top5,
                raw.loss, ev_ema.top1, ev_ema.top5, train_s, seen * t.batch / fmax(t_trained, 1e-9),
                skipped_files);
        fflush(metrics);
        if (!o->quiet) {
            printf("epoch %d/%d: train loss %.4f", st.epoch, total_epochs, loss_sum / (seen ? seen : 1));
            if (val_l) printf(", val top-1 %.2f%% top-5 %.2f%% loss %.4f", raw.top1, raw.top5, raw.loss);
            if (val_l && ema) printf(", EMA top-1 %.2f%%", ev_ema.top1);
            if (skipped_files) printf(", %d unreadable files skipped", skipped_files);
            printf(" (%.1fs)\n", train_s);
            fflush(stdout);
        }
        if (!checkpoint_save(last_path, m, resolved, classes, &opt, ema, &st, err, sizeof(err)) ||
            (best && !checkpoint_save(best_path, m, resolved, classes, &opt, ema, &st, err, sizeof(err)))) {
            fprintf(stderr, "error: %s\n", err);
            code = 1;
        }
    }
    if (!code && st.epoch == total_epochs) /* marks a finished run (tools/sweep.sh skips these) */
        fprintf(metrics, "{\"type\": \"end\", \"epochs\": %d, \"best_top1\": %.4f, \"best_epoch\": %d}\n",
                st.epoch, st.best_top1, st.best_epoch);
done:
    signal(SIGINT, SIG_DFL);
    fclose(metrics);
    free(targets);
    free(ema);
    free(resolved);
    cJSON_free(classes);
    loader_free(train_l);
    loader_free(val_l);
    adamw_free(&opt);
    model_free(m);
    dataset_free(&train_ds);
    dataset_free(&val_ds);
    return code;
}
