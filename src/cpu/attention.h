/* Fused softmax attention kernels on token layouts (seqs, tokens, heads·d): each head is read and
 * written in place through the GEMMs' leading dimensions, so heads are never split out or merged,
 * and only the probabilities are kept for the backward. Backward kernels accumulate (+=). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

typedef struct attn_dims {
    int seqs, n, m, heads, d; /* q (seqs, n, heads·d); k, v (seqs, m, heads·d) */
    float scale;
    const float *bias; /* (heads, n, m) added to every sequence, or NULL */
    const float *mask; /* (windows, n, m): sequence s takes window s % windows; or NULL */
    int windows;
} attn_dims;

/* floats of scratch attention_forward (without probs) and attention_backward (with dbias or not) need */
size_t attention_scratch_floats(const attn_dims *a, bool dbias);

/* out (seqs, n, heads·d) = softmax(scale q kᵀ + bias + mask) v for each sequence and head. probs
 * (seqs, heads, n, m) receives the probabilities, or is NULL to keep them only in scratch. */
void attention_forward(float *out, float *probs, const float *q, const float *k, const float *v,
                       const attn_dims *a, float *scratch);
/* dq, dk, dv (shaped like q, k, v) and dbias (heads, n, m) += the gradients given dout and the saved
 * probabilities; any of them NULL is skipped. */
void attention_backward(float *dq, float *dk, float *dv, float *dbias, const float *dout,
                        const float *probs, const float *q, const float *k, const float *v,
                        const attn_dims *a, float *scratch);
