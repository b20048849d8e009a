/* The command-line tools' flags: each tool's as a table, read by one loop, so that all of them
 * answer --help, unknown flags and bad values alike (exit 2 for a usage error). Integers are read
 * whole: "5x", "abc" and "" are errors, not 5 or 0. */
#pragma once
#include <stdbool.h>
#include <stdio.h>

typedef enum {
    FLAG_SWITCH, /* no value: *(bool *)to = true */
    FLAG_TEXT,   /* *(const char **)to = the value */
    FLAG_INT,    /* *(int *)to = the value, an integer in [lo, hi] (hi 0: 1e9) */
    FLAG_TAKE,   /* take(flag, value, to): 0, or the exit status to stop with */
} flag_kind;

typedef struct tool_flag {
    const char *name; /* NULL ends a table */
    flag_kind kind;
    void *to;
    int lo, hi;
    int (*take)(const char *flag, const char *value, void *to);
} tool_flag;

/* a table's rows */
#define SWITCH_FLAG(flag, to_) {.name = (flag), .kind = FLAG_SWITCH, .to = (to_)}
#define TEXT_FLAG(flag, to_) {.name = (flag), .kind = FLAG_TEXT, .to = (to_)}
#define INT_FLAG(flag, to_, least) {.name = (flag), .kind = FLAG_INT, .to = (to_), .lo = (least)}
#define RANGE_FLAG(flag, to_, least, most) \
    {.name = (flag), .kind = FLAG_INT, .to = (to_), .lo = (least), .hi = (most)}
#define TAKE_FLAG(flag, to_, fn) {.name = (flag), .kind = FLAG_TAKE, .to = (to_), .take = (fn)}
#define FLAGS_END {.name = NULL}
/* a file the tool writes, after its work: its folder must be one the tool can write in, known
 * before the work starts */
#define OUTPUT_FLAG(flag, to_) TAKE_FLAG(flag, to_, flag_output_file)
/* the same as PNG: its name must end in .png (any case), not name another format */
#define PNG_FLAG(flag, to_) TAKE_FLAG(flag, to_, flag_png_name)

/* argv[1..] by the table. --help or -h: usage on stdout, 0. A flag not in it or missing its value:
 * "error: unknown or incomplete argument 'FLAG'" and usage on stderr, 2; an integer not read whole
 * or out of its range: "error: FLAG VALUE: expected an integer >= LO" (or "from LO to HI"), 2; a
 * TAKE's non-zero status: that. -1 when every argument was read. */
int flags_read(int argc, char **argv, const tool_flag *flags, void (*usage)(FILE *));

/* OUTPUT_FLAG's reader: *(const char **)to = value, or 1 after "error: FLAG VALUE: cannot write in
 * FOLDER: REASON" */
int flag_output_file(const char *flag, const char *value, void *to);
/* PNG_FLAG's: the same, or 2 after "error: FLAG VALUE: the file is written as PNG; ..." */
int flag_png_name(const char *flag, const char *value, void *to);

/* text as n comma-separated integers in [lo, 1e9] ("64,64,64", "3,5"), each read whole */
bool flag_ints(const char *text, int n, int lo, int *out);
