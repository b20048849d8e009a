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

/* f_p(relu(x) + 1e-6) / temperature, keeping each token's norm */
static tensor *focus(tensor *x, tensor *temperature, float p) {
    x = op_div(op_add_scalar(op_relu(x), 1e-6f), temperature);
    tensor *norm = op_l2norm(x);
    x = op_pow(x, p);
    return op_mul(op_div(x, op_l2norm(x)), norm);
}

static tensor *flatten_forward(attn *base, tensor *q, tensor *k, tensor *v) {
    flatten_attn *a = (flatten_attn *)base;
    const attn_spec *s = &base->spec;
    int n = q->shape[1], m = k->shape[1], H = s->heads, off = s->cls ? 1 : 0;
    CHECK(m == a->pe->shape[1], "flatten attention: %d keys, positional_encoding has %d", m,
          a->pe->shape[1]);
    tensor *temperature = op_softplus(a->scale);
    tensor *qh = attn_split_heads(focus(q, temperature, s->focusing_factor), H);
    tensor *kh = attn_split_heads(focus(op_add(k, a->pe), temperature, s->focusing_factor), H);
    /* out_i = q_i (kᵀv / m) / (q_i · mean(k) + 1e-6), per head */
    tensor *kv = op_matmul(kh, attn_split_heads(v, H), true, false, 1.0f / (float)m);
    tensor *z = op_pow(op_add_scalar(op_matmul(qh, op_mean(kh, 2, true), false, true, 1.0f), 1e-6f), -1.0f);
    tensor *out = attn_merge_heads(op_mul(op_matmul(qh, kv, false, false, 1.0f), z));
    if (!s->dwc) return out;
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
    tensor *local = RESHAPE(op_dwconv2d(RESHAPE(vp, b, s->h, s->w, C), a->dwc.w, a->dwc.b), b, s->h * s->w, C);
    if (!off) return op_add(out, local);
    tensor *patches = op_add(op_slice(out, 1, off, n - off), local);
    return op_concat(2, (tensor *[]){op_slice(out, 1, 0, off), patches}, 1);
}

static void flatten_destroy(attn *base) { free(base); }

const attn_impl attn_flatten_impl = {"flatten", flatten_create, flatten_forward, flatten_destroy};
