/* The CPU's kernel table: every kernel of src/cpu, the reference the device tables are tested against. */
#include "kernels.h"

const kernel_table cpu_kernels = {
#define CPU_KERNEL(name) .name = name,
    KERNELS_ALL(CPU_KERNEL)
#undef CPU_KERNEL
};

const kernel_table *kernels = &cpu_kernels;
