#include "attn_map.h"

#include "../../src/core/check.h"
#include "../../src/core/memory.h"
#include "../../src/core/tape.h"
#include "../../src/ops/backend.h"

static attn_probe *active;

void attn_probe_set(attn_probe *probe) { active = probe; }
bool attn_probe_active(void) { return active != NULL; }

void attn_probe_free(attn_probe *probe) {
    free(probe->row);
    probe->row = NULL;
}

/* (sequence, token) of the map cell (y, x): the windows tile the map rolled by -shift */
static void cell_to_token(const attn_spec *s, int map_w, int map_h, int rows, int cols, int y, int x,
                          int *seq, int *token) {
    int ry = ((y - s->shift) % map_h + map_h) % map_h, rx = ((x - s->shift) % map_w + map_w) % map_w;
    *seq = (ry / rows) * (map_w / cols) + rx / cols;
    *token = (s->cls ? 1 : 0) + (ry % rows) * cols + rx % cols;
}

void attn_probe_record(attn *a, tensor *q, tensor *k, tensor *v) {
    attn_probe *p = active;
    const attn_spec *s = &a->spec;
    if (!p || s->block != p->block) return;
    int mh = s->map_h ? s->map_h : s->h, mw = s->map_w ? s->map_w : s->w;
    int kh = mh / s->h * s->hk, kw = mw / s->w * s->wk; /* keys tile their own (reduced) map */
    int n_seq = (mh / s->h) * (mw / s->w), off = s->cls ? 1 : 0;
    CHECK(q->shape[0] == n_seq, "attention map: %d sequences in block %d, expected %d (one image)",
          q->shape[0], s->block, n_seq);
    if (!p->row) {
        p->row = xcalloc((size_t)kh * kw, sizeof(float));
        p->map_h = kh, p->map_w = kw, p->kind = s->kind;
    }
    CHECK(p->map_h == kh && p->map_w == kw, "attention map: block %d mixes key grids", s->block);
    int qy = (int)(p->qy * mh), qx = (int)(p->qx * mw), seq, token;
    qy = qy < 0 ? 0 : qy >= mh ? mh - 1 : qy;
    qx = qx < 0 ? 0 : qx >= mw ? mw - 1 : qx;
    p->query_y = qy, p->query_x = qx, p->query_h = mh, p->query_w = mw;
    cell_to_token(s, mw, mh, s->h, s->w, qy, qx, &seq, &token);

    /* d(mean over channels of out[seq, token]) / dV, with the local convs switched off */
    bool grad_was = tape_set_grad_enabled(true);
    tensor *vl = tensor_new(v->ndim, v->shape);
    vitc_memory()->copy(vl->data, v->data, sizeof(float) * (size_t)v->numel);
    vl->requires_grad = true;
    attn_spec keep = a->spec;
    a->spec.dwc = false;
    tensor *out = a->impl->forward(a, q, k, vl);
    a->spec = keep;
    int n = out->shape[1], C = out->shape[2], m = v->shape[1], Cv = v->shape[2];
    float *seed = xcalloc((size_t)out->numel, sizeof(float)); /* on the host: the backward uploads it */
    for (int c = 0; c < C; c++) seed[((size_t)seq * n + token) * C + c] = 1.0f / (float)C;
    tape_backward_from(out, seed);
    free(seed);
    tape_reset();
    tape_set_grad_enabled(grad_was);

    float *g_host = xmalloc(sizeof(float) * (size_t)vl->numel);
    const float *g = backend_read(g_host, tensor_grad(vl), vl->numel);
    float *add = xcalloc((size_t)kh * kw, sizeof(float)), cls_add = 0;
    for (int b = 0; b < n_seq; b++)
        for (int j = 0; j < m; j++) {
            float w = 0;
            for (int c = 0; c < Cv; c++) w += g[((size_t)b * m + j) * Cv + c];
            if (j < off) {
                cls_add += w;
                continue;
            }
            int t = j - off, ty = t / s->wk, tx = t % s->wk;
            int y = (b / (mw / s->w)) * s->hk + ty, x = (b % (mw / s->w)) * s->wk + tx;
            add[(y + s->shift) % kh * kw + (x + s->shift) % kw] += w;
        }
    /* the block's row is the mean over its cores (CSwin's two branches hold half the heads each) */
    p->hits++;
    for (int i = 0; i < kh * kw; i++) p->row[i] += (add[i] - p->row[i]) / (float)p->hits;
    p->cls_weight += (cls_add - p->cls_weight) / (float)p->hits;
    free(add);
    free(g_host);
}
