/* Micro-benchmark for the bf16 precision: GFLOP/s of the three GEMMs of a linear layer (forward,
 * dx, dw) at the models' training shapes (batch 16) for OpenBLAS's sgemm, vitc's fp32 gemm_strided,
 * gemm_bf16 from fp32 operands (rounding included; on AMX tiles where the CPU has them, and then
 * also on vdpbf16ps's alone) and on operands packed beforehand, and oneDNN's
 * matmul: bf16 from fp32 operands (its reorders included), bf16 on operands rounded beforehand, and
 * f32, where its header was found at compile time (else "n/a"). The candidates alternate within
 * each repetition; medians. Prints a markdown table (docs/bf16.md); `bench_gemm_bf16 fc2` runs only
 * the layers whose name contains "fc2". */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/clock.h"
#include "core/cpu_features.h"
#include "core/memory.h"
#include "core/rng.h"
#include "core/threads.h"
#include "cpu/gemm_bf16.h"
#include "cpu/matmul.h"

/* -DHAVE_DNNL=0 leaves oneDNN out even where it is installed */
#ifndef HAVE_DNNL
#if __has_include(<dnnl.h>)
#define HAVE_DNNL 1
#else
#define HAVE_DNNL 0
#endif
#endif
#if HAVE_DNNL
#include <dnnl.h>
#endif

#define REPS 9

static double median(double *t) { return median_seconds(t, REPS); }

#if HAVE_DNNL
/* one product C (M, N) = op(A) op(B), A and B stored as the linear layer holds them */
typedef struct product {
    bool ta, tb;
    int M, N, K;
    const float *A, *B;
    float *C;
} product;

static char impls[8][64]; /* the names of oneDNN's implementations that ran */
static int n_impls;

static void dnnl_check(dnnl_status_t s, const char *what) {
    CHECK(s == dnnl_success, "oneDNN: %s failed (status %d)", what, (int)s);
}

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static dnnl_primitive_t primitive(const_dnnl_op_desc_t desc, const char *what, char *impl) {
    dnnl_primitive_desc_t pd;
    dnnl_check(dnnl_primitive_desc_create(&pd, desc, NULL, engine, NULL), what);
    const char *name;
    dnnl_check(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name), what);
    snprintf(impl, 64, "%s", name);
    dnnl_primitive_t prim;
    dnnl_check(dnnl_primitive_create(&prim, pd), what);
    dnnl_primitive_desc_destroy(pd); /* the primitive keeps its own copy */
    return prim;
}

static void execute(dnnl_primitive_t prim, dnnl_exec_arg_t *args, int n) {
    dnnl_check(dnnl_primitive_execute(prim, stream, n, args), "execute");
}

/* oneDNN's matmul of the product in type t with an fp32 output; in bf16 also the reorders that
 * round the fp32 operands first (what a oneDNN backend of vitc would run each time) */
typedef struct onednn {
    dnnl_primitive_t matmul, round_a, round_b;
    dnnl_memory_t a, b, c, a32, b32;
    void *a_bf16, *b_bf16;
    char impl[64];
} onednn;

static void onednn_round(const onednn *o);

