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

int *class_map_read(const char *path, int rows, const char *rows_of, int *n, char *err,
                    size_t err_len) {
    size_t size;
    char *text = file_read_whole(path, CLASS_MAP_MAX_BYTES, &size, err, err_len);
    if (!text) return NULL;
    /* a line holds a row and its newline at least */
    int *map = xmalloc(sizeof(int) * (size / 2 + 1)), line = 0;
    *n = 0;
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
            free(map), map = NULL;
            break;
        }
        if (row < 0 || row >= rows) {
            snprintf(err, err_len, "%s line %d: %ld is not among %s (0 to %d)", path, line, row,
                     rows_of, rows - 1);
            free(map), map = NULL;
            break;
        }
        map[(*n)++] = (int)row;
    }
    free(text);
    return map;
}
