/* A model: its resolved configuration, its parameters (official state_dict names, flat blocks) and
 * the backbone that builds and runs it. Images enter channels-last: (B, H, W, in_chans). */
#pragma once
#include <stdio.h>

#include "../src/core/config.h"
#include "../src/core/params.h"
#include "../src/core/safetensors.h"
#include "attn/attn.h"

#define MAX_STAGES 4
#define MAX_STAGE_BLOCKS 64

typedef struct model_config {
    char name[64]; /* registry name, e.g. agent_swin_t */
    char arch[16]; /* deit | pvt | pvt_v2 | swin | cswin | sit */
    int img_size, in_chans, num_classes, patch_size;
    int n_stages;
    int embed_dim[MAX_STAGES], depths[MAX_STAGES], num_heads[MAX_STAGES];
    double mlp_ratio[MAX_STAGES];
    attn_kind attn[MAX_STAGES][MAX_STAGE_BLOCKS]; /* per block */
    int agent_num[MAX_STAGES];  /* agents per stage (a perfect square) */
    int window[MAX_STAGES];     /* Swin window of native blocks (clipped to the stage map) */
    int attn_window[MAX_STAGES]; /* window / stripe of agent, flatten, elfatt blocks; 0 = whole map */
    int split_size[MAX_STAGES]; /* CSwin stripe width */
    int sr_ratio[MAX_STAGES];   /* PVT spatial reduction */
    int block_size[MAX_STAGES]; /* ELFATT blocks per side of the stage map */
    double focusing_factor;     /* FLatten p */
    int dwc_kernel;             /* FLatten DWC kernel */
    bool agent_bias, dwc;       /* ablation switches of agent/flatten attention */
    double drop_path, drop_rate;
    bool qkv_bias;
    char merge[8];              /* Swin downsampling: "patch" (2x2 merging) or "conv" */
    bool unused_norm;           /* PVT v1: declare FLatten-PVT's never-applied final norm */
    /* sit and dit only: img_size is the latent size, in_chans its channels */
    int mediator_num;           /* mediators of "mediator" (= agent) attention, a perfect square */
    bool learn_sigma;           /* final layer predicts 2 x in_chans channels, forward keeps the first half */
    double class_dropout_prob;  /* label dropout in training; > 0 adds the null class row num_classes */
} model_config;

/* Reads the model section of a config (model.name picks registry defaults already merged by
 * model_config_defaults). Every inconsistency is an error naming its JSON path. */
void model_config_read(model_config *mc, config *c);
/* The JSON defaults of a registered model name (NULL if unknown). */
const char *model_registry_defaults(const char *name);
/* Merges the registry defaults of model.name under the config (call before the file's own keys are
 * merged, or use model_config_load). */
void model_config_load(config *c, const char *const *files, int n_files, const char *const *sets,
                       int n_sets);
/* Merges one JSON text (a checkpoint's config) under the registry defaults of its model.name when
 * it names a registered model without describing it (no model.arch): converted checkpoints. */
void model_config_load_text(config *c, const char *json, const char *source);
/* Number of registered model names and the i-th one. */
int model_registry_count(void);
const char *model_registry_name(int i);

typedef struct model model;

typedef struct forward_opts {
    bool train; /* drop path / dropout (sit: label dropout) active */
    rng *rng;   /* their random stream */
    /* conditioning of the diffusion backbone (sit), ignored by the classifiers: per sample a time in
     * [0, 1] (0 noise, 1 data) and a class label in [0, num_classes] (num_classes: the null class of
     * classifier-free guidance). NULL: t = 0, the null label (class 0 without a null row). */
    const float *t;
    const int *y;
    /* classifiers: when set, the representation the head reads (B x its input width: the class
     * token or the mean token after the final norm) is copied here, e.g. for the Frechet distance
     * of generated samples */
    float *features;
    /* DeiT runs its last block's projection and MLP on the class token alone, the only row its head
     * reads; set, it runs them on every token, as the official code does (MAC counts as theirs) */
    bool every_token;
} forward_opts;

