/* sample: draws images from a diffusion checkpoint (pixel space) with the SiT samplers (model.arch
 * "sit": Euler-Maruyama SDE with the "Mean" last step, Euler or Heun ODE) or DiT's (model.arch
 * "dit": ancestral DDPM on a respaced grid) and classifier-free guidance, and writes them as a PNG
 * grid, one row per class. No VAE: latents (4 channels) cannot be written. */
#include <math.h>
#include <stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../models/attn/attn_redundancy.h"
#include "../models/model.h"
#include "core/arena.h"
#include "core/check.h"
#include "core/flags.h"
#include "core/threads.h"
#include "data/data.h"
#include "dist/dist.h"
#include "ops/backend.h"
#include "train/checkpoint.h"
#include "train/ddpm.h"
#include "train/judge.h"
#include "train/mediator_schedule.h"
#include "train/transport.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: sample --ckpt CKPT --out GRID.png [--class K] [--n N] [--steps S] [--sampler sde|ode|heun|ddpm]\n"
            "              [--cfg G] [--seed S] [--ema] [--threads N] [--device D] [--jsd OUT.csv [--jsd-pairs P]]\n"
            "              [--judge CLF [--judge-real DIR]]\n"
            "       sample --ckpts A,B[,C] --switch-ratios R1[,R2] [--switch-calibrate K] [--switch-distance mae|mse]\n"
            "              --out GRID.png [the options above]\n"
            "  --ckpt CKPT    a checkpoint of train.task \"diffusion\" (model.arch sit or dit) on images\n"
            "  --ckpts A,B,C  the time-step-wise mediator schedule (SiT's SDE only): networks of increasing\n"
            "                 mediator count, A first; after step k > K, the next one takes over while the\n"
            "                 mean distance of the state to the step before is below R_i times its mean over\n"
            "                 steps 1..K (the paper publishes no R: ratios below 1, R1 > R2)\n"
            "  --switch-calibrate K  steps that calibrate the distance (default 3, the README's)\n"
            "  --switch-distance     mae (mean absolute, the README's; default) or mse\n"
            "  --jsd OUT.csv  also write the JSD redundancy (vitc definition) of every layer and head at every\n"
            "                 network evaluation, averaged over the images (softmax attention only)\n"
            "  --jsd-pairs P  query pairs compared per layer and head (default 256; all when fewer)\n"
            "  --judge CLF    classify the samples with a vitc classifier checkpoint of the same classes:\n"
            "                 the share given the requested class, and the Frechet distance of its\n"
            "                 penultimate features to those of real images\n"
            "  --judge-real DIR  the real images (default: the classifier's data.val), at most 10000\n"
            "  --out GRID.png one row per class (all classes, or K alone), N images per row\n"
            "  --class K      only class K (default: every class)\n"
            "  --n N          images per class (default 8)\n"
            "  --steps S      points of the time grid, SiT's num_sampling_steps, or DiT's respaced steps\n"
            "                 (2 to 1000; default 250)\n"
            "  --sampler      SiT: sde, Euler-Maruyama to t = 0.96, then the deterministic 0.04 step\n"
            "                 (default); ode: Euler on linspace(0, 1, S); heun: Heun's 2nd order on the same\n"
            "                 grid. DiT: ddpm (its only one), ancestral steps with the learned variance\n"
            "  --cfg G        classifier-free guidance scale (default 1: none)\n"
            "  --seed S       noise seed (default 0); image i of class K draws from its own stream\n"
            "  --ema          sample with the EMA weights (what the official code samples with)\n"
            "  --device D     cpu (default), cuda or cuda:N (a build with make CUDA=1 and a GPU)\n");
}

/* "A,B[,C]" into paths; their number, or 0 after the error */
static int split_paths(const char *list, char paths[][1024]) {
    int n = 0;
    for (const char *p = list; p && n < SCHEDULE_MAX_NETS; n++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= 1024) break;
        memcpy(paths[n], p, len);
        paths[n][len] = 0;
        p = comma ? comma + 1 : NULL;
        if (!p && n >= 1) return n + 1;
    }
    fprintf(stderr, "error: --ckpts %s: expected 2 or 3 checkpoint paths separated by commas\n", list);
    return 0;
}

