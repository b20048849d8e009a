#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "file.h"

/* header length bound: far above real checkpoints (~100 bytes per tensor), below absurd values */
#define ST_MAX_HEADER (100u << 20)

static const struct {
    const char *name;
    int size;
} dtypes[] = {[ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2},
              [ST_F64] = {"F64", 8}, [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4},
              [ST_I16] = {"I16", 2}, [ST_I8] = {"I8", 1},   [ST_U8] = {"U8", 1},
              [ST_BOOL] = {"BOOL", 1}};

const char *st_dtype_name(st_dtype t) { return dtypes[t].name; }

static bool fail(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return false;
}

static int cmp_by_offset(const void *a, const void *b) {
    const st_entry *x = *(st_entry *const *)a, *y = *(st_entry *const *)b;
    return (x->data > y->data) - (x->data < y->data);
}

static bool parse_entry(st_entry *e, const cJSON *item, const uint8_t *data, size_t data_len,
                        char *err, size_t err_len) {
    if (!cJSON_IsObject(item)) return fail(err, err_len, "tensor '%s': entry is not an object", e->name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype)) return fail(err, err_len, "tensor '%s': missing dtype", e->name);
    int t = -1;
    for (int i = 0; i < (int)(sizeof(dtypes) / sizeof(dtypes[0])); i++)
        if (strcmp(dtype->valuestring, dtypes[i].name) == 0) t = i;
    if (t < 0)
        return fail(err, err_len, "tensor '%s': unsupported dtype '%s'", e->name, dtype->valuestring);
    e->dtype = (st_dtype)t;
    if (!cJSON_IsArray(shape)) return fail(err, err_len, "tensor '%s': missing shape", e->name);
    e->ndim = cJSON_GetArraySize(shape);
    if (e->ndim > ST_MAX_DIMS)
        return fail(err, err_len, "tensor '%s': %d dims (at most %d)", e->name, e->ndim, ST_MAX_DIMS);
    e->numel = 1;
    int d = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, shape) {
        if (!cJSON_IsNumber(dim) || dim->valuedouble < 0 || dim->valuedouble > 1e15 ||
            dim->valuedouble != (double)(int64_t)dim->valuedouble)
            return fail(err, err_len, "tensor '%s': bad shape entry %d", e->name, d);
        int64_t size = (int64_t)dim->valuedouble;
        if (size && e->numel > (INT64_C(1) << 50) / size)
            return fail(err, err_len, "tensor '%s': shape too large", e->name);
        e->shape[d++] = size;
        e->numel *= size;
    }
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
        return fail(err, err_len, "tensor '%s': data_offsets must be [begin, end]", e->name);
    double begin = cJSON_GetArrayItem(offsets, 0)->valuedouble;
    double end = cJSON_GetArrayItem(offsets, 1)->valuedouble;
    if (!cJSON_IsNumber(cJSON_GetArrayItem(offsets, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(offsets, 1)) || begin < 0 || end < begin ||
        end > (double)data_len || begin != (double)(size_t)begin || end != (double)(size_t)end)
        return fail(err, err_len, "tensor '%s': data_offsets [%.0f, %.0f] outside the %zu data bytes",
                    e->name, begin, end, data_len);
    e->nbytes = (size_t)end - (size_t)begin;
    if ((double)e->nbytes != (double)e->numel * dtypes[t].size)
        return fail(err, err_len, "tensor '%s': %zu bytes for %lld elements of %s", e->name,
                    e->nbytes, (long long)e->numel, dtypes[t].name);
    e->data = data + (size_t)begin;
    return true;
}