typedef struct backbone {
    const char *arch;
    /* declares every parameter into m->ps (official names) and returns the network state */
    void *(*build)(model *m);
    /* images (B, H, W, in_chans) -> logits (B, num_classes); sit: latents (B, H, W, in_chans) ->
     * the velocity (B, H, W, in_chans), channels-last as its input (learn_sigma's second half dropped) */
    tensor *(*forward)(model *m, tensor *images, const forward_opts *o);
    void (*destroy)(void *net);
    /* the convolution that reads the images (timm's pretrained_cfg "first_conv"); NULL: none to
     * adapt to other input channels at a fine-tuning's start */
    const char *first_conv;
} backbone;

struct model {
    model_config cfg;
    param_store ps;
    const backbone *bb;
    void *net;
};

/* A classifier's last step: logits = head(pooled), pooled (B, C) also copied to o->features */
struct nn_linear;
tensor *model_classify(const struct nn_linear *head, tensor *pooled, const forward_opts *o);

/* Builds the model of a resolved config; parameters are allocated and initialised from seed. */
model *model_create(const model_config *cfg, uint64_t seed);
/* The model a checkpoint's or fixture's config JSON describes (registry names resolved); the config
 * is left in c (initialised here) for the caller's other sections. */
model *model_create_from_json(config *c, const char *json, const char *source, uint64_t seed);
tensor *model_forward(model *m, tensor *images, const forward_opts *o);
/* Declares the parameters of cfg into ps without allocating them (counts, key lists); free ps with
 * params_free. */
void model_declare(const model_config *cfg, param_store *ps);
void model_free(model *m);

/* Loads every parameter from the tensors named prefix + parameter name (float32/16, bf16 converted).
 * Every missing, unexpected (under prefix) or mis-shaped tensor is listed in report, one per line;
 * returns false if there was any. */
bool model_load_state(model *m, const st_file *f, const char *prefix, char *report, size_t len);
/* The same for a fine-tuning's start: a classifier whose head the file lacks keeps the head's
 * initial values; with head_rows (a class map: a row of the file's head for each class) its head
 * takes those rows; without, one whose head the file holds for other classes starts as its official
 * fine-tuning starts it (0 for Swin and any model with Agent or FLatten attention, else the initial
 * values). A tensor laid over the input's grid for another input size or window is resized to the
 * model's, as the official fine-tuning scripts do (grid_resample.h: a diffusion model's as the
 * Attention Mediators' script), a frozen one (SiT's sin-cos pos_embed) for another grid keeps the
 * model's own values, and the first convolution of an RGB model is summed over its channels for
 * gray images, as timm does; note says which, in a sentence ("" where every tensor loaded as it
 * is). */
bool model_load_backbone(model *m, const st_file *f, const char *prefix, const int *head_rows,
                         char *note, size_t note_len, char *report, size_t len);

/* MACs of one forward of one image at the configured size (fvcore-style, see op_macs). */
double model_macs(model *m);
/* Prints the module tree with parameter counts, the MACs and the training-step activation memory. */
void model_summary(model *m, FILE *f);

/* Rejects (naming model.agent_num[stage]) agents that cannot be pooled from an h x w grid. */
void check_attn_grid(const model_config *c, int stage, attn_kind kind, int h, int w);

/* Drop-path rate of block k of n: linear from 0 to rate (torch.linspace). */
float drop_path_rate(double rate, int k, int n);

extern const backbone backbone_deit, backbone_pvt, backbone_pvt_v2, backbone_swin, backbone_cswin,
    backbone_sit, backbone_dit;
/* model.arch "sit" or "dit": a diffusion network (images and t in, velocity or noise out), not a
 * classifier */
bool model_is_diffusion(const model_config *mc);
/* SiT's fixed 2-D sin-cos pos_embed, which no init scheme expresses (model_create sets it) */
void sit_init_pos_embed(model *m);
