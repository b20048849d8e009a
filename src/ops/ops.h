/* The op library: every op checks shapes (CHECK, printing them), runs its CPU kernel, and records a
 * tape node when an input needs a gradient. Outputs are new arena tensors. Layouts: tokens are
 * (B, N, C); feature maps are channels-last (B, H, W, C) — a token sequence viewed as an image —
 * unless stated. One family per file in src/ops/, its raw kernels in src/cpu/ under the same name. */
#pragma once
#include "../core/rng.h"
#include "../core/tensor.h"

/* Multiply-accumulates of every forward op since the last reset, counted as fvcore does: linear,
 * matmul and conv MACs, LayerNorm as 5 per element, bilinear resize as 4 per output, adaptive
 * pooling as 1 per input; softmax, activations and additions are free. */
extern double op_macs;

/* Drop path (stochastic depth) of one residual branch, drawn before the branch runs: each sample's
 * branch is zeroed with probability p, else scaled by 1/(1-p). Where it drops some samples but not
 * all, the branch runs on the kept ones alone: its first op, given d (op_layernorm,
 * op_layernorm_linear, op_layernorm_windows), takes their rows one sample after another, and the
 * residual step given d adds the branch's rows to theirs. NULL, or p 0: no drop path. */
typedef struct drop_path {
    tensor *mask;      /* each sample's factor, 1/(1-p) or 0, in the device's memory; NULL: p 0 */
    const float *keep; /* the factors on the host, for the step */
    int samples, kept;
} drop_path;
/* (drawn in regularize.c) r may be NULL for p 0 */
drop_path op_drop_path(float p, rng *r, int samples);
/* d's kept samples when the branch from x runs on them alone, else NULL; stops naming `op` when d
 * was drawn for another number of samples than x's */
const float *drop_path_kept(const drop_path *d, const tensor *x, const char *op);

/* ---- matmul.c ---- */
/* x (..., in), w (out, in) as nn.Linear, b (out) or NULL -> (..., out) */
tensor *op_linear(tensor *x, tensor *w, tensor *b);
/* op_linear restricted to the output features [row0, row0 + rows) of w and b: q, k and v of a fused
 * qkv projection each come out of their own GEMM instead of a copy of the whole output */
tensor *op_linear_rows(tensor *x, tensor *w, tensor *b, int row0, int rows);
/* the n outputs of x times w's n blocks of consecutive rows (with b's), each its own tensor: the
 * q, k and v of one qkv layer. One tape node: its backward takes the chunks' gradients in bf16
 * where they all are (attention's, op_attention) and then runs one product for x's gradient and
 * one for w's. */
void op_linear_chunks(tensor *x, tensor *w, tensor *b, int n, tensor **out);
/* op_linear_chunks of n chunks of `rows` rows each, chunk i from row row0 + i stride of w (and b):
 * one branch's q, k and v out of a qkv layer shared by several (CSwin's stripes) */
void op_linear_strided_chunks(tensor *x, tensor *w, tensor *b, int n, int rows, int row0,
                              int stride, tensor **out);
/* a (..., M, K) (or (..., K, M) when trans_a), b (..., K, N) (or (..., N, K) when trans_b), equal
 * leading dims -> alpha * a·b of shape (..., M, N) */
tensor *op_matmul(tensor *a, tensor *b, bool trans_a, bool trans_b, float alpha);

/* ---- elementwise.c ---- */
/* numpy broadcasting (dims aligned from the right, size-1 dims stretch) over at most 5 dims */
tensor *op_add(tensor *a, tensor *b);
tensor *op_mul(tensor *a, tensor *b);
tensor *op_div(tensor *a, tensor *b);
/* broadcast x to shape (numpy rules); the backward sums over the stretched dims */
tensor *op_expand(tensor *x, int ndim, const int *shape);
tensor *op_scale(tensor *x, float s);      /* s * x */
tensor *op_add_scalar(tensor *x, float s); /* x + s */
tensor *op_gelu(tensor *x);                /* exact: x/2 (1 + erf(x/sqrt 2)) */
tensor *op_relu(tensor *x);
tensor *op_softplus(tensor *x);            /* log(1 + e^x), as torch (threshold 20) */
tensor *op_pow(tensor *x, float p);        /* x^p; x > 0 unless p is an integer */

