/* The device the ops run on: its kernel table (kernels.h) and the memory of tensor data (memory.h),
 * picked once at start-up from --device, and the moves of host data the ops need on that device. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

/* "cpu", "cuda" or "cuda:N": selects the kernels and the memory of tensor data before any tensor
 * exists. false, with the sentence to print in err, when this build or machine cannot: a build
 * without CUDA, no device, or a kernel the device's table lacks (named). */
bool backend_select(const char *device_name, char *err, size_t n);
/* backend_select that lets a device table lack kernels (NULL entries), for tests of the kernels it
 * has while the others are being written */
bool backend_select_partial(const char *device_name, char *err, size_t n);
/* The names of the kernels `table` lacks, comma-separated, into buf; false when it has them all. */
bool backend_missing_kernels(const kernel_table *table, char *buf, size_t n);
/* The CLIs' --device NAME: selects it and returns 0, or prints the error and returns the exit
 * status (2: not a device's name; 1: this build or machine cannot run it). */
int backend_select_flag(const char *name);

/* Host data that outlives every step and never changes (index tables, attention masks) as the
 * kernels see it: itself on the CPU, a copy made on the first call on a device. */
const void *backend_constant(const void *host, size_t bytes);
/* Host data of this step (labels, targets, masks drawn on the host) as the kernels see it: itself
 * on the CPU, a copy in the data arena on a device. */
const float *backend_floats(const float *host, int64_t n);
const int *backend_ints(const int *host, int64_t n);
/* A tensor's data (n floats) on the host: a copy from a device into dst, or the data itself on the
 * CPU (dst untouched). */
const float *backend_read(float *dst, const float *data, int64_t n);

/* Host data of every step (the loader's batch) on its way to the device while the previous step
 * computes. backend_stage returns what the kernels queued from now on read: host itself on the CPU;
 * on a device, a device buffer (one of two, in turn) whose copy from host starts now, on a stream
 * of its own, and that the work queued after the call waits for. It serves the work queued until
 * the next call, whose copy overlaps with that work. */
typedef struct backend_stager backend_stager;
backend_stager *backend_stager_create(int64_t n); /* for up to n floats a call */
const float *backend_stage(backend_stager *s, const float *host, int64_t n);
void backend_stager_free(backend_stager *s); /* NULL is fine */
