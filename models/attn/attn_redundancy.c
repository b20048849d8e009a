#include "attn_redundancy.h"

#include <math.h>
#include <stdlib.h>

#include "../../src/core/check.h"
#include "../../src/core/rng.h"
#include "../../src/ops/backend.h"

static attn_redundancy *active;

void attn_redundancy_set(attn_redundancy *r) { active = r; }
bool attn_redundancy_active(void) { return active != NULL; }

double jsd_redundancy(const float *A, int m, const int *pairs, int n_pairs) {
    double sum = 0;
    for (int k = 0; k < n_pairs; k++) {
        const float *p = A + (size_t)pairs[2 * k] * m, *q = A + (size_t)pairs[2 * k + 1] * m;
        double jsd = 0; /* 0 log 0 = 0: a key one row ignores adds only the other's term */
        for (int j = 0; j < m; j++) {
            double mid = 0.5 * ((double)p[j] + q[j]);
            if (p[j] > 0) jsd += 0.5 * p[j] * log(p[j] / mid);
            if (q[j] > 0) jsd += 0.5 * q[j] * log(q[j] / mid);
        }
        sum += jsd;
    }
    return 1.0 - sum / n_pairs / log(2.0);
}

/* the query pairs of (block, head): all i < j of n rows, or max of them drawn at random (fixed for
 * the pair of indices, so that every time step compares the same queries) */
static int query_pairs(int *pairs, int n, int max, int block, int head) {
    int64_t all = (int64_t)n * (n - 1) / 2, count = 0;
    if (all <= max) {
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) pairs[2 * count] = i, pairs[2 * count + 1] = j, count++;
        return (int)count;
    }
    rng r;
    rng_seed(&r, (uint64_t)block * 4096 + (uint64_t)head, RNG_ANALYSIS);
    for (; count < max; count++) {
        int i = (int)rng_below(&r, (uint32_t)n), j = (int)rng_below(&r, (uint32_t)n - 1);
        j += j >= i; /* j != i */
        pairs[2 * count] = i < j ? i : j, pairs[2 * count + 1] = i < j ? j : i;
    }
    return max;
}

void attn_redundancy_record(attn *a, tensor *q, tensor *k) {
    attn_redundancy *r = active;
    const attn_spec *s = &a->spec;
    CHECK(s->kind == ATTN_NATIVE && s->flavour == NATIVE_GLOBAL && !s->cls,
          "JSD redundancy: block %d has %s attention; the score reads softmax attention over all tokens",
          s->block, attn_names[s->kind]);
    CHECK(s->block >= 0 && s->block < r->blocks && s->heads == r->heads, "JSD redundancy: block %d of %d heads",
          s->block, s->heads);
    int B = q->shape[0], n = q->shape[1], m = k->shape[1], C = q->shape[2], d = C / s->heads;
    int seqs = B < r->max_sequences ? B : r->max_sequences;
    float scale = 1.0f / sqrtf((float)d); /* softmax.c's */
    int *pairs = xmalloc(sizeof(int) * 2 * (size_t)r->max_pairs);
    float *A = xmalloc(sizeof(float) * (size_t)n * m);
    /* the sequences read, on the host */
    float *q_host = xmalloc(sizeof(float) * (size_t)seqs * n * C);
    float *k_host = xmalloc(sizeof(float) * (size_t)seqs * m * C);
    const float *qd = backend_read(q_host, q->data, (int64_t)seqs * n * C);
    const float *kd = backend_read(k_host, k->data, (int64_t)seqs * m * C);
    for (int h = 0; h < s->heads; h++) {
        int n_pairs = query_pairs(pairs, n, r->max_pairs, s->block, h);
        for (int b = 0; b < seqs; b++) {
            for (int i = 0; i < n; i++) {
                const float *qi = qd + ((size_t)b * n + i) * C + h * d;
                float *row = A + (size_t)i * m, mx = -INFINITY;
                for (int j = 0; j < m; j++) {
                    const float *kj = kd + ((size_t)b * m + j) * C + h * d;
                    float dot = 0;
                    for (int e = 0; e < d; e++) dot += qi[e] * kj[e];
                    row[j] = scale * dot;
                    mx = fmaxf(mx, row[j]);
                }
                double total = 0;
                for (int j = 0; j < m; j++) total += row[j] = expf(row[j] - mx);
                for (int j = 0; j < m; j++) row[j] = (float)(row[j] / total);
            }
            r->sum[s->block * r->heads + h] += jsd_redundancy(A, m, pairs, n_pairs);
            r->count[s->block * r->heads + h]++;
        }
    }
    free(A);
    free(pairs);
    free(q_host), free(k_host);
}
