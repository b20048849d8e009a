/* A miniature training step (patch embedding, layernorm, attention-like matmuls, a residual step with
 * drop path, MLP, cross entropy, backward, SGD update, arena reset): after the first step, no step
 * may call the system heap. */
#include "../src/core/params.h"
#include "../src/core/threads.h"
#include "../src/ops/ops.h"
#include "heap_count.h"
#include "test.h"

typedef struct tiny_net {
    param_store ps;
    tensor *patch_w, *patch_b, *ln_w, *ln_b, *qkv_w, *proj_w, *fc1_w, *fc1_b, *head_w, *head_b;
} tiny_net;

static void tiny_net_init(tiny_net *net, rng *r) {
    param_store *ps = &net->ps;
    params_init(ps);
    net->patch_w = PARAM(ps, "patch_embed.proj.weight", 12, 1, 4, 4);
    net->patch_b = PARAM(ps, "patch_embed.proj.bias", 12);
    net->ln_w = PARAM(ps, "norm.weight", 12);
    net->ln_b = PARAM(ps, "norm.bias", 12);
    net->qkv_w = PARAM(ps, "attn.qkv.weight", 36, 12);
    net->proj_w = PARAM(ps, "attn.proj.weight", 12, 12);
    net->fc1_w = PARAM(ps, "mlp.fc1.weight", 24, 12);
    net->fc1_b = PARAM(ps, "mlp.fc1.bias", 24);
    net->head_w = PARAM(ps, "head.weight", 10, 24);
    net->head_b = PARAM(ps, "head.bias", 10);
    params_finalize(ps);
    for (int64_t i = 0; i < ps->span; i++) ps->data[i] = 0.2f * rng_normal(r);
    for (int i = 0; i < 12; i++) net->ln_w->data[i] = 1.0f;
}

static float tiny_net_step(tiny_net *net, const tensor *images, const int *labels, rng *r) {
    const int B = images->shape[0];
    tensor *x = op_conv2d((tensor *)images, net->patch_w, net->patch_b, 4, 0, 1); /* (B,4,4,12) */
    x = RESHAPE(x, B, 16, 12);
    tensor *h = op_layernorm(x, net->ln_w, net->ln_b, 1e-6f, NULL);
    tensor *qkv = op_linear(h, net->qkv_w, NULL);
    tensor *parts[3];
    op_split(qkv, 2, 3, (int[]){12, 12, 12}, parts);
    tensor *att = op_softmax(op_matmul(parts[0], parts[1], false, true, 0.3f), NULL);
    x = op_residual_linear(x, op_matmul(att, parts[2], false, false, 1.0f), net->proj_w, NULL,
                           false, DROP_PATH(0.1f, r, x));
    tensor *m = op_gelu(op_linear(x, net->fc1_w, net->fc1_b));
    tensor *logits = op_linear(op_mean(m, 1, false), net->head_w, net->head_b);
    tensor *loss = op_cross_entropy_labels(logits, labels, 0.1f);
    params_zero_grad(&net->ps);
    tape_backward(loss);
    float value = loss->data[0];
    for (int64_t i = 0; i < net->ps.span; i++) net->ps.data[i] -= 0.05f * net->ps.grad[i];
    tape_reset();
    arena_reset(&vitc_arena);
    return value;
}

TEST(training_step_makes_no_heap_calls_after_the_first) {
    /* libgomp allocates a team for every parallel region of one thread (it keeps larger teams) */
    if (vitc_threads() < 2) vitc_set_threads(2);
    rng r;
    rng_seed(&r, 11, RNG_TEST);
    tiny_net net;
    tiny_net_init(&net, &r);
    /* the batch lives outside the arena, as the loader's pinned buffer will */
    tensor images = {.ndim = 4, .shape = {6, 16, 16, 1}, .numel = 6 * 16 * 16};
    images.data = malloc(sizeof(float) * images.numel);
    for (int i = 0; i < images.numel; i++) images.data[i] = rng_normal(&r);
    int labels[6] = {0, 3, 9, 3, 1, 7};
    float first = tiny_net_step(&net, &images, labels, &r);
    long before = heap_calls();
    float last = first;
    for (int step = 0; step < 20; step++) last = tiny_net_step(&net, &images, labels, &r);
    long calls = heap_calls() - before;
    free(images.data);
    params_free(&net.ps);
    EXPECT(calls == 0, "%ld heap calls in 20 steps after the first (%s)", calls,
           heap_calls_counted() ? "all system heap calls" : "vitc's own allocations, under ASan");
    EXPECT(last < first, "loss did not fall: %g -> %g", first, last);
}
