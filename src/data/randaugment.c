#include "randaugment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t fill_mean[3] = {124, 116, 104};

bool randaugment_parse(randaugment *ra, const char *spec) {
    *ra = (randaugment){2, 9, 0, false};
    if (strncmp(spec, "rand", 4) != 0) return false;
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save; /* strtok_r: loader workers parse the spec concurrently (strtok's state is global) */
    for (char *tok = strtok_r(buf + 4, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
        char *end, *number;
        if (!strncmp(tok, "mstd", 4)) {
            ra->mstd = strtod(number = tok + 4, &end);
        } else if (tok[0] == 'm') {
            ra->magnitude = strtod(number = tok + 1, &end);
        } else if (tok[0] == 'n') {
            long n = strtol(number = tok + 1, &end, 10);
            ra->num_ops = n < 0 || n > RA_MAX_OPS ? -1 : (int)n;
        } else if (!strncmp(tok, "inc", 3)) {
            ra->increasing = strtol(number = tok + 3, &end, 10) != 0;
        } else {
            return false;
        }
        if (end == number || *end) return false;
    }
    /* only the "increasing" op set (what every official recipe uses) is implemented */
    return ra->increasing && ra->num_ops >= 0 && ra->magnitude >= 0 && isfinite(ra->magnitude) &&
           ra->mstd >= 0 && isfinite(ra->mstd);
}

static uint8_t clamp_u8(double v) { return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)(v + 0.5); }

/* Pillow's ImageEnhance: out = degenerate + factor * (img - degenerate) */
static void blend(image *img, const image *degenerate, double factor) {
    size_t n = (size_t)img->w * img->h * img->c;
    for (size_t i = 0; i < n; i++)
        img->px[i] = clamp_u8(degenerate->px[i] + factor * (img->px[i] - degenerate->px[i]));
}

static double luma(const uint8_t *p, int c) {
    return c == 1 ? p[0] : (p[0] * 299 + p[1] * 587 + p[2] * 114) / 1000.0; /* Pillow's L */
}

