/* CSWin Transformer (Dong et al.) as the Agent-Attention / FLatten repos build it: 7x7/s4 conv stem
 * + LN, blocks with block-level qkv/proj whose attention runs on cross-shaped stripes — half the
 * channels and heads on vertical R x sw stripes, half on horizontal sw x R ones, each with LePE —
 * or as one global branch when the stripe covers the map (and always in the last stage); 3x3/s2
 * conv merging + LN; final norm, mean pooling. Agent, flatten and elfatt blocks use attn_window
 * (0: the whole map, the official configs). */
#include <string.h>

#include "../src/core/arena.h"
#include "../src/core/check.h"
#include "../src/nn/layers.h"
#include "model.h"

typedef struct cswin_block {
    nn_layernorm norm1, norm2;
    nn_linear qkv, proj;
    attn *branch[2];
    int n_branches, split; /* stripe width; split == res means one global branch */
    nn_mlp mlp;
    float drop_path;
} cswin_block;

typedef struct cswin_stage {
    cswin_block blocks[MAX_STAGE_BLOCKS];
    int depth, dim, res;
    nn_conv2d merge;
    nn_layernorm merge_norm;
} cswin_stage;

typedef struct cswin {
    nn_conv2d stem;
    nn_layernorm stem_norm, norm;
    cswin_stage stages[MAX_STAGES];
    int n_stages;
    nn_linear head;
} cswin;

static void *cswin_build(model *m) {
    const model_config *c = &m->cfg;
    param_store *ps = &m->ps;
    cswin *net = xcalloc(1, sizeof(cswin));
    net->n_stages = c->n_stages;
    int C = c->embed_dim[0], R = (c->img_size + 4 - 7) / 4 + 1;
    nn_conv2d_init(&net->stem, ps, "stage1_conv_embed.0", c->in_chans, C, 7, 4, 2, 1, true);
    nn_layernorm_init(&net->stem_norm, ps, "stage1_conv_embed.2", C, 1e-5f);
    int total = 0, k = 0;
    for (int s = 0; s < c->n_stages; s++) total += c->depths[s];
    for (int s = 0; s < c->n_stages; s++) {
        cswin_stage *st = &net->stages[s];
        st->depth = c->depths[s];
        st->dim = C = c->embed_dim[s];
        st->res = R;
        bool last = s == c->n_stages - 1;
        for (int j = 0; j < st->depth; j++, k++) {
            cswin_block *b = &st->blocks[j];
            attn_kind kind = c->attn[s][j];
            int split = kind == ATTN_NATIVE ? c->split_size[s] : (c->attn_window[s] ? c->attn_window[s] : R);
            if (last || split >= R) split = R;
            if (R % split) {
                char path[64];
                snprintf(path, sizeof(path), kind == ATTN_NATIVE ? "model.split_size[%d]" : "model.attn_window[%d]", s);
                config_error(path, "stripe width %d does not divide the %dx%d map of stage %d", split, R, R, s);
            }
            b->split = split;
            /* ELFATT takes the block as one branch and splits the heads itself (elfatt.md §10.7) */
            b->n_branches = split == R || kind == ATTN_ELFATT ? 1 : 2;
            if (kind == ATTN_ELFATT) b->split = split = R;
            int heads = c->num_heads[s];
            if (b->n_branches == 2 && (heads % 2 || C % 2))
                config_error("model.num_heads", "stage %d: two stripe branches need an even head count, got %d", s, heads);
            char prefix[64];
            snprintf(prefix, sizeof(prefix), "stage%d.%d", s + 1, j);
            nn_linear_init(&b->qkv, ps, nn_name("%s.qkv", prefix), C, 3 * C, c->qkv_bias);
            nn_layernorm_init(&b->norm1, ps, nn_name("%s.norm1", prefix), C, 1e-5f);
            nn_linear_init(&b->proj, ps, nn_name("%s.proj", prefix), C, C, true);
            for (int br = 0; br < b->n_branches; br++) {
                /* branch 0: vertical R x split stripes; branch 1: horizontal split x R */
                int h = br == 0 ? R : split, w = br == 0 ? split : R;
                check_attn_grid(c, s, kind, h, w);
                attn_spec spec = {
                    .kind = kind, .dim = C / b->n_branches, .heads = heads / b->n_branches, .h = h,
                    .w = w, .hk = h, .wk = w, .flavour = NATIVE_GLOBAL, .n_windows = (R / h) * (R / w),
                    .agent_num = c->agent_num[s], .agent_bias = c->agent_bias, .dwc = c->dwc,
                    /* Agent-CSwin names its DWC get_v and adds no LePE; the others add LePE */
                    .dwc_name = kind == ATTN_AGENT ? "get_v" : "dwc",
                    .lepe = kind == ATTN_NATIVE || kind == ATTN_FLATTEN,
                    .elfatt_cswin_names = kind == ATTN_ELFATT,
                    .focusing_factor = (float)c->focusing_factor, .dwc_kernel = c->dwc_kernel,
                    .block_size = c->block_size[s], .block = k, .map_h = R, .map_w = R,
                };
                const char *name = kind == ATTN_ELFATT ? prefix : nn_name("%s.attns.%d", prefix, br);
                b->branch[br] = attn_create(ps, name, &spec);
            }
            nn_mlp_init(&b->mlp, ps, nn_name("%s.mlp", prefix), C, (int)(C * c->mlp_ratio[s]));
            nn_layernorm_init(&b->norm2, ps, nn_name("%s.norm2", prefix), C, 1e-5f);
            b->drop_path = drop_path_rate(c->drop_path, k, total);
        }
        if (!last) {
            int next = c->embed_dim[s + 1];
            nn_conv2d_init(&st->merge, ps, nn_name("merge%d.conv", s + 1), C, next, 3, 2, 1, 1, true);
            nn_layernorm_init(&st->merge_norm, ps, nn_name("merge%d.norm", s + 1), next, 1e-5f);
            R = (R + 2 - 3) / 2 + 1;
        }
    }
    nn_layernorm_init(&net->norm, ps, "norm", C, 1e-5f);
    nn_linear_init(&net->head, ps, "head", C, c->num_classes, true);
    return net;
}

