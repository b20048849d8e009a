/* A tiny image-classification task for the end-to-end tests of the CLIs: 3 classes of 16x16 grey
 * images (a bright square in a class-specific corner, on noise), 12 per class to train and 4 per
 * class to validate, and a tiny Agent-DeiT config for it. Made on first use in a directory of /tmp
 * that goes away when the test process exits. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

const char *tiny_run_dir(void);    /* holds train/, val/ and tiny.json */
const char *tiny_run_config(void); /* tiny.json */
/* the "loss" values of the step lines of RUN_DIR/metrics.jsonl, in order; returns their number */
int tiny_run_step_losses(const char *run_dir, char losses[][32], int max);

struct st_file;
/* RUNS/A/last.safetensors and RUNS/B/last.safetensors into a and b: both (true) or neither (err
 * says why) */
bool tiny_run_read_pair(const char *runs, const char *a_run, const char *b_run, struct st_file *a,
                        struct st_file *b, char *err, size_t err_len);
/* For each parameter name X of checkpoint a (neither "optim." nor "ema."), a's tensor a_prefix + X
 * against b's b_prefix + X: how many are equal within tol (relative to each value; 0: bit for
 * bit), how many are not (or missing from either) */
void tiny_run_compare(const struct st_file *a, const char *a_prefix, const struct st_file *b,
                      const char *b_prefix, double tol, int *equal, int *differ);
/* the largest |value| of f's tensor name; -1 when f has none */
double tiny_run_abs_max(const struct st_file *f, const char *name);
/* whether row i of a's tensor name (n rows) equals row rows[i] of b's, bit for bit, for every i */
bool tiny_run_rows_equal(const struct st_file *a, const struct st_file *b, const char *name,
                         const int *rows, int n);
/* a copy of the safetensors file from at to, every tensor (as float32) and metadata but name's */
bool tiny_run_copy_without(const char *from, const char *to, const char *name, char *err,
                           size_t err_len);
