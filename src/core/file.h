/* Whole files read into memory: a checkpoint, a config. */
#pragma once
#include <stddef.h>

/* The bytes of the regular file at path, followed by a NUL (for text), *size of them, at most
 * max_size; free() them. NULL when it cannot be read, with err = "PATH: WHY" (no such file, a
 * directory, too large, ...). */
char *file_read_whole(const char *path, size_t max_size, size_t *size, char *err, size_t err_len);

/* The folder part of path into folder: "." for a bare name, "/" for a file at the root. */
void file_folder(const char *path, char *folder, size_t len);
