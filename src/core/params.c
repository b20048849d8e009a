#include "params.h"

#include <stdint.h>
#include <string.h>

#include "check.h"
#include "memory.h"

void params_init(param_store *ps) {
    memset(ps, 0, sizeof(*ps));
    ps->mem = &host_memory;
}

void params_free(param_store *ps) {
    for (int i = 0; i < ps->n; i++) {
        free((char *)ps->params[i]->name);
        free(ps->params[i]);
    }
    free(ps->params);
    free(ps->inits);
    if (ps->mem) ps->mem->free(ps->allocs[0]), ps->mem->free(ps->allocs[1]);
    memset(ps, 0, sizeof(*ps));
}

tensor *params_add(param_store *ps, const char *name, int ndim, const int *shape) {
    CHECK(!ps->data, "parameter %s declared after the store was finalized", name);
    CHECK(!params_find(ps, name), "parameter %s declared twice", name);
    CHECK(ndim >= 1 && ndim <= TENSOR_MAX_DIMS, "parameter %s has %d dims", name, ndim);
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 64;
        ps->params = xrealloc(ps->params, (size_t)ps->cap * sizeof(tensor *));
        ps->inits = xrealloc(ps->inits, (size_t)ps->cap * sizeof(param_init));
    }
    ps->inits[ps->n] = (param_init){INIT_ZEROS, 0};
    tensor *t = xcalloc(1, sizeof(tensor));
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        CHECK(shape[i] > 0, "parameter %s has dim %d of size %d", name, i, shape[i]);
        t->shape[i] = shape[i];
    }
    t->numel = shape_numel(ndim, shape);
    t->requires_grad = true;
    size_t len = strlen(name) + 1;
    t->name = memcpy(xmalloc(len), name, len);
    ps->params[ps->n++] = t;
    ps->numel += t->numel;
    return t;
}

static int64_t on_line(int64_t floats) {
    return (floats + PARAM_LINE_FLOATS - 1) / PARAM_LINE_FLOATS * PARAM_LINE_FLOATS;
}

/* points every parameter into the blocks, in declaration order, each from a line */
static void rebase(param_store *ps) {
    int64_t off = 0;
    for (int i = 0; i < ps->n; i++) {
        ps->params[i]->data = ps->data + off;
        ps->params[i]->grad = ps->grad + off;
        ps->params[i]->dev = ps->mem->dev;
        off += on_line(ps->params[i]->numel);
    }
}

/* `floats` zeros from the first cache line of a calloc'd block (*alloc): its pages stay untouched
 * until written, so the gradient block of a model that only infers costs no memory */
static float *zeros_on_line(size_t floats, void **alloc) {
    const size_t line = PARAM_LINE_FLOATS * sizeof(float);
    char *p = xcalloc(floats + PARAM_LINE_FLOATS, sizeof(float));
    *alloc = p;
    return (float *)(p + (line - (uintptr_t)p % line) % line);
}

void params_finalize(param_store *ps) {
    CHECK(!ps->data, "param store finalized twice");
    ps->span = 0;
    for (int i = 0; i < ps->n; i++) ps->span += on_line(ps->params[i]->numel);
    ps->data = zeros_on_line((size_t)ps->span, &ps->allocs[0]);
    ps->grad = zeros_on_line((size_t)ps->span, &ps->allocs[1]);
    rebase(ps);
}

void params_zero_grad(param_store *ps) {
    ps->mem->zero(ps->grad, (size_t)ps->span * sizeof(float));
}

void params_to_device(param_store *ps) {
    const memory_ops *to = vitc_memory();
    CHECK(ps->data, "params_to_device before params_finalize");
    if (to == ps->mem) return;
    CHECK(ps->mem == &host_memory, "parameters on %s cannot move to %s", ps->mem->name, to->name);
    size_t bytes = sizeof(float) * (size_t)ps->span;
    float *data = to->alloc(bytes), *grad = to->alloc(bytes);
    to->from_host(data, ps->data, bytes);
    to->zero(grad, bytes);
    ps->mem->free(ps->allocs[0]);
    ps->mem->free(ps->allocs[1]);
    ps->data = ps->allocs[0] = data, ps->grad = ps->allocs[1] = grad, ps->mem = to;
    rebase(ps);
}

const float *params_read(const param_store *ps, float *host, const float *src, int64_t n) {
    if (ps->mem == &host_memory) return src;
    ps->mem->to_host(host, src, sizeof(float) * (size_t)n);
    return host;
}

void params_write(const param_store *ps, float *dst, const float *host, int64_t n) {
    if (dst != host) ps->mem->from_host(dst, host, sizeof(float) * (size_t)n);
}

tensor *params_find(const param_store *ps, const char *name) {
    for (int i = 0; i < ps->n; i++)
        if (strcmp(ps->params[i]->name, name) == 0) return ps->params[i];
    return NULL;
}

bool param_name_ends_with(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && !strcmp(name + n - k, suffix);
}

void params_set_init(param_store *ps, const tensor *t, init_kind kind, float a) {
    for (int i = 0; i < ps->n; i++)
        if (ps->params[i] == t) {
            ps->inits[i] = (param_init){kind, a};
            return;
        }
    FATAL("params_set_init: %s is not in this store", t->name);
}

void params_init_values(param_store *ps, rng *r) {
    CHECK(ps->data, "params_init_values before params_finalize");
    CHECK(ps->mem == &host_memory, "params_init_values: the parameters are on %s already", ps->mem->name);
    for (int i = 0; i < ps->n; i++) {
        tensor *t = ps->params[i];
        param_init in = ps->inits[i];
        for (int64_t j = 0; j < t->numel; j++) {
            switch (in.kind) {
            case INIT_ZEROS: t->data[j] = 0; break;
            case INIT_ONES: t->data[j] = 1; break;
            case INIT_TRUNC_NORMAL: t->data[j] = rng_trunc_normal(r, in.a, -2.0f, 2.0f); break;
            case INIT_UNIFORM: t->data[j] = in.a * (2 * rng_uniform(r) - 1); break;
            }
        }
    }
}
