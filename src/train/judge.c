#include "judge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../data/augment.h"
#include "../ops/backend.h"

#define JUDGE_BATCH 100

int judge_feature_dim(model *clf) {
    const model_config *c = &clf->cfg;
    int last = 0;
    for (int s = 0; s < c->n_stages; s++)
        if (c->depths[s] > 0) last = s;
    return c->embed_dim[last];
}

/* features and argmax of one normalised batch */
static void judge_batch(model *clf, float *images, int n, float *features, int *pred) {
    const model_config *c = &clf->cfg;
    bool prev = tape_set_grad_enabled(false);
    float *f = features ? features : xmalloc(sizeof(float) * (size_t)n * judge_feature_dim(clf));
    forward_opts fo = {.train = false, .features = f};
    int S = c->img_size, K = c->num_classes;
    const float *x = backend_floats(images, (int64_t)n * S * S * c->in_chans);
    tensor *logits = model_forward(clf, tensor_wrap((float *)x, 4, (int[]){n, S, S, c->in_chans}), &fo);
    const float *scores =
        backend_read(arena_alloc(&vitc_arena, sizeof(float) * (size_t)n * K), logits->data, (int64_t)n * K);
    for (int i = 0; pred && i < n; i++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (scores[(size_t)i * K + k] > scores[(size_t)i * K + best]) best = k;
        pred[i] = best;
    }
    if (!features) free(f);
    tape_reset();
    arena_reset(&vitc_arena);
    tape_set_grad_enabled(prev);
}

void judge_pixels(model *clf, const augment_config *ac, const uint8_t *pixels, int n, int S, int C,
                  float *features, int *pred) {
    const model_config *c = &clf->cfg;
    CHECK(C == ac->in_chans, "judge: %d-channel images for a classifier of %d channels", C, ac->in_chans);
    int64_t in = (int64_t)c->img_size * c->img_size * c->in_chans;
    float *images = xmalloc(sizeof(float) * (size_t)(JUDGE_BATCH * in));
    int dim = judge_feature_dim(clf);
    for (int i0 = 0; i0 < n; i0 += JUDGE_BATCH) {
        int m = n - i0 < JUDGE_BATCH ? n - i0 : JUDGE_BATCH;
        for (int i = 0; i < m; i++) {
            image img = {(uint8_t *)pixels + (size_t)(i0 + i) * S * S * C, S, S, C};
            transform_eval(ac, &img, images + i * in);
        }
        judge_batch(clf, images, m, features ? features + (size_t)i0 * dim : NULL, pred ? pred + i0 : NULL);
    }
    free(images);
}

int judge_dataset(model *clf, const augment_config *ac, const dataset *d, int max, float *features) {
    loader *l = loader_create(d, ac, JUDGE_BATCH, false, 2, 0);
    loader_start_epoch(l, 0, 0);
    int n = 0, dim = judge_feature_dim(clf);
    batch b;
    while (n < max && loader_next(l, &b)) {
        int m = b.n < max - n ? b.n : max - n;
        judge_batch(clf, b.images, m, features + (size_t)n * dim, NULL);
        n += m;
    }
    loader_free(l);
    return n;
}

/* mean (dim) and covariance (dim x dim, divisor n - 1) of the rows of x, in double */
static void moments(const float *x, int n, int dim, double *mean, double *cov) {
    memset(mean, 0, sizeof(double) * dim);
    memset(cov, 0, sizeof(double) * dim * dim);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++) mean[j] += x[(size_t)i * dim + j];
    for (int j = 0; j < dim; j++) mean[j] /= n;
    double *d = xmalloc(sizeof(double) * dim);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < dim; j++) d[j] = x[(size_t)i * dim + j] - mean[j];
        for (int j = 0; j < dim; j++)
            for (int k = 0; k <= j; k++) cov[j * dim + k] += d[j] * d[k];
    }
    for (int j = 0; j < dim; j++)
        for (int k = 0; k <= j; k++) cov[k * dim + j] = cov[j * dim + k] /= (n - 1);
    free(d);
}

/* eigenvalues (w) and eigenvectors (columns of v) of the symmetric a (destroyed), cyclic Jacobi */
static void symmetric_eigen(double *a, int n, double *w, double *v) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) v[i * n + j] = i == j;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, total = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) *(i == j ? &total : &off) += a[i * n + j] * a[i * n + j];
        if (off <= 1e-30 * (total + off) || off == 0) break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = a[p * n + q];
                if (apq == 0) continue;
                double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) { /* a = Jᵀ a J on rows and columns p, q */
                    double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq, a[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) {
                    double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk, a[q * n + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < n; k++) {
                    double vkp = v[k * n + p], vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq, v[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    for (int i = 0; i < n; i++) w[i] = a[i * n + i];
}

double frechet_distance(const float *a, int na, const float *b, int nb, int dim) {
    CHECK(na >= 2 && nb >= 2, "Frechet distance: %d and %d feature rows (at least 2 each)", na, nb);
    size_t dd = (size_t)dim * dim;
    double *ma = xmalloc(sizeof(double) * dim), *mb = xmalloc(sizeof(double) * dim);
    double *ca = xmalloc(sizeof(double) * dd), *cb = xmalloc(sizeof(double) * dd);
    double *v = xmalloc(sizeof(double) * dd), *w = xmalloc(sizeof(double) * dim), *t = xmalloc(sizeof(double) * dd);
    moments(a, na, dim, ma, ca);
    moments(b, nb, dim, mb, cb);
    double fd = 0;
    for (int j = 0; j < dim; j++) fd += (ma[j] - mb[j]) * (ma[j] - mb[j]) + ca[j * dim + j] + cb[j * dim + j];
    /* S_a^1/2 = V diag(sqrt w) Vᵀ into ca, then M = S_a^1/2 S_b S_a^1/2, tr M^1/2 = sum sqrt eig(M) */
    symmetric_eigen(ca, dim, w, v);
    for (int i = 0; i < dim; i++)
        for (int j = 0; j < dim; j++) {
            double s = 0;
            for (int k = 0; k < dim; k++) s += v[i * dim + k] * sqrt(fmax(w[k], 0)) * v[j * dim + k];
            t[i * dim + j] = s;
        }
    for (int i = 0; i < dim; i++) /* ca = S_a^1/2 S_b */
        for (int j = 0; j < dim; j++) {
            double s = 0;
            for (int k = 0; k < dim; k++) s += t[i * dim + k] * cb[k * dim + j];
            ca[i * dim + j] = s;
        }
    for (int i = 0; i < dim; i++) /* cb = ca S_a^1/2, symmetrised against rounding */
        for (int j = 0; j < dim; j++) {
            double s = 0;
            for (int k = 0; k < dim; k++) s += ca[i * dim + k] * t[k * dim + j];
            cb[i * dim + j] = s;
        }
    for (int i = 0; i < dim; i++)
        for (int j = 0; j < i; j++) cb[i * dim + j] = cb[j * dim + i] = 0.5 * (cb[i * dim + j] + cb[j * dim + i]);
    symmetric_eigen(cb, dim, w, v);
    for (int j = 0; j < dim; j++) fd -= 2 * sqrt(fmax(w[j], 0));
    free(ma), free(mb), free(ca), free(cb), free(v), free(w), free(t);
    return fd;
}
