#include "conv.h"

#include <string.h>

#include "../core/precision.h"
#include "bf16_store.h"
#include "gemm_bf16.h"
#include "matmul.h"
#include "simd.h"

/* The columns of a pixel are ordered (ky, kx, ci), each tap's channels a contiguous run of the
 * channels-last map: im2col and col2im copy runs (in nn.Conv2d's order (ci, ky, kx), one float at a
 * time, im2col took 60% as long as the bf16 product after it), and the weights are permuted to the
 * same order for the products. */

/* n floats of src (NULL: zeros) into cols or, rounded, cols16 from column `at` */
static inline void put_run(float *cols, uint16_t *cols16, size_t at, const float *src, int n) {
    if (cols16 && !src) memset(cols16 + at, 0, sizeof(uint16_t) * n);
    else if (cols16) bf16_round(cols16 + at, src, n);
    else /* (a loop: a stem's runs are 3 floats, too short for memcpy's call) */
        for (int i = 0; i < n; i++) cols[at + i] = src ? src[i] : 0.0f;
}

/* cols (P, K) for group gi, or where cols16 is given, cols16 (P, K) rounded to bf16 (the bf16
 * products read them as they are stored: half the bytes written, and no rounding as they pack).
 * With one group a kernel row inside the map is one run of kw taps' channels (a stem's 21 floats
 * instead of 7 runs of 3). */
static void im2col_as(float *cols, uint16_t *cols16, const float *x, const conv_geom *g, int gi) {
    int cg = g->Cin / g->groups, K = cg * g->kh * g->kw;
    int64_t P = (int64_t)g->B * g->Ho * g->Wo;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < P; p++) {
        int ox = (int)(p % g->Wo), oy = (int)(p / g->Wo % g->Ho), b = (int)(p / ((int64_t)g->Wo * g->Ho));
        int ix0 = ox * g->stride - g->pad;
        for (int ky = 0; ky < g->kh; ky++) {
            int iy = oy * g->stride - g->pad + ky;
            size_t at = (size_t)p * K + (size_t)ky * g->kw * cg;
            const float *row = x + ((int64_t)b * g->H + iy) * g->W * g->Cin + gi * cg;
            if (iy < 0 || iy >= g->H) {
                put_run(cols, cols16, at, NULL, g->kw * cg);
                continue;
            }
            if (g->groups == 1 && ix0 >= 0 && ix0 + g->kw <= g->W) {
                put_run(cols, cols16, at, row + (int64_t)ix0 * g->Cin, g->kw * cg);
                continue;
            }
            for (int kx = 0; kx < g->kw; kx++) {
                int ix = ix0 + kx;
                const float *src = ix >= 0 && ix < g->W ? row + (int64_t)ix * g->Cin : NULL;
                put_run(cols, cols16, at + (size_t)kx * cg, src, cg);
            }
        }
    }
}

static void im2col(float *cols, const float *x, const conv_geom *g, int gi) {
    im2col_as(cols, NULL, x, g, gi);
}

/* under bf16, the columns are rounded as they are cut where each tap's run of channels is a
 * vector's or more (a stem's 3 channels a tap ran 1.5-2x slower so) */
static bool columns_in_bf16(const conv_geom *g) {
    return vitc_precision() == PRECISION_BF16 && g->Cin / g->groups >= 16;
}

/* dx += col2im(dcols); parallel over images so no two threads touch the same pixel */
static void col2im(float *dx, const float *dcols, const conv_geom *g, int gi) {
    int cg = g->Cin / g->groups, K = cg * g->kh * g->kw;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < g->B; b++)
        for (int oy = 0; oy < g->Ho; oy++)
            for (int ox = 0; ox < g->Wo; ox++) {
                const float *row = dcols + (((int64_t)b * g->Ho + oy) * g->Wo + ox) * K;
                for (int ky = 0; ky < g->kh; ky++) {
                    int iy = oy * g->stride - g->pad + ky;
                    if (iy < 0 || iy >= g->H) continue;
                    for (int kx = 0; kx < g->kw; kx++) {
                        int ix = ox * g->stride - g->pad + kx;
                        if (ix < 0 || ix >= g->W) continue;
                        float *dst = dx + (((int64_t)b * g->H + iy) * g->W + ix) * g->Cin + gi * cg;
                        const float *src = row + (ky * g->kw + kx) * cg;
                        for (int ci = 0; ci < cg; ci++) dst[ci] += src[ci];
                    }
                }
            }
}

