#include "elementwise.h"

#include <math.h>

#include "../core/cpu_features.h"
#include "bf16.h"
#include "bf16_simd.h"
#include "bf16_store.h"
#include "fast_exp.h"
#include "simd.h"

bool broadcast_plan(broadcast *bc, int nda, const int *sa, int ndb, const int *sb) {
    int a5[5], b5[5];
    for (int i = 0; i < 5; i++) {
        a5[i] = i < 5 - nda ? 1 : sa[i - (5 - nda)];
        b5[i] = i < 5 - ndb ? 1 : sb[i - (5 - ndb)];
    }
    bc->n = bc->na = bc->nb = 1;
    for (int i = 0; i < 5; i++) {
        if (a5[i] != b5[i] && a5[i] != 1 && b5[i] != 1) return false;
        bc->out[i] = a5[i] > b5[i] ? a5[i] : b5[i];
        bc->n *= bc->out[i];
        bc->na *= a5[i];
        bc->nb *= b5[i];
    }
    int64_t acc_a = 1, acc_b = 1, acc_o = 1;
    for (int i = 4; i >= 0; i--) {
        bc->stride_a[i] = a5[i] == 1 ? 0 : acc_a;
        bc->stride_b[i] = b5[i] == 1 ? 0 : acc_b;
        bc->stride_out[i] = acc_o;
        acc_a *= a5[i];
        acc_b *= b5[i];
        acc_o *= bc->out[i];
    }
    /* b (or a) equal to the trailing dims of the output: index = i mod its size */
    bool b_suffix = true, a_suffix = true, started_b = false, started_a = false;
    for (int i = 0; i < 5; i++) {
        if (b5[i] != 1) started_b = true;
        if (started_b && b5[i] != bc->out[i]) b_suffix = false;
        if (a5[i] != 1) started_a = true;
        if (started_a && a5[i] != bc->out[i]) a_suffix = false;
    }
    if (bc->na == bc->n && bc->nb == bc->n) bc->kind = BCAST_SAME;
    else if (bc->na == bc->n && b_suffix) bc->kind = BCAST_B_SUFFIX;
    else if (bc->nb == bc->n && a_suffix) bc->kind = BCAST_A_SUFFIX;
    else if (bc->na == bc->n && b5[4] == 1 && bc->nb * bc->out[4] == bc->n) bc->kind = BCAST_B_ROWS;
    else bc->kind = BCAST_GENERAL;
    return true;
}

static inline float apply(binary_op op, float x, float y) {
    return op == BIN_ADD ? x + y : op == BIN_MUL ? x * y : x / y;
}

/* offsets of output element i into a and b */
static inline void offsets(const broadcast *bc, int64_t i, int64_t *ia, int64_t *ib) {
    int64_t oa = 0, ob = 0;
    for (int d = 4; d >= 0; d--) {
        int64_t c = i % bc->out[d];
        i /= bc->out[d];
        oa += c * bc->stride_a[d];
        ob += c * bc->stride_b[d];
    }
    *ia = oa;
    *ib = ob;
}

void binary_forward(binary_op op, float *out, const float *a, const float *b, const broadcast *bc) {
    int64_t n = bc->n, na = bc->na, nb = bc->nb;
    switch (bc->kind) {
    case BCAST_SAME:
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) out[i] = apply(op, a[i], b[i]);
        break;
    case BCAST_B_SUFFIX:
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n / nb; r++)
            for (int64_t j = 0; j < nb; j++) out[r * nb + j] = apply(op, a[r * nb + j], b[j]);
        break;
    case BCAST_A_SUFFIX:
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n / na; r++)
            for (int64_t j = 0; j < na; j++) out[r * na + j] = apply(op, a[j], b[r * na + j]);
        break;
    case BCAST_B_ROWS: {
        int64_t L = bc->out[4];
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < nb; r++)
            for (int64_t j = 0; j < L; j++) out[r * L + j] = apply(op, a[r * L + j], b[r]);
        break;
    }
    default: { /* rows of the last dim: one index decomposition per row, strided inner loop */
        int64_t L = bc->out[4], sa = bc->stride_a[4], sb = bc->stride_b[4];
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n / L; r++) {
            int64_t ia, ib;
            offsets(bc, r * L, &ia, &ib);
            for (int64_t j = 0; j < L; j++) out[r * L + j] = apply(op, a[ia + j * sa], b[ib + j * sb]);
        }
    }
    }
}

