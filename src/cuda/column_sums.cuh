/* Sums over the rows of row-major (M, N) data, per column, for the weight and bias gradients: the
 * whole GPU takes part, yet every run adds in the same order (no atomics). Pass 1 cuts the rows into
 * at most MAX_ROW_CHUNKS chunks, fixed by M alone; a block sums one chunk of 32 columns, its 8 row
 * lanes in order and then the lanes in order, into the data arena's scratch. Pass 2 adds the
 * chunks' sums of each column in order onto the outputs.
 * A term is a functor: term(r, j, s) adds the S values of element (r, j) to s[0..S-1]. */
#pragma once
#include "common.cuh"

extern "C" {
#include "../core/arena.h"
}

#define COLUMN_TILE 32
#define ROW_LANES 8
#define MAX_ROW_CHUNKS 128
#define MIN_CHUNK_ROWS 64

template <int S, typename Term>
static __global__ void column_partials_kernel(float *partials, Term term, int64_t M, int N,
                                              int64_t chunk_rows, int chunks) {
    __shared__ float lane_sums[S][ROW_LANES][COLUMN_TILE];
    const int tx = threadIdx.x % COLUMN_TILE, ty = threadIdx.x / COLUMN_TILE;
    const int chunk = blockIdx.x % chunks, j = blockIdx.x / chunks * COLUMN_TILE + tx;
    const int64_t r0 = chunk * chunk_rows, r1 = r0 + chunk_rows < M ? r0 + chunk_rows : M;
    float s[S] = {};
    if (j < N)
        for (int64_t r = r0 + ty; r < r1; r += ROW_LANES) term(r, j, s);
    for (int k = 0; k < S; k++) lane_sums[k][ty][tx] = s[k];
    __syncthreads();
    if (ty != 0 || j >= N) return;
    for (int k = 0; k < S; k++) {
        float t = 0;
        for (int y = 0; y < ROW_LANES; y++) t += lane_sums[k][y][tx];
        partials[((int64_t)k * chunks + chunk) * N + j] = t;
    }
}

template <int S> struct column_outputs {
    float *sums[S]; /* a NULL one is not summed */
};

template <int S>
static __global__ void column_finish_kernel(column_outputs<S> out, const float *partials,
                                            int chunks, int N) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    for (int k = 0; k < S; k++) {
        if (!out.sums[k]) continue;
        float t = 0;
        for (int c = 0; c < chunks; c++) t += partials[((int64_t)k * chunks + c) * N + j];
        out.sums[k][j] += t;
    }
}

/* out.sums[k][j] += the sum over r of term's k-th value at (r, j) */
template <int S, typename Term>
static void add_column_sums_of(column_outputs<S> out, Term term, int64_t M, int N) {
    if (M == 0 || N == 0) return;
    int64_t chunks = (M + MIN_CHUNK_ROWS - 1) / MIN_CHUNK_ROWS;
    if (chunks > MAX_ROW_CHUNKS) chunks = MAX_ROW_CHUNKS;
    const int64_t chunk_rows = (M + chunks - 1) / chunks;
    chunks = (M + chunk_rows - 1) / chunk_rows;
    const size_t floats = (size_t)S * chunks * N;
    float *partials = scratch_floats(floats);
    const unsigned blocks = (unsigned)((N + COLUMN_TILE - 1) / COLUMN_TILE * chunks);
    column_partials_kernel<S, Term><<<blocks, COLUMN_TILE * ROW_LANES>>>(partials, term, M, N,
                                                                         chunk_rows, (int)chunks);
    CUDA_LAUNCHED();
    column_finish_kernel<S><<<(N + 127) / 128, 128>>>(out, partials, (int)chunks, N);
    CUDA_LAUNCHED();
    scratch_done(partials, floats);
}
