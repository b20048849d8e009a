/* Test runner: runs every registered test (or those whose name contains argv[1]). */
#include <stdarg.h>
#include <string.h>

#include "core/arena.h"
#include "core/check.h"
#include "core/precision.h"
#include "core/threads.h"
#include "cpu/gemm_bf16.h"
#include "ops/backend.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
void test_abandon_begin(void) { __lsan_disable(); }
void test_abandon_end(void) { __lsan_enable(); }
#else
void test_abandon_begin(void) {}
void test_abandon_end(void) {}
#endif

#define MAX_TESTS 1024

typedef struct test_case {
    const char *name;
    test_fn fn;
} test_case;
static test_case tests[MAX_TESTS];
static int n_tests;
static bool failed, skipped;
static char skip_reason[256];

void test_register(const char *name, test_fn fn) {
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "too many tests (raise MAX_TESTS)\n");
        exit(1);
    }
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    n_tests++;
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    failed = true;
    fprintf(stdout, "    %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

void test_skip(const char *fmt, ...) {
    skipped = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(skip_reason, sizeof(skip_reason), fmt, ap);
    va_end(ap);
}

bool test_failed(void) { return failed; }

tensor *test_randn(rng *r, float scale, int ndim, const int *shape) {
    tensor *t = tensor_new(ndim, shape);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = scale * rng_normal(r);
    return t;
}

tensor *test_leaf(rng *r, float scale, int ndim, const int *shape) {
    tensor *t = test_randn(r, scale, ndim, shape);
    t->requires_grad = true;
    return t;
}

double max_rel_diff(const float *a, const float *b, long n) {
    double diff = 0, ref = 1e-30;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > diff || d != d) diff = d;
        if (fabs(b[i]) > ref) ref = fabs(b[i]);
    }
    return diff / ref;
}

double rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(((const test_case *)a)->name, ((const test_case *)b)->name);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    qsort(tests, n_tests, sizeof(tests[0]), cmp_names);
    vitc_set_threads(0); /* the CLIs' floating-point mode */
    int threads = vitc_threads(); /* this machine's, restored for every test */
    /* small arena chunks: allocations spill across chunks, exercising mark/release and reset */
    vitc_arena.chunk_bytes = 256 << 10;
    arena_poison = true; /* memory handed out unset is NaN: reading it fails the test */
    int passed = 0, n_failed = 0, n_skipped = 0;
    for (int i = 0; i < n_tests; i++) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        failed = skipped = false;
        /* the defaults, whatever a test that failed midway left selected */
        char err[256];
        CHECK(backend_select_partial("cpu", err, sizeof(err)), "%s", err);
        vitc_set_precision(PRECISION_FP32, NULL);
        gemm_bf16_allow_amx(true);
        vitc_set_threads(threads);
        tape_reset();
        tape_set_grad_enabled(true);
        arena_reset(&vitc_arena);
        tests[i].fn();
        if (failed) {
            printf("FAIL %s\n", tests[i].name);
            n_failed++;
        } else if (skipped) {
            printf("SKIP %s: %s\n", tests[i].name, skip_reason);
            n_skipped++;
        } else {
            printf("ok   %s\n", tests[i].name);
            passed++;
        }
        fflush(stdout);
    }
    tape_reset();
    arena_free(&vitc_arena);
    printf("%d passed, %d failed, %d skipped\n", passed, n_failed, n_skipped);
    return n_failed ? 1 : 0;
}
