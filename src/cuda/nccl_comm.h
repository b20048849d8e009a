/* The NCCL collectives of src/dist on device memory (multi-GPU data parallelism): one communicator
 * per process, made from an id that rank 0 draws and the bootstrap (MPI, in src/dist/mpi.c) hands to
 * every rank. Sums run on a communication stream of their own, ordered after the work queued on the
 * device when they start, so that they overlap the kernels queued after them. Built only with
 * `make CUDA=1`; NCCL types stay in the .cu, so dist.h and mpi.c never see them. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the size of NCCL's ncclUniqueId, which the bootstrap broadcasts as bytes */
#define CUDA_NCCL_ID_BYTES 128

/* Whether p points into device memory (cudaMalloc'd), which dist hands to NCCL; host memory goes
 * over MPI. Never aborts: without a device, false. */
bool cuda_is_device_memory(const void *p);
/* Rank 0: a fresh id of CUDA_NCCL_ID_BYTES bytes for the communicator. */
void cuda_nccl_unique_id(void *id);
/* Every rank, collectively, with rank 0's id, on the device this rank selected. */
void cuda_nccl_init(const void *id, int rank, int size);
/* Waits for what was started and destroys the communicator (nothing when there is none). */
void cuda_nccl_free(void);
/* Starts the in-place sum over the ranks of n floats of device memory, after every kernel queued
 * before this call; returns at once. */
void cuda_nccl_sum_start(float *x, int64_t n);
/* Waits on the host until every sum started has finished. */
void cuda_nccl_wait(void);
/* Broadcasts bytes of device memory from rank root to every rank, after the kernels queued before
 * it; returns when this rank's copy has arrived. */
void cuda_nccl_broadcast(void *x, size_t bytes, int root);

#ifdef __cplusplus
}
#endif
