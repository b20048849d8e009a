/* The attention modules' host code on the device: Agent attention's biases without gradients follow
 * their parameters; attention maps (eval --attn-map) and the JSD redundancy recorder (sample --jsd),
 * which read q, k and gradients on the host, agree with the CPU. */
#include <math.h>
#include <stdlib.h>

#include "../../models/attn/attn_map.h"
#include "../../models/attn/attn_redundancy.h"
#include "../../models/model.h"
#include "core/memory.h"
#include "device_check.h"
#include "ops/backend.h"

static model *tiny_model(const char *name) {
    char path[128];
    snprintf(path, sizeof(path), "configs/tiny/%s.json", name);
    config c;
    config_init(&c);
    const char *files[1] = {path};
    model_config_load(&c, files, 1, NULL, 0);
    model_config mc;
    model_config_read(&mc, &c);
    config_free(&c);
    return model_create(&mc, 3);
}

/* a random image (1, H, W, C) on the selected device, the same on every call */
static tensor *image(const model_config *mc) {
    int64_t n = (int64_t)mc->img_size * mc->img_size * mc->in_chans;
    float *x = xmalloc(sizeof(float) * (size_t)n);
    rng r;
    rng_seed(&r, 7, RNG_TEST);
    for (int64_t i = 0; i < n; i++) x[i] = rng_normal(&r);
    tensor *t = TENSOR(1, mc->img_size, mc->img_size, mc->in_chans);
    vitc_memory()->from_host(t->data, x, sizeof(float) * (size_t)n);
    free(x);
    return t;
}

/* the model's logits (num_classes floats) on x into out, with gradients recorded or not */
static void logits_of(model *m, tensor *x, bool grad, float *out) {
    bool prev = tape_set_grad_enabled(grad);
    forward_opts fo = {.train = false};
    tensor *logits = model_forward(m, x, &fo);
    vitc_memory()->to_host(out, logits->data, sizeof(float) * (size_t)logits->numel);
    tape_set_grad_enabled(prev);
    tape_reset();
}

TEST(cuda_agent_biases_for_inference_follow_their_parameters) {
    REQUIRE_DEVICE();
    cuda_test_select("cuda");
    model *m = tiny_model("deit_agent");
    tensor *x = image(&m->cfg);
    float with_grad[5], without[5], again[5], changed[5], changed_with_grad[5];
    logits_of(m, x, true, with_grad);
    logits_of(m, x, false, without);
    logits_of(m, x, false, again);
    EXPECT(!memcmp(with_grad, without, sizeof(without)) && !memcmp(without, again, sizeof(again)),
           "logits without gradients differ: %g vs %g vs %g", with_grad[0], without[0], again[0]);
    tensor *an_bias = params_find(&m->ps, "blocks.1.attn.an_bias");
    EXPECT(an_bias, "tiny_deit_agent has no blocks.1.attn.an_bias");
    float *values = xmalloc(sizeof(float) * (size_t)an_bias->numel);
    const float *now = params_read(&m->ps, values, an_bias->data, an_bias->numel);
    if (now != values) memcpy(values, now, sizeof(float) * (size_t)an_bias->numel);
    for (int64_t j = 0; j < an_bias->numel; j++) values[j] += 0.5f * (float)(j % 3);
    params_write(&m->ps, an_bias->data, values, an_bias->numel);
    free(values);
    logits_of(m, x, false, changed);
    logits_of(m, x, true, changed_with_grad);
    EXPECT(memcmp(changed, again, sizeof(again)), "the logits ignored a change of an_bias");
    EXPECT(!memcmp(changed, changed_with_grad, sizeof(changed)),
           "the biases were not rebuilt after an_bias changed: %g vs %g", changed[0], changed_with_grad[0]);
    model_free(m);
    arena_reset(&vitc_arena);
    cuda_test_select("cpu");
}

