/* Softmax attention, heads read in place: per head a batched GEMM of a chunk of sequences' logits,
 * a block per row for bias, mask and softmax (lse kept; the backward recomputes the probabilities
 * from it, as the CPU), GEMMs again for the products. Bias gradients summed in order, no atomics. */
#include "attention.h"
#include "common.cuh"
#include "matmul.h"

/* floats of logits held at once (per buffer): sequences are taken in chunks that fit */
#define ATTN_CHUNK_FLOATS ((size_t)1 << 25)

/* sequences per chunk: as many as keep one buffer of logits within ATTN_CHUNK_FLOATS, at least 1 */
static int chunk_seqs(const attn_dims *a) {
    size_t per_seq = (size_t)a->heads * a->n * a->m, fit = ATTN_CHUNK_FLOATS / per_seq;
    return fit < 1 ? 1 : fit > (size_t)a->seqs ? a->seqs : (int)fit;
}

extern "C" size_t cuda_attention_scratch_floats(const attn_dims *a, bool backward, bool dbias) {
    (void)dbias; /* summed straight from the logits' gradient */
    return (backward ? 2 : 1) * (size_t)chunk_seqs(a) * a->heads * a->n * a->m;
}

/* threads of a row kernel over m columns: whole warps, up to ROW_THREADS */
static unsigned row_threads(int m) {
    int t = (m + 31) / 32 * 32;
    return t > ROW_THREADS ? ROW_THREADS : t;
}

/* The geometry of a chunk's logits P (S, heads, n, m) for the row kernels. */
struct chunk_rows {
    int s0, heads, n, m, windows;
    float *P;
    const float *bias, *mask; /* (heads, n, m), (windows, n, m), or NULL */
};

/* Row r of the chunk plus its bias and mask rows, into p: sequence s0 + r / (heads n) takes window
 * (s0 + r / (heads n)) % windows */
static __device__ void add_bias_mask(float *p, const chunk_rows &c, int64_t r) {
    const int64_t nm = (int64_t)c.n * c.m;
    const int i = (int)(r % c.n), h = (int)(r / c.n % c.heads);
    const int64_t s = c.s0 + r / ((int64_t)c.n * c.heads);
    const float *b = c.bias ? c.bias + h * nm + (int64_t)i * c.m : NULL;
    const float *mk = c.mask ? c.mask + (s % c.windows) * nm + (int64_t)i * c.m : NULL;
    if (!b && !mk) return;
    for (int j = threadIdx.x; j < c.m; j += blockDim.x) {
        float x = p[j];
        if (b) x += b[j];
        if (mk) x += mk[j];
        p[j] = x;
    }
}

/* softmax of the logits of row blockIdx.x plus bias and mask, in place; lse (rows) receives each
 * row's log-sum-exp */
static __global__ void softmax_rows_kernel(chunk_rows c, float *lse) {
    const int64_t r = blockIdx.x;
    float *p = c.P + r * c.m;
    add_bias_mask(p, c, r);
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < c.m; j += blockDim.x) mx = fmaxf(mx, p[j]);
    mx = block_max(mx);
    float s = 0;
    /* each thread rereads only what it wrote */
    for (int j = threadIdx.x; j < c.m; j += blockDim.x) {
        p[j] = expf(p[j] - mx);
        s += p[j];
    }
    const float sum = block_sum(s), inv = 1.0f / sum;
    for (int j = threadIdx.x; j < c.m; j += blockDim.x) p[j] *= inv;
    if (lse && threadIdx.x == 0) lse[r] = mx + logf(sum);
}

/* the forward's probabilities again: exp(logit + bias + mask - lse) of row blockIdx.x */
static __global__ void probs_rows_kernel(chunk_rows c, const float *lse) {
    const int64_t r = blockIdx.x;
    float *p = c.P + r * c.m;
    add_bias_mask(p, c, r);
    const float row_lse = lse[r];
    for (int j = threadIdx.x; j < c.m; j += blockDim.x) p[j] = expf(p[j] - row_lse);
}

