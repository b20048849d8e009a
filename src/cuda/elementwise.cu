/* Elementwise kernels: broadcast binary ops, whose backward has each input element sum its own
 * preimage in a fixed order (no atomics), expand, scalar ops, copies and activations. The exact GELU
 * is x Φ(x) with Φ = normcdff (the CPU's Φ is a rational fit of the Mills ratio, to 4e-7). */
#include "common.cuh"
#include "elementwise.h"

/* a grid-stride kernel over n elements; nothing to launch when n is 0 */
template <typename... P, typename... A> static void launch_flat(void (*kernel)(P...), int64_t n, A... args) {
    if (n == 0) return;
    kernel<<<flat_blocks(n), FLAT_THREADS>>>(args...);
    CUDA_LAUNCHED();
}

/* ---- binary ops with broadcasting ---- */

static __device__ __forceinline__ float apply(binary_op op, float x, float y) {
    return op == BIN_ADD ? x + y : op == BIN_MUL ? x * y : x / y;
}

/* offsets into a and b of output element i: the cheap cases of the plan first */
static __device__ __forceinline__ void operand_offsets(const broadcast &bc, int64_t i, int64_t *ia,
                                                       int64_t *ib) {
    switch (bc.kind) {
    case BCAST_SAME: *ia = *ib = i; return;
    case BCAST_B_SUFFIX: *ia = i, *ib = i % bc.nb; return;
    case BCAST_A_SUFFIX: *ia = i % bc.na, *ib = i; return;
    case BCAST_B_ROWS: *ia = i, *ib = i / bc.out[4]; return;
    default: {
        int64_t oa = 0, ob = 0;
        for (int d = 4; d >= 0; d--) {
            int64_t c = i % bc.out[d];
            i /= bc.out[d];
            oa += c * bc.stride_a[d];
            ob += c * bc.stride_b[d];
        }
        *ia = oa, *ib = ob;
    }
    }
}

static __global__ void binary_forward_kernel(binary_op op, float *out, const float *a, const float *b,
                                             const broadcast bc) {
    GRID_STRIDE_LOOP(i, bc.n) {
        int64_t ia, ib;
        operand_offsets(bc, i, &ia, &ib);
        out[i] = apply(op, a[ia], b[ib]);
    }
}

extern "C" void cuda_binary_forward(binary_op op, float *out, const float *a, const float *b,
                                    const broadcast *bc) {
    launch_flat(binary_forward_kernel, bc->n, op, out, a, b, *bc);
}

/* d(x op y)/dx (which 0) or /dy (which 1) times g, with z = x op y */
static __device__ __forceinline__ float grad_term(binary_op op, int which, float g, float x, float y,
                                                  float z) {
    if (op == BIN_ADD) return g;
    if (op == BIN_MUL) return which == 0 ? g * y : g * x;
    return which == 0 ? g / y : -g * z / y;
}

static __global__ void binary_backward_same_kernel(binary_op op, float *ga, float *gb, const float *gout,
                                                   const float *a, const float *b, const float *out,
                                                   int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        if (ga) ga[i] += grad_term(op, 0, gout[i], a[i], b[i], out[i]);
        if (gb) gb[i] += grad_term(op, 1, gout[i], a[i], b[i], out[i]);
    }
}

/* The gradient of one operand (shape in5, padded) of an output of shape out5: each of its n_in
 * elements sums a term over the `count` output elements it was broadcast to, walking its free dims
 * (those where in5 is 1 and out5 is not) innermost first. stride_a/b locate the operands' values. */
struct reduce_plan {
    int in5[5], out5[5], free_dims[5], nfree;
    int64_t stride_out[5], stride_a[5], stride_b[5], count, n_in;
};

static reduce_plan make_reduce_plan(const int *in5, const int *out5) {
    reduce_plan p = {};
    p.count = p.n_in = 1;
    int64_t acc = 1;
    for (int d = 4; d >= 0; d--) {
        p.in5[d] = in5[d];
        p.out5[d] = out5[d];
        p.stride_out[d] = acc;
        acc *= out5[d];
        p.n_in *= in5[d];
        if (in5[d] != out5[d]) {
            p.free_dims[p.nfree++] = d;
            p.count *= out5[d];
        }
    }
    return p;
}

/* coordinates (in the output) of input element i: zero along the free dims */
static __device__ __forceinline__ void input_coords(const reduce_plan &p, int64_t i, int64_t *c) {
    for (int d = 4; d >= 0; d--) {
        c[d] = i % p.in5[d];
        i /= p.in5[d];
    }
}

/* the term of the j-th output element of the preimage whose other coordinates c holds */
static __device__ __forceinline__ float preimage_term(const reduce_plan &p, binary_op op, int which,
                                                      int64_t j, int64_t *c, const float *gout,
                                                      const float *a, const float *b, const float *out) {
    for (int k = 0; k < p.nfree; k++) {
        const int d = p.free_dims[k];
        c[d] = j % p.out5[d];
        j /= p.out5[d];
    }
    int64_t o = 0, ia = 0, ib = 0;
    for (int d = 0; d < 5; d++) {
        o += c[d] * p.stride_out[d];
        ia += c[d] * p.stride_a[d];
        ib += c[d] * p.stride_b[d];
    }
    if (op == BIN_ADD) return gout[o]; /* also the plain reduction, where a, b and out are NULL */
    return grad_term(op, which, gout[o], a[ia], b[ib], out[o]);
}

