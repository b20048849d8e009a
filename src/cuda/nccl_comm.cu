/* NCCL for src/dist: the communicator, in-place float sums (ncclSum) and byte broadcasts on a
 * non-blocking stream of their own, ordered after the default stream's work by an event. */
#include <nccl.h>
#include <string.h>

#include "common.cuh"
#include "nccl_comm.h"

static_assert(sizeof(ncclUniqueId) == CUDA_NCCL_ID_BYTES, "CUDA_NCCL_ID_BYTES is not NCCL's id size");

#define NCCL_CHECK(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess)                                                                     \
            vitc_die(__FILE__, __LINE__, NULL, "NCCL error at %s:%d: %s in %s", __FILE__,          \
                     __LINE__, ncclGetErrorString(r_), #call);                                     \
    } while (0)

static ncclComm_t comm;
/* non-blocking: the legacy default stream, where the kernels run, does not wait for it (nor it
 * for them) but through `queued` */
static cudaStream_t stream;
static cudaEvent_t queued; /* recorded on the default stream when a collective starts */

extern "C" bool cuda_is_device_memory(const void *p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* no device: host memory, and no error left for the next call */
        return false;
    }
    return a.type == cudaMemoryTypeDevice;
}

extern "C" void cuda_nccl_unique_id(void *id) {
    ncclUniqueId u;
    NCCL_CHECK(ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof(u));
}

extern "C" void cuda_nccl_init(const void *id, int rank, int size) {
    CHECK(!comm, "cuda_nccl_init: the communicator exists already");
    ncclUniqueId u;
    memcpy(&u, id, sizeof(u));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming));
    NCCL_CHECK(ncclCommInitRank(&comm, size, u, rank));
}

extern "C" void cuda_nccl_free(void) {
    if (!comm) return;
    CUDA_CHECK(cudaStreamSynchronize(stream));
    NCCL_CHECK(ncclCommDestroy(comm));
    CUDA_CHECK(cudaEventDestroy(queued));
    CUDA_CHECK(cudaStreamDestroy(stream));
    comm = NULL;
}

/* the communication stream waits for what the default stream holds now */
static void after_queued_work(void) {
    CHECK(comm, "NCCL: no communicator (cuda_nccl_init first)");
    CUDA_CHECK(cudaEventRecord(queued, 0));
    CUDA_CHECK(cudaStreamWaitEvent(stream, queued, 0));
}

extern "C" void cuda_nccl_sum_start(float *x, int64_t n) {
    if (n == 0) return;
    after_queued_work();
    NCCL_CHECK(ncclAllReduce(x, x, (size_t)n, ncclFloat, ncclSum, comm, stream));
}

extern "C" void cuda_nccl_wait(void) {
    if (comm) CUDA_CHECK(cudaStreamSynchronize(stream));
}

extern "C" void cuda_nccl_broadcast(void *x, size_t bytes, int root) {
    if (bytes == 0) return;
    after_queued_work();
    NCCL_CHECK(ncclBroadcast(x, x, bytes, ncclUint8, root, comm, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
}
