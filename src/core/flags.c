#include "flags.h"

#include <stdio.h>
#include <stdlib.h>

bool flag_int(const char *flag, const char *value, int lo, int *out) {
    char *end;
    long v = strtol(value, &end, 10);
    if (*end || end == value || v < lo || v > 1000000000) {
        fprintf(stderr, "error: %s %s: expected an integer >= %d\n", flag, value, lo);
        return false;
    }
    *out = (int)v;
    return true;
}
