/* eval: loads a checkpoint (its config travels inside it) and reports top-1, top-5, loss and
 * throughput on a folder of class folders (and against ImageNet-ReaL's labels), or the top-5
 * classes of one image and, on request, the attention map of one query token of that image. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stb_image_write.h>
#include <stdio.h>
#include <string.h>

#include "../models/attn/attn_map.h"
#include "../models/model.h"
#include "core/arena.h"
#include "core/check.h"
#include "core/flags.h"
#include "core/precision.h"
#include "core/tape.h"
#include "core/threads.h"
#include "data/data.h"
#include "dist/dist.h"
#include "ops/backend.h"
#include "train/checkpoint.h"
#include "train/class_map.h"
#include "train/real_labels.h"
#include "train/trainer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: eval --ckpt CKPT [--data DIR] [--ema] [--valid-labels FILE | --real-labels FILE]\n"
            "                        [--batch N] [--threads N] [--precision P] [--device D]\n"
            "       eval --ckpt CKPT --image FILE [--attn-map OUT.png [--attn-block N] [--attn-query X,Y]]\n"
            "  --ckpt CKPT   a vitc checkpoint (train's last/best.safetensors or tools/convert_pth.py output)\n"
            "  --data DIR    folder of class folders (default: the run's data.val)\n"
            "  --ema         evaluate the EMA weights stored in the checkpoint\n"
            "  --valid-labels FILE  score the model's classes FILE names alone (one class number a line,\n"
            "                a line per class folder of DIR), as timm's validate.py does for ImageNet-A/R\n"
            "  --real-labels FILE  also score against ImageNet-ReaL's label sets (its real.json), found by\n"
            "                each file's name (ILSVRC2012_val_NNNNNNNN.JPEG), as timm's validate.py does\n"
            "  --batch N     images per forward pass (default 64)\n"
            "  --precision P fp32 (default), bf16 GEMMs (bf16 operands, fp32 sums; on the CPU it needs AVX512_BF16)\n"
            "                or tf32 (--device cuda only)\n"
            "  --device D    cpu (default), cuda or cuda:N (a build with make CUDA=1 and a GPU)\n"
            "  --image FILE  print the top-5 classes of one image with their probabilities\n"
            "  --attn-map OUT.png  also write the attention one query token of the image pays to every\n"
            "                key (softmax, agent, flatten, elfatt: the equivalent attention row), over the image\n"
            "  --attn-block N  the block, counted over all stages from 0 (default: the last)\n"
            "  --attn-query X,Y  the query's pixel in the model's input (default: the centre)\n");
}

/* jet colour map of t in [0, 1] */
static float jet(float t, int channel) {
    float v = 1.5f - fabsf(4.0f * t - (float)(3 - channel));
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* the image (denormalised, grey) under the attention row, bilinear over the key grid, scaled up to
 * at least 224 pixels; the query's cell outlined in white */
static bool write_attn_map(const char *path, const float *pixels, const model_config *mc,
                           const augment_config *ac, const attn_probe *p) {
    int S = mc->img_size, zoom = S >= 224 ? 1 : (223 + S) / S, W = S * zoom, C = mc->in_chans;
    float peak = 1e-12f;
    for (int i = 0; i < p->map_h * p->map_w; i++) peak = fmaxf(peak, p->row[i]);
    unsigned char *rgb = xmalloc((size_t)W * W * 3);
    for (int y = 0; y < W; y++)
        for (int x = 0; x < W; x++) {
            const float *px = pixels + ((size_t)(y / zoom) * S + x / zoom) * C;
            float grey = 0;
            for (int c = 0; c < C; c++) grey += (float)(px[c] * ac->std[c] + ac->mean[c]) / (float)C;
            /* bilinear sample of the key grid at this pixel's centre */
            float gy = ((float)y + 0.5f) / (float)W * (float)p->map_h - 0.5f;
            float gx = ((float)x + 0.5f) / (float)W * (float)p->map_w - 0.5f;
            gy = fminf(fmaxf(gy, 0), (float)p->map_h - 1), gx = fminf(fmaxf(gx, 0), (float)p->map_w - 1);
            int y0 = (int)gy, x0 = (int)gx, y1 = y0 + (y0 + 1 < p->map_h), x1 = x0 + (x0 + 1 < p->map_w);
            float fy = gy - (float)y0, fx = gx - (float)x0;
            float t = (1 - fy) * ((1 - fx) * p->row[y0 * p->map_w + x0] + fx * p->row[y0 * p->map_w + x1]) +
                      fy * ((1 - fx) * p->row[y1 * p->map_w + x0] + fx * p->row[y1 * p->map_w + x1]);
            t = fmaxf(t, 0) / peak;
            for (int ch = 0; ch < 3; ch++) {
                float v = 0.4f * fminf(fmaxf(grey, 0), 1) + 0.6f * jet(t, ch);
                rgb[((size_t)y * W + x) * 3 + ch] = (unsigned char)(255.0f * v + 0.5f);
            }
        }
    /* the query's cell on the stage's map, outlined */
    int y0 = p->query_y * W / p->query_h, y1 = (p->query_y + 1) * W / p->query_h - 1;
    int x0 = p->query_x * W / p->query_w, x1 = (p->query_x + 1) * W / p->query_w - 1;
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++)
            if (y == y0 || y == y1 || x == x0 || x == x1) memset(rgb + ((size_t)y * W + x) * 3, 255, 3);
    bool ok = stbi_write_png(path, W, W, 3, rgb, W * 3) != 0;
    free(rgb);
    return ok;
}

