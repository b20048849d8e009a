#include "config.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "file.h"

void config_error(const char *path, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    FATAL("config: %s: %s", path, msg);
}

void config_init(config *c) {
    memset(c, 0, sizeof(*c));
    c->root = cJSON_CreateObject();
}

void config_free(config *c) {
    cJSON_Delete(c->root);
    for (int i = 0; i < c->n_known; i++) free(c->known[i]);
    free(c->known);
    memset(c, 0, sizeof(*c));
}

/* deep merge: objects merge key by key, anything else replaces; a key repeated within one object
 * takes its last value, as JSON parsers commonly do */
static void merge(cJSON *dst, const cJSON *src) {
    const cJSON *item;
    cJSON_ArrayForEach(item, src) {
        cJSON *old = cJSON_GetObjectItemCaseSensitive(dst, item->string);
        if (!old && cJSON_IsObject(item)) old = cJSON_AddObjectToObject(dst, item->string);
        if (old && cJSON_IsObject(old) && cJSON_IsObject(item)) merge(old, item);
        else if (old) cJSON_ReplaceItemInObjectCaseSensitive(dst, item->string, cJSON_Duplicate(item, 1));
        else cJSON_AddItemToObject(dst, item->string, cJSON_Duplicate(item, 1));
    }
}

static int line_of(const char *text, const char *at) {
    int line = 1;
    for (const char *p = text; at && p < at && *p; p++) line += *p == '\n';
    return line;
}

/* how much of the text at `at` an error quotes: the rest of its line, 30 characters at most */
static int excerpt(const char *at) {
    int n = (int)strcspn(at, "\r\n");
    return n < 30 ? n : 30;
}

void config_merge_text(config *c, const char *json, const char *source) {
    const char *end = NULL;
    cJSON *tree = cJSON_ParseWithOpts(json, &end, false);
    if (!tree) {
        const char *at = cJSON_GetErrorPtr();
        if (!at) at = "?";
        FATAL("%s: invalid JSON near line %d: '%.*s'", source, line_of(json, at), excerpt(at), at);
    }
    end += strspn(end, " \t\r\n");
    if (*end) { /* (a parser stops after the first value) */
        cJSON_Delete(tree);
        FATAL("%s: text after the JSON value, at line %d: '%.*s'", source, line_of(json, end),
              excerpt(end), end);
    }
    if (!cJSON_IsObject(tree)) {
        cJSON_Delete(tree);
        FATAL("%s: the top level must be a JSON object", source);
    }
    merge(c->root, tree);
    cJSON_Delete(tree);
}

void config_merge_file(config *c, const char *path) {
    char err[600];
    size_t size;
    char *text = file_read_whole(path, 64 << 20, &size, err, sizeof(err));
    if (!text) FATAL("cannot read config file %s", err);
    config_merge_text(c, text, path);
    free(text);
}

/* walks/creates the parent objects of a dotted path; returns the parent and the last key */
static cJSON *parent_of(cJSON *root, const char *path, char *last, size_t last_len, bool create) {
    cJSON *node = root;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (len == 0 || len >= last_len) config_error(path, "malformed key");
        memcpy(last, p, len);
        last[len] = 0;
        if (!dot) return node;
        cJSON *child = cJSON_GetObjectItemCaseSensitive(node, last);
        if (!child) {
            if (!create) return NULL;
            child = cJSON_AddObjectToObject(node, last);
        } else if (!cJSON_IsObject(child)) {
            config_error(path, "'%s' is not an object", last);
        }
        node = child;
        p = dot + 1;
    }
}

void config_set(config *c, const char *assignment) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment) FATAL("--set %s: expected key=value, e.g. train.lr=0.001", assignment);
    char path[256], last[128];
    size_t plen = (size_t)(eq - assignment);
    if (plen >= sizeof(path)) FATAL("--set %s: key too long", assignment);
    memcpy(path, assignment, plen);
    path[plen] = 0;
    /* a value that is not JSON to its end is a string: 2x is no 2, nor [24]] a [24] */
    cJSON *value = cJSON_ParseWithOpts(eq + 1, NULL, true);
    if (!value) value = cJSON_CreateString(eq + 1);
    cJSON *parent = parent_of(c->root, path, last, sizeof(last), true);
    if (cJSON_GetObjectItemCaseSensitive(parent, last))
        cJSON_ReplaceItemInObjectCaseSensitive(parent, last, value);
    else cJSON_AddItemToObject(parent, last, value);
}

