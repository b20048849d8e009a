/* A square grid of embeddings resized by bicubic interpolation, as the official fine-tuning scripts
 * resize a pretrained position embedding for another input size (DeiT's main.py): PyTorch's
 * F.interpolate(mode="bicubic", align_corners=False), the cubic convolution of a = -0.75 with the
 * edge rows repeated, rows first along x, then along y. */
#pragma once

/* dst (g1 x g1 cells of C floats, row-major) from src (g0 x g0 cells of C floats) */
void grid_resample_bicubic(const float *src, int g0, float *dst, int g1, int C);
