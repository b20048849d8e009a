/* PVT v1 as the Agent-Attention / FLatten repos build it (non-overlapping patch embeddings, one
 * position embedding per stage, no class token, head on the mean of the last stage's tokens, no
 * final norm — FLatten-PVT declares one it never applies: model.unused_norm), and PVT v2
 * (overlapping patch embeddings, a depthwise conv in the MLP, a norm closing each stage).
 * Attention keys/values may be spatially reduced (sr_ratio: conv k=s=sr + LayerNorm). PVT v2's
 * "linear" SRA (pooling) is not built: no official config uses it. */
#include <math.h>
#include <string.h>

#include "../src/core/arena.h"
#include "../src/core/check.h"
#include "../src/nn/layers.h"
#include "model.h"

typedef struct pvt_block {
    nn_layernorm norm1, norm2, sr_norm;
    nn_linear q, kv, proj, fc1, fc2;
    nn_conv2d sr, mlp_dwconv; /* sr when sr_ratio > 1; mlp_dwconv in PVT v2 */
    int sr_ratio;
    attn *core;
    float drop_path;
} pvt_block;

typedef struct pvt_stage {
    nn_conv2d patch;
    nn_layernorm patch_norm, norm; /* norm: PVT v2's closing norm{i} */
    tensor *pos_embed;             /* PVT v1 */
    pvt_block blocks[MAX_STAGE_BLOCKS];
    int depth, dim, res;
} pvt_stage;

typedef struct pvt {
    bool v2;
    pvt_stage stages[MAX_STAGES];
    int n_stages;
    nn_layernorm unused_norm;
    nn_linear head;
} pvt;

/* PVT v2 initialises convs with N(0, 2/fan_out) and zero bias */
static void fan_out_init(param_store *ps, nn_conv2d *c) {
    int fan_out = c->w->shape[0] / c->groups * c->w->shape[2] * c->w->shape[3];
    params_set_init(ps, c->w, INIT_TRUNC_NORMAL, sqrtf(2.0f / (float)fan_out));
    if (c->b) params_set_init(ps, c->b, INIT_ZEROS, 0);
}

static void *pvt_build(model *m) {
    const model_config *c = &m->cfg;
    param_store *ps = &m->ps;
    pvt *net = xcalloc(1, sizeof(pvt));
    net->v2 = !strcmp(c->arch, "pvt_v2");
    net->n_stages = c->n_stages;
    int total = 0, k = 0, in = c->in_chans, R = c->img_size;
    for (int s = 0; s < c->n_stages; s++) total += c->depths[s];
    for (int s = 0; s < c->n_stages; s++) {
        pvt_stage *st = &net->stages[s];
        int C = st->dim = c->embed_dim[s], i = s + 1;
        if (net->v2) { /* overlapping: 7x7/s4/p3, then 3x3/s2/p1 */
            int kk = s ? 3 : 7, stride = s ? 2 : 4;
            nn_conv2d_init(&st->patch, ps, nn_name("patch_embed%d.proj", i), in, C, kk, stride, kk / 2, 1, true);
            fan_out_init(ps, &st->patch);
            R = (R + 2 * (kk / 2) - kk) / stride + 1;
        } else {
            int p = s ? 2 : c->patch_size;
            if (R % p) config_error("model.img_size", "stage %d map %d is not divisible by its patch %d", s, R, p);
            nn_conv2d_init(&st->patch, ps, nn_name("patch_embed%d.proj", i), in, C, p, p, 0, 1, true);
            R /= p;
            st->pos_embed = PARAM(ps, nn_name("pos_embed%d", i), 1, R * R, C);
            params_set_init(ps, st->pos_embed, INIT_TRUNC_NORMAL, 0.02f);
        }
        nn_layernorm_init(&st->patch_norm, ps, nn_name("patch_embed%d.norm", i), C, 1e-5f);
        st->res = R;
        st->depth = c->depths[s];
        int sr = c->sr_ratio[s];
        if (R % sr) {
            char path[64];
            snprintf(path, sizeof(path), "model.sr_ratio[%d]", s);
            config_error(path, "%d does not divide the %dx%d map of stage %d", sr, R, R, s);
        }
        for (int j = 0; j < st->depth; j++, k++) {
            pvt_block *b = &st->blocks[j];
            char prefix[64];
            snprintf(prefix, sizeof(prefix), "block%d.%d", i, j);
            check_attn_grid(c, s, c->attn[s][j], R, R);
            nn_layernorm_init(&b->norm1, ps, nn_name("%s.norm1", prefix), C, 1e-6f);
            b->sr_ratio = sr;
            attn_spec spec = {
                .kind = c->attn[s][j], .dim = C, .heads = c->num_heads[s], .h = R, .w = R,
                .hk = R / sr, .wk = R / sr, .flavour = NATIVE_GLOBAL, .n_windows = 1,
                .agent_num = c->agent_num[s], .agent_bias = c->agent_bias, .dwc = c->dwc,
                .dwc_name = "dwc", .focusing_factor = (float)c->focusing_factor,
                .dwc_kernel = c->dwc_kernel, .block_size = c->block_size[s], .block = k,
            };
            b->core = attn_create(ps, nn_name("%s.attn", prefix), &spec);
            nn_linear_init(&b->q, ps, nn_name("%s.attn.q", prefix), C, C, c->qkv_bias);
            nn_linear_init(&b->kv, ps, nn_name("%s.attn.kv", prefix), C, 2 * C, c->qkv_bias);
            nn_linear_init(&b->proj, ps, nn_name("%s.attn.proj", prefix), C, C, true);
            if (sr > 1) {
                nn_conv2d_init(&b->sr, ps, nn_name("%s.attn.sr", prefix), C, C, sr, sr, 0, 1, true);
                if (net->v2) fan_out_init(ps, &b->sr);
                nn_layernorm_init(&b->sr_norm, ps, nn_name("%s.attn.norm", prefix), C, 1e-5f);
            }
            nn_layernorm_init(&b->norm2, ps, nn_name("%s.norm2", prefix), C, 1e-6f);
            int hidden = (int)(C * c->mlp_ratio[s]);
            nn_linear_init(&b->fc1, ps, nn_name("%s.mlp.fc1", prefix), C, hidden, true);
            if (net->v2) {
                nn_conv2d_init(&b->mlp_dwconv, ps, nn_name("%s.mlp.dwconv.dwconv", prefix), hidden,
                               hidden, 3, 1, 1, hidden, true);
                fan_out_init(ps, &b->mlp_dwconv);
            }
            nn_linear_init(&b->fc2, ps, nn_name("%s.mlp.fc2", prefix), hidden, C, true);
            b->drop_path = drop_path_rate(c->drop_path, k, total);
        }
        if (net->v2) nn_layernorm_init(&st->norm, ps, nn_name("norm%d", i), C, 1e-6f);
        in = C;
    }
    int last = c->embed_dim[c->n_stages - 1];
    if (c->unused_norm) nn_layernorm_init(&net->unused_norm, ps, "norm", last, 1e-6f);
    nn_linear_init(&net->head, ps, "head", last, c->num_classes, true);
    return net;
}

