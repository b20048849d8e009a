/* Judging samples (./sample --judge): the Frechet distance on hand-computed moments, and a
 * classifier's features, which its head reads. */
#include <stdlib.h>

#include "../src/train/judge.h"
#include "model_check.h"
#include "test.h"

TEST(frechet_distance_of_hand_computed_moments) {
    /* a: the 4 corners (+-1, +-1): mean 0, covariance 4/3 I; b = 2 a + (3, 0): mean (3, 0),
     * covariance 16/3 I. FD = 9 + 2 (4/3 + 16/3) - 2 * 2 sqrt(4/3 * 16/3) = 9 + 8/3 */
    const float a[] = {1, 1, 1, -1, -1, 1, -1, -1}, b[] = {5, 2, 5, -2, 1, 2, 1, -2};
    double fd = frechet_distance(a, 4, b, 4, 2);
    EXPECT(fabs(fd - (9 + 8.0 / 3)) < 1e-9, "FD %.12f, want %.12f", fd, 9 + 8.0 / 3);
    EXPECT(fabs(frechet_distance(a, 4, a, 4, 2)) < 1e-9, "FD of a set to itself");
    /* correlated features: b the same cloud rotated by 90 degrees keeps the moments of a when
     * its covariance is isotropic, and in 1-D FD = (mu_a - mu_b)^2 + (sigma_a - sigma_b)^2 */
    rng r;
    rng_seed(&r, 3, RNG_TEST);
    float x[3 * 200], y[3 * 200], u[50], v[50];
    for (int i = 0; i < 200; i++) {
        float g0 = rng_normal(&r), g1 = rng_normal(&r), g2 = rng_normal(&r);
        x[3 * i] = g0, x[3 * i + 1] = g0 + 0.5f * g1, x[3 * i + 2] = 0.2f * g2 - g0; /* correlated */
        y[3 * i] = x[3 * i + 1], y[3 * i + 1] = x[3 * i], y[3 * i + 2] = x[3 * i + 2]; /* features swapped */
    }
    double s = frechet_distance(x, 200, y, 200, 3), want = 0;
    /* swapping two features permutes the moments: FD = |mu_x - P mu_x|^2 + tr(S + PSP) - 2 tr((S^1/2 PSP S^1/2)^1/2),
     * > 0; and the distance of y to x equals that of x to y */
    double back = frechet_distance(y, 200, x, 200, 3);
    EXPECT(s > 0 && fabs(s - back) < 1e-6 * s, "FD(x, y) %.9f vs FD(y, x) %.9f", s, back);
    for (int i = 0; i < 50; i++) u[i] = 1 + 2 * rng_normal(&r), v[i] = u[i] * 0.5f - 3;
    double mu = 0, su = 0, mv = 0, sv = 0;
    for (int i = 0; i < 50; i++) mu += u[i] / 50, mv += v[i] / 50;
    for (int i = 0; i < 50; i++) su += (u[i] - mu) * (u[i] - mu) / 49, sv += (v[i] - mv) * (v[i] - mv) / 49;
    want = (mu - mv) * (mu - mv) + (sqrt(su) - sqrt(sv)) * (sqrt(su) - sqrt(sv));
    double one_d = frechet_distance(u, 50, v, 50, 1);
    EXPECT(fabs(one_d - want) < 1e-6 * want, "1-D FD %.9f, want %.9f", one_d, want);
}

TEST(classifier_features_are_what_its_head_reads) {
    const char *names[] = {"deit_t", "swin_t", "pvt_v2_b0", "cswin_t"};
    for (int i = 0; i < 4; i++) {
        model_config mc;
        registry_config_narrow(&mc, names[i], 3);
        model *m = model_create(&mc, 1);
        int dim = judge_feature_dim(m);
        rng r;
        rng_seed(&r, 3, RNG_TEST);
        tensor *x = RANDN(&r, 1, 2, mc.img_size, mc.img_size, mc.in_chans);
        float *f = malloc(sizeof(float) * 2 * dim);
        forward_opts fo = {.features = f};
        tensor *logits = model_forward(m, x, &fo);
        /* logits = features · headᵀ + bias, with the head found by name */
        const tensor *w = NULL, *b = NULL;
        for (int p = 0; p < m->ps.n; p++) {
            if (!strcmp(m->ps.params[p]->name, "head.weight")) w = m->ps.params[p];
            if (!strcmp(m->ps.params[p]->name, "head.bias")) b = m->ps.params[p];
        }
        EXPECT(w && b && w->shape[1] == dim, "%s: head %d wide, features %d", names[i], w ? w->shape[1] : -1, dim);
        double worst = 0;
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < 3; k++) {
                double z = b->data[k];
                for (int j = 0; j < dim; j++) z += (double)f[s * dim + j] * w->data[k * dim + j];
                worst = max_error(worst, fabs(z - logits->data[s * 3 + k]));
            }
        free(f);
        model_free(m);
        tape_reset();
        arena_reset(&vitc_arena);
        EXPECT(worst < 1e-4, "%s: logits differ from head(features) by %g", names[i], worst);
    }
}
