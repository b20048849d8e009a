#include "real_labels.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/check.h"
#include "../core/file.h"
#include "../data/data.h"

/* real.json is 0.4 MB for ImageNet's 50000 validation images */
#define REAL_LABELS_MAX_BYTES (64u << 20)

/* the number N of a file named ILSVRC2012_val_NNNNNNNN.<extension> (from 1), else 0 */
static long validation_number(const char *path) {
    const char *name = strrchr(path, '/'), *prefix = "ILSVRC2012_val_";
    name = name ? name + 1 : path;
    if (strncmp(name, prefix, strlen(prefix))) return 0;
    name += strlen(prefix);
    long number = 0;
    for (int i = 0; i < 8; i++) {
        if (!isdigit((unsigned char)name[i])) return 0;
        number = number * 10 + (name[i] - '0');
    }
    return name[8] == '.' ? number : 0;
}

/* entry i of list: a list of class numbers below num_classes, else err */
static bool entry_valid(const cJSON *entry, long i, const char *path, int num_classes, char *err,
                        size_t err_len) {
    if (!cJSON_IsArray(entry)) {
        snprintf(err, err_len, "%s: entry %ld (ILSVRC2012_val_%08ld) is not a list of classes",
                 path, i, i + 1);
        return false;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, entry) {
        double v = cJSON_IsNumber(c) ? c->valuedouble : -1;
        if (!(v >= 0 && v < num_classes) || v != (double)(int)v) {
            char *text = cJSON_PrintUnformatted(c);
            snprintf(err, err_len,
                     "%s: entry %ld (ILSVRC2012_val_%08ld): %.40s is not among the model's classes "
                     "(0 to %d)",
                     path, i, i + 1, text ? text : "?", num_classes - 1);
            free(text);
            return false;
        }
    }
    return true;
}

bool real_labels_read(label_sets *s, const char *path, const dataset *d, int num_classes, char *err,
                      size_t err_len) {
    memset(s, 0, sizeof(*s));
    size_t size;
    char *text = file_read_whole(path, REAL_LABELS_MAX_BYTES, &size, err, err_len);
    if (!text) return false;
    cJSON *list = cJSON_ParseWithLength(text, size);
    free(text);
    bool ok = cJSON_IsArray(list);
    if (!ok)
        snprintf(err, err_len, "%s: not a JSON list of class lists (ImageNet-ReaL's real.json)",
                 path);
    long entries = ok ? cJSON_GetArraySize(list) : 0, i = 0;
    for (const cJSON *entry = ok ? list->child : NULL; ok && entry; entry = entry->next, i++)
        ok = entry_valid(entry, i, path, num_classes, err, err_len);
    if (ok) {
        /* the entries by number (cJSON's list is linked) */
        const cJSON **at = xmalloc(sizeof(cJSON *) * (size_t)(entries + 1));
        i = 0;
        for (const cJSON *entry = list->child; entry; entry = entry->next) at[i++] = entry;
        s->n = d->n;
        s->start = xcalloc((size_t)d->n + 1, sizeof(int));
        size_t total = 0;
        for (int k = 0; ok && k < d->n; k++) {
            long number = validation_number(d->paths[k]);
            if (number < 1 || number > entries) {
                snprintf(err, err_len,
                         "%s labels ImageNet's validation images ILSVRC2012_val_00000001 to "
                         "ILSVRC2012_val_%08ld (by file name); %s is not one of them",
                         path, entries, d->paths[k]);
                ok = false;
            } else {
                total += (size_t)cJSON_GetArraySize(at[number - 1]);
            }
        }
        s->classes = xmalloc(sizeof(int) * (total + 1));
        for (int k = 0; ok && k < d->n; k++) {
            const cJSON *c;
            s->start[k + 1] = s->start[k];
            cJSON_ArrayForEach(c, at[validation_number(d->paths[k]) - 1]) {
                s->classes[s->start[k + 1]++] = (int)c->valuedouble;
            }
        }
        free(at);
    }
    cJSON_Delete(list);
    if (!ok) label_sets_free(s);
    return ok;
}

void label_sets_free(label_sets *s) {
    free(s->start);
    free(s->classes);
    memset(s, 0, sizeof(*s));
}
