/* Swin Transformer (Liu et al.) as the Agent-Attention / FLatten repos build it: patch embedding with
 * LayerNorm, stages of pre-norm blocks in (shifted) windows, patch merging, final norm, mean pooling.
 * Native blocks are W-MSA/SW-MSA with the relative position bias and the shift mask; agent, flatten
 * and elfatt blocks run in `attn_window` windows (0: the whole stage map, as the official configs).
 * model.merge "conv" swaps patch merging for a 3x3/s2 conv + LN (the ELFATT reading). No absolute
 * position embedding (ape is off in every official config). */
#include <string.h>

#include "../src/core/arena.h"
#include "../src/core/check.h"
#include "../src/nn/layers.h"
#include "model.h"

typedef struct swin_block {
    nn_layernorm norm1, norm2;
    nn_linear qkv, proj;
    attn *core;
    nn_mlp mlp;
    float drop_path, *mask;
    int window, shift;
} swin_block;

typedef struct swin_stage {
    swin_block blocks[MAX_STAGE_BLOCKS];
    int depth, dim, res;
    bool merge_conv;
    nn_layernorm merge_norm;
    nn_linear reduction; /* patch merging */
    nn_conv2d merge;     /* conv merging */
} swin_stage;

typedef struct swin {
    nn_conv2d patch;
    nn_layernorm patch_norm, norm;
    swin_stage stages[MAX_STAGES];
    int n_stages;
    nn_linear head;
} swin;

/* the SW-MSA mask (nW, w*w, w*w): -100 between tokens from different regions of the rolled map */
static float *shift_mask(int R, int w, int s) {
    int *label = xmalloc(sizeof(int) * (size_t)R * R);
    for (int y = 0; y < R; y++)
        for (int x = 0; x < R; x++) {
            int ry = y < R - w ? 0 : y < R - s ? 1 : 2, rx = x < R - w ? 0 : x < R - s ? 1 : 2;
            label[y * R + x] = 3 * ry + rx;
        }
    int nw = R / w, n = w * w;
    float *mask = xmalloc(sizeof(float) * (size_t)nw * nw * n * n);
    for (int wi = 0; wi < nw * nw; wi++)
        for (int p = 0; p < n; p++)
            for (int q = 0; q < n; q++) {
                int yp = (wi / nw) * w + p / w, xp = (wi % nw) * w + p % w;
                int yq = (wi / nw) * w + q / w, xq = (wi % nw) * w + q % w;
                mask[((size_t)wi * n + p) * n + q] = label[yp * R + xp] == label[yq * R + xq] ? 0.0f : -100.0f;
            }
    free(label);
    return mask;
}

static void *swin_build(model *m) {
    const model_config *c = &m->cfg;
    param_store *ps = &m->ps;
    swin *net = xcalloc(1, sizeof(swin));
    net->n_stages = c->n_stages;
    if (c->img_size % c->patch_size)
        config_error("model.patch_size", "%d does not divide img_size %d", c->patch_size, c->img_size);
    int R = c->img_size / c->patch_size, C = c->embed_dim[0];
    nn_conv2d_init(&net->patch, ps, "patch_embed.proj", c->in_chans, C, c->patch_size, c->patch_size, 0, 1, true);
    nn_layernorm_init(&net->patch_norm, ps, "patch_embed.norm", C, 1e-5f);
    int total = 0, k = 0;
    for (int s = 0; s < c->n_stages; s++) total += c->depths[s];
    for (int s = 0; s < c->n_stages; s++) {
        swin_stage *st = &net->stages[s];
        st->depth = c->depths[s];
        st->dim = C = c->embed_dim[s];
        st->res = R;
        for (int j = 0; j < st->depth; j++, k++) {
            swin_block *b = &st->blocks[j];
            attn_kind kind = c->attn[s][j];
            int w = kind == ATTN_NATIVE ? c->window[s] : (c->attn_window[s] ? c->attn_window[s] : R);
            b->shift = j % 2 ? w / 2 : 0;
            if (R <= w) w = R, b->shift = 0; /* the official clipping: one window, no shift */
            if (R % w) {
                char path[64];
                snprintf(path, sizeof(path), kind == ATTN_NATIVE ? "model.window[%d]" : "model.attn_window[%d]", s);
                config_error(path, "window %d does not divide the %dx%d map of stage %d", w, R, R, s);
            }
            b->window = w;
            check_attn_grid(c, s, kind, w, w);
            if (kind == ATTN_NATIVE && b->shift) b->mask = shift_mask(R, w, b->shift);
            const char *p = nn_name("layers.%d.blocks.%d", s, j);
            char prefix[128];
            snprintf(prefix, sizeof(prefix), "%s", p);
            nn_layernorm_init(&b->norm1, ps, nn_name("%s.norm1", prefix), C, 1e-5f);
            attn_spec spec = {
                .kind = kind, .dim = C, .heads = c->num_heads[s], .h = w, .w = w, .hk = w, .wk = w,
                .flavour = NATIVE_WINDOW, .mask = b->mask, .n_windows = (R / w) * (R / w),
                .agent_num = c->agent_num[s], .agent_bias = c->agent_bias, .dwc = c->dwc,
                .dwc_name = "dwc", .focusing_factor = (float)c->focusing_factor,
                .dwc_kernel = c->dwc_kernel, .block_size = c->block_size[s], .block = k,
                .map_h = R, .map_w = R, .shift = b->shift,
            };
            b->core = attn_create(ps, nn_name("%s.attn", prefix), &spec);
            nn_linear_init(&b->qkv, ps, nn_name("%s.attn.qkv", prefix), C, 3 * C, c->qkv_bias);
            nn_linear_init(&b->proj, ps, nn_name("%s.attn.proj", prefix), C, C, true);
            nn_layernorm_init(&b->norm2, ps, nn_name("%s.norm2", prefix), C, 1e-5f);
            nn_mlp_init(&b->mlp, ps, nn_name("%s.mlp", prefix), C, (int)(C * c->mlp_ratio[s]));
            b->drop_path = drop_path_rate(c->drop_path, k, total);
        }
        if (s + 1 < c->n_stages) {
            if (R % 2) config_error("model.img_size", "stage %d map %dx%d cannot be merged 2x2", s, R, R);
            int next = c->embed_dim[s + 1];
            st->merge_conv = !strcmp(c->merge, "conv");
            if (st->merge_conv) {
                nn_conv2d_init(&st->merge, ps, nn_name("layers.%d.downsample.conv", s), C, next, 3, 2, 1, 1, true);
                nn_layernorm_init(&st->merge_norm, ps, nn_name("layers.%d.downsample.norm", s), next, 1e-5f);
            } else {
                nn_layernorm_init(&st->merge_norm, ps, nn_name("layers.%d.downsample.norm", s), 4 * C, 1e-5f);
                nn_linear_init(&st->reduction, ps, nn_name("layers.%d.downsample.reduction", s), 4 * C, next, false);
            }
            R /= 2;
        }
    }
    nn_layernorm_init(&net->norm, ps, "norm", C, 1e-5f);
    nn_linear_init(&net->head, ps, "head", C, c->num_classes, true);
    return net;
}

