/* The convolution family on the device: im2col/col2im around cuBLAS for conv2d, direct kernels for
 * the depthwise conv, pooling and bilinear resize. Each backward gathers: one thread owns one
 * gradient element and adds its terms in the order the CPU adds them. */
#include "common.cuh"
#include "conv.h"
#include "matmul.h"

/* ---- conv2d ---- */

/* out (P, Cout) rows = b */
static __global__ void bias_rows_kernel(float *out, const float *b, int64_t P, int N) {
    GRID_STRIDE_LOOP(i, P * N) out[i] = b[i % N];
}

/* cols (P, K) of group gi, K ordered (ci, ky, kx) like the weight's memory; 0 outside the map */
static __global__ void im2col_kernel(float *cols, const float *x, conv_geom g, int gi) {
    const int cg = g.Cin / g.groups, khw = g.kh * g.kw, K = cg * khw;
    GRID_STRIDE_LOOP(i, (int64_t)g.B * g.Ho * g.Wo * K) {
        const int64_t p = i / K;
        const int k = (int)(i % K), ci = k / khw, ky = k % khw / g.kw, kx = k % g.kw;
        const int ox = (int)(p % g.Wo), oy = (int)(p / g.Wo % g.Ho);
        const int64_t b = p / ((int64_t)g.Wo * g.Ho);
        const int iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
        cols[i] = iy < 0 || iy >= g.H || ix < 0 || ix >= g.W
                      ? 0.0f
                      : x[((b * g.H + iy) * g.W + ix) * g.Cin + gi * cg + ci];
    }
}

/* dx (channels of group gi) += the dcols entries of every output window covering the pixel, in
 * the CPU's order: outputs (oy, ox) ascending, that is taps (ky, kx) descending */
static __global__ void col2im_kernel(float *dx, const float *dcols, conv_geom g, int gi) {
    const int cg = g.Cin / g.groups, khw = g.kh * g.kw, K = cg * khw;
    GRID_STRIDE_LOOP(i, (int64_t)g.B * g.H * g.W * cg) {
        const int ci = (int)(i % cg), ix = (int)(i / cg % g.W), iy = (int)(i / cg / g.W % g.H);
        const int64_t b = i / ((int64_t)cg * g.W * g.H);
        float *d = dx + ((b * g.H + iy) * g.W + ix) * g.Cin + gi * cg + ci;
        float acc = *d;
        for (int ky = g.kh - 1; ky >= 0; ky--) {
            const int ty = iy + g.pad - ky, oy = ty / g.stride;
            if (ty < 0 || ty % g.stride || oy >= g.Ho) continue;
            for (int kx = g.kw - 1; kx >= 0; kx--) {
                const int tx = ix + g.pad - kx, ox = tx / g.stride;
                if (tx < 0 || tx % g.stride || ox >= g.Wo) continue;
                acc += dcols[((b * g.Ho + oy) * g.Wo + ox) * K + ci * khw + ky * g.kw + kx];
            }
        }
        *d = acc;
    }
}

static void im2col(float *cols, const float *x, const conv_geom *g, int gi) {
    const int64_t n = (int64_t)g->B * g->Ho * g->Wo * (g->Cin / g->groups) * g->kh * g->kw;
    im2col_kernel<<<flat_blocks(n), FLAT_THREADS>>>(cols, x, *g, gi);
    CUDA_LAUNCHED();
}

extern "C" void cuda_conv2d_forward(float *out, const float *x, const float *w, const float *b,
                                    const conv_geom *g, float *scratch) {
    const int cg = g->Cin / g->groups, og = g->Cout / g->groups, K = cg * g->kh * g->kw;
    const int64_t P = (int64_t)g->B * g->Ho * g->Wo;
    CHECK(P <= 2147483647, "CUDA conv2d: %lld output pixels exceed cuBLAS's int rows", (long long)P);
    if (b) {
        bias_rows_kernel<<<flat_blocks(P * g->Cout), FLAT_THREADS>>>(out, b, P, g->Cout);
        CUDA_LAUNCHED();
    }
    for (int gi = 0; gi < g->groups; gi++) {
        im2col(scratch, x, g, gi);
        /* out[:, group] (P, og) = cols (P, K) · W_g (og, K)ᵀ */
        cuda_gemm_strided(false, true, (int)P, og, K, 1.0f, scratch, K, w + (int64_t)gi * og * K, K,
                          b ? 1.0f : 0.0f, out + gi * og, g->Cout);
    }
}