/* the gradient terms: d(a op b)/da and /db times g, at output element with operand values x, y, z */
static inline float grad_a(binary_op op, float g, float y) {
    return op == BIN_ADD ? g : op == BIN_MUL ? g * y : g / y;
}
static inline float grad_b(binary_op op, float g, float x, float y, float z) {
    return op == BIN_ADD ? g : op == BIN_MUL ? g * x : -g * z / y;
}

/* sum over the output elements that map to input element i (operand `which`) of term(o), the
 * innermost broadcast dim fastest: a strided run without divisions (Agent attention's position
 * biases, rows of up to 56 a run, spent 2-3 ns an element in the divisions) */
#define PREIMAGE_SUM(bc, in5, i, o, term, result)                                                  \
    do {                                                                                           \
        int64_t rem_ = (i), base_ = 0, count_ = 1;                                                 \
        int free_[5], nf_ = 0;                                                                     \
        for (int d_ = 4; d_ >= 0; d_--) {                                                          \
            int64_t c_ = rem_ % (in5)[d_];                                                         \
            rem_ /= (in5)[d_];                                                                     \
            if ((in5)[d_] == (bc)->out[d_]) base_ += c_ * (bc)->stride_out[d_];                    \
            else free_[nf_++] = d_, count_ *= (bc)->out[d_];                                       \
        }                                                                                          \
        int64_t run_ = nf_ ? (bc)->out[free_[0]] : 1;                                              \
        int64_t step_ = nf_ ? (bc)->stride_out[free_[0]] : 0;                                      \
        double s_ = 0;                                                                             \
        for (int64_t j_ = 0; j_ < count_ / run_; j_++) {                                           \
            int64_t r_ = j_, start_ = base_;                                                       \
            for (int k_ = 1; k_ < nf_; k_++) {                                                     \
                start_ += (r_ % (bc)->out[free_[k_]]) * (bc)->stride_out[free_[k_]];               \
                r_ /= (bc)->out[free_[k_]];                                                        \
            }                                                                                      \
            for (int64_t t_ = 0; t_ < run_; t_++) {                                                \
                int64_t o = start_ + t_ * step_;                                                   \
                s_ += (term);                                                                      \
            }                                                                                      \
        }                                                                                          \
        (result) = (float)s_;                                                                      \
    } while (0)

void broadcast_reduce(float *g_in, const float *g_out, const int *in5, const int *out5) {
    broadcast bc;
    int64_t acc = 1, n_in = 1;
    for (int d = 4; d >= 0; d--) {
        bc.out[d] = out5[d];
        bc.stride_out[d] = acc;
        acc *= out5[d];
        n_in *= in5[d];
    }
    bool suffix = true, started = false;
    for (int d = 0; d < 5; d++) {
        if (in5[d] != 1) started = true;
        if (started && in5[d] != out5[d]) suffix = false;
    }
    if (suffix) { /* bias-like: threads own column blocks and stream the rows */
        int64_t rows = acc / n_in;
        const int64_t block = 64;
#pragma omp parallel for schedule(static)
        for (int64_t j0 = 0; j0 < n_in; j0 += block) {
            int64_t j1 = j0 + block < n_in ? j0 + block : n_in;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = j0; j < j1; j++) g_in[j] += g_out[r * n_in + j];
        }
        return;
    }
    /* each input element sums its own preimage: parallel over inputs, no atomics */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n_in; i++) {
        float s;
        PREIMAGE_SUM(&bc, in5, i, o, g_out[o], s);
        g_in[i] += s;
    }
}

