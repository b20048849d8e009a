/* ELFATT (efficient linear fast attention; no official code — elfatt.md's reading): the heads split
 * into global linear heads (floor(h/2): softmax of Q over features, softmax of K over tokens,
 * out = Q̂ (K̂ᵀ V), no scale) and block-local softmax heads (exact attention inside block_size x
 * block_size 2-D blocks, scale d^-1/2), each with a LePE (depthwise 3x3 on V: over the whole map for
 * the global heads, per block for the local ones), concatenated [global | local]. Names: one
 * "lepe" conv over all channels (Swin host), or CSwin's "attns.0.get_v" / "attns.1.get_v" halves.
 * With a class token (DeiT; our proposal, ELFATT defines none): it is an ordinary token of the
 * global heads, its own one-token block in the local heads (output = its value), and gets no LePE.
 * model.dwc false drops the LePE (an ablation). */
#include <math.h>

#include "../../src/core/check.h"
#include "../../src/nn/layers.h"
#include "attn.h"

typedef struct elfatt_attn {
    attn base;
    int global_heads, global_dim;
    nn_conv2d lepe, lepe_local; /* lepe covers all channels unless the CSwin names split it */
    bool split_lepe;
} elfatt_attn;

static attn *elfatt_create(param_store *ps, const char *prefix, const attn_spec *s) {
    elfatt_attn *a = xcalloc(1, sizeof(elfatt_attn));
    int C = s->dim, d = C / s->heads;
    CHECK(s->heads >= 2, "%s: ELFATT needs at least 2 heads (global and local), got %d", prefix, s->heads);
    CHECK(s->hk == s->h && s->wk == s->w, "%s: ELFATT needs keys on the query grid (sr_ratio 1)", prefix);
    a->global_heads = s->heads / 2;
    a->global_dim = a->global_heads * d;
    a->split_lepe = s->elfatt_cswin_names;
    if (a->split_lepe)
        CHECK(2 * a->global_dim == C, "%s: CSwin-hosted ELFATT needs an even head count, got %d", prefix, s->heads);
    if (!s->dwc) return &a->base; /* the LePE ablation: model.dwc false */
    if (a->split_lepe) {
        nn_conv2d_init(&a->lepe, ps, nn_name("%s.attns.0.get_v", prefix), C / 2, C / 2, 3, 1, 1, C / 2, true);
        nn_conv2d_init(&a->lepe_local, ps, nn_name("%s.attns.1.get_v", prefix), C / 2, C / 2, 3, 1, 1, C / 2, true);
    } else {
        nn_conv2d_init(&a->lepe, ps, nn_name("%s.lepe", prefix), C, C, 3, 1, 1, C, true);
    }
    return &a->base;
}

/* base + the LePE of x's channels [x_c0, x_c0 + n) with kernels [from, from + n) of one conv, or with
 * a conv of its own, written into base */
static tensor *lepe_part(const nn_conv2d *c, tensor *x, int x_c0, int from, int n, tensor *base) {
    if (c->w->shape[0] == n) return op_dwconv2d_add_into(x, x_c0, n, c->w, c->b, base);
    return op_dwconv2d_add_into(x, x_c0, n, op_slice(c->w, 0, from, n), op_slice(c->b, 0, from, n), base);
}

/* parts [global | local] without a class token; with one, the single concatenated output */
static int elfatt_parts(attn *base, tensor *q, tensor *k, tensor *v, tensor *parts[2]) {
    elfatt_attn *a = (elfatt_attn *)base;
    const attn_spec *s = &base->spec;
    int b = q->shape[0], n = q->shape[1], C = q->shape[2], H = s->heads, off = s->cls ? 1 : 0;
    int hg = a->global_heads, C1 = a->global_dim, C2 = C - C1, d = C / H, np = n - off;
    int bh = s->h / s->block_size, bw = s->w / s->block_size, nb = s->block_size * s->block_size;
    CHECK(np == s->h * s->w && bh * s->block_size == s->h && bw * s->block_size == s->w,
          "elfatt: %d tokens, %dx%d grid, %d blocks per side", n, s->h, s->w, s->block_size);
    /* global heads: softmax(Q) over features, softmax(K) over tokens (K̂ᵀ directly), linear in n */
    tensor *global = op_softmax_linear_attention(q, k, v, hg, 0, C1);
    if (s->dwc) {
        tensor *vp = off ? op_slice(v, 1, off, np) : v;
        tensor *patches = RESHAPE(off ? op_slice(global, 1, off, np) : global, b, s->h, s->w, C1);
        patches = RESHAPE(lepe_part(&a->lepe, RESHAPE(vp, b, s->h, s->w, C), 0, 0, C1, patches), b, np, C1);
        global = off ? op_concat(2, (tensor *[]){op_slice(global, 1, 0, off), patches}, 1) : patches;
    }
    /* local heads: exact softmax attention inside each block, LePE zero-padded at block borders;
     * the blocks of q and k feed only attention's products (bf16 under --precision bf16), v's
     * the LePE too */
    tensor *blk[3];
    for (int i = 0; i < 3; i++) {
        tensor *t = i == 0 ? q : i == 1 ? k : v;
        if (off) t = op_slice(t, 1, off, np);
        t = RESHAPE(t, b, s->h, s->w, C);
        blk[i] = i < 2 ? op_window_partition_channels_bf16(t, C1, C2, bh, bw, 0)
                       : op_window_partition_channels(t, C1, C2, bh, bw, 0);
    }
    tensor *local = op_attention(blk[0], blk[1], blk[2], H - hg, 1.0f / sqrtf((float)d), NULL, NULL, 1);
    if (s->dwc) {
        const nn_conv2d *lc = a->split_lepe ? &a->lepe_local : &a->lepe;
        tensor *sum = lepe_part(lc, RESHAPE(blk[2], b * nb, bh, bw, C2), 0, C1, C2, RESHAPE(local, b * nb, bh, bw, C2));
        local = RESHAPE(sum, b * nb, bh * bw, C2);
    }
    local = RESHAPE(op_window_reverse(local, s->h, s->w, bh, bw, 0), b, np, C2);
    if (off) { /* the class token alone in its block: its output is its own value */
        local = op_concat(2, (tensor *[]){op_slice(op_slice(v, 2, C1, C2), 1, 0, 1), local}, 1);
        parts[0] = op_concat(2, (tensor *[]){global, local}, 2);
        return 1;
    }
    parts[0] = global, parts[1] = local;
    return 2;
}

static tensor *elfatt_forward(attn *base, tensor *q, tensor *k, tensor *v) {
    tensor *parts[2];
    return elfatt_parts(base, q, k, v, parts) == 1 ? parts[0] : op_concat(2, parts, 2);
}

static void elfatt_destroy(attn *base) { free(base); }

const attn_impl attn_elfatt_impl = {"elfatt", elfatt_create, elfatt_forward, elfatt_destroy, elfatt_parts};
