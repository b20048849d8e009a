/* Model registry: timm-style names and the model-section defaults they stand for (the official
 * repos' hyper-parameters). A config names a model and overrides any of these keys. */
#include <string.h>

#include "model.h"

#define DEIT(dim, heads) "\"arch\": \"deit\", \"patch_size\": 16, " \
    "\"embed_dim\": [" #dim "], \"depths\": [12], \"num_heads\": [" #heads "]"

static const struct {
    const char *name, *defaults;
} registry[] = {
    {"deit_t", "{" DEIT(192, 3) ", \"drop_path\": 0.1}"},
    {"deit_s", "{" DEIT(384, 6) ", \"drop_path\": 0.1}"},
    {"deit_b", "{" DEIT(768, 12) ", \"drop_path\": 0.1}"},
    {"agent_deit_t", "{" DEIT(192, 3) ", \"attn\": \"agent\", \"agent_num\": [49], \"drop_path\": 0.0}"},
    {"agent_deit_s", "{" DEIT(384, 6) ", \"attn\": \"agent\", \"agent_num\": [49], \"drop_path\": 0.1}"},
    {"agent_deit_s_448", "{" DEIT(384, 6) ", \"img_size\": 448, \"attn\": \"agent\", "
                         "\"agent_num\": [49], \"drop_path\": 0.1}"},
    {"agent_deit_b", "{" DEIT(768, 12) ", \"attn\": [[\"agent\", \"agent\", \"agent\", \"agent\", "
                     "\"native\", \"native\", \"native\", \"native\", \"native\", \"native\", "
                     "\"native\", \"native\"]], \"agent_num\": [81], \"drop_path\": 0.3}"},
    /* FLatten-DeiT is not in the official repo: flatten.md §3.5's proposal (FLA over all tokens, DWC on
     * the patch tokens) */
    {"flatten_deit_t", "{" DEIT(192, 3) ", \"attn\": \"flatten\", \"drop_path\": 0.0}"},
    {"flatten_deit_s", "{" DEIT(384, 6) ", \"attn\": \"flatten\", \"drop_path\": 0.1}"},
    {"flatten_deit_b", "{" DEIT(768, 12) ", \"attn\": \"flatten\", \"drop_path\": 0.1}"},
};

const char *model_registry_defaults(const char *name) {
    for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++)
        if (strcmp(registry[i].name, name) == 0) return registry[i].defaults;
    return NULL;
}

int model_registry_count(void) { return (int)(sizeof(registry) / sizeof(registry[0])); }

const char *model_registry_name(int i) { return registry[i].name; }
