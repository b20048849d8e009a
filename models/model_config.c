/* The model section of a config: registry defaults, reading and cross-checking every key. */
#include <cjson/cJSON.h>
#include <string.h>

#include "../src/core/check.h"
#include "model.h"

static const char *const arch_names[] = {"deit", "pvt", "pvt_v2", "swin", "cswin", "sit", "dit",
                                         NULL};

/* registry defaults of model.name under c, unless the config describes its own model (model.arch) */
static void merge_registry(config *c, const config *user) {
    cJSON *section = cJSON_GetObjectItemCaseSensitive(user->root, "model");
    cJSON *name = cJSON_GetObjectItemCaseSensitive(section, "name");
    if (!name || cJSON_GetObjectItemCaseSensitive(section, "arch")) return;
    if (!cJSON_IsString(name)) config_error("model.name", "expected a string");
    const char *defaults = model_registry_defaults(name->valuestring);
    if (!defaults) {
        char valid[4096] = "";
        for (int i = 0; i < model_registry_count(); i++)
            snprintf(valid + strlen(valid), sizeof(valid) - strlen(valid), "%s%s", i ? ", " : "",
                     model_registry_name(i));
        config_error("model.name", "unknown model \"%s\" (valid: %s)", name->valuestring, valid);
    }
    char wrapped[8192];
    snprintf(wrapped, sizeof(wrapped), "{\"model\": %s}", defaults);
    config_merge_text(c, wrapped, name->valuestring);
}

void model_config_load_text(config *c, const char *json, const char *source) {
    config user;
    config_init(&user);
    config_merge_text(&user, json, source);
    merge_registry(c, &user);
    config_free(&user);
    config_merge_text(c, json, source);
}

void model_config_load(config *c, const char *const *files, int n_files, const char *const *sets,
                       int n_sets) {
    /* the model name may come from any layer: read it from a scratch merge of the user's layers */
    config user;
    config_init(&user);
    for (int i = 0; i < n_files; i++) config_merge_file(&user, files[i]);
    for (int i = 0; i < n_sets; i++) config_set(&user, sets[i]);
    merge_registry(c, &user);
    config_free(&user);
    for (int i = 0; i < n_files; i++) config_merge_file(c, files[i]);
    for (int i = 0; i < n_sets; i++) config_set(c, sets[i]);
}

static attn_kind attn_kind_of(const char *path, const cJSON *v) {
    if (!cJSON_IsString(v)) config_error(path, "expected an attention name, got a non-string");
    for (int k = 0; attn_names[k]; k++)
        if (strcmp(v->valuestring, attn_names[k]) == 0) return (attn_kind)k;
    /* Attention Mediators' AttentionWithMediators is agent attention with agents renamed */
    if (strcmp(v->valuestring, "mediator") == 0) return ATTN_AGENT;
    config_error(path, "unknown attention \"%s\" (valid: native, agent, flatten, elfatt, mediator)",
                 v->valuestring);
}

/* model.attn: one name for all blocks, or per stage a name or an array with one name per block */
static void read_attn(model_config *mc, config *c) {
    cJSON *v = config_node(c, "model.attn");
    if (!v) {
        cJSON *arr = cJSON_CreateArray();
        for (int s = 0; s < mc->n_stages; s++) cJSON_AddItemToArray(arr, cJSON_CreateString("native"));
        cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(c->root, "model"), "attn", arr);
        v = arr;
    }
    if (cJSON_IsString(v)) {
        attn_kind k = attn_kind_of("model.attn", v);
        for (int s = 0; s < mc->n_stages; s++)
            for (int j = 0; j < mc->depths[s]; j++) mc->attn[s][j] = k;
        return;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != mc->n_stages)
        config_error("model.attn", "expected %d entries (one per stage)", mc->n_stages);
    for (int s = 0; s < mc->n_stages; s++) {
        cJSON *e = cJSON_GetArrayItem(v, s);
        char path[64];
        snprintf(path, sizeof(path), "model.attn[%d]", s);
        if (cJSON_IsArray(e)) {
            if (cJSON_GetArraySize(e) != mc->depths[s])
                config_error(path, "expected %d names (one per block of stage %d), got %d",
                             mc->depths[s], s, cJSON_GetArraySize(e));
            for (int j = 0; j < mc->depths[s]; j++) {
                snprintf(path, sizeof(path), "model.attn[%d][%d]", s, j);
                mc->attn[s][j] = attn_kind_of(path, cJSON_GetArrayItem(e, j));
            }
        } else {
            attn_kind k = attn_kind_of(path, e);
            for (int j = 0; j < mc->depths[s]; j++) mc->attn[s][j] = k;
        }
    }
}

