/* Data-parallel processes. Started under mpirun (or any launcher that sets the MPI process-manager
 * environment), the process joins MPI's world; started alone it is rank 0 of 1, MPI is never
 * initialised and every call below returns at once. The trainer talks to this interface only: host
 * memory goes over MPI, and in a CUDA build device memory (broadcasts and gradient sums of
 * --device cuda) over NCCL, on a communicator MPI bootstraps at the first such call. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Joins the world when launched by an MPI launcher; call before anything else in main. */
void dist_init(int *argc, char ***argv);
/* Leaves it (call once at a clean exit; a non-zero exit without it makes mpirun end the job). */
void dist_finalize(void);
int dist_rank(void);
int dist_size(void);
/* this rank's index among the ranks on its host (0 when alone), and their number */
int dist_local_rank(void);
int dist_local_size(void);
/* the threads a rank uses when not told: the host's cores shared among its ranks (0 when alone: the
 * OpenMP default) */
int dist_default_threads(void);
/* Start-up errors are reported once: from dist_init to here, ranks other than 0 hold back what they
 * print on stderr, and show it only when rank 0 found no error (the same input gives every rank the
 * same error; an error of one rank alone, such as a missing file on its host, is shown). Every rank
 * calls it once, with whether its start-up went well; returns true when it did on every rank. */
bool dist_startup_done(bool ok);
/* Ends every rank of the job with the exit code at once (no rank waits forever for a dead peer). */
_Noreturn void dist_abort(int code);

void dist_barrier(void);
/* data in host or device memory, the same kind on every rank */
void dist_broadcast(void *data, size_t bytes, int root);
/* in place, blocking, every rank gets the sum: counters and loss sums */
void dist_sum_f64(double *x, int n);
void dist_sum_i64(int64_t *x, int n);
void dist_max_f64(double *x, int n);
/* true on every rank when ok is true on every rank */
bool dist_all(bool ok);

/* Gradient reduction in buckets of one flat fp32 block: a bucket's allreduce starts (non-blocking)
 * as soon as the backward pass says its gradients are final, so communication overlaps the rest of
 * the backward; dist_reducer_finish starts what is left, waits, and scales the sum once. */
typedef struct dist_reducer dist_reducer;
/* grad in host or device memory (then a collective call if it is the job's first of device memory) */
dist_reducer *dist_reducer_create(float *grad, int64_t n, size_t bucket_bytes);
void dist_reducer_free(dist_reducer *r);
/* The gradients from offset `final_from` to the end are final: starts every bucket inside that
 * range not yet started, and lets the transport progress the ones under way. */
void dist_reducer_ready(dist_reducer *r, int64_t final_from);
/* Starts the remaining buckets, waits for all of them and multiplies the block by scale. */
void dist_reducer_finish(dist_reducer *r, float scale);
/* seconds spent waiting in dist_reducer_finish since the last call (the part not hidden) */
double dist_reducer_wait_seconds(dist_reducer *r);
