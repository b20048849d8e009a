/* tools/convert_pth.py on checkpoints written as the official repos write them (tools/ref/official_pth.py:
 * weights beside optimizer state and a pickled config object whose class cannot be imported), in
 * torch.save's zip and legacy formats, run by a python3 that cannot import torch or numpy (-S: no
 * site-packages): the same tensors as the converter's output from a plain state_dict, strided, half
 * and bfloat16 tensors right, ImageNet names for a 1000-class head, clear errors. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "../src/core/safetensors.h"
#include "shell.h"
#include "test.h"

#define CONVERT "python3 -S tools/convert_pth.py"

static bool have_python3(void) {
    char out[256];
    return run(out, sizeof(out), "command -v python3") == 0;
}

/* every tensor of want is in got with the same shape and bits */
static void expect_same_tensors(const st_file *want, const st_file *got, const char *what) {
    for (int i = 0; i < want->n; i++) {
        const st_entry *w = &want->entries[i], *g = st_find(got, w->name);
        EXPECT(g && g->ndim == w->ndim && g->nbytes == w->nbytes && !memcmp(g->data, w->data, w->nbytes),
               "%s: %s differs from the plain state_dict's conversion", what, w->name);
    }
}

static void expect_values(const st_file *f, const char *name, const float *want, int n, const char *what) {
    const st_entry *e = st_find(f, name);
    EXPECT(e && e->numel == n, "%s: %s missing or of %lld values", what, name, e ? (long long)e->numel : -1LL);
    float got[16];
    st_to_f32(e, got);
    for (int i = 0; i < n; i++) EXPECT(got[i] == want[i], "%s: %s[%d] = %g, want %g", what, name, i, got[i], want[i]);
}

TEST(convert_pth_reads_official_checkpoints_without_torch) {
    if (!have_python3()) SKIP("needs python3 on PATH");
    const char *formats[] = {"zip", "legacy"};
    char out[16384], err[1024], path[128];
    st_file want;
    EXPECT(st_read(&want, "tests/fixtures/converted_swin_agent.safetensors", err, sizeof(err)), "%s", err);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof(path), "/tmp/vitc_convert_%d_%s.safetensors", (int)getpid(), formats[k]);
        int code = run(out, sizeof(out), CONVERT " tests/fixtures/official_swin_agent_%s.pth %s "
                       "--config configs/tiny/swin_agent.json", formats[k], path);
        EXPECT(code == 0, "%s: exit %d:\n%s", formats[k], code, out);
        st_file got;
        EXPECT(st_read(&got, path, err, sizeof(err)), "%s", err);
        remove(path);
        expect_same_tensors(&want, &got, formats[k]);
        /* base = arange(20).reshape(4, 5); strided = base[1:, 1:4].t() */
        const float strided[] = {6, 11, 16, 7, 12, 17, 8, 13, 18}, half[] = {0.5f, -1.25f, 3.0f, 65504.0f},
                    bf16[] = {1.0f, -2.5f, 3.140625f};
        expect_values(&got, "check.strided", strided, 9, formats[k]);
        expect_values(&got, "check.half", half, 4, formats[k]);
        expect_values(&got, "check.bfloat16", bf16, 3, formats[k]);
        EXPECT(!st_meta(&got, "classes"), "%s: a 4-class head gets no ImageNet names", formats[k]);
        st_close(&got);
    }
    st_close(&want);
}

TEST(convert_pth_names_imagenet_classes_and_its_errors) {
    if (!have_python3()) SKIP("needs python3 on PATH");
    char out[16384], err[1024], path[128], bad[128];
    snprintf(path, sizeof(path), "/tmp/vitc_convert_%d.safetensors", (int)getpid());
    int code = run(out, sizeof(out), CONVERT " tests/fixtures/official_swin_agent_zip.pth %s --model agent_swin_t "
                   "--set num_classes=1000", path);
    EXPECT(code == 0, "exit %d:\n%s", code, out);
    st_file f;
    EXPECT(st_read(&f, path, err, sizeof(err)), "%s", err);
    const char *classes = st_meta(&f, "classes");
    EXPECT(classes && !strncmp(classes, "[\"tench\", \"goldfish\", \"great white shark\"", 40) &&
               strstr(classes, "\"tabby\"") && strstr(classes, "\"toilet tissue\"]"),
           "ImageNet names in class-index order: %.120s", classes ? classes : "(none)");
    st_close(&f);
    remove(path);
    code = run(out, sizeof(out), CONVERT " tests/fixtures/official_swin_agent_zip.pth %s --model agent_swin_t --ema",
               path);
    EXPECT(code != 0 && strstr(out, "error: tests/fixtures/official_swin_agent_zip.pth: --ema given but the "
                                   "checkpoint has no 'state_dict_ema' (nor 'model_ema', nor 'ema')") &&
               !strstr(out, "Traceback"), "exit %d:\n%s", code, out);
    /* the EMA weights under each name the official training scripts give them, before 'model' */
    const char *ema_keys[] = {"state_dict_ema", "model_ema", "ema"};
    for (int i = 0; i < 3; i++) {
        code = run(out, sizeof(out),
                   "python3 -S -c \"import sys; sys.path.insert(0, 'tools'); import convert_pth; "
                   "print(convert_pth.state_dict_of({'model': {'w': 1}, '%s': {'w': 2}}, True))\"",
                   ema_keys[i]);
        EXPECT(code == 0 && strstr(out, "{'w': 2}"), "%s: exit %d:\n%s", ema_keys[i], code, out);
    }
    snprintf(bad, sizeof(bad), "/tmp/vitc_convert_%d.pth", (int)getpid());
    FILE *b = fopen(bad, "w");
    fprintf(b, "not a checkpoint\n");
    fclose(b);
    code = run(out, sizeof(out), CONVERT " %s %s --model agent_swin_t", bad, path);
    remove(bad);
    EXPECT(code != 0 && strstr(out, "error: ") && strstr(out, bad) && strstr(out, "not a readable PyTorch checkpoint") &&
               !strstr(out, "Traceback"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), CONVERT " /nonexistent.pth %s --model agent_swin_t", path);
    EXPECT(code != 0 && strstr(out, "error: /nonexistent.pth: no such file"), "exit %d:\n%s", code, out);
    /* a download cut short: the legacy format ends inside the tensor data, the zip loses its directory */
    const char *cut[] = {"legacy", "zip"}, *why[] = {"truncated: the file ends inside its tensor data",
                                                     "a zip archive that cannot be read"};
    for (int k = 0; k < 2; k++) {
        code = run(out, sizeof(out), "head -c 150000 tests/fixtures/official_swin_agent_%s.pth > %s && " CONVERT
                   " %s %s --model agent_swin_t", cut[k], bad, bad, path);
        EXPECT(code != 0 && strstr(out, bad) && strstr(out, why[k]) && !strstr(out, "Traceback"),
               "%s cut short: exit %d:\n%s", cut[k], code, out);
    }
    remove(bad);
}