static tensor *pvt_block_forward(const pvt_block *b, tensor *x, int R, bool v2, const forward_opts *o) {
    int B = x->shape[0], C = x->shape[2];
    tensor *input = x; /* the output's storage in inference (op_mlp_residual's into) */
    float dp = o->train ? b->drop_path : 0.0f;
    /* each branch runs on the samples its drop path keeps (taken of them) */
    drop_path attn_dp = op_drop_path(dp, o->rng, B);
    tensor *y = op_layernorm(x, b->norm1.w, b->norm1.b, b->norm1.eps, &attn_dp), *src = y;
    int taken = y->shape[0];
    if (b->sr_ratio > 1) {
        tensor *r = nn_conv2d_forward(&b->sr, RESHAPE(y, taken, R, R, C));
        src = nn_layernorm_forward(&b->sr_norm, RESHAPE(r, taken, r->shape[1] * r->shape[2], C));
    }
    tensor *kv[2];
    nn_linear_chunks(&b->kv, src, 2, kv);
    tensor *a = attn_forward(b->core, nn_linear_forward(&b->q, y), kv[0], kv[1]);
    x = op_residual_linear(x, a, b->proj.w, b->proj.b, false, &attn_dp);
    drop_path mlp_dp = op_drop_path(dp, o->rng, B);
    if (!v2) /* timm's Mlp: the fused step */
        return op_mlp_residual(x, b->norm2.w, b->norm2.b, b->norm2.eps, b->fc1.w, b->fc1.b,
                               b->fc2.w, b->fc2.b, &mlp_dp, input);
    tensor *h =
        op_layernorm_linear(x, b->norm2.w, b->norm2.b, b->norm2.eps, b->fc1.w, b->fc1.b, &mlp_dp);
    int hidden = h->shape[2];
    taken = h->shape[0];
    h = RESHAPE(nn_conv2d_forward(&b->mlp_dwconv, RESHAPE(h, taken, R, R, hidden)), taken, R * R,
                hidden);
    return op_residual_linear(x, h, b->fc2.w, b->fc2.b, true, &mlp_dp);
}

static tensor *pvt_forward(model *m, tensor *images, const forward_opts *o) {
    pvt *net = m->net;
    int B = images->shape[0];
    tensor *x = images; /* (B, H, W, C) between stages */
    for (int s = 0; s < net->n_stages; s++) {
        const pvt_stage *st = &net->stages[s];
        int R = st->res, C = st->dim;
        x = nn_layernorm_forward(&st->patch_norm, RESHAPE(nn_conv2d_forward(&st->patch, x), B, R * R, C));
        if (st->pos_embed) x = op_add(x, st->pos_embed);
        /* inference: each block's output is kept at the stage's mark, over the one before (the
         * block's input, read no more) */
        arena_mark mark = arena_get_mark(&vitc_arena);
        for (int j = 0; j < st->depth; j++) x = tensor_keep(&mark, pvt_block_forward(&st->blocks[j], x, R, net->v2, o));
        if (net->v2) x = nn_layernorm_forward(&st->norm, x);
        if (s + 1 < net->n_stages) x = RESHAPE(x, B, R, R, C);
    }
    return model_classify(&net->head, op_mean(x, 1, false), o);
}

static void pvt_destroy(void *p) {
    pvt *net = p;
    for (int s = 0; s < net->n_stages; s++)
        for (int j = 0; j < net->stages[s].depth; j++) attn_destroy(net->stages[s].blocks[j].core);
    free(net);
}

const backbone backbone_pvt = {"pvt", pvt_build, pvt_forward, pvt_destroy,
                               "patch_embed1.proj.weight"};
const backbone backbone_pvt_v2 = {"pvt_v2", pvt_build, pvt_forward, pvt_destroy,
                                  "patch_embed1.proj.weight"};
