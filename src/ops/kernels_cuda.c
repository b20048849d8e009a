/* The CUDA kernel table (make CUDA=1): src/cuda's kernels under the names of the CPU's. A kernel
 * left out here is NULL, and backend_select refuses --device cuda naming it. */
#ifdef VITC_CUDA
#include "../cuda/elementwise.h"
#include "../cuda/loss.h"
#include "../cuda/matmul.h"
#include "../cuda/norm.h"
#include "../cuda/train_step.h"
#include "kernels.h"

const kernel_table cuda_kernels = {
#define CUDA_KERNEL(name) .name = cuda_##name,
    /* elementwise */
    CUDA_KERNEL(gelu_forward) CUDA_KERNEL(gelu_backward) CUDA_KERNEL(gelu_value_and_slope)
    /* matmul */
    CUDA_KERNEL(gemm) CUDA_KERNEL(gemm_strided) CUDA_KERNEL(linear_forward) CUDA_KERNEL(linear_backward)
    CUDA_KERNEL(add_column_sums) CUDA_KERNEL(matmul_forward) CUDA_KERNEL(matmul_backward)
    /* norm */
    CUDA_KERNEL(layernorm_forward) CUDA_KERNEL(layernorm_backward) CUDA_KERNEL(softmax_forward)
    CUDA_KERNEL(softmax_backward)
    /* train step */
    CUDA_KERNEL(adamw_update)
#undef CUDA_KERNEL
};
#else
typedef int kernels_cuda_unused; /* ISO C wants a translation unit to declare something */
#endif