/* one thread per input element: for many elements with small or strided preimages */
static __global__ void reduce_thread_kernel(binary_op op, int which, float *g, const float *gout,
                                            const float *a, const float *b, const float *out,
                                            const reduce_plan p) {
    GRID_STRIDE_LOOP(i, p.n_in) {
        int64_t c[5];
        input_coords(p, i, c);
        double s = 0;
        for (int64_t j = 0; j < p.count; j++) s += preimage_term(p, op, which, j, c, gout, a, b, out);
        g[i] += (float)s;
    }
}

/* one block per input element: its threads stride the preimage, then a fixed-order block sum */
static __global__ void reduce_block_kernel(binary_op op, int which, float *g, const float *gout,
                                           const float *a, const float *b, const float *out,
                                           const reduce_plan p) {
    const int64_t i = blockIdx.x;
    int64_t c[5];
    input_coords(p, i, c);
    double s = 0;
    for (int64_t j = threadIdx.x; j < p.count; j += blockDim.x)
        s += preimage_term(p, op, which, j, c, gout, a, b, out);
    s = block_sum(s);
    if (threadIdx.x == 0) g[i] += (float)s;
}

static void reduce_launch(binary_op op, int which, float *g, const float *gout, const float *a,
                          const float *b, const float *out, const reduce_plan &p) {
    if (p.n_in == 0 || p.count == 0) return;
    /* a block per element pays when its preimage is long and either contiguous (its threads read
     * neighbours) or the elements are too few to fill the device one thread each */
    bool contiguous = p.nfree > 0 && p.stride_out[p.free_dims[0]] == 1;
    if (p.count >= 128 && (contiguous || p.n_in < 8192)) {
        reduce_block_kernel<<<row_blocks(p.n_in), ROW_THREADS>>>(op, which, g, gout, a, b, out, p);
        CUDA_LAUNCHED();
    } else {
        launch_flat(reduce_thread_kernel, p.n_in, op, which, g, gout, a, b, out, p);
    }
}

extern "C" void cuda_binary_backward(binary_op op, float *ga, float *gb, const float *gout, const float *a,
                                     const float *b, const float *out, const broadcast *bc) {
    if (bc->kind == BCAST_SAME) {
        launch_flat(binary_backward_same_kernel, bc->n, op, ga, gb, gout, a, b, out, bc->n);
        return;
    }
    for (int which = 0; which < 2; which++) {
        float *g = which == 0 ? ga : gb;
        if (!g) continue;
        const int64_t *stride = which == 0 ? bc->stride_a : bc->stride_b;
        int in5[5];
        for (int d = 0; d < 5; d++) in5[d] = stride[d] || bc->out[d] == 1 ? bc->out[d] : 1;
        reduce_plan p = make_reduce_plan(in5, bc->out);
        for (int d = 0; d < 5; d++) p.stride_a[d] = bc->stride_a[d], p.stride_b[d] = bc->stride_b[d];
        reduce_launch(op, which, g, gout, a, b, out, p);
    }
}

extern "C" void cuda_broadcast_reduce(float *g_in, const float *g_out, const int *in5, const int *out5) {
    reduce_launch(BIN_ADD, 0, g_in, g_out, NULL, NULL, NULL, make_reduce_plan(in5, out5));
}

struct expand_plan {
    int out5[5];
    int64_t stride[5], n; /* x's strides, 0 along the dims where it has size 1 */
};

static __global__ void expand_kernel(float *out, const float *x, const expand_plan p) {
    GRID_STRIDE_LOOP(i, p.n) {
        int64_t rem = i, off = 0;
        for (int d = 4; d >= 0; d--) {
            off += (rem % p.out5[d]) * p.stride[d];
            rem /= p.out5[d];
        }
        out[i] = x[off];
    }
}

extern "C" void cuda_expand_forward(float *out, const float *x, const int *in5, const int *out5) {
    expand_plan p;
    int64_t acc = 1;
    p.n = 1;
    for (int d = 4; d >= 0; d--) {
        p.out5[d] = out5[d];
        p.stride[d] = in5[d] == 1 ? 0 : acc;
        acc *= in5[d];
        p.n *= out5[d];
    }
    launch_flat(expand_kernel, p.n, out, x, p);
}

/* ---- copies and scalar ops ---- */

static __global__ void accumulate_kernel(float *dst, const float *src, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    dst[i] += src[i];
}

static __global__ void copy_kernel(float *dst, const float *src, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    dst[i] = src[i];
}

static __global__ void scale_kernel(float *out, const float *x, float s, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = s * x[i];
}

static __global__ void scale_backward_kernel(float *dx, const float *dout, float s, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    dx[i] += s * dout[i];
}

static __global__ void add_scalar_kernel(float *out, const float *x, float s, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = x[i] + s;
}

