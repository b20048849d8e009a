/* Backward functions of all ops, for the op table. Each accumulates (+=) into the gradients of the
 * node's inputs that require one. */
#pragma once
#include "../core/tape.h"

/* x's gradient += the node output's, for an input the op passes its gradient to unchanged (x of the
 * output's size): when x has none yet, it takes the output's buffer instead of a zeroed copy plus a
 * pass. Call it last in the backward: the output's gradient is gone afterwards. */
void pass_grad(tensor *x, tensor *out);

/* x's gradient (M, K) += g (M, N) · w (N, K), written whole where x has none yet (tensor_grad_whole):
 * a product's input gradient; x must require one */
void product_input_grad(tensor *x, const float *g, const float *w, int M, int K, int N);

/* How many of `items` (samples, rows of rows_per_item rows each) one pass of an op that recomputes in
 * passes takes when each needs `floats_per_item` floats of scratch: passes of about 8 MiB keep the
 * scratch small next to the activations, unless that leaves a pass's GEMMs fewer than about 3000
 * rows, where OpenBLAS loses speed (DeiT's 197-token samples: one pass of the batch, not three);
 * the passes are then evened out, none smaller than that. */
static inline int64_t items_per_pass(int64_t items, int64_t floats_per_item, int64_t rows_per_item) {
    int64_t budget = (int64_t)1 << 21, min_rows = 3072;
    int64_t n = floats_per_item >= budget ? 1 : budget / floats_per_item;
    int64_t for_rows = (min_rows + rows_per_item - 1) / rows_per_item;
    if (n < for_rows) n = for_rows;
    if (n >= items) return items;
    int64_t passes = items / n;
    return (items + passes - 1) / passes;
}

/* A drop-path mask's host copy, a value a sample (0: dropped): the samples it keeps, and the next
 * run of at most `most` kept samples from sample *first on, [*first, *end) (false past the last, or
 * for most 0); keep NULL keeps every sample. The ops that run a residual branch on the kept samples
 * alone (drop_path_kept) take them so, run by run. */
static inline int kept_samples(const float *keep, int samples) {
    int n = 0;
    for (int s = 0; s < samples; s++) n += keep[s] != 0.0f;
    return n;
}
static inline bool next_kept_run(const float *keep, int samples, int most, int *first, int *end) {
    while (keep && most > 0 && *first < samples && keep[*first] == 0.0f) ++*first;
    *end = *first;
    while (*end < samples && *end - *first < most && (!keep || keep[*end] != 0.0f)) ++*end;
    return *end > *first;
}

void op_linear_backward(tape_node *n);
void op_linear_chunks_backward(tape_node *n);
void op_matmul_backward(tape_node *n);
void op_add_backward(tape_node *n);
void op_mul_backward(tape_node *n);
void op_div_backward(tape_node *n);
void op_expand_backward(tape_node *n);
void op_scale_backward(tape_node *n);
void op_add_scalar_backward(tape_node *n);
void op_reshape_backward(tape_node *n);
void op_permute_backward(tape_node *n);
void op_concat_backward(tape_node *n);
void op_slice_backward(tape_node *n);
void op_layernorm_backward(tape_node *n);
void op_gelu_backward(tape_node *n);
void op_relu_backward(tape_node *n);
void op_softplus_backward(tape_node *n);
void op_pow_backward(tape_node *n);
void op_l2norm_backward(tape_node *n);
void op_softmax_backward(tape_node *n);
void op_mean_backward(tape_node *n);
void op_conv2d_backward(tape_node *n);
void op_dwconv2d_backward(tape_node *n);
void op_adaptive_avg_pool2d_backward(tape_node *n);
void op_interp_bilinear_backward(tape_node *n);
void op_window_partition_backward(tape_node *n);
void op_window_reverse_backward(tape_node *n);
void op_relpos_gather_backward(tape_node *n);
void op_dropout_backward(tape_node *n);
void op_residual_linear_backward(tape_node *n);
void op_residual_linear_split_backward(tape_node *n);
void op_layernorm_linear_backward(tape_node *n);
void op_layernorm_windows_backward(tape_node *n);
void op_focus_backward(tape_node *n);
void op_linear_attention_backward(tape_node *n);
void op_softmax_linear_attention_backward(tape_node *n);
void op_cross_entropy_backward(tape_node *n);
void op_mse_backward(tape_node *n);
void op_ddpm_loss_backward(tape_node *n);
void op_attention_backward(tape_node *n);
