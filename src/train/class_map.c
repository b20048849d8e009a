#include "class_map.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/check.h"
#include "../core/file.h"

/* a map holds a line per class: ImageNet-22K's 21841 classes, and room to spare */
#define CLASS_MAP_MAX_BYTES (16u << 20)

static int *fail(int *rows, char *text) {
    free(rows), free(text);
    return NULL;
}

int *class_map_read(const char *path, int classes, int file_classes, char *err, size_t err_len) {
    size_t size;
    char *text = file_read_whole(path, CLASS_MAP_MAX_BYTES, &size, err, err_len);
    if (!text) return NULL;
    int *rows = xmalloc(sizeof(int) * (size_t)classes), n = 0, line = 0;
    for (char *p = text, *next; *p; p = next) {
        line++;
        next = p + strcspn(p, "\n");
        if (*next) *next++ = 0;
        while (isspace((unsigned char)*p)) p++;
        if (!*p) continue;
        char *end;
        errno = 0;
        long row = strtol(p, &end, 10);
        while (isspace((unsigned char)*end)) end++;
        if (end == p || *end || errno) {
            snprintf(err, err_len, "%s line %d: \"%.40s\" is not a row number", path, line, p);
            return fail(rows, text);
        }
        if (row < 0 || row >= file_classes) {
            snprintf(
                err, err_len,
                "%s line %d: row %ld is not one of the checkpoint's head, whose rows are 0 to %d",
                path, line, row, file_classes - 1);
            return fail(rows, text);
        }
        if (n < classes) rows[n] = (int)row;
        n++;
    }
    if (n != classes) {
        snprintf(err, err_len, "%s: %d rows for the model's %d classes (model.num_classes)", path,
                 n, classes);
        return fail(rows, text);
    }
    free(text);
    return rows;
}