typedef struct mediator_schedule_args {
    int n_nets, calibrate;
    double ratio[SCHEDULE_MAX_NETS - 1];
    bool squared;
} mediator_schedule_args;

/* the --switch-* flags of a schedule of a->n_nets networks; false after the error */
static bool schedule_args(mediator_schedule_args *a, const char *ratios, const char *distance, sampler_kind kind) {
    if (kind != SAMPLER_SDE) {
        fprintf(stderr, "error: --ckpts: the mediator schedule switches in the SDE sampler only (--sampler sde)\n");
        return false;
    }
    if (!ratios) {
        fprintf(stderr, "error: --ckpts needs --switch-ratios with %d ratio%s (the paper publishes none)\n",
                a->n_nets - 1, a->n_nets > 2 ? "s" : "");
        return false;
    }
    const char *p = ratios;
    for (int i = 0; i < a->n_nets - 1; i++) {
        char *end;
        a->ratio[i] = strtod(p, &end);
        bool last = i == a->n_nets - 2;
        if (end == p || !(a->ratio[i] > 0 && a->ratio[i] < 1e6) || (last ? *end != 0 : *end != ',')) {
            fprintf(stderr, "error: --switch-ratios %s: expected %d positive number%s separated by commas\n", ratios,
                    a->n_nets - 1, a->n_nets > 2 ? "s" : "");
            return false;
        }
        p = end + 1;
    }
    if (strcmp(distance, "mae") && strcmp(distance, "mse")) {
        fprintf(stderr, "error: --switch-distance %s: expected mae or mse\n", distance);
        return false;
    }
    a->squared = !strcmp(distance, "mse");
    return true;
}

/* --jsd: the redundancy of every block and head at each network evaluation of the samplings,
 * summed over the images of every class's batch */
typedef struct jsd_recorder {
    transport_net *net;
    attn_redundancy r;
    int cap, eval, evals; /* evaluations per sampling: room, the current one, the most seen */
    double *sum;          /* cap * blocks * heads */
    int *count;
    float *t;             /* each evaluation's time */
} jsd_recorder;

static void jsd_recorder_init(jsd_recorder *j, int blocks, int heads, int pairs, int cap) {
    size_t cells = (size_t)blocks * heads;
    *j = (jsd_recorder){.r = {.blocks = blocks, .heads = heads, .max_pairs = pairs}, .cap = cap};
    j->r.sum = xmalloc(sizeof(double) * cells), j->r.count = xmalloc(sizeof(int) * cells);
    j->sum = xcalloc(cells * (size_t)cap, sizeof(double)), j->count = xcalloc(cells * (size_t)cap, sizeof(int));
    j->t = xcalloc((size_t)cap, sizeof(float));
}

static void jsd_recorder_free(jsd_recorder *j) {
    free(j->r.sum), free(j->r.count), free(j->sum), free(j->count), free(j->t);
}

static void jsd_velocity(void *ctx, const float *x, float t, int B, float *v) {
    jsd_recorder *j = ctx;
    size_t cells = (size_t)j->r.blocks * j->r.heads;
    memset(j->r.sum, 0, sizeof(double) * cells), memset(j->r.count, 0, sizeof(int) * cells);
    j->r.max_sequences = B; /* a guided batch's conditional half */
    attn_redundancy_set(&j->r);
    transport_net_velocity(j->net, x, t, B, v);
    attn_redundancy_set(NULL);
    CHECK(j->eval < j->cap, "--jsd: more network evaluations than the %d expected", j->cap);
    for (size_t c = 0; c < cells; c++) {
        j->sum[j->eval * cells + c] += j->r.sum[c];
        j->count[j->eval * cells + c] += j->r.count[c];
    }
    j->t[j->eval++] = t;
    if (j->eval > j->evals) j->evals = j->eval;
}

