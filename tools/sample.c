/* sample: draws images from a diffusion checkpoint (model.arch "sit", pixel space) with the SiT
 * samplers (Euler-Maruyama SDE with the "Mean" last step, Euler or Heun ODE) and classifier-free
 * guidance, and writes them as a PNG grid, one row per class. No VAE: latents (4 channels) cannot
 * be written. */
#include <math.h>
#include <stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../models/model.h"
#include "core/arena.h"
#include "core/check.h"
#include "core/threads.h"
#include "data/data.h"
#include "dist/dist.h"
#include "train/checkpoint.h"
#include "train/transport.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: sample --ckpt CKPT --out GRID.png [--class K] [--n N] [--steps S] [--sampler sde|ode|heun]\n"
            "              [--cfg G] [--seed S] [--ema] [--threads N]\n"
            "  --ckpt CKPT    a checkpoint of train.task \"diffusion\" (model.arch sit) on images\n"
            "  --out GRID.png one row per class (all classes, or K alone), N images per row\n"
            "  --class K      only class K (default: every class)\n"
            "  --n N          images per class (default 8)\n"
            "  --steps S      points of the time grid, SiT's num_sampling_steps (default 250)\n"
            "  --sampler      sde: Euler-Maruyama to t = 0.96, then the deterministic 0.04 step (default);\n"
            "                 ode: Euler on linspace(0, 1, S); heun: Heun's 2nd order on the same grid\n"
            "  --cfg G        classifier-free guidance scale (default 1: none)\n"
            "  --seed S       noise seed (default 0); image i of class K draws from its own stream\n"
            "  --ema          sample with the EMA weights (what the official code samples with)\n");
}

static bool parse_int(const char *flag, const char *s, int lo, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || end == s || v < lo || v > 1000000000) {
        fprintf(stderr, "error: %s %s: expected an integer >= %d\n", flag, s, lo);
        return false;
    }
    *out = (int)v;
    return true;
}