bool st_parse(st_file *f, uint8_t *buf, size_t size, char *err, size_t err_len) {
    memset(f, 0, sizeof(*f));
    f->buf = buf;
    f->size = size;
    bool ok = false;
    cJSON *root = NULL;
    if (size < 8) {
        fail(err, err_len, "file too short for a safetensors header (%zu bytes)", size);
        goto done;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > ST_MAX_HEADER || hlen > size - 8) {
        fail(err, err_len, "header length %llu exceeds the file (%zu bytes): truncated or not a "
             "safetensors file", (unsigned long long)hlen, size);
        goto done;
    }
    root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    if (!cJSON_IsObject(root)) {
        fail(err, err_len, "header is not a JSON object");
        goto done;
    }
    const uint8_t *data = buf + 8 + hlen;
    size_t data_len = size - 8 - hlen;
    int count = cJSON_GetArraySize(root);
    f->entries = xcalloc((size_t)count + 1, sizeof(st_entry));
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        if (!item->string) continue;
        if (strcmp(item->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(item)) {
                fail(err, err_len, "__metadata__ is not an object");
                goto done;
            }
            int nm = cJSON_GetArraySize(item);
            f->meta_keys = xcalloc((size_t)nm + 1, sizeof(char *));
            f->meta_values = xcalloc((size_t)nm + 1, sizeof(char *));
            const cJSON *kv;
            cJSON_ArrayForEach(kv, item) {
                if (!cJSON_IsString(kv) || !kv->string) {
                    fail(err, err_len, "__metadata__ value '%s' is not a string",
                         kv->string ? kv->string : "?");
                    goto done;
                }
                f->meta_keys[f->n_meta] = strdup(kv->string);
                f->meta_values[f->n_meta++] = strdup(kv->valuestring);
            }
            continue;
        }
        if (st_find(f, item->string)) {
            fail(err, err_len, "tensor '%s' appears twice in the header", item->string);
            goto done;
        }
        st_entry *e = &f->entries[f->n++];
        e->name = strdup(item->string);
        if (!parse_entry(e, item, data, data_len, err, err_len)) goto done;
    }
    /* tensors must not overlap */
    st_entry **order = xmalloc(sizeof(st_entry *) * ((size_t)f->n + 1));
    for (int i = 0; i < f->n; i++) order[i] = &f->entries[i];
    qsort(order, (size_t)f->n, sizeof(st_entry *), cmp_by_offset);
    for (int i = 1; i < f->n; i++)
        if (order[i - 1]->data + order[i - 1]->nbytes > order[i]->data) {
            fail(err, err_len, "tensors '%s' and '%s' overlap", order[i - 1]->name, order[i]->name);
            free(order);
            goto done;
        }
    free(order);
    ok = true;
done:
    cJSON_Delete(root);
    if (!ok) st_close(f);
    return ok;
}

bool st_read(st_file *f, const char *path, char *err, size_t err_len) {
    memset(f, 0, sizeof(*f));
    size_t size;
    uint8_t *buf = (uint8_t *)file_read_whole(path, SIZE_MAX / 2, &size, err, err_len);
    if (!buf) return false;
    char inner[512];
    if (!st_parse(f, buf, size, inner, sizeof(inner)))
        return fail(err, err_len, "%s: %s", path, inner);
    return true;
}

void st_close(st_file *f) {
    for (int i = 0; i < f->n; i++) free(f->entries[i].name);
    for (int i = 0; i < f->n_meta; i++) free(f->meta_keys[i]), free(f->meta_values[i]);
    free(f->entries);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->buf);
    memset(f, 0, sizeof(*f));
}

const st_entry *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->entries[i].name, name) == 0) return &f->entries[i];
    return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

static float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) bits = sign;
        else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) mant <<= 1, exp--;
            bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

bool st_to_f32(const st_entry *e, float *out) {
    const uint8_t *p = e->data;
    switch (e->dtype) {
    case ST_F32: memcpy(out, p, e->nbytes); return true;
    case ST_F64:
        for (int64_t i = 0; i < e->numel; i++) {
            double v;
            memcpy(&v, p + 8 * i, 8);
            out[i] = (float)v;
        }
        return true;
    case ST_F16:
        for (int64_t i = 0; i < e->numel; i++) out[i] = half_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return true;
    case ST_BF16:
        for (int64_t i = 0; i < e->numel; i++) {
            uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(&out[i], &bits, 4);
        }
        return true;
    default: return false;
    }
}