static void onednn_init(onednn *o, const product *p, dnnl_data_type_t t) {
    if (!engine) {
        dnnl_check(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
        dnnl_check(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream");
    }
    memset(o, 0, sizeof *o);
    dnnl_memory_desc_t a_md, b_md, c_md, a32_md, b32_md;
    dnnl_dims_t a_dims = {p->M, p->K}, a_strides = {p->ta ? 1 : p->K, p->ta ? p->M : 1};
    dnnl_dims_t b_dims = {p->K, p->N}, b_strides = {p->tb ? 1 : p->N, p->tb ? p->K : 1};
    dnnl_dims_t c_dims = {p->M, p->N}, c_strides = {p->N, 1};
    dnnl_check(dnnl_memory_desc_init_by_strides(&a_md, 2, a_dims, t, a_strides), "desc");
    dnnl_check(dnnl_memory_desc_init_by_strides(&b_md, 2, b_dims, t, b_strides), "desc");
    dnnl_check(dnnl_memory_desc_init_by_strides(&c_md, 2, c_dims, dnnl_f32, c_strides), "desc");
    dnnl_check(dnnl_memory_desc_init_by_strides(&a32_md, 2, a_dims, dnnl_f32, a_strides), "desc");
    dnnl_check(dnnl_memory_desc_init_by_strides(&b32_md, 2, b_dims, dnnl_f32, b_strides), "desc");
    dnnl_matmul_desc_t desc;
    dnnl_check(dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md), "matmul desc");
    o->matmul = primitive(&desc, "matmul", o->impl);
    dnnl_check(dnnl_memory_create(&o->a32, &a32_md, engine, (void *)p->A), "memory");
    dnnl_check(dnnl_memory_create(&o->b32, &b32_md, engine, (void *)p->B), "memory");
    dnnl_check(dnnl_memory_create(&o->c, &c_md, engine, p->C), "memory");
    if (t == dnnl_f32) {
        o->a = o->a32, o->b = o->b32;
        return;
    }
    size_t na = (size_t)p->M * p->K, nb = (size_t)p->K * p->N;
    o->a_bf16 = host_memory.alloc(na * sizeof(bf16));
    o->b_bf16 = host_memory.alloc(nb * sizeof(bf16));
    dnnl_check(dnnl_memory_create(&o->a, &a_md, engine, o->a_bf16), "memory");
    dnnl_check(dnnl_memory_create(&o->b, &b_md, engine, o->b_bf16), "memory");
    dnnl_primitive_desc_t pd;
    dnnl_check(dnnl_reorder_primitive_desc_create(&pd, &a32_md, engine, &a_md, engine, NULL),
               "reorder");
    dnnl_check(dnnl_primitive_create(&o->round_a, pd), "reorder");
    dnnl_primitive_desc_destroy(pd);
    dnnl_check(dnnl_reorder_primitive_desc_create(&pd, &b32_md, engine, &b_md, engine, NULL),
               "reorder");
    dnnl_check(dnnl_primitive_create(&o->round_b, pd), "reorder");
    dnnl_primitive_desc_destroy(pd);
    onednn_round(o);
}

static void onednn_round(const onednn *o) {
    execute(o->round_a, (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, o->a32}, {DNNL_ARG_TO, o->a}}, 2);
    execute(o->round_b, (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, o->b32}, {DNNL_ARG_TO, o->b}}, 2);
}

static void onednn_run(const onednn *o, bool round_first) {
    if (round_first) onednn_round(o);
    execute(
        o->matmul,
        (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, o->a}, {DNNL_ARG_WEIGHTS, o->b}, {DNNL_ARG_DST, o->c}},
        3);
    dnnl_check(dnnl_stream_wait(stream), "wait");
}

static void onednn_free(onednn *o) {
    dnnl_memory_destroy(o->a32), dnnl_memory_destroy(o->b32), dnnl_memory_destroy(o->c);
    dnnl_primitive_destroy(o->matmul);
    if (o->a_bf16) {
        dnnl_memory_destroy(o->a), dnnl_memory_destroy(o->b);
        dnnl_primitive_destroy(o->round_a), dnnl_primitive_destroy(o->round_b);
        free(o->a_bf16), free(o->b_bf16);
    }
}
#endif

/* max |a - b| / max |b| (NaN if any a is) */
static double max_rel_diff_f32(const float *a, const float *b, size_t n) {
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > diff || d != d) diff = d;
        scale = fmax(scale, fabs(b[i]));
    }
    return diff / scale;
}

/* own and oneDNN's bf16 from fp32 operands (rounding included), and from operands rounded (and for
 * own packed) beforehand */
enum { SGEMM, VITC_F32, OWN, DNNL_BF16, OWN_PACKED, DNNL_BF16_IN, DNNL_F32, OWN_VDP, N_CAND };
static const char *cand_names[N_CAND] = {"sgemm",          "vitc fp32",  "own bf16",
                                         "oneDNN bf16",    "own packed", "oneDNN bf16 in",
                                         "oneDNN f32",     "own vdpbf16ps"};

