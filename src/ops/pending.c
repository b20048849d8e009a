/* TEMPORARY during parallel development: weak placeholders overridden by the real backward. */
#include "backward.h"
#include "../core/check.h"

/* forward ops still being written */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "../data/data.h"
#include "ops.h"
#define PENDING(ret, name, ...)                                                                    \
    __attribute__((weak)) ret name(__VA_ARGS__) { FATAL(#name " is not implemented yet"); }
PENDING(bool, dataset_open, dataset *d, const char *root, char *err, size_t err_len)
PENDING(void, dataset_free, dataset *d)
PENDING(void, augment_config_read, augment_config *a, config *c)
PENDING(loader *, loader_create, const dataset *d, const augment_config *a, int batch_size, bool train, int workers, uint64_t seed)
PENDING(void, loader_free, loader *l)
PENDING(void, loader_start_epoch, loader *l, int epoch)
PENDING(bool, loader_next, loader *l, batch *b)
PENDING(int, loader_batches_per_epoch, const loader *l)
PENDING(bool, image_load_eval, const char *path, const augment_config *a, float *out, char *err, size_t err_len)
