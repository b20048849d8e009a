#include "gemm_packed.h"

#include <string.h>

#include "../core/arena.h"
#include "../core/check.h"
#include "../core/threads.h"
#include "simd.h"

/* Both operands packed, as BLIS does: B's KC x NC block in slivers of NR columns (one sliver,
 * KC x NR, stays in L1 while A's slivers pass it), A's MC x KC block in slivers of MR rows (the
 * block stays in L2); a tile of MR x NR sums lives in 12 registers. Each thread runs the whole
 * loop nest on its own share of C's rows (or of its columns, when there are few rows), packing
 * its own copy of what it reads: no barrier inside a product. */
#define MR 6
#define NR (2 * VEC)
#define KC 384
#define MC 120
#define NC 3072
/* with fewer rows than this a thread, or fewer rows than columns, the threads split C's columns */
#define ROWS_PER_THREAD_MIN 96

/* Packing: a sliver of `width` lines (MR of A's rows, NR of B's columns) is stored k by k, each k's
 * `width` values together, zeros past the operand's last line. */

/* one sliver from lines (rows <= width of them, stride ld) whose kc values of k lie side by side:
 * VEC lines and VEC values at a time, turned by a vector transpose; each k's vector is stored
 * whole, lanes past `width` overwritten by the next k's (the buffer has VEC floats of room past its
 * end) */
static void pack_sliver_across(float *dst, const float *src, int ld, int rows, int kc, int width) {
    int full = kc / VEC * VEC;
    for (int h = 0; h * VEC < width; h++)
        for (int t0 = 0; t0 < full; t0 += VEC) {
            vecf x[VEC];
#pragma GCC unroll 16
            for (int r = 0; r < VEC; r++)
                x[r] = h * VEC + r < rows ? load_vec(src + (size_t)(h * VEC + r) * ld + t0)
                                          : (vecf){0};
            transpose_vec(x);
#pragma GCC unroll 16
            for (int k = 0; k < VEC; k++) store_vec(dst + (t0 + k) * width + h * VEC, x[k]);
        }
    for (int k = full; k < kc; k++)
        for (int r = 0; r < width; r++) dst[k * width + r] = r < rows ? src[(size_t)r * ld + k] : 0.0f;
}

/* the slivers of `count` lines stored side by side in each of kc rows (stride ld), read row by row
 * (sliver by sliver read a cache line a row: the weight gradient's packing waited on memory) */
static void pack_slivers_along(float *dst, const float *src, int ld, int count, int kc, int width) {
    int slivers = (count + width - 1) / width;
    for (int k = 0; k < kc; k++) {
        const float *row = src + (size_t)k * ld;
        for (int s = 0; s < slivers; s++) {
            float *d = dst + ((size_t)s * kc + k) * width;
            int n = count - s * width < width ? count - s * width : width;
            if (n == width && width == NR) {
                store_vec(d, load_vec(row + s * NR));
                store_vec(d + VEC, load_vec(row + s * NR + VEC));
            } else if (n == width && width == MR) {
                memcpy(d, row + s * MR, sizeof(float) * MR);
            } else
                for (int j = 0; j < width; j++) d[j] = j < n ? row[s * width + j] : 0.0f;
        }
    }
}

/* how a tile's sums meet C: the first block of the inner dimension applies beta (C not read when
 * beta is 0), the later ones add */
typedef struct epilogue {
    float alpha, beta;
    bool first;
} epilogue;

static inline __attribute__((always_inline)) vecf combine(vecf acc, const float *c, epilogue e) {
    if (!e.first) return load_vec(c) + e.alpha * acc;
    if (e.beta == 0.0f) return e.alpha * acc;
    return e.beta * load_vec(c) + e.alpha * acc;
}

/* C's tile (rows x cols of it, at most MR x NR) from kc steps of a packed A sliver and B sliver */
static inline __attribute__((always_inline)) void tile(float *c, int ldc, const float *ap,
                                                       const float *bp, int kc, int rows, int cols,
                                                       epilogue e) {
    vecf acc[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        acc[r][0] = acc[r][1] = (vecf){0};
        __builtin_prefetch(c + (size_t)r * ldc, 1, 3);
        __builtin_prefetch(c + (size_t)r * ldc + NR - 1, 1, 3);
    }
    for (int k = 0; k < kc; k++) {
        vecf b0 = load_vec(bp + k * NR), b1 = load_vec(bp + k * NR + VEC);
        KEEP_IN_REGISTER(b0);
        KEEP_IN_REGISTER(b1);
#pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            vecf x = splat(ap[k * MR + r]);
            acc[r][0] += x * b0;
            acc[r][1] += x * b1;
        }
    }
    if (rows == MR && cols == NR) {
#pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            float *cr = c + (size_t)r * ldc;
            store_vec(cr, combine(acc[r][0], cr, e));
            store_vec(cr + VEC, combine(acc[r][1], cr + VEC, e));
        }
        return;
    }
    for (int r = 0; r < rows; r++) {
        float *cr = c + (size_t)r * ldc, sums[NR], old[NR] = {0};
        for (int j = 0; j < cols; j++) old[j] = cr[j];
        store_vec(sums, combine(acc[r][0], old, e));
        store_vec(sums + VEC, combine(acc[r][1], old + VEC, e));
        for (int j = 0; j < cols; j++) cr[j] = sums[j];
    }
}

