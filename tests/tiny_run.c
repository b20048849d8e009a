#include "tiny_run.h"

#include <math.h>
#include <stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/core/check.h"
#include "../src/core/rng.h"
#include "../src/core/safetensors.h"
#include "shell.h"

static char work[256], config[300];

static void write_split(const char *split, int per_class) {
    unsigned char px[16 * 16];
    rng r;
    rng_seed(&r, (uint64_t)per_class, RNG_TEST);
    for (int c = 0; c < 3; c++) {
        char dir[512];
        snprintf(dir, sizeof(dir), "%s/%s", work, split);
        mkdir(dir, 0755);
        snprintf(dir, sizeof(dir), "%s/%s/c%d", work, split, c);
        mkdir(dir, 0755);
        for (int i = 0; i < per_class; i++) {
            for (int p = 0; p < 256; p++) px[p] = (unsigned char)(rng_below(&r, 60));
            int oy = c == 1 ? 8 : 0, ox = c == 2 ? 8 : 0;
            for (int y = 0; y < 8; y++)
                for (int x = 0; x < 8; x++) px[(oy + y) * 16 + ox + x] = 220;
            char path[600];
            snprintf(path, sizeof(path), "%s/%03d.png", dir, i);
            stbi_write_png(path, 16, 16, 1, px, 16);
        }
    }
}

static void remove_work(void) {
    char out[256];
    run(out, sizeof(out), "rm -rf '%s'", work);
}

const char *tiny_run_dir(void) {
    if (work[0]) return work;
    snprintf(work, sizeof(work), "/tmp/vitc_cli_%d", (int)getpid());
    mkdir(work, 0755);
    atexit(remove_work);
    write_split("train", 12);
    write_split("val", 4);
    snprintf(config, sizeof(config), "%s/tiny.json", work);
    FILE *f = fopen(config, "w");
    fprintf(f,
            "{\"model\": {\"name\": \"tiny\", \"arch\": \"deit\", \"img_size\": 16, \"patch_size\": 4,\n"
            "  \"in_chans\": 1, \"num_classes\": 3, \"embed_dim\": [16], \"depths\": [1], \"num_heads\": [2],\n"
            "  \"attn\": \"agent\", \"agent_num\": [4], \"drop_path\": 0.1},\n"
            " \"data\": {\"train\": \"%s/train\", \"val\": \"%s/val\", \"workers\": 2},\n"
            " \"aug\": {\"randaugment\": \"\", \"reprob\": 0, \"mixup\": 0.8, \"cutmix\": 1.0, \"crop_pct\": 1.0,\n"
            "  \"scale\": [0.5, 1.0]},\n"
            " \"train\": {\"epochs\": 3, \"warmup_epochs\": 1, \"batch\": 6, \"lr\": 0.01, \"lr_scale_batch\": 0},\n"
            " \"ema\": {\"enabled\": true, \"decay\": 0.9},\n"
            " \"run\": {\"log_every\": 1}}\n",
            work, work);
    fclose(f);
    return work;
}

const char *tiny_run_config(void) {
    tiny_run_dir();
    return config;
}

int tiny_run_step_losses(const char *run_dir, char losses[][32], int max) {
    char path[600], line[1024];
    snprintf(path, sizeof(path), "%s/metrics.jsonl", run_dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < max && fgets(line, sizeof(line), f)) {
        char *p = strstr(line, "\"loss\": ");
        if (strstr(line, "\"type\": \"step\"") && p) sscanf(p + 8, "%31[^,]", losses[n++]);
    }
    if (f) fclose(f);
    return n;
}

