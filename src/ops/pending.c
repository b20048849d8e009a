/* TEMPORARY during parallel development: weak placeholders overridden by the real backward. */
#include "backward.h"
#include "../core/check.h"
__attribute__((weak)) void op_add_backward(tape_node *n) { (void)n; FATAL("op_add_backward missing"); }
__attribute__((weak)) void op_mul_backward(tape_node *n) { (void)n; FATAL("op_mul_backward missing"); }
__attribute__((weak)) void op_div_backward(tape_node *n) { (void)n; FATAL("op_div_backward missing"); }
__attribute__((weak)) void op_expand_backward(tape_node *n) { (void)n; FATAL("op_expand_backward missing"); }
__attribute__((weak)) void op_scale_backward(tape_node *n) { (void)n; FATAL("op_scale_backward missing"); }
__attribute__((weak)) void op_add_scalar_backward(tape_node *n) { (void)n; FATAL("op_add_scalar_backward missing"); }
__attribute__((weak)) void op_reshape_backward(tape_node *n) { (void)n; FATAL("op_reshape_backward missing"); }
__attribute__((weak)) void op_permute_backward(tape_node *n) { (void)n; FATAL("op_permute_backward missing"); }
__attribute__((weak)) void op_concat_backward(tape_node *n) { (void)n; FATAL("op_concat_backward missing"); }
__attribute__((weak)) void op_slice_backward(tape_node *n) { (void)n; FATAL("op_slice_backward missing"); }
__attribute__((weak)) void op_layernorm_backward(tape_node *n) { (void)n; FATAL("op_layernorm_backward missing"); }
__attribute__((weak)) void op_gelu_backward(tape_node *n) { (void)n; FATAL("op_gelu_backward missing"); }
__attribute__((weak)) void op_relu_backward(tape_node *n) { (void)n; FATAL("op_relu_backward missing"); }
__attribute__((weak)) void op_softplus_backward(tape_node *n) { (void)n; FATAL("op_softplus_backward missing"); }
__attribute__((weak)) void op_pow_backward(tape_node *n) { (void)n; FATAL("op_pow_backward missing"); }
__attribute__((weak)) void op_l2norm_backward(tape_node *n) { (void)n; FATAL("op_l2norm_backward missing"); }
__attribute__((weak)) void op_softmax_backward(tape_node *n) { (void)n; FATAL("op_softmax_backward missing"); }
__attribute__((weak)) void op_mean_backward(tape_node *n) { (void)n; FATAL("op_mean_backward missing"); }
__attribute__((weak)) void op_conv2d_backward(tape_node *n) { (void)n; FATAL("op_conv2d_backward missing"); }
__attribute__((weak)) void op_dwconv2d_backward(tape_node *n) { (void)n; FATAL("op_dwconv2d_backward missing"); }
__attribute__((weak)) void op_adaptive_avg_pool2d_backward(tape_node *n) { (void)n; FATAL("op_adaptive_avg_pool2d_backward missing"); }
__attribute__((weak)) void op_interp_bilinear_backward(tape_node *n) { (void)n; FATAL("op_interp_bilinear_backward missing"); }
__attribute__((weak)) void op_window_partition_backward(tape_node *n) { (void)n; FATAL("op_window_partition_backward missing"); }
__attribute__((weak)) void op_window_reverse_backward(tape_node *n) { (void)n; FATAL("op_window_reverse_backward missing"); }
__attribute__((weak)) void op_roll_backward(tape_node *n) { (void)n; FATAL("op_roll_backward missing"); }
__attribute__((weak)) void op_relpos_gather_backward(tape_node *n) { (void)n; FATAL("op_relpos_gather_backward missing"); }
__attribute__((weak)) void op_dropout_backward(tape_node *n) { (void)n; FATAL("op_dropout_backward missing"); }
__attribute__((weak)) void op_drop_path_backward(tape_node *n) { (void)n; FATAL("op_drop_path_backward missing"); }
__attribute__((weak)) void op_cross_entropy_backward(tape_node *n) { (void)n; FATAL("op_cross_entropy_backward missing"); }
