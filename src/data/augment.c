#include "augment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/check.h"
#include "randaugment.h"

void augment_config_read(augment_config *a, config *c) {
    memset(a, 0, sizeof(*a));
    a->img_size = config_int(c, "model.img_size", 224, 8, 4096);
    a->in_chans = config_int(c, "model.in_chans", 3, 1, 4);
    if (a->in_chans != 1 && a->in_chans != 3)
        config_error("model.in_chans", "images decode to 1 (gray) or 3 (RGB) channels, got %d", a->in_chans);
    double mean3[3] = {0.485, 0.456, 0.406}, std3[3] = {0.229, 0.224, 0.225};
    double mean1[1] = {0.5}, std1[1] = {0.5};
    config_float_array(c, "data.mean", a->in_chans, a->in_chans == 3 ? mean3 : mean1, a->mean, 0, 1);
    config_float_array(c, "data.std", a->in_chans, a->in_chans == 3 ? std3 : std1, a->std, 1e-6, 10);
    double scale[2], ratio[2], def_scale[2] = {0.08, 1.0}, def_ratio[2] = {3.0 / 4, 4.0 / 3};
    config_float_array(c, "aug.scale", 2, def_scale, scale, 0.0, 1.0);
    config_float_array(c, "aug.ratio", 2, def_ratio, ratio, 0.01, 100);
    if (scale[0] > scale[1] || scale[0] <= 0) config_error("aug.scale", "needs 0 < min <= max <= 1");
    if (ratio[0] > ratio[1]) config_error("aug.ratio", "needs min <= max");
    a->scale_min = scale[0], a->scale_max = scale[1], a->ratio_min = ratio[0], a->ratio_max = ratio[1];
    const char *interp = config_str(c, "aug.interpolation", "bicubic",
                                    (const char *const[]){"bicubic", "bilinear", NULL});
    a->bicubic = !strcmp(interp, "bicubic");
    a->hflip = config_float(c, "aug.hflip", 0.5, 0, 1);
    const char *ra = config_str(c, "aug.randaugment", "rand-m9-mstd0.5-inc1", NULL);
    randaugment check;
    if (ra[0] && !randaugment_parse(&check, ra)) {
        char with_inc[160]; /* a timm spec of the other op set is one "-inc1" away */
        snprintf(with_inc, sizeof(with_inc), "%s-inc1", ra);
        if (randaugment_parse(&check, with_inc))
            config_error("aug.randaugment",
                         "\"%s\": only timm's increasing op set (inc1), what the official "
                         "recipes use, is implemented",
                         ra);
        config_error("aug.randaugment",
                     "\"%s\" is not a RandAugment spec like rand-m9-mstd0.5-inc1 (n at most %d; "
                     "\"\" turns it off)",
                     ra, RA_MAX_OPS);
    }
    snprintf(a->randaugment, sizeof(a->randaugment), "%s", ra);
    a->color_jitter = config_float(c, "aug.color_jitter", 0.4, 0, 1);
    a->reprob = config_float(c, "aug.reprob", 0.25, 0, 1);
    a->crop_pct = config_float(c, "aug.crop_pct", 0.875, 0.1, 1.0);
}

void random_resized_crop_params(int W, int H, double scale_min, double scale_max, double ratio_min,
                                double ratio_max, rng *r, int *x, int *y, int *w, int *h) {
    double area = (double)W * H, lr0 = log(ratio_min), lr1 = log(ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (scale_min + (scale_max - scale_min) * rng_uniform_f64(r));
        double aspect = exp(lr0 + (lr1 - lr0) * rng_uniform_f64(r));
        int cw = (int)lround(sqrt(target * aspect)), ch = (int)lround(sqrt(target / aspect));
        if (cw > 0 && cw <= W && ch > 0 && ch <= H) {
            *y = (int)rng_below(r, (uint32_t)(H - ch + 1));
            *x = (int)rng_below(r, (uint32_t)(W - cw + 1));
            *w = cw, *h = ch;
            return;
        }
    }
    /* fallback: the centre crop with the aspect ratio clamped into range */
    double in_ratio = (double)W / H;
    if (in_ratio < ratio_min) *w = W, *h = (int)lround(W / ratio_min);
    else if (in_ratio > ratio_max) *h = H, *w = (int)lround(H * ratio_max);
    else *w = W, *h = H;
    *y = (H - *h) / 2;
    *x = (W - *w) / 2;
}

