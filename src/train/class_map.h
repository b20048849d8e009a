/* A class map: rows of a model's classes, one a line. Which row of a checkpoint's classifier head
 * each class of a fine-tuned model starts from (Swin's load_pretrained picks ImageNet-1K's 1000
 * rows of an ImageNet-22K head with its data/map22kto1k.txt), or which of a model's classes a
 * dataset's labels are (timm's validate.py --valid-labels: ImageNet-A's and ImageNet-R's 200 of the
 * 1000). */
#pragma once
#include <stddef.h>

/* The map at path, a text file of one row number (from 0) per line, blank lines skipped, each below
 * rows (they are rows_of: "the model's classes", say). The rows (*n of them; free() them), or NULL
 * with err = "PATH line N: WHY" (or "PATH: WHY" for the whole file). */
int *class_map_read(const char *path, int rows, const char *rows_of, int *n, char *err,
                    size_t err_len);
