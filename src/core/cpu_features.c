#include "cpu_features.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* XCR0 through the instruction itself: the _xgetbv intrinsic would need -mxsave */
static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

/* The tile registers' 8 KiB of state are saved by the OS only for a process that asked for them
 * (Linux 5.16's arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, feature 18; without it the first
 * tile load faults), and only where XCR0 enables it (bits 17 and 18: XTILECFG, XTILEDATA). The
 * permission covers every thread of the process. */
static bool amx_permitted(void) {
    if ((xcr0() & 0x60000) != 0x60000) return false;
#ifdef __linux__
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

static void probe(cpu_features *f) {
    unsigned a, b, c, d;
    f->x86_64 = true;
    if ((unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000004) {
        unsigned w[12];
        for (unsigned leaf = 0; leaf < 3; leaf++)
            __get_cpuid(0x80000002 + leaf, &w[4 * leaf], &w[4 * leaf + 1], &w[4 * leaf + 2],
                        &w[4 * leaf + 3]);
        memcpy(f->brand, w, 48);
        f->brand[48] = '\0';
        char *s = f->brand; /* Intel pads the front with spaces */
        while (*s == ' ') s++;
        memmove(f->brand, s, strlen(s) + 1);
    }
    /* the OS saves and restores the AVX-512 registers only if it enabled their state in XCR0 (bits
     * 1, 2: SSE and AVX; 5, 6, 7: opmask, upper halves of zmm0-15, zmm16-31); without OSXSAVE
     * (leaf 1, ECX bit 27) XGETBV itself would fault */
    if (__get_cpuid(1, &a, &b, &c, &d) && (c >> 27 & 1)) f->os_avx512 = (xcr0() & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    unsigned max_subleaf = a;
    f->avx512f = b >> 16 & 1, f->avx512bw = b >> 30 & 1, f->avx512vl = b >> 31 & 1;
    f->amx_bf16 = d >> 22 & 1, f->amx_tile = d >> 24 & 1;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f->avx512_bf16 = a >> 5 & 1;
    f->os_amx = f->amx_tile && f->os_avx512 && amx_permitted();
}
#else
static void probe(cpu_features *f) { (void)f; }
#endif

/* CPUID traps to the hypervisor in a virtual machine (microseconds each): probe once */
static cpu_features features;
static void probe_features(void) { probe(&features); }

const cpu_features *cpu_features_get(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, probe_features);
    return &features;
}

bool cpu_has_avx512_bf16(void) { return cpu_bf16_problem(cpu_features_get(), NULL, 0) == NULL; }

bool cpu_has_amx_bf16(void) {
    const cpu_features *f = cpu_features_get();
    return cpu_has_avx512_bf16() && f->amx_bf16 && f->os_amx;
}

const char *cpu_bf16_problem(const cpu_features *f, char *buf, size_t n) {
    const char *missing = NULL;
    if (!f->x86_64) missing = "it is not an x86-64 processor (or this build cannot query it)";
    else if (!f->avx512_bf16 || !f->avx512f || !f->avx512bw || !f->avx512vl)
        missing = "it lacks the AVX512_BF16 instructions (CPUID leaf 7.1 EAX bit 5, with "
                  "AVX512F/BW/VL)";
    else if (!f->os_avx512)
        missing = "the operating system has not enabled the AVX-512 register state (XCR0)";
    if (!missing) return NULL;
    if (!buf || !n) return "";
    snprintf(
        buf, n,
        "--precision bf16 needs a CPU with AVX512_BF16 (vdpbf16ps: Intel Cooper Lake, Sapphire "
        "Rapids or later, AMD Zen 4 or later), but on this one (%s) %s; use --precision fp32",
        f->brand[0] ? f->brand : "unknown processor", missing);
    return buf;
}

const char *cpu_bf16_error(void) {
    static char message[400];
    return cpu_bf16_problem(cpu_features_get(), message, sizeof message);
}
