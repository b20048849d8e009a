/* The token-layout ops (src/ops/spatial.c) on the device against the CPU. */
#include "cpu/spatial.h"
#include "device_check.h"
#include "ops/ops.h"

typedef struct {
    int c0, channels, wh, ww, shift;
} window_ctx;

static tensor *window_partition(tensor **in, const void *ctx) {
    const window_ctx *c = ctx;
    return op_window_partition_channels(in[0], c->c0, c->channels, c->wh, c->ww, c->shift);
}

static tensor *window_reverse(tensor **in, const void *ctx) {
    const window_ctx *c = ctx;
    return op_window_reverse(in[0], 8, 12, c->wh, c->ww, c->shift);
}

/* a (B, H, W, C) map with W != H: shifted windows (4x6 by a negative shift), CSwin's stripes, a
 * channel slice (of shifted windows, and of the whole map) */
static const window_ctx window_cases[] = {
    {0, 19, 4, 4, 2}, {0, 19, 4, 6, -3}, {0, 19, 2, 12, 0},
    {0, 19, 8, 2, 1}, {5, 7, 4, 4, 2},   {3, 11, 8, 12, 0},
};

TEST(cuda_op_window_partition) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 21, RNG_TEST);
    for (size_t i = 0; i < sizeof(window_cases) / sizeof(window_cases[0]); i++) {
        const window_ctx *c = &window_cases[i];
        double err = DEVICE_CHECK(window_partition, c, LEAF(&r, 1.0f, 2, 8, 12, 19));
        EXPECT(err <= DEVICE_TOL, "channels %d+%d, %dx%d windows, shift %d: max rel err %.2e",
               c->c0, c->channels, c->wh, c->ww, c->shift, err);
    }
}

TEST(cuda_op_window_reverse) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 22, RNG_TEST);
    for (size_t i = 0; i < 4; i++) { /* the cases over all 19 channels */
        const window_ctx *c = &window_cases[i];
        tensor *x = LEAF(&r, 1.0f, 2 * (8 / c->wh) * (12 / c->ww), c->wh * c->ww, 19);
        double err = DEVICE_CHECK(window_reverse, c, x);
        EXPECT(err <= DEVICE_TOL, "%dx%d windows of an 8x12 map, shift %d: max rel err %.2e", c->wh,
               c->ww, c->shift, err);
    }
}

typedef struct {
    const int *index;
    int n;
} relpos_ctx;

static tensor *relpos_gather(tensor **in, const void *ctx) {
    const relpos_ctx *c = ctx;
    return op_relpos_gather(in[0], c->index, c->n);
}

TEST(cuda_op_relpos_gather) {
    REQUIRE_DEVICE();
    rng r;
    rng_seed(&r, 23, RNG_TEST);
    /* Swin's index of a 3x4 window (table (5 * 7, heads)), and a random one with many repeats */
    static int swin[144], random[144];
    relpos_index_swin(swin, 3, 4);
    for (int k = 0; k < 144; k++) random[k] = (int)(rng_u64(&r) % 9);
    relpos_ctx c = {swin, 12};
    double err = DEVICE_CHECK(relpos_gather, &c, LEAF(&r, 1.0f, 35, 5));
    EXPECT(err <= DEVICE_TOL, "swin index: max rel err %.2e", err);
    c.index = random;
    err = DEVICE_CHECK(relpos_gather, &c, LEAF(&r, 1.0f, 35, 5));
    EXPECT(err <= DEVICE_TOL, "random index: max rel err %.2e", err);
}
