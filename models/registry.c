/* Model registry: timm-style names and the model-section defaults they stand for (the official
 * repos' hyper-parameters). A config names a model and overrides any of these keys. */
#include <string.h>

#include "model.h"

#define DEIT(dim, heads) "\"arch\": \"deit\", \"patch_size\": 16, " \
    "\"embed_dim\": [" #dim "], \"depths\": [12], \"num_heads\": [" #heads "]"

#define SWIN_T "\"arch\": \"swin\", \"embed_dim\": [96, 192, 384, 768], \"depths\": [2, 2, 6, 2], " \
    "\"num_heads\": [3, 6, 12, 24]"
#define SWIN_S "\"arch\": \"swin\", \"embed_dim\": [96, 192, 384, 768], \"depths\": [2, 2, 18, 2], " \
    "\"num_heads\": [3, 6, 12, 24]"
#define SWIN_B "\"arch\": \"swin\", \"embed_dim\": [128, 256, 512, 1024], \"depths\": [2, 2, 18, 2], " \
    "\"num_heads\": [4, 8, 16, 32]"
#define AGENTS ", \"agent_num\": [9, 16, 49, 49]"
/* Agent-Swin-B: stage 3 has 2 agent blocks, then 16 native ones ("AAMB2") */
#define AGENT_SWIN_B_ATTN ", \"attn\": [\"agent\", \"agent\", [\"agent\", \"agent\"" \
    ", \"native\", \"native\", \"native\", \"native\", \"native\", \"native\", \"native\", \"native\"" \
    ", \"native\", \"native\", \"native\", \"native\", \"native\", \"native\", \"native\", \"native\"]" \
    ", \"native\"]"

#define PVT(arch, depths) "\"arch\": \"" arch "\", \"embed_dim\": [64, 128, 320, 512], " \
    "\"depths\": " depths ", \"num_heads\": [1, 2, 5, 8], \"mlp_ratio\": [8, 8, 4, 4], \"sr_ratio\": [8, 4, 2, 1]"
#define PVT_T "[2, 2, 2, 2]"
#define PVT_S "[3, 4, 6, 3]"
#define PVT_M "[3, 4, 18, 3]"
#define PVT_L "[3, 8, 27, 3]"
#define AGENT_PVT ", \"attn\": \"agent\", \"sr_ratio\": 1" AGENTS
#define FLATTEN_PVT ", \"attn\": \"flatten\", \"sr_ratio\": 1"

#define CSWIN(dims, depths, heads) "\"arch\": \"cswin\", \"embed_dim\": " dims ", \"depths\": " depths \
    ", \"num_heads\": " heads ", \"split_size\": [1, 2, 7, 7]"
