/* The CPU stand-in for the NCCL calls of src/cuda (see cuda_runtime.h beside it): a communicator is
 * MPI's world when the process runs under mpirun, else one rank alone; collectives go through host
 * copies and MPI, in the order they are called (every rank calls them in the same order, as NCCL
 * requires). It checks the order and arithmetic of the collectives, not NCCL's transport. */
#pragma once
#include <stddef.h>

#include "cuda_runtime.h"

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct emu_nccl_comm *ncclComm_t;
typedef enum {
    ncclSuccess = 0,
    ncclSystemError = 2,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
} ncclResult_t;
typedef enum { ncclUint8 = 1, ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

const char *ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
/* nranks and rank must be MPI's world size and rank (1 and 0 without mpirun) */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream);