void expand_forward(float *out, const float *x, const int *in5, const int *out5) {
    int64_t stride[5], acc = 1, total = 1;
    for (int d = 4; d >= 0; d--) {
        stride[d] = in5[d] == 1 ? 0 : acc;
        acc *= in5[d];
        total *= out5[d];
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < total; i++) {
        int64_t rem = i, off = 0;
        for (int d = 4; d >= 0; d--) {
            off += (rem % out5[d]) * stride[d];
            rem /= out5[d];
        }
        out[i] = x[off];
    }
}

void binary_backward(binary_op op, float *ga, float *gb, const float *gout, const float *a,
                     const float *b, const float *out, const broadcast *bc) {
    int64_t n = bc->n;
    int a5[5], b5[5];
    for (int d = 0; d < 5; d++) {
        a5[d] = bc->stride_a[d] || bc->out[d] == 1 ? bc->out[d] : 1;
        b5[d] = bc->stride_b[d] || bc->out[d] == 1 ? bc->out[d] : 1;
    }
    if (bc->kind == BCAST_B_ROWS) { /* rows own their b value: parallel over rows */
        int64_t L = bc->out[4], rows = bc->nb;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            double s = 0;
            for (int64_t j = 0; j < L; j++) {
                int64_t i = r * L + j;
                if (ga) ga[i] += grad_a(op, gout[i], b[r]);
                s += grad_b(op, gout[i], a[i], b[r], out[i]);
            }
            if (gb) gb[r] += (float)s;
        }
        return;
    }
    if (bc->kind == BCAST_SAME) {
        if (ga) {
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < n; i++) ga[i] += grad_a(op, gout[i], b[i]);
        }
        if (gb) {
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < n; i++) gb[i] += grad_b(op, gout[i], a[i], b[i], out[i]);
        }
        return;
    }
    for (int which = 0; which < 2; which++) {
        float *g = which == 0 ? ga : gb;
        if (!g) continue;
        const int *in5 = which == 0 ? a5 : b5;
        int64_t n_in = which == 0 ? bc->na : bc->nb;
        if (op == BIN_ADD) {
            if (n_in == n) {
                accumulate(g, gout, n);
            } else {
                broadcast_reduce(g, gout, in5, bc->out);
            }
            continue;
        }
        /* products: each input element sums g * (the other operand) over its preimage, so threads
         * own disjoint outputs */
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n_in; i++) {
            float s;
            int64_t ia, ib;
            PREIMAGE_SUM(bc, in5, i, o,
                         (offsets(bc, o, &ia, &ib),
                          which == 0 ? grad_a(op, gout[o], b[ib])
                                     : grad_b(op, gout[o], a[ia], b[ib], out[o])),
                         s);
            g[i] += s;
        }
    }
}

/* Phi(x) and phi(x) of x[0..m), m <= GELU_BLOCK: every GELU's one place for them. The tail
 * Phi(-|x|) = phi(x) R(|x|) with R a degree-4/5 rational fit of the Mills ratio
 * (tools/fit_mills_ratio.py: relative error < 4e-7 in float on [0, 7]; beyond, phi < 1e-11 and R
 * stays near 1/|x|), so the far negative tail keeps its relative accuracy with one exp. R's
 * argument stops at 16: beyond, the tail is ~1e-40, and R's terms overflow from 1e10. R = P / Q,
 * their coefficients highest degree first. */
static const float mills_p[5] = {0.008149668091116969f, 0.08667197060864167f, 0.4131903259108038f,
                                 1.0343822228064203f, 1.2533141383628137f};
static const float mills_q[6] = {0.008149121843460332f, 0.08669257456310481f, 0.4209841896118687f,
                                 1.1248052645001267f, 1.62320223549615f, 1.0f};