extern "C" void cuda_accumulate(float *dst, const float *src, int64_t n) {
    launch_flat(accumulate_kernel, n, dst, src, n);
}
extern "C" void cuda_copy_floats(float *dst, const float *src, int64_t n) {
    launch_flat(copy_kernel, n, dst, src, n);
}
extern "C" void cuda_scale_forward(float *out, const float *x, float s, int64_t n) {
    launch_flat(scale_kernel, n, out, x, s, n);
}
extern "C" void cuda_scale_backward(float *dx, const float *dout, float s, int64_t n) {
    launch_flat(scale_backward_kernel, n, dx, dout, s, n);
}
extern "C" void cuda_add_scalar_forward(float *out, const float *x, float s, int64_t n) {
    launch_flat(add_scalar_kernel, n, out, x, s, n);
}

/* ---- activations ---- */

static __device__ __forceinline__ float normal_pdf(float x) {
    return 0.3989422804f * expf(-0.5f * x * x);
}

static __global__ void gelu_forward_kernel(float *out, const float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = x[i] * normcdff(x[i]);
}

/* d/dx x Φ(x) = Φ(x) + x φ(x) */
static __global__ void gelu_backward_kernel(float *dx, const float *dout, const float *x,
                                            int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    dx[i] += dout[i] * (normcdff(x[i]) + x[i] * normal_pdf(x[i]));
}

static __global__ void gelu_value_and_slope_kernel(float *out, float *slope, const float *x,
                                                   int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        float v = x[i], cdf = normcdff(v);
        out[i] = v * cdf; /* read x first: out may be x */
        slope[i] = cdf + v * normal_pdf(v);
    }
}

static __global__ void gelu_bf16_value_and_slope_kernel(uint16_t *out, float *slope,
                                                        const uint16_t *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n) {
        float v = bf16_value(x[i]), cdf = normcdff(v);
        out[i] = bf16_bits(v * cdf);
        slope[i] = cdf + v * normal_pdf(v);
    }
}

static __global__ void relu_forward_kernel(float *out, const float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = x[i] > 0 ? x[i] : 0.0f;
}

static __global__ void relu_backward_kernel(float *dx, const float *dout, const float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    dx[i] += x[i] > 0 ? dout[i] : 0.0f;
}

/* torch: x itself above the threshold 20, where log1p(e^x) == x in float */
static __global__ void softplus_forward_kernel(float *out, const float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = x[i] > 20.0f ? x[i] : log1pf(expf(x[i]));
}

static __global__ void softplus_backward_kernel(float *dx, const float *dout, const float *x, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    dx[i] += x[i] > 20.0f ? dout[i] : dout[i] / (1.0f + expf(-x[i]));
}

/* p == 3 (FLatten's focusing power) is the exact cube, like torch's x ** 3 and the CPU */
static __global__ void pow_forward_kernel(float *out, const float *x, float p, int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    out[i] = p == 3.0f ? x[i] * x[i] * x[i] : powf(x[i], p);
}

static __global__ void pow_backward_kernel(float *dx, const float *dout, const float *x, float p,
                                           int64_t n) {
    GRID_STRIDE_LOOP(i, n)
    dx[i] += dout[i] * p * powf(x[i], p - 1.0f);
}

extern "C" void cuda_gelu_forward(float *out, const float *x, int64_t n) {
    launch_flat(gelu_forward_kernel, n, out, x, n);
}
extern "C" void cuda_gelu_backward(float *dx, const float *dout, const float *x, int64_t n) {
    launch_flat(gelu_backward_kernel, n, dx, dout, x, n);
}
extern "C" void cuda_gelu_value_and_slope(float *out, float *slope, const float *x, int64_t n) {
    launch_flat(gelu_value_and_slope_kernel, n, out, slope, x, n);
}
extern "C" void cuda_gelu_bf16_value_and_slope(uint16_t *out, float *slope, const uint16_t *x,
                                               int64_t n) {
    launch_flat(gelu_bf16_value_and_slope_kernel, n, out, slope, x, n);
}
extern "C" void cuda_relu_forward(float *out, const float *x, int64_t n) {
    launch_flat(relu_forward_kernel, n, out, x, n);
}
extern "C" void cuda_relu_backward(float *dx, const float *dout, const float *x, int64_t n) {
    launch_flat(relu_backward_kernel, n, dx, dout, x, n);
}
extern "C" void cuda_softplus_forward(float *out, const float *x, int64_t n) {
    launch_flat(softplus_forward_kernel, n, out, x, n);
}
extern "C" void cuda_softplus_backward(float *dx, const float *dout, const float *x, int64_t n) {
    launch_flat(softplus_backward_kernel, n, dx, dout, x, n);
}
extern "C" void cuda_pow_forward(float *out, const float *x, float p, int64_t n) {
    launch_flat(pow_forward_kernel, n, out, x, p, n);
}
extern "C" void cuda_pow_backward(float *dx, const float *dout, const float *x, float p, int64_t n) {
    launch_flat(pow_backward_kernel, n, dx, dout, x, p, n);
}
