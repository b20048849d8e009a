/* Model construction and the backbone dispatch. */
#include "model.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../src/core/check.h"
#include "../src/core/memory.h"
#include "../src/nn/layers.h"
#include "grid_resample.h"

static const backbone *const backbones[] = {&backbone_deit, &backbone_swin, &backbone_pvt,
                                            &backbone_pvt_v2, &backbone_cswin, &backbone_sit,
                                            &backbone_dit};

static const backbone *find_backbone(const model_config *cfg) {
    for (size_t i = 0; i < sizeof(backbones) / sizeof(backbones[0]); i++)
        if (strcmp(backbones[i]->arch, cfg->arch) == 0) return backbones[i];
    config_error("model.arch", "backbone \"%s\" is not available in this build", cfg->arch);
}

bool model_is_diffusion(const model_config *mc) {
    return !strcmp(mc->arch, "sit") || !strcmp(mc->arch, "dit");
}

void model_declare(const model_config *cfg, param_store *ps) {
    model m = {.cfg = *cfg, .bb = find_backbone(cfg)};
    params_init(&m.ps);
    m.bb->destroy(m.bb->build(&m));
    *ps = m.ps;
}

model *model_create(const model_config *cfg, uint64_t seed) {
    const backbone *bb = find_backbone(cfg);
    model *m = xcalloc(1, sizeof(model));
    m->cfg = *cfg;
    m->bb = bb;
    params_init(&m->ps);
    m->net = bb->build(m);
    params_finalize(&m->ps);
    rng r;
    rng_seed(&r, seed, RNG_INIT);
    params_init_values(&m->ps, &r);
    if (model_is_diffusion(cfg)) sit_init_pos_embed(m);
    params_to_device(&m->ps); /* initialised on the host, trained where the ops run */
    return m;
}

model *model_create_from_json(config *c, const char *json, const char *source, uint64_t seed) {
    config_init(c);
    model_config_load_text(c, json, source);
    model_config mc;
    model_config_read(&mc, c);
    return model_create(&mc, seed);
}

tensor *model_forward(model *m, tensor *images, const forward_opts *o) {
    const model_config *c = &m->cfg;
    CHECK(images->ndim == 4 && images->shape[1] == c->img_size && images->shape[2] == c->img_size &&
              images->shape[3] == c->in_chans,
          "%s expects images (B, %d, %d, %d), got %s", c->name, c->img_size, c->img_size,
          c->in_chans, SHAPE_STR(images));
    return m->bb->forward(m, images, o);
}

void model_free(model *m) {
    if (!m) return;
    m->bb->destroy(m->net);
    params_free(&m->ps);
    free(m);
}

void check_attn_grid(const model_config *c, int stage, attn_kind kind, int h, int w) {
    char path[64];
    if (kind == ATTN_ELFATT && (h % c->block_size[stage] || w % c->block_size[stage])) {
        snprintf(path, sizeof(path), "model.block_size[%d]", stage);
        config_error(path, "%d blocks per side do not tile the %dx%d grid of stage %d",
                     c->block_size[stage], h, w, stage);
    }
    if (kind != ATTN_AGENT) return;
    int p = 0;
    while ((p + 1) * (p + 1) <= c->agent_num[stage]) p++;
    if (p > h || p > w) {
        snprintf(path, sizeof(path), "model.agent_num[%d]", stage);
        config_error(path, "%d agents pool to %dx%d, larger than the %dx%d token grid of stage %d",
                     c->agent_num[stage], p, p, h, w, stage);
    }
}

float drop_path_rate(double rate, int k, int n) {
    return n > 1 ? (float)(rate * k / (n - 1)) : 0.0f;
}

/* appends to a bounded report, keeping it NUL-terminated */
static void report_add(char *report, size_t len, const char *fmt, const char *a, const char *b) {
    size_t used = strlen(report);
    if (used + 1 < len) snprintf(report + used, len - used, fmt, a, b);
}

static const char *shape_text(char *buf, size_t len, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (n < len) snprintf(buf + n, len - n, ")");
    return buf;
}

/* DeiT's pos_embed and PVT v1's pos_embedN: a square grid of cells, after DeiT's class token */
static bool is_pos_embed(const char *name) {
    return !strncmp(name, "pos_embed", 9) &&
           (!name[9] || (isdigit((unsigned char)name[9]) && !name[10]));
}

static int floor_sqrt(int64_t n) {
    int64_t r = (int64_t)sqrt((double)n);
    while (r * r > n) r--;
    while ((r + 1) * (r + 1) <= n) r++;
    return (int)r;
}

/* t from e, a position embedding for another grid (the same leading tokens and width): its grid
 * resized as the official fine-tuning does; false where e is no such embedding. The note says so.
 */
