/* Dropout and per-sample drop path (stochastic depth). The random draws are serial and in a fixed
 * order, so a seed gives the same mask whatever the thread count. */
#include "../core/check.h"
#include "../core/tape.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"

/* out = x * mask, mask saved (rows of `per` elements share one draw when per > 1) */
static tensor *masked(int id, tensor *x, float p, rng *r, int64_t groups) {
    CHECK(p >= 0 && p < 1, "%s: probability %g outside [0, 1)", op_table[id].name, p);
    if (p == 0) return x;
    CHECK(r, "%s with p %g needs a random stream", op_table[id].name, p);
    tensor *mask = TENSOR((int)groups), *out = tensor_like(x);
    float keep = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < groups; i++) mask->data[i] = rng_uniform(r) >= p ? keep : 0.0f;
    int64_t per = x->numel / groups;
    const float *src = x->data, *m = mask->data;
    float *dst = out->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < x->numel; i++) dst[i] = src[i] * m[i / per];
    tape_node *n = tape_record(id, out, 1, (tensor *[]){x});
    if (n) n->saved[0] = mask;
    return out;
}

static void masked_backward(tape_node *n) {
    tensor *x = n->in[0], *mask = n->saved[0];
    if (!x->requires_grad) return;
    int64_t per = x->numel / mask->numel;
    float *gx = tensor_grad(x);
    const float *g = n->out->grad, *m = mask->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < x->numel; i++) gx[i] += g[i] * m[i / per];
}

tensor *op_dropout(tensor *x, float p, rng *r) { return masked(OP_DROPOUT, x, p, r, x->numel); }
tensor *op_drop_path(tensor *x, float p, rng *r) { return masked(OP_DROP_PATH, x, p, r, x->shape[0]); }
void op_dropout_backward(tape_node *n) { masked_backward(n); }
void op_drop_path_backward(tape_node *n) { masked_backward(n); }