static tensor *swin_block_forward(const swin_block *b, tensor *x, int R, const forward_opts *o) {
    int B = x->shape[0], C = x->shape[2], w = b->window;
    tensor *input = x; /* the output's storage in inference (op_mlp_residual's into) */
    float dp = o->train ? b->drop_path : 0.0f;
    /* the attention branch runs on the samples its drop path keeps */
    drop_path attn_dp = op_drop_path(dp, o->rng, B);
    tensor *qkv[3];
    tensor *windows = op_layernorm_windows(RESHAPE(x, B, R, R, C), b->norm1.w, b->norm1.b,
                                           b->norm1.eps, w, w, b->shift, &attn_dp);
    nn_linear_chunks(&b->qkv, windows, 3, qkv);
    tensor *y = attn_forward(b->core, qkv[0], qkv[1], qkv[2]);
    /* the projection is per token: it runs on the windows, which the residual step puts back */
    x = op_residual_linear_windows(RESHAPE(x, B, R, R, C), y, b->proj.w, b->proj.b, w, w, b->shift,
                                   &attn_dp);
    drop_path mlp_dp = op_drop_path(dp, o->rng, B);
    return nn_mlp_residual(&b->mlp, &b->norm2, RESHAPE(x, B, R * R, C), &mlp_dp, input);
}

/* 2x2 patch merging: channels ordered (even row, even col), (odd row, even col), (even row, odd
 * col), (odd row, odd col) */
static tensor *patch_merge(const swin_stage *st, tensor *x) {
    int B = x->shape[0], C = x->shape[2], R = st->res, h = R / 2;
    if (st->merge_conv) {
        tensor *y = nn_conv2d_forward(&st->merge, RESHAPE(x, B, R, R, C));
        return nn_layernorm_forward(&st->merge_norm, RESHAPE(y, B, h * h, y->shape[3]));
    }
    /* (B*h, 2 (row parity), h, 2 (col parity), C) -> (B*h, h, col parity, row parity, C) */
    tensor *y = op_permute(RESHAPE(x, B * h, 2, h, 2, C), (int[]){0, 2, 3, 1, 4});
    y = RESHAPE(y, B, h * h, 4 * C);
    const nn_layernorm *n = &st->merge_norm; /* the normalised map is recomputed, not kept */
    return op_layernorm_linear(y, n->w, n->b, n->eps, st->reduction.w, st->reduction.b, NULL);
}

static tensor *swin_forward(model *m, tensor *images, const forward_opts *o) {
    swin *net = m->net;
    int B = images->shape[0];
    tensor *x = nn_conv2d_forward(&net->patch, images);
    x = nn_layernorm_forward(&net->patch_norm, RESHAPE(x, B, x->shape[1] * x->shape[2], x->shape[3]));
    for (int s = 0; s < net->n_stages; s++) {
        const swin_stage *st = &net->stages[s];
        /* inference: each block's output is kept at the stage's mark, over the one before (the
         * block's input, read no more) */
        arena_mark mark = arena_get_mark(&vitc_arena);
        for (int j = 0; j < st->depth; j++) x = tensor_keep(&mark, swin_block_forward(&st->blocks[j], x, st->res, o));
        if (s + 1 < net->n_stages) x = patch_merge(st, x);
    }
    return model_classify(&net->head, op_mean(nn_layernorm_forward(&net->norm, x), 1, false), o);
}

static void swin_destroy(void *p) {
    swin *net = p;
    for (int s = 0; s < net->n_stages; s++)
        for (int j = 0; j < net->stages[s].depth; j++) {
            attn_destroy(net->stages[s].blocks[j].core);
            free(net->stages[s].blocks[j].mask);
        }
    free(net);
}

const backbone backbone_swin = {"swin", swin_build, swin_forward, swin_destroy,
                                "patch_embed.proj.weight"};
