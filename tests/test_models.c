/* Model zoo: exact parameter counts of the paper configs (the official code's numbers), official
 * state_dict keys and shapes, a forward/backward of every registered model at a tiny size with a
 * gradient reaching every parameter, block-by-block freed inference against the taped forward, and
 * config errors naming the JSON path. */
#include "../src/core/cpu_features.h"
#include "../src/core/precision.h"
#include "../src/core/threads.h"
#include "../src/nn/layers.h"
#include "model_check.h"

static const struct {
    const char *name;
    int64_t params;
} official_counts[] = {
    {"deit_t", 5717416},        {"agent_deit_t", 6015640}, {"agent_deit_s", 22647112},
    {"agent_deit_b", 87204904}, {"flatten_deit_t", 6193576}, {"swin_t", 28288354},
    {"agent_swin_t", 28902964}, {"agent_swin_s", 49666684},  {"agent_swin_b", 88095096},
    {"flatten_swin_t", 29192384}, {"agent_swin_s_288", 49707964}, {"agent_swin_b_384", 88305016},
    {"agent_pvt_t", 11570352},  {"agent_pvt_s", 20635066},  {"agent_pvt_m", 35921746},
    {"agent_pvt_l", 48738180},  {"agent_pvt_m_256", 36083682}, {"pvt_t", 13227240},
    {"pvt_v2_b0", 3666760},     {"flatten_pvt_t", 12150504}, {"flatten_pvt_v2_b0", 3594824},
    {"agent_cswin_t", 20458672}, {"agent_cswin_s", 32814100}, {"agent_cswin_b", 73249696},
    {"agent_cswin_b_384", 73328416}, {"flatten_cswin_t", 21201768},
    /* ELFATT: no official code; the README says 30M and 20M (elfatt.md §8.3 computes these) */
    {"elfatt_swin_t", 30243208}, {"elfatt_cswin_t", 20393320},
};

TEST(models_param_counts_equal_the_official_code) {
    for (size_t i = 0; i < sizeof(official_counts) / sizeof(official_counts[0]); i++) {
        int64_t n = registry_param_count(official_counts[i].name);
        EXPECT(n == official_counts[i].params, "%s: %lld parameters, official %lld",
               official_counts[i].name, (long long)n, (long long)official_counts[i].params);
    }
    /* the native ('SSSS') CSwin skeleton with the Agent/FLatten-T depths, measured on the official
     * code (flatten.md §6): pins the native stripe blocks apart from any efficient core */
    model_config mc;
    registry_config(&mc, "cswin_t", "{\"model\": {\"depths\": [2, 4, 18, 1]}}");
    param_store ps;
    model_declare(&mc, &ps);
    EXPECT(ps.numel == 20393320, "native CSwin at depths 2-4-18-1: %lld parameters, official 20393320",
           (long long)ps.numel);
    params_free(&ps);
}

