/* Tensors laid over the input's grid resized for another input size, as the official fine-tuning
 * scripts do (DeiT's main.py; load_pretrained of Swin, Agent attention and FLatten; the Attention
 * Mediators' train_256to512.py): PyTorch's F.interpolate. Bicubic (align_corners=False): the cubic
 * convolution of a = -0.75 with the edge rows repeated, rows first along x, then along y. Linear:
 * align_corners=False's source position clamped at 0, or align_corners=True's ends on ends. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* dst (g1 x g1 cells of C floats, row-major) from src (g0 x g0 cells of C floats) */
void grid_resample_bicubic(const float *src, int g0, float *dst, int g1, int C);

/* dst (outer lines of n1 cells of inner floats) from src (outer lines of n0 cells of inner floats),
 * with align_corners=True where corners_aligned */
void line_resample_linear(const float *src, int n0, float *dst, int n1, int outer, int inner,
                          bool corners_aligned);

/* How one tensor of the official state_dicts is resized: position embeddings (DeiT's pos_embed
 * after its class token, PVT's pos_embedN, FLatten's positional_encoding), Swin's
 * relative_position_bias_table (a (2w-1)^2 grid of a value a head) and patch-embedding kernels by
 * bicubic interpolation of their square grids; Agent attention's biases over the grid's rows or
 * columns (ah/aw/ha/wa_bias) by linear interpolation along them. */
typedef struct {
    const char *what;     /* the plural name of such tensors, for a note */
    bool bicubic;         /* else linear along one axis */
    bool corners_aligned; /* linear: align_corners=True */
    int lead;             /* leading cells kept as they are (DeiT's class token) */
    int64_t outer, inner; /* grids or lines, and floats a cell */
    int n0, n1;           /* cells a side or a line: from, to */
} grid_resize;

/* Whose fine-tuning a resize follows: the classifiers' scripts above, or the Attention Mediators'
 * resolution fine-tune of SiT, which resizes the agent biases alone, with align_corners=True (its
 * fixed sin-cos pos_embed is the new model's own) */
typedef enum { RESIZE_AS_CLASSIFIERS, RESIZE_AS_MEDIATORS } resize_style;

/* r for the tensor `name` of shape `to` from one of shape `from` (ndim each); false where name is
 * no such tensor in style's fine-tuning, or the shapes differ but in its grid */
bool grid_resize_plan(const char *name, int ndim, const int64_t *from, const int64_t *to,
                      resize_style style, grid_resize *r);
void grid_resize_apply(const grid_resize *r, const float *src, float *dst);
