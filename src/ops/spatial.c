/* Token-layout ops for windowed attention: window partition/reverse (also CSwin stripes) with
 * Swin's cyclic shift fused in, relative-position-bias gather. */
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/spatial.h"
#include "backend.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

static tensor *window_partition_channels(tensor *x, int c0, int channels, int wh, int ww, int shift,
                                         bool out_bf16) {
    CHECK(x->ndim == 4 && wh >= 1 && ww >= 1 && x->shape[1] % wh == 0 && x->shape[2] % ww == 0,
          "window_partition: %dx%d windows do not tile %s (B, H, W, C)", wh, ww, SHAPE_STR(x));
    int B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    CHECK(c0 >= 0 && channels >= 1 && c0 + channels <= C, "window_partition: channels %d..%d of %s",
          c0, c0 + channels, SHAPE_STR(x));
    bool whole_map = wh == H && ww == W && shift % H == 0 && shift % W == 0;
    if (whole_map && channels == C) return RESHAPE(x, B, H * W, C);
    int shape[3] = {B * (H / wh) * (W / ww), wh * ww, channels};
    tensor *out = out_bf16 ? tensor_new_bf16(3, shape) : tensor_new(3, shape);
    /* bf16: the windows in fp32 in scratch, then rounded into out */
    float *windows = out_bf16 ? scratch_floats((size_t)out->numel) : out->data;
    kernels->window_copy_channels(windows, x->data + c0, C, B, H, W, channels, wh, ww, shift, true,
                                  false, 1.0f);
    if (out_bf16) {
        kernels->bf16_store(tensor_bf16(out), windows, out->numel);
        scratch_done(windows, (size_t)out->numel);
    }
    tape_node *n = tape_record(OP_WINDOW_PARTITION, out, 1, (tensor *[]){x});
    if (n) n->iarg[0] = wh, n->iarg[1] = ww, n->iarg[2] = shift, n->iarg[3] = c0;
    return out;
}

tensor *op_window_partition_channels(tensor *x, int c0, int channels, int wh, int ww, int shift) {
    return window_partition_channels(x, c0, channels, wh, ww, shift, false);
}

tensor *op_window_partition_channels_bf16(tensor *x, int c0, int channels, int wh, int ww, int shift) {
    return window_partition_channels(x, c0, channels, wh, ww, shift, op_keeps_bf16());
}

tensor *op_window_partition(tensor *x, int wh, int ww, int shift) {
    CHECK(x->ndim == 4, "window_partition: %s is not (B, H, W, C)", SHAPE_STR(x));
    return op_window_partition_channels(x, 0, x->shape[3], wh, ww, shift);
}

void op_window_partition_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (x->requires_grad)
        kernels->window_copy_channels(n->out->grad, tensor_grad(x) + n->iarg[3], x->shape[3], x->shape[0],
                             x->shape[1], x->shape[2], n->out->shape[2], n->iarg[0], n->iarg[1],
                             n->iarg[2], false, true, 1.0f);
}

tensor *op_window_reverse(tensor *x, int H, int W, int wh, int ww, int shift) {
    CHECK(x->ndim == 3 && wh >= 1 && ww >= 1 && H % wh == 0 && W % ww == 0 &&
              x->shape[1] == wh * ww && x->shape[0] % ((H / wh) * (W / ww)) == 0,
          "window_reverse: %s is not a batch of %dx%d windows of a %dx%d map", SHAPE_STR(x), wh,
          ww, H, W);
    int C = x->shape[2], B = x->shape[0] / ((H / wh) * (W / ww));
    if (wh == H && ww == W && shift % H == 0 && shift % W == 0) return RESHAPE(x, B, H, W, C);
    tensor *out = TENSOR(B, H, W, C);
    kernels->window_copy(x->data, out->data, B, H, W, C, wh, ww, shift, false, false, 1.0f);
    tape_node *n = tape_record(OP_WINDOW_REVERSE, out, 1, (tensor *[]){x});
    if (n) n->iarg[0] = wh, n->iarg[1] = ww, n->iarg[2] = shift;
    return out;
}

void op_window_reverse_backward(tape_node *n) {
    tensor *x = n->in[0], *out = n->out;
    if (!x->requires_grad) return;
    /* every window element is written: copied where x has no gradient yet, else added */
    float beta, *dx = tensor_grad_whole(x, &beta);
    kernels->window_copy(dx, out->grad, out->shape[0], out->shape[1], out->shape[2], out->shape[3],
                         n->iarg[0], n->iarg[1], n->iarg[2], true, beta != 0.0f, 1.0f);
}

tensor *op_relpos_gather(tensor *table, const int *index, int n) {
    CHECK(table->ndim == 2, "relpos_gather: table %s must be (T, heads)", SHAPE_STR(table));
    int T = table->shape[0], NH = table->shape[1];
    for (int64_t k = 0; k < (int64_t)n * n; k++)
        CHECK(index[k] >= 0 && index[k] < T, "relpos_gather: index[%lld] = %d outside the %d rows",
              (long long)k, index[k], T);
    const int *table_index = backend_constant(index, sizeof(int) * (size_t)n * n);
    tensor *out = TENSOR(NH, n, n);
    kernels->relpos_gather_forward(out->data, table->data, table_index, NH, n);
    tape_node *node = tape_record(OP_RELPOS_GATHER, out, 1, (tensor *[]){table});
    if (node) node->ptr = table_index, node->iarg[0] = n;
    return out;
}

void op_relpos_gather_backward(tape_node *n) {
    tensor *table = n->in[0];
    if (table->requires_grad)
        kernels->relpos_gather_backward(tensor_grad(table), n->out->grad, n->ptr, table->shape[1], n->iarg[0]);
}
