#include "image.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>

#include "../core/check.h"
#include "data.h"

unsigned char *image_load(const char *path, int channels, int *w, int *h, char *err, size_t err_len) {
    int n;
    unsigned char *px = stbi_load(path, w, h, &n, channels);
    if (!px) { /* stb_image says "can't fopen" for a file it cannot open: the system says why */
        FILE *f = fopen(path, "rb");
        if (!f) {
            snprintf(err, err_len, "%s: %s", path, strerror(errno));
            return NULL;
        }
        fclose(f);
        snprintf(err, err_len, "%s: cannot decode (%s)", path, stbi_failure_reason());
        return NULL;
    }
    return px;
}

static double filter_weight(resample_filter f, double x) {
    x = fabs(x);
    if (f == FILTER_BILINEAR) return x < 1 ? 1 - x : 0;
    const double a = -0.5; /* Pillow's bicubic */
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0;
}

/* per output index: first input index, count and normalised weights (Pillow's precompute_coeffs) */
typedef struct coeffs {
    int *start, *count, max_count;
    double *w;
} coeffs;

static coeffs make_coeffs(int in, double x0, double span, int out, resample_filter f) {
    double scale = span / out, fscale = scale > 1 ? scale : 1;
    double support = (f == FILTER_BILINEAR ? 1.0 : 2.0) * fscale;
    coeffs c;
    c.max_count = (int)ceil(support) * 2 + 1;
    c.start = xmalloc(sizeof(int) * (size_t)out);
    c.count = xmalloc(sizeof(int) * (size_t)out);
    c.w = xmalloc(sizeof(double) * (size_t)out * c.max_count);
    for (int i = 0; i < out; i++) {
        double center = x0 + (i + 0.5) * scale;
        int lo = (int)floor(center - support + 0.5), hi = (int)floor(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        if (hi - lo > c.max_count) hi = lo + c.max_count;
        double total = 0, *w = c.w + (size_t)i * c.max_count;
        for (int j = lo; j < hi; j++) total += w[j - lo] = filter_weight(f, (j - center + 0.5) / fscale);
        for (int j = lo; j < hi; j++) w[j - lo] = total != 0 ? w[j - lo] / total : 0;
        if (hi <= lo) { /* region outside the image: nearest edge pixel */
            lo = center < 0 ? 0 : in - 1;
            hi = lo + 1;
            w[0] = 1;
        }
        c.start[i] = lo;
        c.count[i] = hi - lo;
    }
    return c;
}

static void free_coeffs(coeffs *c) {
    free(c->start);
    free(c->count);
    free(c->w);
}

static uint8_t clamp_u8(double v) { return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)(v + 0.5); }

void image_resize_region(const image *src, double x0, double y0, double rw, double rh, image *dst,
                         resample_filter f) {
    int C = src->c;
    coeffs cx = make_coeffs(src->w, x0, rw, dst->w, f), cy = make_coeffs(src->h, y0, rh, dst->h, f);
    /* horizontal pass over the rows the vertical pass needs, kept in float */
    int ylo = src->h, yhi = 0;
    for (int i = 0; i < dst->h; i++) {
        if (cy.start[i] < ylo) ylo = cy.start[i];
        if (cy.start[i] + cy.count[i] > yhi) yhi = cy.start[i] + cy.count[i];
    }
    float *tmp = xmalloc(sizeof(float) * (size_t)(yhi - ylo) * dst->w * C);
    for (int y = ylo; y < yhi; y++)
        for (int x = 0; x < dst->w; x++)
            for (int c = 0; c < C; c++) {
                double s = 0;
                const double *w = cx.w + (size_t)x * cx.max_count;
                for (int k = 0; k < cx.count[x]; k++)
                    s += w[k] * src->px[((size_t)y * src->w + cx.start[x] + k) * C + c];
                /* Pillow rounds to 8 bits between the passes */
                tmp[((size_t)(y - ylo) * dst->w + x) * C + c] = clamp_u8(s);
            }
    for (int y = 0; y < dst->h; y++)
        for (int x = 0; x < dst->w; x++)
            for (int c = 0; c < C; c++) {
                double s = 0;
                const double *w = cy.w + (size_t)y * cy.max_count;
                for (int k = 0; k < cy.count[y]; k++)
                    s += w[k] * tmp[((size_t)(cy.start[y] + k - ylo) * dst->w + x) * C + c];
                dst->px[((size_t)y * dst->w + x) * C + c] = clamp_u8(s);
            }
    free(tmp);
    free_coeffs(&cx);
    free_coeffs(&cy);
}

void image_affine(const image *src, image *dst, const double m[6], const uint8_t *fill) {
    int C = src->c;
    for (int y = 0; y < dst->h; y++)
        for (int x = 0; x < dst->w; x++) {
            /* Pillow maps output pixel centres through the matrix */
            double sx = m[0] * (x + 0.5) + m[1] * (y + 0.5) + m[2] - 0.5;
            double sy = m[3] * (x + 0.5) + m[4] * (y + 0.5) + m[5] - 0.5;
            uint8_t *o = dst->px + ((size_t)y * dst->w + x) * C;
            if (sx < -0.5 || sy < -0.5 || sx > src->w - 0.5 || sy > src->h - 0.5) {
                for (int c = 0; c < C; c++) o[c] = fill[c];
                continue;
            }
            int ix = (int)floor(sx), iy = (int)floor(sy);
            double fx = sx - ix, fy = sy - iy;
            for (int c = 0; c < C; c++) {
                double v = 0;
                for (int dy = 0; dy < 2; dy++)
                    for (int dx = 0; dx < 2; dx++) {
                        int px = ix + dx < 0 ? 0 : ix + dx >= src->w ? src->w - 1 : ix + dx;
                        int py = iy + dy < 0 ? 0 : iy + dy >= src->h ? src->h - 1 : iy + dy;
                        v += (dx ? fx : 1 - fx) * (dy ? fy : 1 - fy) * src->px[((size_t)py * src->w + px) * C + c];
                    }
                o[c] = clamp_u8(v);
            }
        }
}
