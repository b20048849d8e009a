/* Core: arena, tape bookkeeping, op table, rng, error checks. */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../src/core/clock.h"
#include "../src/core/memory.h"
#include "../src/core/threads.h"
#include "../src/ops/op_table.h"
#include "../src/ops/ops.h"
#include "test.h"

TEST(op_table_has_name_and_backward_for_every_op) {
    for (int i = 0; i < OP_COUNT; i++) {
        EXPECT(op_table[i].name != NULL, "op id %d has no name", i);
        EXPECT(op_table[i].backward != NULL, "op %s (id %d) has no backward", op_table[i].name, i);
    }
}

TEST(arena_reuses_one_block_after_growth) {
    arena a;
    arena_init(&a, 1024);
    for (int i = 0; i < 10; i++) arena_alloc(&a, 1000); /* spills over 10 chunks */
    EXPECT(a.peak >= 10000, "peak %zu", a.peak);
    arena_reset(&a);
    long before = vitc_heap_allocs;
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 10; i++) arena_alloc(&a, 1000);
        arena_reset(&a);
    }
    EXPECT(vitc_heap_allocs == before, "%ld heap allocations after the first step",
           vitc_heap_allocs - before);
    arena_free(&a);
}

TEST(arena_grows_to_the_peak_when_released_chunks_hid_it) {
    /* layer-by-layer inference releases its spilled chunks before the reset: the next steps must
     * still fit in one block instead of mapping and unmapping chunks at every layer */
    arena a;
    arena_init(&a, 1024);
    long before = 0;
    for (int step = 0; step < 3; step++) {
        if (step == 1) before = vitc_heap_allocs;
        arena_mark m = arena_get_mark(&a);
        arena_alloc(&a, 5000);
        arena_release(&a, m);
        arena_reset(&a);
    }
    EXPECT(vitc_heap_allocs == before, "%ld heap allocations after the first step", vitc_heap_allocs - before);
    arena_free(&a);
}

TEST(arena_keep_releases_the_rest_even_without_room_at_the_mark) {
    arena a;
    arena_init(&a, 1024);
    arena_alloc(&a, 900);
    arena_mark m = arena_get_mark(&a);
    arena_alloc(&a, 3000); /* spills into new chunks */
    float *data = arena_alloc(&a, 2000);
    for (int i = 0; i < 500; i++) data[i] = (float)i;
    float *kept = arena_keep(&a, m, data, 2000);
    EXPECT(a.used == m.used + 2048, "used %zu after keeping 2000 bytes past a mark at %zu", a.used, m.used);
    int wrong = 0;
    for (int i = 0; i < 500; i++) wrong += kept[i] != (float)i;
    EXPECT(wrong == 0, "%d of 500 kept values changed", wrong);
    arena_free(&a);
}

/* a block of 1 MiB moves down by the threads' shared copy when it clears its new place, by
 * memmove when it overlaps it (a gap of 64 KiB): the values arrive either way */
TEST(arena_keep_moves_a_large_block_apart_or_overlapping) {
    static const size_t gaps[] = {(size_t)2 << 20, (size_t)64 << 10};
    const size_t bytes = (size_t)1 << 20, n = bytes / sizeof(float);
    int threads = vitc_threads();
    for (int t = 1; t <= 2; t++)
        for (int g = 0; g < 2; g++) {
            vitc_set_threads(t);
            arena a;
            arena_init(&a, (size_t)8 << 20);
            arena_alloc(&a, 64); /* a mark in a chunk */
            arena_mark m = arena_get_mark(&a);
            arena_alloc(&a, gaps[g]);
            float *data = arena_alloc(&a, bytes);
            for (size_t i = 0; i < n; i++) data[i] = (float)i;
            float *kept = arena_keep(&a, m, data, bytes);
            size_t wrong = 0;
            for (size_t i = 0; i < n; i++) wrong += kept[i] != (float)i;
            EXPECT(kept == (float *)((char *)data - gaps[g]) && wrong == 0,
                   "%d threads, gap %zu: moved by %td bytes, %zu of %zu values changed", t, gaps[g],
                   (char *)data - (char *)kept, wrong, n);
            arena_free(&a);
        }
    vitc_set_threads(threads);
}

/* the kernels index their scratch by a thread's number in its team: nested teams, which
 * OMP_NUM_THREADS=4,2 (or OMP_MAX_ACTIVE_LEVELS, OMP_NESTED) turn on, would repeat the numbers
 * (eval under OMP_NUM_THREADS=4,2 scored another loss from run to run); the threads stay one team
 */
