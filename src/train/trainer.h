/* The training loop behind `train`: config -> model, optimizer, EMA, loaders -> epochs of
 * (mixup, forward, loss, backward, clip, AdamW, EMA) with validation (classification, or SiT's
 * transport / DiT's DDPM objective with train.task "diffusion"), metrics.jsonl, progress, and
 * last/best checkpoints in checkpoints/<run-name>/. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "../core/config.h"

typedef struct train_options {
    const char *resume; /* checkpoint to continue from, or NULL */
    bool quiet;
    bool overwrite; /* a new run may replace the checkpoints of another in its directory */
} train_options;

/* Reads and validates every section of a resolved training config (exits naming the JSON path on
 * the first problem), without touching data or building the model. */
void train_check_config(config *c);

/* Returns the process exit code (0 success, 1 runtime/input error). */
int train_run(config *c, const train_options *o);

typedef struct eval_result {
    double top1, top5, loss;
    int n;
    double real_top1, real_top5; /* against label sets (evaluate's real), over real_n of the n */
    int real_n;
    double img_per_s;
} eval_result;

struct model;
struct loader;
struct label_sets;
/* Top-1/top-5/mean loss of m over one pass of the loader (grad off, arena reset per batch). With
 * classes, the data's labels are those of m's classes (label i is class classes[i], n_classes of
 * them), and their scores alone count, as timm's validate.py --valid-labels; NULL: all, in order.
 * With real, also the top-1/top-5 against each sample's set of right classes (ImageNet-ReaL's, as
 * timm's validate.py --real-labels): one of the set ranked first, or among the first five; the
 * samples with an empty set are left out of these two. */
eval_result evaluate(struct model *m, struct loader *l, const int *classes, int n_classes,
                     const struct label_sets *real);
/* Diffusion (train.task "diffusion"): the mean training loss, SiT's transport or DiT's (top1/top5 0)
 * over one pass, with (t, noise) per sample of the set drawn from seed alone, so evaluations are
 * comparable.
 * batch_size: the loader's (global) batch. */
eval_result evaluate_diffusion(struct model *m, struct loader *l, uint64_t seed, int batch_size);
