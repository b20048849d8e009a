/* config: precedence, typed getters, resolved tree, and errors naming the JSON path. */
#include <cjson/cJSON.h>

#include "../models/model.h"
#include "../src/core/config.h"
#include "../src/train/trainer.h"
#include "test.h"

TEST(config_precedence_and_resolved_defaults) {
    config c;
    config_init(&c);
    config_merge_text(&c, "{\"model\": {\"name\": \"deit_t\", \"img_size\": 224, \"depths\": [2, 2]}}",
                      "registry");
    config_merge_text(&c, "{\"model\": {\"img_size\": 32}, \"train\": {\"lr\": 0.001}}", "file.json");
    config_set(&c, "train.lr=0.002");
    config_set(&c, "model.attn=agent");
    EXPECT(strcmp(config_str(&c, "model.name", NULL, NULL), "deit_t") == 0, "name");
    EXPECT(config_int(&c, "model.img_size", 0, 1, 4096) == 32, "file overrides registry");
    EXPECT(config_float(&c, "train.lr", 0, 0, 1) == 0.002, "--set overrides the file");
    EXPECT(strcmp(config_str(&c, "model.attn", NULL, NULL), "agent") == 0, "plain string --set");
    int depths[2];
    config_int_array(&c, "model.depths", 2, NULL, depths, 1, 100);
    EXPECT(depths[0] == 2 && depths[1] == 2, "depths");
    int windows[2];
    config_int_array(&c, "model.window", 2, (int[]){7, 7}, windows, 1, 100);
    EXPECT(config_int(&c, "train.epochs", 300, 1, 100000) == 300, "built-in default");
    config_check_unknown(&c);
    char *json = config_to_json(&c);
    EXPECT(strstr(json, "\"epochs\":\t300") && strstr(json, "\"window\":\t[7, 7]"), "resolved: %s", json);
    free(json);
    config_free(&c);
}

TEST(config_errors_name_the_path) {
    config c;
    config_init(&c);
    config_merge_text(&c,
                      "{\"model\": {\"img_size\": \"big\", \"agent_num\": [9, 16], \"attn\": \"fast\","
                      " \"colour\": 1}, \"train\": {\"lr\": -1, \"batch\": 0}}",
                      "x.json");
    EXPECT_ERROR(config_int(&c, "model.img_size", 0, 1, 4096), "model.img_size: expected an integer");
    int an[4];
    EXPECT_ERROR(config_int_array(&c, "model.agent_num", 4, NULL, an, 1, 1000),
                 "model.agent_num: expected 4 integers (one per stage), got 2");
    EXPECT_ERROR(config_str(&c, "model.attn", NULL, (const char *const[]){"native", "agent", NULL}),
                 "model.attn: unknown value \"fast\" (valid: native, agent)");
    EXPECT_ERROR(config_float(&c, "train.lr", 0, 0, 10), "train.lr: -1 is out of range");
    EXPECT_ERROR(config_int(&c, "train.batch", 1, 1, 1 << 20), "train.batch: 0 is out of range");
    EXPECT_ERROR(config_check_unknown(&c), "model.colour: unknown key (valid keys in model: img_size");
    EXPECT_ERROR(config_merge_text(&c, "{\"a\": 1,\n \"b\": }", "bad.json"), "bad.json: invalid JSON near line 2");
    EXPECT_ERROR(config_merge_file(&c, "/nonexistent/x.json"), "cannot read config file /nonexistent/x.json: No such file");
    EXPECT_ERROR(config_merge_file(&c, "/tmp"), "cannot read config file /tmp: is a directory");
    EXPECT_ERROR(config_set(&c, "novalue"), "expected key=value");
    /* a parser stops after the first value: text after it was dropped in silence (train.epochs=2x
     * trained 2 epochs, a second object in a file was never read) */
    EXPECT_ERROR(config_merge_text(&c, "{\"a\": 1}\n{\"a\": 2}\n", "two.json"),
                 "two.json: text after the JSON value, at line 2: '{\"a\": 2}'");
    config_merge_text(&c, "{\"train\": {\"epochs\": 3}}\n \n", "spaces.json");
    config_set(&c, "train.epochs=2x");
    EXPECT_ERROR(config_int(&c, "train.epochs", 1, 1, 100),
                 "train.epochs: expected an integer, got \"2x\"");
    config_set(&c, "model.embed_dim=[24]]");
    int dims[1];
    EXPECT_ERROR(config_int_array(&c, "model.embed_dim", 1, NULL, dims, 1, 4096),
                 "model.embed_dim: expected an array of 1 integers, got \"[24]]\"");
    config_set(&c, "train.epochs= 2 ");
    EXPECT(config_int(&c, "train.epochs", 1, 1, 100) == 2, "spaces around a value are JSON's");
    config_free(&c);
}

TEST(config_closest_is_a_typo_or_nothing) {
    const char *keys[] = {"model", "data", "aug", "train", "ema", "run"};
    EXPECT(config_closest("trian", keys, 6) == keys[3], "two letters swapped");
    EXPECT(config_closest("dta", keys, 6) == keys[1], "a letter left out");
    EXPECT(config_closest("colour", keys, 6) == NULL, "no key is near colour");
    const char *configs[] = {"agent_swin_s", "agent_swin_t", "swin_t", "tiny/"};
    EXPECT(config_closest("agent_swn_t", configs, 4) == configs[1], "agent_swn_t");
    EXPECT(config_closest("x", configs, 0) == NULL, "nothing to choose from");
}

/* the case: a misspelt key in a file that also lacks data.train; the typo is often why a
 * required key looks missing, so it is named first, with the key it probably meant */
TEST(config_typo_is_named_before_a_missing_key) {
    config c;
    config_init(&c);
    model_config_load_text(&c, "{\"model\": {\"name\": \"deit_t\", \"embed_dimm\": 3}}", "x.json");
    EXPECT_ERROR(train_check_config(&c), "model.embed_dimm: unknown key; did you mean embed_dim? (valid keys in model:");
    config_free(&c);
    config_init(&c);
    model_config_load_text(&c, "{\"model\": {\"name\": \"deit_t\"}}", "x.json");
    EXPECT_ERROR(train_check_config(&c), "data.train: required key is missing");
    config_free(&c);
}
