/* A transformer block's MLP step, out = res + keep_s (fc2(gelu(fc1(layernorm(res))))), computed in
 * row chunks that each thread takes whole: the chunk's normalised rows, hidden rows and GELU stay in
 * its cache between the two single-threaded GEMMs. Where the channels are few (64, 96, 128: the
 * first stages of the pyramid models, thousands of tokens), the two-op form streams the hidden
 * tensor through memory three times and spends more time there than in its GEMMs. Also the
 * scaling of groups of values by a factor each: dropout's mask, drop path's per-sample factors. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mlp_dims {
    int64_t M;    /* rows */
    int C, hidden; /* res (M, C), fc1 (hidden, C), fc2 (C, hidden) */
    int rows_per_sample; /* keep[s] scales the rows of sample s */
} mlp_dims;

/* rows per chunk, and the floats of scratch mlp_residual_forward needs (a kernel-table entry: a
 * device's version needs another amount) */
int mlp_chunk_rows(const mlp_dims *d);
size_t mlp_scratch_floats(const mlp_dims *d);
/* out (M, C); mean, rstd (M) the layernorm's row statistics; h (M, hidden) receives fc1's output
 * (pre-GELU) when not NULL (the backward reads it), or h_bf16 receives it rounded to bf16 and the
 * GELU reads the rounded values (bf16_store); keep (samples) or NULL. A dropped sample's rows
 * (keep 0) are res: a device may skip their branch, leaving any finite values in h, mean and rstd
 * there (the CPU's zeros), which the backward meets with a zero gradient. */
void mlp_residual_forward(float *out, float *h, uint16_t *h_bf16, float *mean, float *rstd,
                          const float *res, const float *ln_w, const float *ln_b, float eps,
                          const float *w1, const float *b1, const float *w2, const float *b2,
                          const float *keep, const mlp_dims *d, float *scratch);

/* The backward of the hidden layer of a bf16 MLP step (h, fc1's output, kept in bf16; d->M rows
 * of d->hidden; g (M, C) the gradient of fc2's output, w2 (C, hidden) fc2's weight):
 * act = gelu(h) rounded to bf16, the operand of fc2's weight gradient, and, where dh is not NULL,
 * h's gradient gelu'(h) · (g w2) rounded to bf16 into dh (written, not added to), the operand of
 * fc1's products, which would round it anyway. In row chunks that each thread takes whole, so that
 * g w2 and the slope stay in its cache: the bits of gelu_bf16_value_and_slope, gemm_bf16's product
 * and scale_groups, rounded, without their three passes over memory. Under bf16 only; scratch of
 * mlp_hidden_backward_scratch_floats(d) floats (a kernel-table entry, as mlp_scratch_floats). */
size_t mlp_hidden_backward_scratch_floats(const mlp_dims *d);
void mlp_hidden_backward_bf16(uint16_t *dh, uint16_t *act, const uint16_t *h, const float *g,
                              const float *w2, const mlp_dims *d, float *scratch);

/* dst[g, j] = x[g, j] · scale[g] (accumulate: +=) for `groups` groups of `per` values: per 1 is an
 * elementwise product (a dropout mask), per the values of a sample its drop-path factor */
void scale_groups(float *dst, const float *x, const float *scale, int64_t groups, int64_t per,
                  bool accumulate);
