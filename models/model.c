/* Model construction and the backbone dispatch. */
#include "model.h"

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

/* the tensors of one kind resized from one size to another, for the note */
typedef struct {
    const char *first, *what, *method;
    bool grid; /* sizes n x n, else n */
    int n0, n1, count;
} resize_group;

static void note_resized(resize_group *groups, int *n, const char *name, const grid_resize *r) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(groups[i].what, r->what) && groups[i].n0 == r->n0 && groups[i].n1 == r->n1) {
            groups[i].count++;
            return;
        }
    const char *method = r->bicubic           ? "bicubic"
                         : r->corners_aligned ? "linear, corners aligned"
                                              : "linear";
    groups[(*n)++] = (resize_group){name, r->what, method, r->bicubic, r->n0, r->n1, 1};
}

static void write_resize_note(const resize_group *groups, int n, char *note, size_t len) {
    for (int i = 0; i < n; i++) {
        const resize_group *g = &groups[i];
        char more[96] = "", from[32], to[32], line[400];
        if (g->count > 1) snprintf(more, sizeof(more), " and %d more %s", g->count - 1, g->what);
        snprintf(from, sizeof(from), g->grid ? "%dx%d" : "%d", g->n0, g->n0);
        snprintf(to, sizeof(to), g->grid ? "%dx%d" : "%d", g->n1, g->n1);
        snprintf(line, sizeof(line), "%s%s resized from %s to %s (%s)", g->first, more, from, to,
                 g->method);
        report_add(note, len, "%s%s", note[0] ? "; " : "", line);
    }
}

/* t from e's values made into t's by make(how, e's values, t's) */
static bool load_made(param_store *ps, tensor *t, const st_entry *e,
                      void (*make)(const void *how, const float *src, float *dst),
                      const void *how) {
    float *src = xmalloc(sizeof(float) * (size_t)e->numel),
          *dst = xmalloc(sizeof(float) * (size_t)t->numel);
    bool ok = st_to_f32(e, src);
    if (ok) {
        make(how, src, dst);
        params_write(ps, t->data, dst, t->numel);
    }
    free(src), free(dst);
    return ok;
}

static void make_resized(const void *plan, const float *src, float *dst) {
    grid_resize_apply(plan, src, dst);
}

/* whether t is a convolution reading gray images where e is the same for RGB */
static bool gray_of_rgb(const tensor *t, const st_entry *e) {
    bool kernels = e->ndim == 4 && t->ndim == 4 && e->shape[1] == 3 && t->shape[1] == 1;
    for (int d = 0; kernels && d < 4; d++) kernels = d == 1 || e->shape[d] == t->shape[d];
    return kernels;
}

/* the gray kernels of t (how) from RGB's, as timm's adapt_input_conv: the sum of the three
 * channels' kernels (what they give a gray image repeated in R, G and B) */
static void make_gray(const void *how, const float *src, float *dst) {
    const tensor *t = how;
    size_t k = (size_t)t->shape[2] * t->shape[3];
    for (int o = 0; o < t->shape[0]; o++)
        for (size_t j = 0; j < k; j++) {
            const float *rgb = src + (size_t)o * 3 * k + j;
            dst[(size_t)o * k + j] = rgb[0] + rgb[k] + rgb[2 * k];
        }
}

/* the official fine-tuning script, of those that set a head for other classes to 0 (the file's
 * head deleted, weight and bias zeroed: Swin's load_pretrained, copied by Agent-Attention's and
 * FLatten's for all their backbones), that fine-tunes c; NULL: DeiT's and PVT's main.py --finetune
 * and CSwin's finetune.py, which keep the new model's initial head */
static const char *head_zeroing_script(const model_config *c) {
    bool agent = false, flatten = false;
    for (int s = 0; s < c->n_stages; s++)
        for (int b = 0; b < c->depths[s]; b++) {
            agent |= c->attn[s][b] == ATTN_AGENT;
            flatten |= c->attn[s][b] == ATTN_FLATTEN;
        }
    if (agent) return "Agent-Attention's load_pretrained";
    if (flatten) return "FLatten's load_pretrained";
    if (!strcmp(c->arch, "swin")) return "Swin's load_pretrained";
    return NULL;
}

/* the head's rows (how: a head_pick) from the file's, row i from row rows[i] */
typedef struct {
    const int *rows;
    int n;
    size_t row_floats;
} head_pick;

static void make_picked(const void *how, const float *src, float *dst) {
    const head_pick *pick = how;
    for (int i = 0; i < pick->n; i++)
        memcpy(dst + (size_t)i * pick->row_floats, src + (size_t)pick->rows[i] * pick->row_floats,
               sizeof(float) * pick->row_floats);
}

/* whether e holds rows of the width of t's, among them every row t's rows take */
static bool holds_rows(const tensor *t, const st_entry *e, const int *rows) {
    bool holds = e->ndim == t->ndim;
    for (int d = 1; holds && d < t->ndim; d++) holds = e->shape[d] == t->shape[d];
    for (int i = 0; holds && i < t->shape[0]; i++) holds = rows[i] < e->shape[0];
    return holds;
}

/* model_load_state; for a fine-tuning's start (fine_tune) a classifier's head the file lacks keeps
 * its values, one it holds takes the rows head_rows names where given, else one it holds for other
 * classes too or is set to 0 (head_zeroing_script), a tensor laid over another grid is resized
 * (grid_resize), a frozen one for another grid (SiT's sin-cos pos_embed) is the model's own and an
 * RGB stem made gray, each said in note */
