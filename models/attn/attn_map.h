/* Attention maps (eval --attn-map): the attention that one query token pays to every key of the
 * image, in one block. Every variant is linear in V once Q and K are fixed — out_i = Σ_j A_ij v_j,
 * with A the softmax matrix, the product of Agent attention's two softmaxes, FLatten's normalised
 * kernel products or ELFATT's global/block-local mixture — so the equivalent row A_i is the gradient
 * of out_i with respect to V, averaged over heads. The depthwise convs (Agent/FLatten DWC, ELFATT
 * and CSwin LePE) are local filters, not attention, and are left out. */
#pragma once
#include "attn.h"

typedef struct attn_probe {
    int block;          /* which block (counting over all stages from 0) */
    float qy, qx;       /* the query's position as a fraction of the map, in [0, 1) */
    /* results */
    int map_h, map_w;   /* the key grid of the block (the stage's map, or PVT's reduced one) */
    float *row;         /* map_h * map_w weights on the keys (xmalloc'd; attn_probe_free) */
    float cls_weight;   /* weight on the class token (DeiT) */
    int query_h, query_w; /* the stage's map of queries (the key grid unless PVT reduces keys) */
    int query_y, query_x; /* the query's cell on it */
    int hits;           /* cores that contributed (CSwin's two stripe branches: 2) */
    attn_kind kind;
} attn_probe;

/* While set, attn_forward records into probe (NULL stops); the model must run one image. */
void attn_probe_set(attn_probe *probe);
/* Called by attn_forward: records if a is in the probed block. */
void attn_probe_record(attn *a, tensor *q, tensor *k, tensor *v);
bool attn_probe_active(void);
void attn_probe_free(attn_probe *probe);
