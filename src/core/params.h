/* Parameter registry: every parameter of a model, by its official PyTorch state_dict name, in one
 * flat data block and one flat gradient block (so the optimizer and EMA are flat loops over `span`
 * floats and a checkpoint is a few writes). Declare all parameters, then params_finalize allocates
 * the blocks on the host, where they are initialised; params_to_device moves them once to the
 * selected device. */
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

struct memory_ops;
#define PARAM_LINE_FLOATS 16

typedef struct param_store {
    tensor **params; /* in declaration (= state_dict) order */
    param_init *inits;
    int n, cap;
    int64_t numel;   /* the parameters' floats: the model's parameter count */
    /* floats in each flat block: every parameter starts on a 64-byte line (PARAM_LINE_FLOATS
     * floats), zeros between (a weight gradient that straddled lines sent AMX's tile loads and
     * stores across two lines a row); a whole number of lines */
    int64_t span;
    float *data;     /* flat blocks, NULL until finalized */
    float *grad;
    void *allocs[2]; /* the allocations data and grad start in (from their first line, on the host) */
    const struct memory_ops *mem; /* where data and grad live (core/memory.h): host_memory until moved */
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
/* Moves the blocks to the memory of the selected device (vitc_memory()), once, after the values are
 * set on the host: every parameter's data, grad and dev follow; gradients start at zero. Nothing to
 * do when that memory is the host's. */
void params_to_device(param_store *ps);
/* n floats at src, in the store's memory (its blocks, or an optimizer or EMA block allocated beside
 * them), as the host sees them: copied into host, or src itself when that memory is the host's
 * (host untouched). For checkpoints and the other readers of values on the host. */
const float *params_read(const param_store *ps, float *host, const float *src, int64_t n);
/* n host floats into dst in the store's memory (the inverse of params_read). */
void params_write(const param_store *ps, float *dst, const float *host, int64_t n);
tensor *params_find(const param_store *ps, const char *name);
/* whether a parameter's name ends with suffix: the module attribute it names (".bias",
 * ".relative_position_bias_table"), whatever module holds it */
bool param_name_ends_with(const char *name, const char *suffix);
