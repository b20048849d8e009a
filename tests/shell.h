/* Shell commands from tests: the CLI, the scripts of tools/ and the Makefile, run as a user would. */
#pragma once
#include <stddef.h>

/* runs a shell command, captures stdout+stderr into out (truncated to len), returns the exit code
 * (-1 when it did not exit normally) */
int run(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
