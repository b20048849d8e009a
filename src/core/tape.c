#include "tape.h"

#include <string.h>

#include "../ops/op_table.h"
#include "arena.h"
#include "check.h"

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

tape_node *tape_record(int op, tensor *out, int n_in, tensor *const *in) {
    CHECK(n_in <= TAPE_MAX_INPUTS, "op %s has %d inputs (at most %d)", op_table[op].name, n_in,
          TAPE_MAX_INPUTS);
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
    node->out = out;
    node->n_in = n_in;
    for (int i = 0; i < n_in; i++) node->in[i] = in[i];
    out->requires_grad = true;
    return node;
}

void tape_backward_from(tensor *out, const float *seed) {
    CHECK(out->requires_grad, "backward from a tensor of shape %s that does not require grad",
          SHAPE_STR(out));
    float *g = tensor_grad(out);
    for (int64_t i = 0; i < out->numel; i++) g[i] += seed[i];
    tape_run_backward();
}

/* A node's saved tensors (attention probabilities, statistics, masks) are its own and read by its
 * backward only. (Its output is not given back: the caller may still hold it, e.g. the logits.) */
static void give_back_saved(tape_node *node) {
    for (int i = 0; i < TAPE_MAX_SAVED; i++)
        if (node->saved[i])
            arena_give_back(&vitc_arena, node->saved[i]->data, (size_t)node->saved[i]->numel * sizeof(float));
}

void tape_run_backward(void) {
    for (int i = tape.n - 1; i >= 0; i--) {
        tape_node *node = &tape.nodes[i];
        if (!node->out->grad) continue; /* nothing downstream of this node reached the loss */
        op_table[node->op].backward(node);
        /* the output's gradient is complete and now consumed, and so are the saved tensors: their
         * memory serves later gradients */
        arena_give_back(&vitc_arena, node->out->grad, (size_t)node->out->numel * sizeof(float));
        node->out->grad = NULL;
        give_back_saved(node);
    }
}

void tape_backward(tensor *loss) {
    CHECK(loss->numel == 1, "backward needs a one-element loss, got shape %s", SHAPE_STR(loss));
    static const float one = 1.0f;
    tape_backward_from(loss, &one);
}

void tape_reset(void) { tape.n = 0; }

int tape_size(void) { return tape.n; }
