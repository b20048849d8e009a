#include "device_check.h"

#include <stdlib.h>

#include "core/memory.h"
#include "ops/backend.h"

bool cuda_test_device(void) {
    static int state = -1; /* unknown, no, yes */
    if (state < 0) {
        char err[512];
        state = backend_select_partial("cuda", err, sizeof(err));
        if (!state) printf("    no device: %s\n", err);
        backend_select("cpu", err, sizeof(err));
    }
    return state == 1;
}

extern const kernel_table cuda_kernels; /* src/ops/kernels_cuda.c */

const char *cuda_test_missing_kernels(void) {
    static char names[4096];
    return backend_missing_kernels(&cuda_kernels, names, sizeof(names)) ? names : NULL;
}

void cuda_test_select(const char *name) {
    char err[1536];
    CHECK(backend_select_partial(name, err, sizeof(err)), "%s", err);
}

/* worst relative difference of device data against host reference values, printed */
static double compare(const char *what, const float *device_data, const float *ref, int64_t n) {
    float *got = xmalloc(sizeof(float) * (size_t)n);
    vitc_memory()->to_host(got, device_data, sizeof(float) * (size_t)n);
    double err = max_rel_diff(got, ref, n);
    printf("    %-12s max rel err %.2e\n", what, err);
    free(got);
    return err;
}

static float *host_copy(const float *p, int64_t n) {
    float *c = xmalloc(sizeof(float) * (size_t)n);
    memcpy(c, p, sizeof(float) * (size_t)n);
    return c;
}

double device_check(const char *name, device_check_fn f, const void *ctx, int n_in, tensor **inputs) {
    printf("    %s:\n", name);
    cuda_test_select("cpu");
    tape_set_grad_enabled(true);
    tape_reset();
    bool any_grad = false;
    for (int i = 0; i < n_in; i++) {
        any_grad |= inputs[i] && inputs[i]->requires_grad;
        if (inputs[i]) inputs[i]->grad = NULL; /* an earlier check's: the backward would add to it */
    }
    tensor *out = f(inputs, ctx);
    float *out_cpu = host_copy(out->data, out->numel), *seed = xmalloc(sizeof(float) * (size_t)out->numel);
    rng r;
    rng_seed(&r, 20261125, RNG_TEST);
    for (int64_t i = 0; i < out->numel; i++) seed[i] = rng_normal(&r);
    float *grad_cpu[TAPE_MAX_INPUTS * 4] = {0};
    CHECK(n_in <= TAPE_MAX_INPUTS * 4, "device_check: %d inputs", n_in);
    if (any_grad) {
        tape_backward_from(out, seed);
        for (int i = 0; i < n_in; i++)
            if (inputs[i] && inputs[i]->requires_grad)
                grad_cpu[i] = inputs[i]->grad ? host_copy(inputs[i]->grad, inputs[i]->numel)
                                              : calloc((size_t)inputs[i]->numel, sizeof(float));
    }
    tape_reset();

    cuda_test_select("cuda");
    tensor *dev[TAPE_MAX_INPUTS * 4] = {0};
    for (int i = 0; i < n_in; i++) {
        if (!inputs[i]) continue;
        dev[i] = tensor_new(inputs[i]->ndim, inputs[i]->shape);
        vitc_memory()->from_host(dev[i]->data, inputs[i]->data, sizeof(float) * (size_t)inputs[i]->numel);
        dev[i]->requires_grad = inputs[i]->requires_grad;
    }
    tensor *out_dev = f(dev, ctx);
    CHECK(out_dev->numel == out->numel && out_dev->dev == DEV_CUDA, "device_check %s: the device output "
          "has %lld elements on device %d, the CPU's %lld", name, (long long)out_dev->numel, out_dev->dev,
          (long long)out->numel);
    double worst = compare("out", out_dev->data, out_cpu, out->numel);
    if (any_grad) {
        tape_backward_from(out_dev, seed);
        for (int i = 0; i < n_in; i++) {
            if (!grad_cpu[i]) continue;
            char what[32];
            snprintf(what, sizeof(what), "d input %d", i);
            double e;
            if (dev[i]->grad) e = compare(what, dev[i]->grad, grad_cpu[i], dev[i]->numel);
            else { /* the device gave none: wrong unless the CPU's is zero */
                e = 0;
                for (int64_t j = 0; j < inputs[i]->numel; j++) e = grad_cpu[i][j] != 0 ? 1.0 : e;
                printf("    %-12s none on the device%s\n", what, e ? ", the CPU's is not zero" : "");
            }
            if (e > worst || e != e) worst = e;
            free(grad_cpu[i]);
        }
    }
    tape_reset();
    cuda_test_select("cpu");
    free(out_cpu);
    free(seed);
    return worst;
}
