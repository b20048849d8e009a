/* Fused softmax attention kernels on token layouts (seqs, tokens, heads·d): each head is read and
 * written in place through row strides, so heads are never split out or merged. Heads of 16 to 64
 * channels run on register tiles (fp32, or bf16 products under --precision bf16), others through
 * GEMMs (OpenBLAS, or gemm_bf16).
 * Only each row's log-sum-exp is kept for the backward, which recomputes the probabilities from q
 * and k (one more n x m x d GEMM per pair instead of holding seqs·heads·n·m floats from the forward
 * to the backward). Backward kernels accumulate (+=) into fp32 gradients, or write those that have
 * no value yet whole; a gradient kept in bf16 (attention_grads_in_bf16) is written whole too. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct attn_dims {
    int seqs, n, m, heads, d; /* q (seqs, n, heads·d); k, v (seqs, m, heads·d) */
    float scale;
    const float *bias; /* (heads, n, m) added to every sequence, or NULL */
    const float *mask; /* (windows, n, m): sequence s takes window s % windows; or NULL */
    int windows;
} attn_dims;

/* where the backward puts the gradients of q, k and v: added into floats (dq, dk, dv), written
 * into them where *_whole (the tensor has no gradient yet: its floats are unset), or written
 * rounded to bf16 (dq16, dk16, dv16: attention their one reader); NULL both: not wanted */
typedef struct attn_grads {
    float *dq, *dk, *dv;
    bool dq_whole, dk_whole, dv_whole;
    uint16_t *dq16, *dk16, *dv16;
} attn_grads;

/* whether attention_backward can write bf16 gradients for these dimensions (on the bf16 tiles) */
bool attention_grads_in_bf16(const attn_dims *a);

/* floats of scratch attention_forward and attention_backward (with dbias or not) need */
size_t attention_scratch_floats(const attn_dims *a, bool backward, bool dbias);

/* out (seqs, n, heads·d) = softmax(scale q kᵀ + bias + mask) v for each sequence and head. lse
 * (seqs, heads, n) receives each row's log-sum-exp of the logits for the backward, or is NULL. */
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       const attn_dims *a, float *scratch);
/* q's, k's and v's gradients (attn_grads) and dbias (heads, n, m) += the gradients given dout
 * and the forward's lse; any of them NULL is skipped. */
void attention_backward(const attn_grads *g, float *dbias, const float *dout, const float *lse,
                        const float *q, const float *k, const float *v, const attn_dims *a,
                        float *scratch);