static bool load_state(model *m, const st_file *f, const char *prefix, bool fine_tune,
                       const int *head_rows, char *note, size_t note_len, char *report,
                       size_t len) {
    report[0] = 0;
    if (note) note[0] = 0;
    /* a classifier's head ("head.weight", "head.bias" in every backbone) is as wide as its
     * classes; a diffusion model's class embedding is its conditioning, not a head to replace, and
     * its pos_embed a fixed sin-cos table */
    bool classifier = fine_tune && !model_is_diffusion(&m->cfg);
    const char *head = classifier ? "head." : NULL;
    resize_style style = classifier ? RESIZE_AS_CLASSIFIERS : RESIZE_AS_MEDIATORS;
    const char *zeroing = classifier ? head_zeroing_script(&m->cfg) : NULL;
    char kept[256] = "", zeroed[256] = "", picked[256] = "", own[256] = "";
    int file_classes = 0;
    resize_group *resized = xmalloc(sizeof(resize_group) * (size_t)m->ps.n); /* a group a tensor at most */
    int groups = 0;
    grid_resize plan;
    size_t plen = strlen(prefix);
    int problems = 0;
    for (int i = 0; i < m->ps.n; i++) {
        tensor *t = m->ps.params[i];
        char key[512];
        snprintf(key, sizeof(key), "%s%s", prefix, t->name);
        const st_entry *e = st_find(f, key);
        int64_t want[TENSOR_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) want[d] = t->shape[d];
        bool same = e && e->ndim == t->ndim && e->numel == t->numel;
        for (int d = 0; same && d < t->ndim; d++) same = e->shape[d] == t->shape[d];
        bool in_head = head && !strncmp(t->name, head, strlen(head));
        if (in_head && head_rows && e && holds_rows(t, e, head_rows)) {
            head_pick pick = {head_rows, t->shape[0], (size_t)(t->numel / t->shape[0])};
            if (load_made(&m->ps, t, e, make_picked, &pick)) {
                report_add(picked, sizeof(picked), "%s%s", picked[0] ? ", " : "", t->name);
                file_classes = (int)e->shape[0];
            } else {
                report_add(report, len, "  unsupported dtype %s for %s\n", st_dtype_name(e->dtype),
                           key);
                problems++;
            }
            continue;
        }
        if (!same && in_head && !(head_rows && e)) { /* (else a wrong shape, below) */
            if (e && zeroing) { /* the file's head is for other classes (not absent) */
                float *zeros = xcalloc((size_t)t->numel, sizeof(float));
                params_write(&m->ps, t->data, zeros, t->numel);
                free(zeros);
                report_add(zeroed, sizeof(zeroed), "%s%s", zeroed[0] ? ", " : "", t->name);
                file_classes = (int)e->shape[0];
            } else {
                report_add(kept, sizeof(kept), "%s%s", kept[0] ? ", " : "", t->name);
            }
            continue;
        }
        if (!same && e && classifier && m->bb->first_conv && !strcmp(t->name, m->bb->first_conv) &&
            gray_of_rgb(t, e) && load_made(&m->ps, t, e, make_gray, t)) {
            char line[300];
            snprintf(line, sizeof(line),
                     "%s summed over the file's 3 input channels for gray images (timm's "
                     "adapt_input_conv)",
                     t->name);
            report_add(note, note_len, "%s%s", note[0] ? "; " : "", line);
            continue;
        }
        if (!same && e && fine_tune && !t->requires_grad) {
            report_add(own, sizeof(own), "%s%s", own[0] ? ", " : "", t->name);
            continue;
        }
        if (!same && e && fine_tune && e->ndim == t->ndim &&
            grid_resize_plan(t->name, t->ndim, e->shape, want, style, &plan) &&
            load_made(&m->ps, t, e, make_resized, &plan)) {
            note_resized(resized, &groups, t->name, &plan);
            continue;
        }
        if (!e) {
            report_add(report, len, "  missing: %s%s\n", key, "");
            problems++;
            continue;
        }
        if (!same) {
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
    if (own[0]) {
        char line[400];
        snprintf(line, sizeof(line), "%s: the model's own for its grid (fixed, not trained)", own);
        report_add(note, note_len, "%s%s", note[0] ? "; " : "", line);
    }
    write_resize_note(resized, groups, note, note_len);
    free(resized);
    if (picked[0]) {
        char line[400];
        snprintf(line, sizeof(line), "%s: the class map's rows of the file's head for %d classes",
                 picked, file_classes);
        report_add(note, note_len, "%s%s", note[0] ? "; " : "", line);
    }
    if (zeroed[0]) {
        char line[400];
        snprintf(line, sizeof(line),
                 "%s set to 0 (the file's head is for %d classes, the model's for %d), as %s does",
                 zeroed, file_classes, m->cfg.num_classes, zeroing);
        report_add(note, note_len, "%s%s", note[0] ? "; " : "", line);
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
    return load_state(m, f, prefix, false, NULL, NULL, 0, report, len);
}

bool model_load_backbone(model *m, const st_file *f, const char *prefix, const int *head_rows,
                         char *note, size_t note_len, char *report, size_t len) {
    return load_state(m, f, prefix, true, head_rows, note, note_len, report, len);
}

tensor *model_classify(const nn_linear *head, tensor *pooled, const forward_opts *o) {
    if (o->features)
        vitc_memory()->to_host(o->features, pooled->data, sizeof(float) * (size_t)pooled->numel);
    return nn_linear_forward(head, pooled);
}
