/* The bf16 storage form of a saved activation (tensor_new_bf16 in core/tensor.h): an op that keeps
 * for its backward an activation the backward reads only as a rounded operand keeps it in half the
 * bytes, rounded here, and widens it back in the backward. */
#pragma once
#include <stdint.h>

/* dst = x rounded to bf16 as bf16_from_float does, and x = those rounded values: the forward goes on
 * with the values the backward will read */
void bf16_store(uint16_t *dst, float *x, int64_t n);
/* dst = x rounded as bf16_store rounds, x left as it is; on this thread alone, for the blocks of a
 * loop that is parallel already */
void bf16_round(uint16_t *dst, const float *x, int64_t n);
/* dst = src as floats (exact) */
void bf16_load(float *dst, const uint16_t *src, int64_t n);