TEST(threads_are_one_team_whatever_the_environment_nests) {
#ifdef _OPENMP
    int threads = vitc_threads(), nested = 0;
    omp_set_max_active_levels(4); /* as OMP_NUM_THREADS=4,2 leaves it */
    vitc_set_threads(2);
#pragma omp parallel num_threads(2)
    {
#pragma omp parallel num_threads(2)
        {
#pragma omp atomic
            nested += omp_get_num_threads() > 1;
        }
    }
    EXPECT(nested == 0 && omp_get_max_active_levels() == 1, "%d nested threads in teams, %d levels",
           nested, omp_get_max_active_levels());
    vitc_set_threads(threads);
#else
    SKIP("a build without OpenMP (NO_OMP=1) has no teams");
#endif
}

TEST(arena_mark_release_restores_usage) {
    arena a;
    arena_init(&a, 256);
    arena_alloc(&a, 100);
    arena_mark m = arena_get_mark(&a);
    for (int i = 0; i < 5; i++) arena_alloc(&a, 200);
    arena_release(&a, m);
    EXPECT(a.used == 128, "used %zu after release", a.used);
    float *p = arena_alloc(&a, 64);
    EXPECT(((uintptr_t)p & 63) == 0, "arena pointer %p not 64-byte aligned", (void *)p);
    arena_free(&a);
}

TEST(arena_spare_blocks_are_reused_best_fit_split_and_merged) {
    arena a;
    arena_init(&a, 1 << 16);
    float *big = arena_alloc(&a, 4096), *small = arena_alloc(&a, 1024);
    arena_alloc(&a, 64); /* keeps big and small from reaching the top */
    big[0] = small[0] = 7;
    arena_give_back(&a, big, 4096);
    EXPECT_ERROR(arena_give_back(&a, big + 256, 64), "given back twice");
    arena_give_back(&a, small, 1024);
    EXPECT(a.n_spare == 1 && a.spare[0].data == big && a.spare[0].bytes == 5120,
           "neighbours did not merge: %d spare blocks, the first of %zu bytes", a.n_spare, a.spare[0].bytes);
    size_t used = a.used;
    float *p = arena_calloc_spare(&a, 1000);
    EXPECT(p == big && p[0] == 0 && a.used == used, "asked 1000 bytes: got %p (block at %p), first value %g",
           (void *)p, (void *)big, p == big ? p[0] : -1);
    EXPECT(a.n_spare == 1 && a.spare[0].data == (char *)big + 1024 && a.spare[0].bytes == 4096,
           "the rest of the block is not spare: %d blocks, %zu bytes", a.n_spare, a.spare[0].bytes);
    float *larger = arena_alloc(&a, 8192);
    arena_alloc(&a, 64);
    arena_give_back(&a, larger, 8192);
    EXPECT(arena_alloc_spare(&a, 4000) == (float *)((char *)big + 1024), "4000 bytes not from the "
           "smallest block that fits");
    arena_free(&a);
}

TEST(arena_give_back_at_the_top_lowers_it) {
    arena a;
    arena_init(&a, 1 << 16);
    arena_alloc(&a, 100);
    size_t base = a.used;
    float *x = arena_alloc(&a, 2000), *y = arena_alloc(&a, 3000);
    arena_give_back(&a, x, 2000); /* not at the top: spare */
    EXPECT(a.n_spare == 1 && a.used == base + 2048 + 3008, "x: %d spare, used %zu", a.n_spare, a.used);
    arena_give_back(&a, y, 3000); /* the top, merged with x below it */
    EXPECT(a.n_spare == 0 && a.used == base, "y: %d spare, used %zu (base %zu)", a.n_spare, a.used, base);
    EXPECT(arena_alloc(&a, 64) == x, "the next block does not start where x did");
    arena_free(&a);
}

TEST(arena_release_drops_and_trims_spare_blocks_past_the_mark) {
    arena a;
    arena_init(&a, 1 << 16);
    float *before = arena_alloc(&a, 1024);
    arena_mark m = arena_get_mark(&a);
    float *after = arena_alloc(&a, 1024), *late = arena_alloc(&a, 256);
    arena_alloc(&a, 64);
    arena_give_back(&a, late, 256);
    arena_give_back(&a, before, 1024);
    arena_give_back(&a, after, 1024); /* merges with both: straddles the mark */
    arena_release(&a, m);
    EXPECT(a.n_spare == 1 && a.spare[0].data == before && a.spare[0].bytes == 1024,
           "%d spare blocks after the release, the first of %zu bytes (1024 before the mark)", a.n_spare,
           a.n_spare ? a.spare[0].bytes : 0);
    arena_free(&a);
}

