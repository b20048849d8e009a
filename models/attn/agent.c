/* Agent attention (Han et al., ECCV 2024): a = p*p agent tokens average-pooled from the projected
 * queries aggregate the values with one softmax and broadcast them back to the queries with a second,
 * each with position biases built from a 7x7 table resized to the grid plus row and column terms;
 * a depthwise 3x3 conv of V restores local detail. Attention dropout is omitted (0 in every config). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/check.h"
#include "../../src/core/memory.h"
#include "../../src/core/tape.h"
#include "../../src/nn/layers.h"
#include "attn.h"

#define AGENT_BIAS_PARAMS 8

/* The position biases are a function of parameters only, rebuilt by every call (interpolation,
 * sums, a transpose: 5% of an inference at batch 1). Without gradients they are kept, with a copy of
 * the parameters they came from, and rebuilt when those differ (a training step, EMA or loaded
 * weights). On a device they are rebuilt every call: comparing would copy the parameters to the host
 * and wait for the device in every block. */
typedef struct bias_cache {
    float *params; /* the bias parameters' values, one after another */
    float *b1, *b2;
    int shape1[3], shape2[3];
} bias_cache;

typedef struct agent_attn {
    attn base;
    float scale;
    int pool; /* p: agents on a p x p grid */
    tensor *an_bias, *na_bias, *ah_bias, *aw_bias, *ha_bias, *wa_bias, *ac_bias, *ca_bias;
    bias_cache cache;
    nn_conv2d dwc;
} agent_attn;

static tensor *bias_param(param_store *ps, const char *prefix, const char *name, int ndim,
                          const int *shape) {
    tensor *t = params_add(ps, nn_name("%s.%s", prefix, name), ndim, shape);
    params_set_init(ps, t, INIT_TRUNC_NORMAL, 0.02f);
    return t;
}
#define BIAS(name, ...)                                                                            \
    bias_param(ps, prefix, #name, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)),              \
               (int[]){__VA_ARGS__})

static attn *agent_create(param_store *ps, const char *prefix, const attn_spec *s) {
    agent_attn *a = xcalloc(1, sizeof(agent_attn));
    int H = s->heads, n = s->agent_num;
    a->scale = 1.0f / sqrtf((float)(s->dim / H));
    while ((a->pool + 1) * (a->pool + 1) <= n) a->pool++;
    CHECK(a->pool * a->pool == n, "%s: %d agents is not a perfect square", prefix, n);
    if (s->agent_bias) {
        a->an_bias = BIAS(an_bias, H, n, 7, 7);
        a->na_bias = BIAS(na_bias, H, n, 7, 7);
        a->ah_bias = BIAS(ah_bias, 1, H, n, s->hk, 1);
        a->aw_bias = BIAS(aw_bias, 1, H, n, 1, s->wk);
        a->ha_bias = BIAS(ha_bias, 1, H, s->h, 1, n);
        a->wa_bias = BIAS(wa_bias, 1, H, 1, s->w, n);
        if (s->cls) {
            a->ac_bias = BIAS(ac_bias, 1, H, n, 1);
            a->ca_bias = BIAS(ca_bias, 1, H, 1, n);
        }
    }
    if (s->dwc)
        nn_conv2d_init(&a->dwc, ps, nn_name("%s.%s", prefix, s->dwc_name), s->dim, s->dim, 3, 1, 1,
                       s->dim, true);
    return &a->base;
}

/* B1 (H, a, [1 +] hk*wk): agent -> key biases; B2 (H, [1 +] h*w, a): query -> agent biases */
static void agent_biases(agent_attn *a, tensor **b1, tensor **b2) {
    const attn_spec *s = &a->base.spec;
    int H = s->heads, n = s->agent_num, mk = s->hk * s->wk, mq = s->h * s->w;
    tensor *t = op_interp_bilinear(RESHAPE(a->an_bias, H * n, 7, 7), s->hk, s->wk);
    t = op_add(RESHAPE(t, H, n, mk), RESHAPE(op_add(a->ah_bias, a->aw_bias), H, n, mk));
    if (s->cls) t = op_concat(2, (tensor *[]){RESHAPE(a->ac_bias, H, n, 1), t}, 2);
    *b1 = t;
    t = op_interp_bilinear(RESHAPE(a->na_bias, H * n, 7, 7), s->h, s->w);
    t = op_transpose(RESHAPE(t, H, n, mq), 1, 2);
    t = op_add(t, RESHAPE(op_add(a->ha_bias, a->wa_bias), H, mq, n));
    if (s->cls) t = op_concat(2, (tensor *[]){RESHAPE(a->ca_bias, H, 1, n), t}, 1);
    *b2 = t;
}

/* the bias parameters, NULL where absent */
static void bias_params(const agent_attn *a, const tensor *p[AGENT_BIAS_PARAMS]) {
    const tensor *all[AGENT_BIAS_PARAMS] = {a->an_bias, a->na_bias, a->ah_bias, a->aw_bias,
                                            a->ha_bias, a->wa_bias, a->ac_bias, a->ca_bias};
    memcpy(p, all, sizeof(all));
}

