/* CUDA versions of the data-movement kernels of src/cpu/shape.h on device pointers, same semantics:
 * permutation of up to 5 dims and strided block copies (concat / slice). Backward kernels
 * accumulate (+=); every destination element has one source, so no two threads write one place. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[c] = in[c permuted]: out.shape[k] = in_shape[perm[k]] (in_shape and perm are host arrays) */
void cuda_permute_forward(float *out, const float *in, int nd, const int *in_shape, const int *perm);
/* gin (in layout) += gout (out layout) moved back */
void cuda_permute_backward(float *gin, const float *gout, int nd, const int *in_shape, const int *perm);

/* Block copy between a (outer, dst_len, inner) destination and a (outer, src_len, inner) source:
 * `count` slices from src_start to dst_start along the middle dim, copied or (accumulate) added. */
void cuda_block_copy(float *dst, int64_t dst_len, const float *src, int64_t src_len, int64_t outer,
                     int64_t inner, int64_t dst_start, int64_t src_start, int64_t count, int accumulate);

#ifdef __cplusplus
}
#endif
