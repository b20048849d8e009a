/* tools/convert_pth.py output (a .pth of the reference Agent-Swin with official names and index
 * buffers) loads through the checkpoint path of `eval` with no missing or unexpected tensor, and its
 * logits match PyTorch's. */
#include "../models/model.h"
#include "../src/train/checkpoint.h"
#include "test.h"

TEST(converted_pytorch_checkpoint_loads_and_matches) {
    const char *path = "tests/fixtures/converted_swin_agent.safetensors";
    char err[4096], *cfg_text = NULL;
    st_file f, ref;
    EXPECT(checkpoint_open(&f, path, &cfg_text, err, sizeof(err)), "%s", err);
    EXPECT(st_read(&ref, "tests/fixtures/converted_swin_agent_logits.safetensors", err, sizeof(err)), "%s", err);
    config c;
    model *m = model_create_from_json(&c, cfg_text, path, 0);
    EXPECT(checkpoint_restore(&f, path, m, NULL, NULL, NULL, err, sizeof(err)), "%s", err);
    const st_entry *xe = st_find(&ref, "input"), *le = st_find(&ref, "logits");
    tensor *x = TENSOR((int)xe->shape[0], (int)xe->shape[1], (int)xe->shape[2], (int)xe->shape[3]);
    st_to_f32(xe, x->data);
    float want[64];
    st_to_f32(le, want);
    forward_opts fo = {.train = false};
    tape_set_grad_enabled(false);
    tensor *logits = model_forward(m, x, &fo);
    double num = 0, den = 0;
    for (int i = 0; i < logits->numel; i++) {
        num += (logits->data[i] - want[i]) * (double)(logits->data[i] - want[i]);
        den += (double)want[i] * want[i];
    }
    EXPECT(sqrt(num / den) < 1e-4, "logits rel err %.2e", sqrt(num / den));
    model_free(m);
    config_free(&c);
    st_close(&f);
    st_close(&ref);
    free(cfg_text);
}