/* wc (Cout, kh, kw, cg) = w (Cout, cg, kh, kw): the weights in the columns' order */
static void weights_as_columns(float *wc, const float *w, const conv_geom *g) {
    int cg = g->Cin / g->groups, taps = g->kh * g->kw;
    for (int o = 0; o < g->Cout; o++)
        for (int ci = 0; ci < cg; ci++)
            for (int t = 0; t < taps; t++)
                wc[((size_t)o * taps + t) * cg + ci] = w[((size_t)o * cg + ci) * taps + t];
}

/* dw (Cout, cg, kh, kw) += dwc, a gradient in the columns' order */
static void add_columns_to_weights(float *dw, const float *dwc, const conv_geom *g) {
    int cg = g->Cin / g->groups, taps = g->kh * g->kw;
    for (int o = 0; o < g->Cout; o++)
        for (int ci = 0; ci < cg; ci++)
            for (int t = 0; t < taps; t++)
                dw[((size_t)o * cg + ci) * taps + t] += dwc[((size_t)o * taps + t) * cg + ci];
}

void conv2d_forward(float *out, const float *x, const float *w, const float *b, const conv_geom *g,
                    float *scratch) {
    int cg = g->Cin / g->groups, og = g->Cout / g->groups, K = cg * g->kh * g->kw;
    int64_t P = (int64_t)g->B * g->Ho * g->Wo;
    float *wp = scratch + P * K;
    weights_as_columns(wp, w, g);
    if (b) {
#pragma omp parallel for schedule(static)
        for (int64_t p = 0; p < P; p++) memcpy(out + p * g->Cout, b, sizeof(float) * g->Cout);
    }
    bool rounded = columns_in_bf16(g);
    for (int gi = 0; gi < g->groups; gi++) {
        /* out[:, group] (P, og) = cols (P, K) · W_g (og, K)ᵀ */
        const float *w_g = wp + (int64_t)gi * og * K;
        float beta = b ? 1.0f : 0.0f, *out_g = out + gi * og;
        if (rounded) {
            uint16_t *cols16 = (uint16_t *)scratch;
            im2col_as(NULL, cols16, x, g, gi);
            gemm_bf16_a16(false, true, (int)P, og, K, 1.0f, cols16, K, w_g, K, beta, out_g,
                          g->Cout, gemm_threads());
            continue;
        }
        im2col(scratch, x, g, gi);
        gemm_strided(false, true, (int)P, og, K, 1.0f, scratch, K, w_g, K, beta, out_g, g->Cout);
    }
}

void conv2d_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, const conv_geom *g, float *scratch) {
    int cg = g->Cin / g->groups, og = g->Cout / g->groups, K = cg * g->kh * g->kw;
    int64_t P = (int64_t)g->B * g->Ho * g->Wo;
    float *cols = scratch, *dcols = cols + P * K, *wp = dcols + P * K;
    float *dwp = wp + (size_t)g->Cout * K;
    if (dx) weights_as_columns(wp, w, g);
    for (int gi = 0; gi < g->groups; gi++) {
        if (dw && columns_in_bf16(g)) {
            uint16_t *cols16 = (uint16_t *)cols;
            im2col_as(NULL, cols16, x, g, gi);
            gemm_bf16_b16(true, og, K, (int)P, 1.0f, dout + gi * og, g->Cout, cols16, K, 0.0f,
                          dwp + (int64_t)gi * og * K, K, gemm_threads());
        } else if (dw) {
            im2col(cols, x, g, gi);
            /* dW_g (og, K) = dout_gᵀ (og, P) · cols (P, K), in the columns' order */
            gemm_strided(true, false, og, K, (int)P, 1.0f, dout + gi * og, g->Cout, cols, K, 0.0f,
                         dwp + (int64_t)gi * og * K, K);
        }
        if (dx) {
            /* dcols (P, K) = dout_g (P, og) · W_g (og, K) */
            gemm_strided(false, false, (int)P, K, og, 1.0f, dout + gi * og, g->Cout,
                         wp + (int64_t)gi * og * K, K, 0.0f, dcols, K);
            col2im(dx, dcols, g, gi);
        }
    }
    if (dw) add_columns_to_weights(dw, dwp, g);
    if (db) add_column_sums(db, dout, P, g->Cout);
}

