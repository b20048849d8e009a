/* Token-layout kernels: window partition/reverse (rectangular windows also give CSwin's stripes),
 * cyclic roll, relative-position-bias gather. Backward kernels accumulate (+=). */
#pragma once
#include <stdint.h>

/* Swin's relative_position_index of a wh x ww window: index[i*N + j] for tokens i, j (row-major in
 * the window, N = wh*ww) = (dy + wh - 1) * (2*ww - 1) + (dx + ww - 1), with (dy, dx) = pos_i - pos_j */
void relpos_index_swin(int *index, int wh, int ww);
