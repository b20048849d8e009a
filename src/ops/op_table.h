/* Op ids and the table mapping each id to its name and backward. A test fails if an entry lacks
 * either. Adding an op: an id here, a row in op_table.c, the op in its family file under src/ops/. */
#pragma once
#include "../core/tape.h"

typedef enum {
    OP_LINEAR,
    OP_LINEAR_CHUNKS,
    OP_MATMUL,
    OP_ADD,
    OP_MUL,
    OP_DIV,
    OP_EXPAND,
    OP_SCALE,
    OP_ADD_SCALAR,
    OP_RESHAPE,
    OP_PERMUTE,
    OP_CONCAT,
    OP_SLICE,
    OP_LAYERNORM,
    OP_GELU,
    OP_RELU,
    OP_SOFTPLUS,
    OP_POW,
    OP_L2NORM,
    OP_SOFTMAX,
    OP_MEAN,
    OP_CONV2D,
    OP_DWCONV2D,
    OP_ADAPTIVE_AVG_POOL2D,
    OP_INTERP_BILINEAR,
    OP_WINDOW_PARTITION,
    OP_WINDOW_REVERSE,
    OP_RELPOS_GATHER,
    OP_DROPOUT,
    OP_RESIDUAL_LINEAR,
    OP_RESIDUAL_LINEAR_SPLIT,
    OP_LAYERNORM_LINEAR,
    OP_LAYERNORM_WINDOWS,
    OP_FOCUS,
    OP_LINEAR_ATTENTION,
    OP_SOFTMAX_LINEAR_ATTENTION,
    OP_CROSS_ENTROPY,
    OP_ATTENTION,
    OP_SILU,
    OP_GELU_TANH,
    OP_LAYERNORM_MODULATE,
    OP_GATED_RESIDUAL,
    OP_EMBEDDING,
    OP_MSE,
    OP_DDPM_LOSS,
    OP_COUNT
} op_id;

extern const op_info op_table[OP_COUNT];

/* Whether the op takes inputs stored as bf16 (tensor_new_bf16): residual_linear (the GELU of an
 * MLP's hidden layer), linear (normalised windows and stripes feeding the qkv products) and
 * attention (ELFATT's local q and k windows). tape_record refuses them to every other op. */
bool op_reads_bf16(int op);
/* Whether an op stores an activation that only those ops read as bf16: under --precision bf16.
 * Their products round it anyway, so no result changes; the tape keeps it in half the memory, and
 * in inference (no tape) the next product reads half the bytes. */
bool op_keeps_bf16(void);
/* Whether the op's backward reads its output's gradient kept in bf16 (tensor_grad_bf16):
 * layernorm_linear, fc1 of an MLP, whose products round it anyway. For any other op the tape first
 * widens such a gradient to floats (op_widen_grad). */
bool op_takes_bf16_grad(int op);
void op_widen_grad(tensor *t);