/* ---- shape.c ---- */
/* same data, new shape (equal numel); at most 5 dims */
tensor *op_reshape(tensor *x, int ndim, const int *shape);
#define RESHAPE(x, ...)                                                                            \
    op_reshape((x), (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})
/* out.shape[i] = x.shape[perm[i]] */
tensor *op_permute(tensor *x, const int *perm);
tensor *op_transpose(tensor *x, int d0, int d1);
/* n (<= 4) tensors equal but along dim */
tensor *op_concat(int n, tensor *const *xs, int dim);
/* x[..., start:start+len, ...] along dim; gathers the class token, splits q/k/v */
tensor *op_slice(tensor *x, int dim, int start, int len);
/* n consecutive slices of the given sizes along dim into out[] */
void op_split(tensor *x, int dim, int n, const int *sizes, tensor **out);

/* ---- norm.c ---- */
/* over the last dim; w, b (C). Given d (the drop path of the branch it begins, or NULL), the rows
 * of the samples d keeps (drop_path_kept), one sample after another. So for the three below. */
tensor *op_layernorm(tensor *x, tensor *w, tensor *b, float eps, const drop_path *d);
/* op_linear(op_layernorm(x, ln_w, ln_b, eps), w, b) keeping only the row statistics: the backward
 * recomputes the normalised rows (the input of an MLP's fc1) */
tensor *op_layernorm_linear(tensor *x, tensor *ln_w, tensor *ln_b, float eps, tensor *w, tensor *b,
                            const drop_path *d);
/* op_layernorm_linear with its output kept as bf16 (tensor_new_bf16) while the tape records: an
 * MLP's hidden layer under --precision bf16, which only op_residual_linear's GELU reads (other ops
 * given it stop with an error) */
tensor *op_layernorm_linear_bf16(tensor *x, tensor *ln_w, tensor *ln_b, float eps, tensor *w,
                                 tensor *b, const drop_path *d);
/* op_window_partition(op_layernorm(x, w, b, eps), wh, ww, shift) of x (B, H, W, C) keeping only the
 * row statistics: the windows are the only copy of the normalised map (Swin's norm1, CSwin's
 * stripes). Under --precision bf16, while the tape records, the windows are bf16 (tensor_new_bf16):
 * inputs of linear layers only (op_linear reads them as stored; other ops stop with an error). */
tensor *op_layernorm_windows(tensor *x, tensor *w, tensor *b, float eps, int wh, int ww, int shift,
                             const drop_path *d);
/* op_layernorm_windows into n sets of windows at once, set i wh[i] x ww[i], out[i]: one tape node,
 * whose backward adds the sets' gradients in map order and runs one layernorm backward (CSwin's
 * two branches, horizontal and vertical stripes of one norm1) */
#define LAYERNORM_WINDOW_SETS_MAX 2
void op_layernorm_window_sets(tensor *x, tensor *w, tensor *b, float eps, int n, const int *wh,
                              const int *ww, int shift, const drop_path *d, tensor **out);
/* Euclidean norm over the last dim, keeping it: (..., C) -> (..., 1) */
tensor *op_l2norm(tensor *x);
/* softmax over the last dim of x + bias; bias NULL or of a shape equal to the trailing dims of x
 * (broadcast over the leading ones); bias may require a gradient */
tensor *op_softmax(tensor *x, tensor *bias);
/* mean over dim; keepdim keeps it as size 1 */
tensor *op_mean(tensor *x, int dim, bool keepdim);

/* ---- conv.c ---- */
/* channels-last conv: x (B, H, W, Cin), w (Cout, Cin/groups, kh, kw) as nn.Conv2d, b (Cout) or NULL
 * -> (B, Ho, Wo, Cout); zero padding */
tensor *op_conv2d(tensor *x, tensor *w, tensor *b, int stride, int pad, int groups);
/* depthwise, stride 1, 'same' zero padding (k odd): x (B, H, W, C), w (Cw, 1, k, k), b (Cw) or NULL,
 * Cw = C or a divisor of it: channel c takes kernel c mod Cw (FLatten's DWC, shared by the heads) */
tensor *op_dwconv2d(tensor *x, tensor *w, tensor *b);
/* base + op_dwconv2d(x, w, b) in one op (base shaped like x: the attention output a DWC or LePE
 * branch is added to) */
