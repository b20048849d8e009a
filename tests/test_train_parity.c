/* 20 training steps against the PyTorch reference (tools/ref/make_train_parity.py): the same tiny
 * Agent-DeiT, initial weights and batches, AdamW with the no-decay rule, timm's cosine schedule with
 * warm-up, clipping, label smoothing and EMA. Every step's loss, the final weights and the final
 * EMA weights must match to 1e-4 relative. */
#include "../models/model.h"
#include "../src/train/optim.h"
#include "test.h"

static double meta_num(const st_file *f, const char *key) {
    const char *v = st_meta(f, key);
    return v ? atof(v) : NAN;
}

static double rel_l2_block(const float *a, const st_file *f, const char *prefix, const model *m) {
    double num = 0, den = 0;
    for (int i = 0; i < m->ps.n; i++) {
        const tensor *p = m->ps.params[i];
        char key[512];
        snprintf(key, sizeof(key), "%s%s", prefix, p->name);
        const st_entry *e = st_find(f, key);
        if (!e) return INFINITY;
        float *ref = malloc(sizeof(float) * (size_t)p->numel);
        st_to_f32(e, ref);
        const float *got = a + (p->data - m->ps.data);
        for (int64_t j = 0; j < p->numel; j++) {
            num += ((double)got[j] - ref[j]) * ((double)got[j] - ref[j]);
            den += (double)ref[j] * ref[j];
        }
        free(ref);
    }
    return sqrt(num / den);
}

TEST(training_matches_pytorch_for_20_steps) {
    const char *path = "tests/fixtures/train_parity.safetensors";
    char err[4096];
    st_file f;
    EXPECT(st_read(&f, path, err, sizeof(err)), "%s (run make parity)", err);
    config c;
    model *m = model_create_from_json(&c, st_meta(&f, "config"), path, 0);
    EXPECT(model_load_state(m, &f, "init/", err, sizeof(err)), "%s", err);
    int steps = (int)meta_num(&f, "steps"), B = (int)meta_num(&f, "batch");
    lr_schedule sched = {meta_num(&f, "base_lr"), meta_num(&f, "warmup_lr"), meta_num(&f, "min_lr"),
                         (int64_t)meta_num(&f, "warmup_steps"), steps};
    adamw opt;
    adamw_init(&opt, &m->ps, meta_num(&f, "weight_decay"), 0.9, 0.999, 1e-8);
    float *ema = malloc(sizeof(float) * (size_t)m->ps.span);
    memcpy(ema, m->ps.data, sizeof(float) * (size_t)m->ps.span);
    const st_entry *ie = st_find(&f, "images"), *le = st_find(&f, "labels"), *loss_e = st_find(&f, "losses");
    float *images = malloc(ie->nbytes), *labels_f = malloc(le->nbytes), *ref_loss = malloc(loss_e->nbytes);
    st_to_f32(ie, images);
    st_to_f32(le, labels_f);
    st_to_f32(loss_e, ref_loss);
    int S = m->cfg.img_size, C = m->cfg.in_chans;
    double worst = 0;
    forward_opts fo = {.train = false};
    for (int step = 0; step < steps; step++) {
        int labels[64];
        for (int i = 0; i < B; i++) labels[i] = (int)labels_f[step * B + i];
        tensor *x = tensor_wrap(images + (size_t)step * B * S * S * C, 4, (int[]){B, S, S, C});
        params_zero_grad(&m->ps);
        tensor *loss = op_cross_entropy_labels(model_forward(m, x, &fo), labels,
                                               (float)meta_num(&f, "smoothing"));
        tape_backward(loss);
        double e = fabs(loss->data[0] - ref_loss[step]) / fabs(ref_loss[step]);
        if (e > worst) worst = e;
        EXPECT(e < 1e-4, "step %d: loss %.7f vs %.7f", step, loss->data[0], ref_loss[step]);
        clip_grad_norm(&m->ps, meta_num(&f, "clip"));
        adamw_step(&opt, &m->ps, lr_at(&sched, step));
        ema_update(ema, &m->ps, meta_num(&f, "ema_decay"));
        tape_reset();
        arena_reset(&vitc_arena);
    }
    double e_final = rel_l2_block(m->ps.data, &f, "final/", m), e_ema = rel_l2_block(ema, &f, "ema/", m);
    printf("    20 steps: worst loss rel err %.1e, final weights %.1e, EMA %.1e\n", worst, e_final, e_ema);
    EXPECT(e_final < 1e-4 && e_ema < 1e-4, "final weights %.2e, EMA %.2e", e_final, e_ema);
    free(images), free(labels_f), free(ref_loss), free(ema);
    adamw_free(&opt);
    model_free(m);
    config_free(&c);
    st_close(&f);
}
