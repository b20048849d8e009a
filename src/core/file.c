#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"

static char *fail(FILE *fp, char *err, size_t err_len, const char *path, const char *why) {
    if (fp) fclose(fp);
    snprintf(err, err_len, "%s: %s", path, why);
    return NULL;
}

char *file_read_whole(const char *path, size_t max_size, size_t *size, char *err, size_t err_len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return fail(NULL, err, err_len, path, strerror(errno));
    /* a directory opens for reading too, and then claims to be 2^63 bytes long */
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) return fail(fp, err, err_len, path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return fail(fp, err, err_len, path, "is a directory, not a file");
    if (!S_ISREG(st.st_mode)) return fail(fp, err, err_len, path, "is not a regular file");
    if ((size_t)st.st_size > max_size) {
        char why[96];
        snprintf(why, sizeof(why), "%lld bytes, more than the %zu this file may have",
                 (long long)st.st_size, max_size);
        return fail(fp, err, err_len, path, why);
    }
    char *bytes = xmalloc((size_t)st.st_size + 1);
    size_t got = fread(bytes, 1, (size_t)st.st_size, fp);
    if (got != (size_t)st.st_size) {
        free(bytes);
        char why[96];
        snprintf(why, sizeof(why), "read %zu of %lld bytes", got, (long long)st.st_size);
        return fail(fp, err, err_len, path, why);
    }
    fclose(fp);
    bytes[got] = 0;
    *size = got;
    return bytes;
}

void file_folder(const char *path, char *folder, size_t len) {
    snprintf(folder, len, "%s", path);
    char *slash = strrchr(folder, '/');
    if (!slash)
        snprintf(folder, len, ".");
    else if (slash == folder)
        slash[1] = 0;
    else
        *slash = 0;
}
