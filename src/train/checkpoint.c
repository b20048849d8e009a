#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/check.h"
#include "../core/memory.h"
#include "class_map.h"

#define OPT_M "optim.exp_avg."
#define OPT_V "optim.exp_avg_sq."
#define EMA "ema."
/* the header's "format": what this build writes and reads, of its family's */
#define FORMAT_FAMILY "vitc-checkpoint-"
#define CHECKPOINT_FORMAT FORMAT_FAMILY "1"

bool checkpoint_save(const char *path, const model *m, const char *config_json,
                     const char *classes_json, const adamw *opt, const float *ema,
                     const train_state *st, char *err, size_t err_len) {
    const param_store *ps = &m->ps;
    int n = ps->n;
    char **names = xcalloc((size_t)3 * n + 1, sizeof(char *));
    /* the blocks as the host sees them: device blocks are staged in host copies for the write */
    const float *stored[4] = {ps->data, opt ? opt->m : NULL, opt ? opt->v : NULL, ema}, *blocks[4];
    float *staged[4] = {0};
    for (int b = 0; b < 4; b++) {
        if (ps->mem != &host_memory && stored[b])
            staged[b] = xmalloc(sizeof(float) * (size_t)ps->span);
        blocks[b] = stored[b] ? params_read(ps, staged[b], stored[b], ps->span) : NULL;
    }
    st_writer w;
    st_writer_init(&w);
    for (int i = 0; i < n; i++) {
        const tensor *p = ps->params[i];
        st_add(&w, p->name, blocks[0] + (p->data - ps->data), p->ndim, p->shape);
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        const tensor *p = ps->params[i];
        int64_t off = p->data - ps->data;
        const char *prefixes[4] = {NULL, OPT_M, OPT_V, EMA};
        for (int b = 1; b < 4; b++) {
            if (!blocks[b]) continue;
            size_t len = strlen(prefixes[b]) + strlen(p->name) + 1;
            names[k] = xmalloc(len);
            snprintf(names[k], len, "%s%s", prefixes[b], p->name);
            st_add(&w, names[k++], blocks[b] + off, p->ndim, p->shape);
        }
    }
    char state[512];
    snprintf(state, sizeof(state),
             "{\"epoch\": %d, \"step\": %lld, \"best_top1\": %.17g, \"best_epoch\": %d, "
             "\"optimizer_steps\": %lld, \"epoch_loss_sum\": %.17g, \"epoch_batches\": %d, "
             "\"epoch_skipped\": %d, \"metrics_bytes\": %lld, \"steps_per_epoch\": %d}",
             st->epoch, (long long)st->step, st->best_top1, st->best_epoch,
             (long long)(opt ? opt->step : 0), st->epoch_loss_sum, st->epoch_batches,
             st->epoch_skipped, (long long)st->metrics_bytes, st->steps_per_epoch);
    st_add_meta(&w, "format", CHECKPOINT_FORMAT);
    st_add_meta(&w, "config", config_json);
    st_add_meta(&w, "train_state", state);
    if (classes_json) st_add_meta(&w, "classes", classes_json);
    bool ok = st_write(&w, path, err, err_len);
    st_writer_free(&w);
    for (int i = 0; i < k; i++) free(names[i]);
    free(names);
    for (int b = 0; b < 4; b++) free(staged[b]);
    return ok;
}

/* st_read, whose error adds, for a file torch.save wrote (a zip, or a pickle), how to convert it;
 * a checkpoint of another vitc format is refused, as its tensors or train_state would be misread
 * (other writers' formats, such as safetensors' "pt", pass: their names decide) */
static bool read_checkpoint(st_file *f, const char *path, char *err, size_t err_len) {
    if (st_read(f, path, err, err_len)) {
        const char *format = st_meta(f, "format");
        if (!format || strncmp(format, FORMAT_FAMILY, strlen(FORMAT_FAMILY)) ||
            !strcmp(format, CHECKPOINT_FORMAT))
            return true;
        snprintf(err, err_len, "%s: format \"%s\", which this vitc cannot read (it reads \"%s\")",
                 path, format, CHECKPOINT_FORMAT);
        st_close(f);
        return false;
    }
    unsigned char magic[4] = {0};
    FILE *file = fopen(path, "rb");
    size_t got = file ? fread(magic, 1, sizeof(magic), file) : 0;
    if (file) fclose(file);
    bool zip = got == 4 && !memcmp(magic, "PK\x03\x04", 4), pickle = got >= 1 && magic[0] == 0x80;
    size_t used = strlen(err);
    if ((zip || pickle) && used < err_len)
        snprintf(err + used, err_len - used,
                 " (a PyTorch file: convert it with tools/convert_pth.py PTH OUT.safetensors "
                 "--model NAME)");
    return false;
}

