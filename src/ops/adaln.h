/* Ops of the diffusion transformers (DiT/SiT, models/sit.c): the activations they use, the adaLN
 * modulation, the gated residual and the class-label embedding. x is (B, ..., C) with B samples;
 * per-sample vectors (shift, scale, gate) are (B, C), broadcast over the sample's rows. */
#pragma once
#include "../core/tape.h"
#include "ops.h"

/* x sigmoid(x) */
tensor *op_silu(tensor *x);
/* nn.GELU(approximate="tanh"): x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))) */
tensor *op_gelu_tanh(tensor *x);
/* modulate(LayerNorm(x), shift, scale) = x̂ (1 + scale) + shift, the LayerNorm without affine
 * parameters (DiT's norm1/norm2/norm_final): one op keeping only the row statistics */
tensor *op_layernorm_modulate(tensor *x, tensor *shift, tensor *scale, float eps);
/* res + gate ⊙ h: adaLN-Zero's gated residual, res and h alike, gate (B, C) */
tensor *op_gated_residual(tensor *res, tensor *gate, tensor *h);
/* rows idx[0..B) of table (K, D) -> (B, D) (nn.Embedding); idx is copied, each checked in [0, K) */
tensor *op_embedding(tensor *table, const int *idx, int B);

void op_silu_backward(tape_node *n);
void op_gelu_tanh_backward(tape_node *n);
void op_layernorm_modulate_backward(tape_node *n);
void op_gated_residual_backward(tape_node *n);
void op_embedding_backward(tape_node *n);
