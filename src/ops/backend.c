#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/check.h"
#include "../core/flags.h"
#include "../core/memory.h"

#ifdef VITC_CUDA
#include "../cuda/device.h"
#include "../dist/dist.h"
extern const kernel_table cuda_kernels;
#endif

bool backend_missing_kernels(const kernel_table *table, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
#define MISSING(name)                                                                              \
    if (!table->name && len < n) len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", #name);
    KERNELS_ALL(MISSING)
#undef MISSING
    return len > 0;
}

/* "cuda" (*index 0) or "cuda:N" */
static bool cuda_name(const char *device_name, int *index) {
    *index = 0;
    if (strncmp(device_name, "cuda", 4)) return false;
    return !device_name[4] || (device_name[4] == ':' && flag_ints(device_name + 5, 1, 0, index));
}

static bool select_device(const char *device_name, bool all_kernels, char *err, size_t n) {
    if (!strcmp(device_name, "cpu")) {
        kernels = &cpu_kernels;
        vitc_set_memory(&host_memory);
        return true;
    }
    int index;
    if (!cuda_name(device_name, &index)) {
        snprintf(err, n, "--device %s: expected cpu, cuda or cuda:N", device_name);
        return false;
    }
#ifdef VITC_CUDA
    char missing[1024];
    if (all_kernels && backend_missing_kernels(&cuda_kernels, missing, sizeof(missing))) {
        snprintf(err, n, "--device cuda: this build has no CUDA kernel for %s", missing);
        return false;
    }
    /* plain "cuda" under mpirun: the ranks of a host take its devices in turn */
    int count = device_name[4] ? 0 : cuda_device_count();
    if (count > 0) index = dist_local_rank() % count;
    if (!cuda_select(index, err, n)) return false;
    kernels = &cuda_kernels;
    vitc_set_memory(&cuda_memory);
    return true;
#else
    (void)all_kernels;
    snprintf(err, n, "--device %s: this build has no CUDA backend (build it with make CUDA=1)", device_name);
    return false;
#endif
}

bool backend_select(const char *device_name, char *err, size_t n) { return select_device(device_name, true, err, n); }
bool backend_select_partial(const char *device_name, char *err, size_t n) {
    return select_device(device_name, false, err, n);
}

int backend_select_flag(const char *name) {
    char err[1536];
    if (backend_select(name, err, sizeof(err))) return 0;
    fprintf(stderr, "error: %s\n", err);
    int index; /* a name that is no device is a usage error; a device this machine lacks is not */
    return cuda_name(name, &index) ? 1 : 2;
}

/* device copies of constants, found by their host address */
static struct constant {
    const void *host;
    size_t bytes;
    void *copy;
    void *contents; /* what was copied: a freed table's address may come back with other values */
} *constants;
static int n_constants, cap_constants;

const void *backend_constant(const void *host, size_t bytes) {
    const memory_ops *mem = vitc_memory();
    if (mem->dev == DEV_CPU || !host) return host;
    for (int i = 0; i < n_constants; i++)
        if (constants[i].host == host && constants[i].bytes == bytes && !memcmp(constants[i].contents, host, bytes))
            return constants[i].copy;
    if (n_constants == cap_constants) {
        cap_constants = cap_constants ? 2 * cap_constants : 64;
        constants = xrealloc(constants, sizeof(*constants) * (size_t)cap_constants);
    }
    void *copy = mem->alloc(bytes), *contents = xmalloc(bytes);
    mem->from_host(copy, host, bytes);
    memcpy(contents, host, bytes);
    constants[n_constants++] = (struct constant){host, bytes, copy, contents};
    return copy;
}

static const void *upload(const void *host, size_t bytes) {
    const memory_ops *mem = vitc_memory();
    if (mem->dev == DEV_CPU || !host) return host;
    void *copy = arena_alloc(vitc_data_arena(), bytes);
    mem->from_host(copy, host, bytes);
    return copy;
}

const float *backend_floats(const float *host, int64_t n) { return upload(host, sizeof(float) * (size_t)n); }
const int *backend_ints(const int *host, int64_t n) { return upload(host, sizeof(int) * (size_t)n); }

const float *backend_read(float *dst, const float *data, int64_t n) {
    const memory_ops *mem = vitc_memory();
    if (mem->dev == DEV_CPU) return data;
    mem->to_host(dst, data, sizeof(float) * (size_t)n);
    return dst;
}

struct backend_stager {
    int64_t n;
    void *device; /* the device's stager; NULL on the CPU */
};

backend_stager *backend_stager_create(int64_t n) {
    backend_stager *s = xcalloc(1, sizeof(*s));
    s->n = n;
#ifdef VITC_CUDA
    if (vitc_memory()->dev == DEV_CUDA) s->device = cuda_stager_create((size_t)n);
#endif
    return s;
}

const float *backend_stage(backend_stager *s, const float *host, int64_t n) {
    CHECK(n <= s->n, "backend_stage: %lld floats for a stager of %lld", (long long)n, (long long)s->n);
#ifdef VITC_CUDA
    if (s->device) return cuda_stage(s->device, host, (size_t)n);
#endif
    return host;
}

void backend_stager_free(backend_stager *s) {
    if (!s) return;
#ifdef VITC_CUDA
    cuda_stager_free(s->device);
#endif
    free(s);
}
