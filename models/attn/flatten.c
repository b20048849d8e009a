/* FLatten focused linear attention (Han et al., ICCV 2023): ReLU kernel with a learned softplus
 * temperature, the focusing function f_p(x) = |x| / |x^p| x^p (norms over all channels), linear
 * attention with the mean normaliser, a learned position encoding on K, and a depthwise conv of V
 * shared by all heads restoring the rank. */
#include <math.h>

#include "../../src/core/check.h"
#include "../../src/nn/layers.h"
#include "attn.h"

typedef struct flatten_attn {
    attn base;
    tensor *scale, *pe;
    nn_conv2d dwc; /* (d, 1, k, k): one head's channels, shared across heads */
} flatten_attn;

static attn *flatten_create(param_store *ps, const char *prefix, const attn_spec *s) {
    flatten_attn *a = xcalloc(1, sizeof(flatten_attn));
    int C = s->dim, d = C / s->heads, n = (s->cls ? 1 : 0) + s->hk * s->wk;
    a->scale = PARAM(ps, nn_name("%s.scale", prefix), 1, 1, C);
    a->pe = PARAM(ps, nn_name("%s.positional_encoding", prefix), 1, n, C);
    if (s->dwc)
        nn_conv2d_init(&a->dwc, ps, nn_name("%s.%s", prefix, s->dwc_name), d, d, s->dwc_kernel, 1,
                       s->dwc_kernel / 2, d, true);
    return &a->base;
}

static tensor *flatten_forward(attn *base, tensor *q, tensor *k, tensor *v) {
    flatten_attn *a = (flatten_attn *)base;
    const attn_spec *s = &base->spec;
    int n = q->shape[1], m = k->shape[1], H = s->heads, off = s->cls ? 1 : 0;
    CHECK(m == a->pe->shape[1], "flatten attention: %d keys, positional_encoding has %d", m,
          a->pe->shape[1]);
    tensor *temperature = op_softplus(a->scale);
    tensor *qf = op_focus(q, temperature, s->focusing_factor);
    tensor *kf = op_focus(op_add(k, a->pe), temperature, s->focusing_factor);
    tensor *out = op_linear_attention(qf, kf, v, H);
    if (!s->dwc) return out;
    if (off && s->hk == s->h && s->wk == s->w) /* DeiT: the class token's row as it is */
        return op_dwconv2d_add_tokens_into(v, off, s->h, s->w, a->dwc.w, a->dwc.b, out);
    tensor *vp = off ? op_slice(v, 1, off, m - off) : v;
    if (s->hk != s->h || s->wk != s->w) {
        /* spatially reduced keys (PVT sr > 1): each channel's token sequence is linearly resized
         * to the query count, as the official code does, before the conv on the query grid */
        int b = vp->shape[0], C = vp->shape[2], mk = vp->shape[1], nq = s->h * s->w;
        tensor *seq = RESHAPE(op_transpose(vp, 1, 2), b * C, 1, mk);
        vp = op_transpose(RESHAPE(op_interp_bilinear(seq, 1, nq), b, C, nq), 1, 2);
    }
    /* one depthwise kernel per head channel, shared by the heads */
    int b = vp->shape[0], C = vp->shape[2];
    tensor *grid_v = RESHAPE(vp, b, s->h, s->w, C);
    if (!off) /* out + dwc(v) */
        return RESHAPE(op_dwconv2d_add_into(grid_v, 0, C, a->dwc.w, a->dwc.b, RESHAPE(out, b, s->h, s->w, C)), b, n, C);
    tensor *patches = RESHAPE(op_slice(out, 1, off, n - off), b, s->h, s->w, C);
    patches = RESHAPE(op_dwconv2d_add_into(grid_v, 0, C, a->dwc.w, a->dwc.b, patches), b, n - off, C);
    return op_concat(2, (tensor *[]){op_slice(out, 1, 0, off), patches}, 1);
}

static void flatten_destroy(attn *base) { free(base); }

const attn_impl attn_flatten_impl = {"flatten", flatten_create, flatten_forward, flatten_destroy, NULL};