extern "C" void cuda_conv2d_backward(float *dx, float *dw, float *db, const float *dout,
                                     const float *x, const float *w, const conv_geom *g,
                                     float *scratch) {
    const int cg = g->Cin / g->groups, og = g->Cout / g->groups, K = cg * g->kh * g->kw;
    const int64_t P = (int64_t)g->B * g->Ho * g->Wo;
    CHECK(P <= 2147483647, "CUDA conv2d: %lld output pixels exceed cuBLAS's int rows", (long long)P);
    float *cols = scratch, *dcols = scratch + P * K;
    for (int gi = 0; gi < g->groups; gi++) {
        if (dw) {
            im2col(cols, x, g, gi);
            /* dW_g (og, K) += dout_gᵀ (og, P) · cols (P, K) */
            cuda_gemm_strided(true, false, og, K, (int)P, 1.0f, dout + gi * og, g->Cout, cols, K,
                              1.0f, dw + (int64_t)gi * og * K, K);
        }
        if (dx) {
            /* dcols (P, K) = dout_g (P, og) · W_g (og, K) */
            cuda_gemm_strided(false, false, (int)P, K, og, 1.0f, dout + gi * og, g->Cout,
                              w + (int64_t)gi * og * K, K, 0.0f, dcols, K);
            const int64_t n = (int64_t)g->B * g->H * g->W * cg;
            col2im_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dx, dcols, *g, gi);
            CUDA_LAUNCHED();
        }
    }
    if (db) cuda_add_column_sums(db, dout, P, g->Cout);
}

/* ---- depthwise conv (stride 1, zero padding k/2; channel c takes kernel c mod Cw) ---- */

/* pixel (y, xx) of image bi, whose H x W grid follows `lead` other tokens (dwconv2d_forward) */
static __device__ int64_t grid_pixel(int64_t bi, int y, int xx, int H, int W, int lead) {
    return bi * (lead + (int64_t)H * W) + lead + (int64_t)y * W + xx;
}

static __global__ void dwconv2d_forward_kernel(float *out, const float *x, int xC, const float *w,
                                               const float *b, const float *base, int B, int H,
                                               int W, int lead, int C, int Cw, int k) {
    const int r = k / 2;
    GRID_STRIDE_LOOP(i, (int64_t)B * H * W * C) {
        const int c = (int)(i % C), xx = (int)(i / C % W), y = (int)(i / C / W % H);
        const int64_t bi = i / ((int64_t)C * W * H);
        const int64_t o_at = grid_pixel(bi, y, xx, H, W, lead) * C + c;
        const float *wk = w + (c % Cw) * k * k;
        float o = (b ? b[c % Cw] : 0.0f) + (base ? base[o_at] : 0.0f);
        for (int ky = 0; ky < k; ky++) {
            const int iy = y + ky - r;
            if (iy < 0 || iy >= H) continue;
            for (int kx = 0; kx < k; kx++) {
                const int ix = xx + kx - r;
                if (ix < 0 || ix >= W) continue;
                o += wk[ky * k + kx] * x[grid_pixel(bi, iy, ix, H, W, lead) * xC + c];
            }
        }
        out[o_at] = o;
    }
}

/* dx (pixel, c) = dx_beta dx + the taps' weights times the gradients of the outputs whose windows
 * cover it (dx_beta 0: dx unset, not read) */
static __global__ void dwconv2d_dx_kernel(float *dx, float dx_beta, const float *dout, int xC,
                                          const float *w, int B, int H, int W, int lead, int C,
                                          int Cw, int k) {
    const int r = k / 2;
    GRID_STRIDE_LOOP(i, (int64_t)B * H * W * C) {
        const int c = (int)(i % C), xx = (int)(i / C % W), y = (int)(i / C / W % H);
        const int64_t bi = i / ((int64_t)C * W * H), pixel = grid_pixel(bi, y, xx, H, W, lead);
        const float *wk = w + (c % Cw) * k * k;
        float d = dx_beta != 0.0f ? dx[pixel * xC + c] : 0.0f;
        for (int ky = 0; ky < k; ky++) {
            const int oy = y - ky + r;
            if (oy < 0 || oy >= H) continue;
            for (int kx = 0; kx < k; kx++) {
                const int ox = xx - kx + r;
                if (ox < 0 || ox >= W) continue;
                d += wk[ky * k + kx] * dout[grid_pixel(bi, oy, ox, H, W, lead) * C + c];
            }
        }
        dx[pixel * xC + c] = d;
    }
}

