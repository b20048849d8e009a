/* Parity with the PyTorch reference (tools/ref/, fixtures written by `make parity`): for every tiny
 * config, the logits, the loss and every parameter gradient after one forward/backward must match
 * to 1e-4 relative (‖a−b‖/‖b‖). Loading the fixture's weights by name also proves the parameter
 * names and shapes equal the reference's (the official state_dict keys). */
#include <dirent.h>

#include "../models/grid_resample.h"
#include "../models/model.h"
#include "model_check.h"
#include "test.h"

#define FIXTURE_DIR "tests/fixtures/parity"
#define PARITY_TOL 1e-4

/* runs one fixture; returns false (after reporting) on any mismatch */
static bool check_fixture(const char *path) {
    char err[4096];
    st_file f;
    if (!st_read(&f, path, err, sizeof(err))) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    config c;
    model *m = model_create_from_json(&c, st_meta(&f, "config"), path, 0);
    bool ok = model_load_state(m, &f, "param/", err, sizeof(err));
    if (!ok) test_fail(__FILE__, __LINE__, "%s: state does not match the reference:\n%s", path, err);
    tensor *x = fixture_tensor(&f, path, "input");
    const st_entry *le = st_find(&f, "labels");
    int labels[64];
    float lf[64];
    st_to_f32(le, lf);
    for (int i = 0; i < le->numel; i++) labels[i] = (int)lf[i];
    forward_opts o = {.train = false};
    params_zero_grad(&m->ps);
    tensor *logits = model_forward(m, x, &o);
    tensor *loss = op_cross_entropy_labels(logits, labels, 0.0f);
    tape_backward(loss);
    const st_entry *ref_logits = st_find(&f, "logits"), *ref_loss = st_find(&f, "loss");
    float *ref = malloc(sizeof(float) * (size_t)ref_logits->numel);
    st_to_f32(ref_logits, ref);
    double e_logits = rel_l2(logits->data, ref, logits->numel);
    float ref_l;
    st_to_f32(ref_loss, &ref_l);
    double e_loss = fabs(loss->data[0] - ref_l) / fabs(ref_l);
    free(ref);
    if (e_logits > PARITY_TOL || e_loss > PARITY_TOL) {
        test_fail(__FILE__, __LINE__, "%s: logits rel err %.2e, loss %g vs %g", path, e_logits,
                  loss->data[0], ref_l);
        ok = false;
    }
    const char *worst_name = "";
    double worst = ok ? worst_grad_error(m, &f, path, &worst_name) : 0;
    if (worst > PARITY_TOL || worst != worst) {
        test_fail(__FILE__, __LINE__, "%s: gradient of %s rel err %.2e", path, worst_name, worst);
        ok = false;
    }
    printf("    %-28s logits %.1e  loss %.1e  worst grad %.1e (%s)\n", strrchr(path, '/') + 1,
           e_logits, e_loss, worst, worst_name);
    model_free(m);
    config_free(&c);
    st_close(&f);
    tape_reset();
    arena_reset(&vitc_arena);
    return ok;
}

TEST(parity_with_pytorch_reference) {
    DIR *dir = opendir(FIXTURE_DIR);
    if (!dir) SKIP("no fixtures in " FIXTURE_DIR " (run make parity)");
    char *names[256];
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(dir)) && n < 256)
        if (strstr(ent->d_name, ".safetensors")) names[n++] = strdup(ent->d_name);
    closedir(dir);
    EXPECT(n > 0, "no fixtures in " FIXTURE_DIR);
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof(path), FIXTURE_DIR "/%s", names[i]);
        check_fixture(path);
        free(names[i]);
    }
}

/* a position embedding's grid resized for another input size (train.init) as PyTorch's bicubic
 * F.interpolate, which the official fine-tuning uses: up (5x5 -> 8x8) and down (5x5 -> 3x3) */
/* each tensor of the fixture that the official fine-tuning resizes for another input size, found
 * by its official name, resized as they resize it (F.interpolate:
 * tools/ref/make_grid_resize_parity.py) */
TEST(parity_grid_resize_with_pytorch_interpolate) {
    const char *path = "tests/fixtures/grid_resize.safetensors";
    char err[512];
    st_file f;
    if (!st_read(&f, path, err, sizeof(err))) {
        test_fail(__FILE__, __LINE__, "%s (make parity writes it)", err);
        return;
    }
    /* the classifiers' scripts' resizes, then the Attention Mediators' (SiT's fine-tune) */
    const struct {
        const char *prefix;
        resize_style style;
        int tensors;
    } styles[] = {{"", RESIZE_AS_CLASSIFIERS, 9}, {"mediators.", RESIZE_AS_MEDIATORS, 4}};
    for (int k = 0; k < 2; k++) {
        int checked = 0;
        char from_prefix[32];
        snprintf(from_prefix, sizeof(from_prefix), "%sfrom:", styles[k].prefix);
        size_t skip = strlen(from_prefix);
        for (int i = 0; i < f.n; i++) {
            const st_entry *from = &f.entries[i], *to;
            if (strncmp(from->name, from_prefix, skip)) continue;
            const char *name = from->name + skip;
            char to_name[300];
            snprintf(to_name, sizeof(to_name), "%sto:%s", styles[k].prefix, name);
            to = st_find(&f, to_name);
            grid_resize r;
            bool planned =
                to && to->ndim == from->ndim &&
                grid_resize_plan(name, from->ndim, from->shape, to->shape, styles[k].style, &r);
            EXPECT(planned, "%s%s: not resized", styles[k].prefix, name);
            if (!planned) continue;
            float *src = xmalloc(sizeof(float) * (size_t)from->numel),
                  *want = xmalloc(sizeof(float) * (size_t)to->numel),
                  *got = xmalloc(sizeof(float) * (size_t)to->numel);
            st_to_f32(from, src), st_to_f32(to, want);
            grid_resize_apply(&r, src, got);
            double worst = 0;
            for (int64_t j = 0; j < to->numel; j++) worst = fmax(worst, fabs(got[j] - want[j]));
            EXPECT(worst < 1e-5, "%s%s: off by %.2e", styles[k].prefix, name, worst);
            free(src), free(want), free(got);
            checked++;
        }
        EXPECT(checked == styles[k].tensors, "%d resized tensors under \"%s\" in %s", checked,
               from_prefix, path);
    }
    /* other axes than the grid's differ: another model, not another grid; and SiT's fixed
     * pos_embed is not resized, the new model's own */
    grid_resize r;
    const int64_t agents4[] = {1, 2, 4, 7, 1}, agents9[] = {1, 2, 9, 12, 1},
                  grid12[] = {1, 2, 4, 12, 1}, tokens16[] = {1, 16, 8}, tokens64[] = {1, 64, 8};
    EXPECT(!grid_resize_plan("blocks.0.attn.ah_bias", 5, agents4, agents9, RESIZE_AS_CLASSIFIERS,
                             &r) &&
               !grid_resize_plan("blocks.0.attn.an_bias", 5, agents4, grid12, RESIZE_AS_CLASSIFIERS,
                                 &r) &&
               !grid_resize_plan("pos_embed", 3, tokens16, tokens64, RESIZE_AS_MEDIATORS, &r),
           "resized across agents, a tensor not over the grid, or SiT's pos_embed");
    st_close(&f);
}
