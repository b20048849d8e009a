/* The attention registry and the helpers shared by the cores. */
#include "attn.h"
#include "attn_map.h"
#include "attn_redundancy.h"

#include <stdio.h>

#include "../../src/core/check.h"

extern const attn_impl attn_softmax_impl, attn_agent_impl, attn_flatten_impl, attn_elfatt_impl;

const attn_impl *const attn_registry[ATTN_KIND_COUNT] = {
    [ATTN_NATIVE] = &attn_softmax_impl,
    [ATTN_AGENT] = &attn_agent_impl,
    [ATTN_FLATTEN] = &attn_flatten_impl,
    [ATTN_ELFATT] = &attn_elfatt_impl,
};

const char *const attn_names[] = {"native", "agent", "flatten", "elfatt", NULL};

attn *attn_create(param_store *ps, const char *prefix, const attn_spec *spec) {
    CHECK(spec->kind >= 0 && spec->kind < ATTN_KIND_COUNT, "attention kind %d", spec->kind);
    const attn_impl *impl = attn_registry[spec->kind];
    CHECK(impl, "attention '%s' (at %s) is not implemented yet", attn_names[spec->kind], prefix);
    CHECK(spec->dim % spec->heads == 0, "%s: %d channels do not split into %d heads", prefix,
          spec->dim, spec->heads);
    char name[256]; /* callers build prefix with nn_name, whose buffers the core's names reuse */
    snprintf(name, sizeof(name), "%s", prefix);
    attn *a = impl->create(ps, name, spec);
    a->impl = impl;
    a->spec = *spec;
    if (spec->lepe) {
        CHECK(!spec->cls && spec->hk == spec->h && spec->wk == spec->w,
              "%s: LePE needs keys on the query grid without a class token", name);
        nn_conv2d_init(&a->lepe, ps, nn_name("%s.get_v", name), spec->dim, spec->dim, 3, 1, 1,
                       spec->dim, true);
    }
    return a;
}

int attn_forward_parts(attn *a, tensor *q, tensor *k, tensor *v, tensor *parts[2]) {
    if (!a->impl->forward_parts || a->spec.lepe) {
        parts[0] = attn_forward(a, q, k, v);
        return 1;
    }
    if (attn_probe_active()) attn_probe_record(a, q, k, v);
    return a->impl->forward_parts(a, q, k, v, parts);
}

tensor *attn_forward(attn *a, tensor *q, tensor *k, tensor *v) {
    if (attn_probe_active()) attn_probe_record(a, q, k, v);
    if (attn_redundancy_active()) attn_redundancy_record(a, q, k);
    tensor *out = a->impl->forward(a, q, k, v);
    if (!a->spec.lepe) return out;
    int b = v->shape[0], n = v->shape[1], C = v->shape[2], h = a->spec.h, w = a->spec.w;
    tensor *sum = op_dwconv2d_add_into(RESHAPE(v, b, h, w, C), 0, C, a->lepe.w, a->lepe.b, RESHAPE(out, b, h, w, C));
    return RESHAPE(sum, b, n, C);
}

void attn_destroy(attn *a) {
    if (a) a->impl->destroy(a);
}

tensor *attn_split_heads(tensor *x, int heads) {
    int b = x->shape[0], n = x->shape[1], c = x->shape[2];
    return op_permute(RESHAPE(x, b, n, heads, c / heads), (int[]){0, 2, 1, 3});
}

tensor *attn_merge_heads(tensor *x) {
    int b = x->shape[0], heads = x->shape[1], n = x->shape[2], d = x->shape[3];
    return RESHAPE(op_permute(x, (int[]){0, 2, 1, 3}), b, n, heads * d);
}
