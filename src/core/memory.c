#include "memory.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "check.h"

static void *host_alloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    CHECK(p, "out of memory: %zu bytes", bytes);
    __atomic_fetch_add(&vitc_heap_allocs, 1, __ATOMIC_RELAXED);
    return p;
}
static void host_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void host_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

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
