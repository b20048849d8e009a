/* A class map: which row of a checkpoint's classifier head each class of a fine-tuned model starts
 * from, as Swin's load_pretrained picks ImageNet-1K's 1000 rows of an ImageNet-22K head with its
 * data/map22kto1k.txt. */
#pragma once
#include <stddef.h>

/* The map at path, a text file of one row number (from 0) per line, one line per class of the
 * model (classes of them), each a row of a head for file_classes; blank lines are skipped. The rows
 * (free() them), or NULL with err = "PATH line N: WHY" (or "PATH: WHY" for the whole file). */
int *class_map_read(const char *path, int classes, int file_classes, char *err, size_t err_len);