/* dS = P ⊙ (dP - rowsum(dP ⊙ P)) in place of dP, row blockIdx.x */
static __global__ void softmax_grad_rows_kernel(float *dP, const float *P, int m) {
    const int64_t r = blockIdx.x;
    float *g = dP + r * m;
    const float *y = P + r * m;
    float s = 0;
    for (int j = threadIdx.x; j < m; j += blockDim.x) s += g[j] * y[j];
    const float dot = block_sum(s);
    for (int j = threadIdx.x; j < m; j += blockDim.x) g[j] = y[j] * (g[j] - dot);
}

/* sums (groups, hnm) = the sums over groups of `per` consecutive sequences of dS (S, hnm), each
 * element's in sequence order; the sums then added += into dbias (hnm) in group order by the same
 * kernel with per = groups. Two levels, so that more threads share the sequences than elements. */
static __global__ void sum_sequences_kernel(float *sums, const float *dS, int S, int per,
                                            int64_t hnm, bool accumulate) {
    GRID_STRIDE_LOOP(idx, (S + per - 1) / per * hnm) {
        const int64_t g = idx / hnm, e = idx % hnm;
        const int t1 = (g + 1) * per < S ? (int)(g + 1) * per : S;
        float s = 0;
        for (int t = (int)g * per; t < t1; t++) s += dS[t * hnm + e];
        sums[idx] = accumulate ? sums[idx] + s : s;
    }
}

/* dbias += the sum of dS (S, hnm) over the sequences, in a fixed order; P (S hnm floats) is free */
static void add_bias_grad(float *dbias, const float *dS, float *P, int S, int64_t hnm) {
    const int groups = S < 32 ? S : 32, per = (S + groups - 1) / groups, used = (S + per - 1) / per;
    sum_sequences_kernel<<<flat_blocks(used * hnm), FLAT_THREADS>>>(P, dS, S, per, hnm, false);
    CUDA_LAUNCHED();
    sum_sequences_kernel<<<flat_blocks(hnm), FLAT_THREADS>>>(dbias, P, used, used, hnm, true);
    CUDA_LAUNCHED();
}

/* The pointers of one chunk of sequences and one head: x (seqs, rows, heads·d) at sequence s0 */
static const float *head_at(const float *x, const attn_dims *a, int rows, int s0, int h) {
    return x + (size_t)s0 * rows * a->heads * a->d + (size_t)h * a->d;
}
static float *head_at(float *x, const attn_dims *a, int rows, int s0, int h) {
    return x + (size_t)s0 * rows * a->heads * a->d + (size_t)h * a->d;
}

/* P (S, heads, n, m) = scale q kᵀ for the chunk's sequences and every head */
static void chunk_logits(float *P, const float *q, const float *k, const attn_dims *a, int s0,
                         int S) {
    const int n = a->n, m = a->m, d = a->d, C = a->heads * d;
    const long long hnm = (long long)a->heads * n * m;
    for (int h = 0; h < a->heads; h++)
        cuda_gemm_batched(false, true, n, m, d, a->scale, head_at(q, a, n, s0, h), C,
                          (long long)n * C, head_at(k, a, m, s0, h), C, (long long)m * C, 0.0f,
                          P + (size_t)h * n * m, m, hnm, S);
}

static chunk_rows rows_of(float *P, const attn_dims *a, int s0) {
    return chunk_rows{s0, a->heads, a->n, a->m, a->windows, P, a->bias, a->mask};
}

extern "C" void cuda_attention_forward(float *out, float *lse, const float *q, const float *k,
                                       const float *v, const attn_dims *a, float *scratch) {
    const int n = a->n, m = a->m, d = a->d, C = a->heads * d, chunk = chunk_seqs(a);
    const long long hnm = (long long)a->heads * n * m;
    if (a->seqs == 0 || n == 0) return;
    for (int s0 = 0; s0 < a->seqs; s0 += chunk) {
        const int S = a->seqs - s0 < chunk ? a->seqs - s0 : chunk;
        chunk_logits(scratch, q, k, a, s0, S);
        softmax_rows_kernel<<<row_blocks((int64_t)S * a->heads * n), row_threads(m)>>>(
            rows_of(scratch, a, s0), lse ? lse + (size_t)s0 * a->heads * n : NULL);
        CUDA_LAUNCHED();
        for (int h = 0; h < a->heads; h++)
            cuda_gemm_batched(false, false, n, d, m, 1.0f, scratch + (size_t)h * n * m, m, hnm,
                              head_at(v, a, m, s0, h), C, (long long)m * C, 0.0f,
                              head_at(out, a, n, s0, h), C, (long long)n * C, S);
    }
}

