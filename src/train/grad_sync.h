/* Data-parallel gradient synchronisation: during the backward pass of a step's last micro-batch,
 * hands each bucket of the flat gradient block to the dist layer as soon as no remaining node of
 * the tape can add to it, then averages over the ranks once the backward is done. */
#pragma once
#include "../core/params.h"
#include "../dist/dist.h"

typedef struct grad_sync grad_sync;
/* Buckets of up to 25 MB (few messages, so the latency term stays small against the bandwidth term:
 * docs/distributed.md), and at least 8 per model, so that a small model's communication also
 * starts during its backward. */
grad_sync *grad_sync_create(param_store *ps);
size_t grad_sync_bucket_bytes(const param_store *ps);
void grad_sync_free(grad_sync *g);
/* Call after the last micro-batch's forward (the tape is complete), before its backward. */
void grad_sync_arm(grad_sync *g);
/* Call after that backward: waits for every bucket and divides by the number of ranks. */
void grad_sync_finish(grad_sync *g);
/* seconds waited in grad_sync_finish since the last call: communication the backward did not hide */
double grad_sync_wait_seconds(grad_sync *g);