static bool resize_pos_embed(param_store *ps, tensor *t, const st_entry *e, char *note,
                             size_t len) {
    if (t->ndim != 3 || e->ndim != 3 || t->shape[0] != 1 || e->shape[0] != 1 ||
        e->shape[2] != t->shape[2])
        return false;
    int C = t->shape[2], g1 = floor_sqrt(t->shape[1]), extra = t->shape[1] - g1 * g1;
    int g0 = floor_sqrt(e->shape[1] - extra);
    if (extra > 1 || g0 < 1 || (int64_t)g0 * g0 != e->shape[1] - extra) return false;
    float *src = xmalloc(sizeof(float) * (size_t)e->numel),
          *dst = xmalloc(sizeof(float) * (size_t)t->numel);
    bool ok = st_to_f32(e, src);
    if (ok) {
        memcpy(dst, src, sizeof(float) * (size_t)extra * C); /* the class token's row */
        grid_resample_bicubic(src + (size_t)extra * C, g0, dst + (size_t)extra * C, g1, C);
        params_write(ps, t->data, dst, t->numel);
        char line[200];
        snprintf(line, sizeof(line), "%s resized from %dx%d to %dx%d (bicubic)", t->name, g0, g0,
                 g1, g1);
        report_add(note, len, "%s%s", note[0] ? "; " : "", line);
    }
    free(src), free(dst);
    return ok;
}

/* model_load_state; for a fine-tuning's start (fine_tune) a classifier's head the file lacks or
 * holds for other classes keeps its values, and a position embedding for another grid is resized,
 * each said in note */
static bool load_state(model *m, const st_file *f, const char *prefix, bool fine_tune, char *note,
                       size_t note_len, char *report, size_t len) {
    report[0] = 0;
    if (note) note[0] = 0;
    /* a classifier's head ("head.weight", "head.bias" in every backbone) is as wide as its
     * classes; a diffusion model's class embedding is its conditioning, not a head to replace, and
     * its pos_embed a fixed sin-cos table */
    bool classifier = fine_tune && !model_is_diffusion(&m->cfg);
    const char *head = classifier ? "head." : NULL;
    char kept[256] = "";
    size_t plen = strlen(prefix);
    int problems = 0;
    for (int i = 0; i < m->ps.n; i++) {
        tensor *t = m->ps.params[i];
        char key[512];
        snprintf(key, sizeof(key), "%s%s", prefix, t->name);
        const st_entry *e = st_find(f, key);
        bool same = e && e->ndim == t->ndim && e->numel == t->numel;
        for (int d = 0; same && d < t->ndim; d++) same = e->shape[d] == t->shape[d];
        if (!same && head && !strncmp(t->name, head, strlen(head))) {
            report_add(kept, sizeof(kept), "%s%s", kept[0] ? ", " : "", t->name);
            continue;
        }
        if (!same && e && classifier && is_pos_embed(t->name) &&
            resize_pos_embed(&m->ps, t, e, note, note_len))
            continue;
        if (!e) {
            report_add(report, len, "  missing: %s%s\n", key, "");
            problems++;
            continue;
        }
        if (!same) {
            int64_t want[TENSOR_MAX_DIMS];
            for (int d = 0; d < t->ndim; d++) want[d] = t->shape[d];
            char got_s[96], want_s[96], line[800];
            snprintf(line, sizeof(line), "  wrong shape: %s is %s, the model has %s\n", key,
                     shape_text(got_s, sizeof(got_s), e->ndim, e->shape),
                     shape_text(want_s, sizeof(want_s), t->ndim, want));
            report_add(report, len, "%s%s", line, "");
            problems++;
            continue;
        }
        float *host = m->ps.mem == &host_memory ? t->data : xmalloc(sizeof(float) * (size_t)t->numel);
        if (st_to_f32(e, host)) {
            params_write(&m->ps, t->data, host, t->numel);
        } else {
            report_add(report, len, "  unsupported dtype %s for %s\n", st_dtype_name(e->dtype), key);
            problems++;
        }
        if (host != t->data) free(host);
    }
    for (int i = 0; i < f->n; i++) {
        const char *name = f->entries[i].name;
        if (strncmp(name, prefix, plen) != 0) continue;
        if (!params_find(&m->ps, name + plen)) {
            report_add(report, len, "  unexpected: %s%s\n", name, "");
            problems++;
        }
    }
    if (kept[0]) {
        char line[400];
        snprintf(line, sizeof(line),
                 "%s start from their initial values (the file has no head for %d classes)", kept,
                 m->cfg.num_classes);
        report_add(note, note_len, "%s%s", note[0] ? "; " : "", line);
    }
    return problems == 0;
}

bool model_load_state(model *m, const st_file *f, const char *prefix, char *report, size_t len) {
    return load_state(m, f, prefix, false, NULL, 0, report, len);
}

bool model_load_backbone(model *m, const st_file *f, char *note, size_t note_len, char *report,
                         size_t len) {
    return load_state(m, f, "", true, note, note_len, report, len);
}

tensor *model_classify(const nn_linear *head, tensor *pooled, const forward_opts *o) {
    if (o->features)
        vitc_memory()->to_host(o->features, pooled->data, sizeof(float) * (size_t)pooled->numel);
    return nn_linear_forward(head, pooled);
}