#ifdef HAVE_FAST_EXP_VEC
/* The machine's own instructions where the cdf and pdf need them: 1/q's approximation (vrcp14ps,
 * vrcpps; a Newton step makes it good to ~1e-8 and ~1e-7), and |x|, min and a select in the float
 * domain (written as vector arithmetic, the select's and |x|'s bit operations compiled to integer
 * instructions, slower for the crossings between the domains: docs/performance.md, stop 62) */
#if VEC == 16
static inline vecf approx_reciprocal(vecf q) { return (vecf)_mm512_rcp14_ps((__m512)q); }
static inline vecf abs_vec(vecf x) { return (vecf)_mm512_abs_ps((__m512)x); }
static inline vecf min_vec(vecf a, vecf b) { return (vecf)_mm512_min_ps((__m512)a, (__m512)b); }
/* yes where x < 0, else no */
static inline vecf where_negative(vecf x, vecf yes, vecf no) {
    __mmask16 negative = _mm512_cmp_ps_mask((__m512)x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return (vecf)_mm512_mask_blend_ps(negative, (__m512)no, (__m512)yes);
}
#else
static inline vecf approx_reciprocal(vecf q) { return (vecf)_mm256_rcp_ps((__m256)q); }
static inline vecf abs_vec(vecf x) {
    return (vecf)_mm256_andnot_ps(_mm256_set1_ps(-0.0f), (__m256)x);
}
static inline vecf min_vec(vecf a, vecf b) { return (vecf)_mm256_min_ps((__m256)a, (__m256)b); }
static inline vecf where_negative(vecf x, vecf yes, vecf no) {
    __m256 negative = _mm256_cmp_ps((__m256)x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return (vecf)_mm256_blendv_ps((__m256)no, (__m256)yes, negative);
}
#endif

/* VEC lanes at a time: the compiler's vector form of the scalar code below waited on its
 * division's one port (docs/performance.md, stops 62 and 58) */
static inline __attribute__((always_inline)) void normal_cdf_pdf_vec(vecf x, vecf *cdf,
                                                                      vecf *pdf) {
    vecf a = abs_vec(x);
    vecf phi = 0.3989422804f * fast_exp_vec(a * a * -0.5f);
    vecf t = min_vec(a, splat(16.0f));
    vecf p = splat(mills_p[0]), q = splat(mills_q[0]);
    for (int k = 1; k < 5; k++) p = p * t + mills_p[k];
    for (int k = 1; k < 6; k++) q = q * t + mills_q[k];
    vecf r = approx_reciprocal(q);
    vecf tail = phi * p * (r * (2.0f - q * r));
    *cdf = where_negative(x, tail, 1.0f - tail);
    *pdf = phi;
}

/* n lanes (the lane count a constant in the whole vectors' loop, so that they load and store
 * straight from registers) */
static inline __attribute__((always_inline)) void normal_cdf_pdf_lanes(float *cdf, float *pdf,
                                                                        const float *x, int n) {
    vecf c, d;
    normal_cdf_pdf_vec(load_lanes(x, n), &c, &d);
    store_lanes(cdf, c, n);
    store_lanes(pdf, d, n);
}

static void normal_cdf_pdf_block(float *cdf, float *pdf, const float *x, int m) {
    int i = 0;
    for (; i + VEC <= m; i += VEC) normal_cdf_pdf_lanes(cdf + i, pdf + i, x + i, VEC);
    if (i < m) normal_cdf_pdf_lanes(cdf + i, pdf + i, x + i, m - i);
}
#else
static inline void normal_cdf_pdf(float x, float *cdf, float *pdf) {
    float a = fabsf(x);
    float phi = 0.3989422804f * fast_expf(-0.5f * a * a);
    float t = a < 16.0f ? a : 16.0f;
    float p = mills_p[0], q = mills_q[0];
    for (int k = 1; k < 5; k++) p = p * t + mills_p[k];
    for (int k = 1; k < 6; k++) q = q * t + mills_q[k];
    float tail = phi * p / q;
    *cdf = x < 0 ? tail : 1.0f - tail;
    *pdf = phi;
}

WIDE_VECTORS static void normal_cdf_pdf_block(float *cdf, float *pdf, const float *x, int m) {
#pragma omp simd
    for (int i = 0; i < m; i++) normal_cdf_pdf(x[i], &cdf[i], &pdf[i]);
}
#endif

/* The backward's GELU of a bf16 hidden layer reads a kept activation, far away in memory, and is
 * too slow a reader for the hardware to fetch it ahead: each block fetches the block two ahead
 * (that GELU's share of a bf16 training profile fell from 5.0% to 3.0%). */
static inline void fetch_ahead(const void *x, int64_t block_bytes) {
    for (int64_t line = 0; line < block_bytes; line += 64)
        __builtin_prefetch((const char *)x + 2 * block_bytes + line);
}

static int block_size(int64_t n, int64_t b) { return (int)(n - b < GELU_BLOCK ? n - b : GELU_BLOCK); }

WIDE_VECTORS void gelu_forward(float *out, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += GELU_BLOCK) {
        float cdf[GELU_BLOCK], pdf[GELU_BLOCK];
        int m = block_size(n, b);
        normal_cdf_pdf_block(cdf, pdf, x + b, m);
#pragma omp simd
        for (int i = 0; i < m; i++) out[b + i] = x[b + i] * cdf[i];
    }
}

/* The bf16 GELUs a vector at a time where AVX-512 runs them: Phi from polynomials on pieces of
 * [-6, 6) (gelu_pieces.h, tools/fit_gelu_pieces.py: relative error < 1.5e-6 from -4 up, < 5.6e-5 in
 * the tail below; phi, its derivative, within 1e-6), each lane's coefficients picked by vpermt2ps
 * from two registers of the 32 pieces. Their activations are the fp32 GELU's rounded, bit for bit,
 * for every bf16 input above -6 (from -6 down, 0 for values under 6e-9); on one thread the forward
 * ran 0.60 -> 0.34 ns a value, the backward 0.67 -> 0.51, against the Mills-ratio form the fp32
 * GELU keeps (docs/bf16.md). */
#if defined(__AVX512F__) && defined(VITC_BF16_KERNELS)
#define GELU_BF16_VECTORS 1
#include "gelu_pieces.h"

_Static_assert(GELU_PIECES == 32, "a coefficient's pieces are two registers of 16 (vpermt2ps)");

typedef struct gelu_table {
    __m512 lo[GELU_PIECES_DEGREE + 1], hi[GELU_PIECES_DEGREE + 1]; /* pieces 0-15 and 16-31 */
} gelu_table;

BF16_TARGET static gelu_table gelu_table_load(void) {
    gelu_table t;
    for (int k = 0; k <= GELU_PIECES_DEGREE; k++) {
        t.lo[k] = _mm512_loadu_ps(gelu_pieces[k]);
        t.hi[k] = _mm512_loadu_ps(gelu_pieces[k] + 16);
    }
    return t;
}

/* Phi(x) and, where with_pdf, phi(x): Horner's rule takes the polynomial's derivative alongside */
BF16_TARGET INLINE void normal_cdf_pdf_pieces(const gelu_table *t, __m512 x, __m512 *cdf,
                                              __m512 *pdf, bool with_pdf) {
    const float per_unit = GELU_PIECES / (GELU_PIECES_HI - GELU_PIECES_LO);
    __m512 u = _mm512_fmadd_ps(x, _mm512_set1_ps(per_unit),
                               _mm512_set1_ps(-GELU_PIECES_LO * per_unit));
    /* (outside the pieces the index wraps, vpermt2ps reading its low 5 bits, and the lanes are
     * replaced below: no clamp) */
    __m512 piece = _mm512_roundscale_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512i i = _mm512_cvttps_epi32(piece);
    __m512 within = _mm512_sub_ps(u, piece);
    __m512 p = _mm512_permutex2var_ps(t->lo[0], i, t->hi[0]), d = _mm512_setzero_ps();
    for (int k = 1; k <= GELU_PIECES_DEGREE; k++) {
        if (with_pdf) d = _mm512_fmadd_ps(d, within, p);
        p = _mm512_fmadd_ps(p, within, _mm512_permutex2var_ps(t->lo[k], i, t->hi[k]));
    }
    /* past the pieces Phi is 1 or 0 and phi 0 (a NaN passes through) */
    __mmask16 above = _mm512_cmp_ps_mask(u, _mm512_set1_ps(GELU_PIECES), _CMP_GE_OQ);
    __mmask16 below = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ);
    p = _mm512_mask_blend_ps(above, p, _mm512_set1_ps(1.0f));
    *cdf = _mm512_mask_blend_ps(below, p, _mm512_setzero_ps());
    if (with_pdf) *pdf = _mm512_maskz_mul_ps(~(above | below), d, _mm512_set1_ps(per_unit));
}