static int predict_image(model *m, config *c, const st_file *f, const char *image, attn_probe *probe,
                         const char *map_path) {
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
    int S = mc->img_size, K = mc->num_classes;
    tensor *x = tensor_wrap((float *)backend_floats(pixels, (int64_t)S * S * mc->in_chans), 4,
                            (int[]){1, S, S, mc->in_chans});
    attn_probe_set(probe);
    tensor *out = op_softmax(model_forward(m, x, &fo), NULL);
    attn_probe_set(NULL);
    float *host = xmalloc(sizeof(float) * (size_t)K);
    const float *probs = backend_read(host, out->data, K);
    cJSON *list;
    const char **names = checkpoint_class_names(f, K, &list);
    int shown[5];
    printf("%s:\n", image);
    for (int r = 0; r < 5 && r < K; r++) {
        int best = -1;
        for (int k = 0; k < K; k++) {
            bool used = false;
            for (int j = 0; j < r; j++) used |= shown[j] == k;
            if (!used && (best < 0 || probs[k] > probs[best])) best = k;
        }
        shown[r] = best;
        printf("  %6.2f%%  %s (class %d)\n", 100.0 * probs[best], names[best] ? names[best] : "?",
               best);
    }
    free(names);
    cJSON_Delete(list);
    free(host);
    int code = 0;
    if (probe) {
        if (!write_attn_map(map_path, pixels, mc, &ac, probe)) {
            fprintf(stderr, "error: --attn-map: cannot write %s\n", map_path);
            code = 1;
        } else {
            int best = 0;
            for (int i = 1; i < probe->map_h * probe->map_w; i++) best = probe->row[i] > probe->row[best] ? i : best;
            printf("attention map of block %d (%s), query cell (%d, %d) of %dx%d: strongest key (%d, %d) "
                   "%.3f; wrote %s\n", probe->block, attn_names[probe->kind], probe->query_x, probe->query_y,
                   probe->query_w, probe->query_h, best % probe->map_w, best / probe->map_w, probe->row[best],
                   map_path);
            if (!strcmp(mc->arch, "deit")) printf("  class token: %.3f\n", probe->cls_weight);
        }
    }
    free(pixels);
    return code;
}