static void autocontrast(image *img) {
    for (int c = 0; c < img->c; c++) {
        int lo = 255, hi = 0;
        for (size_t i = c; i < (size_t)img->w * img->h * img->c; i += img->c) {
            if (img->px[i] < lo) lo = img->px[i];
            if (img->px[i] > hi) hi = img->px[i];
        }
        if (hi <= lo) continue;
        double scale = 255.0 / (hi - lo), offset = -lo * scale; /* Pillow's lookup table, truncated */
        for (size_t i = c; i < (size_t)img->w * img->h * img->c; i += img->c) {
            double v = img->px[i] * scale + offset;
            img->px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

static void equalize(image *img) {
    /* Pillow's ImageOps.equalize: per channel, a lookup table from the cumulative histogram */
    size_t npx = (size_t)img->w * img->h;
    for (int c = 0; c < img->c; c++) {
        int hist[256] = {0};
        for (size_t i = 0; i < npx; i++) hist[img->px[i * img->c + c]]++;
        int last = 255;
        while (last > 0 && !hist[last]) last--;
        int step = (int)((npx - hist[last]) / 255);
        if (!step) continue;
        int lut[256], n = step / 2;
        for (int v = 0; v < 256; v++) {
            lut[v] = n / step > 255 ? 255 : n / step;
            n += hist[v];
        }
        for (size_t i = 0; i < npx; i++) img->px[i * img->c + c] = (uint8_t)lut[img->px[i * img->c + c]];
    }
}

static void affine(image *img, image *scratch, const double m[6]) {
    image_affine(img, scratch, m, fill_mean);
    memcpy(img->px, scratch->px, (size_t)img->w * img->h * img->c);
}

void randaugment_op(ra_op op, double magnitude, bool negate, image *img, image *scratch) {
    double level = magnitude / 10.0, sign = negate ? -1 : 1;
    size_t n = (size_t)img->w * img->h * img->c;
    int C = img->c;
    switch (op) {
    case RA_AUTOCONTRAST: autocontrast(img); break;
    case RA_EQUALIZE: equalize(img); break;
    case RA_INVERT:
        for (size_t i = 0; i < n; i++) img->px[i] = (uint8_t)(255 - img->px[i]);
        break;
    case RA_ROTATE: { /* up to 30 degrees about the centre */
        double a = sign * level * 30.0 * M_PI / 180.0, cx = img->w / 2.0, cy = img->h / 2.0;
        double m[6] = {cos(a), sin(a), 0, -sin(a), cos(a), 0};
        m[2] = cx - m[0] * cx - m[1] * cy;
        m[5] = cy - m[3] * cx - m[4] * cy;
        affine(img, scratch, m);
        break;
    }
    case RA_POSTERIZE: { /* increasing: keep 4 - int(4 level) bits */
        int bits = 4 - (int)(level * 4);
        uint8_t mask = (uint8_t)(0xff << (8 - (bits < 0 ? 0 : bits)));
        for (size_t i = 0; i < n; i++) img->px[i] &= mask;
        break;
    }
    case RA_SOLARIZE: { /* increasing: threshold 256 - int(256 level) */
        int thresh = 256 - (int)(level * 256);
        for (size_t i = 0; i < n; i++)
            if (img->px[i] >= thresh) img->px[i] = (uint8_t)(255 - img->px[i]);
        break;
    }
    case RA_SOLARIZE_ADD: {
        int add = (int)(level * 110);
        for (size_t i = 0; i < n; i++)
            if (img->px[i] < 128) img->px[i] = (uint8_t)(img->px[i] + add > 255 ? 255 : img->px[i] + add);
        break;
    }
    case RA_COLOR: case RA_CONTRAST: case RA_BRIGHTNESS: case RA_SHARPNESS: {
        double factor = 1.0 + sign * level * 0.9; /* increasing: 1 +- 0.9 level */
        memcpy(scratch->px, img->px, n);
        if (op == RA_COLOR && C == 3) {
            for (size_t p = 0; p < n / 3; p++) {
                uint8_t l = clamp_u8(luma(img->px + 3 * p, 3));
                scratch->px[3 * p] = scratch->px[3 * p + 1] = scratch->px[3 * p + 2] = l;
            }
        } else if (op == RA_CONTRAST) {
            double mean = 0;
            for (size_t p = 0; p < n / C; p++) mean += luma(img->px + C * p, C);
            uint8_t m = clamp_u8(mean / (n / C));
            memset(scratch->px, m, n);
        } else if (op == RA_BRIGHTNESS) {
            memset(scratch->px, 0, n);
        } else if (op == RA_SHARPNESS) { /* Pillow's SMOOTH kernel, border pixels unchanged */
            for (int y = 1; y < img->h - 1; y++)
                for (int x = 1; x < img->w - 1; x++)
                    for (int c = 0; c < C; c++) {
                        double s = 0;
                        for (int dy = -1; dy <= 1; dy++)
                            for (int dx = -1; dx <= 1; dx++)
                                s += (dx || dy ? 1 : 5) * img->px[((size_t)(y + dy) * img->w + x + dx) * C + c];
                        scratch->px[((size_t)y * img->w + x) * C + c] = clamp_u8(s / 13.0);
                    }
        }
        blend(img, scratch, factor);
        break;
    }
    case RA_SHEAR_X: case RA_SHEAR_Y: {
        double s = sign * level * 0.3;
        double m[6] = {1, op == RA_SHEAR_X ? s : 0, 0, op == RA_SHEAR_Y ? s : 0, 1, 0};
        affine(img, scratch, m);
        break;
    }
    case RA_TRANSLATE_X: case RA_TRANSLATE_Y: { /* relative: up to 0.45 of the side */
        double t = sign * level * 0.45;
        double m[6] = {1, 0, op == RA_TRANSLATE_X ? t * img->w : 0, 0, 1, op == RA_TRANSLATE_Y ? t * img->h : 0};
        affine(img, scratch, m);
        break;
    }
    default: break;
    }
}

void randaugment_apply(const randaugment *ra, image *img, image *scratch, rng *r) {
    for (int i = 0; i < ra->num_ops; i++) {
        ra_op op = (ra_op)rng_below(r, RA_OP_COUNT);
        if (rng_uniform(r) >= 0.5f) continue;
        double m = ra->magnitude;
        if (ra->mstd > 0) m += ra->mstd * rng_normal(r);
        m = m < 0 ? 0 : m > 10 ? 10 : m;
        bool negate = rng_uniform(r) < 0.5f;
        randaugment_op(op, m, negate, img, scratch);
    }
}
