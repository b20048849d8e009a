/* Data-movement kernels: permutation of up to 5 dims and strided block copies (concat / slice).
 * Backward kernels accumulate (+=). */
#pragma once
#include <stdint.h>

/* out[c] = in[c permuted]: out.shape[k] = in_shape[perm[k]] */
void permute_forward(float *out, const float *in, int nd, const int *in_shape, const int *perm);
/* gin (in layout) += gout (out layout) moved back */
void permute_backward(float *gin, const float *gout, int nd, const int *in_shape, const int *perm);

/* Block copy between a (outer, a_len, inner) and b (outer, b_len, inner) tensors at offset `start`
 * along the middle dim of b: dst block = src block (copy) or += (accumulate). */
void block_copy(float *dst, int64_t dst_len, const float *src, int64_t src_len, int64_t outer,
                int64_t inner, int64_t dst_start, int64_t src_start, int64_t count, int accumulate);
