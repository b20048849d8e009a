/* Where tensor data lives: host memory, or a device's behind the same few calls, so that core
 * (arena, tensors, parameters) stays ignorant of CUDA. The ops layer picks the device at start-up
 * (backend_select); tensor data, gradients and kernel scratch then come from the data arena, whose
 * memory is the device's, while tensor structs and host temporaries stay in vitc_arena. */
#pragma once
#include <stddef.h>

#include "tensor.h"

typedef struct memory_ops {
    device dev;
    const char *name;                                  /* "cpu", "cuda" */
    void *(*alloc)(size_t bytes);                      /* 64-byte aligned at least; dies when out of memory */
    void (*free)(void *p);                             /* NULL is fine */
    void (*zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes); /* both in this memory, not overlapping */
    void (*to_host)(void *dst, const void *src, size_t bytes);   /* waits for the work queued before */
    void (*from_host)(void *dst, const void *src, size_t bytes);
} memory_ops;

extern const memory_ops host_memory;

/* The memory of tensor data from now on (host_memory unless a device was selected). Setting a
 * device memory gives vitc_arena a companion arena in that memory for tensor data; set it before
 * any tensor exists, like the thread count. */
void vitc_set_memory(const memory_ops *m);
const memory_ops *vitc_memory(void);
static inline device vitc_device(void) { return vitc_memory()->dev; }
