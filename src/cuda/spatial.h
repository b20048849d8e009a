/* CUDA versions of src/cpu/spatial.h on device pointers, same semantics: window partition/reverse
 * with Swin's cyclic shift, the relative-position-bias gather (index on the device). Backward
 * kernels accumulate (+=). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* map (B, H, W, C) <-> windows (B * H/wh * W/ww, wh*ww, C) of the map rolled by -shift: window
 * pixel (y, x) is map pixel ((y + shift) mod H, (x + shift) mod W). to_windows: windows = f(map),
 * else map = f(windows); accumulate adds instead of copying; scale times the source's values. */
void cuda_window_copy(float *windows, float *map, int B, int H, int W, int C, int wh, int ww,
                      int shift, bool to_windows, bool accumulate, float scale);
/* window_copy of C of a map's map_C channels: map points at the first of them */
void cuda_window_copy_channels(float *windows, float *map, int map_C, int B, int H, int W, int C,
                               int wh, int ww, int shift, bool to_windows, bool accumulate,
                               float scale);
/* out (NH, N, N) = table (T, NH) gathered by index (N*N); the backward adds into dtable */
void cuda_relpos_gather_forward(float *out, const float *table, const int *index, int NH, int N);
void cuda_relpos_gather_backward(float *dtable, const float *dout, const int *index, int NH, int N);

#ifdef __cplusplus
}
#endif
