/* Bump allocator for activations, saved tensors and gradients of one step. Reset after the optimizer
 * step; when a step outgrew the first chunk, the reset replaces the chunks by one block of the peak
 * size, so from the second step on no step touches the system heap. */
#pragma once
#include <stddef.h>

#define ARENA_SPARE_SLOTS 256

typedef struct arena_chunk arena_chunk;
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
} arena;

typedef struct arena_mark {
    arena_chunk *chunk;
    size_t offset, used;
} arena_mark;

void arena_init(arena *a, size_t chunk_bytes);
void arena_free(arena *a);
void *arena_alloc(arena *a, size_t bytes); /* 64-byte aligned, uninitialised */
void *arena_calloc(arena *a, size_t bytes);
/* Gives a block back before the reset: arena_calloc_spare hands it out again. The reverse pass gives
 * back each gradient once its node has run, so the peak holds a few blocks' gradients, not all. */
void arena_give_back(arena *a, void *data, size_t bytes);
/* Zeroed memory: the smallest spare block that fits when there is one, else arena_calloc. */
void *arena_calloc_spare(arena *a, size_t bytes);
void arena_reset(arena *a);
arena_mark arena_get_mark(const arena *a);
void arena_release(arena *a, arena_mark m); /* frees everything allocated after the mark */
/* Releases everything allocated after the mark except one block of `bytes` at `data`, which moves
 * down to the mark (memmove) if it was allocated after it, or past it into a new chunk when the
 * mark's chunk has no room for it; returns its address. Layer-by-layer inference uses it. */
void *arena_keep(arena *a, arena_mark m, void *data, size_t bytes);

/* The activation arena all ops allocate from. */
extern arena vitc_arena;
