#include "grid_resample.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/check.h"
#include "../src/core/params.h"

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

void line_resample_linear(const float *src, int n0, float *dst, int n1, int outer, int inner,
                          bool corners_aligned) {
    for (int o = 0; o < n1; o++) {
        double real = corners_aligned ? (n1 > 1 ? (double)o * (n0 - 1) / (n1 - 1) : 0)
                                      : fmax(0.0, ((double)n0 / n1) * (o + 0.5) - 0.5);
        int i0 = (int)real, i1 = i0 < n0 - 1 ? i0 + 1 : i0;
        double t = real - i0;
        for (int l = 0; l < outer; l++) {
            const float *a = src + ((size_t)l * n0 + i0) * inner,
                        *b = src + ((size_t)l * n0 + i1) * inner;
            float *out = dst + ((size_t)l * n1 + o) * inner;
            for (int c = 0; c < inner; c++) out[c] = (float)((1 - t) * a[c] + t * b[c]);
        }
    }
}

/* DeiT's pos_embed and PVT v1's pos_embedN: a square grid of cells, after DeiT's class token */
static bool is_pos_embed(const char *name) {
    return !strncmp(name, "pos_embed", 9) &&
           (!name[9] || (isdigit((unsigned char)name[9]) && !name[10]));
}

/* the side of a square grid of n cells after at most `most` leading cells (their count in lead);
 * 0 where there is none */
static int grid_side(int64_t n, int most, int *lead) {
    int64_t g = (int64_t)sqrt((double)n);
    while (g * g > n) g--;
    while ((g + 1) * (g + 1) <= n) g++;
    *lead = (int)(n - g * g);
    return g >= 1 && *lead <= most ? (int)g : 0;
}

/* Agent attention's bias along the key grid's rows (ah), columns (aw), the query grid's rows (ha)
 * or columns (wa): which of its 5 axes runs along the grid; -1 for any other tensor */
static int agent_bias_axis(const char *name) {
    static const struct {
        const char *suffix;
        int axis;
    } biases[] = {{".ah_bias", 3}, {".aw_bias", 4}, {".ha_bias", 2}, {".wa_bias", 3}};
    for (size_t i = 0; i < sizeof(biases) / sizeof(biases[0]); i++)
        if (param_name_ends_with(name, biases[i].suffix)) return biases[i].axis;
    return -1;
}

bool grid_resize_plan(const char *name, int ndim, const int64_t *from, const int64_t *to,
                      resize_style style, grid_resize *r) {
    int grid_axis; /* the one axis whose size may differ */
    bool mediators = style == RESIZE_AS_MEDIATORS;
    *r = (grid_resize){.outer = 1, .inner = 1, .bicubic = true};
    if (!mediators && ndim == 3 &&
        (is_pos_embed(name) || param_name_ends_with(name, ".positional_encoding"))) {
        int most = is_pos_embed(name), lead0;
        grid_axis = 1;
        r->what = "position embeddings", r->inner = to[2];
        r->n0 = grid_side(from[1], most, &lead0);
        r->n1 = grid_side(to[1], most, &r->lead);
        if (lead0 != r->lead) return false;
    } else if (!mediators && ndim == 2 &&
               param_name_ends_with(name, ".relative_position_bias_table")) {
        int lead0;
        grid_axis = 0;
        r->what = "relative position bias tables", r->inner = to[1];
        r->n0 = grid_side(from[0], 0, &lead0);
        r->n1 = grid_side(to[0], 0, &r->lead);
    } else if (!mediators && ndim == 4 && strstr(name, "patch_embed") &&
               param_name_ends_with(name, ".proj.weight")) {
        if (from[2] != from[3] || to[2] != to[3] || from[0] != to[0] || from[1] != to[1])
            return false;
        r->what = "patch-embedding kernels", r->outer = to[0] * to[1];
        r->n0 = (int)from[2], r->n1 = (int)to[2];
        return r->n0 >= 1 && r->n1 >= 1;
    } else if (ndim == 5 && (grid_axis = agent_bias_axis(name)) >= 0) {
        r->what = "agent biases", r->bicubic = false, r->corners_aligned = mediators;
        r->n0 = (int)from[grid_axis], r->n1 = (int)to[grid_axis];
        for (int d = 0; d < grid_axis; d++) r->outer *= to[d];
        for (int d = grid_axis + 1; d < ndim; d++) r->inner *= to[d];
    } else {
        return false;
    }
    for (int d = 0; d < ndim; d++)
        if (d != grid_axis && from[d] != to[d]) return false;
    return r->n0 >= 1 && r->n1 >= 1;
}

void grid_resize_apply(const grid_resize *r, const float *src, float *dst) {
    size_t lead = (size_t)r->lead * (size_t)r->inner;
    memcpy(dst, src, sizeof(float) * lead);
    src += lead, dst += lead;
    if (!r->bicubic) {
        line_resample_linear(src, r->n0, dst, r->n1, (int)r->outer, (int)r->inner,
                             r->corners_aligned);
        return;
    }
    size_t cells0 = (size_t)r->n0 * r->n0 * r->inner, cells1 = (size_t)r->n1 * r->n1 * r->inner;
    for (int64_t l = 0; l < r->outer; l++)
        grid_resample_bicubic(src + l * cells0, r->n0, dst + l * cells1, r->n1, (int)r->inner);
}
