/* The per-sample transforms: train (RandomResizedCrop, flip, RandAugment or colour jitter,
 * normalise, random erasing) and eval (resize by crop_pct, centre crop, normalise), driven by one
 * random stream per sample. */
#pragma once
#include "../core/rng.h"
#include "data.h"
#include "image.h"

/* torchvision RandomResizedCrop.get_params: the crop (x, y, w, h) */
void random_resized_crop_params(int W, int H, double scale_min, double scale_max, double ratio_min,
                                double ratio_max, rng *r, int *x, int *y, int *w, int *h);
/* timm RandomErasing (mode 'pixel', one box): overwrites a box of out (S, S, C) with N(0, 1) values
 * with probability p */
void random_erasing(float *out, int S, int C, double p, rng *r);
/* decoded image -> normalised (S, S, C) floats */
void transform_train(const augment_config *a, const image *src, float *out, rng *r);
void transform_eval(const augment_config *a, const image *src, float *out);
