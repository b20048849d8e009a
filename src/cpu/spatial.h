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
 * of copying (the backward of the other direction); the values copied or added are scale times the
 * source's (a drop path's factor on the way). */
void window_copy(float *windows, float *map, int B, int H, int W, int C, int wh, int ww, int shift,
                 bool to_windows, bool accumulate, float scale);

/* Where window row r of that layout lies (rows of ww tokens, r < B * H/wh * W/ww * wh): its first
 * token is window token `token`, and its token t is map pixel map_row + (col + t) mod W. */
typedef struct window_row {
    int64_t token, map_row;
    int col;
} window_row;

static inline window_row window_row_at(int64_t r, int H, int W, int wh, int ww, int shift) {
    int nh = H / wh, nw = W / ww, sh = ((shift % H) + H) % H, sw = ((shift % W) + W) % W;
    int y = (int)(r % wh);
    int64_t win = r / wh;
    int j = (int)(win % nw), i = (int)(win / nw % nh);
    int64_t b = win / ((int64_t)nw * nh);
    return (window_row){(win * wh + y) * ww, (b * H + (i * wh + y + sh) % H) * W, j * ww + sw};
}
/* window_copy of C of a map's map_C channels: map points at the first of them */
void window_copy_channels(float *windows, float *map, int map_C, int B, int H, int W, int C, int wh,
                          int ww, int shift, bool to_windows, bool accumulate, float scale);

/* out (NH, N, N) = table (T, NH) gathered by index (N*N) */
void relpos_gather_forward(float *out, const float *table, const int *index, int NH, int N);
void relpos_gather_backward(float *dtable, const float *dout, const int *index, int NH, int N);