TEST(backward_reuses_consumed_gradients) {
    /* a chain of 16 ops: without reuse the reverse pass would hold 16 gradients of x's size */
    rng r;
    rng_seed(&r, 3, RNG_TEST);
    tensor *x = RANDN(&r, 64, 1024);
    x->requires_grad = true;
    tensor *y = x;
    for (int i = 0; i < 16; i++) y = op_gelu(y);
    tensor *loss = op_mean(RESHAPE(y, (int)y->numel), 0, false);
    size_t bytes = sizeof(float) * (size_t)x->numel, before = vitc_arena.used;
    tape_backward(loss);
    size_t grew = vitc_arena.used - before;
    EXPECT(grew <= 4 * bytes, "the reverse pass took %zu bytes, %.1f gradients of x's size", grew,
           (double)grew / (double)bytes);
    /* and the gradient is still right: d mean / d x[j] = (gelu^16)'(x[j]) / numel, by central differences */
    for (int j = 0; j < 3; j++) {
        double h = 1e-4, up = x->data[j] + h, down = x->data[j] - h;
        for (int i = 0; i < 16; i++) {
            up = 0.5 * up * (1 + erf(up / sqrt(2.0)));
            down = 0.5 * down * (1 + erf(down / sqrt(2.0)));
        }
        double want = (up - down) / (2 * h) / (double)x->numel;
        EXPECT(fabs(x->grad[j] - want) <= 1e-3 * fabs(want) + 1e-9, "dx[%d] = %g, want %g", j, x->grad[j], want);
    }
}

/* x -> X = linear(x); Z = 2 gelu(X) recorded before V = reshape(X) (a view); Y = gelu(V); the loss
 * sums both. Consuming, every output is given back after its backward, except the view: giving V
 * back would hand X's memory to the gradient of gelu(X), which the scale's backward allocates
 * before gelu's backward reads X. */
static tensor *view_graph(tensor *x, tensor *w) {
    tensor *X = op_linear(x, w, NULL), *Z = op_scale(op_gelu(X), 2.0f), *Y = op_gelu(RESHAPE(X, 4 * 16));
    return op_add(op_mean(RESHAPE(Z, 64), 0, false), op_mean(Y, 0, false));
}

TEST(consuming_backward_equals_backward_and_keeps_views) {
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    tensor *x = RANDN(&r, 1, 4, 8), *w = RANDN(&r, 0.5f, 16, 8);
    x->requires_grad = w->requires_grad = true;
    static const float one = 1.0f;
    tape_backward_from(view_graph(x, w), &one);
    float want_x[32], want_w[128];
    memcpy(want_x, x->grad, sizeof(want_x));
    memcpy(want_w, w->grad, sizeof(want_w));
    tape_reset();
    x->grad = w->grad = NULL;
    tape_backward_consuming(view_graph(x, w), &one);
    EXPECT(max_rel_diff(x->grad, want_x, 32) == 0 && max_rel_diff(w->grad, want_w, 128) == 0,
           "consuming backward changed the gradients");
    bool once = true; /* a block given back twice could serve two gradients at once */
    for (int i = 0; i < vitc_arena.n_spare; i++)
        for (int j = 0; j < i; j++) once &= vitc_arena.spare[i].data != vitc_arena.spare[j].data;
    EXPECT(once, "a block was given back twice (the reshape's view and the tensor it shares)");
    tape_reset();
    x->grad = w->grad = NULL;
}

/* the host's zero, shared among the threads from 256 KiB on: every byte of the block, at any size
 * and alignment, and none past it */
TEST(host_zero_clears_exactly_the_block) {
    static const size_t sizes[] = {1, 4096, (256u << 10) - 1, 256u << 10, (256u << 10) + 13, (3u << 20) + 7};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t offset = 0; offset < 2; offset++) {
            size_t n = sizes[i];
            unsigned char *block = xmalloc(n + 2 + 64);
            unsigned char *p = block + 1 + offset * 3; /* unaligned; a guard byte either side */
            memset(block, 0xab, n + 2 + 64);
            host_memory.zero(p, n);
            size_t nonzero = 0;
            for (size_t j = 0; j < n; j++) nonzero += p[j] != 0;
            EXPECT(nonzero == 0 && p[-1] == 0xab && p[n] == 0xab, "%zu bytes at +%zu: %zu left, guards 0x%02x 0x%02x", n,
                   1 + offset * 3, nonzero, p[-1], p[n]);
            free(block);
        }
}