void tiny_run_compare(const st_file *a, const char *a_prefix, const st_file *b,
                      const char *b_prefix, double tol, int *equal, int *differ) {
    *equal = *differ = 0;
    for (int i = 0; i < a->n; i++) {
        const char *name = a->entries[i].name;
        if (!strncmp(name, "optim.", 6) || !strncmp(name, "ema.", 4)) continue;
        char a_name[300], b_name[300];
        snprintf(a_name, sizeof(a_name), "%s%s", a_prefix, name);
        snprintf(b_name, sizeof(b_name), "%s%s", b_prefix, name);
        const st_entry *ea = st_find(a, a_name), *eb = st_find(b, b_name);
        bool same = ea && eb && eb->numel == ea->numel;
        float *x = same ? xmalloc(sizeof(float) * (size_t)ea->numel) : NULL,
              *y = same ? xmalloc(sizeof(float) * (size_t)ea->numel) : NULL;
        same = same && st_to_f32(ea, x) && st_to_f32(eb, y);
        for (int64_t j = 0; same && j < ea->numel; j++)
            same = fabs(x[j] - y[j]) <= tol * fabs(y[j]);
        free(x), free(y);
        ++*(same ? equal : differ);
    }
}

bool tiny_run_read_pair(const char *runs, const char *a_run, const char *b_run, st_file *a,
                        st_file *b, char *err, size_t err_len) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s/last.safetensors", runs, a_run);
    if (!st_read(a, path, err, err_len)) return false;
    snprintf(path, sizeof(path), "%s/%s/last.safetensors", runs, b_run);
    if (st_read(b, path, err, err_len)) return true;
    st_close(a);
    return false;
}

double tiny_run_abs_max(const st_file *f, const char *name) {
    const st_entry *e = st_find(f, name);
    if (!e) return -1;
    float *x = xmalloc(sizeof(float) * (size_t)e->numel);
    double most = st_to_f32(e, x) ? 0 : -1;
    for (int64_t j = 0; most >= 0 && j < e->numel; j++) most = fmax(most, fabs(x[j]));
    free(x);
    return most;
}

bool tiny_run_rows_equal(const st_file *a, const st_file *b, const char *name, const int *rows,
                         int n) {
    const st_entry *ea = st_find(a, name), *eb = st_find(b, name);
    if (!ea || !eb || ea->shape[0] != n) return false;
    int64_t width = ea->numel / n;
    if (eb->numel % width) return false;
    float *x = xmalloc(sizeof(float) * (size_t)ea->numel),
          *y = xmalloc(sizeof(float) * (size_t)eb->numel);
    bool equal = st_to_f32(ea, x) && st_to_f32(eb, y);
    for (int i = 0; equal && i < n; i++)
        equal = rows[i] < eb->numel / width &&
                !memcmp(x + i * width, y + rows[i] * width, sizeof(float) * (size_t)width);
    free(x), free(y);
    return equal;
}

bool tiny_run_copy_without(const char *from, const char *to, const char *name, char *err,
                           size_t err_len) {
    st_file f;
    if (!st_read(&f, from, err, err_len)) return false;
    st_writer w;
    st_writer_init(&w);
    float **data = xcalloc((size_t)f.n + 1, sizeof(float *));
    bool ok = true;
    for (int i = 0; ok && i < f.n; i++) {
        const st_entry *e = &f.entries[i];
        if (!strcmp(e->name, name)) continue;
        int shape[ST_MAX_DIMS];
        for (int d = 0; d < e->ndim; d++) shape[d] = (int)e->shape[d];
        data[i] = xmalloc(sizeof(float) * (size_t)(e->numel ? e->numel : 1));
        ok = st_to_f32(e, data[i]);
        if (ok)
            st_add(&w, e->name, data[i], e->ndim, shape);
        else
            snprintf(err, err_len, "%s: %s is not a float tensor", from, e->name);
    }
    for (int i = 0; i < f.n_meta; i++) st_add_meta(&w, f.meta_keys[i], f.meta_values[i]);
    ok = ok && st_write(&w, to, err, err_len);
    for (int i = 0; i < f.n; i++) free(data[i]);
    free(data);
    st_writer_free(&w);
    st_close(&f);
    return ok;
}