/* partial (chunk, t, c): chunk's rows' sum of dout · x at tap t (t == k*k: of dout, the bias's) */
static __global__ void dwconv2d_partial_kernel(float *partial, const float *dout, const float *x,
                                               int xC, int B, int H, int W, int lead, int C,
                                               int k) {
    const int r = k / 2, kk = k * k;
    const int64_t rows = (int64_t)B * H, per = (rows + DW_CHUNKS - 1) / DW_CHUNKS;
    GRID_STRIDE_LOOP(i, (int64_t)DW_CHUNKS * (kk + 1) * C) {
        const int c = (int)(i % C), t = (int)(i / C % (kk + 1)), ch = (int)(i / C / (kk + 1));
        const int ky = t / k, kx = t % k;
        const int64_t lo = ch * per, hi = lo + per < rows ? lo + per : rows;
        float acc = 0;
        for (int64_t row = lo; row < hi; row++) {
            const int64_t bi = row / H;
            const int y = (int)(row % H), iy = y + ky - r;
            if (t < kk && (iy < 0 || iy >= H)) continue;
            for (int xx = 0; xx < W; xx++) {
                const float g = dout[grid_pixel(bi, y, xx, H, W, lead) * C + c];
                if (t == kk) {
                    acc += g;
                    continue;
                }
                const int ix = xx + kx - r;
                if (ix < 0 || ix >= W) continue;
                acc += g * x[grid_pixel(bi, iy, ix, H, W, lead) * xC + c];
            }
        }
        partial[i] = acc;
    }
}

/* dw (Cw, k*k) and db (Cw) += the chunks' partial sums in chunk order, channels c ≡ cw mod Cw in
 * order within a chunk (the CPU's order) */
static __global__ void dwconv2d_reduce_kernel(float *dw, float *db, const float *partial, int C,
                                              int Cw, int k) {
    const int kk = k * k;
    GRID_STRIDE_LOOP(i, (int64_t)Cw * (kk + 1)) {
        const int t = (int)(i % (kk + 1)), cw = (int)(i / (kk + 1));
        float *dst = t < kk ? (dw ? dw + cw * kk + t : NULL) : db ? db + cw : NULL;
        if (!dst) continue;
        float acc = *dst;
        for (int ch = 0; ch < DW_CHUNKS; ch++)
            for (int c = cw; c < C; c += Cw) acc += partial[((int64_t)ch * (kk + 1) + t) * C + c];
        *dst = acc;
    }
}

extern "C" void cuda_dwconv2d_forward(float *out, const float *x, int xC, const float *w,
                                      const float *b, const float *base, int B, int H, int W,
                                      int lead, int C, int Cw, int k, float *wt) {
    (void)wt; /* the CPU's contiguous copy of the weights; each thread reads its channel's here */
    const int64_t n = (int64_t)B * H * W * C;
    if (n == 0) return;
    dwconv2d_forward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, x, xC, w, b, base, B, H, W,
                                                               lead, C, Cw, k);
    CUDA_LAUNCHED();
}

extern "C" void cuda_dwconv2d_backward(float *dx, float dx_beta, float *dw, float *db,
                                       const float *dout, const float *x, int xC, const float *w,
                                       int B, int H, int W, int lead, int C, int Cw, int k,
                                       float *wt, float *partial) {
    (void)wt;
    const int64_t n = (int64_t)B * H * W * C;
    if (n == 0) return;
    if (dx) {
        dwconv2d_dx_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dx, dx_beta, dout, xC, w, B, H, W,
                                                             lead, C, Cw, k);
        CUDA_LAUNCHED();
    }
    if (!dw && !db) return;
    const int64_t n_partial = (int64_t)DW_CHUNKS * (k * k + 1) * C;
    dwconv2d_partial_kernel<<<flat_blocks(n_partial), FLAT_THREADS>>>(partial, dout, x, xC, B, H,
                                                                       W, lead, C, k);
    CUDA_LAUNCHED();
    const int64_t n_out = (int64_t)Cw * (k * k + 1);
    dwconv2d_reduce_kernel<<<flat_blocks(n_out), FLAT_THREADS>>>(dw, db, partial, C, Cw, k);
    CUDA_LAUNCHED();
}

