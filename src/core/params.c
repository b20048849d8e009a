#include "params.h"

#include <string.h>

#include "check.h"

void params_init(param_store *ps) { memset(ps, 0, sizeof(*ps)); }

void params_free(param_store *ps) {
    for (int i = 0; i < ps->n; i++) {
        free((char *)ps->params[i]->name);
        free(ps->params[i]);
    }
    free(ps->params);
    free(ps->data);
    free(ps->grad);
    memset(ps, 0, sizeof(*ps));
}

tensor *params_add(param_store *ps, const char *name, int ndim, const int *shape) {
    CHECK(!ps->data, "parameter %s declared after the store was finalized", name);
    CHECK(!params_find(ps, name), "parameter %s declared twice", name);
    CHECK(ndim >= 1 && ndim <= TENSOR_MAX_DIMS, "parameter %s has %d dims", name, ndim);
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 64;
        ps->params = xrealloc(ps->params, (size_t)ps->cap * sizeof(tensor *));
    }
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

void params_finalize(param_store *ps) {
    CHECK(!ps->data, "param store finalized twice");
    ps->data = xcalloc((size_t)ps->numel, sizeof(float));
    ps->grad = xcalloc((size_t)ps->numel, sizeof(float));
    int64_t off = 0;
    for (int i = 0; i < ps->n; i++) {
        ps->params[i]->data = ps->data + off;
        ps->params[i]->grad = ps->grad + off;
        off += ps->params[i]->numel;
    }
}

void params_zero_grad(param_store *ps) { memset(ps->grad, 0, (size_t)ps->numel * sizeof(float)); }

tensor *params_find(const param_store *ps, const char *name) {
    for (int i = 0; i < ps->n; i++)
        if (strcmp(ps->params[i]->name, name) == 0) return ps->params[i];
    return NULL;
}
