#include "gemm_nt.h"

#include <stdbool.h>
#include <stdint.h>

#include "../core/threads.h"
#include "simd.h"

/* A tile of TILE_ROWS rows of C by PANEL columns (two of the machine's vectors: 32 columns with
 * AVX-512, 16 with AVX2) lives in 12 vector registers; B's PANEL rows are packed (transposed) KC at
 * a time, 16-32 KiB that stay in L1 while every row block of A streams past; each thread takes
 * ROW_BLOCK rows at a time, so that their KC columns of A (512 KiB) stay in L2. */
#define TILE_ROWS 6
#define PANEL (2 * VEC)
#define KC 256
#define ROW_BLOCK 512
/* with fewer rows than this a thread, threads split the panels (every thread reads all of A) */
#define ROWS_PER_THREAD_MIN 256

/* bp (kc, PANEL) = the n (<= PANEL) rows of b (row stride ldb), kc columns, transposed; zero
 * beyond n */
static void pack_panel(float *bp, const float *b, int ldb, int n, int kc) {
    int full = kc / VEC * VEC;
    for (int h = 0; h < PANEL / VEC; h++) /* VEC rows at a time: fewer streams to prefetch */
        for (int t0 = 0; t0 < full; t0 += VEC) {
            vecf x[VEC];
            if (n == PANEL) {
#pragma GCC unroll 16
                for (int r = 0; r < VEC; r++) x[r] = load_vec(b + (size_t)(VEC * h + r) * ldb + t0);
            } else {
                for (int r = 0; r < VEC; r++)
                    x[r] = VEC * h + r < n ? load_vec(b + (size_t)(VEC * h + r) * ldb + t0) : (vecf){0};
            }
            transpose_vec(x);
#pragma GCC unroll 16
            for (int r = 0; r < VEC; r++) store_vec(bp + (t0 + r) * PANEL + VEC * h, x[r]);
        }
    for (int t0 = full; t0 < kc; t0++)
        for (int j = 0; j < PANEL; j++) bp[t0 * PANEL + j] = j < n ? b[(size_t)j * ldb + t0] : 0.0f;
}

/* how a tile's sums meet C: the first block of the inner dimension applies beta (C is not read
 * when beta is 0, as BLAS does), the later ones add */
typedef struct epilogue {
    float alpha, beta;
    bool first;
} epilogue;

static inline __attribute__((always_inline)) vecf combine(vecf acc, const float *c, epilogue e) {
    if (!e.first) return load_vec(c) + e.alpha * acc;
    if (e.beta == 0.0f) return e.alpha * acc;
    return e.beta * load_vec(c) + e.alpha * acc;
}

/* C's rows (rows <= TILE_ROWS, stride ldc) x n (<= PANEL) columns from kc columns of A's rows and
 * the packed panel */
