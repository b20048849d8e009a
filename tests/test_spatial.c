/* Window partition/reverse (with shift), relative-position gather: index formulas, round trips,
 * gradients. */
#include "../src/cpu/spatial.h"
#include "../src/ops/ops.h"
#include "gradcheck.h"

typedef struct {
    int wh, ww, shift;
} win_ctx;

static tensor *partition_fn(tensor **in, const void *ctx) {
    const win_ctx *c = ctx;
    return op_window_partition(in[0], c->wh, c->ww, c->shift);
}

static tensor *reverse_fn(tensor **in, const void *ctx) {
    const win_ctx *c = ctx;
    return op_window_reverse(in[0], 6, 9, c->wh, c->ww, c->shift);
}

/* windows made by another op have no gradient yet: the backward copies it in whole (the tests'
 * arena hands that memory out as NaN) */
static tensor *reverse_of_product_fn(tensor **in, const void *ctx) {
    const win_ctx *c = ctx;
    return op_window_reverse(op_scale(in[0], 0.9f), 6, 9, c->wh, c->ww, c->shift);
}

TEST(window_partition_layout_round_trip_and_grad) {
    rng r;
    rng_seed(&r, 61, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 6, 9, 5);
    const win_ctx cases[] = {{3, 3, 0}, {6, 3, 0}, {2, 9, 0}, {6, 9, 0}, {3, 3, 1}, {2, 3, -2}};
    for (int i = 0; i < 6; i++) {
        const win_ctx *c = &cases[i];
        tensor *w = partition_fn((tensor *[]){x}, c);
        int nh = 6 / c->wh, nw = 9 / c->ww;
        EXPECT(w->shape[0] == 2 * nh * nw && w->shape[1] == c->wh * c->ww, "shape");
        /* token (y, x) of window (b, i, j) is pixel (i*wh + y, j*ww + x) of torch.roll(map, -shift),
         * which is map pixel ((i*wh + y + shift) mod 6, (j*ww + x + shift) mod 9) */
        bool layout = true;
        for (int b = 0; b < 2; b++)
            for (int wi = 0; wi < nh; wi++)
                for (int wj = 0; wj < nw; wj++)
                    for (int y = 0; y < c->wh; y++)
                        for (int xx = 0; xx < c->ww; xx++) {
                            int my = ((wi * c->wh + y + c->shift) % 6 + 6) % 6;
                            int mx = ((wj * c->ww + xx + c->shift) % 9 + 9) % 9;
                            float got = w->data[(((b * nh + wi) * nw + wj) * c->wh * c->ww + y * c->ww + xx) * 5 + 3];
                            layout &= got == x->data[((b * 6 + my) * 9 + mx) * 5 + 3];
                        }
        EXPECT(layout, "case %d layout", i);
        EXPECT((w->data == x->data) == (nh * nw == 1 && c->shift == 0), "case %d: a copy exactly when "
               "there is more than one window or a shift", i);
        tensor *back = reverse_fn((tensor *[]){w}, c);
        EXPECT(max_rel_diff(back->data, x->data, x->numel) == 0, "case %d round trip", i);
        EXPECT(GRADCHECK(partition_fn, c, x), "partition case %d", i);
        tensor *wl = LEAF(&r, 1, 2 * nh * nw, c->wh * c->ww, 5);
        EXPECT(GRADCHECK(reverse_fn, c, wl), "reverse case %d", i);
        EXPECT(GRADCHECK(reverse_of_product_fn, c, wl), "reverse of made windows, case %d", i);
    }
    EXPECT_ERROR(op_window_partition(x, 4, 3, 0), "4x3 windows do not tile (2, 6, 9, 5)");
}

static tensor *partition_channels_fn(tensor **in, const void *ctx) {
    const win_ctx *c = ctx;
    return op_window_partition_channels(in[0], 1, 3, c->wh, c->ww, c->shift);
}

/* channels 1..4 of the map: as slicing them out first, without the copy (also for one window) */
TEST(window_partition_channels_equals_the_sliced_map_and_grad) {
    rng r;
    rng_seed(&r, 62, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 6, 9, 5);
    const win_ctx cases[] = {{3, 3, 1}, {6, 9, 0}};
    for (int i = 0; i < 2; i++) {
        const win_ctx *c = &cases[i];
        tensor *fused = partition_channels_fn((tensor *[]){x}, c);
        tensor *chain = op_window_partition(op_slice(x, 3, 1, 3), c->wh, c->ww, c->shift);
        EXPECT(tensor_same_shape(fused, chain) && max_rel_diff(fused->data, chain->data, chain->numel) == 0,
               "case %d: forward", i);
        double err = backward_difference(chain, fused, 1, (tensor *[]){x});
        EXPECT(err < 1e-6, "case %d: gradients differ from the sliced map's by %g", i, err);
        EXPECT(GRADCHECK(partition_channels_fn, c, x), "case %d", i);
    }
    EXPECT_ERROR(op_window_partition_channels(x, 3, 3, 3, 3, 0), "channels 3..6 of (2, 6, 9, 5)");
}

static tensor *gather_fn(tensor **in, const void *ctx) { return op_relpos_gather(in[0], ctx, 6); }

TEST(relpos_index_and_gather) {
    int idx[16];
    relpos_index_swin(idx, 2, 2);
    /* 2x2 window: tokens (0,0) (0,1) (1,0) (1,1); table side 3 */
    const int want[16] = {4, 3, 1, 0, 5, 4, 2, 1, 7, 6, 4, 3, 8, 7, 5, 4};
    for (int k = 0; k < 16; k++) EXPECT(idx[k] == want[k], "index[%d] = %d, want %d", k, idx[k], want[k]);
    static int index6[36];
    relpos_index_swin(index6, 2, 3); /* 2x3 window: table (3 * 5, heads) */
    rng r;
    rng_seed(&r, 63, RNG_TEST);
    tensor *table = LEAF(&r, 1, 15, 3);
    tensor *out = gather_fn((tensor *[]){table}, index6);
    EXPECT(out->data[2 * 36 + 1 * 6 + 4] == table->data[index6[1 * 6 + 4] * 3 + 2], "gather value");
    EXPECT(GRADCHECK(gather_fn, index6, table), "relpos gather");
    int bad[36] = {0};
    bad[5] = 15;
    EXPECT_ERROR(op_relpos_gather(table, bad, 6), "index[5] = 15 outside the 15 rows");
}
