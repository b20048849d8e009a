#include "precision.h"

#include <stdio.h>
#include <string.h>

#include "cpu_features.h"
#include "memory.h"

const char *const precision_names[] = {"fp32", "bf16", "tf32", NULL};

static precision current = PRECISION_FP32;

bool vitc_set_precision(precision p, const char **why) {
    const char *no = NULL;
    if (vitc_device() == DEV_CPU && p == PRECISION_BF16) no = cpu_bf16_error();
    if (vitc_device() == DEV_CPU && p == PRECISION_TF32)
        no = "tf32 is a format of NVIDIA's tensor cores: it needs --device cuda (on the CPU: fp32 or bf16)";
    if (no) {
        if (why) *why = no;
        return false;
    }
    current = p;
    return true;
}

precision vitc_precision(void) { return current; }

bool precision_parse(const char *name, precision *p) {
    for (int i = 0; precision_names[i]; i++)
        if (!strcmp(name, precision_names[i])) {
            *p = (precision)i;
            return true;
        }
    return false;
}

const char *precision_name(precision p) { return precision_names[p]; }

int precision_select_flag(const char *name) {
    precision p;
    const char *why;
    if (!precision_parse(name, &p)) {
        fprintf(stderr, "error: --precision %s: expected fp32, bf16 or tf32\n", name);
        return 2;
    }
    if (!vitc_set_precision(p, &why)) {
        fprintf(stderr, "error: --precision %s: %s\n", name, why);
        return 1;
    }
    return 0;
}
