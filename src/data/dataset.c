/* Dataset indexing: a folder of class folders (sorted names = class indices, as torchvision's
 * ImageFolder) or a list file of "path label" lines. Files are not opened here: those not named as
 * images are left out, and unreadable ones are found, warned about and skipped by the loader. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../core/check.h"
#include "../core/file.h"
#include "data.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* sorted names of the entries of dir that are directories (want_dirs) or regular files, skipping
 * hidden ones; NULL with err set if dir cannot be read */
static char **list_dir(const char *dir, bool want_dirs, int *count, char *err, size_t err_len) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, err_len, "cannot open folder %s: %s", dir, strerror(errno));
        return NULL;
    }
    int n = 0, cap = 64;
    char **names = xmalloc(sizeof(char *) * (size_t)cap);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || (want_dirs ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) continue;
        if (n == cap) names = xrealloc(names, sizeof(char *) * (size_t)(cap *= 2));
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(char *), cmp_str);
    *count = n;
    return names;
}

/* named as an image stb_image decodes (by extension, in any case) */
static bool is_image_name(const char *name) {
    static const char *const extensions[] = {"jpg", "jpeg", "png", "bmp", "gif", "tga",
                                             "ppm", "pgm",  "pnm", "psd", "hdr", "pic"};
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    for (size_t i = 0; i < sizeof(extensions) / sizeof(extensions[0]); i++)
        if (!strcasecmp(dot + 1, extensions[i])) return true;
    return false;
}

static void add_sample(dataset *d, int *cap, char *path, int label) {
    if (d->n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        d->paths = xrealloc(d->paths, sizeof(char *) * (size_t)*cap);
        d->labels = xrealloc(d->labels, sizeof(int) * (size_t)*cap);
    }
    d->paths[d->n] = path;
    d->labels[d->n++] = label;
}

static bool open_folder(dataset *d, const char *root, char *err, size_t err_len) {
    int n_classes = 0, cap = 0;
    char **classes = list_dir(root, true, &n_classes, err, err_len);
    if (!classes) return false;
    if (n_classes == 0) {
        free(classes);
        snprintf(err, err_len, "%s has no class folders (expected %s/<class>/<image>)", root, root);
        return false;
    }
    d->class_names = classes;
    d->n_classes = n_classes;
    for (int c = 0; c < n_classes; c++) {
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s/%s", root, classes[c]);
        int n_files = 0;
        char **files = list_dir(dir, false, &n_files, err, err_len);
        if (!files) return false;
        int images = 0;
        for (int i = 0; i < n_files; i++) {
            size_t len = strlen(dir) + strlen(files[i]) + 2;
            char *path = xmalloc(len);
            snprintf(path, len, "%s/%s", dir, files[i]);
            if (is_image_name(files[i])) {
                add_sample(d, &cap, path, c);
                images++;
            } else if (d->not_images++ == 0) {
                d->not_image = path;
            } else {
                free(path);
            }
            free(files[i]);
        }
        free(files);
        if (images == 0 && n_files == 0)
            snprintf(err, err_len, "class folder %s is empty", dir);
        else if (images == 0)
            snprintf(err, err_len,
                     "class folder %s has no images (%d files, none named as one: .jpg "
                     ".jpeg .png .bmp .gif .tga .ppm .pgm .pnm .psd .hdr .pic)",
                     dir, n_files);
        if (images == 0) return false;
    }
    return true;
}

static bool open_list(dataset *d, const char *list, char *err, size_t err_len) {
    FILE *f = fopen(list, "r");
    if (!f) {
        snprintf(err, err_len, "cannot open list file %s: %s", list, strerror(errno));
        return false;
    }
    char base[4096];
    file_folder(list, base, sizeof(base));
    char line[8192];
    int cap = 0, lineno = 0, max_label = -1;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *end = line + strlen(line);
        while (end > line && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ')) *--end = 0;
        if (!line[0] || line[0] == '#') continue;
        char *sp = strrchr(line, ' ');
        char *tail = NULL;
        long label = sp ? strtol(sp + 1, &tail, 10) : -1;
        if (!sp || tail == sp + 1 || *tail || label < 0 || label > 1000000) {
            fclose(f);
            snprintf(err, err_len, "%s:%d: expected \"path label\" with a label >= 0", list, lineno);
            return false;
        }
        *sp = 0;
        size_t len = strlen(base) + strlen(line) + 2;
        char *path = xmalloc(len);
        if (line[0] == '/') snprintf(path, len, "%s", line);
        else snprintf(path, len, "%s/%s", base, line);
        add_sample(d, &cap, path, (int)label);
        if (label > max_label) max_label = (int)label;
    }
    fclose(f);
    if (d->n == 0) {
        snprintf(err, err_len, "list file %s has no samples", list);
        return false;
    }
    d->n_classes = max_label + 1;
    d->class_names = xmalloc(sizeof(char *) * (size_t)d->n_classes);
    for (int c = 0; c < d->n_classes; c++) {
        char name[16];
        snprintf(name, sizeof(name), "%d", c);
        d->class_names[c] = strdup(name);
    }
    return true;
}