BF16_TARGET static void gelu_forward_bf16_vectors(uint16_t *out, uint16_t *kept, const float *x,
                                                  int64_t n) {
    gelu_table t = gelu_table_load();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes((int)(n - i < 16 ? n - i : 16));
        __m512 v = _mm512_maskz_loadu_ps(m, x + i), cdf, pdf;
        if (kept) {
            __m256i rounded = (__m256i)_mm512_cvtneps_pbh(v);
            _mm256_mask_storeu_epi16(kept + i, m, rounded);
            v = bf16_widen16(rounded);
        }
        normal_cdf_pdf_pieces(&t, v, &cdf, &pdf, false);
        _mm256_mask_storeu_epi16(out + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(v, cdf)));
    }
}

BF16_TARGET static void gelu_bf16_backward_vectors(uint16_t *act, uint16_t *dh, float *slope,
                                                   const uint16_t *h, const float *dact, int n) {
    gelu_table t = gelu_table_load();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 v = bf16_widen16(_mm256_maskz_loadu_epi16(m, h + i)), cdf, pdf;
        normal_cdf_pdf_pieces(&t, v, &cdf, &pdf, true);
        __m512 s = _mm512_fmadd_ps(v, pdf, cdf);
        if (slope) _mm512_mask_storeu_ps(slope + i, m, s);
        if (dh)
            _mm256_mask_storeu_epi16(
                dh + i, m,
                (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, dact + i))));
        _mm256_mask_storeu_epi16(act + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(v, cdf)));
    }
}
#else
#define GELU_BF16_VECTORS 0
#endif

