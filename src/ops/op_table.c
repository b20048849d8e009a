#include "op_table.h"

#include "../core/arena.h"
#include "../core/precision.h"
#include "../core/tape.h"
#include "adaln.h"
#include "backend.h"
#include "backward.h"

const op_info op_table[OP_COUNT] = {
    [OP_LINEAR] = {"linear", op_linear_backward},
    [OP_LINEAR_CHUNKS] = {"linear_chunks", op_linear_chunks_backward},
    [OP_MATMUL] = {"matmul", op_matmul_backward},
    [OP_ADD] = {"add", op_add_backward},
    [OP_MUL] = {"mul", op_mul_backward},
    [OP_DIV] = {"div", op_div_backward},
    [OP_EXPAND] = {"expand", op_expand_backward},
    [OP_SCALE] = {"scale", op_scale_backward},
    [OP_ADD_SCALAR] = {"add_scalar", op_add_scalar_backward},
    [OP_RESHAPE] = {"reshape", op_reshape_backward},
    [OP_PERMUTE] = {"permute", op_permute_backward},
    [OP_CONCAT] = {"concat", op_concat_backward},
    [OP_SLICE] = {"slice", op_slice_backward},
    [OP_LAYERNORM] = {"layernorm", op_layernorm_backward},
    [OP_GELU] = {"gelu", op_gelu_backward},
    [OP_RELU] = {"relu", op_relu_backward},
    [OP_SOFTPLUS] = {"softplus", op_softplus_backward},
    [OP_POW] = {"pow", op_pow_backward},
    [OP_L2NORM] = {"l2norm", op_l2norm_backward},
    [OP_SOFTMAX] = {"softmax", op_softmax_backward},
    [OP_MEAN] = {"mean", op_mean_backward},
    [OP_CONV2D] = {"conv2d", op_conv2d_backward},
    [OP_DWCONV2D] = {"dwconv2d", op_dwconv2d_backward},
    [OP_ADAPTIVE_AVG_POOL2D] = {"adaptive_avg_pool2d", op_adaptive_avg_pool2d_backward},
    [OP_INTERP_BILINEAR] = {"interp_bilinear", op_interp_bilinear_backward},
    [OP_WINDOW_PARTITION] = {"window_partition", op_window_partition_backward},
    [OP_WINDOW_REVERSE] = {"window_reverse", op_window_reverse_backward},
    [OP_RELPOS_GATHER] = {"relpos_gather", op_relpos_gather_backward},
    [OP_DROPOUT] = {"dropout", op_dropout_backward},
    [OP_FOCUS] = {"focus", op_focus_backward},
    [OP_LINEAR_ATTENTION] = {"linear_attention", op_linear_attention_backward},
    [OP_SOFTMAX_LINEAR_ATTENTION] = {"softmax_linear_attention", op_softmax_linear_attention_backward},
    [OP_LAYERNORM_LINEAR] = {"layernorm_linear", op_layernorm_linear_backward},
    [OP_LAYERNORM_WINDOWS] = {"layernorm_windows", op_layernorm_windows_backward},
    [OP_RESIDUAL_LINEAR] = {"residual_linear", op_residual_linear_backward},
    [OP_RESIDUAL_LINEAR_SPLIT] = {"residual_linear_split", op_residual_linear_split_backward},
    [OP_ATTENTION] = {"attention", op_attention_backward},
    [OP_CROSS_ENTROPY] = {"cross_entropy", op_cross_entropy_backward},
    [OP_SILU] = {"silu", op_silu_backward},
    [OP_GELU_TANH] = {"gelu_tanh", op_gelu_tanh_backward},
    [OP_LAYERNORM_MODULATE] = {"layernorm_modulate", op_layernorm_modulate_backward},
    [OP_GATED_RESIDUAL] = {"gated_residual", op_gated_residual_backward},
    [OP_EMBEDDING] = {"embedding", op_embedding_backward},
    [OP_MSE] = {"mse", op_mse_backward},
    [OP_DDPM_LOSS] = {"ddpm_loss", op_ddpm_loss_backward},
};

bool op_reads_bf16(int op) {
    return op == OP_RESIDUAL_LINEAR || op == OP_LINEAR || op == OP_LINEAR_CHUNKS ||
           op == OP_ATTENTION;
}

bool op_keeps_bf16(void) { return vitc_precision() == PRECISION_BF16; }

bool op_takes_bf16_grad(int op) { return op == OP_LAYERNORM_LINEAR || op == OP_LINEAR_CHUNKS; }

void op_widen_grad(tensor *t) {
    uint16_t *g16 = (uint16_t *)t->grad;
    t->grad = arena_alloc_spare(vitc_data_arena(), (size_t)t->numel * sizeof(float));
    t->grad_bf16 = false;
    kernels->bf16_load(t->grad, g16, t->numel);
    arena_give_back(vitc_data_arena(), g16, (size_t)t->numel * sizeof(uint16_t));
}
