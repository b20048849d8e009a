#include "arena.h"

#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "memory.h"

#define ARENA_ALIGN 64

struct arena_chunk {
    arena_chunk *next;
    size_t size, offset;
    char *base;
};

arena vitc_arena = {.chunk_bytes = 256u << 20};
bool arena_poison;

/* host memory handed out unset, filled with NaN under arena_poison */
static void *handed_out(const arena *a, void *p, size_t bytes) {
    if (arena_poison && !a->mem) memset(p, 0xff, bytes);
    return p;
}

static const memory_ops *memory_of(const arena *a) { return a->mem ? a->mem : &host_memory; }

static arena_chunk *chunk_new(const arena *a, size_t size) {
    arena_chunk *c = xmalloc(sizeof(arena_chunk));
    c->base = memory_of(a)->alloc((size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN);
    c->size = size;
    c->offset = 0;
    c->next = NULL;
    return c;
}

static void forget_island(arena *a) {
    a->island = a->island_next = NULL;
    a->island_left = 0;
}

void arena_init(arena *a, size_t chunk_bytes) {
    a->head = NULL;
    a->used = a->peak = 0;
    a->chunk_bytes = chunk_bytes;
    a->n_spare = 0;
    a->mem = NULL;
    a->companion = NULL;
    forget_island(a);
}

void arena_free(arena *a) {
    if (a->companion) arena_free(a->companion);
    for (arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        memory_of(a)->free(c->base);
        free(c);
    }
    a->head = NULL;
    a->used = 0;
    a->n_spare = 0;
    forget_island(a);
}

static size_t aligned_size(size_t bytes) {
    size_t need = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    return need ? need : ARENA_ALIGN;
}

void *arena_alloc(arena *a, size_t bytes) {
    size_t need = aligned_size(bytes);
    arena_chunk *c = a->head;
    if (!c || c->offset + need > c->size) {
        size_t size = need > a->chunk_bytes ? need : a->chunk_bytes;
        c = chunk_new(a, size);
        c->next = a->head;
        a->head = c;
    }
    void *p = c->base + c->offset;
    c->offset += need;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return handed_out(a, p, bytes);
}

void *arena_alloc_small(arena *a, size_t bytes) {
    CHECK(!a->mem, "arena: small objects (tensor structs) belong in host memory, not %s's", a->mem->name);
    size_t need = aligned_size(bytes);
    if (need > ARENA_ISLAND_BYTES) return arena_alloc(a, bytes);
    if (need > a->island_left) {
        a->island = a->island_next = arena_alloc(a, ARENA_ISLAND_BYTES);
        a->island_left = ARENA_ISLAND_BYTES;
    }
    void *p = a->island_next;
    a->island_next += need;
    a->island_left -= need;
    return p;
}

void *arena_calloc(arena *a, size_t bytes) {
    void *p = arena_alloc(a, bytes);
    memory_of(a)->zero(p, bytes);
    return p;
}

/* two blocks meeting at p may merge unless p starts a chunk (chunks are separate allocations) */
static bool chunk_starts_at(const arena *a, const char *p) {
    for (const arena_chunk *c = a->head; c; c = c->next)
        if (c->base == p) return true;
    return false;
}

static void drop_spare(arena *a, int i) { a->spare[i] = a->spare[--a->n_spare]; }

void arena_give_back(arena *a, void *data, size_t bytes) {
    char *lo = data, *hi = lo + aligned_size(bytes);
    for (int i = 0; i < a->n_spare;) { /* merge with the free neighbours on either side */
        char *s_lo = a->spare[i].data, *s_hi = s_lo + a->spare[i].bytes;
        CHECK(hi <= s_lo || lo >= s_hi, "arena: block at %p (%zu bytes) given back twice", data, bytes);
        if (s_hi == lo && !chunk_starts_at(a, lo)) lo = s_lo, drop_spare(a, i);
        else if (s_lo == hi && !chunk_starts_at(a, hi)) hi = s_hi, drop_spare(a, i);
        else i++;
    }
    arena_chunk *c = a->head;
    if (c && hi == c->base + c->offset && lo >= c->base) { /* the top of the newest chunk: unbump */
        c->offset = (size_t)(lo - c->base);
        a->used -= (size_t)(hi - lo);
        return;
    }
    arena_block block = {lo, (size_t)(hi - lo)};
    if (a->n_spare < ARENA_SPARE_SLOTS) {
        a->spare[a->n_spare++] = block;
        return;
    }
    int smallest = 0; /* full: keep the larger blocks, which serve more requests */
    for (int i = 1; i < a->n_spare; i++)
        if (a->spare[i].bytes < a->spare[smallest].bytes) smallest = i;
    if (a->spare[smallest].bytes < block.bytes) a->spare[smallest] = block;
}

void *arena_alloc_spare(arena *a, size_t bytes) {
    size_t need = aligned_size(bytes);
    int best = -1;
    for (int i = 0; i < a->n_spare; i++)
        if (a->spare[i].bytes >= need && (best < 0 || a->spare[i].bytes < a->spare[best].bytes)) best = i;
    if (best < 0) return arena_alloc(a, bytes);
    arena_block *s = &a->spare[best];
    void *p = s->data;
    if (s->bytes > need) { /* the rest of the block stays spare */
        s->data = (char *)s->data + need;
        s->bytes -= need;
    } else {
        drop_spare(a, best);
    }
    return handed_out(a, p, bytes);
}

void *arena_calloc_spare(arena *a, size_t bytes) {
    void *p = arena_alloc_spare(a, bytes);
    memory_of(a)->zero(p, bytes);
    return p;
}

float *scratch_floats(size_t n) { return arena_alloc_spare(vitc_data_arena(), sizeof(float) * n); }

void scratch_done(float *p, size_t n) {
    if (p) arena_give_back(vitc_data_arena(), p, sizeof(float) * n);
}

void arena_reset(arena *a) {
    if (a->companion) arena_reset(a->companion);
    a->n_spare = 0;
    forget_island(a);
    if (a->peak && (!a->head || a->head->next || a->head->size < a->peak)) {
        /* the step spilled over several chunks (which layer-by-layer inference may have released
         * already): replace them by one block that fits the peak, and an eighth more, so that a
         * later step that asks a little more (scratch sized by the drop-path mask's kept samples)
         * does not spill again: each new block is memory the system hands over page by page */
        size_t fit = a->peak + a->peak / 8, size = fit > a->chunk_bytes ? fit : a->chunk_bytes;
        arena *companion = a->companion;
        a->companion = NULL; /* reset above, not freed */
        arena_free(a);
        a->companion = companion;
        a->head = chunk_new(a, size);
    }
    if (a->head) a->head->offset = 0;
    a->used = 0;
}

arena_mark arena_get_mark(const arena *a) {
    arena_mark m = {a->head, a->head ? a->head->offset : 0, a->used, NULL, 0, 0};
    if (a->companion) {
        arena_mark d = arena_get_mark(a->companion);
        m.data_chunk = d.chunk, m.data_offset = d.offset, m.data_used = d.used;
    }
    return m;
}

static arena_mark companion_mark(arena_mark m) {
    return (arena_mark){m.data_chunk, m.data_offset, m.data_used, NULL, 0, 0};
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
    if (a->companion) arena_release(a->companion, companion_mark(m));
    for (int i = 0; i < a->n_spare;) { /* spare blocks past the mark go with it */
        arena_block *s = &a->spare[i];
        if (after_mark(a, m, s->data)) {
            drop_spare(a, i);
            continue;
        }
        if (m.chunk && after_mark(a, m, (char *)s->data + s->bytes - 1)) /* straddles the mark */
            s->bytes = (size_t)(m.chunk->base + m.offset - (char *)s->data);
        i++;
    }
    if (a->island && after_mark(a, m, a->island)) forget_island(a);
    while (a->head && a->head != m.chunk) {
        arena_chunk *c = a->head;
        a->head = c->next;
        memory_of(a)->free(c->base);
        free(c);
    }
    if (a->head) a->head->offset = m.offset;
    a->used = m.used;
}

void *arena_keep(arena *a, arena_mark m, void *data, size_t bytes) {
    if (a->companion) { /* the block is tensor data, in the companion */
        arena *companion = a->companion;
        a->companion = NULL;
        arena_release(a, m);
        a->companion = companion;
        return arena_keep(companion, companion_mark(m), data, bytes);
    }
    if (!m.chunk) return data;
    if (!after_mark(a, m, data)) {
        arena_release(a, m);
        return data;
    }
    size_t need = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    const memory_ops *mem = memory_of(a);
    char *dst = m.chunk->base + m.offset;
    if (dst == (char *)data) { /* already in its place */
        arena_release(a, m);
        m.chunk->offset = m.offset + need;
        a->used = m.used + need;
        return dst;
    }
    /* no room at the mark, or a move onto itself that a device copy does not allow: park the block
     * elsewhere while the arena lets go of the rest */
    if (m.offset + need > m.chunk->size || (a->mem && dst + bytes > (char *)data)) {
        void *parked = mem->alloc(bytes);
        mem->copy(parked, data, bytes);
        arena_release(a, m);
        dst = arena_alloc(a, bytes);
        mem->copy(dst, parked, bytes);
        mem->free(parked);
        return dst;
    }
    /* before the release, which may free data's chunk; a host block that overlaps its new place
     * moves in one thread's memmove */
    if (a->mem || dst + bytes <= (char *)data) mem->copy(dst, data, bytes);
    else memmove(dst, data, bytes);
    arena_release(a, m);
    m.chunk->offset = m.offset + need;
    a->used = m.used + need;
    return dst;
}
