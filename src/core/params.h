/* Parameter registry: every parameter of a model, by its official PyTorch state_dict name, in one
 * flat data block and one flat gradient block (so the optimizer and EMA are flat loops and a
 * checkpoint is a few writes). Declare all parameters, then params_finalize allocates the blocks. */
#pragma once
#include <stddef.h>

#include "tensor.h"

typedef struct param_store {
    tensor **params; /* in declaration (= state_dict) order */
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
void params_finalize(param_store *ps);
void params_zero_grad(param_store *ps);
tensor *params_find(const param_store *ps, const char *name);
