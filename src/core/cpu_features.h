/* What the processor and the operating system let vitc use, from CPUID and XGETBV (x86-64 only;
 * elsewhere every feature reads as absent): AVX512_BF16 (vdpbf16ps), which `--precision bf16`
 * needs (without it the run stops at start-up, never a slow path), and AMX-BF16 (tdpbf16ps on tile
 * registers), which its large products use where the processor has it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

typedef struct cpu_features {
    bool x86_64;                      /* the probes below ran at all */
    bool avx512f, avx512bw, avx512vl; /* CPUID leaf 7 subleaf 0, EBX bits 16, 30, 31 */
    bool avx512_bf16;                 /* CPUID leaf 7 subleaf 1, EAX bit 5 */
    bool os_avx512;                   /* XCR0 has the opmask and all 32 zmm registers' state */
    bool amx_tile, amx_bf16;          /* CPUID leaf 7 subleaf 0, EDX bits 24 and 22 */
    bool os_amx;                      /* XCR0 has the tile state, and Linux lets this process use
                                       * it */
    char brand[49];                   /* CPUID 0x80000002-4, e.g. "Intel(R) Xeon(R) Gold 6148" */
} cpu_features;

/* probed once, then cached */
const cpu_features *cpu_features_get(void);

/* AVX512_BF16 and the AVX-512 subsets the bf16 kernels use, enabled by the OS */
bool cpu_has_avx512_bf16(void);

/* AMX-BF16 with AVX512_BF16 (whose kernels pack and finish the tiles' sums), enabled by the OS */
bool cpu_has_amx_bf16(void);

/* NULL when f has what `--precision bf16` needs, else why not: one sentence naming the processor
 * and what it lacks, written to buf (n bytes; with buf NULL the answer is "") */
const char *cpu_bf16_problem(const cpu_features *f, char *buf, size_t n);
/* the same for this machine (a static buffer): what the CLI prints before exiting */
const char *cpu_bf16_error(void);