static void bench(const char *name, const char *pass, bool ta, bool tb, int M, int N, int K) {
    rng r;
    rng_seed(&r, 7, RNG_TEST);
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    /* every operand on cache lines, as the arena places tensors: malloc's large blocks start 16
     * bytes past a page, and AMX tiles whose rows straddle lines ran 1.5-2.5x slower */
    float *A = host_memory.alloc(na * sizeof(float)), *B = host_memory.alloc(nb * sizeof(float)),
          *C = host_memory.alloc(nc * sizeof(float)), *ref = host_memory.alloc(nc * sizeof(float));
    for (size_t i = 0; i < na; i++) A[i] = 0.1f * rng_normal(&r);
    for (size_t i = 0; i < nb; i++) B[i] = 0.1f * rng_normal(&r);
    int lda = ta ? M : K, ldb = tb ? K : N, threads = vitc_threads();
    bf16 *ap = host_memory.alloc(gemm_bf16_a_size(M, K) * sizeof(bf16)),
         *bp = host_memory.alloc(gemm_bf16_b_size(N, K) * sizeof(bf16));
    gemm_bf16_pack_a(ap, ta, M, K, A, lda, threads);
    gemm_bf16_pack_b(bp, tb, N, K, B, ldb, threads);
    bool amx = gemm_bf16_uses_amx();
    bool have[N_CAND] = {true, true, true, HAVE_DNNL, true, HAVE_DNNL, HAVE_DNNL, amx};
#if HAVE_DNNL
    product p = {ta, tb, M, N, K, A, B, C};
    onednn dn_bf16, dn_f32;
    onednn_init(&dn_bf16, &p, dnnl_bf16);
    onednn_init(&dn_f32, &p, dnnl_f32);
#endif
    double t[N_CAND][REPS], err[N_CAND] = {0};
    for (int rep = -1; rep < REPS; rep++) /* rep -1 warms up */
        for (int c = 0; c < N_CAND; c++) {
            if (!have[c]) continue;
            double t0 = clock_seconds();
            switch (c) {
            case SGEMM:
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C,
                            N);
                break;
            case VITC_F32: gemm_strided(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N); break;
            case OWN: gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, threads); break;
            case OWN_PACKED:
                gemm_bf16_packed(ta, M, N, K, 1.0f, ap, bp, 0.0f, C, N, threads);
                break;
            case OWN_VDP:
                gemm_bf16_allow_amx(false);
                gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, threads);
                gemm_bf16_allow_amx(true);
                break;
#if HAVE_DNNL
            case DNNL_BF16: onednn_run(&dn_bf16, true); break;
            case DNNL_BF16_IN: onednn_run(&dn_bf16, false); break;
            case DNNL_F32: onednn_run(&dn_f32, false); break;
#endif
            default: break;
            }
            if (rep >= 0) t[c][rep] = clock_seconds() - t0;
            if (rep == -1 && c == SGEMM) memcpy(ref, C, nc * sizeof(float));
            if (rep == -1) err[c] = max_rel_diff_f32(C, ref, nc);
        }
    double flop = 2.0 * M * N * K, g[N_CAND];
    for (int c = 0; c < N_CAND; c++) g[c] = have[c] ? flop / median(t[c]) * 1e-9 : 0;
    printf("| %s %s | %d x %d x %d |", name, pass, M, N, K);
    for (int c = 0; c < N_CAND; c++)
        if (have[c]) printf(" %.0f |", g[c]);
        else printf(" n/a |");
    printf(" %.2f | %.2f |", g[OWN] / g[SGEMM], g[OWN] / g[VITC_F32]);
    if (HAVE_DNNL)
        printf(" %.2f | %.2f | %.2f | %.2f |", g[DNNL_BF16] / g[SGEMM], g[OWN] / g[DNNL_BF16],
               g[OWN_PACKED] / g[DNNL_BF16_IN], g[DNNL_BF16_IN] / g[DNNL_F32]);
    else printf(" n/a | n/a | n/a | n/a |");
    if (amx) printf(" %.2f |", g[OWN] / g[OWN_VDP]);
    else printf(" n/a |");
    printf("\n");
    for (int c = 0; c < N_CAND; c++) /* bf16 rounding: about 2^-9 of C's scale; far more is a bug */
        if (have[c] && !(err[c] <= 0.02))
            printf("  warning: %s differs from sgemm by %.3g of max |C|\n", cand_names[c], err[c]);
