/* ImageNet-ReaL ("Are we done with ImageNet?", Beyer et al. 2020): new labels for ImageNet's
 * validation images, a set of classes each (several where an image holds several objects, none
 * where no class fits), as timm's validate.py --real-labels scores them. The labels come as
 * real.json, a list whose entry i is the set of ILSVRC2012_val_<i+1, 8 digits>.JPEG. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct dataset;

typedef struct label_sets {
    int *start; /* n + 1: sample i's classes are classes[start[i]] to classes[start[i + 1] - 1] */
    int *classes;
    int n; /* the dataset's samples */
} label_sets;

/* The set of every sample of d, found by the sample's file name (ILSVRC2012_val_NNNNNNNN.*, in any
 * folder, with any extension) in the list at path, whose classes are below num_classes. False with
 * err = "PATH: WHY" (not such a list, an entry out of place, a sample it has no entry for). */
bool real_labels_read(label_sets *s, const char *path, const struct dataset *d, int num_classes,
                      char *err, size_t err_len);
void label_sets_free(label_sets *s);