static const struct {
    const char *name, *listing;
} listings[] = {
    {"agent_deit_t", "../shared/specs/agent_attention_state_dicts/agent_deit_t.tsv"},
    {"agent_deit_b", "../shared/specs/agent_attention_state_dicts/agent_deit_b.tsv"},
    {"agent_deit_s_448", "../shared/specs/agent_attention_state_dicts/agent_deit_s_448.tsv"},
    {"agent_swin_t", "../shared/specs/agent_attention_state_dicts/agent_swin_t.tsv"},
    {"agent_swin_b", "../shared/specs/agent_attention_state_dicts/agent_swin_b.tsv"},
    {"agent_swin_s_288", "../shared/specs/agent_attention_state_dicts/agent_swin_s_288.tsv"},
    {"flatten_swin_t", "../shared/specs/flatten_state_dicts/flatten_swin_t_224.txt"},
    {"flatten_swin_b_384", "../shared/specs/flatten_state_dicts/flatten_swin_b_384.txt"},
    {"agent_pvt_t", "../shared/specs/agent_attention_state_dicts/agent_pvt_t.tsv"},
    {"agent_pvt_m_256", "../shared/specs/agent_attention_state_dicts/agent_pvt_m_256.tsv"},
    {"flatten_pvt_t", "../shared/specs/flatten_state_dicts/flatten_pvt_t.txt"},
    {"flatten_pvt_l", "../shared/specs/flatten_state_dicts/flatten_pvt_b_large.txt"},
    {"flatten_pvt_v2_b0", "../shared/specs/flatten_state_dicts/flatten_pvt_v2_b0.txt"},
    {"flatten_pvt_v2_b4", "../shared/specs/flatten_state_dicts/flatten_pvt_v2_b4.txt"},
    {"agent_cswin_t", "../shared/specs/agent_attention_state_dicts/agent_cswin_t.tsv"},
    {"agent_cswin_s", "../shared/specs/agent_attention_state_dicts/agent_cswin_s.tsv"},
    {"agent_cswin_b", "../shared/specs/agent_attention_state_dicts/agent_cswin_b.tsv"},
    {"agent_cswin_b_384", "../shared/specs/agent_attention_state_dicts/agent_cswin_b_384.tsv"},
    {"flatten_cswin_t", "../shared/specs/flatten_state_dicts/flatten_cswin_t_224.txt"},
    {"flatten_cswin_s", "../shared/specs/flatten_state_dicts/flatten_cswin_s_224.txt"},
    {"flatten_cswin_b", "../shared/specs/flatten_state_dicts/flatten_cswin_b_224.txt"},
    {"flatten_cswin_b_384", "../shared/specs/flatten_state_dicts/flatten_cswin_b_384.txt"},
};

TEST(models_state_dict_keys_equal_the_official_listings) {
    int checked = 0;
    for (size_t i = 0; i < sizeof(listings) / sizeof(listings[0]); i++) {
        bool missing;
        char *diff = compare_state_dict(listings[i].name, listings[i].listing, &missing);
        if (missing) continue;
        checked++;
        EXPECT(!diff, "%s differs from %s:\n%s", listings[i].name, listings[i].listing, diff);
    }
    if (!checked) SKIP("the official key listings (../shared/specs/*_state_dicts) are not beside this checkout");
}

/* every registered model at its configured resolution, with its real depths, heads, windows and
 * agents, and 8 channels per head (the "tiny version" of the paper model) */
TEST(models_every_registered_model_runs_and_every_parameter_gets_a_gradient) {
    for (int i = 0; i < model_registry_count(); i++) {
        const char *name = model_registry_name(i);
        model_config mc;
        registry_config_narrow(&mc, name, 3);
        int size = mc.img_size;
        model *m = model_create(&mc, 1);
        if (getenv("VITC_TEST_VERBOSE")) printf("    %s\n", name);
        rng r;
        rng_seed(&r, 3, RNG_TEST);
        tensor *x = RANDN(&r, 1, 1, size, size, mc.in_chans);
        forward_opts fo = {.train = false};
        params_zero_grad(&m->ps);
        tensor *logits = model_forward(m, x, &fo);
        EXPECT(logits->ndim == 2 && logits->shape[0] == 1 && logits->shape[1] == 3, "%s logits %s", name,
               SHAPE_STR(logits));
        tape_backward(op_cross_entropy_labels(logits, (int[]){1}, 0.1f));
        for (int64_t j = 0; j < logits->numel; j++) EXPECT(isfinite(logits->data[j]), "%s: non-finite logit", name);
        for (int p = 0; p < m->ps.n; p++) {
            const tensor *t = m->ps.params[p];
            /* DeiT classifies the class token: in its last block, what acts only on the patch
             * tokens' outputs (query->agent biases, the DWC branch) cannot reach the loss */
            const char *patch_only[] = {"na_bias", "ha_bias", "wa_bias", "dwc.weight", "dwc.bias"};
            /* FLatten-PVT's final norm is declared but never applied, as in the official code */
            bool skip = mc.unused_norm && !strncmp(t->name, "norm.", 5);
            for (int k = 0; k < 5 && !strcmp(mc.arch, "deit"); k++)
                skip |= !strcmp(t->name, nn_name("blocks.%d.attn.%s", mc.depths[0] - 1, patch_only[k]));
            if (skip) continue;
            double s = 0;
            for (int64_t j = 0; j < t->numel; j++) s += fabs(t->grad[j]);
            EXPECT(s > 0 && isfinite(s), "%s: %s gets no gradient", name, t->name);
        }
        model_free(m);
        tape_reset();
        arena_reset(&vitc_arena);
    }
}

