/* Device discovery, selection, memory helpers and the cuBLAS handle (one device per process). */
#include "common.cuh"
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../core/memory.h"
}

static cublasHandle_t blas;
static int blas_device = -1;

extern "C" int cuda_device_count(void) {
    int n = 0;
    /* without a driver this returns an error (cudaErrorNoDevice, cudaErrorInsufficientDriver...):
     * that means no device, not a failure of the program */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the error so the next CUDA call does not report it */
        return 0;
    }
    return n;
}

extern "C" bool cuda_select(int index, char *err, size_t n) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, n, "--device cuda: no CUDA device (cudaGetDeviceCount: %s)",
                 cudaGetErrorString(e));
        return false;
    }
    if (count == 0) {
        snprintf(err, n, "--device cuda: no CUDA device (cudaGetDeviceCount found 0)");
        return false;
    }
    if (index < 0 || index >= count) {
        snprintf(err, n, "--device cuda: device %d does not exist (%d found, 0 to %d)", index,
                 count, count - 1);
        return false;
    }
    if ((e = cudaSetDevice(index)) != cudaSuccess) {
        snprintf(err, n, "--device cuda: cannot use device %d (cudaSetDevice: %s)", index,
                 cudaGetErrorString(e));
        return false;
    }
    if (blas_device == index) return true;
    if (blas_device >= 0) cublasDestroy(blas); /* it belongs to the previous device */
    blas_device = -1;
    cublasStatus_t s = cublasCreate(&blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, n, "--device cuda: cannot start cuBLAS on device %d (cublasCreate: %s)",
                 index, cublasGetStatusString(s));
        return false;
    }
    /* plain fp32 products (no TF32 tensor cores): the kernels are checked against the CPU's fp32 */
    cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH);
    blas_device = index;
    return true;
}

cublasHandle_t cuda_blas_handle(void) {
    CHECK(blas_device >= 0, "CUDA: no device selected (call cuda_select first)");
    return blas;
}

extern "C" const char *cuda_device_name(char *buf, size_t n) {
    int dev = 0;
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    snprintf(buf, n, "%s (sm_%d%d, %.0f GiB)", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1 << 30));
    return buf;
}

extern "C" float *cuda_alloc_floats(size_t n) {
    if (n == 0) return NULL;
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
    return (float *)p;
}

extern "C" void cuda_free(void *p) {
    if (p) CUDA_CHECK(cudaFree(p));
}

extern "C" void cuda_zero_floats(float *dst, size_t n) {
    if (n) CUDA_CHECK(cudaMemset(dst, 0, n * sizeof(float)));
}

extern "C" void cuda_to_device(float *dst, const float *src, size_t n) {
    if (n) CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
}

extern "C" void cuda_to_host(float *dst, const float *src, size_t n) {
    if (n) CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
}

extern "C" void cuda_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

struct stager_slot {
    float *host, *dev;    /* pinned host buffer, device buffer */
    cudaEvent_t copied;   /* its last copy to the device is done: the pinned buffer is free */
    cudaEvent_t released; /* the work that was queued while the device buffer served is done */
};
struct cuda_stager {
    size_t cap;
    cudaStream_t copy; /* non-blocking: the legacy default stream of the kernels does not wait for it */
    int next;          /* the slot of the next call */
    stager_slot slot[2];
};

extern "C" cuda_stager *cuda_stager_create(size_t n) {
    cuda_stager *s = (cuda_stager *)xcalloc(1, sizeof(cuda_stager));
    s->cap = n;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking));
    for (stager_slot &b : s->slot) {
        CUDA_CHECK(cudaMallocHost((void **)&b.host, n * sizeof(float)));
        b.dev = cuda_alloc_floats(n);
        CUDA_CHECK(cudaEventCreateWithFlags(&b.copied, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&b.released, cudaEventDisableTiming));
    }
    return s;
}

extern "C" const float *cuda_stage(cuda_stager *s, const float *host, size_t n) {
    CHECK(n <= s->cap, "cuda_stage: %zu floats for buffers of %zu", n, s->cap);
    stager_slot *prev = &s->slot[s->next ^ 1], *b = &s->slot[s->next];
    s->next ^= 1;
    /* the previous slot's device buffer served the work queued until now */
    CUDA_CHECK(cudaEventRecord(prev->released, 0));
    CUDA_CHECK(cudaEventSynchronize(b->copied));
    memcpy(b->host, host, n * sizeof(float));
    /* this slot's device buffer is overwritten once the work that read it (before the previous
     * call) is done; an event never recorded is complete */
    CUDA_CHECK(cudaStreamWaitEvent(s->copy, b->released, 0));
    CUDA_CHECK(cudaMemcpyAsync(b->dev, b->host, n * sizeof(float), cudaMemcpyHostToDevice, s->copy));
    CUDA_CHECK(cudaEventRecord(b->copied, s->copy));
    CUDA_CHECK(cudaStreamWaitEvent(0, b->copied, 0));
    return b->dev;
}

extern "C" void cuda_stager_free(cuda_stager *s) {
    if (!s) return;
    CUDA_CHECK(cudaStreamSynchronize(s->copy));
    for (stager_slot &b : s->slot) {
        CUDA_CHECK(cudaFreeHost(b.host));
        cuda_free(b.dev);
        CUDA_CHECK(cudaEventDestroy(b.copied));
        CUDA_CHECK(cudaEventDestroy(b.released));
    }
    CUDA_CHECK(cudaStreamDestroy(s->copy));
    free(s);
}

static void *memory_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes) CUDA_CHECK(cudaMalloc(&p, bytes)); /* 256-byte aligned */
    return p;
}
static void memory_free(void *p) { cuda_free(p); }
static void memory_zero(void *p, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemset(p, 0, bytes));
}
static void memory_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
static void memory_to_host(void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
static void memory_from_host(void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

extern "C" const memory_ops cuda_memory = {DEV_CUDA,      "cuda",         memory_alloc,    memory_free,
                                          memory_zero,   memory_copy,    memory_to_host, memory_from_host};
