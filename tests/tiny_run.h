/* A tiny image-classification task for the end-to-end tests of the CLIs: 3 classes of 16x16 grey
 * images (a bright square in a class-specific corner, on noise), 12 per class to train and 4 per
 * class to validate, and a tiny Agent-DeiT config for it. Made on first use in a directory of /tmp
 * that goes away when the test process exits. */
#pragma once

const char *tiny_run_dir(void);    /* holds train/, val/ and tiny.json */
const char *tiny_run_config(void); /* tiny.json */
/* the "loss" values of the step lines of RUN_DIR/metrics.jsonl, in order; returns their number */
int tiny_run_step_losses(const char *run_dir, char losses[][32], int max);