int main(int argc, char **argv) {
    dist_init(&argc, &argv);
    const char *ckpt = NULL, *data = NULL, *image = NULL, *map_path = NULL, *query = NULL,
               *valid_labels = NULL, *real_labels = NULL, *precision_arg = "fp32",
               *device_arg = "cpu";
    int map_block = -1;
    bool use_ema = false;
    int batch_size = 64, threads = 0;
    const tool_flag flags[] = {
        TEXT_FLAG("--ckpt", &ckpt),
        TEXT_FLAG("--data", &data),
        TEXT_FLAG("--valid-labels", &valid_labels),
        TEXT_FLAG("--real-labels", &real_labels),
        TEXT_FLAG("--image", &image),
        PNG_FLAG("--attn-map", &map_path),
        TEXT_FLAG("--attn-query", &query),
        INT_FLAG("--attn-block", &map_block, 0),
        TEXT_FLAG("--precision", &precision_arg),
        TEXT_FLAG("--device", &device_arg),
        SWITCH_FLAG("--ema", &use_ema),
        INT_FLAG("--batch", &batch_size, 1),
        RANGE_FLAG("--threads", &threads, 1, VITC_MAX_THREADS),
        FLAGS_END,
    };
    int status = flags_read(argc, argv, flags, usage);
    if (status >= 0) return status;
    if (!ckpt) {
        fprintf(stderr, "error: --ckpt is required\n");
        usage(stderr);
        return 2;
    }
    if ((map_path || query || map_block >= 0) && !image) {
        fprintf(stderr, "error: --attn-map, --attn-block and --attn-query need --image\n");
        return 2;
    }
    if ((valid_labels || real_labels) && image) {
        fprintf(stderr, "error: %s scores a folder of images (--data), not --image\n",
                valid_labels ? "--valid-labels" : "--real-labels");
        return 2;
    }
    if (valid_labels && real_labels) {
        fprintf(stderr,
                "error: --real-labels are of all the model's classes: drop --valid-labels\n");
        return 2;
    }
    if ((query || map_block >= 0) && !map_path) {
        fprintf(stderr, "error: --attn-block and --attn-query need --attn-map OUT.png\n");
        return 2;
    }
    int qxy[2] = {-1, -1};
    if (query) {
        if (!flag_ints(query, 2, 0, qxy)) {
            fprintf(stderr, "error: --attn-query %s: expected X,Y (pixels of the model's input)\n", query);
            return 2;
        }
    }
    int qx = qxy[0], qy = qxy[1];
    vitc_set_threads(threads ? threads : dist_default_threads());
    status = backend_select_flag(device_arg); /* before the first tensor and the precision */
    if (!status) status = precision_select_flag(precision_arg);
    if (status) return status;
    char err[8192];
    st_file f;
    config c;
    model *m = checkpoint_load_model(&f, ckpt, use_ema, &c, err, sizeof(err));
    if (!m) {
        fprintf(stderr, "error: --ckpt: %s\n", err);
        dist_startup_done(false);
        dist_finalize();
        return 1;
    }
    const model_config mc = m->cfg;
    int code = 0, *classes = NULL, n_classes = 0; /* --valid-labels' */
    label_sets real = {0};                        /* --real-labels' */
    attn_probe probe = {0}, *pp = NULL;
    if (map_path) {
        int blocks = 0, S = mc.img_size;
        for (int s = 0; s < mc.n_stages; s++) blocks += mc.depths[s];
        if (map_block >= blocks) {
            fprintf(stderr, "error: --attn-block %d: the model has blocks 0 to %d\n", map_block, blocks - 1);
            code = 2;
            goto done;
        }
        if (qx >= S || qy >= S) {
            fprintf(stderr, "error: --attn-query %s: outside the %dx%d input\n", query, S, S);
            code = 2;
            goto done;
        }
        probe.block = map_block >= 0 ? map_block : blocks - 1;
        probe.qx = ((float)(qx >= 0 ? qx : S / 2) + 0.5f) / (float)S;
        probe.qy = ((float)(qy >= 0 ? qy : S / 2) + 0.5f) / (float)S;
        pp = &probe;
    }
    if (image && model_is_diffusion(&mc)) {
        fprintf(stderr, "error: --image: %s is a diffusion model (draw images with ./sample)\n",
                mc.name);
        code = 2;
    } else if ((valid_labels || real_labels) && model_is_diffusion(&mc)) {
        fprintf(stderr,
                "error: %s: %s is a diffusion model, which scores no classes (eval reports its "
                "loss)\n",
                valid_labels ? "--valid-labels" : "--real-labels", mc.name);
        code = 2;
    } else if (image) {
        code = predict_image(m, &c, &f, image, pp, map_path);
        attn_probe_free(&probe);
    } else {
        if (!data) data = config_str(&c, "data.val", "", NULL);
        if (!data[0]) {
            fprintf(stderr, "error: no --data given and the checkpoint's config has no data.val\n");
            code = 2;
            goto done;
        }
        augment_config ac;
        augment_config_read(&ac, &c);
        dataset ds;
        if (!dataset_open(&ds, data, err, sizeof(err))) {
            fprintf(stderr, "error: --data: %s\n", err);
            code = 1;
            goto done;
        }
        if (dist_rank() == 0) dataset_note(&ds, "--data");
        if (valid_labels) {
            classes = class_map_read(valid_labels, mc.num_classes, "the model's classes",
                                     &n_classes, err, sizeof(err));
            if (!classes) {
                fprintf(stderr, "error: --valid-labels: %s\n", err);
                dataset_free(&ds);
                code = 1;
                goto done;
            }
        }
        if (real_labels &&
            !real_labels_read(&real, real_labels, &ds, mc.num_classes, err, sizeof(err))) {
            fprintf(stderr, "error: --real-labels: %s\n", err);
            dataset_free(&ds);
            code = 1;
            goto done;
        }
        class_match match =
            dataset_numbered_classes(&ds, checkpoint_match_classes(&f, &ds, mc.num_classes, classes,
                                                                   n_classes, err, sizeof(err)));
        if (!dataset_classes_agree(match, valid_labels ? "--valid-labels" : "--data", err,
                                   dist_rank() == 0)) {
            dataset_free(&ds);
            code = 1;
            goto done;
        }
        if (!dist_startup_done(true)) { /* another rank's error (printed once) */
            dataset_free(&ds);
            code = 1;
            goto done;
        }
        if (batch_size > ds.n) batch_size = ds.n; /* (a batch no larger than the set) */
        loader *l = loader_create(&ds, &ac, batch_size, false, 2, 0);
        loader_shard(l, dist_rank(), dist_size()); /* under mpirun each rank takes part of every batch */
        bool diffusion = model_is_diffusion(&mc);
        eval_result r = diffusion ? evaluate_diffusion(m, l, 0, batch_size)
                                  : evaluate(m, l, classes, n_classes, real_labels ? &real : NULL);
        if (r.n == 0) { /* (summed over the ranks) */
            if (dist_rank() == 0)
                fprintf(stderr,
                        "error: --data: none of the %d files of %s could be read (the "
                        "warnings above name them)\n",
                        ds.n, data);
            code = 1;
        } else if (dist_rank() == 0 && diffusion)
            printf("%s%s on %s: %s loss %.4f  (%d images, %.1f img/s)\n", ckpt, use_ema ? " (EMA)" : "", data,
                   strcmp(mc.arch, "dit") ? "transport" : "diffusion", r.loss, r.n, r.img_per_s);
        else if (dist_rank() == 0)
            printf(
                "%s%s on %s%s%s: top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%d images, %.1f img/s)\n",
                ckpt, use_ema ? " (EMA)" : "", data,
                valid_labels ? ", scoring the classes of " : "", valid_labels ? valid_labels : "",
                r.top1, r.top5, r.loss, r.n, r.img_per_s);
        if (dist_rank() == 0 && real_labels && r.n) {
            if (r.real_n)
                printf("  ReaL labels of %s: top-1 %.2f%%  top-5 %.2f%%  (%d of the %d images "
                       "labelled)\n",
                       real_labels, r.real_top1, r.real_top5, r.real_n, r.n);
            else
                printf("  ReaL labels of %s: none of the %d images labelled\n", real_labels, r.n);
        }
        loader_free(l);
        dataset_free(&ds);
    }
done: /* errors after the model exists come here too, so that nothing leaks on the way out */
    free(classes);
    label_sets_free(&real);
    dist_startup_done(code == 0);
    model_free(m);
    config_free(&c);
    st_close(&f);
    arena_free(&vitc_arena);
    dist_finalize();
    return code;
}
