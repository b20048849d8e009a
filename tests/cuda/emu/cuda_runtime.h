/* A CPU stand-in for the part of the CUDA runtime that src/cuda uses, so that the kernel tests can
 * run on a machine without a GPU (tests/cuda/emu, built as test_cuda_emu). It checks the kernels'
 * logic — indexing, block reductions, barriers reached by the whole block, += versus =, the cuBLAS
 * argument mapping — not the GPU: device memory is host memory, device math is glibc's, the threads
 * of a block are fibers run one at a time (no races show), and cuBLAS is a naive reference.
 * Each .cu file is compiled as C++ after `k<<<grid, block>>>(args)` is rewritten to
 * `emu_launch(k, grid, block)(args)` (the Makefile's sed). */
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* one block runs at a time, so one static copy per declaration is the block's shared memory */
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
extern dim3 threadIdx, blockIdx, blockDim, gridDim;

/* Runs fn for every thread of every block (1-D grids and blocks). */
void emu_run(dim3 grid, dim3 block, const std::function<void()> &fn);
/* Yields to the other fibers of the block until all have arrived; a block where some threads
 * returned while others wait at a barrier is an error (undefined on a GPU). */
void __syncthreads(void);

/* Stops the run, as CHECK does, when pointer argument number `index` of `call` (a kernel, a cuBLAS
 * function) is neither NULL nor inside a device allocation: host memory given to the device is an
 * illegal address on a GPU, which the emulation would read or write unnoticed. Pointers inside
 * struct arguments are not seen. */
void emu_check_device_pointer(const void *p, const char *call, int index);
template <typename A> inline void emu_check_argument(const A &a, int index) {
    if constexpr (std::is_pointer<A>::value)
        emu_check_device_pointer((const void *)a, "a kernel", index);
}

template <typename... P> struct emu_launcher {
    void (*kernel)(P...);
    dim3 grid, block;
    template <typename... A> void operator()(A... args) const {
        int index = 0;
        (emu_check_argument(args, index++), ...);
        void (*k)(P...) = kernel;
        emu_run(grid, block, [=]() { k(args...); });
    }
};
template <typename... P>
emu_launcher<P...> emu_launch(void (*kernel)(P...), dim3 grid, dim3 block) {
    return emu_launcher<P...>{kernel, grid, block};
}

/* Every thread of the block must call it, as in block_sum (the exchange is block-wide here; the
 * lane mask keeps it inside the warp). */
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
    (void)mask;
    static T buf[1024];
    buf[threadIdx.x] = v;
    __syncthreads();
    T r = buf[threadIdx.x ^ (unsigned)lane_mask];
    __syncthreads(); /* nobody overwrites buf before everyone has read */
    return r;
}

inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
inline unsigned __float_as_uint(float x) {
    unsigned u;
    memcpy(&u, &x, sizeof u);
    return u;
}
inline float __uint_as_float(unsigned u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

typedef enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
} cudaError_t;
typedef enum {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
} cudaMemcpyKind;
struct cudaDeviceProp {
    char name[256];
    int major, minor;
    size_t totalGlobalMem;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
/* each allocation ends at a PROT_NONE page: a kernel reading or writing past it faults */
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaDeviceSynchronize(void);

/* Streams and events: every call runs to its end when it is made, so work is always in order and
 * these only need to exist. */
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);

/* Device: p points into a cudaMalloc'd block; Unregistered: anything else (host memory). */
enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3,
};
struct cudaPointerAttributes {
    cudaMemoryType type;
    int device;
    void *devicePointer, *hostPointer;
};
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p);

/* Pinned host memory is host memory here; an asynchronous copy is done when the call returns. */
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
/* a __device__ variable is a host variable here */
template <typename T>
inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t bytes, size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    (void)kind;
    memcpy(dst, (const char *)&symbol + offset, bytes);
    return cudaSuccess;
}