/* wt (k*k, C) = the kernel of each channel c, w[c mod Cw], turned half a circle when `flipped`
 * (x's gradient is dout's conv with it), with its bias after it (C) when b */
static void spread_weights(float *wt, const float *w, const float *b, int C, int Cw, int kk,
                           bool flipped) {
    for (int c = 0; c < C; c++)
        for (int t = 0; t < kk; t++) wt[t * C + c] = w[(c % Cw) * kk + (flipped ? kk - 1 - t : t)];
    if (b)
        for (int c = 0; c < C; c++) wt[kk * C + c] = b[c % Cw];
}

/* the offset in pixels of pixel (y, xx) of image bi, whose H x W grid follows `lead` other tokens
 * (dwconv2d_forward) */
static inline int64_t grid_pixel(int64_t bi, int y, int xx, int H, int W, int lead) {
    return bi * (lead + (int64_t)H * W) + lead + (int64_t)y * W + xx;
}

/* The depthwise convs (the forward, and x's gradient: dout's conv with the kernel turned half a
 * circle) compute out(p) = bias + base(p) + sum over the taps t of wt(t) in(p + t), zero outside
 * the grid, in one of two loop orders, each the faster on its side of CONV_ROWS_MAX_C channels
 * (docs/performance.md, with AVX-512 and with AVX2):
 *   - up to it, a row of one block of VEC channels at a time (the machine's vector: with 16 lanes
 *     on AVX2 a 3 x 3 kernel's vectors took 18 of its 16 registers and lived on the stack), the
 *     block's k*k kernel vectors in registers across the row (a loop over so few channels inside
 *     each tap costs more than the tap);
 *   - above it, each pixel's channels in a loop inside each tap, whose bounds are checked once for
 *     all of them (rows of blocks read k rows of the map again for every block).
 * Pixel strides ldo (out, and base: out itself, or NULL for none) and ldi (in); the row kernels'
 * maps start at the image's first grid pixel, and are written for a constant k where inlined, so
 * that the taps' loops unroll. A pixel whose columns are inside for every tap skips their checks. */
#define CONV_ROWS_MAX_C 64

/* The taps of pixel (y, xx) inside the grid, in's pixels of stride ld: without sums, returns acc +
 * the sum over them of wk(t) in(y + ky - r, xx + kx - r) (the conv); with sums, adds g times the
 * same pixels into sums(t) (the weights' gradient) and returns acc. */
static inline __attribute__((always_inline)) vecf taps(vecf acc, const vecf *wk, vecf *sums,
                                                       vecf g, const float *in, int ld, int H,
                                                       int W, int y, int xx, int k, int n,
                                                       bool inside) {
    int r = k / 2;
#pragma GCC unroll 7
    for (int ky = 0; ky < k; ky++) {
        int iy = y + ky - r;
        if (iy < 0 || iy >= H) continue;
#pragma GCC unroll 7
        for (int kx = 0; kx < k; kx++) {
            int ix = xx + kx - r;
            if (!inside && (ix < 0 || ix >= W)) continue;
            vecf v = load_lanes(in + ((int64_t)iy * W + ix) * ld, n);
            if (sums)
                sums[ky * k + kx] += g * v;
            else
                acc += wk[ky * k + kx] * v;
        }
    }
    return acc;
}

