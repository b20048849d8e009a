#include "gradcheck.h"

#include <stdlib.h>
#include <string.h>

static double loss_of(gradcheck_fn f, const void *ctx, tensor **inputs, const float *R) {
    arena_mark m = arena_get_mark(&vitc_arena);
    bool prev = tape_set_grad_enabled(false);
    tensor *out = f(inputs, ctx);
    double L = 0;
    for (int64_t i = 0; i < out->numel; i++) L += (double)out->data[i] * R[i];
    tape_set_grad_enabled(prev);
    arena_release(&vitc_arena, m);
    return L;
}

bool gradcheck(const char *name, gradcheck_fn f, const void *ctx, int n_in, tensor **inputs,
               gradcheck_opts opts) {
    double eps = opts.eps > 0 ? opts.eps : 1e-2;
    double tol = opts.tol > 0 ? opts.tol : 1e-2;
    int max_elems = opts.max_elems > 0 ? opts.max_elems : 256;

    /* analytic gradients, on top of a known prefill: an op that overwrites instead of accumulating
     * (+=) loses the prefill and fails */
    tape_reset();
    arena_mark m = arena_get_mark(&vitc_arena);
    for (int i = 0; i < n_in; i++) {
        inputs[i]->grad = NULL;
        if (!inputs[i]->requires_grad) continue;
        float *g = tensor_grad(inputs[i]);
        for (int64_t j = 0; j < inputs[i]->numel; j++) g[j] = 0.25f + (float)(j % 7);
    }
    tensor *out = f(inputs, ctx);
    if (!out->requires_grad) {
        printf("    %s: output does not require grad\n", name);
        return false;
    }
    int64_t n_out = out->numel;
    float *R = malloc((size_t)n_out * sizeof(float));
    rng r;
    rng_seed(&r, 1234, RNG_TEST);
    for (int64_t i = 0; i < n_out; i++) R[i] = rng_normal(&r);
    tape_backward_from(out, R);
    float **analytic = calloc((size_t)n_in, sizeof(float *));
    for (int i = 0; i < n_in; i++) {
        if (!inputs[i]->requires_grad) continue;
        analytic[i] = calloc((size_t)inputs[i]->numel, sizeof(float));
        for (int64_t j = 0; j < inputs[i]->numel; j++)
            analytic[i][j] = inputs[i]->grad[j] - (0.25f + (float)(j % 7));
        inputs[i]->grad = NULL;
    }
    tape_reset();
    arena_release(&vitc_arena, m);

    bool ok = true;
    for (int i = 0; i < n_in && ok; i++) {
        tensor *x = inputs[i];
        if (!x->requires_grad) continue;
        int64_t stride = x->numel > max_elems ? x->numel / max_elems : 1;
        int64_t count = (x->numel + stride - 1) / stride;
        double *numeric = malloc((size_t)count * sizeof(double));
        double scale = 0;
        for (int64_t k = 0; k < count; k++) {
            int64_t j = k * stride;
            float saved = x->data[j];
            x->data[j] = (float)(saved + eps);
            double hi_x = x->data[j] - (double)saved;
            double lp = loss_of(f, ctx, inputs, R);
            x->data[j] = (float)(saved - eps);
            double lo_x = saved - (double)x->data[j];
            double lm = loss_of(f, ctx, inputs, R);
            x->data[j] = saved;
            numeric[k] = (lp - lm) / (hi_x + lo_x);
            if (fabs(numeric[k]) > scale) scale = fabs(numeric[k]);
        }
        double worst = 0;
        int64_t worst_j = -1;
        for (int64_t k = 0; k < count; k++) {
            int64_t j = k * stride;
            double err = fabs(analytic[i][j] - numeric[k]);
            double ratio = err / (tol * (fabs(numeric[k]) + scale + 1e-6));
            if (ratio != ratio) { /* a NaN on either side fails, and is the element shown */
                worst = ratio, worst_j = j;
                break;
            }
            if (ratio > worst) worst = ratio, worst_j = j;
        }
        if (worst > 1.0 || worst != worst) {
            int64_t k = worst_j / stride;
            printf("    %s: input %d %s element %lld: analytic %.6g vs numeric %.6g (scale %.3g)\n",
                   name, i, SHAPE_STR(x), (long long)worst_j, analytic[i][worst_j],
                   worst_j >= 0 ? numeric[k] : 0.0, scale);
            ok = false;
        }
        free(numeric);
    }
    for (int i = 0; i < n_in; i++) free(analytic[i]);
    free(analytic);
    free(R);
    return ok;
}

double backward_difference(tensor *a, tensor *b, int n_in, tensor **inputs) {
    float *seed = malloc(sizeof(float) * (size_t)a->numel), **want = calloc((size_t)n_in, sizeof(float *));
    rng r;
    rng_seed(&r, 4321, RNG_TEST);
    for (int64_t i = 0; i < a->numel; i++) seed[i] = rng_normal(&r);
    for (int i = 0; i < n_in; i++) inputs[i]->grad = NULL;
    tape_backward_from(a, seed);
    for (int i = 0; i < n_in; i++) {
        want[i] = malloc(sizeof(float) * (size_t)inputs[i]->numel);
        memcpy(want[i], inputs[i]->grad, sizeof(float) * (size_t)inputs[i]->numel);
        inputs[i]->grad = NULL;
    }
    tape_backward_from(b, seed); /* a's nodes gave their gradients back: only b's run */
    double worst = 0;
    for (int i = 0; i < n_in; i++) {
        double d = max_rel_diff(inputs[i]->grad, want[i], inputs[i]->numel);
        if (d > worst || d != d) worst = d; /* a NaN sticks */
        inputs[i]->grad = NULL;
        free(want[i]);
    }
    tape_reset();
    free(want);
    free(seed);
    return worst;
}