/* one product's operands, as gemm_packed has them */
typedef struct product {
    bool trans_a, trans_b;
    int K, kc; /* kc: the blocks of the inner dimension, of equal length */
    float alpha, beta;
    const float *A, *B;
    int lda, ldb, ldc;
    float *C;
} product;

/* C's rows i0..i1 by columns j0..j1, one thread, its packing buffers ap and bp */
WIDE_VECTORS static void part(const product *p, int i0, int i1, int j0, int j1, float *ap,
                              float *bp) {
    for (int jc = j0; jc < j1; jc += NC) {
        int nc = j1 - jc < NC ? j1 - jc : NC;
        for (int pc = 0; pc < p->K; pc += p->kc) {
            int kc = p->K - pc < p->kc ? p->K - pc : p->kc;
            if (p->trans_b)
                for (int j = 0; j < nc; j += NR)
                    pack_sliver_across(bp + (size_t)j * kc, p->B + (size_t)(jc + j) * p->ldb + pc,
                                       p->ldb, nc - j < NR ? nc - j : NR, kc, NR);
            else
                pack_slivers_along(bp, p->B + (size_t)pc * p->ldb + jc, p->ldb, nc, kc, NR);
            epilogue e = {p->alpha, p->beta, pc == 0};
            for (int ic = i0; ic < i1; ic += MC) {
                int mc = i1 - ic < MC ? i1 - ic : MC;
                if (p->trans_a)
                    pack_slivers_along(ap, p->A + (size_t)pc * p->lda + ic, p->lda, mc, kc, MR);
                else
                    for (int i = 0; i < mc; i += MR)
                        pack_sliver_across(ap + (size_t)i * kc,
                                           p->A + (size_t)(ic + i) * p->lda + pc, p->lda,
                                           mc - i < MR ? mc - i : MR, kc, MR);
                for (int j = 0; j < nc; j += NR) {
                    int cols = nc - j < NR ? nc - j : NR;
                    for (int i = 0; i < mc; i += MR) {
                        int rows = mc - i < MR ? mc - i : MR;
                        float *c = p->C + (size_t)(ic + i) * p->ldc + jc + j;
                        const float *a = ap + (size_t)i * kc, *b = bp + (size_t)j * kc;
                        if (rows == MR && cols == NR) tile(c, p->ldc, a, b, kc, MR, NR, e);
                        else tile(c, p->ldc, a, b, kc, rows, cols, e);
                    }
                }
            }
        }
    }
}

/* one thread's packing buffers: A's block and B's, with VEC floats of room past each */
static size_t a_floats(const product *p, int rows) {
    return (size_t)((rows < MC ? rows : MC) + MR) * p->kc + VEC;
}
static size_t b_floats(const product *p, int cols) {
    return (size_t)((cols < NC ? cols : NC) + NR) * p->kc + VEC;
}

/* thread t of team's share of C: rows, or columns, in whole slivers */
static void share(const product *p, bool split_rows, int M, int N, int t, int team, float *buffer) {
    int lines = split_rows ? M : N, width = split_rows ? MR : NR, slivers = (lines + width - 1) / width;
    int first = slivers * t / team * width, end = slivers * (t + 1) / team * width;
    if (end > lines) end = lines;
    if (first >= end) return;
    float *ap = buffer, *bp = buffer + a_floats(p, split_rows ? end - first : M);
    if (split_rows) part(p, first, end, 0, N, ap, bp);
    else part(p, 0, M, first, end, ap, bp);
}

bool gemm_packed_shares(int M, int N, int threads) {
    return threads == 1 || M >= ROWS_PER_THREAD_MIN * threads || N >= 4 * NR * threads;
}

void gemm_packed(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc, int threads) {
    if (M == 0 || N == 0) return;
    if (K == 0) { /* no block of the inner dimension would apply beta */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float *c = C + (size_t)i * ldc + j;
                *c = beta == 0.0f ? 0.0f : beta * *c;
            }
        return;
    }
    int blocks = (K + KC - 1) / KC;
    product p = {trans_a, trans_b, K, (K + blocks - 1) / blocks, alpha, beta, A, B, lda, ldb, ldc, C};
    /* each thread packs the whole of the operand the split does not share out: the smaller one */
    bool split_rows = M >= ROWS_PER_THREAD_MIN * threads && (M >= N || N < 4 * NR * threads);
    size_t per_thread = a_floats(&p, M) + b_floats(&p, N);
    CHECK(!vitc_in_parallel(), "gemm_packed: called inside a parallel region (the scratch arena "
                               "its buffers come from is the team's)");
    if (threads == 1) { /* (a parallel region, even of one thread, calls the heap) */
        float *buffer = scratch_floats(per_thread);
        share(&p, true, M, N, 0, 1, buffer);
        scratch_done(buffer, per_thread);
        return;
    }
    float *buffers = scratch_floats(per_thread * threads);
#pragma omp parallel num_threads(threads)
    share(&p, split_rows, M, N, vitc_thread_id(), vitc_team_size(),
          buffers + (size_t)vitc_thread_id() * per_thread);
    scratch_done(buffers, per_thread * threads);
}