static bool jsd_write(const jsd_recorder *j, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "error: --jsd: cannot write %s\n", path);
        return false;
    }
    size_t cells = (size_t)j->r.blocks * j->r.heads;
    fprintf(f, "# JSD redundancy (vitc definition): 1 - mean over query pairs of JSD(A_i, A_j) / ln 2, per layer "
               "and head of softmax attention, averaged over the images\n");
    fprintf(f, "eval,t,layer,head,redundancy,images\n");
    for (int e = 0; e < j->evals; e++)
        for (size_t c = 0; c < cells; c++)
            if (j->count[e * cells + c])
                fprintf(f, "%d,%.6f,%d,%d,%.6f,%d\n", e, j->t[e], (int)(c / j->r.heads), (int)(c % j->r.heads),
                        j->sum[e * cells + c] / j->count[e * cells + c], j->count[e * cells + c]);
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "error: --jsd: cannot write %s\n", path);
        return false;
    }
    printf("wrote %s: JSD redundancy (vitc definition) of %d layers x %d heads at %d network evaluations\n", path,
           j->r.blocks, j->r.heads, j->evals);
    return true;
}

/* --judge: a classifier of the sampler's classes and channels, and the real images its features
 * are compared with; opened before sampling, so that a wrong one stops the run before its steps */
typedef struct {
    const char *path, *real_dir;
    st_file f;
    config c;
    model *clf;
    augment_config ac;
    dataset real;
} judge;

static void judge_close(judge *j) {
    if (!j->clf) return;
    dataset_free(&j->real);
    model_free(j->clf);
    config_free(&j->c);
    st_close(&j->f);
    j->clf = NULL;
}

static bool judge_open(judge *j, const st_file *sampler, int classes, int C, int samples) {
    char err[8192];
    j->clf = checkpoint_load_model(&j->f, j->path, false, &j->c, err, sizeof(err));
    if (!j->clf) {
        fprintf(stderr, "error: --judge: %s\n", err);
        return false;
    }
    augment_config_read(&j->ac, &j->c);
    if (!j->real_dir) j->real_dir = config_str(&j->c, "data.val", "", NULL);
    bool ok = false;
    if (model_is_diffusion(&j->clf->cfg) || j->clf->cfg.in_chans != C)
        fprintf(stderr, "error: --judge: %s is not a classifier of %d-channel images\n", j->path,
                C);
    /* a sample of class k counts as its class where the classifier says k: the same classes */
    else if (!checkpoints_share_classes(&j->f, j->clf->cfg.num_classes, sampler, classes, err,
                                        sizeof(err)))
        fprintf(stderr, "error: --judge: %s does not classify the model's classes: %s\n", j->path,
                err);
    else if (samples < 2)
        fprintf(stderr, "error: --judge: the Frechet distance needs 2 samples at least (--n)\n");
    else if (!j->real_dir[0] || !dataset_open(&j->real, j->real_dir, err, sizeof(err)))
        fprintf(stderr, "error: --judge-real: %s\n",
                j->real_dir[0] ? err : "no real images (the classifier has no data.val)");
    else
        ok = true;
    if (ok) dataset_note(&j->real, "--judge-real");
    if (!ok) judge_close(j);
    return ok;
}

/* the classifier's class for every sample of the grid (row r requested class r, or cls alone),
 * and the Frechet distance of its features to those of the real images */
