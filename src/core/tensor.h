/* Tensor: contiguous float32, up to 5 dims, a device tag. No strides: reshape is free, every permute
 * is an explicit op. Activations (struct, data and grad) live in the activation arena; parameters
 * point into the flat parameter/gradient blocks of a param_store. A saved activation that the
 * backward only reads rounded to bfloat16 may be stored as bf16 (tensor_new_bf16): half the bytes.
 * Its gradient is fp32 as every gradient, but where the one op reading it writes the gradient
 * whole and the op that made it reads it only as a rounded operand (the MLP's hidden layer:
 * tensor_grad_bf16). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TENSOR_MAX_DIMS 5

typedef enum { DEV_CPU = 0, DEV_CUDA = 1 } device;

typedef struct tensor {
    float *data; /* numel floats, or with bf16 numel bfloat16 values (tensor_bf16) */
    float *grad; /* NULL until a gradient flows into it (tensor_grad allocates it zeroed) */
    bool grad_bf16; /* grad holds numel bf16 values (tensor_grad_bf16), not floats */
    int readers;    /* of an activation: the recorded ops that read it */
    int made_by;    /* the op of the recorded node that made it, plus 1 (0: none, a leaf) */
    struct tensor *view_of; /* a recorded reshape's input: whose gradient the view's may be */
    int64_t numel;
    int ndim;
    int shape[TENSOR_MAX_DIMS];
    device dev;
    bool requires_grad;
    bool bf16;
    const char *name; /* parameters only */
} tensor;

/* New arena tensor; data uninitialised. */
tensor *tensor_new(int ndim, const int *shape);
tensor *tensor_zeros(int ndim, const int *shape);
tensor *tensor_like(const tensor *t);
/* New arena tensor of numel bfloat16 values; data uninitialised. Kernels take it as tensor_bf16;
 * only the ops op_reads_bf16 names may be given it (tape_record refuses it to the others). */
tensor *tensor_new_bf16(int ndim, const int *shape);
static inline uint16_t *tensor_bf16(const tensor *t) { return (uint16_t *)t->data; }
/* the bytes of t's data: 4 or 2 a value */
size_t tensor_data_bytes(const tensor *t);
/* New arena tensor struct sharing x's data under another shape of equal numel (no grad, no tape:
 * op_reshape builds on this). */
tensor *tensor_view(const tensor *x, int ndim, const int *shape);
/* TENSOR(2, 3, 4) -> a new 3-D tensor of shape (2, 3, 4) */
#define TENSOR(...)                                                                                \
    tensor_new((int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})

/* New arena tensor struct over caller-owned data in the memory of tensor data (memory.h): the
 * loader's batch buffer on the CPU, its copy on a device. */
tensor *tensor_wrap(float *data, int ndim, const int *shape);

/* With grad mode off, frees every activation allocated since the mark except x, which is returned
 * (moved); with grad mode on (the tape needs them all) returns x unchanged. */
struct arena_mark;
tensor *tensor_keep(const struct arena_mark *m, tensor *x);

/* Gradient buffer of t, allocated zeroed in the arena on first use. A reshape's view takes its
 * input's when that has one already (fp32): its readers add straight into it, where a buffer of its
 * own cost a pass to zero and one to add it back (pass_grad). */
float *tensor_grad(tensor *t);
/* t's gradient for a kernel that writes every value of it as beta times the value plus its own:
 * where t has none yet (nor a view's input to share), uninitialised memory and beta 0, which
 * spares zeroing it and reading the zeros back; else tensor_grad's, beta 1. */
float *tensor_grad_whole(tensor *t, float *beta);
/* A gradient of t kept in bf16, for t that has none yet: numel values, uninitialised, for a kernel
 * that writes them all. The tape widens it to floats for an op that cannot read it
 * (op_takes_bf16_grad). */
uint16_t *tensor_grad_bf16(tensor *t);
/* the bytes of t's gradient: 4 or 2 a value */
size_t tensor_grad_bytes(const tensor *t);

int64_t shape_numel(int ndim, const int *shape);
bool tensor_same_shape(const tensor *a, const tensor *b);
/* "(2, 3, 4)" into buf; returns buf. For error messages. */
const char *tensor_shape_str(const tensor *t, char *buf, int len);
#define SHAPE_STR(t) tensor_shape_str((t), (char[96]){0}, 96)
/* Dimension index with negative values counting from the end, checked. */
int tensor_dim(const tensor *t, int dim);
/* Product of dims [from, to). */
int64_t tensor_span(const tensor *t, int from, int to);