bool checkpoint_open(st_file *f, const char *path, char **config_json, char *err, size_t err_len) {
    if (!read_checkpoint(f, path, err, err_len)) return false;
    const char *cfg = st_meta(f, "config");
    if (!cfg) {
        snprintf(err, err_len, "%s: no \"config\" in the header metadata (not a vitc checkpoint; "
                 "convert official weights with tools/convert_pth.py)", path);
        st_close(f);
        return false;
    }
    *config_json = strdup(cfg);
    return true;
}

const char **checkpoint_class_names(const st_file *f, int n, cJSON **list) {
    const char *json = st_meta(f, "classes");
    *list = json ? cJSON_Parse(json) : NULL;
    if (!cJSON_IsArray(*list)) cJSON_Delete(*list), *list = NULL;
    const char **names = xcalloc((size_t)(n > 0 ? n : 1), sizeof(char *));
    for (int c = 0; c < n && *list; c++) {
        const cJSON *name = cJSON_GetArrayItem(*list, c);
        if (cJSON_IsString(name)) names[c] = name->valuestring;
    }
    return names;
}

class_match checkpoint_match_classes(const st_file *f, const dataset *d, int num_classes,
                                     const int *classes, int n_classes, char *err, size_t err_len) {
    cJSON *list;
    const char **names = checkpoint_class_names(f, num_classes, &list);
    if (classes) { /* the names of those classes, in their order */
        const char **picked = xcalloc((size_t)(n_classes > 0 ? n_classes : 1), sizeof(char *));
        for (int i = 0; i < n_classes; i++) picked[i] = names[classes[i]];
        free(names);
        names = picked, num_classes = n_classes;
    }
    const char *whose = classes ? "the class map" : "the checkpoint";
    class_match match = CLASSES_MATCH;
    if (list || d->listed) {
        match = dataset_match_classes(d, names, num_classes, whose, err, err_len);
    } else if (d->n_classes != num_classes) {
        snprintf(err, err_len, "%s has %d class folders, %s %d classes", d->root, d->n_classes,
                 classes ? "the class map" : "the model", num_classes);
        match = CLASSES_DIFFER;
    }
    free(names);
    cJSON_Delete(list);
    return match;
}

bool checkpoints_share_classes(const st_file *a, int a_classes, const st_file *b, int b_classes,
                               char *err, size_t err_len) {
    if (a_classes != b_classes) {
        snprintf(err, err_len, "it has %d classes, the model %d", a_classes, b_classes);
        return false;
    }
    cJSON *la, *lb;
    const char **na = checkpoint_class_names(a, a_classes, &la),
               **nb = checkpoint_class_names(b, b_classes, &lb);
    int c = 0;
    while (c < a_classes && (!na[c] || !nb[c] || !strcmp(na[c], nb[c]))) c++;
    if (c < a_classes)
        snprintf(err, err_len, "its class %d is '%s', the model's '%s'", c, na[c], nb[c]);
    free(na);
    free(nb);
    cJSON_Delete(la);
    cJSON_Delete(lb);
    return c == a_classes;
}

/* copies "prefix<name>" tensors into a flat block shaped like the parameters, in their memory
 * (through a host copy of the block when that is a device's) */
static bool load_block(const st_file *f, const char *path, const model *m, const char *prefix,
                       float *block, char *err, size_t err_len) {
    const param_store *ps = &m->ps;
    float *host = ps->mem == &host_memory ? block : xcalloc((size_t)ps->span, sizeof(float));
    bool ok = true;
    for (int i = 0; ok && i < ps->n; i++) {
        const tensor *p = ps->params[i];
        char key[512];
        snprintf(key, sizeof(key), "%s%s", prefix, p->name);
        const st_entry *e = st_find(f, key);
        if (!e || e->numel != p->numel || !st_to_f32(e, host + (p->data - ps->data))) {
            snprintf(err, err_len, "%s: %s %s", path, e ? "bad tensor" : "missing tensor", key);
            ok = false;
        }
    }
    if (ok) params_write(ps, block, host, ps->span);
    if (host != block) free(host);
    return ok;
}

