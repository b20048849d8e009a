/* SiT (Ma et al. 2024; the DiT architecture of Peebles & Xie) as LeapLabTHU/Attention-Mediators
 * builds it: patchified latents plus a fixed 2-D sin-cos position embedding, a condition c =
 * t-embedding + label embedding (with the classifier-free-guidance null class), adaLN-Zero blocks
 * whose attention is softmax ("native") or AttentionWithMediators ("mediator": the agent core,
 * models/attn/agent.c, over the whole token grid), and an adaLN final layer unpatchified back to
 * the latent grid. Channels-last throughout: latents (B, H, W, C) in, the velocity (B, H, W, C)
 * out. No dropout or drop path (SiT has none); the label dropout of training runs here as in the
 * official LabelEmbedder. model.arch "dit" is the same network as DiT's code returns it: all of the
 * final layer's channels, eps and (learn_sigma) the variance values, (B, H, W, 2C); its t is DiT's
 * integer time step, fed to the same sinusoid. */
#include <math.h>
#include <string.h>

#include "../src/core/arena.h"
#include "../src/core/check.h"
#include "../src/core/memory.h"
#include "../src/nn/layers.h"
#include "../src/ops/adaln.h"
#include "model.h"

#define FREQ_DIM 256 /* the sinusoid of t fed to the t-embedder MLP */

typedef struct sit_block {
    attn *core;
    nn_linear qkv, proj, fc1, fc2, ada; /* ada: adaLN_modulation.1, D -> 6D */
} sit_block;

typedef struct sit {
    tensor *pos_embed;      /* (1, G*G, D), frozen */
    nn_conv2d x_embed;      /* x_embedder.proj */
    nn_linear t_fc1, t_fc2; /* t_embedder.mlp.0 / .2 */
    tensor *y_table;        /* y_embedder.embedding_table.weight (num_classes [+ 1], D) */
    sit_block blocks[MAX_STAGE_BLOCKS];
    nn_linear final_linear, final_ada;
    int depth, dim, grid, patch, in_chans, out_chans, classes, rows;
    bool whole_output; /* dit: forward returns every channel of the final layer */
} sit;

/* nn.Linear with DiT's _basic_init: xavier_uniform_ weight (U(±sqrt(6 / (in + out)))), zero bias */
static void xavier_linear(nn_linear *l, param_store *ps, const char *name, int in, int out,
                          bool bias) {
    nn_linear_init(l, ps, name, in, out, bias);
    params_set_init(ps, l->w, INIT_UNIFORM, sqrtf(6.0f / (float)(in + out)));
}

static void zero_linear(nn_linear *l, param_store *ps, const char *name, int in, int out) {
    nn_linear_init(l, ps, name, in, out, true);
    params_set_init(ps, l->w, INIT_ZEROS, 0);
}