WIDE_VECTORS void gelu_forward_bf16(uint16_t *out, uint16_t *kept, const float *x, int64_t n) {
#if GELU_BF16_VECTORS
    if (cpu_has_avx512_bf16()) {
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < n; b += GELU_BLOCK)
            gelu_forward_bf16_vectors(out + b, kept ? kept + b : NULL, x + b, block_size(n, b));
        return;
    }
#endif
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += GELU_BLOCK) {
        float v[GELU_BLOCK], cdf[GELU_BLOCK], pdf[GELU_BLOCK];
        int m = block_size(n, b);
        if (kept) {
            bf16_round(kept + b, x + b, m);
            for (int i = 0; i < m; i++) v[i] = bf16_to_float(kept[b + i]);
        } else {
            memcpy(v, x + b, sizeof(float) * (size_t)m);
        }
        normal_cdf_pdf_block(cdf, pdf, v, m);
#pragma omp simd
        for (int i = 0; i < m; i++) cdf[i] *= v[i];
        bf16_round(out + b, cdf, m); /* vcvtneps2bf16: rounding in the loop made it a third slower */
    }
}

WIDE_VECTORS void gelu_backward(float *dx, const float *dout, const float *x, int64_t n) {
    /* d/dx x Phi(x) = Phi(x) + x phi(x) */
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += GELU_BLOCK) {
        float cdf[GELU_BLOCK], pdf[GELU_BLOCK];
        int m = block_size(n, b);
        normal_cdf_pdf_block(cdf, pdf, x + b, m);
#pragma omp simd
        for (int i = 0; i < m; i++) dx[b + i] += dout[b + i] * (cdf[i] + x[b + i] * pdf[i]);
    }
}

