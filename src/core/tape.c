#include "tape.h"

#include <string.h>

#include "../ops/op_table.h"
#include "arena.h"
#include "check.h"
#include "clock.h"
#include "memory.h"

static struct {
    tape_node *nodes;
    int n, cap;
    bool grad_enabled;
} tape = {NULL, 0, 0, true};

bool tape_grad_enabled(void) { return tape.grad_enabled; }

bool tape_set_grad_enabled(bool on) {
    bool prev = tape.grad_enabled;
    tape.grad_enabled = on;
    return prev;
}

static struct {
    tape_op_time times[OP_COUNT];
    bool on;
    double since; /* the previous op's record, or the tape's reset */
} profile;

void tape_profile_start(void) {
    memset(profile.times, 0, sizeof(profile.times));
    profile.on = true;
    profile.since = clock_seconds();
}

void tape_profile_stop(void) { profile.on = false; }

const tape_op_time *tape_profile(void) { return profile.times; }

void tape_profile_op(int op) {
    if (!profile.on) return;
    double t = clock_seconds();
    profile.times[op].forward_s += t - profile.since;
    profile.times[op].forward_calls++;
    profile.since = t;
}

tape_node *tape_record(int op, tensor *out, int n_in, tensor *const *in) {
    return tape_record_outputs(op, 1, &out, n_in, in);
}

tape_node *tape_record_outputs(int op, int n_out, tensor *const *out, int n_in, tensor *const *in) {
    CHECK(n_out >= 1 && n_out <= TAPE_MAX_OUTPUTS, "op %s has %d outputs (at most %d)",
          op_table[op].name, n_out, TAPE_MAX_OUTPUTS);
    CHECK(n_in <= TAPE_MAX_INPUTS, "op %s has %d inputs (at most %d)", op_table[op].name, n_in,
          TAPE_MAX_INPUTS);
    for (int i = 0; i < n_in; i++)
        CHECK(!in[i] || !in[i]->bf16 || op_reads_bf16(op),
              "op %s was given input %d %s stored as bf16, which it cannot read (bf16 tensors are "
              "operands of the ops op_reads_bf16 names)", op_table[op].name, i, SHAPE_STR(in[i]));
    tape_profile_op(op);
    if (!tape.grad_enabled) return NULL;
    bool any = false;
    for (int i = 0; i < n_in; i++) any |= in[i] && in[i]->requires_grad;
    if (!any) return NULL;
    if (tape.n == tape.cap) {
        /* grows during the first step only: later steps record the same number of nodes */
        tape.cap = tape.cap ? 2 * tape.cap : 1024;
        tape.nodes = xrealloc(tape.nodes, (size_t)tape.cap * sizeof(tape_node));
    }
    tape_node *node = &tape.nodes[tape.n++];
    memset(node, 0, sizeof(*node));
    node->op = op;
    node->out = out[0];
    for (int i = 1; i < n_out; i++) node->more_out[i - 1] = out[i];
    node->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        node->in[i] = in[i];
        if (in[i] && !in[i]->name) in[i]->readers++;
    }
    for (int i = 0; i < n_out; i++) {
        out[i]->requires_grad = true;
        out[i]->made_by = op + 1;
    }
    return node;
}

tensor *tape_node_output(const tape_node *node, int i) {
    return i == 0 ? node->out : i < TAPE_MAX_OUTPUTS ? node->more_out[i - 1] : NULL;
}

static void give_back(const tensor *t) {
    arena_give_back(vitc_data_arena(), t->data, tensor_data_bytes(t));
}

/* After a node's backward, nothing left in the reverse pass reads its saved tensors (attention
 * probabilities, statistics, masks: its own) nor its output (the nodes still to run were recorded
 * before it). The output goes only when the caller has said it holds none (consuming), and not when
 * it is a view sharing an input's memory (a reshape). */
static void give_back_activations(const tape_node *node, bool consuming) {
    for (int i = 0; i < TAPE_MAX_SAVED; i++)
        if (node->saved[i]) give_back(node->saved[i]);
    if (!consuming) return;
    for (int i = 0; i < node->n_in; i++)
        if (node->in[i] && node->in[i]->data == node->out->data) return;
    tensor *out;
    for (int i = 0; (out = tape_node_output(node, i)); i++) give_back(out);
}

static bool reached_by_loss(const tape_node *node) {
    tensor *out;
    for (int i = 0; (out = tape_node_output(node, i)); i++)
        if (out->grad) return true;
    return false;
}

static tape_backward_hook hook;
static void *hook_ctx;

void tape_set_backward_hook(tape_backward_hook fn, void *ctx) {
    hook = fn;
    hook_ctx = ctx;
}

const tape_node *tape_node_at(int i) { return &tape.nodes[i]; }

static void run_backward(bool consuming) {
    for (int i = tape.n - 1; i >= 0; i--) {
        tape_node *node = &tape.nodes[i];
        tensor *out;
        if (reached_by_loss(node)) { /* else nothing downstream of this node reached the loss */
            for (int o = 0; (out = tape_node_output(node, o)); o++)
                if (out->grad_bf16 && !op_takes_bf16_grad(node->op)) op_widen_grad(out);
            double t0 = profile.on ? clock_seconds() : 0;
            op_table[node->op].backward(node);
            if (profile.on) {
                profile.times[node->op].backward_s += clock_seconds() - t0;
                profile.times[node->op].backward_calls++;
            }
            /* the outputs' gradients are complete and now consumed, and so are the node's
             * activations: their memory serves later gradients */
            for (int o = 0; (out = tape_node_output(node, o)); o++) {
                if (out->grad) /* (an input may have taken it over) */
                    arena_give_back(vitc_data_arena(), out->grad, tensor_grad_bytes(out));
                out->grad = NULL;
                out->grad_bf16 = false;
            }
            give_back_activations(node, consuming);
        }
        if (hook) hook(i, hook_ctx);
    }
}

static void seed_grad(tensor *out, const float *seed) {
    CHECK(out->requires_grad, "backward from a tensor of shape %s that does not require grad",
          SHAPE_STR(out));
    float *g = tensor_grad(out);
    if (out->dev == DEV_CPU) {
        for (int64_t i = 0; i < out->numel; i++) g[i] += seed[i];
        return;
    }
    size_t bytes = sizeof(float) * (size_t)out->numel; /* a device gradient: add on the host */
    float *h = xmalloc(bytes);
    vitc_memory()->to_host(h, g, bytes);
    for (int64_t i = 0; i < out->numel; i++) h[i] += seed[i];
    vitc_memory()->from_host(g, h, bytes);
    free(h);
}

void tape_backward_from(tensor *out, const float *seed) {
    seed_grad(out, seed);
    run_backward(false);
}

void tape_backward_consuming(tensor *out, const float *seed) {
    seed_grad(out, seed);
    run_backward(true);
}

void tape_run_backward(void) { run_backward(false); }

void tape_backward(tensor *loss) {
    CHECK(loss->numel == 1, "backward needs a one-element loss, got shape %s", SHAPE_STR(loss));
    static const float one = 1.0f;
    tape_backward_from(loss, &one);
}

void tape_reset(void) {
    tape.n = 0;
    if (profile.on) profile.since = clock_seconds();
}

int tape_size(void) { return tape.n; }
