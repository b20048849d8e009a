/* RandAugment as timm's rand_augment_transform with the "increasing" op set: each of `num_ops`
 * draws picks one of 15 ops uniformly and applies it with probability 0.5 at a magnitude drawn as
 * N(m, mstd) clipped to [0, 10]. Geometric ops fill with the mean colour (124, 116, 104). */
#pragma once
#include <stdbool.h>

#include "../core/rng.h"
#include "image.h"

typedef struct randaugment {
    int num_ops;      /* n, default 2 */
    double magnitude; /* m, default 9 */
    double mstd;      /* std of the magnitude noise */
    bool increasing;  /* the "inc1" op set */
} randaugment;

/* the most ops an image (n): recipes use 1 to 4, and a mistyped n99999 would train for ever */
#define RA_MAX_OPS 16

/* Parses a timm spec like "rand-m9-mstd0.5-inc1"; false on a malformed spec, one without inc1
 * (only the increasing op set is implemented), n beyond RA_MAX_OPS, or m or mstd not finite. */
bool randaugment_parse(randaugment *ra, const char *spec);

typedef enum {
    RA_AUTOCONTRAST, RA_EQUALIZE, RA_INVERT, RA_ROTATE, RA_POSTERIZE, RA_SOLARIZE, RA_SOLARIZE_ADD,
    RA_COLOR, RA_CONTRAST, RA_BRIGHTNESS, RA_SHARPNESS, RA_SHEAR_X, RA_SHEAR_Y, RA_TRANSLATE_X,
    RA_TRANSLATE_Y, RA_OP_COUNT
} ra_op;

/* One op at a magnitude in [0, 10]; `negate` flips the sign of signed ops. scratch: an image of the
 * same size for ops that cannot work in place. */
void randaugment_op(ra_op op, double magnitude, bool negate, image *img, image *scratch);
/* The whole policy on img, in place. */
void randaugment_apply(const randaugment *ra, image *img, image *scratch, rng *r);
