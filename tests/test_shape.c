/* Shape ops: values against index formulas, finite-difference gradients, shape errors. */
#include "../src/ops/ops.h"
#include "gradcheck.h"

static tensor *permute_fn(tensor **in, const void *ctx) { return op_permute(in[0], ctx); }

TEST(permute_values_and_grad) {
    rng r;
    rng_seed(&r, 31, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 3, 5, 7, 3);
    static const int perms[][5] = {{2, 0, 3, 1, 4}, {0, 1, 2, 4, 3}, {4, 3, 2, 1, 0}, {1, 0, 2, 3, 4}};
    for (int p = 0; p < 4; p++) {
        const int *perm = perms[p];
        tensor *y = op_permute(x, perm);
        int c[5];
        for (c[0] = 0; c[0] < 2; c[0]++)
            for (c[1] = 0; c[1] < 3; c[1]++)
                for (c[2] = 0; c[2] < 5; c[2]++)
                    for (c[3] = 0; c[3] < 7; c[3]++)
                        for (c[4] = 0; c[4] < 3; c[4]++) {
                            int64_t off = 0;
                            for (int k = 0; k < 5; k++) off = off * y->shape[k] + c[perm[k]];
                            float want = x->data[(((c[0] * 3 + c[1]) * 5 + c[2]) * 7 + c[3]) * 3 + c[4]];
                            EXPECT(y->data[off] == want, "perm %d", p);
                        }
        EXPECT(GRADCHECK(permute_fn, perm, x), "perm %d", p);
    }
    EXPECT_ERROR(op_permute(x, (int[]){0, 0, 1, 2, 3}), "is not a permutation");
}

static tensor *transpose_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_transpose(in[0], 1, -1);
}

TEST(transpose_swaps_two_dims) {
    rng r;
    rng_seed(&r, 32, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7);
    tensor *y = transpose_fn((tensor *[]){x}, NULL);
    EXPECT(y->shape[1] == 7 && y->shape[2] == 5, "shape");
    EXPECT(y->data[(2 * 7 + 4) * 5 + 3] == x->data[(2 * 5 + 3) * 7 + 4], "value");
    EXPECT(GRADCHECK(transpose_fn, NULL, x), "transpose");
}

typedef struct {
    int dim;
} dim_ctx;

static tensor *concat_fn(tensor **in, const void *ctx) {
    return op_concat(3, in, ((const dim_ctx *)ctx)->dim);
}

TEST(concat_values_and_grad) {
    rng r;
    rng_seed(&r, 33, RNG_TEST);
    for (int dim = 0; dim < 3; dim++) {
        int sa[3] = {3, 5, 7}, sb[3] = {3, 5, 7}, sc[3] = {3, 5, 7};
        sb[dim] = 2, sc[dim] = 1;
        tensor *a = test_leaf(&r, 1, 3, sa), *b = test_leaf(&r, 1, 3, sb), *c = test_leaf(&r, 1, 3, sc);
        tensor *y = concat_fn((tensor *[]){a, b, c}, &(dim_ctx){dim});
        EXPECT(y->shape[dim] == sa[dim] + 3, "dim %d size", dim);
        /* the last element of y is the last element of c; the first is a's */
        EXPECT(y->data[y->numel - 1] == c->data[c->numel - 1] && y->data[0] == a->data[0], "dim %d", dim);
        EXPECT(GRADCHECK(concat_fn, &(dim_ctx){dim}, a, b, c), "concat dim %d", dim);
    }
    tensor *a = RANDN(&r, 1, 3, 5), *b = RANDN(&r, 1, 4, 6);
    EXPECT_ERROR(op_concat(2, (tensor *[]){a, b}, 0), "differ in dim 1");
}

static tensor *slice_fn(tensor **in, const void *ctx) {
    return op_slice(in[0], ((const dim_ctx *)ctx)->dim, 1, 2);
}

