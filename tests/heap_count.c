/* Counts every call into the system heap made by the test process (ours, OpenBLAS's, OpenMP's) by
 * interposing malloc & co. over glibc's. Not built under AddressSanitizer, which owns the heap; the
 * allocation test then falls back to vitc's own counter (vitc_heap_allocs). */
#include "heap_count.h"

#if !defined(__SANITIZE_ADDRESS__)
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static long system_heap_calls;

static void count(void) { __atomic_fetch_add(&system_heap_calls, 1, __ATOMIC_RELAXED); }

void *malloc(size_t n) {
    count();
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size) {
    count();
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n) {
    count();
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n) {
    count();
    return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n) {
    count();
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n) {
    count();
    *out = __libc_memalign(align, n);
    return *out ? 0 : 12; /* ENOMEM */
}

long heap_calls(void) { return __atomic_load_n(&system_heap_calls, __ATOMIC_RELAXED); }
bool heap_calls_counted(void) { return true; }
#else
#include "../src/core/check.h"

long heap_calls(void) { return vitc_heap_allocs; }
bool heap_calls_counted(void) { return false; }
#endif
