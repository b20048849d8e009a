/* Token-layout kernels: window partition/reverse (rectangular windows also give CSwin's stripes)
 * with Swin's cyclic shift, relative-position-bias gather. Backward kernels accumulate (+=). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

/* Swin's relative_position_index of a wh x ww window: index[i*N + j] for tokens i, j (row-major in
 * the window, N = wh*ww) = (dy + wh - 1) * (2*ww - 1) + (dx + ww - 1), with (dy, dx) = pos_i - pos_j */
void relpos_index_swin(int *index, int wh, int ww);

/* map (B, H, W, C) <-> windows (B * H/wh * W/ww, wh*ww, C) of the map rolled by -shift along H and
 * W (torch.roll(map, (-shift, -shift))): window pixel (y, x) is map pixel ((y + shift) mod H,
 * (x + shift) mod W). to_windows: windows = f(map), else map = f(windows); accumulate adds instead
 * of copying (the backward of the other direction). */
void window_copy(float *windows, float *map, int B, int H, int W, int C, int wh, int ww, int shift,
                 bool to_windows, bool accumulate);
/* window_copy of C of a map's map_C channels: map points at the first of them */
void window_copy_channels(float *windows, float *map, int map_C, int B, int H, int W, int C, int wh,
                          int ww, int shift, bool to_windows, bool accumulate);

/* out (NH, N, N) = table (T, NH) gathered by index (N*N) */
void relpos_gather_forward(float *out, const float *table, const int *index, int NH, int N);
void relpos_gather_backward(float *dtable, const float *dout, const int *index, int NH, int N);