static tensor *split_fn(tensor **in, const void *ctx) {
    (void)ctx;
    tensor *parts[3];
    op_split(in[0], -1, 3, (int[]){2, 4, 1}, parts);
    return op_add(op_slice(parts[1], -1, 0, 1), op_mul(parts[2], op_slice(parts[0], -1, 1, 1)));
}

TEST(slice_split_values_and_grad) {
    rng r;
    rng_seed(&r, 34, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7);
    for (int dim = 0; dim < 3; dim++) {
        tensor *y = slice_fn((tensor *[]){x}, &(dim_ctx){dim});
        int idx[3] = {1, 1, 1}, src[3] = {1, 1, 1};
        src[dim] = idx[dim] + 1;
        EXPECT(y->data[(idx[0] * y->shape[1] + idx[1]) * y->shape[2] + idx[2]] ==
                   x->data[(src[0] * 5 + src[1]) * 7 + src[2]],
               "slice dim %d", dim);
        EXPECT(GRADCHECK(slice_fn, &(dim_ctx){dim}, x), "slice dim %d", dim);
    }
    EXPECT(GRADCHECK(split_fn, NULL, x), "split");
    EXPECT_ERROR(op_slice(x, 1, 3, 3), "slice [3, 6) of dim 1 is outside (3, 5, 7)");
    tensor *parts[2];
    EXPECT_ERROR(op_split(x, 2, 2, (int[]){3, 3}, parts), "split: sizes sum to 6");
}

static tensor *reshape_fn(tensor **in, const void *ctx) {
    (void)ctx;
    return op_mul(RESHAPE(in[0], 5, 21), RESHAPE(in[0], 5, 21));
}

TEST(reshape_shares_data_and_grad) {
    rng r;
    rng_seed(&r, 35, RNG_TEST);
    tensor *x = LEAF(&r, 1, 3, 5, 7);
    tensor *y = RESHAPE(x, 7, 15);
    EXPECT(y->data == x->data && y->shape[0] == 7, "reshape copies");
    EXPECT(GRADCHECK(reshape_fn, NULL, x), "reshape");
    EXPECT_ERROR(RESHAPE(x, 4, 26), "reshape: (3, 5, 7) has 105 elements, the new shape 104");
}

/* whether the view's gradient is its input's buffer once the view's reader has run */
typedef struct {
    tensor *view, *input;
    int reader;
    bool shared;
} view_grads;

static void note_sharing(int node, void *ctx) {
    view_grads *v = ctx;
    if (node == v->reader) v->shared = v->view->grad && v->view->grad == v->input->grad;
}

/* A view whose input has a gradient already adds into that one (no buffer of its own to zero and
 * add back); one whose input has none yet gets its own, which its reshape hands over. x is read
 * by the view and by x * 3, before or after it (the backward runs the later reader first). */
TEST(reshape_view_takes_its_inputs_gradient) {
    rng r;
    rng_seed(&r, 36, RNG_TEST);
    for (int x_read_later = 0; x_read_later < 2; x_read_later++) {
        tensor *x = LEAF(&r, 1, 3, 5, 7), *b = x_read_later ? NULL : op_scale(x, 3.0f);
        view_grads v = {RESHAPE(x, 7, 15), x, 0, false};
        v.reader = tape_size(); /* the next node: the view's reader */
        tensor *a = RESHAPE(op_scale(v.view, 2.0f), 3, 5, 7);
        if (x_read_later) b = op_scale(x, 3.0f);
        tensor *y = op_add(a, b);
        float seed[105];
        for (int i = 0; i < 105; i++) seed[i] = 1.0f;
        tape_set_backward_hook(note_sharing, &v);
        tape_backward_from(y, seed);
        tape_set_backward_hook(NULL, NULL);
        int wrong = 0;
        for (int i = 0; i < 105; i++) wrong += x->grad[i] != 5.0f;
        EXPECT(wrong == 0, "x read later %d: %d of x's gradients are not 2 + 3", x_read_later,
               wrong);
        EXPECT(v.shared == x_read_later, "x read later %d: the view's gradient is x's: %d",
               x_read_later, v.shared);
        tape_reset();
    }
}