static void *sit_build(model *m) {
    const model_config *c = &m->cfg;
    param_store *ps = &m->ps;
    if (c->n_stages != 1) config_error("model.depths", "SiT has one stage, got %d", c->n_stages);
    if (c->img_size % c->patch_size)
        config_error("model.patch_size", "%d does not divide the latent size img_size %d",
                     c->patch_size, c->img_size);
    if (c->embed_dim[0] % 4)
        config_error("model.embed_dim",
                     "%d is not a multiple of 4 (the 2-D sin-cos position embedding)",
                     c->embed_dim[0]);
    if (c->drop_path > 0)
        config_error("model.drop_path", "SiT has no drop path (got %g)", c->drop_path);
    if (c->drop_rate > 0)
        config_error("model.drop_rate", "SiT has no dropout (got %g)", c->drop_rate);
    sit *s = xcalloc(1, sizeof(sit));
    int D = s->dim = c->embed_dim[0], p = s->patch = c->patch_size, C = s->in_chans = c->in_chans;
    int G = s->grid = c->img_size / p;
    s->depth = c->depths[0];
    s->out_chans = c->learn_sigma ? 2 * C : C;
    s->whole_output = !strcmp(c->arch, "dit");
    s->classes = c->num_classes;
    s->rows = c->num_classes + (c->class_dropout_prob > 0); /* + the null class */
    int pool = 0;
    while ((pool + 1) * (pool + 1) <= c->mediator_num) pool++;
    for (int i = 0; i < s->depth; i++) {
        attn_kind k = c->attn[0][i];
        if (k != ATTN_NATIVE && k != ATTN_AGENT)
            config_error("model.attn",
                         "SiT takes \"native\" or \"mediator\" attention, block %d has \"%s\"", i,
                         attn_names[k]);
        if (k == ATTN_AGENT && pool * pool != c->mediator_num)
            config_error("model.mediator_num",
                         "%d is not a perfect square (mediators are pooled on a p x p grid)",
                         c->mediator_num);
        if (k == ATTN_AGENT && pool > G)
            config_error("model.mediator_num",
                         "%d mediators pool to %dx%d, larger than the %dx%d token grid",
                         c->mediator_num, pool, pool, G, G);
    }
    /* declared in the official state_dict order (the module's own pos_embed first) */
    s->pos_embed = PARAM(ps, "pos_embed", 1, G * G, D);
    /* nn.Parameter(requires_grad=False): counted in the parameters, never trained */
    s->pos_embed->requires_grad = false;
    nn_conv2d_init(&s->x_embed, ps, "x_embedder.proj", C, D, p, p, 0, 1, true);
    /* xavier_uniform_ on the (D, C p²) view, bias 0 */
    params_set_init(ps, s->x_embed.w, INIT_UNIFORM, sqrtf(6.0f / (float)(C * p * p + D)));
    params_set_init(ps, s->x_embed.b, INIT_ZEROS, 0);
    nn_linear_init(&s->t_fc1, ps, "t_embedder.mlp.0", FREQ_DIM, D, true); /* weights N(0, 0.02) */
    nn_linear_init(&s->t_fc2, ps, "t_embedder.mlp.2", D, D, true);
    s->y_table = PARAM(ps, "y_embedder.embedding_table.weight", s->rows, D);
    params_set_init(ps, s->y_table, INIT_TRUNC_NORMAL, 0.02f);
    int hidden = (int)(D * c->mlp_ratio[0]);
    for (int i = 0; i < s->depth; i++) {
        sit_block *b = &s->blocks[i];
        /* the mediators are the agent core over the whole G x G grid, no class token */
        attn_spec spec = {.kind = c->attn[0][i], .dim = D, .heads = c->num_heads[0], .h = G, .w = G,
                          .hk = G, .wk = G, .cls = false, .flavour = NATIVE_GLOBAL, .n_windows = 1,
                          .agent_num = c->mediator_num, .agent_bias = true, .dwc = true,
                          .dwc_name = "dwc", .block = i};
        b->core = attn_create(ps, nn_name("blocks.%d.attn", i), &spec);
        xavier_linear(&b->qkv, ps, nn_name("blocks.%d.attn.qkv", i), D, 3 * D, c->qkv_bias);
        xavier_linear(&b->proj, ps, nn_name("blocks.%d.attn.proj", i), D, D, true);
        xavier_linear(&b->fc1, ps, nn_name("blocks.%d.mlp.fc1", i), D, hidden, true);
        xavier_linear(&b->fc2, ps, nn_name("blocks.%d.mlp.fc2", i), hidden, D, true);
        zero_linear(&b->ada, ps, nn_name("blocks.%d.adaLN_modulation.1", i), D, 6 * D);
    }
    zero_linear(&s->final_linear, ps, "final_layer.linear", D, p * p * s->out_chans);
    zero_linear(&s->final_ada, ps, "final_layer.adaLN_modulation.1", D, 2 * D);
    return s;
}

/* pos_embed = the 2-D sin-cos table of the G x G grid: for token (row r, col q) and k < D/4 with
 * w_k = 10000^(-k / (D/4)): [sin(q w_k) | cos(q w_k) | sin(r w_k) | cos(r w_k)], the column first
 * (MAE's get_2d_sincos_pos_embed, in float64 as numpy, stored as float32) */
void sit_init_pos_embed(model *m) {
    sit *s = m->net;
    int G = s->grid, D = s->dim, Q = D / 4;
    for (int r = 0; r < G; r++)
        for (int q = 0; q < G; q++) {
            float *e = s->pos_embed->data + ((int64_t)r * G + q) * D;
            for (int k = 0; k < Q; k++) {
                double w = 1.0 / pow(10000.0, (double)k / Q);
                e[k] = (float)sin(q * w), e[Q + k] = (float)cos(q * w);
                e[2 * Q + k] = (float)sin(r * w), e[3 * Q + k] = (float)cos(r * w);
            }
        }
}

