/* When is a parameter's gradient final? A node's backward adds only into its inputs' gradients (or,
 * through a reshape's view, into the gradient of the reshape's input, which that reshape, recorded
 * earlier, takes as its input), so a parameter's gradient is final once the backward has passed the
 * first node (in tape order) that takes it as an input. Parameters sit in the flat block in declaration order, which is roughly the
 * order of use, so the final part of the block grows from the end as the backward walks the tape. */
#include <limits.h>
#include <stdlib.h>

#include "../core/check.h"
#include "../core/tape.h"
#include "grad_sync.h"

struct grad_sync {
    param_store *ps;
    dist_reducer *reducer;
    int *first_use;  /* per parameter (declaration order): first tape node using it, INT_MAX: none */
    int *suffix_min; /* min of first_use over parameters p.. : all of them final once it is passed */
    int frontier;    /* parameters from here on are final */
};

size_t grad_sync_bucket_bytes(const param_store *ps) {
    size_t eighth = sizeof(float) * (size_t)ps->span / 8, most = 25u << 20, least = 1u << 20;
    return eighth > most ? most : eighth < least ? least : eighth;
}

grad_sync *grad_sync_create(param_store *ps) {
    grad_sync *g = xcalloc(1, sizeof(*g));
    g->ps = ps;
    g->reducer = dist_reducer_create(ps->grad, ps->span, grad_sync_bucket_bytes(ps));
    g->first_use = xmalloc(sizeof(int) * (size_t)(ps->n + 1));
    g->suffix_min = xmalloc(sizeof(int) * (size_t)(ps->n + 1));
    return g;
}

void grad_sync_free(grad_sync *g) {
    if (!g) return;
    dist_reducer_free(g->reducer);
    free(g->first_use);
    free(g->suffix_min);
    free(g);
}

/* the parameter whose gradient holds the float at p, or -1 (parameters are in block order) */
static int param_of(const param_store *ps, const float *p) {
    if (p < ps->grad || p >= ps->grad + ps->span) return -1;
    int lo = 0, hi = ps->n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ps->params[mid]->grad <= p) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static int64_t offset_of(const grad_sync *g, int p) {
    return p < g->ps->n ? g->ps->params[p]->grad - g->ps->grad : g->ps->span;
}

static void after_node(int node, void *ctx) {
    grad_sync *g = ctx;
    int f = g->frontier;
    while (f > 0 && g->suffix_min[f - 1] >= node) f--;
    g->frontier = f;
    dist_reducer_ready(g->reducer, offset_of(g, f)); /* also moves the buckets under way along */
}

void grad_sync_arm(grad_sync *g) {
    if (dist_size() == 1) return;
    const param_store *ps = g->ps;
    for (int p = 0; p < ps->n; p++) g->first_use[p] = INT_MAX;
    for (int i = tape_size() - 1; i >= 0; i--) {
        const tape_node *n = tape_node_at(i);
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] && n->in[k]->grad ? param_of(ps, n->in[k]->grad) : -1;
            if (p >= 0) g->first_use[p] = i;
        }
    }
    g->suffix_min[ps->n] = INT_MAX;
    for (int p = ps->n - 1; p >= 0; p--)
        g->suffix_min[p] = g->first_use[p] < g->suffix_min[p + 1] ? g->first_use[p] : g->suffix_min[p + 1];
    g->frontier = ps->n;
    tape_set_backward_hook(after_node, g);
}

void grad_sync_finish(grad_sync *g) {
    if (dist_size() == 1) return;
    tape_set_backward_hook(NULL, NULL);
    dist_reducer_finish(g->reducer, 1.0f / (float)dist_size());
}

double grad_sync_wait_seconds(grad_sync *g) { return dist_reducer_wait_seconds(g->reducer); }
