/* Checkpoints: one .safetensors file. Parameters under their official names (what `eval` and
 * tools/convert_pth.py use), AdamW moments under "optim.exp_avg." / "optim.exp_avg_sq.", EMA weights
 * under "ema."; the resolved config and the training state in the header metadata. Written
 * atomically (temp file, fsync, rename). Every random stream of training is derived from (seed,
 * step) or (seed, epoch, sample), so the state needs no generator snapshots to resume exactly. */
#pragma once
#include "../../models/model.h"
#include "../data/data.h"
#include "optim.h"

struct cJSON;

typedef struct train_state {
    int epoch;        /* epochs completed */
    int64_t step;     /* optimizer steps taken */
    double best_top1; /* best validation top-1 so far (-1: none; diffusion: the lowest val loss) */
    int best_epoch;
    /* within the epoch under way (a checkpoint written mid-epoch), so that its summary covers all
     * its steps after a resume */
    double epoch_loss_sum; /* sum of the micro-batches' losses */
    int epoch_batches;     /* micro-batches trained */
    int epoch_skipped;     /* unreadable files replaced */
    int64_t metrics_bytes; /* length of metrics.jsonl when written (-1: unknown): a resume cuts the
                              lines logged after it, which it logs again */
    int steps_per_epoch;   /* of the run that wrote it (0: unknown, a checkpoint from before the
                              field): a resume must take as many, or its step leaves its epoch */
} train_state;

/* opt and ema may be NULL (weights-only checkpoint); classes_json (a JSON array of class names, for
 * `eval --image`) may be NULL. */
bool checkpoint_save(const char *path, const model *m, const char *config_json,
                     const char *classes_json, const adamw *opt, const float *ema,
                     const train_state *st, char *err, size_t err_len);

/* Reads a checkpoint file and its resolved config JSON (malloc'd copy in *config_json). */
bool checkpoint_open(st_file *f, const char *path, char **config_json, char *err, size_t err_len);
/* The checkpoint's class names (its "classes"): n entries, NULL where it names none, to free();
 * *list holds them (cJSON_Delete it after) and is NULL where the checkpoint has no list. */
const char **checkpoint_class_names(const st_file *f, int n, struct cJSON **list);
/* Whether dataset d's labels mean the classes of the checkpoint's model (num_classes of them):
 * those its "classes" name (dataset_match_classes), or without them, as many class folders. With
 * classes (a class map, class_map.h), label i means the model's class classes[i], n_classes of
 * them. */
class_match checkpoint_match_classes(const st_file *f, const dataset *d, int num_classes,
                                     const int *classes, int n_classes, char *err, size_t err_len);
/* Loads the parameters (and, when given and present, optimizer moments, EMA and state) into a model
 * built from the checkpoint's config. Names every missing / unexpected / mis-shaped tensor. An ema
 * the checkpoint has none for (its run kept none) starts from the loaded parameters. */
bool checkpoint_restore(const st_file *f, const char *path, model *m, adamw *opt, float *ema,
                        train_state *st, char *err, size_t err_len);
/* A fine-tuning's start: the parameters of the checkpoint at path (a vitc checkpoint's, or an
 * official one's converted), or its EMA weights (from_ema; an error where it has none), into m
 * (model_load_backbone: a head for other classes starts afresh, or from the rows the file
 * class_map names, "" for none (class_map.h); tensors over another grid are resized; note says
 * which). Any other tensor missing, mis-shaped or unexpected is an error naming it. Where ema is
 * not NULL and the checkpoint has EMA weights, they go there too, made for m the same way
 * (*ema_set says so), as the Attention Mediators' resolution fine-tune starts its EMA. */
bool checkpoint_init_weights(const char *path, bool from_ema, const char *class_map, model *m,
                             float *ema, bool *ema_set, char *note, size_t note_len, char *err,
                             size_t err_len);
/* Whether checkpoint a's model (a_classes of them) has the classes of b's, in the same order: their
 * "classes" where both name them, else their counts; err says how they differ. */
bool checkpoints_share_classes(const st_file *a, int a_classes, const st_file *b, int b_classes,
                               char *err, size_t err_len);
/* Whether the checkpoint holds EMA weights ("ema."). */
bool checkpoint_has_ema(const st_file *f);
/* Copies the "ema." weights into the model's parameters (eval --ema). */
bool checkpoint_load_ema(const st_file *f, const char *path, model *m, char *err, size_t err_len);
/* The model a checkpoint describes (its config in c), with its weights, or their EMA with ema: what
 * eval and sample start from. f stays open for reads of the file's metadata (the caller closes it,
 * frees the model and the config); NULL after the error (in err), with nothing left open. */
model *checkpoint_load_model(st_file *f, const char *path, bool ema, config *c, char *err, size_t err_len);
