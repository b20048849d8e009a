/* Permutes and block copies on the device: one thread per destination element (grid-stride), which
 * gathers its one source element, so the writes are coalesced and the backward needs no atomics. */
#include "common.cuh"
#include "shape.h"

/* dst (shape `shape`, nd dims) gets src[sum_k c_k stride[k]] at coordinates c */
struct gather_plan {
    int shape[5], nd;
    int64_t stride[5], n;
};

static __global__ void permute_kernel(float *dst, const float *src, const gather_plan p, int accumulate) {
    GRID_STRIDE_LOOP(i, p.n) {
        int64_t rem = i, off = 0;
        for (int k = p.nd - 1; k >= 0; k--) {
            off += (rem % p.shape[k]) * p.stride[k];
            rem /= p.shape[k];
        }
        if (accumulate) dst[i] += src[off];
        else dst[i] = src[off];
    }
}

static void permute_launch(float *dst, const float *src, const gather_plan &p, int accumulate) {
    if (p.n == 0) return;
    permute_kernel<<<flat_blocks(p.n), FLAT_THREADS>>>(dst, src, p, accumulate);
    CUDA_LAUNCHED();
}

/* the input's row-major strides */
static void input_strides(int nd, const int *in_shape, int64_t *stride, int64_t *n) {
    CHECK(nd >= 1 && nd <= 5, "cuda permute: %d dims (1 to 5)", nd);
    *n = 1;
    for (int d = nd - 1; d >= 0; d--) {
        stride[d] = *n;
        *n *= in_shape[d];
    }
}

/* the output walks its own shape, reading the input at the strides of the dims it took */
extern "C" void cuda_permute_forward(float *out, const float *in, int nd, const int *in_shape,
                                     const int *perm) {
    gather_plan p = {};
    int64_t in_stride[5];
    input_strides(nd, in_shape, in_stride, &p.n);
    p.nd = nd;
    for (int k = 0; k < nd; k++) {
        p.shape[k] = in_shape[perm[k]];
        p.stride[k] = in_stride[perm[k]];
    }
    permute_launch(out, in, p, 0);
}

/* the input's gradient walks the input's shape, reading gout where output dim k took input dim
 * perm[k] */
extern "C" void cuda_permute_backward(float *gin, const float *gout, int nd, const int *in_shape,
                                      const int *perm) {
    gather_plan p = {};
    int64_t in_stride[5];
    input_strides(nd, in_shape, in_stride, &p.n);
    p.nd = nd;
    int64_t acc = 1;
    for (int k = nd - 1; k >= 0; k--) {
        p.stride[perm[k]] = acc;
        acc *= in_shape[perm[k]];
    }
    for (int d = 0; d < nd; d++) p.shape[d] = in_shape[d];
    permute_launch(gin, gout, p, 1);
}

static __global__ void block_copy_kernel(float *dst, int64_t dst_len, const float *src, int64_t src_len,
                                         int64_t inner, int64_t dst_start, int64_t src_start,
                                         int64_t run, int64_t n, int accumulate) {
    GRID_STRIDE_LOOP(i, n) {
        const int64_t o = i / run, j = i % run;
        const float v = src[(o * src_len + src_start) * inner + j];
        float *d = dst + (o * dst_len + dst_start) * inner + j;
        if (accumulate) *d += v;
        else *d = v;
    }
}

extern "C" void cuda_block_copy(float *dst, int64_t dst_len, const float *src, int64_t src_len,
                                int64_t outer, int64_t inner, int64_t dst_start, int64_t src_start,
                                int64_t count, int accumulate) {
    const int64_t run = count * inner, n = outer * run;
    if (n == 0) return;
    block_copy_kernel<<<flat_blocks(n), FLAT_THREADS>>>(dst, dst_len, src, src_len, inner, dst_start,
                                                        src_start, run, n, accumulate);
    CUDA_LAUNCHED();
}