WIDE_VECTORS void gelu_value_and_slope(float *out, float *slope, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += GELU_BLOCK) {
        float cdf[GELU_BLOCK], pdf[GELU_BLOCK];
        int m = block_size(n, b);
        normal_cdf_pdf_block(cdf, pdf, x + b, m);
#pragma omp simd
        for (int i = 0; i < m; i++) {
            float v = x[b + i]; /* read first: out may be x */
            out[b + i] = v * cdf[i];
            slope[b + i] = cdf[i] + v * pdf[i];
        }
    }
}

/* (GCC sees the block's last vector read past m, under a mask that leaves those lanes unread, and
 * warns that v may be unset there) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
WIDE_VECTORS void gelu_bf16_backward_block(uint16_t *act, uint16_t *dh, float *slope,
                                           const uint16_t *h, const float *dact, int m) {
    fetch_ahead(h, GELU_BLOCK * sizeof *h);
#if GELU_BF16_VECTORS
    if (cpu_has_avx512_bf16()) {
        gelu_bf16_backward_vectors(act, dh, slope, h, dact, m);
        return;
    }
#endif
    float v[GELU_BLOCK], cdf[GELU_BLOCK], pdf[GELU_BLOCK];
#pragma omp simd
    for (int i = 0; i < m; i++) v[i] = bf16_to_float(h[i]);
    normal_cdf_pdf_block(cdf, pdf, v, m);
#pragma omp simd
    for (int i = 0; i < m; i++) {
        pdf[i] = cdf[i] + v[i] * pdf[i]; /* the slope */
        v[i] *= cdf[i];
    }
    if (slope) memcpy(slope, pdf, sizeof(float) * (size_t)m);
    if (dh) {
#pragma omp simd
        for (int i = 0; i < m; i++) pdf[i] *= dact[i];
        bf16_round(dh, pdf, m);
    }
    bf16_round(act, v, m);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void gelu_bf16_value_and_slope(uint16_t *out, float *slope, const uint16_t *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += GELU_BLOCK)
        gelu_bf16_backward_block(out + b, NULL, slope + b, x + b, NULL, block_size(n, b));
}

void accumulate(float *dst, const float *src, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

void copy_floats(float *dst, const float *src, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

void scale_forward(float *out, const float *x, float s, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = s * x[i];
}

void scale_backward(float *dx, const float *dout, float s, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dx[i] += s * dout[i];
}

void add_scalar_forward(float *out, const float *x, float s, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = x[i] + s;
}

void relu_forward(float *out, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = x[i] > 0 ? x[i] : 0.0f;
}

void relu_backward(float *dx, const float *dout, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dx[i] += x[i] > 0 ? dout[i] : 0.0f;
}

void softplus_forward(float *out, const float *x, int64_t n) {
    /* torch: x itself above the threshold 20, where log1p(e^x) == x in float */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = x[i] > 20.0f ? x[i] : log1pf(expf(x[i]));
}

void softplus_backward(float *dx, const float *dout, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dx[i] += x[i] > 20.0f ? dout[i] : dout[i] / (1.0f + expf(-x[i]));
}

void pow_forward(float *out, const float *x, float p, int64_t n) {
    if (p == 3.0f) { /* FLatten's focusing power: exact cube, like torch's x ** 3 */
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * x[i] * x[i];
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = powf(x[i], p);
}

void pow_backward(float *dx, const float *dout, const float *x, float p, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dx[i] += dout[i] * p * powf(x[i], p - 1.0f);
}