void st_writer_init(st_writer *w) { memset(w, 0, sizeof(*w)); }

void st_writer_free(st_writer *w) {
    free(w->items);
    free(w->meta_keys);
    free(w->meta_values);
    memset(w, 0, sizeof(*w));
}

void st_add(st_writer *w, const char *name, const float *data, int ndim, const int *shape) {
    CHECK(ndim <= ST_MAX_DIMS, "tensor %s has %d dims", name, ndim);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->items = xrealloc(w->items, sizeof(*w->items) * (size_t)w->cap);
    }
    struct st_item *it = &w->items[w->n++];
    it->name = name;
    it->data = data;
    it->ndim = ndim;
    for (int i = 0; i < ndim; i++) it->shape[i] = shape[i];
}

void st_add_meta(st_writer *w, const char *key, const char *value) {
    if (w->n_meta == w->cap_meta) {
        w->cap_meta = w->cap_meta ? 2 * w->cap_meta : 16;
        w->meta_keys = xrealloc(w->meta_keys, sizeof(char *) * (size_t)w->cap_meta);
        w->meta_values = xrealloc(w->meta_values, sizeof(char *) * (size_t)w->cap_meta);
    }
    w->meta_keys[w->n_meta] = key;
    w->meta_values[w->n_meta++] = value;
}

static int64_t item_numel(const struct st_item *it) {
    int64_t n = 1;
    for (int i = 0; i < it->ndim; i++) n *= it->shape[i];
    return n;
}

bool st_write(const st_writer *w, const char *path, char *err, size_t err_len) {
    cJSON *root = cJSON_CreateObject();
    if (w->n_meta) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < w->n_meta; i++) cJSON_AddStringToObject(meta, w->meta_keys[i], w->meta_values[i]);
    }
    size_t offset = 0;
    for (int i = 0; i < w->n; i++) {
        const struct st_item *it = &w->items[i];
        cJSON *e = cJSON_AddObjectToObject(root, it->name);
        cJSON_AddStringToObject(e, "dtype", "F32");
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < it->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)it->shape[d]));
        size_t bytes = (size_t)item_numel(it) * 4;
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + bytes)));
        offset += bytes;
    }
    char *header = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t hlen = strlen(header);
    size_t padded = (hlen + 7) / 8 * 8; /* the format pads the header with spaces to 8 bytes */

    size_t plen = strlen(path);
    char *tmp = xmalloc(plen + 16);
    snprintf(tmp, plen + 16, "%s.tmp", path);
    bool ok = false;
    FILE *fp = fopen(tmp, "wb");
    if (!fp) {
        fail(err, err_len, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    uint8_t len_bytes[8];
    for (int i = 0; i < 8; i++) len_bytes[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    bool wrote = fwrite(len_bytes, 1, 8, fp) == 8 && fwrite(header, 1, hlen, fp) == hlen;
    for (size_t i = hlen; i < padded && wrote; i++) wrote = fputc(' ', fp) != EOF;
    for (int i = 0; i < w->n && wrote; i++) {
        size_t count = (size_t)item_numel(&w->items[i]);
        wrote = fwrite(w->items[i].data, 4, count, fp) == count;
    }
    wrote = wrote && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    if (fclose(fp) != 0) wrote = false;
    if (!wrote) {
        fail(err, err_len, "%s: write failed: %s", tmp, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        fail(err, err_len, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        goto done;
    }
    /* make the rename itself durable */
    char *dir_copy = strdup(path);
    int dfd = open(dirname(dir_copy), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir_copy);
    ok = true;
done:
    free(tmp);
    cJSON_free(header);
    return ok;
}
