/* Attention cores: one interface for every variant. The backbone owns the input and output
 * projections (their official names differ per backbone) and hands the core the projected q, k, v
 * with heads merged; the core returns the attention output before the output projection. A core
 * declares its own parameters (agent biases, DWC, temperatures, position tables) under the
 * backbone's prefix. */
#pragma once
#include "../../src/core/params.h"
#include "../../src/nn/layers.h"
#include "../../src/ops/ops.h"

typedef enum { ATTN_NATIVE, ATTN_AGENT, ATTN_FLATTEN, ATTN_ELFATT, ATTN_KIND_COUNT } attn_kind;

/* The native (softmax) attention comes in the backbone's flavour. */
typedef enum {
    NATIVE_GLOBAL, /* DeiT / PVT / CSwin: all tokens of the sequence (PVT keys may be reduced) */
    NATIVE_WINDOW, /* Swin: relative position bias, optional shift mask */
} native_flavour;

typedef struct attn_spec {
    attn_kind kind;
    int dim, heads;         /* channels of q/k/v given to the core, heads */
    int h, w;               /* query grid of one sequence (window, stripe or map) */
    int hk, wk;             /* key/value grid (differs from h, w only with PVT spatial reduction) */
    bool cls;               /* token 0 of q, k, v is a class token (DeiT) */
    native_flavour flavour; /* ATTN_NATIVE only */
    const float *mask;      /* NATIVE_WINDOW: additive mask (n_windows, h*w, h*w), or NULL */
    int n_windows;          /* windows per image (the batch of sequences is (B, n_windows)) */
    int agent_num;          /* ATTN_AGENT */
    bool agent_bias, dwc;   /* ATTN_AGENT / ATTN_FLATTEN ablation switches */
    const char *dwc_name;   /* "dwc" (or CSwin's "get_v") */
    float focusing_factor;  /* ATTN_FLATTEN */
    int dwc_kernel;         /* ATTN_FLATTEN */
    int block_size;         /* ATTN_ELFATT: blocks per side */
    bool lepe;              /* CSwin: + get_v(v), a depthwise 3x3 conv of V over the window */
    bool elfatt_cswin_names; /* ATTN_ELFATT in CSwin: LePE halves named attns.0/1.get_v */
    /* Where the sequences lie, for attention maps (attn_map.h): the block's index in the network,
     * and the stage's map, which the h x w windows tile row-major after a roll by -shift
     * (map_h = map_w = 0: the map is one h x w sequence). */
    int block, map_h, map_w, shift;
} attn_spec;

typedef struct attn attn;
typedef struct attn_impl attn_impl;

/* Every core's state begins with this. */
struct attn {
    const attn_impl *impl;
    attn_spec spec;
    nn_conv2d lepe; /* spec.lepe: declared and applied here, for any core */
};

struct attn_impl {
    const char *name;
    attn *(*create)(param_store *ps, const char *prefix, const attn_spec *spec);
    /* q (b, n, C), k, v (b, m, C) -> (b, n, C) */
    tensor *(*forward)(attn *a, tensor *q, tensor *k, tensor *v);
    void (*destroy)(attn *a);
    /* optional: the output as channel parts (returns how many, at most 2) whose concatenation is
     * forward's, for a projection that takes the parts as they are (op_residual_linear_split) */
    int (*forward_parts)(attn *a, tensor *q, tensor *k, tensor *v, tensor *parts[2]);
};

extern const attn_impl *const attn_registry[ATTN_KIND_COUNT];
extern const char *const attn_names[]; /* NULL-terminated, indexed by attn_kind */

attn *attn_create(param_store *ps, const char *prefix, const attn_spec *spec);
tensor *attn_forward(attn *a, tensor *q, tensor *k, tensor *v);
/* attn_forward as channel parts (1 or 2): the core's own when it has them, else the whole output */
int attn_forward_parts(attn *a, tensor *q, tensor *k, tensor *v, tensor *parts[2]);
void attn_destroy(attn *a);

/* Helpers every core uses: (b, n, C) <-> (b, heads, n, C/heads). */
tensor *attn_split_heads(tensor *x, int heads);
tensor *attn_merge_heads(tensor *x);
