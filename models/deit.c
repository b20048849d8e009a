/* DeiT (Touvron et al.) as the Agent-Attention repo builds it: conv patch embedding, class token,
 * learned position embedding, pre-norm blocks (LN eps 1e-6), class-token head (the last block past
 * its attention on the class token alone: what the head reads). No distillation token. Each block's
 * attention is any registered core on a (1 + G*G)-token sequence. */
#include "../src/core/arena.h"
#include "../src/core/check.h"
#include "../src/nn/layers.h"
#include "model.h"

typedef struct deit_block {
    nn_layernorm norm1, norm2;
    nn_linear qkv, proj;
    attn *core;
    nn_mlp mlp;
    float drop_path;
} deit_block;

typedef struct deit {
    tensor *cls_token, *pos_embed;
    nn_conv2d patch;
    deit_block blocks[MAX_STAGE_BLOCKS];
    int depth, dim, grid;
    nn_layernorm norm;
    nn_linear head;
} deit;

static void *deit_build(model *m) {
    const model_config *c = &m->cfg;
    param_store *ps = &m->ps;
    if (c->n_stages != 1) config_error("model.depths", "DeiT has one stage, got %d", c->n_stages);
    if (c->img_size % c->patch_size)
        config_error("model.patch_size", "%d does not divide img_size %d", c->patch_size,
                     c->img_size);
    deit *d = xcalloc(1, sizeof(deit));
    int C = d->dim = c->embed_dim[0], G = d->grid = c->img_size / c->patch_size;
    d->depth = c->depths[0];
    d->cls_token = PARAM(ps, "cls_token", 1, 1, C);
    params_set_init(ps, d->cls_token, INIT_TRUNC_NORMAL, 0.02f);
    d->pos_embed = PARAM(ps, "pos_embed", 1, 1 + G * G, C);
    params_set_init(ps, d->pos_embed, INIT_TRUNC_NORMAL, 0.02f);
    nn_conv2d_init(&d->patch, ps, "patch_embed.proj", c->in_chans, C, c->patch_size,
                   c->patch_size, 0, 1, true);
    for (int i = 0; i < d->depth; i++) {
        deit_block *b = &d->blocks[i];
        check_attn_grid(c, 0, c->attn[0][i], G, G);
        nn_layernorm_init(&b->norm1, ps, nn_name("blocks.%d.norm1", i), C, 1e-6f);
        attn_spec spec = {
            .kind = c->attn[0][i], .dim = C, .heads = c->num_heads[0], .h = G, .w = G, .hk = G,
            .wk = G, .cls = true, .flavour = NATIVE_GLOBAL, .n_windows = 1,
            .agent_num = c->agent_num[0], .agent_bias = c->agent_bias, .dwc = c->dwc,
            .dwc_name = "dwc", .focusing_factor = (float)c->focusing_factor,
            .dwc_kernel = c->dwc_kernel, .block_size = c->block_size[0], .block = i,
        };
        b->core = attn_create(ps, nn_name("blocks.%d.attn", i), &spec);
        nn_linear_init(&b->qkv, ps, nn_name("blocks.%d.attn.qkv", i), C, 3 * C, c->qkv_bias);
        nn_linear_init(&b->proj, ps, nn_name("blocks.%d.attn.proj", i), C, C, true);
        nn_layernorm_init(&b->norm2, ps, nn_name("blocks.%d.norm2", i), C, 1e-6f);
        nn_mlp_init(&b->mlp, ps, nn_name("blocks.%d.mlp", i), C, (int)(C * c->mlp_ratio[0]));
        b->drop_path = drop_path_rate(c->drop_path, i, d->depth);
    }
    nn_layernorm_init(&d->norm, ps, "norm", C, 1e-6f);
    nn_linear_init(&d->head, ps, "head", C, c->num_classes, true);
    return d;
}

static tensor *deit_forward(model *m, tensor *images, const forward_opts *o) {
    deit *d = m->net;
    int B = images->shape[0], C = d->dim, N = d->grid * d->grid;
    tensor *x = RESHAPE(nn_conv2d_forward(&d->patch, images), B, N, C);
    tensor *cls = op_expand(d->cls_token, 3, (int[]){B, 1, C});
    x = op_add(op_concat(2, (tensor *[]){cls, x}, 1), d->pos_embed);
    x = op_dropout(x, o->train ? (float)m->cfg.drop_rate : 0.0f, o->rng);
    /* inference: each block's output is kept at this mark, over the one before (the block's
     * input, read no more) */
    arena_mark mark = arena_get_mark(&vitc_arena);
    for (int i = 0; i < d->depth; i++) {
        deit_block *b = &d->blocks[i];
        float dp = o->train ? b->drop_path : 0.0f;
        /* the attention branch runs on the samples its drop path keeps */
        drop_path attn_dp = op_drop_path(dp, o->rng, B);
        tensor *qkv[3];
        const nn_layernorm *n1 = &b->norm1;
        nn_linear_chunks(&b->qkv, op_layernorm(x, n1->w, n1->b, n1->eps, &attn_dp), 3, qkv);
        /* the block's input: the output's storage in inference (op_mlp_residual's into) */
        tensor *a = attn_forward(b->core, qkv[0], qkv[1], qkv[2]), *input = x;
        /* the head reads the class token alone: the last block's projection and MLP run on its
         * row, the other rows' outputs reaching nothing (attention needs every row's keys) */
        if (i == d->depth - 1 && !o->every_token) {
            x = op_slice(x, 1, 0, 1), a = op_slice(a, 1, 0, 1);
            input = NULL;
        }
        x = op_residual_linear(x, a, b->proj.w, b->proj.b, false, &attn_dp);
        drop_path mlp_dp = op_drop_path(dp, o->rng, B);
        x = nn_mlp_residual(&b->mlp, &b->norm2, x, &mlp_dp, input);
        x = tensor_keep(&mark, x);
    }
    x = op_slice(nn_layernorm_forward(&d->norm, x), 1, 0, 1);
    return model_classify(&d->head, RESHAPE(x, B, C), o);
}

static void deit_destroy(void *net) {
    deit *d = net;
    for (int i = 0; i < d->depth; i++) attn_destroy(d->blocks[i].core);
    free(d);
}

const backbone backbone_deit = {"deit", deit_build, deit_forward, deit_destroy,
                                "patch_embed.proj.weight"};