static inline __attribute__((always_inline)) void
conv_row(float *out, const float *base, int ldo, const float *in, int ldi, const float *wt,
         const float *bias, int C, int H, int W, int y, int k, int c, int n) {
    int r = k / 2, kk = k * k;
    out += c, in += c, base = base ? base + c : NULL;
    vecf wk[DW_MAX_K * DW_MAX_K], b0 = bias ? load_lanes(bias + c, n) : (vecf){0};
#pragma GCC unroll 49
    for (int t = 0; t < kk; t++) wk[t] = load_lanes(wt + (size_t)t * C + c, n);
    for (int xx = 0; xx < W; xx++) {
        int64_t p = (int64_t)y * W + xx;
        vecf acc = base ? b0 + load_lanes(base + p * ldo, n) : b0;
        if (xx >= r && xx < W - r)
            acc = taps(acc, wk, NULL, (vecf){0}, in, ldi, H, W, y, xx, k, n, true);
        else
            acc = taps(acc, wk, NULL, (vecf){0}, in, ldi, H, W, y, xx, k, n, false);
        store_lanes(out + p * ldo, acc, n);
    }
}

static void conv_rows(float *out, const float *base, int ldo, const float *in, int ldi,
                      const float *wt, const float *bias, int C, int H, int W, int y, int k) {
    int c = 0;
    for (; c + VEC <= C; c += VEC) /* (n a constant: no test of it at every load) */
        if (k == 3)
            conv_row(out, base, ldo, in, ldi, wt, bias, C, H, W, y, 3, c, VEC);
        else if (k == 5)
            conv_row(out, base, ldo, in, ldi, wt, bias, C, H, W, y, 5, c, VEC);
        else
            conv_row(out, base, ldo, in, ldi, wt, bias, C, H, W, y, k, c, VEC);
    if (c < C) conv_row(out, base, ldo, in, ldi, wt, bias, C, H, W, y, k, c, C - c);
}

static void conv_pixel(float *o, const float *add, const float *in, int ldi, const float *wt,
                       const float *bias, int64_t bi, int H, int W, int lead, int y, int xx, int C,
                       int k) {
    int r = k / 2;
    for (int c = 0; c < C; c++) o[c] = (bias ? bias[c] : 0.0f) + (add ? add[c] : 0.0f);
    for (int ky = 0; ky < k; ky++) {
        int iy = y + ky - r;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < k; kx++) {
            int ix = xx + kx - r;
            if (ix < 0 || ix >= W) continue;
            const float *src = in + grid_pixel(bi, iy, ix, H, W, lead) * ldi;
            const float *wk = wt + (ky * k + kx) * C;
            for (int c = 0; c < C; c++) o[c] += wk[c] * src[c];
        }
    }
}

static void conv(float *out, const float *base, int ldo, const float *in, int ldi, const float *wt,
                 const float *bias, int B, int H, int W, int lead, int C, int k) {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)B * H; row++) {
        int64_t bi = row / H, first = grid_pixel(bi, 0, 0, H, W, lead);
        int y = (int)(row % H);
        if (C <= CONV_ROWS_MAX_C) {
            conv_rows(out + first * ldo, base ? base + first * ldo : NULL, ldo, in + first * ldi,
                      ldi, wt, bias, C, H, W, y, k);
            continue;
        }
        for (int xx = 0; xx < W; xx++) {
            int64_t p = grid_pixel(bi, y, xx, H, W, lead);
            conv_pixel(out + p * ldo, base ? base + p * ldo : NULL, in, ldi, wt, bias, bi, H, W,
                       lead, y, xx, C, k);
        }
    }
}

void dwconv2d_forward(float *out, const float *x, int xC, const float *w, const float *b,
                      const float *base, int B, int H, int W, int lead, int C, int Cw, int k,
                      float *wt) {
    spread_weights(wt, w, b, C, Cw, k * k, false);
    conv(out, base, C, x, xC, wt, b ? wt + k * k * C : NULL, B, H, W, lead, C, k);
}

/* One row of the weights' gradient for channels [c, c + n): dw(t) += dout(p) x(p + t) into pw (k*k
 * rows of C) and db += dout(p) into pb, the k*k sums in registers across the row (a pass that held
 * the kernel's vectors too, for x's gradient, ran out of registers at 5 x 5), as the row kernels
 * above */
