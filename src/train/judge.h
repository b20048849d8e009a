/* Judging generated images with a vitc classifier (the Attention Mediators demo): which class it
 * gives each sample, its penultimate features (the representation its head reads), and the Frechet
 * distance between the features of the samples and of real images ("FMNIST-FD, vitc classifier
 * features" on Fashion-MNIST): FD = |mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2),
 * covariances with the n - 1 divisor, as the FID code's np.cov. */
#pragma once
#include <stdint.h>

#include "../../models/model.h"
#include "../data/data.h"

/* The classifier's width of features (its head's input) */
int judge_feature_dim(model *clf);

/* n images of 8-bit pixels (S x S x C channels-last each, as a PNG holds them) through the
 * classifier's eval transform (ac: its data and aug settings, as for real images), in batches:
 * features (n x judge_feature_dim) and the predicted classes (NULL to skip either) */
void judge_pixels(model *clf, const augment_config *ac, const uint8_t *pixels, int n, int S, int C,
                  float *features, int *pred);
/* The same for the images of a dataset (its eval loader); returns their number (<= max) */
int judge_dataset(model *clf, const augment_config *ac, const dataset *d, int max, float *features);

/* between the rows of a (na x dim) and b (nb x dim), na, nb >= 2 */
double frechet_distance(const float *a, int na, const float *b, int nb, int dim);