static bool cache_matches_params(const agent_attn *a) {
    const float *src = a->cache.params;
    if (!src) return false;
    const tensor *p[AGENT_BIAS_PARAMS];
    bias_params(a, p);
    for (int i = 0; i < AGENT_BIAS_PARAMS; i++) {
        if (!p[i]) continue;
        if (memcmp(src, p[i]->data, sizeof(float) * p[i]->numel)) return false;
        src += p[i]->numel;
    }
    return true;
}

static float *copy_into(float *dst, const tensor *t) {
    memcpy(dst, t->data, sizeof(float) * t->numel);
    return dst + t->numel;
}

static void cache_store(agent_attn *a, const tensor *b1, const tensor *b2) {
    bias_cache *c = &a->cache;
    const tensor *p[AGENT_BIAS_PARAMS];
    bias_params(a, p);
    free(c->params), free(c->b1), free(c->b2);
    int64_t n_params = 0;
    for (int i = 0; i < AGENT_BIAS_PARAMS; i++)
        if (p[i]) n_params += p[i]->numel;
    c->params = xmalloc(sizeof(float) * n_params);
    float *dst = c->params;
    for (int i = 0; i < AGENT_BIAS_PARAMS; i++)
        if (p[i]) dst = copy_into(dst, p[i]);
    c->b1 = xmalloc(sizeof(float) * b1->numel), c->b2 = xmalloc(sizeof(float) * b2->numel);
    copy_into(c->b1, b1), copy_into(c->b2, b2);
    memcpy(c->shape1, b1->shape, sizeof(c->shape1)), memcpy(c->shape2, b2->shape, sizeof(c->shape2));
}

/* agent_biases from the cache without gradients on the host, rebuilding it when the parameters
 * changed */
static void biases(agent_attn *a, tensor **b1, tensor **b2) {
    if (tape_grad_enabled() || vitc_device() != DEV_CPU) {
        agent_biases(a, b1, b2);
        return;
    }
    if (!cache_matches_params(a)) {
        agent_biases(a, b1, b2);
        cache_store(a, *b1, *b2);
    }
    *b1 = tensor_wrap(a->cache.b1, 3, a->cache.shape1);
    *b2 = tensor_wrap(a->cache.b2, 3, a->cache.shape2);
}

static tensor *agent_forward(attn *base, tensor *q, tensor *k, tensor *v) {
    agent_attn *a = (agent_attn *)base;
    const attn_spec *s = &base->spec;
    int b = q->shape[0], n = q->shape[1], m = k->shape[1], C = q->shape[2], H = s->heads;
    int off = s->cls ? 1 : 0;
    CHECK(n == off + s->h * s->w && m == off + s->hk * s->wk,
          "agent attention: %d queries / %d keys for grids %dx%d / %dx%d", n, m, s->h, s->w, s->hk,
          s->wk);
    tensor *agents = off ? op_adaptive_avg_pool2d_tokens(q, off, s->h, s->w, a->pool, a->pool)
                         : op_adaptive_avg_pool2d(RESHAPE(q, b, s->h, s->w, C), a->pool, a->pool);
    agents = RESHAPE(agents, b, s->agent_num, C);
    tensor *b1 = NULL, *b2 = NULL;
    if (s->agent_bias) biases(a, &b1, &b2);
    tensor *agent_v = op_attention(agents, k, v, H, a->scale, b1, NULL, 1);
    tensor *out = op_attention(q, agents, agent_v, H, a->scale, b2, NULL, 1);
    if (!s->dwc) return out;
    if (off) { /* DeiT: out + dwc(v) on the patch tokens, the class token's row as it is */
        CHECK(s->hk == s->h && s->wk == s->w, "agent attention: a class token with keys on a "
              "%dx%d grid and queries on %dx%d", s->hk, s->wk, s->h, s->w);
        return op_dwconv2d_add_tokens_into(v, off, s->h, s->w, a->dwc.w, a->dwc.b, out);
    }
    tensor *grid_v = RESHAPE(v, b, s->hk, s->wk, C);
    if (s->hk != s->h || s->wk != s->w) { /* PVT with spatial reduction: upsample v to the query grid */
        tensor *planes = RESHAPE(op_permute(grid_v, (int[]){0, 3, 1, 2}), b * C, s->hk, s->wk);
        planes = RESHAPE(op_interp_bilinear(planes, s->h, s->w), b, C, s->h, s->w);
        grid_v = op_permute(planes, (int[]){0, 2, 3, 1});
    }
    tensor *sum = op_dwconv2d_add_into(grid_v, 0, C, a->dwc.w, a->dwc.b,
                                       RESHAPE(out, b, s->h, s->w, C)); /* out + dwc(v) */
    return RESHAPE(sum, b, n, C);
}

static void agent_destroy(attn *base) {
    agent_attn *a = (agent_attn *)base;
    free(a->cache.params), free(a->cache.b1), free(a->cache.b2);
    free(base);
}

const attn_impl attn_agent_impl = {"agent", agent_create, agent_forward, agent_destroy, NULL};