#define CSWIN_HEADS_64 "[2, 4, 8, 16]"
#define CSWIN_HEADS_96 "[4, 8, 16, 32]"
#define AABB(kind) ", \"attn\": [\"" kind "\", \"" kind "\", \"native\", \"native\"]"

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
    {"swin_t", "{" SWIN_T ", \"drop_path\": 0.2}"},
    {"swin_s", "{" SWIN_S ", \"drop_path\": 0.3}"},
    {"swin_b", "{" SWIN_B ", \"drop_path\": 0.5}"},
    {"agent_swin_t", "{" SWIN_T AGENTS ", \"attn\": [\"agent\", \"agent\", \"agent\", \"native\"], \"drop_path\": 0.2}"},
    {"agent_swin_s", "{" SWIN_S AGENTS ", \"attn\": [\"agent\", \"agent\", \"native\", \"native\"], \"drop_path\": 0.3}"},
    {"agent_swin_s_288", "{" SWIN_S AGENTS ", \"attn\": [\"agent\", \"agent\", \"native\", \"native\"], "
                         "\"img_size\": 288, \"window\": 9, \"drop_path\": 0.3}"},
    {"agent_swin_b", "{" SWIN_B AGENTS AGENT_SWIN_B_ATTN ", \"drop_path\": 0.5}"},
    {"agent_swin_b_384", "{" SWIN_B AGENTS AGENT_SWIN_B_ATTN ", \"img_size\": 384, \"window\": 12, \"drop_path\": 0.5}"},
    {"flatten_swin_t", "{" SWIN_T ", \"attn\": [\"flatten\", \"flatten\", \"native\", \"native\"], \"drop_path\": 0.2}"},
    {"flatten_swin_s", "{" SWIN_S ", \"attn\": [\"flatten\", \"flatten\", \"native\", \"native\"], \"drop_path\": 0.3}"},
    {"flatten_swin_b", "{" SWIN_B ", \"attn\": [\"flatten\", \"flatten\", \"native\", \"native\"], \"drop_path\": 0.5}"},
    {"flatten_swin_b_384", "{" SWIN_B ", \"attn\": [\"flatten\", \"flatten\", \"native\", \"native\"], "
                           "\"img_size\": 384, \"window\": 12, \"drop_path\": 0.5}"},
    {"pvt_t", "{" PVT("pvt", PVT_T) ", \"drop_path\": 0.1}"},
    {"pvt_s", "{" PVT("pvt", PVT_S) ", \"drop_path\": 0.1}"},
    {"pvt_m", "{" PVT("pvt", PVT_M) ", \"drop_path\": 0.3}"},
    {"pvt_l", "{" PVT("pvt", PVT_L) ", \"drop_path\": 0.3}"},
    {"agent_pvt_t", "{" PVT("pvt", PVT_T) AGENT_PVT ", \"drop_path\": 0.1}"},
    {"agent_pvt_s", "{" PVT("pvt", PVT_S) AGENT_PVT ", \"drop_path\": 0.1}"},
    {"agent_pvt_m", "{" PVT("pvt", PVT_M) AGENT_PVT ", \"drop_path\": 0.3}"},
    {"agent_pvt_m_256", "{" PVT("pvt", PVT_M) AGENT_PVT ", \"img_size\": 256, \"drop_path\": 0.3}"},
    {"agent_pvt_l", "{" PVT("pvt", PVT_L) AGENT_PVT ", \"drop_path\": 0.3}"},
    {"flatten_pvt_t", "{" PVT("pvt", PVT_T) FLATTEN_PVT ", \"unused_norm\": true, \"drop_path\": 0.1}"},
    {"flatten_pvt_s", "{" PVT("pvt", PVT_S) FLATTEN_PVT ", \"unused_norm\": true, \"drop_path\": 0.1}"},
    {"flatten_pvt_m", "{" PVT("pvt", PVT_M) FLATTEN_PVT ", \"unused_norm\": true, \"drop_path\": 0.3}"},
    {"flatten_pvt_l", "{" PVT("pvt", PVT_L) FLATTEN_PVT ", \"unused_norm\": true, \"drop_path\": 0.3}"},
    {"pvt_v2_b0", "{" PVT("pvt_v2", PVT_T) ", \"embed_dim\": [32, 64, 160, 256], \"drop_path\": 0.1}"},
    {"pvt_v2_b1", "{" PVT("pvt_v2", PVT_T) ", \"drop_path\": 0.1}"},
    {"pvt_v2_b2", "{" PVT("pvt_v2", PVT_S) ", \"drop_path\": 0.1}"},
    {"pvt_v2_b3", "{" PVT("pvt_v2", PVT_M) ", \"drop_path\": 0.3}"},
    {"pvt_v2_b4", "{" PVT("pvt_v2", PVT_L) ", \"drop_path\": 0.3}"},
    {"flatten_pvt_v2_b0", "{" PVT("pvt_v2", PVT_T) FLATTEN_PVT ", \"embed_dim\": [32, 64, 160, 256], \"drop_path\": 0.1}"},
    {"flatten_pvt_v2_b1", "{" PVT("pvt_v2", PVT_T) FLATTEN_PVT ", \"drop_path\": 0.1}"},
    {"flatten_pvt_v2_b2", "{" PVT("pvt_v2", PVT_S) FLATTEN_PVT ", \"drop_path\": 0.1}"},
    {"flatten_pvt_v2_b3", "{" PVT("pvt_v2", PVT_M) FLATTEN_PVT ", \"drop_path\": 0.3}"},
    {"flatten_pvt_v2_b4", "{" PVT("pvt_v2", PVT_L) FLATTEN_PVT ", \"drop_path\": 0.3}"},
    /* the official CSWin depths; the Agent/FLatten variants move depth into stages 1-2 */
    {"cswin_t", "{" CSWIN("[64, 128, 256, 512]", "[1, 2, 21, 1]", CSWIN_HEADS_64) ", \"drop_path\": 0.2}"},
    {"cswin_s", "{" CSWIN("[64, 128, 256, 512]", "[2, 4, 32, 2]", CSWIN_HEADS_64) ", \"drop_path\": 0.4}"},
    {"cswin_b", "{" CSWIN("[96, 192, 384, 768]", "[2, 4, 32, 2]", CSWIN_HEADS_96) ", \"drop_path\": 0.5}"},
    {"agent_cswin_t", "{" CSWIN("[64, 128, 256, 512]", "[2, 4, 18, 1]", CSWIN_HEADS_64) AABB("agent") AGENTS ", \"drop_path\": 0.2}"},
    {"agent_cswin_s", "{" CSWIN("[64, 128, 256, 512]", "[3, 6, 29, 2]", CSWIN_HEADS_64) AABB("agent") AGENTS ", \"drop_path\": 0.4}"},
    {"agent_cswin_b", "{" CSWIN("[96, 192, 384, 768]", "[3, 6, 29, 2]", CSWIN_HEADS_96) AABB("agent") AGENTS ", \"drop_path\": 0.5}"},
    {"agent_cswin_b_384", "{" CSWIN("[96, 192, 384, 768]", "[3, 6, 29, 2]", CSWIN_HEADS_96) AABB("agent") AGENTS
                          ", \"img_size\": 384, \"split_size\": [1, 2, 12, 12], \"drop_path\": 0.7}"},
    {"flatten_cswin_t", "{" CSWIN("[64, 128, 256, 512]", "[2, 4, 18, 1]", CSWIN_HEADS_64) AABB("flatten") ", \"drop_path\": 0.2}"},
    {"flatten_cswin_s", "{" CSWIN("[64, 128, 256, 512]", "[2, 4, 32, 2]", CSWIN_HEADS_64) AABB("flatten") ", \"drop_path\": 0.4}"},
    {"flatten_cswin_b", "{" CSWIN("[96, 192, 384, 768]", "[3, 6, 29, 2]", CSWIN_HEADS_96) AABB("flatten") ", \"drop_path\": 0.5}"},
    {"flatten_cswin_b_384", "{" CSWIN("[96, 192, 384, 768]", "[3, 6, 29, 2]", CSWIN_HEADS_96) AABB("flatten")
                            ", \"img_size\": 384, \"split_size\": [1, 2, 12, 12], \"drop_path\": 0.7}"},
    /* ELFATT (no official code): every stage ELFATT with blocks per side (4, 2, 1, 1); Swin with
     * conv merging (elfatt.md §5.2); CSwin with the Agent/FLatten depths 2-4-18-1 (§9) */
    {"elfatt_swin_t", "{" SWIN_T ", \"attn\": \"elfatt\", \"block_size\": [4, 2, 1, 1], \"merge\": \"conv\", \"drop_path\": 0.2}"},
    {"elfatt_swin_b", "{" SWIN_B ", \"attn\": \"elfatt\", \"block_size\": [4, 2, 1, 1], \"merge\": \"conv\", \"drop_path\": 0.5}"},
    {"elfatt_cswin_t", "{" CSWIN("[64, 128, 256, 512]", "[2, 4, 18, 1]", CSWIN_HEADS_64) ", \"attn\": \"elfatt\", "
                       "\"block_size\": [4, 2, 1, 1], \"drop_path\": 0.2}"},
    {"elfatt_cswin_b", "{" CSWIN("[96, 192, 384, 768]", "[3, 6, 29, 2]", CSWIN_HEADS_96) ", \"attn\": \"elfatt\", "
                       "\"block_size\": [4, 2, 1, 1], \"drop_path\": 0.5}"},
};

const char *model_registry_defaults(const char *name) {
    for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++)
        if (strcmp(registry[i].name, name) == 0) return registry[i].defaults;
    return NULL;
}

int model_registry_count(void) { return (int)(sizeof(registry) / sizeof(registry[0])); }

const char *model_registry_name(int i) { return registry[i].name; }
