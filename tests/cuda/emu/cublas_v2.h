/* The CPU stand-in for the cuBLAS calls of src/cuda (see cuda_runtime.h beside it): column-major
 * sgemm by the definition, summed in double, with cuBLAS's argument checks, so a wrong leading
 * dimension or transpose flag in the row-major mapping fails here as it would on a GPU. */
#pragma once
#include "cuda_runtime.h"

typedef struct emu_blas *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0 } cublasMath_t;

cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta,
                                         float *C, int ldc, long long sc, int batch);

/* The mixed-precision products (cublasGemmEx): fp32 or bf16 operands (library_types.h's types),
 * fp32 output; the compute types of fp32 sums, and of fp32 operands rounded to TF32 first. The
 * stand-in converts every operand as the hardware reads it (bf16 exactly; fp32 under FAST_TF32 to
 * 10 mantissa bits, to nearest with ties away from zero, as cvt.rna.tf32.f32), then sums in double. */
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType a_type,
                            int lda, const void *B, cudaDataType b_type, int ldb, const void *beta,
                            void *C, cudaDataType c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType a_type,
                                          int lda, long long sa, const void *B,
                                          cudaDataType b_type, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType c_type, int ldc,
                                          long long sc, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo);
