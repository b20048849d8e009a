#include "check.h"

#include <stdarg.h>
#include <string.h>

log_level vitc_log_level = LOG_INFO;
long vitc_heap_allocs = 0;
jmp_buf *vitc_die_jump = NULL;
char vitc_die_message[1024];

void vitc_die(const char *file, int line, const char *cond, const char *fmt, ...) {
    va_list ap;
    if (vitc_die_jump) {
        va_start(ap, fmt);
        vsnprintf(vitc_die_message, sizeof(vitc_die_message), fmt, ap);
        va_end(ap);
        longjmp(*vitc_die_jump, 1);
    }
    fflush(stdout);
    fprintf(stderr, "error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    /* the source location helps who debugs vitc, not who feeds it a bad file */
    const char *debug = getenv("VITC_DEBUG");
    if (debug && !strcmp(debug, "1")) {
        if (cond) fprintf(stderr, "  (check failed: %s at %s:%d)\n", cond, file, line);
        else fprintf(stderr, "  (at %s:%d)\n", file, line);
    }
    exit(1);
}

void vitc_log(log_level level, const char *fmt, ...) {
    if (level > vitc_log_level) return;
    FILE *f = level == LOG_WARN ? stderr : stdout;
    if (level == LOG_WARN) fprintf(f, "warning: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
}

void *vitc_xmalloc(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) vitc_die(file, line, NULL, "out of memory allocating %zu bytes", n);
    __atomic_fetch_add(&vitc_heap_allocs, 1, __ATOMIC_RELAXED);
    return p;
}

void *vitc_xcalloc(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) vitc_die(file, line, NULL, "out of memory allocating %zu x %zu bytes", n, size);
    __atomic_fetch_add(&vitc_heap_allocs, 1, __ATOMIC_RELAXED);
    return p;
}

void *vitc_xrealloc(void *p, size_t n, const char *file, int line) {
    void *q = realloc(p, n ? n : 1);
    if (!q) vitc_die(file, line, NULL, "out of memory reallocating to %zu bytes", n);
    __atomic_fetch_add(&vitc_heap_allocs, 1, __ATOMIC_RELAXED);
    return q;
}
