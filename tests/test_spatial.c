/* Window partition/reverse, roll, relative-position gather: index formulas, round trips, gradients. */
#include "../src/cpu/spatial.h"
#include "../src/ops/ops.h"
#include "gradcheck.h"

typedef struct {
    int wh, ww;
} win_ctx;

static tensor *partition_fn(tensor **in, const void *ctx) {
    const win_ctx *c = ctx;
    return op_window_partition(in[0], c->wh, c->ww);
}

static tensor *reverse_fn(tensor **in, const void *ctx) {
    const win_ctx *c = ctx;
    return op_window_reverse(in[0], 6, 9, c->wh, c->ww);
}

TEST(window_partition_layout_round_trip_and_grad) {
    rng r;
    rng_seed(&r, 61, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 6, 9, 5);
    const win_ctx cases[] = {{3, 3}, {6, 3}, {2, 9}, {6, 9}};
    for (int i = 0; i < 4; i++) {
        const win_ctx *c = &cases[i];
        tensor *w = partition_fn((tensor *[]){x}, c);
        int nh = 6 / c->wh, nw = 9 / c->ww;
        EXPECT(w->shape[0] == 2 * nh * nw && w->shape[1] == c->wh * c->ww, "shape");
        /* token (y, x) of window (b, i, j) is map pixel (i*wh + y, j*ww + x) */
        int b = 1, wi = nh - 1, wj = nw - 1, y = c->wh - 1, xx = 0, ch = 3;
        float got = w->data[(((b * nh + wi) * nw + wj) * c->wh * c->ww + y * c->ww + xx) * 5 + ch];
        float want = x->data[((b * 6 + wi * c->wh + y) * 9 + wj * c->ww + xx) * 5 + ch];
        EXPECT(got == want, "case %d layout", i);
        tensor *back = op_window_reverse(w, 6, 9, c->wh, c->ww);
        EXPECT(max_rel_diff(back->data, x->data, x->numel) == 0, "case %d round trip", i);
        EXPECT(GRADCHECK(partition_fn, c, x), "partition case %d", i);
        tensor *wl = LEAF(&r, 1, 2 * nh * nw, c->wh * c->ww, 5);
        EXPECT(GRADCHECK(reverse_fn, c, wl), "reverse case %d", i);
    }
    EXPECT_ERROR(op_window_partition(x, 4, 3), "4x3 windows do not tile (2, 6, 9, 5)");
}

typedef struct {
    int sh, sw;
} roll_ctx;

static tensor *roll_fn(tensor **in, const void *ctx) {
    const roll_ctx *c = ctx;
    return op_roll(in[0], c->sh, c->sw);
}

TEST(roll_matches_torch_roll_and_grad) {
    rng r;
    rng_seed(&r, 62, RNG_TEST);
    tensor *x = LEAF(&r, 1, 2, 5, 7, 3);
    roll_ctx c = {-2, 3};
    tensor *y = roll_fn((tensor *[]){x}, &c);
    /* torch.roll: out[(i + s) mod n] = in[i] */
    EXPECT(y->data[((1 * 5 + 3) * 7 + 4) * 3 + 1] == x->data[((1 * 5 + 0) * 7 + 1) * 3 + 1], "value");
    tensor *back = op_roll(y, 2, -3);
    EXPECT(max_rel_diff(back->data, x->data, x->numel) == 0, "roll(-s) undoes roll(s)");
    EXPECT(GRADCHECK(roll_fn, &c, x), "roll");
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
