#include "model_check.h"

#include <stdarg.h>
#include <stdlib.h>

void registry_config(model_config *mc, const char *name, const char *extra_json) {
    config c;
    config_init(&c);
    char text[8192];
    snprintf(text, sizeof(text), "{\"model\": %s}", model_registry_defaults(name));
    config_merge_text(&c, text, name);
    if (extra_json) config_merge_text(&c, extra_json, "extra");
    model_config_read(mc, &c);
    config_free(&c);
}

void registry_config_narrow(model_config *mc, const char *name, int num_classes) {
    registry_config(mc, name, NULL);
    char extra[256], dims[128] = "";
    for (int s = 0; s < mc->n_stages; s++)
        snprintf(dims + strlen(dims), sizeof(dims) - strlen(dims), "%s%d", s ? ", " : "", 8 * mc->num_heads[s]);
    snprintf(extra, sizeof(extra), "{\"model\": {\"num_classes\": %d, \"embed_dim\": [%s]}}", num_classes, dims);
    registry_config(mc, name, extra);
}

int64_t registry_param_count(const char *name) {
    if (!model_registry_defaults(name)) return -1;
    model_config mc;
    registry_config(&mc, name, NULL);
    param_store ps;
    model_declare(&mc, &ps);
    int64_t n = ps.numel;
    params_free(&ps);
    return n;
}

static void add(char **out, size_t *len, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    size_t l = strlen(line);
    *out = realloc(*out, *len + l + 1);
    memcpy(*out + *len, line, l + 1);
    *len += l;
}

char *compare_state_dict(const char *name, const char *listing, bool *missing_file) {
    FILE *f = fopen(listing, "r");
    *missing_file = !f;
    if (!f) return NULL;
    model_config mc;
    registry_config(&mc, name, NULL);
    param_store ps;
    model_declare(&mc, &ps);
    char *out = NULL, line[1024];
    size_t len = 0;
    int matched = 0, problems = 0;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || !strncmp(line, "key\t", 4)) continue;
        char key[512], shape_text[256] = "";
        /* "key\t(1, 2)\tdtype" or "key (1, 2)" */
        char *open = strchr(line, '(');
        if (!open) continue; /* the count line */
        size_t klen = (size_t)(open - line);
        while (klen && (line[klen - 1] == ' ' || line[klen - 1] == '\t')) klen--;
        snprintf(key, sizeof(key), "%.*s", (int)klen, line);
        char *close = strchr(open, ')');
        snprintf(shape_text, sizeof(shape_text), "%.*s", close ? (int)(close - open - 1) : 0, open + 1);
        if (strstr(key, "relative_position_index") || strstr(key, "attn_mask")) continue;
        const tensor *t = params_find(&ps, key);
        if (!t) {
            if (problems++ < 12) add(&out, &len, "  missing in vitc: %s\n", key);
            continue;
        }
        int dims[8], nd = 0;
        for (char *p = shape_text; *p && nd < 8;) {
            dims[nd++] = (int)strtol(p, &p, 10);
            while (*p == ',' || *p == ' ') p++;
        }
        bool same = nd == t->ndim;
        for (int d = 0; same && d < nd; d++) same = dims[d] == t->shape[d];
        if (!same && problems++ < 12) add(&out, &len, "  shape of %s: official (%s), vitc %s\n", key, shape_text, SHAPE_STR(t));
        matched++;
    }
    fclose(f);
    if (matched != ps.n) add(&out, &len, "  vitc has %d parameters, the listing %d\n", ps.n, matched);
    params_free(&ps);
    return out;
}

tensor *fixture_tensor(const st_file *f, const char *path, const char *name) {
    const st_entry *e = st_find(f, name);
    CHECK(e, "%s has no tensor %s", path, name);
    int shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < e->ndim; i++) shape[i] = (int)e->shape[i];
    tensor *t = tensor_new(e->ndim, shape);
    st_to_f32(e, t->data);
    return t;
}

double worst_grad_error(const model *m, const st_file *f, const char *path, const char **worst_name) {
    double worst = 0;
    *worst_name = "";
    for (int i = 0; i < m->ps.n; i++) {
        tensor *p = m->ps.params[i];
        char key[512];
        snprintf(key, sizeof(key), "grad/%s", p->name);
        double e = rel_l2(p->grad, fixture_tensor(f, path, key)->data, p->numel);
        if (getenv("VITC_TEST_VERBOSE")) printf("      %.2e %s\n", e, p->name);
        if (e > worst || e != e) worst = e, *worst_name = p->name;
    }
    return worst;
}
