/* An op on the CUDA device against the same op on the CPU (the reference): the forward output and,
 * after one backward from the same random upstream gradient, every input's gradient. Tests run on
 * a real GPU (test_cuda) or on tests/cuda/emu's CPU stand-in for one (test_cuda_emu). */
#pragma once
#include "../test.h"

/* Whether a CUDA device can be selected (the first call tries; later ones remember). */
bool cuda_test_device(void);
#define REQUIRE_DEVICE()                                                                           \
    do {                                                                                           \
        if (!cuda_test_device()) SKIP("no CUDA device");                                           \
    } while (0)

/* Selects backend `name` ("cuda" or "cpu"), a table that lacks kernels allowed; dies if it cannot.
 * Kernels take scratch from the data arena, which is the device's only while "cuda" is selected. */
void cuda_test_select(const char *name);

/* The kernels the CUDA table lacks, comma-separated (NULL when it has them all). */
const char *cuda_test_missing_kernels(void);
/* Skips a test that runs whole models on the device (they may call any kernel) while the table lacks
 * some, naming them. */
#define REQUIRE_ALL_KERNELS()                                                                      \
    do {                                                                                           \
        REQUIRE_DEVICE();                                                                          \
        const char *missing_ = cuda_test_missing_kernels();                                        \
        if (missing_) {                                                                            \
            printf("    the CUDA table lacks: %s\n", missing_);                                    \
            SKIP("the CUDA table lacks kernels (named above)");                                    \
        }                                                                                          \
    } while (0)

typedef tensor *(*device_check_fn)(tensor **inputs, const void *ctx);

/* Runs f on the CPU inputs (their requires_grad says which gradients to compare; a gradient they
 * hold from an earlier check is dropped first, so inputs can serve several checks),
 * then on device copies of them, seeds both backwards with one random gradient of the output and
 * returns the worst of max |device - cpu| / max |cpu| over the output and the gradients, printing
 * each. f must draw any randomness it needs from ctx afresh on each call. The CPU is selected again
 * on return; the tape and the device's memory are cleared. */
double device_check(const char *name, device_check_fn f, const void *ctx, int n_in, tensor **inputs);

#define DEVICE_CHECK(f, ctx, ...)                                                                  \
    device_check(#f, (f), (ctx), (int)(sizeof((tensor *[]){__VA_ARGS__}) / sizeof(tensor *)),    \
                 (tensor *[]){__VA_ARGS__})

/* fp32 kernels summing in another order agree to a few ulps of the largest value */
#define DEVICE_TOL 1e-5
