/* The NCCL stand-in (nccl.h): device memory is copied to the host, combined by MPI over the ranks
 * (none when alone) and copied back, so the emulated device memory stays out of the host's reach. */
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <string.h>

#include <vector>

#include "nccl.h"

struct emu_nccl_comm {
    int rank, size;
    bool mpi; /* more than one rank: the collectives go through MPI_COMM_WORLD */
};

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclInvalidArgument:
        return "invalid argument";
    case ncclInvalidUsage:
        return "invalid usage";
    default:
        return "unhandled system error";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof(*id));
    strcpy(id->internal, "emu");
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    int initialised = 0, world_rank = 0, world_size = 1;
    MPI_Initialized(&initialised);
    if (initialised) {
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    }
    /* every rank must have been handed rank 0's id */
    if (strcmp(id.internal, "emu") || nranks != world_size || rank != world_rank) return ncclInvalidArgument;
    *comm = new emu_nccl_comm{rank, nranks, nranks > 1};
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    delete comm;
    return ncclSuccess;
}

static size_t type_bytes(ncclDataType_t type) { return type == ncclFloat ? sizeof(float) : 1; }

/* NCCL reads and writes device memory only */
static bool on_device(const void *p) {
    cudaPointerAttributes a;
    return cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeDevice;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    (void)stream;
    if (!comm || type != ncclFloat || op != ncclSum || count > (size_t)INT32_MAX || !on_device(send) ||
        !on_device(recv))
        return ncclInvalidArgument;
    std::vector<float> host(count);
    if (cudaMemcpy(host.data(), send, count * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
        return ncclInvalidArgument;
    if (comm->mpi)
        MPI_Allreduce(MPI_IN_PLACE, host.data(), (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    cudaMemcpy(recv, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    (void)stream;
    size_t bytes = count * type_bytes(type);
    if (!comm || root < 0 || root >= comm->size || bytes > (size_t)INT32_MAX || !on_device(send) ||
        !on_device(recv))
        return ncclInvalidArgument;
    std::vector<char> host(bytes);
    if (comm->rank == root && cudaMemcpy(host.data(), send, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        return ncclInvalidArgument;
    if (comm->mpi) MPI_Bcast(host.data(), (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    cudaMemcpy(recv, host.data(), bytes, cudaMemcpyHostToDevice);
    return ncclSuccess;
}
