/* The CPU stand-in for the CUDA runtime and cuBLAS (see cuda_runtime.h): one emulated device,
 * blocks run one after another, the threads of a block as fibers that switch at every barrier. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "cublas_v2.h"

extern "C" {
#include "core/check.h"
}

dim3 threadIdx, blockIdx, blockDim, gridDim;

/* ---- device memory is out of the host's reach ----
 * Between device calls every allocation is PROT_NONE, so host code that reads or writes device
 * memory (which would crash or read garbage on a GPU) faults here too. Kernels, copies, memsets
 * and cuBLAS open all of it for their duration. */

struct allocation {
    char *base;
    size_t len; /* without the guard page */
};
static std::map<void *, allocation> allocations;
static int open_depth;

static void protect_all(int prot) {
    for (auto &a : allocations) mprotect(a.second.base, a.second.len, prot);
}
struct device_window {
    device_window() {
        if (open_depth++ == 0) protect_all(PROT_READ | PROT_WRITE);
    }
    ~device_window() {
        if (--open_depth == 0) protect_all(PROT_NONE);
    }
};

void emu_check_device_pointer(const void *p, const char *call, int index) {
    if (!p) return;
    const char *c = (const char *)p;
    auto a = allocations.upper_bound(const_cast<void *>(p));
    bool inside = false;
    if (a != allocations.begin()) {
        --a; /* the allocation whose data starts at or before p; one past its end still counts */
        inside = c >= (const char *)a->first && c <= a->second.base + a->second.len;
    }
    CHECK(inside, "emu: argument %d of %s (%p) is not device memory (a GPU faults on it)", index,
          call, p);
}

/* ---- kernel launches ---- */

enum { FIBER_STACK = 64 << 10, MAX_THREADS = 1024 };

/* A fiber switch saves the callee-saved registers on the fiber's stack and swaps stack pointers.
 * ucontext's swapcontext also saves the signal mask with a system call at every switch, which made
 * that call most of the emulator's time (a block of 256 threads switches 256 times per barrier). */
#if !defined(__x86_64__)
#error "the CUDA emulator's fiber switch is written for x86-64"
#endif
extern "C" void emu_switch(void **save_sp, void *load_sp);
extern "C" void emu_fiber_start(void);
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
    .globl emu_fiber_start
    .type emu_fiber_start, @function
emu_fiber_start:
    call emu_fiber_main
    ud2
    .size emu_fiber_start, .-emu_fiber_start
)");

struct fiber {
    void *sp;
    bool done, waiting;
};
static void *scheduler;
static fiber fibers[MAX_THREADS];
static std::vector<char> stacks;
static const std::function<void()> *body;
static unsigned current;

/* every fiber starts here (emu_fiber_start calls it on the fiber's stack) and ends by switching back
 * to the scheduler for good */
extern "C" void emu_fiber_main(void) {
    (*body)();
    fibers[current].done = true;
    void *unused;
    emu_switch(&unused, scheduler);
}

/* a fresh fiber on stack [lo, lo + bytes): emu_switch's six registers, then emu_fiber_start as the
 * return address, placed so that the call it makes sees the stack the ABI expects */
static void *fiber_new(char *lo, size_t bytes) {
    uintptr_t top = ((uintptr_t)lo + bytes) & ~(uintptr_t)15;
    void **sp = (void **)(top - 16); /* 16-aligned after emu_switch's ret pops the start address */
    *--sp = (void *)emu_fiber_start;
    for (int r = 0; r < 6; r++) *--sp = NULL;
    return sp;
}

void __syncthreads(void) {
    fibers[current].waiting = true;
    emu_switch(&fibers[current].sp, scheduler);
}

