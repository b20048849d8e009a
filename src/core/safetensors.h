/* The safetensors format (what the PyTorch/Hugging Face ecosystem uses): an 8-byte little-endian header
 * length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the raw
 * little-endian data. The reader validates every header field and length and reports errors instead
 * of exiting, so the checkpoint loader can name the problem and a fuzzer can drive it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

typedef enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL } st_dtype;

typedef struct st_entry {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    const uint8_t *data; /* into the file buffer */
    size_t nbytes;
} st_entry;

typedef struct st_file {
    uint8_t *buf;
    size_t size;
    st_entry *entries;
    int n;
    char **meta_keys, **meta_values;
    int n_meta;
} st_file;

/* Parses a whole file already in memory (takes ownership of buf on success and failure). Returns false
 * with a message in err on any malformed header, length, dtype, shape or offset. */
bool st_parse(st_file *f, uint8_t *buf, size_t size, char *err, size_t err_len);
/* Reads and parses path; err names the file. */
bool st_read(st_file *f, const char *path, char *err, size_t err_len);
void st_close(st_file *f);
const st_entry *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key);
const char *st_dtype_name(st_dtype t);
/* Converts an entry of a floating dtype to float32 into out (numel floats); false for other dtypes. */
bool st_to_f32(const st_entry *e, float *out);

/* Writer: collect named float32 arrays and string metadata, then write atomically (temp file in the
 * same directory, fsync, rename, fsync of the directory): a crash never leaves a broken file. */
typedef struct st_writer {
    struct st_item {
        const char *name;
        const float *data;
        int ndim;
        int64_t shape[ST_MAX_DIMS];
    } *items;
    int n, cap;
    const char **meta_keys, **meta_values;
    int n_meta, cap_meta;
} st_writer;

void st_writer_init(st_writer *w);
void st_writer_free(st_writer *w);
/* name, data and metadata strings must stay valid until st_write */
void st_add(st_writer *w, const char *name, const float *data, int ndim, const int *shape);
void st_add_meta(st_writer *w, const char *key, const char *value);
bool st_write(const st_writer *w, const char *path, char *err, size_t err_len);
