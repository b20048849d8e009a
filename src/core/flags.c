#include "flags.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

/* *out = the integer in [lo, hi] at *p, which ends just before `stop`; *p moves past the stop */
static bool take_int(const char **p, char stop, int lo, int hi, int *out) {
    char *end;
    long v = strtol(*p, &end, 10);
    if (end == *p || *end != stop || v < lo || v > hi) return false;
    *out = (int)v;
    *p = end + 1;
    return true;
}

static bool read_int(const char *flag, const char *value, int lo, int hi, int *out) {
    const char *p = value;
    if (take_int(&p, '\0', lo, hi ? hi : 1000000000, out)) return true;
    if (hi)
        fprintf(stderr, "error: %s %s: expected an integer from %d to %d\n", flag, value, lo, hi);
    else
        fprintf(stderr, "error: %s %s: expected an integer >= %d\n", flag, value, lo);
    return false;
}

bool flag_ints(const char *text, int n, int lo, int *out) {
    for (int i = 0; i < n; i++)
        if (!take_int(&text, i + 1 < n ? ',' : '\0', lo, 1000000000, &out[i])) return false;
    return true;
}

int flag_output_file(const char *flag, const char *value, void *to) {
    char folder[4096];
    file_folder(value, folder, sizeof(folder));
    struct stat st;
    int why = stat(folder, &st) != 0      ? errno
              : !S_ISDIR(st.st_mode)      ? ENOTDIR
              : access(folder, W_OK) != 0 ? errno
                                          : 0;
    if (why) {
        fprintf(stderr, "error: %s %s: cannot write in %s: %s\n", flag, value, folder,
                strerror(why));
        return 1;
    }
    *(const char **)to = value;
    return 0;
}

int flag_png_name(const char *flag, const char *value, void *to) {
    size_t len = strlen(value);
    if (len < 5 || value[len - 5] == '/' || strcasecmp(value + len - 4, ".png")) {
        fprintf(stderr, "error: %s %s: the file is written as PNG; name it NAME.png\n", flag,
                value);
        return 2;
    }
    return flag_output_file(flag, value, to);
}

static const tool_flag *find(const tool_flag *flags, const char *name) {
    for (; flags->name; flags++)
        if (!strcmp(flags->name, name)) return flags;
    return NULL;
}

int flags_read(int argc, char **argv, const tool_flag *flags, void (*usage)(FILE *)) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        const tool_flag *f = find(flags, a);
        if (!f || (f->kind != FLAG_SWITCH && i + 1 >= argc)) {
            fprintf(stderr, "error: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
        switch (f->kind) {
        case FLAG_SWITCH: *(bool *)f->to = true; break;
        case FLAG_TEXT: *(const char **)f->to = argv[++i]; break;
        case FLAG_INT:
            if (!read_int(a, argv[++i], f->lo, f->hi, f->to)) return 2;
            break;
        case FLAG_TAKE: {
            int status = f->take(a, argv[++i], f->to);
            if (status) return status;
            break;
        }
        }
    }
    return -1;
}
