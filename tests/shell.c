#include "shell.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/wait.h>

int run(char *out, size_t len, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    char full[4200];
    snprintf(full, sizeof(full), "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    size_t n = 0;
    if (p) {
        size_t got;
        while (n + 1 < len && (got = fread(out + n, 1, len - 1 - n, p)) > 0) n += got;
        char sink[4096];
        while (fread(sink, 1, sizeof(sink), p) > 0) {}
    }
    out[n] = 0;
    int status = p ? pclose(p) : -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
