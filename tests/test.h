/* Minimal test framework: TEST(name) registers a function; EXPECT fails the test with a message;
 * SKIP ends it as skipped with a reason. The runner (tests/main.c) prints one line per test and
 * closes with "N passed, N failed, N skipped". */
#pragma once
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../src/core/arena.h"
#include "../src/core/check.h"
#include "../src/core/rng.h"
#include "../src/core/tape.h"
#include "../src/core/tensor.h"
#include "../src/ops/ops.h"

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool test_failed(void);

#define TEST(name)                                                                                 \
    static void name(void);                                                                        \
    __attribute__((constructor)) static void register_##name(void) { test_register(#name, name); } \
    static void name(void)

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_fail(__FILE__, __LINE__, "expected " #cond ": " __VA_ARGS__);                    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define SKIP(...)                                                                                  \
    do {                                                                                           \
        test_skip(__VA_ARGS__);                                                                    \
        return;                                                                                    \
    } while (0)

/* Allocations between these calls are not reported by LeakSanitizer: an error caught by longjmp
 * abandons what the failing code had allocated (the programs exit instead). */
void test_abandon_begin(void);
void test_abandon_end(void);

/* Runs stmt expecting a CHECK to fail; the message must contain `substring`. */
#define EXPECT_ERROR(stmt, substring)                                                              \
    do {                                                                                           \
        jmp_buf jump_;                                                                             \
        jmp_buf *prev_ = vitc_die_jump;                                                            \
        vitc_die_jump = &jump_;                                                                    \
        test_abandon_begin();                                                                      \
        if (setjmp(jump_) == 0) {                                                                  \
            stmt;                                                                                  \
            test_abandon_end();                                                                    \
            vitc_die_jump = prev_;                                                                 \
            test_fail(__FILE__, __LINE__, "expected an error containing \"%s\"", substring);      \
            return;                                                                                \
        }                                                                                          \
        test_abandon_end();                                                                        \
        vitc_die_jump = prev_;                                                                     \
        EXPECT(strstr(vitc_die_message, substring), "message \"%s\" lacks \"%s\"",               \
               vitc_die_message, substring);                                                       \
    } while (0)

/* A new arena tensor of normal(0, scale) values. */
tensor *test_randn(rng *r, float scale, int ndim, const int *shape);
#define RANDN(r, scale, ...)                                                                       \
    test_randn((r), (scale), (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})
/* Same, with requires_grad set (a leaf to differentiate). */
tensor *test_leaf(rng *r, float scale, int ndim, const int *shape);
#define LEAF(r, scale, ...)                                                                        \
    test_leaf((r), (scale), (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})

/* the drop path with probability p drawn from r for the samples of res, as a pointer for one call
 */
#define DROP_PATH(p, r, res) ((drop_path[]){op_drop_path((p), (r), (res)->shape[0])})

/* max |a - b| / max(max |b|, tiny); NaN if a or b has one */
double max_rel_diff(const float *a, const float *b, long n);
/* the larger of the worst error so far and e, NaN once either is (fmax drops a NaN: it passed) */
static inline double max_error(double worst, double e) {
    return worst != worst || e != e ? NAN : e > worst ? e : worst;
}
/* ‖a − b‖ / ‖b‖ (‖a − b‖ where b is 0), in double */
double rel_l2(const float *a, const float *b, int64_t n);