bool dataset_open(dataset *d, const char *root, char *err, size_t err_len) {
    memset(d, 0, sizeof(*d));
    struct stat st;
    if (stat(root, &st) != 0) {
        snprintf(err, err_len, "%s: %s", root, strerror(errno));
        return false;
    }
    d->listed = !S_ISDIR(st.st_mode);
    bool ok = d->listed ? open_list(d, root, err, err_len) : open_folder(d, root, err, err_len);
    if (!ok) dataset_free(d);
    else
        d->root = strdup(root);
    return ok;
}

static int index_of(const char *name, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (names[i] && !strcmp(names[i], name)) return i;
    return -1;
}

class_match dataset_match_classes(const dataset *d, const char *const *names, int n,
                                  const char *whose, char *err, size_t err_len) {
    if (d->listed) {
        if (d->n_classes <= n) return CLASSES_MATCH;
        snprintf(err, err_len, "%s has labels up to %d, but %s has %d classes (labels 0 to %d)",
                 d->root, d->n_classes - 1, whose, n, n - 1);
        return CLASSES_DIFFER;
    }
    int shared = 0, first_apart = -1;
    for (int c = 0; c < d->n_classes; c++) {
        if (index_of(d->class_names[c], names, n) >= 0) shared++;
        if (first_apart < 0 && (c >= n || !names[c] || strcmp(d->class_names[c], names[c])))
            first_apart = c;
    }
    if (first_apart < 0) return CLASSES_MATCH; /* (with whose's last classes absent here) */
    if (shared == 0 && d->n_classes == n) {
        snprintf(err, err_len, "%s names its classes apart from %s ('%s' against '%s' for label 0)",
                 d->root, whose, d->class_names[0], names[0] ? names[0] : "?");
        return CLASSES_NAMED_APART;
    }
    const char *name = d->class_names[first_apart];
    int at = index_of(name, names, n);
    char gives[300], own[300];
    if (first_apart < n)
        snprintf(gives, sizeof(gives), "'%s'", names[first_apart] ? names[first_apart] : "?");
    else
        snprintf(gives, sizeof(gives), "no class (it has %d)", n);
    if (at >= 0)
        snprintf(own, sizeof(own), "its label for '%s' is %d", name, at);
    else
        snprintf(own, sizeof(own), "'%s' is not among its classes", name);
    snprintf(err, err_len,
             "class folder %s/%s would take label %d, which %s gives to %s (%s): a class folder "
             "missing, added or renamed shifts every label after it",
             d->root, name, first_apart, whose, gives, own);
    return CLASSES_DIFFER;
}

/* the number a class folder's name is (digits alone, no leading zero), else -1 */
static long folder_number(const char *name) {
    size_t len = strlen(name);
    if (!len || len > 9 || strspn(name, "0123456789") != len || (name[0] == '0' && len > 1))
        return -1;
    return strtol(name, NULL, 10);
}

class_match dataset_numbered_classes(dataset *d, class_match match) {
    if (match != CLASSES_NAMED_APART || d->listed) return match;
    int n = d->n_classes, *label = xmalloc(sizeof(int) * (size_t)n);
    unsigned char *taken = xcalloc((size_t)n, 1);
    bool numbered = true;
    for (int c = 0; numbered && c < n; c++) {
        long k = folder_number(d->class_names[c]);
        numbered = k >= 0 && k < n && !taken[k];
        if (numbered) taken[k] = 1, label[c] = (int)k;
    }
    if (numbered) {
        char **names = xmalloc(sizeof(char *) * (size_t)n);
        for (int c = 0; c < n; c++) names[label[c]] = d->class_names[c];
        free(d->class_names);
        d->class_names = names;
        for (int i = 0; i < d->n; i++) d->labels[i] = label[d->labels[i]];
    }
    free(label);
    free(taken);
    return numbered ? CLASSES_NUMBERED : match;
}

bool dataset_classes_agree(class_match match, const char *key, const char *why, bool lead) {
    if (match == CLASSES_DIFFER)
        fprintf(stderr, "error: %s: %s\n", key, why);
    else if (match == CLASSES_NAMED_APART && lead)
        fprintf(stderr, "note: %s: %s: labels follow the class folders' sorted order\n", key, why);
    else if (match == CLASSES_NUMBERED && lead)
        fprintf(stderr,
                "note: %s: %s: its class folders are numbered (as ImageNet-V2's): folder K is "
                "class K\n",
                key, why);
    return match != CLASSES_DIFFER;
}

void dataset_free(dataset *d) {
    for (int i = 0; i < d->n; i++) free(d->paths[i]);
    for (int c = 0; c < d->n_classes && d->class_names; c++) free(d->class_names[c]);
    free(d->paths);
    free(d->labels);
    free(d->class_names);
    free(d->root);
    free(d->not_image);
    memset(d, 0, sizeof(*d));
}

void dataset_note(const dataset *d, const char *key) {
    if (d->not_images)
        fprintf(stderr,
                "note: %s: %d file%s in %s's class folders %s not named as images, left out (e.g. "
                "%s)\n",
                key, d->not_images, d->not_images > 1 ? "s" : "", d->root,
                d->not_images > 1 ? "are" : "is", d->not_image);
}