void random_erasing(float *out, int S, int C, double p, rng *r) {
    if (rng_uniform_f64(r) >= p) return;
    double area = (double)S * S, lr0 = log(0.3), lr1 = log(1 / 0.3);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (0.02 + (1.0 / 3 - 0.02) * rng_uniform_f64(r));
        double aspect = exp(lr0 + (lr1 - lr0) * rng_uniform_f64(r));
        int h = (int)lround(sqrt(target * aspect)), w = (int)lround(sqrt(target / aspect));
        if (w < S && h < S) {
            int top = (int)rng_below(r, (uint32_t)(S - h + 1)), left = (int)rng_below(r, (uint32_t)(S - w + 1));
            for (int y = top; y < top + h; y++)
                for (int x = left; x < left + w; x++)
                    for (int c = 0; c < C; c++) out[((size_t)y * S + x) * C + c] = rng_normal(r);
            return;
        }
    }
}

static void normalise(const augment_config *a, const image *img, float *out) {
    for (size_t p = 0; p < (size_t)img->w * img->h; p++)
        for (int c = 0; c < img->c; c++)
            out[p * img->c + c] = (float)((img->px[p * img->c + c] / 255.0 - a->mean[c]) / a->std[c]);
}

/* torchvision ColorJitter(b, c, s) with hue 0: factors in [1-j, 1+j], applied in a random order */
static void color_jitter(image *img, image *scratch, double j, rng *r) {
    int order[3] = {0, 1, 2};
    for (int i = 2; i > 0; i--) {
        int k = (int)rng_below(r, (uint32_t)(i + 1)), t = order[i];
        order[i] = order[k], order[k] = t;
    }
    static const ra_op ops[3] = {RA_BRIGHTNESS, RA_CONTRAST, RA_COLOR};
    for (int i = 0; i < 3; i++) {
        double f = 1 - j + 2 * j * rng_uniform_f64(r);
        /* randaugment_op's enhance factor is 1 + sign * 0.09 * magnitude */
        double m = fabs(f - 1) / 0.09;
        randaugment_op(ops[order[i]], m, f < 1, img, scratch);
    }
}

void transform_train(const augment_config *a, const image *src, float *out, rng *r) {
    int S = a->img_size, x, y, w, h;
    random_resized_crop_params(src->w, src->h, a->scale_min, a->scale_max, a->ratio_min,
                               a->ratio_max, r, &x, &y, &w, &h);
    size_t bytes = (size_t)S * S * src->c;
    image img = {xmalloc(bytes), S, S, src->c}, scratch = {xmalloc(bytes), S, S, src->c};
    image_resize_region(src, x, y, w, h, &img, a->bicubic ? FILTER_BICUBIC : FILTER_BILINEAR);
    if (rng_uniform_f64(r) < a->hflip)
        for (int yy = 0; yy < S; yy++)
            for (int xx = 0; xx < S / 2; xx++)
                for (int c = 0; c < img.c; c++) {
                    uint8_t *p = img.px + ((size_t)yy * S + xx) * img.c + c;
                    uint8_t *q = img.px + ((size_t)yy * S + S - 1 - xx) * img.c + c;
                    uint8_t t = *p;
                    *p = *q, *q = t;
                }
    randaugment ra;
    if (a->randaugment[0] && randaugment_parse(&ra, a->randaugment))
        randaugment_apply(&ra, &img, &scratch, r);
    else if (a->color_jitter > 0) /* timm applies colour jitter only without auto-augment */
        color_jitter(&img, &scratch, a->color_jitter, r);
    normalise(a, &img, out);
    random_erasing(out, S, img.c, a->reprob, r);
    free(img.px);
    free(scratch.px);
}

void transform_eval(const augment_config *a, const image *src, float *out) {
    /* resize to a square of int(S / crop_pct), then centre crop S (the official repos' eval) */
    int S = a->img_size, R = (int)(S / a->crop_pct);
    double scale = (double)src->w / R, scale_y = (double)src->h / R;
    double off = nearbyint((R - S) / 2.0); /* torchvision's int(round(...)): ties to even */
    size_t bytes = (size_t)S * S * src->c;
    image img = {xmalloc(bytes), S, S, src->c};
    /* the crop of the resized square is a region of the source: resample it directly */
    image_resize_region(src, off * scale, off * scale_y, S * scale, S * scale_y, &img,
                        a->bicubic ? FILTER_BICUBIC : FILTER_BILINEAR);
    normalise(a, &img, out);
    free(img.px);
}