/* logits of the model on x into out (num_classes floats), with gradients recorded or not */
static void logits_of(model *m, tensor *x, bool grad, float *out) {
    bool prev = tape_set_grad_enabled(grad);
    forward_opts fo = {.train = false};
    tensor *logits = model_forward(m, x, &fo);
    memcpy(out, logits->data, sizeof(float) * logits->numel);
    tape_set_grad_enabled(prev);
    tape_reset();
}

TEST(agent_biases_kept_for_inference_follow_their_parameters) {
    model_config mc;
    registry_config(&mc, "agent_deit_t", "{\"model\": {\"num_classes\": 5, \"embed_dim\": [24], \"depths\": [2]}}");
    model *m = model_create(&mc, 1);
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    tensor *x = RANDN(&r, 1, 1, mc.img_size, mc.img_size, mc.in_chans);
    float with_grad[5], built[5], kept[5], changed[5], changed_with_grad[5];
    logits_of(m, x, true, with_grad);
    logits_of(m, x, false, built); /* builds the cache */
    logits_of(m, x, false, kept);  /* reads it */
    EXPECT(!memcmp(with_grad, built, sizeof(built)) && !memcmp(built, kept, sizeof(kept)),
           "logits with the kept biases differ: %g vs %g vs %g", with_grad[0], built[0], kept[0]);
    tensor *an_bias = NULL;
    for (int p = 0; p < m->ps.n; p++)
        if (!strcmp(m->ps.params[p]->name, "blocks.1.attn.an_bias")) an_bias = m->ps.params[p];
    EXPECT(an_bias, "agent_deit_t has no blocks.1.attn.an_bias");
    for (int64_t j = 0; j < an_bias->numel; j++) an_bias->data[j] += 0.5f * (j % 3);
    logits_of(m, x, false, changed);
    logits_of(m, x, true, changed_with_grad);
    EXPECT(memcmp(changed, kept, sizeof(kept)), "the logits ignored a change of an_bias");
    EXPECT(!memcmp(changed, changed_with_grad, sizeof(changed)),
           "kept biases were not rebuilt after an_bias changed: %g vs %g", changed[0], changed_with_grad[0]);
    model_free(m);
    arena_reset(&vitc_arena);
}

TEST(models_config_errors_name_the_json_path) {
    model_config mc;
    EXPECT_ERROR(registry_config(&mc, "agent_deit_t", "{\"model\": {\"agent_num\": [50]}}"),
                 "model.agent_num[0]: 50 is not a perfect square");
    registry_config(&mc, "agent_deit_t", "{\"model\": {\"img_size\": 32, \"patch_size\": 8}}");
    EXPECT_ERROR(model_create(&mc, 0), "model.agent_num[0]: 49 agents pool to 7x7, larger than the 4x4");
    EXPECT_ERROR(registry_config(&mc, "deit_t", "{\"model\": {\"attn\": [\"agent\", \"native\"]}}"),
                 "model.attn: expected 1 entries (one per stage)");
    EXPECT_ERROR(registry_config(&mc, "deit_t", "{\"model\": {\"attn\": [[\"agent\"]]}}"),
                 "model.attn[0]: expected 12 names (one per block of stage 0), got 1");
    registry_config(&mc, "swin_t", "{\"model\": {\"window\": [5, 7, 7, 7]}}");
    EXPECT_ERROR(model_create(&mc, 0), "model.window[0]: window 5 does not divide the 56x56 map of stage 0");
    registry_config(&mc, "cswin_t", "{\"model\": {\"split_size\": [1, 3, 7, 7]}}");
    EXPECT_ERROR(model_create(&mc, 0), "model.split_size[1]: stripe width 3 does not divide the 28x28 map");
    registry_config(&mc, "elfatt_swin_t", "{\"model\": {\"block_size\": [3, 2, 1, 1]}}");
    EXPECT_ERROR(model_create(&mc, 0), "model.block_size[0]: 3 blocks per side do not tile the 56x56 grid");
    registry_config(&mc, "deit_t", "{\"model\": {\"patch_size\": 15}}");
    EXPECT_ERROR(model_create(&mc, 0), "model.patch_size: 15 does not divide img_size 224");
}