tensor *op_dwconv2d_add(tensor *x, tensor *w, tensor *b, tensor *base);
/* op_dwconv2d_add of x's channels [c0, c0 + channels) only (no op_slice copy first), written into
 * base's memory: base is consumed (nothing may read it afterwards, as the output of an attention
 * core that only the DWC or LePE reads), so the sum costs no activation memory of its own */
tensor *op_dwconv2d_add_into(tensor *x, int c0, int channels, tensor *w, tensor *b, tensor *base);
/* op_dwconv2d_add_into for tokens: x and base (B, lead + h*w, C), whose h x w grids follow `lead`
 * other tokens (a class token) that pass through unchanged, with no copies of the grids (op_slice)
 * nor of the result (op_concat) */
tensor *op_dwconv2d_add_tokens_into(tensor *x, int lead, int h, int w, tensor *wt, tensor *b,
                                    tensor *base);
/* nn.AdaptiveAvgPool2d: x (B, H, W, C) -> (B, oh, ow, C), bins [floor(i*H/oh), ceil((i+1)*H/oh)) */
tensor *op_adaptive_avg_pool2d(tensor *x, int oh, int ow);
/* the same of the h x w grid of tokens x (B, lead + h*w, C) that follows `lead` others */
tensor *op_adaptive_avg_pool2d_tokens(tensor *x, int lead, int h, int w, int oh, int ow);
/* F.interpolate(mode='bilinear', align_corners=False) of planes: x (P, Hi, Wi) -> (P, Ho, Wo) */
tensor *op_interp_bilinear(tensor *x, int ho, int wo);

/* ---- spatial.c ---- */
/* x (B, H, W, C) -> (B * H/wh * W/ww, wh*ww, C), the windows of torch.roll(x, (-shift, -shift),
 * (1, 2)) in row-major order (Swin's shifted windows; shift 0 for plain ones); wh x ww rectangles
 * also give CSwin's stripes (H_sp x W_sp). One window of the whole unshifted map is a reshape (a
 * view, no copy); so is the inverse. */
tensor *op_window_partition(tensor *x, int wh, int ww, int shift);
/* op_window_partition of x's channels [c0, c0 + channels) only (no op_slice copy first) */
tensor *op_window_partition_channels(tensor *x, int c0, int channels, int wh, int ww, int shift);
/* the same with the windows kept as bf16 (tensor_new_bf16) while the tape records under
 * --precision bf16: windows that only attention's products read, as q and k (op_attention reads
 * them; other ops stop with an error) */
tensor *op_window_partition_channels_bf16(tensor *x, int c0, int channels, int wh, int ww, int shift);
/* inverse: x (B * H/wh * W/ww, wh*ww, C) -> (B, H, W, C), rolled back by +shift */
tensor *op_window_reverse(tensor *x, int H, int W, int wh, int ww, int shift);
/* relative position bias: table (T, NH), index (N*N) ints in [0, T) -> (NH, N, N) with
 * out[h, i, j] = table[index[i*N + j], h]; index must outlive the step */
tensor *op_relpos_gather(tensor *table, const int *index, int n);

/* ---- regularize.c ---- */
/* inverted dropout with keep prob 1-p; identity (returns x) when p == 0 */
tensor *op_dropout(tensor *x, float p, rng *r);
/* a block's residual step: res + drop_path(op_linear(gelu ? op_gelu(h) : h, w, b)), res (B, ...,
 * N), w (N, K), b (N) or NULL, d the branch's drop path or NULL. h (..., K) holds the rows of every
 * sample, or, where d drops some but not all, of the kept samples alone (drop_path_kept), as the
 * branch's first op given d left them. Only the mask is kept: not the branch's output, nor the
 * GELU, which the backward recomputes from h. */
tensor *op_residual_linear(tensor *res, tensor *h, tensor *w, tensor *b, bool gelu,
                           const drop_path *d);
/* A block's MLP step: op_residual_linear(res, op_layernorm_linear(res, ln_w, ln_b, eps, w1, b1, d),
 * w2, b2, true, d), recorded as those two nodes. With at most mlp_chunked_max_channels() channels
 * it runs in cache-sized row chunks, one per thread at a time (src/cpu/mlp.h), skipping the rows of
 * the samples d drops; above, as the two ops. Under --precision bf16 the hidden layer kept for the
 * backward is bf16, as autocast keeps fc1's output: the GELU reads it rounded in the forward as in
 * the backward, and fc2's product rounds its operands anyway; it is the step's largest activation,
 * 4 channels for each of res's. In inference (nothing recorded) the chunked step's output takes the
 * storage of `into` when given: a tensor of res's size that nothing reads again, such as the
 * block's input once its attention branch is added, so that the block's output lies below the
 * block's intermediates and outlives their release without a copy (tensor_keep). */
