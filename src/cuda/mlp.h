/* CUDA versions of src/cpu/mlp.h on device pointers: the MLP step composed from the device's
 * layernorm, GEMMs and GELU in passes of rows that fit its scratch, and the groups' scaling. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../cpu/mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the floats of scratch cuda_mlp_residual_forward needs: passes of up to 2^24 floats */
size_t cuda_mlp_scratch_floats(const mlp_dims *d);
/* as mlp_residual_forward; scratch of cuda_mlp_scratch_floats(d) floats */
void cuda_mlp_residual_forward(float *out, float *h, uint16_t *h_bf16, float *mean, float *rstd,
                               const float *res, const float *ln_w, const float *ln_b, float eps,
                               const float *w1, const float *b1, const float *w2, const float *b2,
                               const float *keep, const mlp_dims *d, float *scratch);
/* the floats of scratch cuda_mlp_hidden_backward_bf16 needs: passes of up to 2^24 floats */
size_t cuda_mlp_hidden_backward_scratch_floats(const mlp_dims *d);
/* as mlp_hidden_backward_bf16 */
void cuda_mlp_hidden_backward_bf16(uint16_t *dh, uint16_t *act, const uint16_t *h, const float *g,
                                   const float *w2, const mlp_dims *d, float *scratch);
/* dst[g, j] = x[g, j] · scale[g] (accumulate: +=) */
void cuda_scale_groups(float *dst, const float *x, const float *scale, int64_t groups, int64_t per,
                       bool accumulate);

#ifdef __cplusplus
}
#endif
