#include "layers.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "../core/check.h"

const char *nn_name(const char *fmt, ...) {
    static char ring[32][256];
    static int next;
    char *buf = ring[next++ % 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(ring[0]), fmt, ap);
    va_end(ap);
    return buf;
}

void nn_linear_init(nn_linear *l, param_store *ps, const char *name, int in, int out, bool bias) {
    l->w = PARAM(ps, nn_name("%s.weight", name), out, in);
    params_set_init(ps, l->w, INIT_TRUNC_NORMAL, 0.02f);
    l->b = bias ? PARAM(ps, nn_name("%s.bias", name), out) : NULL;
}

tensor *nn_linear_forward(const nn_linear *l, tensor *x) { return op_linear(x, l->w, l->b); }

void nn_linear_chunks(const nn_linear *l, tensor *x, int n, tensor **out) {
    op_linear_chunks(x, l->w, l->b, n, out);
}

void nn_layernorm_init(nn_layernorm *l, param_store *ps, const char *name, int dim, float eps) {
    l->w = PARAM(ps, nn_name("%s.weight", name), dim);
    params_set_init(ps, l->w, INIT_ONES, 0);
    l->b = PARAM(ps, nn_name("%s.bias", name), dim);
    l->eps = eps;
}

tensor *nn_layernorm_forward(const nn_layernorm *l, tensor *x) {
    return op_layernorm(x, l->w, l->b, l->eps, NULL);
}

void nn_conv2d_init(nn_conv2d *c, param_store *ps, const char *name, int in, int out, int k,
                    int stride, int pad, int groups, bool bias) {
    CHECK(in % groups == 0 && out % groups == 0, "conv %s: groups %d must divide %d and %d", name,
          groups, in, out);
    float bound = 1.0f / sqrtf((float)(in / groups * k * k));
    c->w = PARAM(ps, nn_name("%s.weight", name), out, in / groups, k, k);
    params_set_init(ps, c->w, INIT_UNIFORM, bound);
    c->b = NULL;
    if (bias) {
        c->b = PARAM(ps, nn_name("%s.bias", name), out);
        params_set_init(ps, c->b, INIT_UNIFORM, bound);
    }
    c->stride = stride;
    c->pad = pad;
    c->groups = groups;
}

tensor *nn_conv2d_forward(const nn_conv2d *c, tensor *x) {
    int in = x->shape[3], out = c->w->shape[0], k = c->w->shape[2];
    if (c->groups == in && out == in && c->stride == 1 && 2 * c->pad + 1 == k)
        return op_dwconv2d(x, c->w, c->b);
    return op_conv2d(x, c->w, c->b, c->stride, c->pad, c->groups);
}

void nn_mlp_init(nn_mlp *m, param_store *ps, const char *name, int dim, int hidden) {
    nn_linear_init(&m->fc1, ps, nn_name("%s.fc1", name), dim, hidden, true);
    nn_linear_init(&m->fc2, ps, nn_name("%s.fc2", name), hidden, dim, true);
}

tensor *nn_mlp_residual(const nn_mlp *m, const nn_layernorm *norm, tensor *res,
                        const drop_path *d, tensor *into) {
    return op_mlp_residual(res, norm->w, norm->b, norm->eps, m->fc1.w, m->fc1.b, m->fc2.w, m->fc2.b,
                           d, into);
}