static inline __attribute__((always_inline)) void
weight_grad_row(float *pw, float *pb, const float *g_map, const float *x_map, int xC, int C, int H,
                int W, int y, int k, int c, int n) {
    int r = k / 2, kk = k * k;
    g_map += c, x_map += c;
    vecf sums[DW_MAX_K * DW_MAX_K], bias_sum = load_lanes(pb + c, n);
#pragma GCC unroll 49
    for (int t = 0; t < kk; t++) sums[t] = load_lanes(pw + (size_t)t * C + c, n);
    for (int xx = 0; xx < W; xx++) {
        vecf g = load_lanes(g_map + ((int64_t)y * W + xx) * C, n);
        bias_sum += g;
        if (xx >= r && xx < W - r)
            taps((vecf){0}, NULL, sums, g, x_map, xC, H, W, y, xx, k, n, true);
        else
            taps((vecf){0}, NULL, sums, g, x_map, xC, H, W, y, xx, k, n, false);
    }
    store_lanes(pb + c, bias_sum, n);
#pragma GCC unroll 49
    for (int t = 0; t < kk; t++) store_lanes(pw + (size_t)t * C + c, sums[t], n);
}

static void weight_grad_rows(float *pw, float *pb, const float *g_map, const float *x_map, int xC,
                             int C, int H, int W, int y, int k) {
    int c = 0;
    for (; c + VEC <= C; c += VEC)
        if (k == 3)
            weight_grad_row(pw, pb, g_map, x_map, xC, C, H, W, y, 3, c, VEC);
        else if (k == 5)
            weight_grad_row(pw, pb, g_map, x_map, xC, C, H, W, y, 5, c, VEC);
        else
            weight_grad_row(pw, pb, g_map, x_map, xC, C, H, W, y, k, c, VEC);
    if (c < C) weight_grad_row(pw, pb, g_map, x_map, xC, C, H, W, y, k, c, C - c);
}

void dwconv2d_backward(float *dx, float dx_beta, float *dw, float *db, const float *dout,
                       const float *x, int xC, const float *w, int B, int H, int W, int lead,
                       int C, int Cw, int k, float *wt, float *partial) {
    int kk = k * k;
    if (dx) {
        spread_weights(wt, w, NULL, C, Cw, kk, true);
        conv(dx, dx_beta != 0.0f ? dx : NULL, xC, dout, C, wt, NULL, B, H, W, lead, C, k);
    }
    if (!dw && !db) return;
    /* fixed row chunks with their own partial sums, added in order: deterministic for any thread
     * count */
    int64_t rows = (int64_t)B * H, per = (rows + DW_CHUNKS - 1) / DW_CHUNKS;
    size_t stride = (size_t)(kk + 1) * C;
    memset(partial, 0, sizeof(float) * DW_CHUNKS * stride);
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < DW_CHUNKS; ch++) {
        float *pw = partial + ch * stride, *pb = pw + (size_t)kk * C;
        int64_t lo = ch * per, hi = lo + per < rows ? lo + per : rows;
        for (int64_t row = lo; row < hi; row++) {
            int64_t first = grid_pixel(row / H, 0, 0, H, W, lead);
            weight_grad_rows(pw, pb, dout + first * C, x + first * xC, xC, C, H, W, (int)(row % H),
                             k);
        }
    }
    for (int ch = 0; ch < DW_CHUNKS; ch++) {
        const float *pw = partial + ch * stride, *pb = pw + (size_t)kk * C;
        for (int c = 0; c < C; c++) {
            if (db) db[c % Cw] += pb[c];
            if (dw)
                for (int t = 0; t < kk; t++) dw[(c % Cw) * kk + t] += pw[t * C + c];
        }
    }
}

static inline int bin_start(int i, int in, int out) { return (int)((int64_t)i * in / out); }
static inline int bin_end(int i, int in, int out) {
    return (int)(((int64_t)(i + 1) * in + out - 1) / out);
}

