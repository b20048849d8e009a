/* The CUDA device: discovery and selection, device memory and copies, synchronisation. Every
 * failing CUDA call dies with file:line and the CUDA error string, except discovery and selection,
 * which report back so `--device cuda` can explain why there is no GPU. Built only with `make
 * CUDA=1`. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices; 0 when there is no driver or no GPU (never aborts). */
int cuda_device_count(void);
/* Makes device `index` current and creates its cuBLAS handle. false with a message in err (n bytes)
 * such as "--device cuda: no CUDA device (cudaGetDeviceCount: ...)" when that is impossible. */
bool cuda_select(int index, char *err, size_t n);
/* Name and compute capability of the current device into buf, e.g. "NVIDIA H100 (sm_90)". */
const char *cuda_device_name(char *buf, size_t n);

/* Device memory (uninitialised) for n floats; n = 0 gives NULL. */
float *cuda_alloc_floats(size_t n);
void cuda_free(void *p); /* NULL is fine */
void cuda_zero_floats(float *dst, size_t n);
/* Copies of n floats: host to device, device to host. Both wait for the
 * work queued before them, so a copy to the host sees every kernel launched earlier. */
void cuda_to_device(float *dst, const float *src, size_t n);
void cuda_to_host(float *dst, const float *src, size_t n);
/* Waits for every queued kernel; a fault inside one is reported here. */
void cuda_sync(void);

/* Host data of every step (a loader's batch) on its way to the device while the work queued before
 * runs: two pinned host buffers and two device buffers, used in turn, and a copy stream of its own.
 * cuda_stage copies host into the next pinned buffer, starts its copy to the device on the copy
 * stream and makes the kernels queued after it wait for that copy; the device buffer it returns
 * serves the work queued until the next cuda_stage, whose copy (into the other buffer) waits only
 * for the work queued before it, so the next batch moves while the current one is computed. */
typedef struct cuda_stager cuda_stager;
cuda_stager *cuda_stager_create(size_t n); /* for up to n floats a call */
const float *cuda_stage(cuda_stager *s, const float *host, size_t n);
void cuda_stager_free(cuda_stager *s); /* NULL is fine */

/* The selected device's memory as core sees tensor memory (core/memory.h). */
struct memory_ops;
extern const struct memory_ops cuda_memory;

#ifdef __cplusplus
}
#endif
