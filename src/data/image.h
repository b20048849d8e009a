/* 8-bit image primitives used by the transforms: decoding (stb_image), PIL-style resampling of a
 * region with antialiasing (bilinear / bicubic filters widened when downscaling, as Pillow does),
 * and affine warps for RandAugment's geometric ops. Images are row-major (h, w, c) uint8. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

typedef struct image {
    uint8_t *px;
    int w, h, c;
} image;

typedef enum { FILTER_BILINEAR, FILTER_BICUBIC } resample_filter;

/* Resamples the region (x0, y0, rw, rh) of src to dst (dw x dh, same channels). */
void image_resize_region(const image *src, double x0, double y0, double rw, double rh, image *dst,
                         resample_filter f);
/* dst(x, y) = src(a x + b y + c, d x + e y + f) (Pillow's inverse affine, pixel centres), bilinear,
 * outside pixels take fill[c] */
void image_affine(const image *src, image *dst, const double m[6], const uint8_t *fill);