extern "C" bool cuda_attention_grads_in_bf16(const attn_dims *a) {
    (void)a;
    return false;
}

extern "C" void cuda_attention_backward(const attn_grads *g, float *dbias, const float *dout,
                                        const float *lse, const float *q, const float *k,
                                        const float *v, const attn_dims *a, float *scratch) {
    CHECK(!g->dq16 && !g->dk16 && !g->dv16, "attention: bf16 gradients on the GPU");
    float *dq = g->dq, *dk = g->dk, *dv = g->dv;
    /* each chunk's head block of a gradient is one product's C: written whole or added into */
    const float dq_beta = g->dq_whole ? 0.0f : 1.0f, dk_beta = g->dk_whole ? 0.0f : 1.0f;
    const float dv_beta = g->dv_whole ? 0.0f : 1.0f;
    const int n = a->n, m = a->m, d = a->d, C = a->heads * d, chunk = chunk_seqs(a);
    const long long hnm = (long long)a->heads * n * m, qs = (long long)n * C, ks = (long long)m * C;
    const bool need_ds = dq || dk || dbias;
    if (a->seqs == 0 || n == 0 || (!dv && !need_ds)) return;
    float *P = scratch, *dP = scratch + (size_t)chunk * hnm;
    for (int s0 = 0; s0 < a->seqs; s0 += chunk) {
        const int S = a->seqs - s0 < chunk ? a->seqs - s0 : chunk;
        const unsigned rows = row_blocks((int64_t)S * a->heads * n);
        chunk_logits(P, q, k, a, s0, S);
        probs_rows_kernel<<<rows, row_threads(m)>>>(rows_of(P, a, s0),
                                                    lse + (size_t)s0 * a->heads * n);
        CUDA_LAUNCHED();
        for (int h = 0; dv && h < a->heads; h++) /* dv += Pᵀ dout */
            cuda_gemm_batched(true, false, m, d, n, 1.0f, P + (size_t)h * n * m, m, hnm,
                              head_at(dout, a, n, s0, h), C, qs, dv_beta,
                              head_at(dv, a, m, s0, h), C, ks, S);
        if (!need_ds) continue;
        for (int h = 0; h < a->heads; h++) /* dP = dout vᵀ */
            cuda_gemm_batched(false, true, n, m, d, 1.0f, head_at(dout, a, n, s0, h), C, qs,
                              head_at(v, a, m, s0, h), C, ks, 0.0f, dP + (size_t)h * n * m, m, hnm,
                              S);
        softmax_grad_rows_kernel<<<rows, row_threads(m)>>>(dP, P, m);
        CUDA_LAUNCHED();
        if (dbias) add_bias_grad(dbias, dP, P, S, hnm);
        /* logits = scale q kᵀ: dq += scale dS k, dk += scale dSᵀ q */
        for (int h = 0; h < a->heads; h++) {
            if (dq)
                cuda_gemm_batched(false, false, n, d, m, a->scale, dP + (size_t)h * n * m, m, hnm,
                                  head_at(k, a, m, s0, h), C, ks, dq_beta,
                                  head_at(dq, a, n, s0, h), C, qs, S);
            if (dk)
                cuda_gemm_batched(true, false, m, d, n, a->scale, dP + (size_t)h * n * m, m, hnm,
                                  head_at(q, a, n, s0, h), C, qs, dk_beta,
                                  head_at(dk, a, m, s0, h), C, ks, S);
        }
    }
}