tensor *op_mlp_residual(tensor *res, tensor *ln_w, tensor *ln_b, float eps, tensor *w1, tensor *b1,
                        tensor *w2, tensor *b2, const drop_path *d, tensor *into);
/* The widest res whose MLP step runs in row chunks. In fp32 each chunk's products pack the weights
 * again, which above 192 channels costs more than the hidden tensor's trips through memory that the
 * chunks save; bf16 packs them once a step and gains at every width measured, to swin_b's 1024
 * (docs/performance.md). */
#define MLP_CHUNKED_MAX_CHANNELS_FP32 192
#define MLP_CHUNKED_MAX_CHANNELS_BF16 1024
int mlp_chunked_max_channels(void); /* of the precision selected */
/* op_residual_linear (no GELU) of the concatenation [h0 | h1] along the last dim, which is never
 * stored: CSwin's two stripe branches, ELFATT's global and local heads */
tensor *op_residual_linear_split(tensor *res, tensor *h0, tensor *h1, tensor *w, tensor *b,
                                 const drop_path *d);
/* op_residual_linear (no GELU) of a branch h in wh x ww windows (op_window_partition's layout with
 * that shift) onto the map res (B, H, W, N): the projection runs on the windows and its output goes
 * straight back into map order, so the map-order branch is never stored. */
tensor *op_residual_linear_windows(tensor *res, tensor *h, tensor *w, tensor *b, int wh, int ww,
                                   int shift, const drop_path *d);

/* ---- attention.c ---- */
/* softmax attention with the heads merged: q (b, n, heads·d), k, v (b, m, heads·d) -> (b, n, heads·d),
 * per sequence and head softmax(scale q kᵀ + bias + mask) v. bias: (heads, n, m) elements shared by
 * every sequence, may require a gradient, or NULL; mask: constant (windows, n, m) floats on the host,
 * sequence s taking window s % windows (b a multiple of windows), outliving the step, or NULL. */
tensor *op_attention(tensor *q, tensor *k, tensor *v, int heads, float scale, tensor *bias,
                     const float *mask, int windows);

/* ---- linear_attention.c (FLatten, ELFATT) ---- */
/* the focusing function over the last dim: f_p(u) = |u| / |u^p| u^p with u = (relu(x) + 1e-6) / t,
 * temperature t (C elements, > 0) */
tensor *op_focus(tensor *x, tensor *temperature, float p);
/* q (b, n, heads·d), k, v (b, m, heads·d) -> (b, n, heads·d): per head
 * out_i = q_i (kᵀ v / m) / (q_i · mean_j k_j + 1e-6) */
tensor *op_linear_attention(tensor *q, tensor *k, tensor *v, int heads);
/* ELFATT's global heads on channels [c0, c0 + channels) of q (b, n, C), k, v (b, m, C) ->
 * (b, n, channels): per head softmax_features(q) (softmax_tokens(k)ᵀ v), no scale */
tensor *op_softmax_linear_attention(tensor *q, tensor *k, tensor *v, int heads, int c0, int channels);

/* ---- loss.c ---- */
/* mean over the batch of -sum_k target[b,k] log softmax(logits)[b,k]; logits, target (B, K) */
tensor *op_cross_entropy(tensor *logits, tensor *target);
/* hard labels (B ints in [0, K)) with label smoothing: target = (1-s) onehot + s/K */
tensor *op_cross_entropy_labels(tensor *logits, const int *labels, float smoothing);
/* mean over all elements of (pred - target)^2 -> (1); pred and target of one shape (both may
 * require a gradient); the SiT transport loss (per-sample mean, then the batch mean, is the same) */
tensor *op_mse(tensor *pred, tensor *target);
/* DiT's diffusion loss (src/cpu/ddpm_terms.h) -> (1): out (B, H, W, 2C) the network's eps_hat and
 * variance values; x0 (the data), xt (the noised data), eps (the noise drawn) (B, H, W, C); coefs
 * (B, DDPM_COEFS) of each sample's time step. The gradient reaches out only. */
tensor *op_ddpm_loss(tensor *out, tensor *x0, tensor *xt, tensor *eps, tensor *coefs);