/* fvcore-style MACs at 224² (the official counts quoted by the model issue), within 2% */
TEST(models_macs_match_the_official_counts) {
    const struct {
        const char *name;
        double gmacs;
    } counts[] = {{"agent_deit_t", 1.168}, {"agent_swin_t", 4.499}, {"agent_pvt_t", 1.986},
                  {"agent_cswin_t", 4.292}, {"flatten_swin_t", 4.483}, {"deit_t", 1.254},
                  /* ELFATT README (nFA column, no official code): 4.99G and 4.44G */
                  {"elfatt_swin_t", 4.99},  {"elfatt_cswin_t", 4.44}};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        model_config mc;
        registry_config(&mc, counts[i].name, NULL);
        model *m = model_create(&mc, 0);
        double g = model_macs(m) / 1e9;
        printf("    %-16s %.4f GMACs (official %.3f, %+.2f%%)\n", counts[i].name, g, counts[i].gmacs,
               100 * (g / counts[i].gmacs - 1));
        EXPECT(fabs(g / counts[i].gmacs - 1) < 0.02, "%s: %.4f GMACs vs %.3f", counts[i].name, g, counts[i].gmacs);
        model_free(m);
        arena_reset(&vitc_arena);
    }
}

/* DeiT's head reads the class token alone, so its last block runs the projection, norm2, the MLP
 * and the final norm on that row: (N - 1) rows of C (C + 2 H + 10) MACs fewer than every token's
 * (each norm counts 5 a value), whatever the attention */
TEST(deit_last_block_runs_its_projection_and_mlp_on_the_class_token) {
    const char *names[] = {"deit_t", "agent_deit_t", "flatten_deit_t"};
    for (int i = 0; i < 3; i++) {
        model_config mc;
        registry_config(&mc, names[i], NULL);
        model *m = model_create(&mc, 0);
        model_macs(m); /* (agent attention builds its biases once, at its first inference) */
        double every = model_macs(m);
        bool prev = tape_set_grad_enabled(false);
        tensor *x = tensor_zeros(4, (int[]){1, mc.img_size, mc.img_size, mc.in_chans});
        op_macs = 0;
        model_forward(m, x, &(forward_opts){.train = false});
        double cls_only = op_macs;
        tape_set_grad_enabled(prev);
        double N = 1 + (mc.img_size / mc.patch_size) * (mc.img_size / mc.patch_size),
               C = mc.embed_dim[0], H = C * mc.mlp_ratio[0];
        EXPECT(every - cls_only == (N - 1) * C * (C + 2 * H + 10), "%s: %.0f MACs fewer, want %.0f",
               names[i], every - cls_only, (N - 1) * C * (C + 2 * H + 10));
        model_free(m);
        arena_reset(&vitc_arena);
    }
}

/* every JSON file in configs/ (the paper models, the demo) resolves and validates every section; its
 * model either is a registered one (run at a tiny size by the registry test above) or describes its
 * own architecture, which then builds */
#include <dirent.h>

#include "../src/train/trainer.h"

