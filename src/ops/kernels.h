/* The kernels an op runs, as a table: the CPU's (src/cpu, the reference) or a device's (src/cuda,
 * same signatures on device pointers), picked once at start-up by backend_select. Ops call
 * kernels->name(...) and never a src/cpu kernel directly, so one op serves every device. A device
 * table that lacks a kernel is refused at start-up, naming it: there is no silent CPU fallback.
 * Adding a kernel: its name in the list of its family below, the CPU function in src/cpu/<family>
 * and, for CUDA, cuda_<name> in src/cuda/<family> and its row in kernels_cuda.c. */
#pragma once
#include "../cpu/adaln.h"
#include "../cpu/attention.h"
#include "../cpu/bf16_store.h"
#include "../cpu/conv.h"
#include "../cpu/elementwise.h"
#include "../cpu/linear_attention.h"
#include "../cpu/loss.h"
#include "../cpu/matmul.h"
#include "../cpu/mlp.h"
#include "../cpu/norm.h"
#include "../cpu/shape.h"
#include "../cpu/spatial.h"
#include "../cpu/train_step.h"

#define KERNELS_ADALN(X)                                                                           \
    X(silu_forward) X(silu_backward) X(gelu_tanh_forward) X(gelu_tanh_backward)                    \
    X(layernorm_modulate_forward) X(layernorm_modulate_backward) X(gated_residual_forward)         \
    X(gated_residual_backward) X(embedding_forward) X(embedding_backward)
#define KERNELS_ATTENTION(X)                                                                       \
    X(attention_scratch_floats) X(attention_forward) X(attention_backward)                         \
    X(attention_grads_in_bf16)
#define KERNELS_BF16_STORE(X) X(bf16_store) X(bf16_load)
#define KERNELS_CONV(X)                                                                            \
    X(conv2d_forward) X(conv2d_backward) X(dwconv2d_forward) X(dwconv2d_backward)                  \
    X(adaptive_avg_pool2d_forward) X(adaptive_avg_pool2d_backward) X(interp_bilinear_forward)      \
    X(interp_bilinear_backward)
#define KERNELS_ELEMENTWISE(X)                                                                     \
    X(binary_forward) X(binary_backward) X(broadcast_reduce) X(expand_forward) X(accumulate)       \
    X(copy_floats) X(scale_forward) X(scale_backward) X(add_scalar_forward) X(gelu_forward)        \
    X(gelu_backward) X(gelu_value_and_slope) X(gelu_bf16_value_and_slope) X(relu_forward)          \
    X(relu_backward) X(softplus_forward) X(softplus_backward) X(pow_forward) X(pow_backward)
/* the *_scratch_floats entries size the scratch of the kernels after them: a device needs other amounts */
#define KERNELS_LINEAR_ATTENTION(X)                                                                \
    X(focus_scratch_floats) X(focus_forward) X(focus_backward) X(linear_attention_forward)         \
    X(linear_attention_scratch_floats) X(linear_attention_backward)                                \
    X(softmax_linear_attention_scratch_floats) X(softmax_linear_attention_forward)                 \
    X(softmax_linear_attention_backward)
#define KERNELS_LOSS(X)                                                                            \
    X(cross_entropy_forward) X(cross_entropy_backward) X(label_targets) X(mse_forward)             \
    X(mse_backward) X(ddpm_loss_forward) X(ddpm_loss_backward)
#define KERNELS_MATMUL(X)                                                                          \
    X(gemm) X(gemm_strided) X(linear_forward) X(linear_backward) X(linear_forward_bf16_input)      \
    X(linear_backward_bf16_input) X(linear_backward_bf16_grad)                                     \
    X(linear_chunks_backward_bf16_grad) X(add_column_sums) X(residual_linear_forward)              \
    X(matmul_forward) X(matmul_backward)
#define KERNELS_MLP(X)                                                                             \
    X(mlp_residual_forward) X(mlp_scratch_floats) X(mlp_hidden_backward_scratch_floats)            \
    X(mlp_hidden_backward_bf16) X(scale_groups)
#define KERNELS_NORM(X)                                                                            \
    X(layernorm_forward) X(layernorm_windows_forward) X(layernorm_apply) X(layernorm_backward)     \
    X(l2norm_forward)                                                                              \
    X(l2norm_backward) X(softmax_forward) X(softmax_backward) X(mean_forward) X(mean_backward)
#define KERNELS_SHAPE(X) X(permute_forward) X(permute_backward) X(block_copy)
#define KERNELS_SPATIAL(X)                                                                         \
    X(window_copy) X(window_copy_channels) X(relpos_gather_forward) X(relpos_gather_backward)
/* the training step outside the network: optimizer, EMA, clipping (src/cpu/train_step.h) */
#define KERNELS_TRAIN_STEP(X) X(adamw_update) X(ema_update_flat) X(sum_squares) X(scale_floats)

#define KERNELS_ALL(X)                                                                             \
    KERNELS_ADALN(X) KERNELS_ATTENTION(X) KERNELS_BF16_STORE(X) KERNELS_CONV(X)                    \
    KERNELS_ELEMENTWISE(X) KERNELS_LOSS(X) KERNELS_LINEAR_ATTENTION(X) KERNELS_MATMUL(X)           \
    KERNELS_MLP(X) KERNELS_NORM(X) KERNELS_SHAPE(X) KERNELS_SPATIAL(X) KERNELS_TRAIN_STEP(X)

typedef struct kernel_table {
#define KERNEL_FIELD(name) __typeof__(name) *name;
    KERNELS_ALL(KERNEL_FIELD)
#undef KERNEL_FIELD
} kernel_table;

/* The kernels of the selected device (the CPU's until backend_select picks another). */
extern const kernel_table *kernels;
extern const kernel_table cpu_kernels;