static void run_blocks(dim3 grid, dim3 block, const std::function<void()> &fn) {
    CHECK(grid.y == 1 && grid.z == 1 && block.y == 1 && block.z == 1 && block.x >= 1 &&
              block.x <= MAX_THREADS && grid.x >= 1,
          "emu: launch of %ux%ux%u blocks of %ux%ux%u threads (1-D, 1 to %d threads only)", grid.x,
          grid.y, grid.z, block.x, block.y, block.z, MAX_THREADS);
    if (stacks.size() < (size_t)block.x * FIBER_STACK) stacks.resize((size_t)block.x * FIBER_STACK);
    gridDim = grid, blockDim = block, body = &fn;
    for (unsigned b = 0; b < grid.x; b++) {
        blockIdx = dim3(b);
        for (unsigned t = 0; t < block.x; t++) {
            fibers[t].sp = fiber_new(&stacks[(size_t)t * FIBER_STACK], FIBER_STACK);
            fibers[t].done = fibers[t].waiting = false;
        }
        /* each round runs every live thread to its next barrier or its end, then releases them */
        for (unsigned live = block.x; live > 0;) {
            for (unsigned t = 0; t < block.x; t++) {
                if (fibers[t].done || fibers[t].waiting) continue;
                current = t, threadIdx = dim3(t);
                emu_switch(&scheduler, fibers[t].sp);
                if (fibers[t].done) live--;
            }
            CHECK(live == 0 || live == block.x,
                  "emu: block %u: %u of %u threads wait at __syncthreads, the others returned", b,
                  live, block.x);
            for (unsigned t = 0; t < block.x; t++) fibers[t].waiting = false;
        }
    }
}

void emu_run(dim3 grid, dim3 block, const std::function<void()> &fn) {
    device_window open;
    run_blocks(grid, block, fn);
}

/* ---- device and memory ---- */

static int device = -1;
static cudaError_t last = cudaSuccess;
static cudaError_t fail(cudaError_t e) { return last = e; }

/* as the real runtime, CUDA_VISIBLE_DEVICES= (set and empty) hides the device */
cudaError_t cudaGetDeviceCount(int *n) {
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    *n = visible && !*visible ? 0 : 1;
    return *n ? cudaSuccess : fail(cudaErrorNoDevice);
}
cudaError_t cudaSetDevice(int dev) {
    return dev == 0 ? (device = 0, cudaSuccess) : fail(cudaErrorInvalidDevice);
}
cudaError_t cudaGetDevice(int *dev) {
    *dev = device < 0 ? 0 : device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev) {
    if (dev != 0) return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof(*p));
    strcpy(p->name, "CPU emulation of CUDA, not a GPU");
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = last;
    last = cudaSuccess;
    return e;
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    default:
        return "invalid device ordinal";
    }
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice:
        return "cudaErrorNoDevice";
    default:
        return "cudaErrorInvalidDevice";
    }
}

/* [header page(s) | data ending exactly at a page boundary | guard page]: one float past the end
 * faults (the data is only 4-byte aligned here, unlike CUDA's 256). The mapping's base and length
 * sit in the 16 bytes before the data. */
cudaError_t cudaMalloc(void **p, size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (bytes + 16 + page - 1) / page * page + page;
    char *base =
        (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
    mprotect(base + len - page, page, PROT_NONE);
    char *d = base + len - page - bytes;
    allocations[d] = allocation{base, len - page};
    if (open_depth == 0) mprotect(base, len - page, PROT_NONE);
    *p = d;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    auto a = allocations.find(p);
    if (a == allocations.end()) return fail(cudaErrorInvalidValue);
    munmap(a->second.base, a->second.len + (size_t)sysconf(_SC_PAGESIZE));
    allocations.erase(a);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int value, size_t bytes) {
    device_window open;
    memset(p, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    (void)kind;
    device_window open;
    memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

/* ---- streams and events (see cuda_runtime.h): distinct handles, nothing to wait for ---- */

struct emu_stream {
    int unused;
};
struct emu_event {
    int unused;
};
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    *s = new emu_stream();
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    (void)flags;
    *e = new emu_event();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    (void)s;
    return e ? cudaSuccess : fail(cudaErrorInvalidValue);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)s, (void)flags;
    return e ? cudaSuccess : fail(cudaErrorInvalidValue);
}

/* the block whose data holds p: the last allocation starting at or below p, if p is before its end */
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
    memset(a, 0, sizeof(*a));
    auto it = allocations.upper_bound(const_cast<void *>(p));
    if (it != allocations.begin() && (const char *)p < (--it)->second.base + it->second.len) {
        a->type = cudaMemoryTypeDevice;
        a->devicePointer = const_cast<void *>(p);
    }
    return cudaSuccess;
}

/* ---- pinned host memory and asynchronous copies (see cuda_runtime.h) ---- */