int main(int argc, char **argv) {
    dist_init(&argc, &argv);
    const char *ckpt = NULL, *out = NULL, *sampler = "sde";
    int cls = -1, n = 8, steps = 250, seed = 0, threads = 0;
    double cfg = 1.0;
    bool use_ema = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--ckpt") && has_value) ckpt = argv[++i];
        else if (!strcmp(a, "--out") && has_value) out = argv[++i];
        else if (!strcmp(a, "--sampler") && has_value) sampler = argv[++i];
        else if (!strcmp(a, "--ema")) use_ema = true;
        else if (!strcmp(a, "--class") && has_value) {
            if (!parse_int(a, argv[++i], 0, &cls)) return 2;
        } else if (!strcmp(a, "--n") && has_value) {
            if (!parse_int(a, argv[++i], 1, &n)) return 2;
        } else if (!strcmp(a, "--steps") && has_value) {
            if (!parse_int(a, argv[++i], 2, &steps)) return 2;
        } else if (!strcmp(a, "--seed") && has_value) {
            if (!parse_int(a, argv[++i], 0, &seed)) return 2;
        } else if (!strcmp(a, "--threads") && has_value) {
            if (!parse_int(a, argv[++i], 1, &threads)) return 2;
        } else if (!strcmp(a, "--cfg") && has_value) {
            char *end;
            cfg = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(cfg >= 0 && cfg <= 1000)) {
                fprintf(stderr, "error: --cfg %s: expected a guidance scale >= 0\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "error: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!ckpt || !out) {
        fprintf(stderr, "error: --ckpt and --out are required\n");
        usage(stderr);
        return 2;
    }
    sampler_kind kind;
    if (!strcmp(sampler, "sde")) kind = SAMPLER_SDE;
    else if (!strcmp(sampler, "ode")) kind = SAMPLER_ODE;
    else if (!strcmp(sampler, "heun")) kind = SAMPLER_HEUN;
    else {
        fprintf(stderr, "error: --sampler %s: expected sde, ode or heun\n", sampler);
        return 2;
    }
    vitc_set_threads(threads ? threads : dist_default_threads());
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
    int code = 0;
    unsigned char *png = NULL;
    float *x = NULL;
    rng *noise = NULL;
    if (strcmp(mc.arch, "sit")) {
        fprintf(stderr, "error: --ckpt: %s is a \"%s\" classifier, not a diffusion model (model.arch sit)\n",
                mc.name, mc.arch);
        code = 1;
        goto done;
    }
    if (mc.in_chans != 1 && mc.in_chans != 3) {
        fprintf(stderr, "error: --ckpt: %d channels are latents (no VAE to decode them); sample writes 1- or "
                "3-channel images\n", mc.in_chans);
        code = 1;
        goto done;
    }
    if (cls >= mc.num_classes) {
        fprintf(stderr, "error: --class %d: the model has classes 0 to %d\n", cls, mc.num_classes - 1);
        code = 2;
        goto done;
    }
    if (cfg > 1 && mc.class_dropout_prob <= 0) {
        fprintf(stderr, "error: --cfg %g: the model has no null class (model.class_dropout_prob 0)\n", cfg);
        code = 2;
        goto done;
    }
    augment_config ac;
    augment_config_read(&ac, &c); /* the normalisation to undo */
    int S = mc.img_size, C = mc.in_chans, rows = cls >= 0 ? 1 : mc.num_classes;
    int64_t per = (int64_t)S * S * C;
    sampler_opts so = sampler_defaults(kind);
    so.steps = steps;
    so.cfg = cfg;
    x = xmalloc(sizeof(float) * (size_t)(n * per));
    noise = xmalloc(sizeof(rng) * (size_t)n);
    int W = n * S, H = rows * S;
    png = xmalloc((size_t)W * H * C);
    int *labels = xmalloc(sizeof(int) * (size_t)n);
    for (int row = 0; row < rows; row++) {
        int k = cls >= 0 ? cls : row;
        for (int i = 0; i < n; i++) {
            labels[i] = k;
            /* image i of class k: the same whether one class or all are drawn */
            rng_seed(&noise[i], (uint64_t)seed * 1000003u + (uint64_t)k * (uint64_t)n + (uint64_t)i, RNG_SAMPLE);
            for (int64_t j = 0; j < per; j++) x[i * per + j] = rng_normal(&noise[i]);
        }
        transport_net net = {.m = m, .y = labels, .cfg = cfg, .guided_chans = so.guided_chans};
        transport_sample(transport_net_velocity, &net, x, n, per, &so, noise);
        /* undo the normalisation: [-1, 1] -> [0, 255] for SiT's mean = std = 0.5, rounded, clamped */
        for (int i = 0; i < n; i++)
            for (int yy = 0; yy < S; yy++)
                for (int xx = 0; xx < S; xx++)
                    for (int ch = 0; ch < C; ch++) {
                        double v = (x[i * per + ((int64_t)yy * S + xx) * C + ch] * ac.std[ch] + ac.mean[ch]) * 255.0;
                        v = v < 0 ? 0 : v > 255 ? 255 : v;
                        png[(((size_t)row * S + yy) * W + (size_t)i * S + xx) * C + ch] = (unsigned char)lround(v);
                    }
    }
    free(labels);
    if (!stbi_write_png(out, W, H, C, png, W * C)) {
        fprintf(stderr, "error: --out: cannot write %s\n", out);
        code = 1;
        goto done;
    }
    printf("wrote %s: %d x %d images of %dx%d (%s, %d steps, cfg %g%s)\n", out, rows, n, S, S, sampler, steps,
           cfg, use_ema ? ", EMA" : "");
done:
    dist_startup_done(code == 0);
    free(png);
    free(x);
    free(noise);
    model_free(m);
    config_free(&c);
    st_close(&f);
    arena_free(&vitc_arena);
    dist_finalize();
    return code;
}