void adaptive_avg_pool2d_forward(float *out, const float *x, int B, int H, int W, int lead, int C,
                                 int oh, int ow) {
#pragma omp parallel for schedule(static)
    for (int64_t cell = 0; cell < (int64_t)B * oh * ow; cell++) {
        int j = (int)(cell % ow), i = (int)(cell / ow % oh), b = (int)(cell / ((int64_t)ow * oh));
        int y0 = bin_start(i, H, oh), y1 = bin_end(i, H, oh);
        int x0 = bin_start(j, W, ow), x1 = bin_end(j, W, ow);
        float *o = out + cell * C;
        for (int c = 0; c < C; c++) o[c] = 0;
        for (int y = y0; y < y1; y++)
            for (int xx = x0; xx < x1; xx++) {
                const float *src = x + grid_pixel(b, y, xx, H, W, lead) * C;
                for (int c = 0; c < C; c++) o[c] += src[c];
            }
        float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
        for (int c = 0; c < C; c++) o[c] *= inv;
    }
}

void adaptive_avg_pool2d_backward(float *dx, const float *dout, int B, int H, int W, int lead,
                                  int C, int oh, int ow) {
    /* bins may overlap: one image per thread keeps the scatter race-free */
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                int y0 = bin_start(i, H, oh), y1 = bin_end(i, H, oh);
                int x0 = bin_start(j, W, ow), x1 = bin_end(j, W, ow);
                const float *g = dout + (((int64_t)b * oh + i) * ow + j) * C;
                float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                for (int y = y0; y < y1; y++)
                    for (int xx = x0; xx < x1; xx++) {
                        float *d = dx + grid_pixel(b, y, xx, H, W, lead) * C;
                        for (int c = 0; c < C; c++) d[c] += g[c] * inv;
                    }
            }
}

/* PyTorch's source index rule for align_corners=False: src = (o + 0.5) * in/out - 0.5, >= 0 */
static void interp_axis(int in, int out, int o, int *i0, int *i1, float *l1) {
    float src = ((float)in / (float)out) * ((float)o + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    *i0 = (int)src;
    if (*i0 > in - 1) *i0 = in - 1;
    *i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
    *l1 = src - (float)*i0;
}

/* the column taps of every output column, shared by all rows and planes */
#define COLUMN_TAPS(wi, wo)                                                                        \
    int x0s[wo], x1s[wo];                                                                          \
    float lxs[wo];                                                                                 \
    for (int ox = 0; ox < (wo); ox++) interp_axis((wi), (wo), ox, &x0s[ox], &x1s[ox], &lxs[ox])

void interp_bilinear_forward(float *out, const float *x, int P, int hi, int wi, int ho, int wo) {
    COLUMN_TAPS(wi, wo);
#pragma omp parallel for schedule(static)
    for (int p = 0; p < P; p++) {
        const float *src = x + (int64_t)p * hi * wi;
        float *dst = out + (int64_t)p * ho * wo;
        for (int oy = 0; oy < ho; oy++) {
            int y0, y1;
            float ly;
            interp_axis(hi, ho, oy, &y0, &y1, &ly);
            const float *r0 = src + y0 * wi, *r1 = src + y1 * wi;
            for (int ox = 0; ox < wo; ox++) {
                float lx = lxs[ox];
                int x0 = x0s[ox], x1 = x1s[ox];
                dst[oy * wo + ox] = (1 - ly) * ((1 - lx) * r0[x0] + lx * r0[x1]) +
                                    ly * ((1 - lx) * r1[x0] + lx * r1[x1]);
            }
        }
    }
}

void interp_bilinear_backward(float *dx, const float *dout, int P, int hi, int wi, int ho, int wo) {
    COLUMN_TAPS(wi, wo);
#pragma omp parallel for schedule(static)
    for (int p = 0; p < P; p++) {
        float *d = dx + (int64_t)p * hi * wi;
        const float *g = dout + (int64_t)p * ho * wo;
        for (int oy = 0; oy < ho; oy++) {
            int y0, y1;
            float ly;
            interp_axis(hi, ho, oy, &y0, &y1, &ly);
            for (int ox = 0; ox < wo; ox++) {
                int x0 = x0s[ox], x1 = x1s[ox];
                float lx = lxs[ox], v = g[oy * wo + ox];
                d[y0 * wi + x0] += (1 - ly) * (1 - lx) * v;
                d[y0 * wi + x1] += (1 - ly) * lx * v;
                d[y1 * wi + x0] += ly * (1 - lx) * v;
                d[y1 * wi + x1] += ly * lx * v;
            }
        }
    }
}