static inline __attribute__((always_inline)) void tile(float *c, int ldc, const float *a, int lda,
                                                       const float *bp, int kc, int rows, int n,
                                                       epilogue e) {
    vecf acc[TILE_ROWS][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = (vecf){0};
    for (int k = 0; k < kc; k++) {
        vecf b0 = load_vec(bp + k * PANEL), b1 = load_vec(bp + k * PANEL + VEC);
        for (int r = 0; r < rows; r++) {
            vecf x = splat(a[(size_t)r * lda + k]);
            acc[r][0] += x * b0;
            acc[r][1] += x * b1;
        }
    }
    for (int r = 0; r < rows; r++) {
        float *cr = c + (size_t)r * ldc;
        if (n == PANEL) {
            store_vec(cr, combine(acc[r][0], cr, e));
            store_vec(cr + VEC, combine(acc[r][1], cr + VEC, e));
            continue;
        }
        float sums[PANEL], old[PANEL] = {0};
        for (int j = 0; j < n; j++) old[j] = cr[j];
        store_vec(sums, combine(acc[r][0], old, e));
        store_vec(sums + VEC, combine(acc[r][1], old + VEC, e));
        for (int j = 0; j < n; j++) cr[j] = sums[j];
    }
}

/* a block of B's rows (n of them, kc columns): the one to be packed next */
typedef struct b_block {
    const float *b;
    int n, kc;
} b_block;

/* share `part` of `parts` of the next block's rows fetched into L2 while a tile computes: at batch
 * 1 every weight comes from memory once, and packing waited for it (10% of the time). (A flat loop
 * over cache lines, row and offset by division, compiled to no prefetch at all with GCC 12.) */
static inline void prefetch_share(b_block next, int ldb, int part, int parts) {
    for (int r = next.n * part / parts; r < next.n * (part + 1) / parts; r++)
        for (int k = 0; k < next.kc + 16; k += 16)
            __builtin_prefetch(next.b + (size_t)r * ldb + k, 0, 2);
}

/* one packed panel against `rows` rows of A (a whole number of tiles, then a shorter one) */
WIDE_VECTORS static void panel_rows(float *c, int ldc, const float *a, int lda, const float *bp,
                                    int kc, int rows, int n, epilogue e, b_block next, int ldb) {
    int i = 0, tiles = (rows + TILE_ROWS - 1) / TILE_ROWS;
    for (; i + TILE_ROWS <= rows; i += TILE_ROWS) {
        prefetch_share(next, ldb, i / TILE_ROWS, tiles);
        tile(c + (size_t)i * ldc, ldc, a + (size_t)i * lda, lda, bp, kc, TILE_ROWS, n, e);
    }
    if (i < rows) prefetch_share(next, ldb, tiles - 1, tiles);
    c += (size_t)i * ldc, a += (size_t)i * lda;
    switch (rows - i) { /* constant row counts, so that the accumulators stay in registers */
    case 1: tile(c, ldc, a, lda, bp, kc, 1, n, e); break;
    case 2: tile(c, ldc, a, lda, bp, kc, 2, n, e); break;
    case 3: tile(c, ldc, a, lda, bp, kc, 3, n, e); break;
    case 4: tile(c, ldc, a, lda, bp, kc, 4, n, e); break;
    case 5: tile(c, ldc, a, lda, bp, kc, 5, n, e); break;
    default: break;
    }
}

static b_block block_of(const float *B, int ldb, int N, int K, int p, int k0) {
    int j0 = p * PANEL;
    return (b_block){B + (size_t)j0 * ldb + k0, N - j0 < PANEL ? N - j0 : PANEL,
                     K - k0 < KC ? K - k0 : KC};
}

/* rows i0..i1 of C, panels p0, p0 + step, ... */
static void gemm_nt_part(int i0, int i1, int p0, int step, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc) {
    float bp[KC * PANEL] __attribute__((aligned(64)));
    int panels = (N + PANEL - 1) / PANEL;
    for (int r0 = i0; r0 < i1; r0 += ROW_BLOCK) {
        int rows = i1 - r0 < ROW_BLOCK ? i1 - r0 : ROW_BLOCK;
        for (int p = p0; p < panels; p += step)
            for (int k0 = 0; k0 < K; k0 += KC) {
                b_block now = block_of(B, ldb, N, K, p, k0), next = {0};
                if (k0 + KC < K) next = block_of(B, ldb, N, K, p, k0 + KC);
                else if (p + step < panels) next = block_of(B, ldb, N, K, p + step, 0);
                pack_panel(bp, now.b, ldb, now.n, now.kc);
                epilogue e = {alpha, beta, k0 == 0};
                panel_rows(C + (size_t)r0 * ldc + p * PANEL, ldc, A + (size_t)r0 * lda + k0, lda,
                           bp, now.kc, rows, now.n, e, next, ldb);
            }
    }
}

void gemm_nt(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
             float beta, float *C, int ldc, int threads) {
    if (K == 0) { /* no block of the inner dimension would apply beta */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float *c = C + (size_t)i * ldc + j;
                *c = beta == 0.0f ? 0.0f : beta * *c;
            }
        return;
    }
    if (threads == 1) { /* (a nested parallel region, even of one thread, calls the heap) */
        gemm_nt_part(0, M, 0, 1, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int panels = (N + PANEL - 1) / PANEL;
    bool split_rows = M >= ROWS_PER_THREAD_MIN * threads || panels < 4 * threads;
#pragma omp parallel num_threads(threads)
    {
        int t = vitc_thread_id(), team = vitc_team_size();
        if (split_rows)
            gemm_nt_part((int)((int64_t)M * t / team), (int)((int64_t)M * (t + 1) / team), 0, 1,
                         N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        else
            gemm_nt_part(0, M, t, team, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
}
