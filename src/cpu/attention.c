#include "attention.h"

#include <math.h>
#include <string.h>

#include "../core/threads.h"
#include "fast_exp.h"
#include "matmul.h"
#include "norm.h"
#include "reduce.h"

/* one pair per thread when there are enough (vitc_items_in_parallel); else the pairs run in order
 * with OpenBLAS threading each GEMM and the softmax rows split */
static bool pairs_in_parallel(const attn_dims *a) { return vitc_items_in_parallel(a->seqs * a->heads); }

size_t attention_scratch_floats(const attn_dims *a, bool backward, bool dbias) {
    size_t nm = (size_t)a->n * a->m;
    return (size_t)vitc_threads() * ((backward ? 2 : 1) * nm + (dbias ? a->heads * nm : 0));
}

/* P = scale q kᵀ + bias + mask for one pair: the logits */
static void pair_logits(float *P, const float *q, const float *k, const attn_dims *a, int pair) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    gemm_strided(false, true, n, m, d, a->scale, q + (size_t)s * n * C + h * d, C,
                 k + (size_t)s * m * C + h * d, C, 0.0f, P, m);
}

static void add_row(float *p, int m, const float *add) {
    if (add)
        for (int j = 0; j < m; j++) p[j] += add[j];
}

/* row i of the pair's logits plus its bias and mask rows */
static void add_bias_mask(float *p, const attn_dims *a, int pair, int i) {
    size_t nm = (size_t)a->n * a->m;
    int h = pair % a->heads, w = (pair / a->heads) % a->windows;
    add_row(p, a->m, a->bias ? a->bias + h * nm + (size_t)i * a->m : NULL);
    add_row(p, a->m, a->mask ? a->mask + w * nm + (size_t)i * a->m : NULL);
}

static void forward_pair(float *out, float *lse, float *P, const float *q, const float *k,
                         const float *v, const attn_dims *a, int pair, bool split_rows) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    pair_logits(P, q, k, a, pair);
#pragma omp parallel for schedule(static) if (split_rows)
    for (int i = 0; i < n; i++) {
        float *p = P + (size_t)i * m;
        add_bias_mask(p, a, pair, i);
        float row_lse = softmax_row(p, m);
        if (lse) lse[(size_t)pair * n + i] = row_lse;
    }
    gemm_strided(false, false, n, d, m, 1.0f, P, m, v + (size_t)s * m * C + h * d, C, 0.0f,
                 out + (size_t)s * n * C + h * d, C);
}

void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       const attn_dims *a, float *scratch) {
    size_t nm = (size_t)a->n * a->m;
    int pairs = a->seqs * a->heads;
    if (pairs_in_parallel(a)) {
#pragma omp parallel for schedule(static)
        for (int p = 0; p < pairs; p++)
            forward_pair(out, lse, scratch + vitc_thread_id() * nm, q, k, v, a, p, false);
    } else {
        for (int p = 0; p < pairs; p++) forward_pair(out, lse, scratch, q, k, v, a, p, true);
    }
}

/* dS = P ⊙ (dP - rowsum(dP ⊙ P)) in place of dP, summed into dbias_h when given */
static void softmax_grad_rows(float *dP, const float *P, float *dbias_h, int n, int m,
                              bool split_rows) {
#pragma omp parallel for schedule(static) if (split_rows)
    for (int i = 0; i < n; i++) {
        float *g = dP + (size_t)i * m;
        const float *y = P + (size_t)i * m;
        float dot = reduce_dot(g, y, m);
        for (int j = 0; j < m; j++) g[j] = y[j] * (g[j] - dot);
        if (dbias_h)
            for (int j = 0; j < m; j++) dbias_h[(size_t)i * m + j] += g[j];
    }
}

/* the forward's probabilities again, from the logits and each row's log-sum-exp */
static void recompute_probs(float *P, const float *lse, const float *q, const float *k,
                            const attn_dims *a, int pair, bool split_rows) {
    int n = a->n, m = a->m;
    pair_logits(P, q, k, a, pair);
#pragma omp parallel for schedule(static) if (split_rows)
    for (int i = 0; i < n; i++) {
        float *p = P + (size_t)i * m, row_lse = lse[(size_t)pair * n + i];
        add_bias_mask(p, a, pair, i);
        for (int j = 0; j < m; j++) p[j] = fast_expf(p[j] - row_lse);
    }
}

static void backward_pair(float *dq, float *dk, float *dv, float *dbias, const float *dout,
                          const float *lse, const float *q, const float *k, const float *v,
                          const attn_dims *a, int pair, float *P, bool split_rows) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    size_t qo = (size_t)s * n * C + h * d, ko = (size_t)s * m * C + h * d;
    float *dP = P + (size_t)n * m;
    recompute_probs(P, lse, q, k, a, pair, split_rows);
    if (dv) gemm_strided(true, false, m, d, n, 1.0f, P, m, dout + qo, C, 1.0f, dv + ko, C);
    if (!dq && !dk && !dbias) return;
    gemm_strided(false, true, n, m, d, 1.0f, dout + qo, C, v + ko, C, 0.0f, dP, m);
    softmax_grad_rows(dP, P, dbias ? dbias + (size_t)h * n * m : NULL, n, m, split_rows);
    if (dq) gemm_strided(false, false, n, d, m, a->scale, dP, m, k + ko, C, 1.0f, dq + qo, C);
    if (dk) gemm_strided(true, false, m, d, n, a->scale, dP, m, q + qo, C, 1.0f, dk + ko, C);
}

void attention_backward(float *dq, float *dk, float *dv, float *dbias, const float *dout,
                        const float *lse, const float *q, const float *k, const float *v,
                        const attn_dims *a, float *scratch) {
    size_t nm2 = 2 * (size_t)a->n * a->m, hnm = (size_t)a->heads * a->n * a->m;
    int pairs = a->seqs * a->heads;
    if (!pairs_in_parallel(a)) {
        for (int p = 0; p < pairs; p++)
            backward_pair(dq, dk, dv, dbias, dout, lse, q, k, v, a, p, scratch, true);
        return;
    }
    /* each thread sums its pairs' bias gradients privately; the sums are added in thread order */
    int threads = vitc_threads();
    float *private_dbias = scratch + (size_t)threads * nm2;
    if (dbias) memset(private_dbias, 0, sizeof(float) * threads * hnm);
#pragma omp parallel for schedule(static)
    for (int p = 0; p < pairs; p++) {
        int t = vitc_thread_id();
        backward_pair(dq, dk, dv, dbias ? private_dbias + t * hnm : NULL, dout, lse, q, k, v, a, p,
                      scratch + t * nm2, false);
    }
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < hnm; i++)
            for (int t = 0; t < threads; t++) dbias[i] += private_dbias[t * hnm + i];
    }
}
