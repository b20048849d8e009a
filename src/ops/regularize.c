/* Dropout and the residual add with per-sample drop path (stochastic depth). The random draws are
 * serial and in a fixed order, so a seed gives the same mask whatever the thread count. */
#include "../core/check.h"
#include "../core/tape.h"
#include "../cpu/elementwise.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"

/* `groups` draws of keep (1/(1-p)) or 0 */
static tensor *draw_mask(int id, float p, rng *r, int64_t groups) {
    CHECK(r, "%s with p %g needs a random stream", op_table[id].name, p);
    tensor *mask = TENSOR((int)groups);
    float keep = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < groups; i++) mask->data[i] = rng_uniform(r) >= p ? keep : 0.0f;
    return mask;
}

tensor *op_dropout(tensor *x, float p, rng *r) {
    CHECK(p >= 0 && p < 1, "dropout: probability %g outside [0, 1)", p);
    if (p == 0) return x;
    tensor *mask = draw_mask(OP_DROPOUT, p, r, x->numel), *out = tensor_like(x);
    const float *src = x->data, *m = mask->data;
    float *dst = out->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < x->numel; i++) dst[i] = src[i] * m[i];
    tape_node *n = tape_record(OP_DROPOUT, out, 1, (tensor *[]){x});
    if (n) n->saved[0] = mask;
    return out;
}

void op_dropout_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (!x->requires_grad) return;
    float *gx = tensor_grad(x);
    const float *g = n->out->grad, *m = n->saved[0]->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < x->numel; i++) gx[i] += g[i] * m[i];
}

tensor *op_drop_path_add(tensor *x, tensor *y, float p, rng *r) {
    CHECK(p >= 0 && p < 1, "drop_path_add: probability %g outside [0, 1)", p);
    if (p == 0) return op_add(x, y);
    CHECK(tensor_same_shape(x, y), "drop_path_add: shapes %s and %s differ", SHAPE_STR(x), SHAPE_STR(y));
    int B = x->shape[0];
    int64_t per = x->numel / B;
    tensor *mask = draw_mask(OP_DROP_PATH_ADD, p, r, B), *out = tensor_like(x);
    const float *xs = x->data, *ys = y->data, *m = mask->data;
    float *dst = out->data;
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < B; s++)
        for (int64_t j = 0; j < per; j++) dst[s * per + j] = xs[s * per + j] + ys[s * per + j] * m[s];
    tape_node *n = tape_record(OP_DROP_PATH_ADD, out, 2, (tensor *[]){x, y});
    if (n) n->saved[0] = mask;
    return out;
}

void op_drop_path_add_backward(tape_node *n) {
    tensor *x = n->in[0], *y = n->in[1];
    const float *g = n->out->grad, *m = n->saved[0]->data;
    if (x->requires_grad) accumulate(tensor_grad(x), g, x->numel);
    if (!y->requires_grad) return;
    float *gy = tensor_grad(y);
    int B = y->shape[0];
    int64_t per = y->numel / B;
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < B; s++)
        for (int64_t j = 0; j < per; j++) gy[s * per + j] += g[s * per + j] * m[s];
}