void model_config_read(model_config *mc, config *c) {
    memset(mc, 0, sizeof(*mc));
    snprintf(mc->name, sizeof(mc->name), "%s", config_str(c, "model.name", "custom", NULL));
    snprintf(mc->arch, sizeof(mc->arch), "%s", config_str(c, "model.arch", NULL, arch_names));
    mc->img_size = config_int(c, "model.img_size", 224, 8, 4096);
    mc->in_chans = config_int(c, "model.in_chans", 3, 1, 4);
    mc->num_classes = config_int(c, "model.num_classes", 1000, 1, 1000000);
    mc->patch_size = config_int(c, "model.patch_size", 4, 1, 64);
    cJSON *depths = config_node(c, "model.depths");
    if (!cJSON_IsArray(depths) || cJSON_GetArraySize(depths) < 1 ||
        cJSON_GetArraySize(depths) > MAX_STAGES)
        config_error("model.depths", "expected an array of 1 to %d block counts", MAX_STAGES);
    int S = mc->n_stages = cJSON_GetArraySize(depths);
    config_int_array(c, "model.depths", S, NULL, mc->depths, 1, MAX_STAGE_BLOCKS);
    config_int_array(c, "model.embed_dim", S, NULL, mc->embed_dim, 1, 65536);
    config_int_array(c, "model.num_heads", S, NULL, mc->num_heads, 1, 1024);
    double four[MAX_STAGES] = {4, 4, 4, 4};
    config_float_array(c, "model.mlp_ratio", S, four, mc->mlp_ratio, 0.01, 64);
    read_attn(mc, c);
    int ones[MAX_STAGES] = {1, 1, 1, 1}, zeros[MAX_STAGES] = {0}, agents[MAX_STAGES] = {49, 49, 49, 49};
    int sevens[MAX_STAGES] = {7, 7, 7, 7};
    config_int_array(c, "model.agent_num", S, agents, mc->agent_num, 1, 4096);
    config_int_array(c, "model.window", S, sevens, mc->window, 1, 1024);
    config_int_array(c, "model.attn_window", S, zeros, mc->attn_window, 0, 1024);
    config_int_array(c, "model.split_size", S, sevens, mc->split_size, 1, 1024);
    config_int_array(c, "model.sr_ratio", S, ones, mc->sr_ratio, 1, 64);
    config_int_array(c, "model.block_size", S, ones, mc->block_size, 1, 1024);
    mc->focusing_factor = config_float(c, "model.focusing_factor", 3, 0.1, 100);
    mc->dwc_kernel = config_int(c, "model.dwc_kernel", 5, 1, 31);
    if (mc->dwc_kernel % 2 == 0)
        config_error("model.dwc_kernel", "must be odd, got %d", mc->dwc_kernel);
    mc->agent_bias = config_bool(c, "model.agent_bias", true);
    mc->dwc = config_bool(c, "model.dwc", true);
    mc->drop_path = config_float(c, "model.drop_path", 0.0, 0, 0.99);
    mc->drop_rate = config_float(c, "model.drop_rate", 0.0, 0, 0.99);
    mc->qkv_bias = config_bool(c, "model.qkv_bias", true);
    mc->unused_norm = config_bool(c, "model.unused_norm", false);
    snprintf(mc->merge, sizeof(mc->merge), "%s",
             config_str(c, "model.merge", "patch", (const char *const[]){"patch", "conv", NULL}));
    if (model_is_diffusion(mc)) { /* the official SiT (and DiT) defaults */
        mc->mediator_num = config_int(c, "model.mediator_num", 64, 1, 4096);
        mc->learn_sigma = config_bool(c, "model.learn_sigma", true);
        mc->class_dropout_prob = config_float(c, "model.class_dropout_prob", 0.1, 0, 1);
    }
    for (int s = 0; s < S; s++) {
        char path[64];
        snprintf(path, sizeof(path), "model.num_heads[%d]", s);
        if (mc->embed_dim[s] % mc->num_heads[s])
            config_error(path, "%d heads do not divide embed_dim %d", mc->num_heads[s],
                         mc->embed_dim[s]);
        int root = 0;
        while ((root + 1) * (root + 1) <= mc->agent_num[s]) root++;
        snprintf(path, sizeof(path), "model.agent_num[%d]", s);
        if (root * root != mc->agent_num[s])
            config_error(path, "%d is not a perfect square (agents are pooled on a p x p grid)",
                         mc->agent_num[s]);
    }
}