/* the probe of block `block` of the tiny model on the selected device */
static attn_probe probe_block(const char *name, int block) {
    model *m = tiny_model(name);
    tensor *x = image(&m->cfg);
    bool grad_was = tape_set_grad_enabled(false);
    attn_probe p = {.block = block, .qy = 0.3f, .qx = 0.6f};
    forward_opts o = {.train = false};
    attn_probe_set(&p);
    model_forward(m, x, &o);
    attn_probe_set(NULL);
    tape_set_grad_enabled(grad_was);
    model_free(m);
    arena_reset(&vitc_arena);
    return p;
}

TEST(cuda_attn_map_matches_the_cpu) {
    REQUIRE_DEVICE();
    const char *models[] = {"deit_agent", "swin_native", "pvt_flatten", "cswin_elfatt"};
    for (int i = 0; i < 4; i++)
        for (int block = 0; block < 2; block++) {
            cuda_test_select("cpu");
            attn_probe cpu = probe_block(models[i], block);
            cuda_test_select("cuda");
            attn_probe dev = probe_block(models[i], block);
            cuda_test_select("cpu");
            int n = cpu.map_h * cpu.map_w;
            EXPECT(cpu.row && dev.row && dev.map_h == cpu.map_h && dev.map_w == cpu.map_w && dev.hits == cpu.hits,
                   "%s block %d: maps %dx%d (%d hits) on the device, %dx%d (%d) on the CPU", models[i], block,
                   dev.map_h, dev.map_w, dev.hits, cpu.map_h, cpu.map_w, cpu.hits);
            double err = max_rel_diff(dev.row, cpu.row, n), cls = fabs(dev.cls_weight - cpu.cls_weight);
            printf("    %-12s block %d: max rel err %.2e\n", models[i], block, err);
            EXPECT(err <= 1e-5 && cls <= 1e-5, "%s block %d: rows differ by %.2e, class weights by %.2e", models[i],
                   block, err, cls);
            attn_probe_free(&cpu), attn_probe_free(&dev);
        }
}

/* JSD redundancy of global softmax attention over 2 sequences of 7 tokens, 2 heads, block 1 of 2 */
static void redundancy(double sum[4], int count[4]) {
    enum { N = 7, H = 2, C = 12 };
    param_store ps;
    params_init(&ps);
    attn_spec spec = {.kind = ATTN_NATIVE, .dim = C, .heads = H, .h = 1, .w = N, .hk = 1, .wk = N,
                      .flavour = NATIVE_GLOBAL, .block = 1};
    attn *a = attn_create(&ps, "blocks.1.attn", &spec);
    params_finalize(&ps);
    float host[3][2 * N * C]; /* on the CPU the tensors wrap these arrays */
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    tensor *qkv[3];
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < 2 * N * C; i++) host[t][i] = 1.5f * rng_normal(&r);
        qkv[t] = tensor_wrap((float *)backend_floats(host[t], 2 * N * C), 3, (int[]){2, N, C});
        qkv[t]->dev = vitc_device();
    }
    attn_redundancy rec = {.blocks = 2, .heads = H, .max_pairs = 100, .max_sequences = 2, .sum = sum, .count = count};
    attn_redundancy_set(&rec);
    attn_forward(a, qkv[0], qkv[1], qkv[2]);
    attn_redundancy_set(NULL);
    attn_destroy(a);
    params_free(&ps);
    arena_reset(&vitc_arena);
}

TEST(cuda_jsd_redundancy_matches_the_cpu) {
    REQUIRE_DEVICE();
    double sum_cpu[4] = {0}, sum_dev[4] = {0};
    int count_cpu[4] = {0}, count_dev[4] = {0};
    cuda_test_select("cpu");
    redundancy(sum_cpu, count_cpu);
    cuda_test_select("cuda");
    redundancy(sum_dev, count_dev);
    cuda_test_select("cpu");
    for (int h = 2; h < 4; h++)
        EXPECT(count_dev[h] == 2 && count_cpu[h] == 2 && sum_dev[h] == sum_cpu[h] && sum_cpu[h] > 0,
               "head %d: %.9f over %d sequences on the device, %.9f over %d on the CPU", h - 2, sum_dev[h],
               count_dev[h], sum_cpu[h], count_cpu[h]);
}
