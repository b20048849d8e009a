/* Mixup and CutMix with timm's semantics (Mixup, mode 'batch'): one lambda per batch, the partner of
 * sample i is sample n-1-i, CutMix's lambda corrected to the pasted box's area, and soft targets with
 * label smoothing folded in (off = s/K, on = 1 - s + s/K). */
#pragma once
#include <stdbool.h>

#include "../core/rng.h"

typedef struct mixup_config {
    double mixup_alpha, cutmix_alpha; /* 0 disables each */
    double prob;                      /* probability of mixing a batch at all */
    double switch_prob;               /* probability of CutMix when both are enabled */
    double smoothing;                 /* label smoothing */
} mixup_config;

/* Mixes images (n, H, W, C) in place and writes soft targets (n, K). Returns the lambda used. */
double mixup_apply(const mixup_config *m, float *images, int n, int H, int W, int C,
                   const int *labels, int K, float *targets, rng *r);
