/* The token-layout kernels of src/cpu/spatial.h on the device: window partition/reverse with the
 * cyclic shift (one thread per element: the map and the windows are a permutation of each other,
 * so no two threads write one place), the relative-position-bias gather and its backward (each
 * table entry summed by one thread in the CPU's order: no atomics). */
#include "common.cuh"
#include "spatial.h"

static __global__ void window_copy_kernel(float *windows, float *map, int map_C, int H, int W,
                                          int C, int wh, int ww, int sh, int sw, bool to_windows,
                                          bool accumulate, float scale, int64_t n) {
    const int nh = H / wh, nw = W / ww;
    GRID_STRIDE_LOOP(k, n) { /* k: the element of the windows (win, y, t, c) */
        const int c = (int)(k % C), t = (int)(k / C % ww);
        const int64_t row = k / ((int64_t)C * ww), win = row / wh;
        const int y = (int)(row % wh), j = (int)(win % nw), i = (int)(win / nw % nh);
        const int64_t b = win / ((int64_t)nw * nh);
        const int64_t m = ((b * H + (i * wh + y + sh) % H) * W + (j * ww + t + sw) % W) * map_C + c;
        float *dst = to_windows ? windows + k : map + m;
        const float src = scale * (to_windows ? map[m] : windows[k]);
        *dst = accumulate ? *dst + src : src;
    }
}

extern "C" void cuda_window_copy_channels(float *windows, float *map, int map_C, int B, int H,
                                          int W, int C, int wh, int ww, int shift, bool to_windows,
                                          bool accumulate, float scale) {
    const int64_t n = (int64_t)B * H * W * C;
    if (n == 0) return;
    const int sh = ((shift % H) + H) % H, sw = ((shift % W) + W) % W;
    window_copy_kernel<<<flat_blocks(n), FLAT_THREADS>>>(windows, map, map_C, H, W, C, wh, ww, sh,
                                                         sw, to_windows, accumulate, scale, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_window_copy(float *windows, float *map, int B, int H, int W, int C, int wh,
                                 int ww, int shift, bool to_windows, bool accumulate, float scale) {
    cuda_window_copy_channels(windows, map, C, B, H, W, C, wh, ww, shift, to_windows, accumulate,
                              scale);
}

static __global__ void relpos_gather_forward_kernel(float *out, const float *table,
                                                    const int *index, int NH, int64_t NN) {
    GRID_STRIDE_LOOP(k, NH * NN) {
        const int h = (int)(k / NN);
        out[k] = table[(int64_t)index[k % NN] * NH + h];
    }
}

extern "C" void cuda_relpos_gather_forward(float *out, const float *table, const int *index, int NH,
                                           int N) {
    const int64_t NN = (int64_t)N * N;
    if (NH * NN == 0) return;
    relpos_gather_forward_kernel<<<flat_blocks(NH * NN), FLAT_THREADS>>>(out, table, index, NH, NN);
    CUDA_LAUNCHED();
}

/* Thread (h, k) owns the table entry (index[k], h) when k is the first place of that index: it adds
 * the gradients of every place with that index in k order, as the CPU; the other threads stop. */
static __global__ void relpos_gather_backward_kernel(float *dtable, const float *dout,
                                                     const int *index, int NH, int64_t NN) {
    GRID_STRIDE_LOOP(q, NH * NN) {
        const int h = (int)(q / NN);
        const int64_t k = q % NN;
        const int row = index[k];
        bool first = true;
        for (int64_t e = 0; e < k && first; e++) first = index[e] != row;
        if (!first) continue;
        float d = dtable[(int64_t)row * NH + h];
        for (int64_t e = k; e < NN; e++)
            if (index[e] == row) d += dout[h * NN + e];
        dtable[(int64_t)row * NH + h] = d;
    }
}

extern "C" void cuda_relpos_gather_backward(float *dtable, const float *dout, const int *index,
                                            int NH, int N) {
    const int64_t NN = (int64_t)N * N;
    if (NH * NN == 0) return;
    relpos_gather_backward_kernel<<<flat_blocks(NH * NN), FLAT_THREADS>>>(dtable, dout, index, NH,
                                                                          NN);
    CUDA_LAUNCHED();
}
