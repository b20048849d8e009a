#include "attention.h"

#include <math.h>
#include <string.h>

#include "../core/threads.h"
#include "matmul.h"
#include "norm.h"
#include "reduce.h"

/* one pair per thread when there are enough (vitc_items_in_parallel); else the pairs run in order
 * with OpenBLAS threading each GEMM and the softmax rows split */
static bool pairs_in_parallel(const attn_dims *a) { return vitc_items_in_parallel(a->seqs * a->heads); }

size_t attention_scratch_floats(const attn_dims *a, bool dbias) {
    size_t nm = (size_t)a->n * a->m;
    return (size_t)vitc_threads() * (nm + (dbias ? a->heads * nm : 0));
}

static void add_softmax_row(float *p, int m, const float *bias, const float *mask) {
    if (bias && mask)
        for (int j = 0; j < m; j++) p[j] += bias[j] + mask[j];
    else if (bias || mask) {
        const float *add = bias ? bias : mask;
        for (int j = 0; j < m; j++) p[j] += add[j];
    }
    softmax_row(p, m);
}

static void forward_pair(float *out, float *P, const float *q, const float *k, const float *v,
                         const attn_dims *a, int pair, bool split_rows) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    const float *qs = q + (size_t)s * n * C + h * d, *ks = k + (size_t)s * m * C + h * d;
    gemm_strided(false, true, n, m, d, a->scale, qs, C, ks, C, 0.0f, P, m);
    const float *bias = a->bias ? a->bias + (size_t)h * n * m : NULL;
    const float *mask = a->mask ? a->mask + (size_t)(s % a->windows) * n * m : NULL;
#pragma omp parallel for schedule(static) if (split_rows)
    for (int i = 0; i < n; i++)
        add_softmax_row(P + (size_t)i * m, m, bias ? bias + (size_t)i * m : NULL,
                    mask ? mask + (size_t)i * m : NULL);
    gemm_strided(false, false, n, d, m, 1.0f, P, m, v + (size_t)s * m * C + h * d, C, 0.0f,
            out + (size_t)s * n * C + h * d, C);
}

void attention_forward(float *out, float *probs, const float *q, const float *k, const float *v,
                       const attn_dims *a, float *scratch) {
    size_t nm = (size_t)a->n * a->m;
    int pairs = a->seqs * a->heads;
    if (pairs_in_parallel(a)) {
#pragma omp parallel for schedule(static)
        for (int p = 0; p < pairs; p++)
            forward_pair(out, probs ? probs + p * nm : scratch + vitc_thread_id() * nm, q, k, v, a,
                         p, false);
    } else {
        for (int p = 0; p < pairs; p++)
            forward_pair(out, probs ? probs + p * nm : scratch, q, k, v, a, p, true);
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

static void backward_pair(float *dq, float *dk, float *dv, float *dbias, const float *dout,
                          const float *P, const float *q, const float *k, const float *v,
                          const attn_dims *a, int pair, float *dP, bool split_rows) {
    int s = pair / a->heads, h = pair % a->heads, n = a->n, m = a->m, d = a->d, C = a->heads * d;
    size_t qo = (size_t)s * n * C + h * d, ko = (size_t)s * m * C + h * d;
    if (dv) gemm_strided(true, false, m, d, n, 1.0f, P, m, dout + qo, C, 1.0f, dv + ko, C);
    if (!dq && !dk && !dbias) return;
    gemm_strided(false, true, n, m, d, 1.0f, dout + qo, C, v + ko, C, 0.0f, dP, m);
    softmax_grad_rows(dP, P, dbias ? dbias + (size_t)h * n * m : NULL, n, m, split_rows);
    if (dq) gemm_strided(false, false, n, d, m, a->scale, dP, m, k + ko, C, 1.0f, dq + qo, C);
    if (dk) gemm_strided(true, false, m, d, n, a->scale, dP, m, q + qo, C, 1.0f, dk + ko, C);
}

void attention_backward(float *dq, float *dk, float *dv, float *dbias, const float *dout,
                        const float *probs, const float *q, const float *k, const float *v,
                        const attn_dims *a, float *scratch) {
    size_t nm = (size_t)a->n * a->m, hnm = (size_t)a->heads * nm;
    int pairs = a->seqs * a->heads;
    if (!pairs_in_parallel(a)) {
        for (int p = 0; p < pairs; p++)
            backward_pair(dq, dk, dv, dbias, dout, probs + p * nm, q, k, v, a, p, scratch, true);
        return;
    }
    /* each thread sums its pairs' bias gradients privately; the sums are added in thread order */
    int threads = vitc_threads();
    float *private_dbias = scratch + (size_t)threads * nm;
    if (dbias) memset(private_dbias, 0, sizeof(float) * threads * hnm);
#pragma omp parallel for schedule(static)
    for (int p = 0; p < pairs; p++) {
        int t = vitc_thread_id();
        backward_pair(dq, dk, dv, dbias ? private_dbias + t * hnm : NULL, dout, probs + p * nm, q,
                      k, v, a, p, scratch + t * nm, false);
    }
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < hnm; i++)
            for (int t = 0; t < threads; t++) dbias[i] += private_dbias[t * hnm + i];
    }
}
