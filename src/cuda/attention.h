/* CUDA versions of src/cpu/attention.h on device pointers, same semantics (attn_dims' bias and mask
 * are device pointers too); the products in the selected precision (cuda_gemm_batched). Backward
 * kernels accumulate (+=). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "../cpu/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* floats of scratch: the logits of a chunk of sequences (and their gradient for the backward) */
size_t cuda_attention_scratch_floats(const attn_dims *a, bool backward, bool dbias);
void cuda_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                            const attn_dims *a, float *scratch);
/* fp32 gradients only: cuda_attention_grads_in_bf16 says no */
void cuda_attention_backward(const attn_grads *g, float *dbias, const float *dout, const float *lse,
                             const float *q, const float *k, const float *v, const attn_dims *a,
                             float *scratch);
bool cuda_attention_grads_in_bf16(const attn_dims *a);

#ifdef __cplusplus
}
#endif