/* the condition c = t_embedder(t) + y_embedder(y) (B, D) */
static tensor *condition(sit *s, const model_config *c, int B, const forward_opts *o) {
    /* the sinusoid is computed on the host (t is a host array) and moved to where tensors live */
    float *sinusoid = arena_alloc(&vitc_arena, sizeof(float) * (size_t)B * FREQ_DIM);
    int half = FREQ_DIM / 2, labels[B];
    for (int b = 0; b < B; b++) {
        float t = o->t ? o->t[b] : 0.0f;
        for (int i = 0; i < half; i++) { /* cos first, then sin (GLIDE's timestep_embedding) */
            float a = t * expf(-logf(10000.0f) * (float)i / (float)half);
            sinusoid[b * FREQ_DIM + i] = cosf(a);
            sinusoid[b * FREQ_DIM + half + i] = sinf(a);
        }
        labels[b] = o->y ? o->y[b] : (s->rows > s->classes ? s->classes : 0);
        const char *null_note = s->rows > s->classes ? " (the last is the null class)" : "";
        CHECK(labels[b] >= 0 && labels[b] < s->rows, "%s: label %d of sample %d outside [0, %d]%s",
              c->name, labels[b], b, s->rows - 1, null_note);
    }
    if (o->train && c->class_dropout_prob > 0) {
        /* classifier-free guidance training: each label becomes the null class with probability
         * p, drawn from the sample's own stream (keyed by its index in the whole batch, as drop
         * path) */
        CHECK(o->rng, "%s: label dropout (class_dropout_prob %g) needs a random stream", c->name,
              c->class_dropout_prob);
        uint64_t key = rng_u64(o->rng);
        for (int b = 0; b < B; b++) {
            rng g;
            rng_seed(&g, key + (uint64_t)(o->rng->first_sample + b), RNG_DROPOUT);
            if (rng_uniform_f64(&g) < c->class_dropout_prob) labels[b] = s->classes;
        }
    }
    tensor *freq = TENSOR(B, FREQ_DIM);
    vitc_memory()->from_host(freq->data, sinusoid, sizeof(float) * (size_t)B * FREQ_DIM);
    tensor *t_emb = nn_linear_forward(&s->t_fc2, op_silu(nn_linear_forward(&s->t_fc1, freq)));
    return op_add(t_emb, op_embedding(s->y_table, labels, B));
}

static tensor *sit_forward(model *m, tensor *images, const forward_opts *o) {
    sit *s = m->net;
    int B = images->shape[0], D = s->dim, G = s->grid, N = G * G, p = s->patch;
    /* SiLU(c) is the input of every adaLN_modulation (each block's own SiLU computes the same) */
    tensor *cond = op_silu(condition(s, &m->cfg, B, o));
    tensor *x = RESHAPE(nn_conv2d_forward(&s->x_embed, images), B, N, D);
    x = op_add(x, s->pos_embed);
    /* inference: each block's output is kept at this mark, over the one before (the block's
     * input, read no more) */
    arena_mark mark = arena_get_mark(&vitc_arena);
    for (int i = 0; i < s->depth; i++) {
        sit_block *b = &s->blocks[i];
        tensor *mod[6]; /* shift, scale, gate of the attention; shift, scale, gate of the MLP */
        nn_linear_chunks(&b->ada, cond, 6, mod);
        tensor *qkv[3];
        nn_linear_chunks(&b->qkv, op_layernorm_modulate(x, mod[0], mod[1], 1e-6f), 3, qkv);
        tensor *a = nn_linear_forward(&b->proj, attn_forward(b->core, qkv[0], qkv[1], qkv[2]));
        x = op_gated_residual(x, mod[2], a);
        tensor *h = nn_linear_forward(&b->fc1, op_layernorm_modulate(x, mod[3], mod[4], 1e-6f));
        x = op_gated_residual(x, mod[5], nn_linear_forward(&b->fc2, op_gelu_tanh(h)));
        x = tensor_keep(&mark, x);
    }
    tensor *fm[2]; /* shift, scale */
    nn_linear_chunks(&s->final_ada, cond, 2, fm);
    x = nn_linear_forward(&s->final_linear, op_layernorm_modulate(x, fm[0], fm[1], 1e-6f));
    /* unpatchify: token (r, q) holds its p x p pixels as [pr][pc][channel], the pixel
     * (r p + pr, q p + pc); (B G, q, pr, pc, Co) -> (B G, pr, q, pc, Co) */
    int Co = s->out_chans;
    x = op_permute(RESHAPE(x, B * G, G, p, p, Co), (int[]){0, 2, 1, 3, 4});
    x = RESHAPE(x, B, G * p, G * p, Co);
    /* SiT with learn_sigma: the first half (the official forward drops the rest) */
    return Co == s->in_chans || s->whole_output ? x : op_slice(x, 3, 0, s->in_chans);
}

static void sit_destroy(void *net) {
    sit *s = net;
    for (int i = 0; i < s->depth; i++) attn_destroy(s->blocks[i].core);
    free(s);
}

const backbone backbone_sit = {"sit", sit_build, sit_forward, sit_destroy, NULL};
const backbone backbone_dit = {"dit", sit_build, sit_forward, sit_destroy, NULL};
