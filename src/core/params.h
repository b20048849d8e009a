/* Parameter registry: every parameter of a model, by its official PyTorch state_dict name, in one
 * flat data block and one flat gradient block (so the optimizer and EMA are flat loops and a
 * checkpoint is a few writes). Declare all parameters, then params_finalize allocates the blocks. */
#pragma once
#include <stddef.h>

#include "rng.h"
#include "tensor.h"

/* How a parameter is initialised (the official repos' schemes). */
typedef enum {
    INIT_ZEROS,
    INIT_ONES,
    INIT_TRUNC_NORMAL, /* N(0, a²) redrawn into [-2, 2], timm's trunc_normal_ */
    INIT_UNIFORM,      /* U(-a, a): PyTorch's default conv init uses a = 1/sqrt(fan_in) */
} init_kind;

typedef struct param_init {
    init_kind kind;
    float a;
} param_init;

typedef struct param_store {
    tensor **params; /* in declaration (= state_dict) order */
    param_init *inits;
    int n, cap;
    int64_t numel;   /* total floats */
    float *data;     /* flat blocks, NULL until finalized */
    float *grad;
} param_store;

void params_init(param_store *ps);
void params_free(param_store *ps);
/* Declares a parameter; the returned tensor gets its storage at params_finalize. */
tensor *params_add(param_store *ps, const char *name, int ndim, const int *shape);
#define PARAM(ps, name, ...)                                                                       \
    params_add((ps), (name), (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)),                  \
               (int[]){__VA_ARGS__})
void params_set_init(param_store *ps, const tensor *t, init_kind kind, float a);
void params_finalize(param_store *ps);
/* Fills every parameter by its init scheme, in declaration order, from one rng stream. */
void params_init_values(param_store *ps, rng *r);
void params_zero_grad(param_store *ps);
tensor *params_find(const param_store *ps, const char *name);
