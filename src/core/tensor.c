#include "tensor.h"

#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "check.h"
#include "memory.h"
#include "tape.h"

int64_t shape_numel(int ndim, const int *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

static tensor *new_tensor(int ndim, const int *shape, bool bf16) {
    CHECK(ndim >= 0 && ndim <= TENSOR_MAX_DIMS, "tensor with %d dims (at most %d)", ndim,
          TENSOR_MAX_DIMS);
    tensor *t = arena_alloc_small(&vitc_arena, sizeof(tensor));
    memset(t, 0, sizeof(*t));
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        CHECK(shape[i] > 0, "tensor dim %d has size %d", i, shape[i]);
        t->shape[i] = shape[i];
    }
    t->numel = shape_numel(ndim, shape);
    t->bf16 = bf16;
    t->data = arena_alloc(vitc_data_arena(), tensor_data_bytes(t));
    t->dev = vitc_device();
    return t;
}

tensor *tensor_new(int ndim, const int *shape) { return new_tensor(ndim, shape, false); }
tensor *tensor_new_bf16(int ndim, const int *shape) { return new_tensor(ndim, shape, true); }

size_t tensor_data_bytes(const tensor *t) {
    return (size_t)t->numel * (t->bf16 ? sizeof(uint16_t) : sizeof(float));
}

tensor *tensor_zeros(int ndim, const int *shape) {
    tensor *t = tensor_new(ndim, shape);
    vitc_memory()->zero(t->data, tensor_data_bytes(t));
    return t;
}

tensor *tensor_like(const tensor *t) { return tensor_new(t->ndim, t->shape); }

tensor *tensor_view(const tensor *x, int ndim, const int *shape) {
    CHECK(ndim >= 1 && ndim <= TENSOR_MAX_DIMS, "view with %d dims (at most %d)", ndim,
          TENSOR_MAX_DIMS);
    CHECK(shape_numel(ndim, shape) == x->numel, "cannot view %s (%lld elements) with %d dims of "
          "%lld elements", SHAPE_STR(x), (long long)x->numel, ndim,
          (long long)shape_numel(ndim, shape));
    tensor *t = arena_alloc_small(&vitc_arena, sizeof(tensor));
    memset(t, 0, sizeof(*t));
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = x->numel;
    t->bf16 = x->bf16;
    t->data = x->data;
    t->dev = x->dev;
    return t;
}

tensor *tensor_wrap(float *data, int ndim, const int *shape) {
    CHECK(ndim >= 1 && ndim <= TENSOR_MAX_DIMS, "wrap with %d dims", ndim);
    tensor *t = arena_alloc_small(&vitc_arena, sizeof(tensor));
    memset(t, 0, sizeof(*t));
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = shape_numel(ndim, shape);
    t->data = data;
    t->dev = vitc_device();
    return t;
}

tensor *tensor_keep(const arena_mark *m, tensor *x) {
    if (tape_grad_enabled()) return x;
    tensor copy = *x;
    copy.data = arena_keep(&vitc_arena, *m, x->data, tensor_data_bytes(x));
    tensor *t = arena_alloc_small(&vitc_arena, sizeof(tensor));
    *t = copy;
    return t;
}

/* the input of the reshape that made t, where t's gradient can be that input's; else NULL */
static const tensor *grad_sharer(const tensor *t) {
    const tensor *base = t->view_of;
    return base && base->grad && !base->grad_bf16 ? base : NULL;
}

float *tensor_grad(tensor *t) {
    CHECK(!t->grad_bf16, "the gradient of %s is kept in bf16: it cannot be read as floats",
          SHAPE_STR(t));
    if (!t->grad && grad_sharer(t)) t->grad = grad_sharer(t)->grad;
    if (!t->grad) t->grad = arena_calloc_spare(vitc_data_arena(), (size_t)t->numel * sizeof(float));
    return t->grad;
}

float *tensor_grad_whole(tensor *t, float *beta) {
    bool fresh = !t->grad && !grad_sharer(t);
    *beta = fresh ? 0.0f : 1.0f;
    if (fresh) t->grad = arena_alloc_spare(vitc_data_arena(), (size_t)t->numel * sizeof(float));
    return tensor_grad(t);
}

uint16_t *tensor_grad_bf16(tensor *t) {
    CHECK(!t->grad, "a bf16 gradient for %s, which has a gradient already", SHAPE_STR(t));
    t->grad = arena_alloc_spare(vitc_data_arena(), (size_t)t->numel * sizeof(uint16_t));
    t->grad_bf16 = true;
    return (uint16_t *)t->grad;
}

size_t tensor_grad_bytes(const tensor *t) {
    return (size_t)t->numel * (t->grad_bf16 ? sizeof(uint16_t) : sizeof(float));
}

bool tensor_same_shape(const tensor *a, const tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

const char *tensor_shape_str(const tensor *t, char *buf, int len) {
    int n = snprintf(buf, len, "(");
    for (int i = 0; i < t->ndim && n < len; i++)
        n += snprintf(buf + n, len - n, i ? ", %d" : "%d", t->shape[i]);
    if (n < len) snprintf(buf + n, len - n, ")");
    return buf;
}

int tensor_dim(const tensor *t, int dim) {
    int d = dim < 0 ? dim + t->ndim : dim;
    CHECK(d >= 0 && d < t->ndim, "dim %d out of range for a tensor of shape %s", dim, SHAPE_STR(t));
    return d;
}

int64_t tensor_span(const tensor *t, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= t->shape[i];
    return n;
}
