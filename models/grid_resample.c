#include "grid_resample.h"

#include <math.h>
#include <stdlib.h>

#include "../src/core/check.h"

/* the weights of the 4 source cells around output cell o (of out) and the first one's index */
static int cubic_taps(int o, int in, int out, double w[4]) {
    const double a = -0.75;
    double real = ((double)in / out) * (o + 0.5) - 0.5; /* (not clamped at 0: cubic's own) */
    int i0 = (int)floor(real);
    double t = real - i0, x;
    x = t + 1, w[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    x = t, w[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 1 - t, w[2] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 2 - t, w[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return i0 - 1;
}

static int clamp_index(int i, int n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

void grid_resample_bicubic(const float *src, int g0, float *dst, int g1, int C) {
    double *row = xmalloc(sizeof(double) * 4 * (size_t)C); /* 4 source rows resized along x */
    for (int y = 0; y < g1; y++) {
        double wy[4];
        int y0 = cubic_taps(y, g0, g1, wy);
        for (int x = 0; x < g1; x++) {
            double wx[4];
            int x0 = cubic_taps(x, g0, g1, wx);
            for (int r = 0; r < 4; r++) {
                const float *line = src + (size_t)clamp_index(y0 + r, g0) * g0 * C;
                for (int c = 0; c < C; c++) {
                    double s = 0;
                    for (int k = 0; k < 4; k++)
                        s += wx[k] * line[(size_t)clamp_index(x0 + k, g0) * C + c];
                    row[r * C + c] = s;
                }
            }
            float *out = dst + ((size_t)y * g1 + x) * C;
            for (int c = 0; c < C; c++)
                out[c] = (float)(wy[0] * row[c] + wy[1] * row[C + c] + wy[2] * row[2 * C + c] +
                                 wy[3] * row[3 * C + c]);
        }
    }
    free(row);
}
