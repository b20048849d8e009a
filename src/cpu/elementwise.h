/* Elementwise kernels: binary ops with numpy broadcasting over at most 5 dims, and the unary
 * activations. Backward kernels accumulate (+=). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

typedef enum { BIN_ADD, BIN_MUL, BIN_DIV } binary_op;

/* Shapes padded on the left to 5 dims; strides of a and b are 0 along their broadcast dims. */
typedef struct broadcast {
    int out[5];
    int64_t stride_a[5], stride_b[5], stride_out[5];
    int64_t n;          /* output elements */
    int64_t na, nb;     /* input elements */
    int kind;           /* one of the BCAST_ cases below */
} broadcast;
/* same shapes; b (or a) equal to the trailing dims of the other; b one value per row of a (a's shape
 * with the last dim 1, e.g. a division by a norm); anything else */
enum { BCAST_SAME, BCAST_B_SUFFIX, BCAST_A_SUFFIX, BCAST_B_ROWS, BCAST_GENERAL };

/* Fills bc; returns false if the shapes do not broadcast. */
bool broadcast_plan(broadcast *bc, int nda, const int *sa, int ndb, const int *sb);

void binary_forward(binary_op op, float *out, const float *a, const float *b, const broadcast *bc);
/* ga (shaped like a) += dL/da, gb += dL/db; either may be NULL. out is the forward result (div). */
void binary_backward(binary_op op, float *ga, float *gb, const float *gout, const float *a,
                     const float *b, const float *out, const broadcast *bc);

/* g_in (shape in, padded to 5 dims) += sum of g_out over the dims where in has size 1 */
void broadcast_reduce(float *g_in, const float *g_out, const int *in5, const int *out5);
/* out (shape out5) = x (shape in5) repeated along the dims where in has size 1: op_expand, whose
 * backward is broadcast_reduce */
void expand_forward(float *out, const float *x, const int *in5, const int *out5);

/* out = s x; dx += s dout (op_scale) */
void scale_forward(float *out, const float *x, float s, int64_t n);
void scale_backward(float *dx, const float *dout, float s, int64_t n);
/* out = x + s (op_add_scalar, whose backward passes the gradient through) */
void add_scalar_forward(float *out, const float *x, float s, int64_t n);

/* dst += src: the backward of every op that passes its gradient through unchanged */
void accumulate(float *dst, const float *src, int64_t n);
/* dst = src, split over the threads */
void copy_floats(float *dst, const float *src, int64_t n);

void gelu_forward(float *out, const float *x, int64_t n);
void gelu_backward(float *dx, const float *dout, const float *x, int64_t n);
/* out = gelu(x) rounded to bf16 as bf16_from_float does: the operand a bf16 product reads; where
 * kept is not NULL, x rounded to bf16 into it first and the GELU of the rounded values (an MLP's
 * hidden layer, kept for the backward, which recomputes the GELU from it) */
void gelu_forward_bf16(uint16_t *out, uint16_t *kept, const float *x, int64_t n);
/* out = gelu(x) and slope = gelu'(x), for a backward that recomputes the activation; out may be x */
void gelu_value_and_slope(float *out, float *slope, const float *x, int64_t n);
/* the same from a hidden layer kept in bf16 (bf16_store.h), out rounded to bf16 as
 * bf16_from_float does: the bits the bf16 products would round gelu(x) to */
void gelu_bf16_value_and_slope(uint16_t *out, float *slope, const uint16_t *x, int64_t n);
/* values a thread takes at a time in the GELUs */
#define GELU_BLOCK 512
/* one block of it (m <= GELU_BLOCK) on the calling thread, for a kernel that fuses it with more:
 * act = gelu(h) rounded, and where not NULL, slope = gelu'(h) and dh = gelu'(h) · dact rounded to
 * bf16 (the bits of slope · dact, rounded) */
void gelu_bf16_backward_block(uint16_t *act, uint16_t *dh, float *slope, const uint16_t *h,
                              const float *dact, int m);
void relu_forward(float *out, const float *x, int64_t n);
void relu_backward(float *dx, const float *dout, const float *x, int64_t n);
void softplus_forward(float *out, const float *x, int64_t n);
void softplus_backward(float *dx, const float *dout, const float *x, int64_t n);
void pow_forward(float *out, const float *x, float p, int64_t n);
void pow_backward(float *dx, const float *dout, const float *x, float p, int64_t n);
