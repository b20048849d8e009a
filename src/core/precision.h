/* The arithmetic precision of vitc's GEMMs, a property of the kernels and not of any model: with
 * bf16, every matrix product (linear layers, attention cores, the convolutions' GEMMs, forward and
 * backward) rounds its operands to bfloat16 and sums in fp32 (gemm_bf16); everything else stays
 * fp32: weights, gradients, AdamW and EMA state, normalisation, softmax and loss statistics.
 * Set once at start-up, before any computation, like the thread count. */
#pragma once
#include <stdbool.h>

typedef enum precision { PRECISION_FP32, PRECISION_BF16 } precision;

/* "fp32", "bf16", NULL: the choices of train.precision and --precision */
extern const char *const precision_names[];

/* false, with *why (if given) set to the sentence to print, where this CPU cannot run p */
bool vitc_set_precision(precision p, const char **why);
precision vitc_precision(void);
/* the name's precision; false when the name is none of precision_names */
bool precision_parse(const char *name, precision *p);
const char *precision_name(precision p);
/* the CLIs' --precision NAME: sets it and returns 0, or prints the error and returns the exit status
 * (2: not a precision's name; 1: this CPU cannot run it) */
int precision_select_flag(const char *name);