static bool judge_samples(judge *j, const unsigned char *grid, int rows, int n, int S, int C,
                          int cls) {
    int total = rows * n, dim = judge_feature_dim(j->clf), hits = 0;
    int64_t per = (int64_t)S * S * C;
    unsigned char *px = xmalloc((size_t)(total * per));
    float *fs = xmalloc(sizeof(float) * (size_t)total * dim), *fr = xmalloc(sizeof(float) * 10000 * (size_t)dim);
    int *pred = xmalloc(sizeof(int) * (size_t)total);
    for (int r = 0; r < rows; r++) /* the grid's image i of row r, row by row */
        for (int i = 0; i < n; i++)
            for (int y = 0; y < S; y++)
                memcpy(px + ((size_t)(r * n + i) * S + y) * S * C, grid + (((size_t)r * S + y) * n * S + (size_t)i * S) * C,
                       (size_t)S * C);
    judge_pixels(j->clf, &j->ac, px, total, S, C, fs, pred);
    for (int k = 0; k < total; k++) hits += pred[k] == (cls >= 0 ? cls : k / n);
    printf("judge %s: %.1f%% of %d samples classified as their class\n", j->path,
           100.0 * hits / total, total);
    int n_real = judge_dataset(j->clf, &j->ac, &j->real, 10000, fr);
    bool ok = n_real >= 2;
    if (ok)
        printf(
            "judge %s: Frechet distance of its features (%d wide) to %d real images of %s: %.4f\n",
            j->path, dim, n_real, j->real_dir, frechet_distance(fs, total, fr, n_real, dim));
    else
        fprintf(stderr,
                "error: --judge-real: %s has %d readable images: the Frechet distance needs 2\n",
                j->real_dir, n_real);
    free(px), free(fs), free(fr), free(pred);
    return ok;
}

static const char *const sampler_names[] = {"sde", "ode", "heun", "ddpm"};

/* one batch of n images of mc's size, x holding their initial noise: SiT's samplers or DiT's */
static void sample_batch(const model_config *mc, velocity_fn f, void *ctx, float *x, int n, const sampler_opts *so,
                         rng *noise) {
    int64_t P = (int64_t)mc->img_size * mc->img_size;
    int C = mc->in_chans;
    if (so->kind == SAMPLER_DDPM) ddpm_sample(f, ctx, x, n, P, C, mc->learn_sigma ? 2 * C : C, so->steps, noise);
    else transport_sample(f, ctx, x, n, P * C, so, noise);
}

/* --cfg: a guidance scale in [0, 1000] */
static int read_guidance(const char *flag, const char *value, void *to) {
    char *end;
    double cfg = strtod(value, &end);
    if (*end || end == value || !(cfg >= 0 && cfg <= 1000)) {
        fprintf(stderr, "error: %s %s: expected a guidance scale from 0 to 1000\n", flag, value);
        return 2;
    }
    *(double *)to = cfg;
    return 0;
}