/* ---- adaptive average pooling: bins [floor(i*H/oh), ceil((i+1)*H/oh)) ---- */

static __device__ int bin_start(int i, int in, int out) { return (int)((int64_t)i * in / out); }
static __device__ int bin_end(int i, int in, int out) {
    return (int)(((int64_t)(i + 1) * in + out - 1) / out);
}

static __global__ void pool_forward_kernel(float *out, const float *x, int B, int H, int W,
                                           int lead, int C, int oh, int ow) {
    GRID_STRIDE_LOOP(i, (int64_t)B * oh * ow * C) {
        const int c = (int)(i % C), j = (int)(i / C % ow), r = (int)(i / C / ow % oh);
        const int64_t b = i / ((int64_t)C * ow * oh);
        const int y0 = bin_start(r, H, oh), y1 = bin_end(r, H, oh);
        const int x0 = bin_start(j, W, ow), x1 = bin_end(j, W, ow);
        float o = 0;
        for (int y = y0; y < y1; y++)
            for (int xx = x0; xx < x1; xx++) o += x[grid_pixel(b, y, xx, H, W, lead) * C + c];
        out[i] = o * (1.0f / (float)((y1 - y0) * (x1 - x0)));
    }
}

/* the bins covering position p of an axis of `in` cut into `out`: from floor(p out / in) to
 * floor(((p + 1) out - 1) / in) (bins may overlap) */
static __device__ void bins_of(int p, int in, int out, int *first, int *last) {
    *first = (int)((int64_t)p * out / in);
    *last = (int)(((int64_t)(p + 1) * out - 1) / in);
    if (*last > out - 1) *last = out - 1;
}

/* dx (pixel, c) += each covering bin's gradient over the bin's size, bins in (i, j) order */
static __global__ void pool_backward_kernel(float *dx, const float *dout, int B, int H, int W,
                                            int lead, int C, int oh, int ow) {
    GRID_STRIDE_LOOP(n, (int64_t)B * H * W * C) {
        const int c = (int)(n % C), xx = (int)(n / C % W), y = (int)(n / C / W % H);
        const int64_t b = n / ((int64_t)C * W * H);
        int i0, i1, j0, j1;
        bins_of(y, H, oh, &i0, &i1);
        bins_of(xx, W, ow, &j0, &j1);
        const int64_t at = grid_pixel(b, y, xx, H, W, lead) * C + c;
        float d = dx[at];
        for (int i = i0; i <= i1; i++) {
            const int y0 = bin_start(i, H, oh), y1 = bin_end(i, H, oh);
            for (int j = j0; j <= j1; j++) {
                const int x0 = bin_start(j, W, ow), x1 = bin_end(j, W, ow);
                const float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                d += dout[((b * oh + i) * ow + j) * C + c] * inv;
            }
        }
        dx[at] = d;
    }
}

extern "C" void cuda_adaptive_avg_pool2d_forward(float *out, const float *x, int B, int H, int W,
                                                 int lead, int C, int oh, int ow) {
    const int64_t n = (int64_t)B * oh * ow * C;
    if (n == 0) return;
    pool_forward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, x, B, H, W, lead, C, oh, ow);
    CUDA_LAUNCHED();
}

extern "C" void cuda_adaptive_avg_pool2d_backward(float *dx, const float *dout, int B, int H,
                                                  int W, int lead, int C, int oh, int ow) {
    const int64_t n = (int64_t)B * H * W * C;
    if (n == 0) return;
    pool_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dx, dout, B, H, W, lead, C, oh, ow);
    CUDA_LAUNCHED();
}

/* ---- bilinear resize of planes (align_corners=False) ---- */