static void mark_known(config *c, const char *path) {
    for (int i = 0; i < c->n_known; i++)
        if (strcmp(c->known[i], path) == 0) return;
    if (c->n_known == c->cap_known) {
        c->cap_known = c->cap_known ? 2 * c->cap_known : 64;
        c->known = xrealloc(c->known, sizeof(char *) * (size_t)c->cap_known);
    }
    c->known[c->n_known++] = strdup(path);
}

cJSON *config_node(config *c, const char *path) {
    char last[128];
    mark_known(c, path);
    cJSON *parent = parent_of(c->root, path, last, sizeof(last), false);
    return parent ? cJSON_GetObjectItemCaseSensitive(parent, last) : NULL;
}

bool config_has(const config *c, const char *path) {
    char last[128];
    cJSON *parent = parent_of(c->root, path, last, sizeof(last), false);
    return parent && cJSON_GetObjectItemCaseSensitive(parent, last);
}

/* stores def at path (so the tree holds the resolved value) */
static void put_default(config *c, const char *path, cJSON *value) {
    char last[128];
    cJSON *parent = parent_of(c->root, path, last, sizeof(last), true);
    cJSON_AddItemToObject(parent, last, value);
}

static const char *describe(const cJSON *v, char *buf, size_t len) {
    char *text = cJSON_PrintUnformatted(v);
    snprintf(buf, len, "%s", text ? text : "?");
    cJSON_free(text);
    return buf;
}
#define DESCRIBE(v) describe((v), (char[96]){0}, 96)

int config_int(config *c, const char *path, int def, int lo, int hi) {
    cJSON *v = config_node(c, path);
    if (!v) {
        put_default(c, path, cJSON_CreateNumber(def));
        return def;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(long long)v->valuedouble)
        config_error(path, "expected an integer, got %s", DESCRIBE(v));
    if (v->valuedouble < lo || v->valuedouble > hi)
        config_error(path, "%s is out of range [%d, %d]", DESCRIBE(v), lo, hi);
    return (int)v->valuedouble;
}

double config_float(config *c, const char *path, double def, double lo, double hi) {
    cJSON *v = config_node(c, path);
    if (!v) {
        put_default(c, path, cJSON_CreateNumber(def));
        return def;
    }
    if (!cJSON_IsNumber(v)) config_error(path, "expected a number, got %s", DESCRIBE(v));
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        config_error(path, "%s is out of range [%g, %g]", DESCRIBE(v), lo, hi);
    return v->valuedouble;
}

bool config_bool(config *c, const char *path, bool def) {
    cJSON *v = config_node(c, path);
    if (!v) {
        put_default(c, path, cJSON_CreateBool(def));
        return def;
    }
    if (!cJSON_IsBool(v)) config_error(path, "expected true or false, got %s", DESCRIBE(v));
    return cJSON_IsTrue(v);
}

const char *config_str(config *c, const char *path, const char *def, const char *const *choices) {
    cJSON *v = config_node(c, path);
    if (!v) {
        if (!def) config_error(path, "required key is missing");
        put_default(c, path, cJSON_CreateString(def));
        v = config_node(c, path);
    }
    if (!cJSON_IsString(v)) config_error(path, "expected a string, got %s", DESCRIBE(v));
    if (choices) {
        bool ok = false;
        char valid[512] = "";
        for (int i = 0; choices[i]; i++) {
            ok |= strcmp(v->valuestring, choices[i]) == 0;
            snprintf(valid + strlen(valid), sizeof(valid) - strlen(valid), "%s%s", i ? ", " : "",
                     choices[i]);
        }
        if (!ok) config_error(path, "unknown value \"%s\" (valid: %s)", v->valuestring, valid);
    }
    return v->valuestring;
}

static void number_array(config *c, const char *path, int n, const double *def, double *out,
                         double lo, double hi, bool integer) {
    cJSON *v = config_node(c, path);
    if (!v) {
        if (!def) config_error(path, "required key is missing");
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; i < n; i++) {
            out[i] = def[i];
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(def[i]));
        }
        put_default(c, path, arr);
        return;
    }
    const char *kind = integer ? "integers" : "numbers";
    if (cJSON_IsNumber(v)) {
        for (int i = 0; i < n; i++) out[i] = v->valuedouble;
    } else if (cJSON_IsArray(v)) {
        if (cJSON_GetArraySize(v) != n)
            config_error(path, "expected %d %s (one per stage), got %d: %s", n, kind,
                         cJSON_GetArraySize(v), DESCRIBE(v));
        for (int i = 0; i < n; i++) {
            cJSON *e = cJSON_GetArrayItem(v, i);
            if (!cJSON_IsNumber(e)) config_error(path, "entry %d is not a number: %s", i, DESCRIBE(v));
            out[i] = e->valuedouble;
        }
    } else {
        config_error(path, "expected an array of %d %s, got %s", n, kind, DESCRIBE(v));
    }
    for (int i = 0; i < n; i++) {
        if (integer && out[i] != (double)(long long)out[i])
            config_error(path, "entry %d (%g) is not an integer", i, out[i]);
        if (!(out[i] >= lo && out[i] <= hi))
            config_error(path, "entry %d (%g) is out of range [%g, %g]", i, out[i], lo, hi);
    }
}

