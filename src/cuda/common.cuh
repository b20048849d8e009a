/* Shared by the .cu files of src/cuda only (C code includes the .h headers): error checks that
 * report file:line and the CUDA/cuBLAS error string, launch geometry, and block reductions. */
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "../core/check.h"
}

/* Dies (through vitc_die, so the CLIs exit 1 and tests can catch it) naming the call and place. */
#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess)                                                                   \
            vitc_die(__FILE__, __LINE__, NULL, "CUDA error at %s:%d: %s (%s) in %s", __FILE__,     \
                     __LINE__, cudaGetErrorString(err_), cudaGetErrorName(err_), #call);           \
    } while (0)

#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                          \
            vitc_die(__FILE__, __LINE__, NULL, "cuBLAS error at %s:%d: %s in %s", __FILE__,        \
                     __LINE__, cublasGetStatusString(st_), #call);                                 \
    } while (0)

/* A launch reports a bad configuration at once; faults inside the kernel surface at the next
 * synchronising call (a copy to the host, cuda_sync). */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

/* Threads per block of the row kernels: a multiple of 32 (the reductions below assume it). */
#define ROW_THREADS 256
/* One block per row: the grid's x dimension holds up to 2^31 - 1 blocks */
static inline unsigned row_blocks(int64_t M) {
    CHECK(M <= 2147483647, "CUDA: %lld rows exceed one grid (2^31 - 1 blocks)", (long long)M);
    return (unsigned)M;
}

/* Threads per block of the flat elementwise kernels, and their grid (grid-stride loops beyond). */
#define FLAT_THREADS 256
static inline unsigned flat_blocks(int64_t n) {
    int64_t b = (n + FLAT_THREADS - 1) / FLAT_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

/* for (i = this thread's first index; i < n; i += the whole grid) */
#define GRID_STRIDE_LOOP(i, n)                                                                     \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* bf16 bits of x rounded to nearest even, as the CPU's bf16_from_float: NaN stays a quiet NaN of
 * its sign, a subnormal becomes a signed 0, out of range becomes ±inf */
static __device__ inline uint16_t bf16_bits(float x) {
    const uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u | 0x400000u) >> 16);
    if ((u & 0x7f800000u) == 0) return (uint16_t)(u >> 16 & 0x8000u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

static __device__ inline float bf16_value(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* The cuBLAS handle of the selected device (device.cu). */
cublasHandle_t cuda_blas_handle(void);

/* Sum of v over the block, returned to every thread. blockDim.x must be a multiple of 32; every
 * thread of the block must call it (it synchronises). */
template <typename T> static __device__ T block_sum(T v) {
    __shared__ T part[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* part may still be read by the previous call's last step */
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < warps ? part[lane] : (T)0;
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Maximum of v over the block, returned to every thread (same rules as block_sum). */
static __device__ __forceinline__ float block_max(float v) {
    __shared__ float part[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < warps ? part[lane] : -INFINITY;
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
