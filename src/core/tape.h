/* Eager autograd tape. An op whose inputs need a gradient appends one node: {op id, output, inputs,
 * saved tensors, small POD arguments}. tape_backward walks the nodes in reverse and calls each op's
 * backward, which accumulates (+=) into the inputs' gradients, then gives the output's gradient back to
 * the arena for later gradients. With grad mode off nothing is recorded. */
#pragma once
#include "tensor.h"

#define TAPE_MAX_INPUTS 5
#define TAPE_MAX_OUTPUTS 6
#define TAPE_MAX_SAVED 4
#define TAPE_MAX_IARGS 12
#define TAPE_MAX_FARGS 4

typedef struct tape_node {
    int op;
    tensor *out;                             /* the output, or the first of several */
    tensor *more_out[TAPE_MAX_OUTPUTS - 1]; /* the others of an op with several (NULL after) */
    tensor *in[TAPE_MAX_INPUTS];
    int n_in;
    tensor *saved[TAPE_MAX_SAVED]; /* forward by-products the backward needs (mean, rstd, mask...) */
    int iarg[TAPE_MAX_IARGS];
    float farg[TAPE_MAX_FARGS];
    const void *ptr; /* op-specific read-only data that outlives the step (e.g. an index table) */
} tape_node;

typedef void (*op_backward_fn)(tape_node *node);
typedef struct op_info {
    const char *name;
    op_backward_fn backward;
} op_info;

bool tape_grad_enabled(void);
/* Turns recording on or off; returns the previous setting. */
bool tape_set_grad_enabled(bool on);

/* Records a node when grad mode is on and any input requires a gradient; then marks out as requiring
 * one. Returns the node for the op to fill in saved tensors and arguments, or NULL. */
tape_node *tape_record(int op, tensor *out, int n_in, tensor *const *in);
/* The same for an op with n_out outputs (the chunks of one product): its backward runs when any of
 * them has a gradient, and the tape gives all of them back as it does a single output. */
tape_node *tape_record_outputs(int op, int n_out, tensor *const *out, int n_in, tensor *const *in);
/* output i of a node (0: node->out), or NULL past its last */
tensor *tape_node_output(const tape_node *node, int i);

/* Seeds d(loss)/d(loss) = 1 for a one-element loss and runs the reverse pass. */
void tape_backward(tensor *loss);
/* Runs the reverse pass from out with the given upstream gradient (numel(out) floats). */
void tape_backward_from(tensor *out, const float *seed);
/* tape_backward_from for a training step that is done with the forward: each node's output is also
 * given back to the arena once its backward has run, so the gradients reuse activation memory, and
 * no tensor of the forward may be read afterwards (read the loss before). */
void tape_backward_consuming(tensor *out, const float *seed);
/* Runs the reverse pass over the whole tape with the gradients already seeded by the caller. */
void tape_run_backward(void);
/* Called after the backward of each node, in reverse order (also for nodes that had nothing to do),
 * with the node's index: data-parallel training starts sending the gradients no earlier node
 * touches. NULL removes it. */
typedef void (*tape_backward_hook)(int node, void *ctx);
void tape_set_backward_hook(tape_backward_hook fn, void *ctx);
const tape_node *tape_node_at(int i);
/* Time per op (bench --profile): while on, an op's forward counts from the previous op's record (or
 * tape_reset) to its own, so a fused op that records several nodes counts under its first, and work
 * between ops (a model's glue, an op that records nothing) under the next op; a node's backward
 * counts by itself. Seconds and calls are summed per op id since tape_profile_start. The clock is
 * the host's: on a device, whose ops return once queued, the times are the launches'. */
typedef struct tape_op_time {
    double forward_s, backward_s;
    long forward_calls, backward_calls;
} tape_op_time;
void tape_profile_start(void); /* zeroes the sums, and times from now on */
void tape_profile_stop(void);
/* the sums, OP_COUNT of them indexed by op id (ops/op_table.h names the ops) */
const tape_op_time *tape_profile(void);
/* counts the forward time since the previous op as op's: tape_record does it, and an op that does
 * not call it (one that records nothing with grad mode off) calls this instead */
void tape_profile_op(int op);

/* Forgets all nodes (call together with arena_reset). */
void tape_reset(void);
int tape_size(void);
