#include "spatial.h"

#include <string.h>

void relpos_index_swin(int *index, int wh, int ww) {
    int n = wh * ww;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int dy = i / ww - j / ww + wh - 1, dx = i % ww - j % ww + ww - 1;
            index[i * n + j] = dy * (2 * ww - 1) + dx;
        }
}

void window_copy_channels(float *windows, float *map, int map_C, int B, int H, int W, int C, int wh,
                          int ww, int shift, bool to_windows, bool accumulate, float scale) {
    int64_t rows = (int64_t)B * (H / wh) * (W / ww) * wh; /* one window row (ww tokens) each */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        window_row at = window_row_at(r, H, W, wh, ww, shift);
        float *w = windows + at.token * C, *m = map + at.map_row * map_C;
        for (int t = 0; t < ww; t++) {
            float *wt = w + (int64_t)t * C, *mt = m + (int64_t)((at.col + t) % W) * map_C;
            float *dst = to_windows ? wt : mt;
            const float *src = to_windows ? mt : wt;
            if (accumulate)
                for (int c = 0; c < C; c++) dst[c] += scale * src[c];
            else if (scale != 1.0f)
                for (int c = 0; c < C; c++) dst[c] = scale * src[c];
            else
                memcpy(dst, src, (size_t)C * sizeof(float));
        }
    }
}

void window_copy(float *windows, float *map, int B, int H, int W, int C, int wh, int ww, int shift,
                 bool to_windows, bool accumulate, float scale) {
    window_copy_channels(windows, map, C, B, H, W, C, wh, ww, shift, to_windows, accumulate, scale);
}

void relpos_gather_forward(float *out, const float *table, const int *index, int NH, int N) {
#pragma omp parallel for schedule(static)
    for (int h = 0; h < NH; h++)
        for (int64_t k = 0; k < (int64_t)N * N; k++) out[(int64_t)h * N * N + k] = table[(int64_t)index[k] * NH + h];
}

void relpos_gather_backward(float *dtable, const float *dout, const int *index, int NH, int N) {
    /* each thread owns one head's column of the table: no two threads write the same entry */
#pragma omp parallel for schedule(static)
    for (int h = 0; h < NH; h++)
        for (int64_t k = 0; k < (int64_t)N * N; k++) dtable[(int64_t)index[k] * NH + h] += dout[(int64_t)h * N * N + k];
}
