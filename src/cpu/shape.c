#include "shape.h"

#include <string.h>

/* shared walk: for every output row (all dims but the last) compute the input offset of its first
 * element; the last output dim steps through the input with stride `step` */
static void permute_plan(int nd, const int *in_shape, const int *perm, int *out_shape,
                         int64_t *in_stride_of_out) {
    int64_t stride[5], acc = 1;
    for (int d = nd - 1; d >= 0; d--) {
        stride[d] = acc;
        acc *= in_shape[d];
    }
    for (int k = 0; k < nd; k++) {
        out_shape[k] = in_shape[perm[k]];
        in_stride_of_out[k] = stride[perm[k]];
    }
}

#define PERMUTE_LOOP(BODY_CONTIG, BODY_STRIDED)                                                    \
    int out_shape[5] = {0};                                                                        \
    int64_t s[5] = {0};                                                                            \
    permute_plan(nd, in_shape, perm, out_shape, s);                                                \
    int64_t last = out_shape[nd - 1], step = s[nd - 1], rows = 1;                                  \
    for (int k = 0; k < nd - 1; k++) rows *= out_shape[k];                                         \
    _Pragma("omp parallel for schedule(static)") for (int64_t r = 0; r < rows; r++) {              \
        int64_t rem = r, base = 0;                                                                 \
        for (int k = nd - 2; k >= 0; k--) {                                                        \
            base += (rem % out_shape[k]) * s[k];                                                   \
            rem /= out_shape[k];                                                                   \
        }                                                                                          \
        int64_t o = r * last;                                                                      \
        if (step == 1) {                                                                           \
            BODY_CONTIG;                                                                           \
        } else {                                                                                   \
            for (int64_t j = 0; j < last; j++) { BODY_STRIDED; }                                   \
        }                                                                                          \
    }

void permute_forward(float *out, const float *in, int nd, const int *in_shape, const int *perm) {
    PERMUTE_LOOP(memcpy(out + o, in + base, (size_t)last * sizeof(float)),
                 out[o + j] = in[base + j * step])
}

void permute_backward(float *gin, const float *gout, int nd, const int *in_shape, const int *perm) {
    PERMUTE_LOOP(for (int64_t j = 0; j < last; j++) gin[base + j] += gout[o + j],
                 gin[base + j * step] += gout[o + j])
}

void block_copy(float *dst, int64_t dst_len, const float *src, int64_t src_len, int64_t outer,
                int64_t inner, int64_t dst_start, int64_t src_start, int64_t count, int accumulate) {
    int64_t run = count * inner;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        float *d = dst + (o * dst_len + dst_start) * inner;
        const float *s = src + (o * src_len + src_start) * inner;
        if (accumulate)
            for (int64_t j = 0; j < run; j++) d[j] += s[j];
        else
            memcpy(d, s, (size_t)run * sizeof(float));
    }
}