void config_int_array(config *c, const char *path, int n, const int *def, int *out, int lo, int hi) {
    double d[64] = {0}, o[64];
    CHECK(n <= 64, "config_int_array: %d entries", n);
    for (int i = 0; def && i < n; i++) d[i] = def[i];
    number_array(c, path, n, def ? d : NULL, o, lo, hi, true);
    for (int i = 0; i < n; i++) out[i] = (int)o[i];
}

void config_float_array(config *c, const char *path, int n, const double *def, double *out,
                        double lo, double hi) {
    number_array(c, path, n, def, out, lo, hi, false);
}

static void check_unknown(const config *c, const cJSON *node, const char *prefix) {
    const cJSON *item;
    cJSON_ArrayForEach(item, node) {
        char path[512];
        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", item->string);
        bool known = false;
        for (int i = 0; i < c->n_known && !known; i++) known = strcmp(c->known[i], path) == 0;
        if (known) continue;
        bool is_section = false;
        size_t plen = strlen(path);
        for (int i = 0; i < c->n_known && !is_section; i++)
            is_section = strncmp(c->known[i], path, plen) == 0 && c->known[i][plen] == '.';
        if (is_section && cJSON_IsObject(item)) {
            check_unknown(c, item, path);
            continue;
        }
        /* list the keys valid at this level */
        char valid[1024] = "";
        size_t pre = strlen(prefix);
        for (int i = 0; i < c->n_known; i++) {
            const char *k = c->known[i];
            if (pre && (strncmp(k, prefix, pre) != 0 || k[pre] != '.')) continue;
            const char *rest = pre ? k + pre + 1 : k;
            size_t len = strcspn(rest, ".");
            char name[128];
            snprintf(name, sizeof(name), "%.*s", (int)len, rest);
            char needle[132];
            snprintf(needle, sizeof(needle), " %s,", name);
            char padded[1030];
            snprintf(padded, sizeof(padded), " %s", valid);
            if (strstr(padded, needle)) continue;
            snprintf(valid + strlen(valid), sizeof(valid) - strlen(valid), "%s, ", name);
        }
        if (strlen(valid) >= 2) valid[strlen(valid) - 2] = 0;
        /* the nearest valid key, from the list (valid keys hold neither ',' nor ' ') */
        char words[1024];
        const char *names[256];
        int n = 0;
        snprintf(words, sizeof(words), "%s", valid);
        for (char *w = strtok(words, ", "); w && n < 256; w = strtok(NULL, ", ")) names[n++] = w;
        const char *near = config_closest(item->string, names, n);
        char hint[160] = "";
        if (near) snprintf(hint, sizeof(hint), "; did you mean %s?", near);
        config_error(path, "unknown key%s (valid keys%s%s: %s)", hint, *prefix ? " in " : "", prefix, valid);
    }
}

void config_check_unknown(const config *c) { check_unknown(c, c->root, ""); }

/* Edits from a to b: insert, delete or replace a letter, or swap two neighbours (the commonest
 * typos). Row i of the table is the distance of a's first i letters to each prefix of b; it needs
 * rows i-1 and i-2 only. */
static int edit_distance(const char *a, const char *b) {
    int lb = (int)strlen(b);
    if (lb >= 128) return 1 << 20;
    int rows[3][128], *before = rows[0], *prev = rows[1], *cur = rows[2];
    for (int j = 0; j <= lb; j++) prev[j] = j;
    for (int i = 1; a[i - 1]; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            int d = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < d) d = prev[j] + 1;
            if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && before[j - 2] + 1 < d)
                d = before[j - 2] + 1;
            cur[j] = d;
        }
        int *t = before;
        before = prev, prev = cur, cur = t;
    }
    return prev[lb];
}

const char *config_closest(const char *typed, const char *const *names, int n) {
    const char *best = NULL;
    int best_d = 0;
    for (int i = 0; i < n; i++) {
        int d = edit_distance(typed, names[i]);
        if (!best || d < best_d) best = names[i], best_d = d;
    }
    return best && (best_d <= 1 || 3 * best_d <= (int)strlen(best)) ? best : NULL;
}

char *config_to_json(const config *c) { return cJSON_Print(c->root); }