/* branch br: the branch's channels of q, k and v projected from its stripes of norm1(x), each by
 * its own GEMM, one tape node (projections are per token, so they commute with the cut),
 * attention, stripes put back; the output's channel parts go to parts, their count is returned */
static int branch_forward(const cswin_block *b, int br, tensor *stripes, int R, tensor **parts) {
    attn *a = b->branch[br];
    int C = b->qkv.w->shape[1], h = a->spec.h, w = a->spec.w, Cb = C / b->n_branches;
    tensor *qkv[3];
    op_linear_strided_chunks(stripes, b->qkv.w, b->qkv.b, 3, Cb, br * Cb, C, qkv);
    int n = attn_forward_parts(a, qkv[0], qkv[1], qkv[2], parts);
    for (int i = 0; i < n; i++) {
        int Cp = parts[i]->shape[2];
        tensor *map = op_window_reverse(parts[i], R, R, h, w, 0);
        parts[i] = RESHAPE(map, map->shape[0], R * R, Cp);
    }
    return n;
}

static tensor *cswin_block_forward(const cswin_block *b, tensor *x, int R, const forward_opts *o) {
    /* two parts (two branches, or ELFATT's global and local heads) go into the projection as they
     * are, never concatenated */
    tensor *parts[2], *input = x; /* the output's storage in inference (op_mlp_residual's into) */
    int n = 0, B = x->shape[0], C = x->shape[2];
    float dp = o->train ? b->drop_path : 0.0f;
    /* the attention branches run on the samples their drop path keeps, on their stripes of one
     * norm1 */
    drop_path attn_dp = op_drop_path(dp, o->rng, B);
    int wh[2], ww[2];
    for (int br = 0; br < b->n_branches; br++)
        wh[br] = b->branch[br]->spec.h, ww[br] = b->branch[br]->spec.w;
    tensor *stripes[2];
    op_layernorm_window_sets(RESHAPE(x, B, R, R, C), b->norm1.w, b->norm1.b, b->norm1.eps,
                             b->n_branches, wh, ww, 0, &attn_dp, stripes);
    for (int br = 0; br < b->n_branches; br++)
        n += branch_forward(b, br, stripes[br], R, parts + n);
    x = n == 1 ? op_residual_linear(x, parts[0], b->proj.w, b->proj.b, false, &attn_dp)
               : op_residual_linear_split(x, parts[0], parts[1], b->proj.w, b->proj.b, &attn_dp);
    drop_path mlp_dp = op_drop_path(dp, o->rng, B);
    return nn_mlp_residual(&b->mlp, &b->norm2, x, &mlp_dp, input);
}

static tensor *cswin_forward(model *m, tensor *images, const forward_opts *o) {
    cswin *net = m->net;
    int B = images->shape[0];
    tensor *x = nn_conv2d_forward(&net->stem, images);
    x = nn_layernorm_forward(&net->stem_norm, RESHAPE(x, B, x->shape[1] * x->shape[2], x->shape[3]));
    for (int s = 0; s < net->n_stages; s++) {
        const cswin_stage *st = &net->stages[s];
        /* inference: each block's output is kept at the stage's mark, over the one before (the
         * block's input, read no more) */
        arena_mark mark = arena_get_mark(&vitc_arena);
        for (int j = 0; j < st->depth; j++) x = tensor_keep(&mark, cswin_block_forward(&st->blocks[j], x, st->res, o));
        if (s + 1 < net->n_stages) {
            tensor *y = nn_conv2d_forward(&st->merge, RESHAPE(x, B, st->res, st->res, st->dim));
            x = nn_layernorm_forward(&st->merge_norm, RESHAPE(y, B, y->shape[1] * y->shape[2], y->shape[3]));
        }
    }
    return model_classify(&net->head, op_mean(nn_layernorm_forward(&net->norm, x), 1, false), o);
}

static void cswin_destroy(void *p) {
    cswin *net = p;
    for (int s = 0; s < net->n_stages; s++)
        for (int j = 0; j < net->stages[s].depth; j++)
            for (int br = 0; br < net->stages[s].blocks[j].n_branches; br++)
                attn_destroy(net->stages[s].blocks[j].branch[br]);
    free(net);
}

const backbone backbone_cswin = {"cswin", cswin_build, cswin_forward, cswin_destroy,
                                 "stage1_conv_embed.0.weight"};
