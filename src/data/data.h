/* Image classification data: ImageNet-style folders (root/<class>/<image>, class index = sorted
 * folder name, as torchvision's ImageFolder) or a list file of "path label" lines; decoding with
 * stb_image; train augmentation (RandomResizedCrop, flip, RandAugment, colour jitter, random
 * erasing) and eval transform (resize by crop_pct, center crop); a prefetching loader on worker
 * threads whose output depends only on (seed, epoch, sample index), never on the thread count. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/config.h"

typedef struct dataset {
    char **paths;
    int *labels;
    int n;
    char **class_names; /* sorted folder names (list files: "0", "1", ...) */
    int n_classes;
    char *root;  /* the folder or list file opened */
    bool listed; /* from a list file, whose labels are class indices */
    int not_images;  /* files in class folders left out for their names (dataset_note) */
    char *not_image; /* the first of them */
} dataset;

/* root is a folder of class folders, or a text file of "relative/or/absolute/path label" lines
 * (relative to the list file's folder). A class folder's images are its files named as images
 * stb_image decodes (.jpg .jpeg .png .bmp .gif .tga .ppm .pgm .pnm .psd .hdr .pic, in any case, as
 * torchvision's ImageFolder goes by extension); others (a labels.txt, Thumbs.db, .webp) are left
 * out and counted. Errors (missing folder, a class folder without images, empty split, bad line)
 * name the path and return false. */
bool dataset_open(dataset *d, const char *root, char *err, size_t err_len);
/* "note: KEY: N files in ROOT's class folders are not named as images, left out (e.g. PATH)" where
 * d left some out */
void dataset_note(const dataset *d, const char *key);
void dataset_free(dataset *d);

typedef enum { CLASSES_MATCH, CLASSES_NAMED_APART, CLASSES_NUMBERED, CLASSES_DIFFER } class_match;

/* Whether d's labels mean the classes `names` (n of them, in label order) of `whose` (say, "the
 * checkpoint") mean: every class folder at its name's label (whose's last classes may be absent).
 * A folder's labels come from its sorted folder names, so a class folder missing, added or renamed
 * shifts every label after it: CLASSES_DIFFER, with err naming the first folder out of place.
 * CLASSES_NAMED_APART where no folder name is among names, as many (ImageNet's synset folders
 * against a converted checkpoint's readable names): labels in folder order, unverified; err then
 * shows both names of label 0. A list file's labels are indices and only need to be below n. */
class_match dataset_match_classes(const dataset *d, const char *const *names, int n,
                                  const char *whose, char *err, size_t err_len);
/* Where d's classes are named apart (match CLASSES_NAMED_APART) and its class folders are numbered
 * 0 to n_classes - 1, as ImageNet-V2's are by ImageNet's class numbers: folder K takes label K
 * (sorted as text, "10" would be third), class_names following, and CLASSES_NUMBERED is returned.
 * Any other match is returned as it is. */
class_match dataset_numbered_classes(dataset *d, class_match match);
/* A match told: "error: KEY: WHY" where the classes differ (false), "note: KEY: WHY: labels follow
 * the class folders' sorted order" where they are named apart, "...: folder K is class K" where
 * numbered (from the lead process alone). */
bool dataset_classes_agree(class_match match, const char *key, const char *why, bool lead);

typedef struct augment_config {
    int img_size, in_chans;
    double mean[4], std[4];
    /* train */
    double scale_min, scale_max, ratio_min, ratio_max; /* RandomResizedCrop */
    bool bicubic;                                      /* else bilinear */
    double hflip;                                      /* probability */
    char randaugment[64];                              /* "" = off, e.g. "rand-m9-mstd0.5-inc1" */
    double color_jitter;                               /* 0 = off; skipped when RandAugment is on */
    double reprob;                                     /* random erasing probability */
    /* eval */
    double crop_pct;                                   /* resize to img/crop_pct then center crop */
} augment_config;

/* Reads data.* and aug.* keys (defaults: the official recipe). */
void augment_config_read(augment_config *a, config *c);

typedef struct loader loader;

typedef struct batch {
    float *images; /* (n, img, img, in_chans) channels-last, normalised */
    int *labels;   /* n */
    int *samples;  /* n: each image's index in the dataset */
    int n;         /* samples in this batch (the last eval batch may be short) */
    int skipped;   /* undecodable files left out of this batch (warned once each, by name) */
} batch;

/* train: shuffled (seed, epoch), augmented, drop_last; else in order with the eval transform. */
loader *loader_create(const dataset *d, const augment_config *a, int batch_size, bool train,
                      int workers, uint64_t seed);
void loader_free(loader *l);
/* Data-parallel processes: this loader returns only part `shard` (0-based) of `shards` of every
 * batch, contiguous and of near-equal sizes; the batches and their samples stay those of one process
 * (call before the first epoch). */
void loader_shard(loader *l, int shard, int shards);
/* Starts an epoch at batch first_batch (0, or where a resumed run left it); batches are then
 * returned in order by loader_next until it returns false. */
void loader_start_epoch(loader *l, int epoch, int first_batch);
/* The next batch (valid until the next call), or false at the end of the epoch. */
bool loader_next(loader *l, batch *b);
int loader_batches_per_epoch(const loader *l);

/* One image through the eval transform into out (img, img, in_chans), normalised. */
bool image_load_eval(const char *path, const augment_config *a, float *out, char *err, size_t err_len);

/* Decodes one image file to 8-bit pixels with the given channel count (1 or 3), converting
 * grayscale/alpha/palette/16-bit as stb_image does; NULL with a reason on failure. */
unsigned char *image_load(const char *path, int channels, int *w, int *h, char *err, size_t err_len);