/* PyTorch's source index rule for align_corners=False: src = (o + 0.5) * in/out - 0.5, >= 0 */
static __device__ void interp_axis(int in, int out, int o, int *i0, int *i1, float *l1) {
    float src = ((float)in / (float)out) * ((float)o + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    *i0 = (int)src;
    if (*i0 > in - 1) *i0 = in - 1;
    *i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
    *l1 = src - (float)*i0;
}

static __global__ void interp_forward_kernel(float *out, const float *x, int P, int hi, int wi,
                                             int ho, int wo) {
    GRID_STRIDE_LOOP(i, (int64_t)P * ho * wo) {
        const int ox = (int)(i % wo), oy = (int)(i / wo % ho);
        const float *src = x + i / ((int64_t)wo * ho) * hi * wi;
        int y0, y1, x0, x1;
        float ly, lx;
        interp_axis(hi, ho, oy, &y0, &y1, &ly);
        interp_axis(wi, wo, ox, &x0, &x1, &lx);
        const float *r0 = src + y0 * wi, *r1 = src + y1 * wi;
        out[i] = (1 - ly) * ((1 - lx) * r0[x0] + lx * r0[x1]) +
                 ly * ((1 - lx) * r1[x0] + lx * r1[x1]);
    }
}

/* the outputs o of an axis whose taps may reach input position p: those with a source index in
 * [p - 1, p + 1) (for p <= 1 also those clamped up from below 0), widened by one on each side
 * against rounding (the taps are tested exactly) */
static __device__ void outputs_near(int p, int in, int out, int *first, int *last) {
    const float scale = (float)out / (float)in;
    const int lo = (int)floorf(((float)p - 0.5f) * scale - 0.5f) - 1,
              hi = (int)ceilf(((float)p + 1.5f) * scale - 0.5f) + 1;
    *first = p <= 1 || lo < 0 ? 0 : lo;
    *last = hi > out - 1 ? out - 1 : hi;
}

/* dx (p, iy, ix) += the weighted gradients of the outputs that read it, in the CPU's order:
 * outputs (oy, ox) ascending, then the corners (y0, x0), (y0, x1), (y1, x0), (y1, x1) */
static __global__ void interp_backward_kernel(float *dx, const float *dout, int P, int hi, int wi,
                                              int ho, int wo) {
    GRID_STRIDE_LOOP(i, (int64_t)P * hi * wi) {
        const int ix = (int)(i % wi), iy = (int)(i / wi % hi);
        const float *g = dout + i / ((int64_t)wi * hi) * ho * wo;
        int oy0, oy1, ox0, ox1;
        outputs_near(iy, hi, ho, &oy0, &oy1);
        outputs_near(ix, wi, wo, &ox0, &ox1);
        float d = dx[i];
        for (int oy = oy0; oy <= oy1; oy++) {
            int y0, y1;
            float ly;
            interp_axis(hi, ho, oy, &y0, &y1, &ly);
            if (y0 != iy && y1 != iy) continue;
            for (int ox = ox0; ox <= ox1; ox++) {
                int x0, x1;
                float lx;
                interp_axis(wi, wo, ox, &x0, &x1, &lx);
                const float v = g[oy * wo + ox];
                if (y0 == iy && x0 == ix) d += (1 - ly) * (1 - lx) * v;
                if (y0 == iy && x1 == ix) d += (1 - ly) * lx * v;
                if (y1 == iy && x0 == ix) d += ly * (1 - lx) * v;
                if (y1 == iy && x1 == ix) d += ly * lx * v;
            }
        }
        dx[i] = d;
    }
}

extern "C" void cuda_interp_bilinear_forward(float *out, const float *x, int P, int hi, int wi,
                                             int ho, int wo) {
    const int64_t n = (int64_t)P * ho * wo;
    if (n == 0) return;
    interp_forward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(out, x, P, hi, wi, ho, wo);
    CUDA_LAUNCHED();
}

extern "C" void cuda_interp_bilinear_backward(float *dx, const float *dout, int P, int hi, int wi,
                                              int ho, int wo) {
    const int64_t n = (int64_t)P * hi * wi;
    if (n == 0) return;
    interp_backward_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dx, dout, P, hi, wi, ho, wo);
    CUDA_LAUNCHED();
}