cudaError_t cudaMallocHost(void **p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s) {
    (void)s;
    return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : fail(cudaErrorInvalidValue); }

/* ---- cuBLAS ---- */

struct emu_blas {
    int unused;
};
static emu_blas the_handle;

cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = &the_handle;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    (void)mode;
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
const char *cublasGetStatusString(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS         ? "CUBLAS_STATUS_SUCCESS"
           : s == CUBLAS_STATUS_INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE"
                                              : "CUBLAS_STATUS_NOT_INITIALIZED";
}

/* C (m, n) = alpha op(A) op(B) + beta C, column-major; C is not read when beta is 0 (as BLAS) */
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta,
                                         float *C, int ldc, long long sc, int batch) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    device_window open;
    const int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (rows_a > 1 ? rows_a : 1) ||
        ldb < (rows_b > 1 ? rows_b : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    emu_check_device_pointer(A, __func__, 7), emu_check_device_pointer(B, __func__, 10);
    emu_check_device_pointer(C, __func__, 15);
    for (int s = 0; s < batch; s++) {
        const float *a = A + s * sa, *b = B + s * sb;
        float *c = C + s * sc;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int l = 0; l < k; l++) {
                    float x = ta == CUBLAS_OP_N ? a[i + (size_t)l * lda] : a[l + (size_t)i * lda];
                    float y = tb == CUBLAS_OP_N ? b[l + (size_t)j * ldb] : b[j + (size_t)l * ldb];
                    acc += (double)x * y;
                }
                float *o = &c[i + (size_t)j * ldc];
                *o = (float)(*alpha * acc + (*beta == 0 ? 0.0 : (double)*beta * *o));
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc) {
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc,
                                     0, 1);
}

/* element i of an operand of type t as the tensor cores read it under `compute` */
static float operand_at(const void *p, cudaDataType t, size_t i, cublasComputeType_t compute) {
    uint32_t u;
    if (t == CUDA_R_16BF) {
        u = (uint32_t)((const uint16_t *)p)[i] << 16;
    } else {
        memcpy(&u, (const float *)p + i, sizeof u);
        if (compute == CUBLAS_COMPUTE_32F_FAST_TF32 && (u & 0x7f800000u) != 0x7f800000u)
            u = (u + 0x1000u) & 0xffffe000u; /* half an ulp of 10 bits onto the magnitude, cut */
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType a_type,
                                          int lda, long long sa, const void *B,
                                          cudaDataType b_type, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType c_type, int ldc,
                                          long long sc, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    device_window open;
    const int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
    /* the combinations src/cuda uses: fp32 or bf16 operands of one type, fp32 output */
    const bool types = a_type == b_type && c_type == CUDA_R_32F &&
                       (compute == CUBLAS_COMPUTE_32F ||
                        (compute == CUBLAS_COMPUTE_32F_FAST_TF32 && a_type == CUDA_R_32F));
    if (!types || algo != CUBLAS_GEMM_DEFAULT || m < 0 || n < 0 || k < 0 || batch < 0 ||
        lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    emu_check_device_pointer(A, __func__, 7), emu_check_device_pointer(B, __func__, 11);
    emu_check_device_pointer(C, __func__, 16);
    const float al = *(const float *)alpha, be = *(const float *)beta;
    for (int s = 0; s < batch; s++) {
        float *c = (float *)C + s * sc;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int l = 0; l < k; l++) {
                    size_t ia = ta == CUBLAS_OP_N ? i + (size_t)l * lda : l + (size_t)i * lda;
                    size_t ib = tb == CUBLAS_OP_N ? l + (size_t)j * ldb : j + (size_t)l * ldb;
                    acc += (double)operand_at(A, a_type, s * sa + ia, compute) *
                           operand_at(B, b_type, s * sb + ib, compute);
                }
                float *o = &c[i + (size_t)j * ldc];
                *o = (float)(al * acc + (be == 0 ? 0.0 : (double)be * *o));
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType a_type,
                            int lda, const void *B, cudaDataType b_type, int ldb, const void *beta,
                            void *C, cudaDataType c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, a_type, lda, 0, B, b_type, ldb,
                                      0, beta, C, c_type, ldc, 0, 1, compute, algo);
}