static bool read_state(const st_file *f, const char *path, train_state *st, int64_t *opt_steps,
                       char *err, size_t err_len) {
    const char *text = st_meta(f, "train_state");
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(j, "epoch");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(j, "best_top1");
    const cJSON *best_epoch = cJSON_GetObjectItemCaseSensitive(j, "best_epoch");
    const cJSON *osteps = cJSON_GetObjectItemCaseSensitive(j, "optimizer_steps");
    bool ok = cJSON_IsNumber(epoch) && cJSON_IsNumber(step) && cJSON_IsNumber(best) &&
              cJSON_IsNumber(best_epoch) && cJSON_IsNumber(osteps) && epoch->valuedouble >= 0 &&
              step->valuedouble >= 0 && osteps->valuedouble >= 0;
    if (ok) {
        st->epoch = (int)epoch->valuedouble;
        st->step = (int64_t)step->valuedouble;
        st->best_top1 = best->valuedouble;
        st->best_epoch = (int)best_epoch->valuedouble;
        *opt_steps = (int64_t)osteps->valuedouble;
        /* absent from checkpoints written before step checkpoints: those ended an epoch */
        const cJSON *loss_sum = cJSON_GetObjectItemCaseSensitive(j, "epoch_loss_sum");
        const cJSON *batches = cJSON_GetObjectItemCaseSensitive(j, "epoch_batches");
        const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(j, "epoch_skipped");
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(j, "metrics_bytes");
        const cJSON *per_epoch = cJSON_GetObjectItemCaseSensitive(j, "steps_per_epoch");
        st->epoch_loss_sum = cJSON_IsNumber(loss_sum) ? loss_sum->valuedouble : 0;
        st->epoch_batches = cJSON_IsNumber(batches) ? (int)batches->valuedouble : 0;
        st->epoch_skipped = cJSON_IsNumber(skipped) ? (int)skipped->valuedouble : 0;
        st->metrics_bytes = cJSON_IsNumber(bytes) ? (int64_t)bytes->valuedouble : -1;
        st->steps_per_epoch = cJSON_IsNumber(per_epoch) ? (int)per_epoch->valuedouble : 0;
        ok = st->epoch_batches >= 0 && st->epoch_skipped >= 0 && isfinite(st->epoch_loss_sum) &&
             st->steps_per_epoch >= 0;
    }
    if (!ok) {
        snprintf(err, err_len, "%s: missing or malformed \"train_state\" metadata", path);
    }
    cJSON_Delete(j);
    return ok;
}

/* f's parameters alone, the unprefixed names: its optimizer and EMA tensors are not "unexpected"
 * (free the view's entries after) */
static st_file parameters_view(const st_file *f) {
    st_file view = *f;
    view.entries = xcalloc((size_t)f->n + 1, sizeof(st_entry));
    view.n = 0;
    for (int i = 0; i < f->n; i++) {
        const char *name = f->entries[i].name;
        if (strncmp(name, OPT_M, strlen(OPT_M)) && strncmp(name, OPT_V, strlen(OPT_V)) &&
            strncmp(name, EMA, strlen(EMA)))
            view.entries[view.n++] = f->entries[i];
    }
    return view;
}

/* the rows of the checkpoint's head (the tensors under prefix) that class_map picks for m's
 * classes; NULL after the error */
static int *read_head_rows(const st_file *f, const char *path, const char *prefix,
                           const char *class_map, const model *m, char *err, size_t err_len) {
    char key[64];
    snprintf(key, sizeof(key), "%shead.weight", prefix);
    const st_entry *head = st_find(f, key);
    if (!head || head->ndim != 2) {
        snprintf(err, err_len,
                 "%s has no classifier head (%s) for train.init_class_map %s to pick rows of", path,
                 key, class_map);
        return NULL;
    }
    char why[1024];
    int n, *rows = class_map_read(class_map, (int)head->shape[0], "the checkpoint's head rows", &n,
                                  why, sizeof(why));
    if (rows && n != m->cfg.num_classes) {
        snprintf(why, sizeof(why), "%s: %d rows for the model's %d classes (model.num_classes)",
                 class_map, n, m->cfg.num_classes);
        free(rows), rows = NULL;
    }
    if (!rows) snprintf(err, err_len, "train.init_class_map: %s", why);
    return rows;
}

