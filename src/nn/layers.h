/* Standard layers over the op library, each declaring its parameters under the official PyTorch
 * state_dict name (prefix + ".weight"/".bias") with the official init scheme. */
#pragma once
#include "../core/params.h"
#include "../ops/ops.h"

/* printf-style name in a static ring of buffers (params_add copies it) */
const char *nn_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

typedef struct nn_linear {
    tensor *w, *b; /* (out, in), (out) or NULL */
} nn_linear;
/* weight trunc_normal(0.02), bias zeros: the init of every Linear in DeiT/PVT/Swin/CSwin */
void nn_linear_init(nn_linear *l, param_store *ps, const char *name, int in, int out, bool bias);
tensor *nn_linear_forward(const nn_linear *l, tensor *x);
/* the output split into n equal chunks along the features (fused q/k/v projections) */
void nn_linear_chunks(const nn_linear *l, tensor *x, int n, tensor **out);

typedef struct nn_layernorm {
    tensor *w, *b;
    float eps;
} nn_layernorm;
void nn_layernorm_init(nn_layernorm *l, param_store *ps, const char *name, int dim, float eps);
tensor *nn_layernorm_forward(const nn_layernorm *l, tensor *x);

typedef struct nn_conv2d {
    tensor *w, *b; /* (out, in/groups, k, k), (out) or NULL */
    int stride, pad, groups;
} nn_conv2d;
/* PyTorch's default init: weight and bias ~ U(±1/sqrt(fan_in)) */
void nn_conv2d_init(nn_conv2d *c, param_store *ps, const char *name, int in, int out, int k,
                    int stride, int pad, int groups, bool bias);
/* channels-last x (B, H, W, in) -> (B, Ho, Wo, out); depthwise convs take the fast path */
tensor *nn_conv2d_forward(const nn_conv2d *c, tensor *x);

typedef struct nn_mlp {
    nn_linear fc1, fc2;
} nn_mlp;
/* fc1 (dim -> hidden), GELU, fc2 (hidden -> dim) as timm's Mlp */
void nn_mlp_init(nn_mlp *m, param_store *ps, const char *name, int dim, int hidden);
/* res + drop_path(fc2(gelu(fc1(norm(res))))) with the drop path d (or NULL): the pre-norm MLP as
 * one residual step, keeping neither the normalised input nor the GELU (op_mlp_residual, whose
 * `into` a block passes its input as) */
tensor *nn_mlp_residual(const nn_mlp *m, const nn_layernorm *norm, tensor *res, const drop_path *d,
                        tensor *into);