#if HAVE_DNNL
    for (int i = 0; i < 2; i++) { /* each implementation oneDNN chose, once */
        const char *impl = i ? dn_f32.impl : dn_bf16.impl;
        int k = 0;
        while (k < n_impls && strcmp(impls[k], impl)) k++;
        if (k == n_impls && n_impls < 8) snprintf(impls[n_impls++], sizeof impls[0], "%s", impl);
    }
    onednn_free(&dn_bf16);
    onednn_free(&dn_f32);
#endif
    free(A), free(B), free(C), free(ref), free(ap), free(bp);
}

static const char *only; /* the layers whose name contains it (argv[1]), else all */

/* a linear layer x (M, K) -> (M, N) with weight w (N, K): forward x·wᵀ, dx = dy·w, dw = dyᵀ·x */
static void bench_linear(const char *name, int M, int K, int N) {
    if (only && !strstr(name, only)) return;
    bench(name, "fwd", false, true, M, N, K);
    bench(name, "dx", false, false, M, K, N);
    bench(name, "dw", true, false, N, K, M);
}

int main(int argc, char **argv) {
    CHECK(cpu_has_avx512_bf16(), "%s", cpu_bf16_error());
    only = argc > 1 ? argv[1] : NULL;
    vitc_set_threads(0);
    printf("threads %d, OpenBLAS %s, oneDNN %s, own bf16 on %s; GFLOP/s, medians of %d; ratios of "
           "this run\n\n",
           vitc_threads(), openblas_get_config(), HAVE_DNNL ? "found" : "not found (n/a)",
           gemm_bf16_uses_amx() ? "AMX tiles" : "vdpbf16ps", REPS);
    printf("| GEMM | M x N x K |");
    for (int c = 0; c < N_CAND; c++) printf(" %s |", cand_names[c]);
    printf(" own / sgemm | own / vitc fp32 | oneDNN bf16 / sgemm | own / oneDNN bf16 |"
           " own packed / oneDNN bf16 in | oneDNN bf16 in / oneDNN f32 | own / own vdpbf16ps |"
           "\n|---|---|");
    for (int c = 0; c < N_CAND + 7; c++) printf("---:|");
    printf("\n");
    const int B = 16; /* training batch */
    bench_linear("deit_t qkv", B * 197, 192, 576);
    bench_linear("deit_t proj", B * 197, 192, 192);
    bench_linear("deit_t fc1", B * 197, 192, 768);
    bench_linear("deit_t fc2", B * 197, 768, 192);
    bench_linear("swin_t s1 qkv", B * 3136, 96, 288);
    bench_linear("swin_t s1 fc1", B * 3136, 96, 384);
    bench_linear("swin_t s1 fc2", B * 3136, 384, 96);
    bench_linear("swin_t s3 qkv", B * 196, 384, 1152);
    bench_linear("swin_t s3 fc1", B * 196, 384, 1536);
    bench_linear("swin_t s3 fc2", B * 196, 1536, 384);
#if HAVE_DNNL
    printf("\noneDNN %d.%d.%d ran", DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, DNNL_VERSION_PATCH);
    for (int k = 0; k < n_impls; k++) printf("%s %s", k ? "," : "", impls[k]);
    printf("\n");
    if (engine) dnnl_stream_destroy(stream), dnnl_engine_destroy(engine);
#endif
    return 0;
}
