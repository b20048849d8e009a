/* The arithmetic precision of vitc's GEMMs, a property of the kernels and not of any model: with
 * bf16, every matrix product (linear layers, attention cores, the convolutions' GEMMs, forward and
 * backward) rounds its operands to bfloat16 and sums in fp32 (gemm_bf16 on the CPU, cuBLAS's bf16
 * GEMM on CUDA); with tf32 (CUDA only) cuBLAS multiplies fp32 operands on the tensor cores with a
 * 10-bit mantissa; everything else stays fp32: weights, gradients, AdamW and EMA state,
 * normalisation, softmax and loss statistics. Set once at start-up, after the device (it is checked
 * against the device selected then) and before any computation, like the thread count. */
#pragma once
#include <stdbool.h>

typedef enum precision { PRECISION_FP32, PRECISION_BF16, PRECISION_TF32 } precision;

/* "fp32", "bf16", "tf32", NULL: the choices of train.precision and --precision */
extern const char *const precision_names[];

/* false, with *why (if given) set to the sentence to print, where the selected device cannot run p:
 * on the CPU, bf16 without AVX512_BF16, and tf32 (a CUDA tensor-core format) */
bool vitc_set_precision(precision p, const char **why);
precision vitc_precision(void);
/* the name's precision; false when the name is none of precision_names */
bool precision_parse(const char *name, precision *p);
const char *precision_name(precision p);
/* the CLIs' --precision NAME: sets it and returns 0, or prints the error and returns the exit status
 * (2: not a precision's name; 1: the selected device cannot run it) */
int precision_select_flag(const char *name);
