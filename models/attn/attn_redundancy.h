/* "JSD redundancy (vitc definition)" of softmax attention, the analysis of Attention Mediators' figure
 * (../shared/specs/mediators.md §8: the paper's formula could not be retrieved, so this is vitc's):
 * for one sequence, block and head with attention matrix A (rows: each query's distribution over
 * the keys), R = 1 - mean over query pairs i < j of JSD(A_i, A_j) / ln 2, with JSD(p, q) =
 * KL(p || m) / 2 + KL(q || m) / 2, m = (p + q) / 2, natural logarithms. R = 1: every query attends
 * alike (redundant); R = 0: their distributions never overlap. The pairs: all of them, or a fixed
 * random subset where there are more. */
#pragma once
#include "attn.h"

/* R of the n rows of A (each of m probabilities) over the given pairs (2 * n_pairs row indices) */
double jsd_redundancy(const float *A, int m, const int *pairs, int n_pairs);

typedef struct attn_redundancy {
    int blocks, heads;
    int max_pairs;     /* query pairs per (block, head) at most */
    int max_sequences; /* the sequences of a batch recorded (the first ones: a guided batch's
                          conditional half) */
    double *sum;       /* blocks * heads: R summed over the recorded sequences */
    int *count;        /* blocks * heads: their number */
} attn_redundancy;

/* While set, attn_forward records into r (NULL stops): native global attention only */
void attn_redundancy_set(attn_redundancy *r);
bool attn_redundancy_active(void);
/* Called by attn_forward: adds R of every recorded sequence and head of q, k to a's block */
void attn_redundancy_record(attn *a, tensor *q, tensor *k);
