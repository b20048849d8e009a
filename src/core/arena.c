#include "arena.h"

#include <stdbool.h>
#include <string.h>

#include "check.h"

#define ARENA_ALIGN 64

struct arena_chunk {
    arena_chunk *next;
    size_t size, offset;
    char *base;
};

arena vitc_arena = {.chunk_bytes = 64u << 20};

static arena_chunk *chunk_new(size_t size) {
    arena_chunk *c = xmalloc(sizeof(arena_chunk));
    c->base = aligned_alloc(ARENA_ALIGN, (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN);
    CHECK(c->base, "out of memory: arena chunk of %zu bytes", size);
    __atomic_fetch_add(&vitc_heap_allocs, 1, __ATOMIC_RELAXED);
    c->size = size;
    c->offset = 0;
    c->next = NULL;
    return c;
}

void arena_init(arena *a, size_t chunk_bytes) {
    a->head = NULL;
    a->used = a->peak = 0;
    a->chunk_bytes = chunk_bytes;
    a->n_spare = 0;
}

void arena_free(arena *a) {
    for (arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c->base);
        free(c);
    }
    a->head = NULL;
    a->used = 0;
    a->n_spare = 0;
}

void *arena_alloc(arena *a, size_t bytes) {
    size_t need = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (need == 0) need = ARENA_ALIGN;
    arena_chunk *c = a->head;
    if (!c || c->offset + need > c->size) {
        size_t size = need > a->chunk_bytes ? need : a->chunk_bytes;
        c = chunk_new(size);
        c->next = a->head;
        a->head = c;
    }
    void *p = c->base + c->offset;
    c->offset += need;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return p;
}

void *arena_calloc(arena *a, size_t bytes) {
    void *p = arena_alloc(a, bytes);
    memset(p, 0, bytes);
    return p;
}

void arena_give_back(arena *a, void *data, size_t bytes) {
    if (a->n_spare < ARENA_SPARE_SLOTS) {
        a->spare[a->n_spare++] = (arena_block){data, bytes};
        return;
    }
    int smallest = 0; /* full: keep the larger blocks, which serve more requests */
    for (int i = 1; i < a->n_spare; i++)
        if (a->spare[i].bytes < a->spare[smallest].bytes) smallest = i;
    if (a->spare[smallest].bytes < bytes) a->spare[smallest] = (arena_block){data, bytes};
}

void *arena_calloc_spare(arena *a, size_t bytes) {
    int best = -1;
    for (int i = 0; i < a->n_spare; i++)
        if (a->spare[i].bytes >= bytes && (best < 0 || a->spare[i].bytes < a->spare[best].bytes)) best = i;
    if (best < 0) return arena_calloc(a, bytes);
    void *p = a->spare[best].data;
    a->spare[best] = a->spare[--a->n_spare];
    memset(p, 0, bytes);
    return p;
}

void arena_reset(arena *a) {
    a->n_spare = 0;
    if (a->peak && (!a->head || a->head->next || a->head->size < a->peak)) {
        /* the step spilled over several chunks (which layer-by-layer inference may have released
         * already): replace them by one block that fits the peak */
        size_t size = a->peak > a->chunk_bytes ? a->peak : a->chunk_bytes;
        arena_free(a);
        a->head = chunk_new(size);
    }
    if (a->head) a->head->offset = 0;
    a->used = 0;
}

arena_mark arena_get_mark(const arena *a) {
    arena_mark m = {a->head, a->head ? a->head->offset : 0, a->used};
    return m;
}

/* whether p lies in a chunk newer than the mark's, or past the mark in its chunk */
static bool after_mark(const arena *a, arena_mark m, const char *p) {
    for (arena_chunk *c = a->head; c; c = c == m.chunk ? NULL : c->next) {
        const char *lo = c == m.chunk ? c->base + m.offset : c->base;
        if (p >= lo && p < c->base + c->offset) return true;
    }
    return false;
}

void arena_release(arena *a, arena_mark m) {
    for (int i = 0; i < a->n_spare;) /* spare blocks past the mark go with it */
        if (after_mark(a, m, a->spare[i].data)) a->spare[i] = a->spare[--a->n_spare];
        else i++;
    while (a->head && a->head != m.chunk) {
        arena_chunk *c = a->head;
        a->head = c->next;
        free(c->base);
        free(c);
    }
    if (a->head) a->head->offset = m.offset;
    a->used = m.used;
}

void *arena_keep(arena *a, arena_mark m, void *data, size_t bytes) {
    if (!m.chunk) return data;
    if (!after_mark(a, m, data)) {
        arena_release(a, m);
        return data;
    }
    size_t need = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (m.offset + need > m.chunk->size) {
        /* no room at the mark: park the block on the heap while the arena lets go of the rest */
        void *parked = xmalloc(bytes);
        memcpy(parked, data, bytes);
        arena_release(a, m);
        void *dst = arena_alloc(a, bytes);
        memcpy(dst, parked, bytes);
        free(parked);
        return dst;
    }
    char *dst = m.chunk->base + m.offset;
    memmove(dst, data, bytes); /* before the release, which may free data's chunk */
    arena_release(a, m);
    m.chunk->offset = m.offset + need;
    a->used = m.used + need;
    return dst;
}
