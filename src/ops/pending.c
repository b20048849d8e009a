/* TEMPORARY during parallel development: weak placeholders overridden by the real backward. */
#include "backward.h"
#include "../core/check.h"
__attribute__((weak)) void op_window_partition_backward(tape_node *n) { (void)n; FATAL("op_window_partition_backward missing"); }
__attribute__((weak)) void op_window_reverse_backward(tape_node *n) { (void)n; FATAL("op_window_reverse_backward missing"); }
__attribute__((weak)) void op_roll_backward(tape_node *n) { (void)n; FATAL("op_roll_backward missing"); }
__attribute__((weak)) void op_relpos_gather_backward(tape_node *n) { (void)n; FATAL("op_relpos_gather_backward missing"); }
__attribute__((weak)) void op_dropout_backward(tape_node *n) { (void)n; FATAL("op_dropout_backward missing"); }
__attribute__((weak)) void op_drop_path_backward(tape_node *n) { (void)n; FATAL("op_drop_path_backward missing"); }
__attribute__((weak)) void op_cross_entropy_backward(tape_node *n) { (void)n; FATAL("op_cross_entropy_backward missing"); }

/* forward ops still being written */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "../cpu/spatial.h"
#include "../data/data.h"
#include "ops.h"
#define PENDING(ret, name, ...)                                                                    \
    __attribute__((weak)) ret name(__VA_ARGS__) { FATAL(#name " is not implemented yet"); }
PENDING(tensor *, op_window_partition, tensor *x, int wh, int ww)
PENDING(tensor *, op_window_reverse, tensor *x, int H, int W, int wh, int ww)
PENDING(tensor *, op_roll, tensor *x, int sh, int sw)
PENDING(tensor *, op_relpos_gather, tensor *table, const int *index, int n)
PENDING(tensor *, op_dropout, tensor *x, float p, rng *r)
PENDING(tensor *, op_drop_path, tensor *x, float p, rng *r)
PENDING(tensor *, op_cross_entropy, tensor *logits, tensor *target)
PENDING(tensor *, op_cross_entropy_labels, tensor *logits, const int *labels, float smoothing)
PENDING(void, relpos_index_swin, int *index, int wh, int ww)
PENDING(bool, dataset_open, dataset *d, const char *root, char *err, size_t err_len)
PENDING(void, dataset_free, dataset *d)
PENDING(void, augment_config_read, augment_config *a, config *c)
PENDING(loader *, loader_create, const dataset *d, const augment_config *a, int batch_size, bool train, int workers, uint64_t seed)
PENDING(void, loader_free, loader *l)
PENDING(void, loader_start_epoch, loader *l, int epoch)
PENDING(bool, loader_next, loader *l, batch *b)
PENDING(int, loader_batches_per_epoch, const loader *l)
PENDING(bool, image_load_eval, const char *path, const augment_config *a, float *out, char *err, size_t err_len)
