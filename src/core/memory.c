#include "memory.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "check.h"
#include "threads.h"

static void *host_alloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    CHECK(p, "out of memory: %zu bytes", bytes);
    __atomic_fetch_add(&vitc_heap_allocs, 1, __ATOMIC_RELAXED);
    return p;
}
/* from this size on every thread zeroes or copies its share: the reverse pass zeroes each
 * gradient as it first asks for it, inference moves each block's output down the arena, and one
 * thread's memset or memcpy of the large ones kept the others waiting */
#define SHARED_BYTES ((size_t)256 << 10)

/* this thread's share [lo, hi) of `bytes`, cut at cache lines */
static void my_share(size_t bytes, size_t *lo, size_t *hi) {
    size_t lines = (bytes + 63) / 64, t = (size_t)vitc_thread_id(), team = (size_t)vitc_team_size();
    *lo = lines * t / team * 64;
    *hi = lines * (t + 1) / team * 64;
    if (*hi > bytes) *hi = bytes;
}

static void host_zero(void *p, size_t bytes) {
    if (bytes < SHARED_BYTES || vitc_in_parallel()) {
        memset(p, 0, bytes);
        return;
    }
#pragma omp parallel
    {
        size_t lo, hi;
        my_share(bytes, &lo, &hi);
        if (hi > lo) memset((char *)p + lo, 0, hi - lo);
    }
}

static void host_copy(void *dst, const void *src, size_t bytes) {
    if (bytes < SHARED_BYTES || vitc_in_parallel()) {
        memcpy(dst, src, bytes);
        return;
    }
#pragma omp parallel
    {
        size_t lo, hi;
        my_share(bytes, &lo, &hi);
        if (hi > lo) memcpy((char *)dst + lo, (const char *)src + lo, hi - lo);
    }
}

const memory_ops host_memory = {DEV_CPU, "cpu", host_alloc, free, host_zero, host_copy, host_copy, host_copy};

static const memory_ops *current = &host_memory;
static arena device_arena;

void vitc_set_memory(const memory_ops *m) {
    if (m == current) return;
    if (current != &host_memory) arena_free(&device_arena);
    current = m;
    if (m == &host_memory) {
        vitc_arena.companion = NULL;
        return;
    }
    arena_init(&device_arena, vitc_arena.chunk_bytes);
    device_arena.mem = m;
    vitc_arena.companion = &device_arena;
}

const memory_ops *vitc_memory(void) { return current; }
