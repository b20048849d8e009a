/* Bump allocator for activations, saved tensors and gradients of one step. Reset after the optimizer
 * step; when a step outgrew the first chunk, the reset replaces the chunks by one block of the peak
 * size, so from the second step on no step touches the system heap. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define ARENA_SPARE_SLOTS 256
#define ARENA_ISLAND_BYTES (64u << 10)

typedef struct arena_chunk arena_chunk;
struct memory_ops;
typedef struct arena_block {
    void *data;
    size_t bytes;
} arena_block;
typedef struct arena {
    arena_chunk *head;  /* newest chunk first */
    size_t used;        /* bytes handed out across all chunks since the last reset */
    size_t peak;        /* high-water mark of `used` since creation */
    size_t chunk_bytes; /* default size of a new chunk */
    /* blocks given back before the reset (dead gradients of the reverse pass), for reuse */
    arena_block spare[ARENA_SPARE_SLOTS];
    int n_spare;
    /* small objects (tensor structs) come from islands of ARENA_ISLAND_BYTES, so that they do not
     * sit between the data blocks and keep given-back neighbours from merging */
    char *island, *island_next;
    size_t island_left;
    const struct memory_ops *mem; /* where the chunks live; NULL: host memory */
    /* vitc_arena's arena for tensor data in a device's memory (memory.h), which it resets, marks
     * and releases along with itself; NULL when tensor data is on the host (in this arena) */
    struct arena *companion;
} arena;

typedef struct arena_mark {
    arena_chunk *chunk;
    size_t offset, used;
    arena_chunk *data_chunk; /* the companion's position, when there is one */
    size_t data_offset, data_used;
} arena_mark;

void arena_init(arena *a, size_t chunk_bytes);
void arena_free(arena *a);
void *arena_alloc(arena *a, size_t bytes); /* 64-byte aligned, uninitialised */
/* The tests set it: host memory arena_alloc and arena_alloc_spare hand out is then NaN, so that a
 * kernel that reads what it should only write (a gradient written whole) fails them. */
extern bool arena_poison;
void *arena_calloc(arena *a, size_t bytes);
void *arena_alloc_small(arena *a, size_t bytes); /* from an island; never given back; host arenas only */
/* Gives a block back before the reset: arena_alloc_spare hands it out again. The reverse pass gives
 * back each gradient and activation once its node has run, so the peak holds a few blocks'
 * gradients, not all. A block merges with spare neighbours, and one that ends at the top of the
 * newest chunk lowers the top instead; giving back a block twice is an error. */
void arena_give_back(arena *a, void *data, size_t bytes);
/* The front of the smallest spare block that fits (the rest stays spare), else arena_alloc. */
void *arena_alloc_spare(arena *a, size_t bytes);
void *arena_calloc_spare(arena *a, size_t bytes); /* zeroed */
/* Scratch floats of one op call, in the data arena: spare memory when the reverse pass has given some back, else the
 * top of the arena, which scratch_done (in any order) brings down again. */
float *scratch_floats(size_t n);
void scratch_done(float *p, size_t n); /* p may be NULL */
void arena_reset(arena *a);
arena_mark arena_get_mark(const arena *a);
void arena_release(arena *a, arena_mark m); /* frees everything allocated after the mark */
/* Releases everything allocated after the mark except one block of `bytes` at `data`, which moves
 * down to the mark (memmove) if it was allocated after it, or past it into a new chunk when the
 * mark's chunk has no room for it; returns its address. Layer-by-layer inference uses it. */
void *arena_keep(arena *a, arena_mark m, void *data, size_t bytes);

/* The activation arena all ops allocate from: tensor structs and host temporaries, and tensor data
 * unless it lives on a device (then in its companion). */
extern arena vitc_arena;
/* The arena of tensor data, gradients and kernel scratch. */
static inline arena *vitc_data_arena(void) { return vitc_arena.companion ? vitc_arena.companion : &vitc_arena; }