TEST(rng_streams_are_reproducible_and_independent) {
    rng a, b, c;
    rng_seed(&a, 42, RNG_INIT);
    rng_seed(&b, 42, RNG_INIT);
    rng_seed(&c, 42, RNG_DATA_ORDER);
    int same_ab = 0, same_ac = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = rng_u64(&a), y = rng_u64(&b), z = rng_u64(&c);
        same_ab += x == y;
        same_ac += x == z;
    }
    EXPECT(same_ab == 100, "same seed and stream gave different numbers");
    EXPECT(same_ac == 0, "different streams collided %d times", same_ac);
    double sum = 0, sq = 0;
    for (int i = 0; i < 100000; i++) {
        double v = rng_normal(&a);
        sum += v;
        sq += v * v;
    }
    EXPECT(fabs(sum / 1e5) < 0.02 && fabs(sq / 1e5 - 1) < 0.02, "normal mean %g var %g", sum / 1e5,
           sq / 1e5);
    for (int i = 0; i < 1000; i++) {
        float v = rng_trunc_normal(&a, 1.0f, -0.5f, 0.5f);
        EXPECT(v >= -0.5f && v <= 0.5f, "trunc normal %g outside bounds", v);
    }
}

TEST(denormal_results_flush_to_zero_in_every_thread) {
#ifndef __SSE2__
    SKIP("denormals are flushed through x86's MXCSR register; this is not an x86-64 build");
#else
    vitc_set_threads(0);
    volatile float tiny = 1e-30f, factor = 1e-10f; /* 1e-40: a denormal unless flushed */
    int threads = vitc_threads(), flushed = 0;
#pragma omp parallel for schedule(static, 1) reduction(+ : flushed)
    for (int t = 0; t < threads; t++) flushed += tiny * factor == 0.0f;
    EXPECT(flushed == threads, "%d of %d threads produced a denormal", threads - flushed, threads);
#endif
}

TEST(tape_records_only_with_grad_inputs_and_grad_mode) {
    rng r;
    rng_seed(&r, 1, RNG_TEST);
    tensor *x = RANDN(&r, 1, 3, 4), *w = RANDN(&r, 1, 5, 4);
    tensor *y = op_linear(x, w, NULL);
    EXPECT(tape_size() == 0 && !y->requires_grad, "recorded an op with no grad input");
    w->requires_grad = true;
    bool prev = tape_set_grad_enabled(false);
    y = op_linear(x, w, NULL);
    EXPECT(tape_size() == 0 && !y->requires_grad, "recorded with grad mode off");
    tape_set_grad_enabled(prev);
    y = op_linear(x, w, NULL);
    EXPECT(tape_size() == 1 && y->requires_grad, "did not record: %d nodes", tape_size());
}

/* bench --profile's sums: every op's forward and backward once, their times within the wall time,
 * nothing counted once stopped, zeroed by the next start */
TEST(tape_profile_counts_each_op_and_its_backward) {
    rng r;
    rng_seed(&r, 2, RNG_TEST);
    tensor *x = LEAF(&r, 1, 256, 64), *w = LEAF(&r, 1, 128, 64);
    double t0 = clock_seconds();
    tape_profile_start();
    tensor *y = op_gelu(op_linear(x, w, NULL));
    tape_backward_from(y, RANDN(&r, 1, 256, 128)->data);
    tape_profile_stop();
    double wall = clock_seconds() - t0, sum = 0;
    const tape_op_time *t = tape_profile();
    for (int op = 0; op < OP_COUNT; op++) {
        long calls = op == OP_LINEAR || op == OP_GELU ? 1 : 0;
        EXPECT(t[op].forward_calls == calls && t[op].backward_calls == calls,
               "%s: %ld forward and %ld backward calls, expected %ld", op_table[op].name,
               t[op].forward_calls, t[op].backward_calls, calls);
        EXPECT(t[op].forward_s >= 0 && t[op].backward_s >= 0, "%s: negative time",
               op_table[op].name);
        sum += t[op].forward_s + t[op].backward_s;
    }
    EXPECT(t[OP_LINEAR].backward_s > 0 && sum <= wall, "ops %g s within a wall time of %g s", sum,
           wall);
    op_linear(x, w, NULL);
    EXPECT(t[OP_LINEAR].forward_calls == 1, "counted after tape_profile_stop");
    tape_profile_start();
    tape_profile_stop();
    EXPECT(t[OP_LINEAR].forward_calls == 0 && t[OP_GELU].backward_s == 0, "not zeroed by a start");
}

TEST(shape_errors_name_the_shapes) {
    rng r;
    rng_seed(&r, 1, RNG_TEST);
    tensor *x = RANDN(&r, 1, 3, 4), *w = RANDN(&r, 1, 5, 7);
    EXPECT_ERROR(op_linear(x, w, NULL), "(3, 4) does not match weight (5, 7)");
}
