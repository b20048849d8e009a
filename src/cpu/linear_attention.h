/* Linear attention kernels: FLatten's focusing function on token rows and its linear attention with
 * the mean normaliser, and ELFATT's global heads (softmax-normalised linear attention), on token
 * layouts (seqs, tokens, heads·d), heads read in place through the GEMMs' leading dimensions.
 * Backward kernels accumulate (+=). */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* y = f_p(u) = |u| / |u^p| u^p per row of C channels, u = (relu(x) + 1e-6) / t; t (C) > 0 */
void focus_forward(float *y, const float *x, const float *t, float p, int64_t rows, int C);
/* floats of scratch focus_backward needs for rows of C channels */
size_t focus_scratch_floats(int64_t rows, int C);
/* dx (rows, C) += dL/dx; dt (C) += dL/dt summed over rows (either may be NULL); partial: scratch of
 * focus_scratch_floats(rows, C) floats */
void focus_backward(float *dx, float *dt, const float *dy, const float *x, const float *t, float p,
                    int64_t rows, int C, float *partial);

typedef struct lin_attn_dims {
    int seqs, n, m, heads, d; /* q (seqs, n, heads·d); k, v (seqs, m, heads·d) */
} lin_attn_dims;

/* out_i = q_i (kᵀv / m) / (q_i · mean(k) + 1e-6) per sequence and head; writes kv (seqs, heads, d, d),
 * kmean (seqs, heads, d) and z (seqs, heads, n) = the normalisers, for the backward */
void linear_attention_forward(float *out, float *kv, float *kmean, float *z, const float *q,
                              const float *k, const float *v, const lin_attn_dims *a);
/* floats of scratch linear_attention_backward needs */
size_t linear_attention_scratch_floats(const lin_attn_dims *a);
void linear_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               const float *k, const float *v, const float *kv, const float *kmean,
                               const float *z, const lin_attn_dims *a, float *scratch);

/* ELFATT's global heads on channels [c0, c0 + heads·d) of q (seqs, n, C), k, v (seqs, m, C):
 * out (seqs, n, heads·d) = softmax_features(q) (softmax_tokens(k)ᵀ v) per sequence and head (no
 * scale); writes ctx (seqs, heads, d, d) = softmax_tokens(k)ᵀ v for the backward */
typedef struct softmax_lin_dims {
    int seqs, n, m, heads, d, C, c0;
} softmax_lin_dims;
void softmax_linear_attention_forward(float *out, float *ctx, const float *q, const float *k,
                                      const float *v, const softmax_lin_dims *a, float *scratch);
/* floats of scratch the forward and the backward need */
size_t softmax_linear_attention_scratch_floats(const softmax_lin_dims *a);
/* dq, dk, dv (shaped like q, k, v: only the channels of the op) += the gradients given dout; any NULL
 * is skipped */
void softmax_linear_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                       const float *q, const float *k, const float *v,
                                       const float *ctx, const softmax_lin_dims *a, float *scratch);