int main(int argc, char **argv) {
    dist_init(&argc, &argv);
    const char *ckpt = NULL, *ckpts = NULL, *out = NULL, *sampler = NULL, *ratios_arg = NULL,
               *distance = "mae", *jsd_path = NULL, *device_arg = "cpu";
    int cls = -1, n = 8, steps = 250, seed = 0, threads = 0, calibrate = 3, jsd_pairs = 256;
    double cfg = 1.0;
    bool use_ema = false;
    judge jg = {0};
    const tool_flag flags[] = {
        TEXT_FLAG("--ckpt", &ckpt),
        TEXT_FLAG("--ckpts", &ckpts),
        TEXT_FLAG("--switch-ratios", &ratios_arg),
        TEXT_FLAG("--switch-distance", &distance),
        INT_FLAG("--switch-calibrate", &calibrate, 1),
        OUTPUT_FLAG("--jsd", &jsd_path),
        INT_FLAG("--jsd-pairs", &jsd_pairs, 1),
        TEXT_FLAG("--judge", &jg.path),
        TEXT_FLAG("--judge-real", &jg.real_dir),
        TEXT_FLAG("--device", &device_arg),
        PNG_FLAG("--out", &out),
        TEXT_FLAG("--sampler", &sampler),
        SWITCH_FLAG("--ema", &use_ema),
        INT_FLAG("--class", &cls, 0),
        INT_FLAG("--n", &n, 1),
        INT_FLAG("--steps", &steps, 2),
        INT_FLAG("--seed", &seed, 0),
        RANGE_FLAG("--threads", &threads, 1, VITC_MAX_THREADS),
        TAKE_FLAG("--cfg", &cfg, read_guidance),
        FLAGS_END,
    };
    int status = flags_read(argc, argv, flags, usage);
    if (status >= 0) return status;
    if (!(ckpt || ckpts) || !out || (ckpt && ckpts)) {
        fprintf(stderr, "error: --out and one of --ckpt and --ckpts are required\n");
        usage(stderr);
        return 2;
    }
    sampler_kind kind = SAMPLER_SDE; /* or DiT's ddpm, once the checkpoint says it is a dit */
    if (!sampler || !strcmp(sampler, "sde")) kind = SAMPLER_SDE;
    else if (!strcmp(sampler, "ode")) kind = SAMPLER_ODE;
    else if (!strcmp(sampler, "heun")) kind = SAMPLER_HEUN;
    else if (!strcmp(sampler, "ddpm")) kind = SAMPLER_DDPM;
    else {
        fprintf(stderr, "error: --sampler %s: expected sde, ode, heun or ddpm\n", sampler);
        return 2;
    }
    char paths[SCHEDULE_MAX_NETS][1024];
    int n_nets = 1;
    if (ckpts && !(n_nets = split_paths(ckpts, paths))) return 2;
    if (!ckpts) snprintf(paths[0], sizeof(paths[0]), "%s", ckpt);
    mediator_schedule_args sa = {.n_nets = n_nets, .calibrate = calibrate};
    if (ckpts && !schedule_args(&sa, ratios_arg, distance, kind)) return 2;
    if (!ckpts && ratios_arg) {
        fprintf(stderr, "error: --switch-ratios needs --ckpts\n");
        return 2;
    }
    if (ckpts && jsd_path) {
        fprintf(stderr, "error: --jsd reads one network's attention: give --ckpt, not --ckpts\n");
        return 2;
    }
    vitc_set_threads(threads ? threads : dist_default_threads());
    status = backend_select_flag(device_arg); /* before the first tensor */
    if (status) return status;
    char err[8192];
    st_file f[SCHEDULE_MAX_NETS];
    config c;
    model *nets[SCHEDULE_MAX_NETS] = {0};
    for (int i = 0; i < n_nets; i++) {
        config ci;
        nets[i] = checkpoint_load_model(&f[i], paths[i], use_ema, &ci, err, sizeof(err));
        if (!nets[i]) {
            fprintf(stderr, "error: %s: %s\n", ckpts ? "--ckpts" : "--ckpt", err);
            for (int j = 0; j < i; j++) model_free(nets[j]), st_close(&f[j]);
            if (i) config_free(&c);
            dist_startup_done(false);
            dist_finalize();
            return 1;
        }
        if (i == 0) c = ci; /* the first network's data settings undo the normalisation */
        else config_free(&ci);
    }
    model *m = nets[0];
    const model_config mc = m->cfg;
    int code = 0;
    unsigned char *png = NULL;
    float *x = NULL, *prev = NULL;
    rng *noise = NULL;
    jsd_recorder jr = {0};
    for (int i = 1; i < n_nets; i++) {
        const model_config *o = &nets[i]->cfg;
        if (strcmp(o->arch, mc.arch) || o->img_size != mc.img_size || o->in_chans != mc.in_chans ||
            o->num_classes != mc.num_classes) {
            fprintf(stderr, "error: --ckpts: %s (%s, %dx%dx%d, %d classes) does not sample what %s does (%s, "
                    "%dx%dx%d, %d classes)\n", paths[i], o->arch, o->img_size, o->img_size, o->in_chans,
                    o->num_classes, paths[0], mc.arch, mc.img_size, mc.img_size, mc.in_chans, mc.num_classes);
            code = 1;
            goto done;
        }
        if (!checkpoints_share_classes(&f[i], o->num_classes, &f[0], mc.num_classes, err,
                                       sizeof(err))) {
            fprintf(stderr, "error: --ckpts: %s does not sample the classes %s does: %s\n",
                    paths[i], paths[0], err);
            code = 1;
            goto done;
        }
    }
    if (!model_is_diffusion(&mc)) {
        fprintf(stderr, "error: --ckpt: %s is a \"%s\" classifier, not a diffusion model (model.arch sit or dit)\n",
                mc.name, mc.arch);
        code = 1;
        goto done;
    }
    bool dit = !strcmp(mc.arch, "dit");
    if (dit && ckpts) {
        fprintf(stderr, "error: --ckpts: the mediator schedule switches in SiT's SDE loop; %s is model.arch dit\n",
                paths[0]);
        code = 2;
        goto done;
    }
    if (dit && !sampler) kind = SAMPLER_DDPM;
    if (dit != (kind == SAMPLER_DDPM)) {
        fprintf(stderr, "error: --sampler %s: model.arch \"%s\" samples with %s\n", sampler, mc.arch,
                dit ? "ddpm" : "sde, ode or heun");
        code = 2;
        goto done;
    }
    if (dit && steps > DDPM_TRAIN_STEPS) {
        fprintf(stderr, "error: --steps %d: DiT's process has %d steps to respace\n", steps, DDPM_TRAIN_STEPS);
        code = 2;
        goto done;
    }
    if (mc.in_chans != 1 && mc.in_chans != 3) {
        fprintf(stderr, "error: --ckpt: %d channels are latents (no VAE to decode them); sample writes 1- or "
                "3-channel images\n", mc.in_chans);
        code = 1;
        goto done;
    }
    if (cls >= mc.num_classes) {
        fprintf(stderr, "error: --class %d: the model has classes 0 to %d\n", cls, mc.num_classes - 1);
        code = 2;
        goto done;
    }
    for (int i = 0; i < n_nets; i++)
        if (cfg > 1 && nets[i]->cfg.class_dropout_prob <= 0) {
            fprintf(stderr, "error: --cfg %g: %s has no null class (model.class_dropout_prob 0)\n", cfg, paths[i]);
            code = 2;
            goto done;
        }
    if (jsd_path) {
        for (int i = 0; i < mc.depths[0]; i++)
            if (mc.attn[0][i] != ATTN_NATIVE) {
                fprintf(stderr, "error: --jsd: the score reads softmax attention; block %d of %s has %s attention\n",
                        i, ckpt, attn_names[mc.attn[0][i]]);
                code = 2;
                goto done;
            }
        jsd_recorder_init(&jr, mc.depths[0], mc.num_heads[0], jsd_pairs, 2 * steps);
    }
    int S = mc.img_size, C = mc.in_chans, rows = cls >= 0 ? 1 : mc.num_classes;
    if (jg.path && !judge_open(&jg, &f[0], mc.num_classes, C, rows * n)) {
        code = 1;
        goto done;
    }
    augment_config ac;
    augment_config_read(&ac, &c); /* the normalisation to undo */
    int64_t per = (int64_t)S * S * C;
    sampler_opts so = sampler_defaults(kind);
    so.steps = steps;
    so.cfg = cfg;
    x = xmalloc(sizeof(float) * (size_t)(n * per));
    prev = xmalloc(sizeof(float) * (size_t)(n * per));
    int64_t evals[SCHEDULE_MAX_NETS] = {0};
    noise = xmalloc(sizeof(rng) * (size_t)n);
    int W = n * S, H = rows * S;
    png = xmalloc((size_t)W * H * C);
    int *labels = xmalloc(sizeof(int) * (size_t)n);
    for (int row = 0; row < rows; row++) {
        int k = cls >= 0 ? cls : row;
        for (int i = 0; i < n; i++) {
            labels[i] = k;
            /* image i of class k: the same whether one class or all are drawn */
            rng_seed(&noise[i], (uint64_t)seed * 1000003u + (uint64_t)k * (uint64_t)n + (uint64_t)i, RNG_SAMPLE);
            for (int64_t j = 0; j < per; j++) x[i * per + j] = rng_normal(&noise[i]);
        }
        if (ckpts) {
            scheduled_nets sn = {.squared = sa.squared, .prev = prev};
            for (int i = 0; i < n_nets; i++)
                sn.nets[i] = (transport_net){.m = nets[i], .y = labels, .cfg = cfg, .guided_chans = so.guided_chans};
            mediator_schedule_init(&sn.sched, n_nets, sa.calibrate, sa.ratio);
            so.after_step = scheduled_nets_after_step;
            transport_sample(scheduled_nets_velocity, &sn, x, n, per, &so, noise);
            printf("class %d: network 1", k);
            for (int i = 0; i + 1 < n_nets; i++) {
                if (sn.sched.switched_after[i] >= 0)
                    printf(", network %d from step %d", i + 2, sn.sched.switched_after[i] + 1);
                evals[i] += sn.evals[i];
            }
            evals[n_nets - 1] += sn.evals[n_nets - 1];
            printf(" (of %d)\n", steps);
        } else if (jsd_path) {
            transport_net net = {.m = m, .y = labels, .cfg = cfg, .guided_chans = so.guided_chans};
            jr.net = &net;
            jr.eval = 0;
            sample_batch(&mc, jsd_velocity, &jr, x, n, &so, noise);
        } else {
            transport_net net = {.m = m, .y = labels, .cfg = cfg, .guided_chans = so.guided_chans};
            sample_batch(&mc, transport_net_velocity, &net, x, n, &so, noise);
        }
        /* undo the normalisation: [-1, 1] -> [0, 255] for SiT's mean = std = 0.5, rounded, clamped */
        for (int i = 0; i < n; i++)
            for (int yy = 0; yy < S; yy++)
                for (int xx = 0; xx < S; xx++)
                    for (int ch = 0; ch < C; ch++) {
                        double v = (x[i * per + ((int64_t)yy * S + xx) * C + ch] * ac.std[ch] + ac.mean[ch]) * 255.0;
                        v = v < 0 ? 0 : v > 255 ? 255 : v;
                        png[(((size_t)row * S + yy) * W + (size_t)i * S + xx) * C + ch] = (unsigned char)lround(v);
                    }
    }
    free(labels);
    if (!stbi_write_png(out, W, H, C, png, W * C)) {
        fprintf(stderr, "error: --out: cannot write %s\n", out);
        code = 1;
        goto done;
    }
    printf("wrote %s: %d x %d images of %dx%d (%s, %d steps, cfg %g%s)\n", out, rows, n, S, S, sampler_names[kind],
           steps, cfg, use_ema ? ", EMA" : "");
    if (jg.path && !judge_samples(&jg, png, rows, n, S, C, cls)) {
        code = 1;
        goto done;
    }
    if (jsd_path && !jsd_write(&jr, jsd_path)) {
        code = 1;
        goto done;
    }
    if (ckpts) { /* MACs per image: network evaluations (cfg doubles each) times each network's MACs */
        double passes = cfg > 1 ? 2.0 : 1.0, spent = 0, total = 0;
        for (int i = 0; i < n_nets; i++) spent += evals[i] * model_macs(nets[i]), total += evals[i];
        printf("schedule: %.4g GMAC per image", passes * spent / rows / 1e9);
        for (int i = 0; i < n_nets; i++)
            printf("%s n=%d alone %.4g", i ? "," : "; against", nets[i]->cfg.mediator_num,
                   passes * total * model_macs(nets[i]) / rows / 1e9);
        printf(" (network evaluations:");
        for (int i = 0; i < n_nets; i++) printf(" %lld", (long long)evals[i]);
        printf(")\n");
    }
done:
    dist_startup_done(code == 0);
    free(png);
    free(x);
    free(prev);
    free(noise);
    jsd_recorder_free(&jr);
    judge_close(&jg);
    for (int i = 0; i < n_nets; i++) model_free(nets[i]), st_close(&f[i]);
    config_free(&c);
    arena_free(&vitc_arena);
    dist_finalize();
    return code;
}