TEST(models_every_config_file_resolves_and_validates) {
    DIR *dir = opendir("configs");
    EXPECT(dir, "no configs/ folder");
    struct dirent *e;
    int checked = 0;
    while ((e = readdir(dir))) {
        if (!strstr(e->d_name, ".json")) continue;
        char path[512];
        snprintf(path, sizeof(path), "configs/%s", e->d_name);
        const char *files[1] = {path};
        config c;
        config_init(&c);
        model_config_load(&c, files, 1, NULL, 0);
        /* the SiT and DiT paper configs describe the VAE's 4-channel latents: --summary only,
         * training them refuses the channels (no VAE here) */
        const char *arch = config_str(&c, "model.arch", "", NULL);
        bool latents = (!strcmp(arch, "sit") || !strcmp(arch, "dit")) && config_int(&c, "model.in_chans", 3, 1, 64) == 4;
        if (latents) EXPECT_ERROR(train_check_config(&c), "images decode to 1 (gray) or 3 (RGB) channels, got 4");
        else train_check_config(&c);
        model_config mc;
        model_config_read(&mc, &c);
        if (!model_registry_defaults(mc.name)) {
            param_store ps;
            model_declare(&mc, &ps);
            EXPECT(ps.numel > 0, "%s declares no parameters", path);
            params_free(&ps);
        }
        config_free(&c);
        checked++;
    }
    closedir(dir);
    EXPECT(checked >= 69, "only %d config files", checked);
}

TEST(models_inference_that_frees_each_block_matches_the_taped_forward) {
    /* grad mode off, each block's activations are released as it ends (tensor_keep); with tiny
     * arena chunks every block spills past its mark, the path where the kept output must move
     * (pvt_v2_b0's, whose MLP ends in op_residual_linear: the others' block outputs take their
     * inputs' storage, op_mlp_residual's into). Two threads: the kernels' scratch grows with the
     * threads, and at these tiny sizes 16 threads' outweigh the activations this test is about */
    vitc_set_threads(2);
    const char *names[] = {"agent_deit_t", "agent_swin_t", "agent_pvt_t", "elfatt_cswin_t",
                           "pvt_v2_b0"};
    for (int i = 0; i < 5; i++) {
        model_config mc;
        registry_config_narrow(&mc, names[i], 5);
        model *m = model_create(&mc, 1);
        rng r;
        rng_seed(&r, 5, RNG_TEST);
        tensor *x = RANDN(&r, 1, 2, mc.img_size, mc.img_size, mc.in_chans);
        forward_opts fo = {.train = false};
        float taped[10];
        memcpy(taped, model_forward(m, x, &fo)->data, sizeof(taped));
        size_t taped_bytes = vitc_arena.used;
        tape_reset();
        int shape[4] = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]};
        float *pixels = xmalloc(sizeof(float) * (size_t)x->numel);
        memcpy(pixels, x->data, sizeof(float) * (size_t)x->numel);
        arena_free(&vitc_arena);
        size_t chunk = vitc_arena.chunk_bytes;
        vitc_arena.chunk_bytes = 4096;
        vitc_arena.peak = 0;
        bool was = tape_set_grad_enabled(false);
        x = tensor_wrap(pixels, 4, shape);
        tensor *logits = model_forward(m, x, &fo);
        double worst = 0;
        for (int j = 0; j < 10; j++) worst = max_error(worst, fabs(logits->data[j] - taped[j]));
        EXPECT(worst <= 1e-6 * (1 + fabs(taped[0])), "%s: freed inference differs from the taped forward by %g",
               names[i], worst);
        EXPECT(vitc_arena.peak < taped_bytes / 2, "%s: freed inference peaked at %zu bytes, the taped forward "
               "held %zu", names[i], vitc_arena.peak, taped_bytes);
        tape_set_grad_enabled(was);
        arena_free(&vitc_arena);
        vitc_arena.chunk_bytes = chunk;
        free(pixels);
        model_free(m);
    }
}

/* The branch of a sample that drop path keeps does not depend on the other samples of the batch:
 * where a draw keeps some of a batch's samples and drops others, the branch runs on the kept ones
 * alone (drop_path_kept). A batch of 4 must give each sample's logits, and the sum of the four
 * samples' parameter gradients, that the sample alone gives when it draws the same masks (the
 * same stream, first_sample its index); alone, a sample is kept or dropped whole. The batch's
 * fewer multiply-accumulates show that its branches did run on kept samples alone. */
