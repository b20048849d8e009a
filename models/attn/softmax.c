/* Native softmax attention in each backbone's flavour: global (DeiT, PVT, CSwin stripes — whose
 * LePE the attention interface adds), shifted windows with a relative position bias and mask (Swin).
 * Dropout on the attention matrix is omitted: every official config sets it to 0. */
#include <math.h>

#include "../../src/core/check.h"
#include "../../src/cpu/spatial.h"
#include "../../src/nn/layers.h"
#include "attn.h"

typedef struct softmax_attn {
    attn base;
    float scale;
    tensor *rpb_table; /* ((2h-1)(2w-1), heads) */
    int *rpb_index;    /* (h*w)^2 */
} softmax_attn;

static attn *softmax_create(param_store *ps, const char *prefix, const attn_spec *spec) {
    softmax_attn *a = xcalloc(1, sizeof(softmax_attn));
    a->scale = 1.0f / sqrtf((float)(spec->dim / spec->heads));
    int n = spec->h * spec->w;
    if (spec->flavour == NATIVE_WINDOW) {
        a->rpb_table = PARAM(ps, nn_name("%s.relative_position_bias_table", prefix),
                             (2 * spec->h - 1) * (2 * spec->w - 1), spec->heads);
        params_set_init(ps, a->rpb_table, INIT_TRUNC_NORMAL, 0.02f);
        a->rpb_index = xmalloc(sizeof(int) * (size_t)n * n);
        relpos_index_swin(a->rpb_index, spec->h, spec->w);
    }
    return &a->base;
}

static tensor *softmax_forward(attn *base, tensor *q, tensor *k, tensor *v) {
    softmax_attn *a = (softmax_attn *)base;
    const attn_spec *s = &base->spec;
    int n = q->shape[1], m = k->shape[1];
    if (s->flavour == NATIVE_GLOBAL) return op_attention(q, k, v, s->heads, a->scale, NULL, NULL, 1);
    CHECK(n == s->h * s->w && m == n, "window attention: %d tokens for a %dx%d window", n, s->h, s->w);
    tensor *bias = op_relpos_gather(a->rpb_table, a->rpb_index, n);
    return op_attention(q, k, v, s->heads, a->scale, bias, s->mask, s->n_windows);
}

static void softmax_destroy(attn *base) {
    softmax_attn *a = (softmax_attn *)base;
    free(a->rpb_index);
    free(a);
}

const attn_impl attn_softmax_impl = {"native", softmax_create, softmax_forward, softmax_destroy, NULL};
