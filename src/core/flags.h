/* The command-line tools' integer flags, read whole: "5x", "abc" and "" are errors, not 5 or 0. */
#pragma once
#include <stdbool.h>

/* *out = value as an integer in [lo, 1e9]; false after printing "error: FLAG VALUE: expected an
 * integer >= LO" (the tools then exit 2) */
bool flag_int(const char *flag, const char *value, int lo, int *out);