static void expect_branches_on_the_kept_samples(bool bf16) {
    /* bf16: the operands round alike, a product of other rows sums them in another order */
    double tol = bf16 ? 2e-2 : 1e-4;
    const char *names[] = {"agent_deit_t", "swin_t",    "agent_swin_t",   "flatten_swin_t",
                           "agent_pvt_t",  "pvt_v2_b0", "elfatt_cswin_t", "flatten_cswin_t"};
    enum { B = 4, CLASSES = 3, MODELS = sizeof(names) / sizeof(names[0]) };
    for (int i = 0; i < MODELS; i++) {
        model_config mc;
        registry_config_narrow(&mc, names[i], CLASSES);
        mc.drop_path = 0.5;
        model *m = model_create(&mc, 1);
        rng r;
        rng_seed(&r, 7, RNG_TEST);
        tensor *x = RANDN(&r, 1, B, mc.img_size, mc.img_size, mc.in_chans);
        float seed[B * CLASSES], batch_logits[B * CLASSES];
        for (int j = 0; j < B * CLASSES; j++) seed[j] = (float)rng_normal(&r);
        int64_t n_grad = 0;
        for (int p = 0; p < m->ps.n; p++) n_grad += m->ps.params[p]->numel;
        float *batch_grad = xmalloc(sizeof(float) * (size_t)n_grad);
        double macs[2] = {0, 0}; /* the batch's, the four samples' alone */
        for (int alone = 0; alone < 2; alone++) {
            params_zero_grad(&m->ps);
            for (int k = 0; k < (alone ? B : 1); k++) {
                rng drops;
                rng_seed(&drops, 11, RNG_TEST);
                drops.first_sample = alone ? k : 0;
                int n = alone ? 1 : B, per = (int)(x->numel / B);
                tensor *xs = tensor_wrap(x->data + (alone ? k * per : 0), 4,
                                         (int[]){n, mc.img_size, mc.img_size, mc.in_chans});
                forward_opts fo = {.train = true, .rng = &drops};
                op_macs = 0;
                tensor *logits = model_forward(m, xs, &fo);
                macs[alone] += op_macs;
                if (!alone) {
                    memcpy(batch_logits, logits->data, sizeof(batch_logits));
                } else {
                    double worst = 0;
                    for (int c = 0; c < CLASSES; c++)
                        worst =
                            max_error(worst, fabs(logits->data[c] - batch_logits[k * CLASSES + c]));
                    EXPECT(worst < tol,
                           "%s: sample %d's logits alone differ from the batch's by %g", names[i],
                           k, worst);
                }
                tape_backward_from(logits, seed + (alone ? k * CLASSES : 0));
                tape_reset();
            }
            for (int p = 0, at = 0; p < m->ps.n; at += (int)m->ps.params[p]->numel, p++) {
                const tensor *t = m->ps.params[p];
                if (!alone) {
                    memcpy(batch_grad + at, t->grad, sizeof(float) * (size_t)t->numel);
                    continue;
                }
                double e = rel_l2(t->grad, batch_grad + at, t->numel);
                EXPECT(e < tol,
                       "%s: %s's gradient summed over the samples alone differs from the "
                       "batch's by %g",
                       names[i], t->name, e);
            }
        }
        EXPECT(macs[0] < macs[1],
               "%s: the batch ran %g MACs, its samples alone %g: no branch ran on "
               "kept samples alone",
               names[i], macs[0], macs[1]);
        free(batch_grad);
        model_free(m);
        arena_reset(&vitc_arena);
    }
}

TEST(models_branches_run_on_the_samples_drop_path_keeps) {
    expect_branches_on_the_kept_samples(false);
}

TEST(models_branches_run_on_the_samples_drop_path_keeps_in_bf16) {
    if (cpu_bf16_error()) SKIP("this CPU lacks AVX512_BF16 (vdpbf16ps)");
    vitc_set_precision(PRECISION_BF16, NULL);
    expect_branches_on_the_kept_samples(true);
    vitc_set_precision(PRECISION_FP32, NULL);
}
