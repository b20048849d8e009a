/* Finite-difference gradient check: L = sum(f(inputs) ⊙ R) with a fixed random R; the backward's
 * dL/dx of every input that requires a gradient is compared with central differences
 * (L(x + eps) - L(x - eps)) / 2 eps, accumulated in double. */
#pragma once
#include "test.h"

typedef tensor *(*gradcheck_fn)(tensor **inputs, const void *ctx);

typedef struct gradcheck_opts {
    double eps;       /* perturbation (default 1e-2) */
    double tol;       /* |analytic - numeric| <= tol * (|numeric| + max |numeric| of that input) */
    int max_elems;    /* elements checked per input, spread evenly (default 256) */
} gradcheck_opts;

/* Returns true when every checked element agrees; prints the worst mismatch otherwise. */
bool gradcheck(const char *name, gradcheck_fn f, const void *ctx, int n_in, tensor **inputs,
               gradcheck_opts opts);

/* a and b, both on the tape, are the same function of `inputs` (a fused op and the chain of ops it
 * replaces): runs the reverse pass from each with one random upstream gradient and returns the worst
 * relative difference of the inputs' gradients. Clears the inputs' gradients and the tape. For sizes
 * where finite differences would be slow (a fused op's multi-pass path). */
double backward_difference(tensor *a, tensor *b, int n_in, tensor **inputs);

#define GRADCHECK(f, ctx, ...)                                                                     \
    gradcheck(#f, (f), (ctx), (int)(sizeof((tensor *[]){__VA_ARGS__}) / sizeof(tensor *)),       \
              (tensor *[]){__VA_ARGS__}, (gradcheck_opts){0})
