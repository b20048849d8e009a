/* eval: loads a checkpoint (its config travels inside it) and reports top-1, top-5, loss and
 * throughput on a folder of class folders, or the top-5 classes of one image. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../models/model.h"
#include "core/arena.h"
#include "core/check.h"
#include "core/tape.h"
#include "core/threads.h"
#include "data/data.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: eval --ckpt CKPT [--data DIR] [--ema] [--batch N] [--threads N]\n"
            "       eval --ckpt CKPT --image FILE\n"
            "  --ckpt CKPT   a vitc checkpoint (train's last/best.safetensors or tools/convert_pth.py output)\n"
            "  --data DIR    folder of class folders (default: the run's data.val)\n"
            "  --ema         evaluate the EMA weights stored in the checkpoint\n"
            "  --batch N     images per forward pass (default 64)\n"
            "  --image FILE  print the top-5 classes of one image with their probabilities\n");
}

static int predict_image(model *m, config *c, const st_file *f, const char *image) {
    augment_config ac;
    augment_config_read(&ac, c);
    const model_config *mc = &m->cfg;
    float *pixels = xmalloc(sizeof(float) * (size_t)mc->img_size * mc->img_size * mc->in_chans);
    char err[1024];
    if (!image_load_eval(image, &ac, pixels, err, sizeof(err))) {
        fprintf(stderr, "error: --image: %s\n", err);
        free(pixels);
        return 1;
    }
    tape_set_grad_enabled(false);
    forward_opts fo = {.train = false};
    tensor *x = tensor_wrap(pixels, 4, (int[]){1, mc->img_size, mc->img_size, mc->in_chans});
    tensor *probs = op_softmax(model_forward(m, x, &fo), NULL);
    cJSON *classes = st_meta(f, "classes") ? cJSON_Parse(st_meta(f, "classes")) : NULL;
    int K = mc->num_classes, shown[5];
    printf("%s:\n", image);
    for (int r = 0; r < 5 && r < K; r++) {
        int best = -1;
        for (int k = 0; k < K; k++) {
            bool used = false;
            for (int j = 0; j < r; j++) used |= shown[j] == k;
            if (!used && (best < 0 || probs->data[k] > probs->data[best])) best = k;
        }
        shown[r] = best;
        const cJSON *name = cJSON_GetArrayItem(classes, best);
        printf("  %6.2f%%  %s (class %d)\n", 100.0 * probs->data[best],
               cJSON_IsString(name) ? name->valuestring : "?", best);
    }
    cJSON_Delete(classes);
    free(pixels);
    return 0;
}

int main(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL, *image = NULL;
    bool use_ema = false;
    int batch_size = 64, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--ckpt") && has_value) ckpt = argv[++i];
        else if (!strcmp(a, "--data") && has_value) data = argv[++i];
        else if (!strcmp(a, "--image") && has_value) image = argv[++i];
        else if (!strcmp(a, "--ema")) use_ema = true;
        else if ((!strcmp(a, "--batch") || !strcmp(a, "--threads")) && has_value) {
            int v = atoi(argv[++i]);
            if (v <= 0) {
                fprintf(stderr, "error: %s %s: expected a positive integer\n", a, argv[i]);
                return 2;
            }
            *(!strcmp(a, "--batch") ? &batch_size : &threads) = v;
        } else {
            fprintf(stderr, "error: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!ckpt) {
        fprintf(stderr, "error: --ckpt is required\n");
        usage(stderr);
        return 2;
    }
    vitc_set_threads(threads);
    char err[8192], *cfg_text = NULL;
    st_file f;
    if (!checkpoint_open(&f, ckpt, &cfg_text, err, sizeof(err))) {
        fprintf(stderr, "error: --ckpt: %s\n", err);
        return 1;
    }
    config c;
    model *m = model_create_from_json(&c, cfg_text, ckpt, 0);
    const model_config mc = m->cfg;
    if (!checkpoint_restore(&f, ckpt, m, NULL, NULL, NULL, err, sizeof(err)) ||
        (use_ema && !checkpoint_load_ema(&f, ckpt, m, err, sizeof(err)))) {
        fprintf(stderr, "error: --ckpt: %s\n", err);
        return 1;
    }
    int code = 0;
    if (image) {
        code = predict_image(m, &c, &f, image);
    } else {
        if (!data) data = config_str(&c, "data.val", "", NULL);
        if (!data[0]) {
            fprintf(stderr, "error: no --data given and the checkpoint's config has no data.val\n");
            return 2;
        }
        augment_config ac;
        augment_config_read(&ac, &c);
        dataset ds;
        if (!dataset_open(&ds, data, err, sizeof(err))) {
            fprintf(stderr, "error: --data: %s\n", err);
            return 1;
        }
        if (ds.n_classes != mc.num_classes) {
            fprintf(stderr, "error: --data %s has %d classes, the model has %d\n", data, ds.n_classes,
                    mc.num_classes);
            return 1;
        }
        loader *l = loader_create(&ds, &ac, batch_size, false, 2, 0);
        eval_result r = evaluate(m, l);
        printf("%s%s on %s: top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%d images, %.1f img/s)\n", ckpt,
               use_ema ? " (EMA)" : "", data, r.top1, r.top5, r.loss, r.n, r.img_per_s);
        loader_free(l);
        dataset_free(&ds);
    }
    model_free(m);
    config_free(&c);
    st_close(&f);
    free(cfg_text);
    arena_free(&vitc_arena);
    return code;
}
