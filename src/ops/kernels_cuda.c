/* The CUDA kernel table (make CUDA=1): src/cuda's kernels under the names of the CPU's. A kernel
 * left out here is NULL, and backend_select refuses --device cuda naming it. */
#ifdef VITC_CUDA
#include "../cuda/adaln.h"
#include "../cuda/attention.h"
#include "../cuda/bf16_store.h"
#include "../cuda/conv.h"
#include "../cuda/elementwise.h"
#include "../cuda/linear_attention.h"
#include "../cuda/loss.h"
#include "../cuda/matmul.h"
#include "../cuda/mlp.h"
#include "../cuda/norm.h"
#include "../cuda/shape.h"
#include "../cuda/spatial.h"
#include "../cuda/train_step.h"
#include "kernels.h"

const kernel_table cuda_kernels = {
#define CUDA_KERNEL(name) .name = cuda_##name,
    /* elementwise */
    CUDA_KERNEL(binary_forward) CUDA_KERNEL(binary_backward) CUDA_KERNEL(broadcast_reduce)
    CUDA_KERNEL(expand_forward) CUDA_KERNEL(accumulate) CUDA_KERNEL(scale_forward)
    CUDA_KERNEL(scale_backward) CUDA_KERNEL(add_scalar_forward) CUDA_KERNEL(gelu_forward)
    CUDA_KERNEL(gelu_backward) CUDA_KERNEL(gelu_value_and_slope)
    CUDA_KERNEL(gelu_bf16_value_and_slope) CUDA_KERNEL(relu_forward)
    CUDA_KERNEL(relu_backward) CUDA_KERNEL(softplus_forward) CUDA_KERNEL(softplus_backward)
    CUDA_KERNEL(pow_forward) CUDA_KERNEL(pow_backward)
    CUDA_KERNEL(copy_floats)
    /* loss */
    CUDA_KERNEL(cross_entropy_forward) CUDA_KERNEL(cross_entropy_backward) CUDA_KERNEL(label_targets)
    CUDA_KERNEL(mse_forward) CUDA_KERNEL(mse_backward) CUDA_KERNEL(ddpm_loss_forward)
    CUDA_KERNEL(ddpm_loss_backward)
    /* shape */
    CUDA_KERNEL(permute_forward) CUDA_KERNEL(permute_backward) CUDA_KERNEL(block_copy)
    /* matmul */
    CUDA_KERNEL(gemm) CUDA_KERNEL(gemm_strided) CUDA_KERNEL(linear_forward) CUDA_KERNEL(linear_backward)
    CUDA_KERNEL(linear_forward_bf16_input) CUDA_KERNEL(linear_backward_bf16_input)
    CUDA_KERNEL(linear_backward_bf16_grad) CUDA_KERNEL(linear_chunks_backward_bf16_grad)
    CUDA_KERNEL(add_column_sums)
    CUDA_KERNEL(matmul_forward) CUDA_KERNEL(matmul_backward)
    CUDA_KERNEL(residual_linear_forward)
    /* bf16 storage */
    CUDA_KERNEL(bf16_store) CUDA_KERNEL(bf16_load)
    /* mlp */
    CUDA_KERNEL(mlp_residual_forward) CUDA_KERNEL(mlp_scratch_floats)
    CUDA_KERNEL(mlp_hidden_backward_scratch_floats) CUDA_KERNEL(mlp_hidden_backward_bf16)
    CUDA_KERNEL(scale_groups)
    /* conv */
    CUDA_KERNEL(conv2d_forward) CUDA_KERNEL(conv2d_backward) CUDA_KERNEL(dwconv2d_forward)
    CUDA_KERNEL(dwconv2d_backward) CUDA_KERNEL(adaptive_avg_pool2d_forward)
    CUDA_KERNEL(adaptive_avg_pool2d_backward) CUDA_KERNEL(interp_bilinear_forward)
    CUDA_KERNEL(interp_bilinear_backward)
    /* norm */
    CUDA_KERNEL(layernorm_forward) CUDA_KERNEL(layernorm_windows_forward)
    CUDA_KERNEL(layernorm_backward) CUDA_KERNEL(softmax_forward)
    CUDA_KERNEL(softmax_backward) CUDA_KERNEL(layernorm_apply) CUDA_KERNEL(l2norm_forward)
    CUDA_KERNEL(l2norm_backward) CUDA_KERNEL(mean_forward) CUDA_KERNEL(mean_backward)
    /* adaln */
    CUDA_KERNEL(silu_forward) CUDA_KERNEL(silu_backward) CUDA_KERNEL(gelu_tanh_forward)
    CUDA_KERNEL(gelu_tanh_backward) CUDA_KERNEL(layernorm_modulate_forward)
    CUDA_KERNEL(layernorm_modulate_backward) CUDA_KERNEL(gated_residual_forward)
    CUDA_KERNEL(gated_residual_backward) CUDA_KERNEL(embedding_forward) CUDA_KERNEL(embedding_backward)
    /* spatial */
    CUDA_KERNEL(window_copy) CUDA_KERNEL(window_copy_channels) CUDA_KERNEL(relpos_gather_forward)
    CUDA_KERNEL(relpos_gather_backward)
    /* attention */
    CUDA_KERNEL(attention_scratch_floats) CUDA_KERNEL(attention_forward) CUDA_KERNEL(attention_backward)
    CUDA_KERNEL(attention_grads_in_bf16)
    /* linear attention */
    CUDA_KERNEL(focus_scratch_floats) CUDA_KERNEL(focus_forward) CUDA_KERNEL(focus_backward)
    CUDA_KERNEL(linear_attention_forward) CUDA_KERNEL(linear_attention_scratch_floats)
    CUDA_KERNEL(linear_attention_backward) CUDA_KERNEL(softmax_linear_attention_scratch_floats)
    CUDA_KERNEL(softmax_linear_attention_forward) CUDA_KERNEL(softmax_linear_attention_backward)
    /* train step */
    CUDA_KERNEL(adamw_update) CUDA_KERNEL(ema_update_flat) CUDA_KERNEL(sum_squares) CUDA_KERNEL(scale_floats)
#undef CUDA_KERNEL
};
#else
typedef int kernels_cuda_unused; /* ISO C wants a translation unit to declare something */
#endif
