/* What the register tiles of attention.c (fp32) and attention_bf16.c (bf16 products) share: queries
 * go in blocks of at most ATTN_BLOCK_ROWS rows, whose logits (rows of mp, the keys padded to 16)
 * stay in L2, and every pass over a block's rows is fp32 (bias and mask, softmax and its row
 * statistics, the backward's probabilities and softmax gradient), each file's own. Internal to
 * src/cpu. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "attention.h"

#define ATTN_BLOCK_ROWS 64

static inline size_t padded16(int m) { return ((size_t)m + 15) & ~(size_t)15; }

/* rows (stride ld) of d floats from x into L2. The tiles fetch the next pair's rows (as a rule
 * the same thread's next pair) an operand at a time between this pair's products: a head's rows
 * are short runs far apart, which the hardware's prefetcher does not follow (at Swin's 49-token
 * windows the packing of k and v and the rounding of q waited on them); all fetched at once before
 * the pair, they gained nothing (docs/performance.md) */
static inline void attn_fetch_rows(const float *x, size_t ld, int rows, int d) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < d; c += 16) __builtin_prefetch(x + r * ld + c, 0, 2);
}

/* where a pair's row i of a (seqs, rows, heads·d) layout starts */
static inline const float *attn_pair_row(const attn_dims *a, const float *x, int rows, int pair,
                                         int i) {
    int C = a->heads * a->d;
    return x + ((size_t)(pair / a->heads) * rows + i) * C + (size_t)(pair % a->heads) * a->d;
}

/* one pair (sequence, head) a thread when there are enough of them */
bool attn_pairs_in_parallel(const attn_dims *a);
/* rows per block of the forward: ATTN_BLOCK_ROWS, or fewer when the blocks would be too few to keep
 * every thread busy */
int attn_forward_block_rows(const attn_dims *a);

/* ---- bf16 tiles (attention_bf16.c), for heads of 16 to 64 channels under --precision bf16 ---- */
size_t attention_bf16_thread_floats(const attn_dims *a, bool backward);
/* attention_forward's work, `per_thread` floats of scratch a thread */
void attention_bf16_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                            const attn_dims *a, float *scratch, size_t per_thread);
/* one pair's gradients (dbias_h: this head's (n, m), or NULL), on the calling thread */
void attention_bf16_backward_pair(const attn_grads *g, float *dbias_h, const float *dout,
                                  const float *lse, const float *q, const float *k, const float *v,
                                  const attn_dims *a, int pair, float *scratch);
