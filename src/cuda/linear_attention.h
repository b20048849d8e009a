/* CUDA versions of src/cpu/linear_attention.h on device pointers, same semantics: FLatten's focusing
 * function and linear attention, ELFATT's softmax linear attention; the products in the selected
 * precision (cuda_gemm_batched). Backward kernels accumulate (+=). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "../cpu/linear_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

size_t cuda_focus_scratch_floats(int64_t rows, int C);
void cuda_focus_forward(float *y, const float *x, const float *t, float p, int64_t rows, int C);
/* partial: cuda_focus_scratch_floats(rows, C) floats (the rows' dt summed by blocks) */
void cuda_focus_backward(float *dx, float *dt, const float *dy, const float *x, const float *t,
                         float p, int64_t rows, int C, float *partial);

void cuda_linear_attention_forward(float *out, float *kv, float *kmean, float *z, const float *q,
                                   const float *k, const float *v, const lin_attn_dims *a);
size_t cuda_linear_attention_scratch_floats(const lin_attn_dims *a);
void cuda_linear_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v, const float *kv,
                                    const float *kmean, const float *z, const lin_attn_dims *a,
                                    float *scratch);

void cuda_softmax_linear_attention_forward(float *out, float *ctx, const float *q, const float *k,
                                           const float *v, const softmax_lin_dims *a,
                                           float *scratch);
size_t cuda_softmax_linear_attention_scratch_floats(const softmax_lin_dims *a);
void cuda_softmax_linear_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                            const float *q, const float *k, const float *v,
                                            const float *ctx, const softmax_lin_dims *a,
                                            float *scratch);

#ifdef __cplusplus
}
#endif
