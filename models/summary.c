/* `train --summary`: the module tree with parameter counts, MACs of one forward at the configured
 * input (fvcore-style, see op_macs), and the activation memory of one training step at batch 1. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../src/core/arena.h"
#include "../src/core/tape.h"
#include "model.h"

/* the first `depth` dot-separated components of name */
static int prefix_len(const char *name, int depth) {
    const char *p = name;
    for (int d = 0; d < depth; d++) {
        const char *dot = strchr(p, '.');
        if (!dot) return (int)strlen(name);
        p = dot + 1;
    }
    return (int)(p - name - 1);
}

static void print_tree(const param_store *ps, FILE *f) {
    /* level 1: top modules; level 2 for containers with numbered children (blocks.3, layers.0) */
    for (int i = 0; i < ps->n;) {
        const char *name = ps->params[i]->name;
        int l1 = prefix_len(name, 1);
        int64_t total = 0;
        int j = i;
        for (; j < ps->n && !strncmp(ps->params[j]->name, name, l1) &&
               (ps->params[j]->name[l1] == '.' || ps->params[j]->name[l1] == 0);
             j++)
            total += ps->params[j]->numel;
        fprintf(f, "  %-40.*s %12lld\n", l1, name, (long long)total);
        for (int k = i; k < j;) {
            const char *sub = ps->params[k]->name;
            int l2 = prefix_len(sub, 2);
            int64_t t2 = 0;
            int e = k;
            for (; e < j && !strncmp(ps->params[e]->name, sub, l2) &&
                   (ps->params[e]->name[l2] == '.' || ps->params[e]->name[l2] == 0);
                 e++)
                t2 += ps->params[e]->numel;
            if (l2 > l1 && j - i > 1) fprintf(f, "    %-38.*s %12lld\n", l2, sub, (long long)t2);
            k = e;
        }
        i = j;
    }
}

double model_macs(model *m) {
    const model_config *c = &m->cfg;
    bool prev = tape_set_grad_enabled(false);
    arena_mark mark = arena_get_mark(&vitc_arena);
    tensor *x = tensor_zeros(4, (int[]){1, c->img_size, c->img_size, c->in_chans});
    forward_opts fo = {.train = false, .every_token = true};
    op_macs = 0;
    model_forward(m, x, &fo);
    double macs = op_macs;
    arena_release(&vitc_arena, mark);
    tape_set_grad_enabled(prev);
    return macs;
}

void model_summary(model *m, FILE *f) {
    const model_config *c = &m->cfg;
    fprintf(f, "%s (%s), %dx%dx%d input, %d classes\n", c->name, c->arch, c->img_size, c->img_size,
            c->in_chans, c->num_classes);
    print_tree(&m->ps, f);
    double macs = model_macs(m);
    /* one training step at batch 1: forward and backward with the tape on; on a device its data
     * peaks in the data arena, beside the tensor structs of vitc_arena */
    arena *data = vitc_data_arena();
    size_t before = vitc_arena.peak, data_before = data->peak;
    arena_reset(&vitc_arena);
    vitc_arena.peak = data->peak = 0;
    tensor *x = tensor_zeros(4, (int[]){1, c->img_size, c->img_size, c->in_chans});
    forward_opts fo = {.train = false};
    params_zero_grad(&m->ps);
    tensor *logits = model_forward(m, x, &fo);
    logits = RESHAPE(logits, 1, (int)logits->numel); /* any output (sit's latents) as one row */
    tape_backward(op_cross_entropy_labels(logits, (int[]){0}, 0.0f));
    size_t act = vitc_arena.peak + (data != &vitc_arena ? data->peak : 0);
    tape_reset();
    arena_reset(&vitc_arena);
    if (before > vitc_arena.peak) vitc_arena.peak = before;
    if (data_before > data->peak) data->peak = data_before;
    fprintf(f, "parameters: %lld (%.2fM)\n", (long long)m->ps.numel, m->ps.numel / 1e6);
    fprintf(f, "MACs per image: %.4g G (fvcore-style: linear, matmul, conv, layernorm, resize, pooling)\n",
            macs / 1e9);
    fprintf(f, "activation memory of a training step: %.1f MiB per image (+ %.1f MiB parameters, "
            "gradients and AdamW moments)\n", act / 1048576.0, m->ps.numel * 16 / 1048576.0);
}