bool checkpoint_init_weights(const char *path, bool from_ema, const char *class_map, model *m,
                             float *ema, bool *ema_set, char *note, size_t note_len, char *err,
                             size_t err_len) {
    st_file f;
    char report[4096];
    *ema_set = false;
    if (!read_checkpoint(&f, path, err, err_len)) return false;
    bool has_ema = checkpoint_has_ema(&f);
    if (from_ema && !has_ema) {
        snprintf(err, err_len,
                 "%s has no EMA weights (train.init_ema): its run had ema.enabled false, or the "
                 "official checkpoint was converted without tools/convert_pth.py --ema",
                 path);
        st_close(&f);
        return false;
    }
    int *head_rows = NULL;
    if (class_map[0]) {
        head_rows = read_head_rows(&f, path, from_ema ? EMA : "", class_map, m, err, err_len);
        if (!head_rows) {
            st_close(&f);
            return false;
        }
    }
    bool ok = true;
    if (ema && has_ema) { /* through m's parameters, which the weights then overwrite */
        ok = model_load_backbone(m, &f, EMA, head_rows, note, note_len, report, sizeof(report));
        if (ok) m->ps.mem->copy(ema, m->ps.data, sizeof(float) * (size_t)m->ps.span);
        *ema_set = ok;
    }
    st_file params = from_ema ? f : parameters_view(&f);
    ok = ok && model_load_backbone(m, &params, from_ema ? EMA : "", head_rows, note, note_len,
                                   report, sizeof(report));
    if (!from_ema) free(params.entries);
    free(head_rows);
    st_close(&f);
    if (!ok) snprintf(err, err_len, "%s does not match the model:\n%s", path, report);
    return ok;
}

bool checkpoint_restore(const st_file *f, const char *path, model *m, adamw *opt, float *ema,
                        train_state *st, char *err, size_t err_len) {
    char report[4096];
    st_file params = parameters_view(f);
    bool ok = model_load_state(m, &params, "", report, sizeof(report));
    free(params.entries);
    if (!ok) {
        snprintf(err, err_len, "%s: the checkpoint does not match the model:\n%s", path, report);
        return false;
    }
    int64_t opt_steps = 0;
    if (st && !read_state(f, path, st, &opt_steps, err, err_len)) return false;
    if (opt) {
        if (!load_block(f, path, m, OPT_M, opt->m, err, err_len) ||
            !load_block(f, path, m, OPT_V, opt->v, err, err_len))
            return false;
        opt->step = opt_steps;
    }
    if (ema && checkpoint_has_ema(f)) return load_block(f, path, m, EMA, ema, err, err_len);
    if (ema) m->ps.mem->copy(ema, m->ps.data, sizeof(float) * (size_t)m->ps.span);
    return true;
}

bool checkpoint_has_ema(const st_file *f) {
    for (int i = 0; i < f->n; i++)
        if (!strncmp(f->entries[i].name, EMA, strlen(EMA))) return true;
    return false;
}

bool checkpoint_load_ema(const st_file *f, const char *path, model *m, char *err, size_t err_len) {
    if (!checkpoint_has_ema(f)) {
        snprintf(err, err_len, "%s has no EMA weights (its run had ema.enabled false)", path);
        return false;
    }
    return load_block(f, path, m, EMA, m->ps.data, err, err_len);
}

model *checkpoint_load_model(st_file *f, const char *path, bool ema, config *c, char *err, size_t err_len) {
    char *cfg_text = NULL;
    if (!checkpoint_open(f, path, &cfg_text, err, err_len)) return NULL;
    model *m = model_create_from_json(c, cfg_text, path, 0);
    free(cfg_text);
    if (checkpoint_restore(f, path, m, NULL, NULL, NULL, err, err_len) &&
        (!ema || checkpoint_load_ema(f, path, m, err, err_len)))
        return m;
    model_free(m);
    config_free(c);
    st_close(f);
    return NULL;
}
