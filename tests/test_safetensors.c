/* safetensors: round trip, metadata, and rejection of malformed files with a message. */
#include <unistd.h>

#include "../src/core/safetensors.h"
#include "test.h"

static const char *tmp_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "/tmp/vitc_test_%d_%s", (int)getpid(), name);
    return buf;
}
#define TMP_PATH(name) tmp_path((char[256]){0}, 256, (name))

TEST(safetensors_round_trip_with_metadata) {
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {-1.5f, 0, 7};
    st_writer w;
    st_writer_init(&w);
    st_add(&w, "blocks.0.attn.qkv.weight", a, 2, (int[]){2, 3});
    st_add(&w, "head.bias", b, 1, (int[]){3});
    st_add_meta(&w, "config", "{\"model\": \"deit_t\"}");
    char err[512];
    const char *path = TMP_PATH("rt.safetensors");
    EXPECT(st_write(&w, path, err, sizeof(err)), "%s", err);
    st_writer_free(&w);
    EXPECT(access(TMP_PATH("rt.safetensors.tmp"), F_OK) != 0, "temp file left behind");
    st_file f;
    EXPECT(st_read(&f, path, err, sizeof(err)), "%s", err);
    const st_entry *e = st_find(&f, "blocks.0.attn.qkv.weight");
    EXPECT(e && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 3 && e->dtype == ST_F32, "entry");
    float got[6];
    EXPECT(st_to_f32(e, got) && memcmp(got, a, sizeof(a)) == 0, "data differs");
    e = st_find(&f, "head.bias");
    EXPECT(e && st_to_f32(e, got) && got[0] == -1.5f && got[2] == 7, "head.bias");
    EXPECT(st_meta(&f, "config") && strcmp(st_meta(&f, "config"), "{\"model\": \"deit_t\"}") == 0,
           "metadata");
    st_close(&f);
    unlink(path);
}

static bool parse_text(const char *header, size_t data_len, char *err, size_t err_len) {
    size_t hlen = strlen(header);
    size_t size = 8 + hlen + data_len;
    uint8_t *buf = calloc(size, 1);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, header, hlen);
    st_file f;
    bool ok = st_parse(&f, buf, size, err, err_len);
    if (ok) st_close(&f);
    return ok;
}

TEST(safetensors_rejects_malformed_headers) {
    char err[512];
    struct {
        const char *header;
        size_t data;
        const char *message;
    } cases[] = {
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, "outside"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, "8 bytes for 3"},
        {"{\"a\": {\"dtype\": \"Q4\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "unsupported dtype"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, "bad shape"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8, "data_offsets"},
        {"[1, 2]", 0, "not a JSON object"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, "overlap"},
        {"{\"__metadata__\": {\"k\": 3}}", 0, "not a string"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, "twice"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        EXPECT(!parse_text(cases[i].header, cases[i].data, err, sizeof(err)), "case %zu accepted", i);
        EXPECT(strstr(err, cases[i].message), "case %zu: '%s' lacks '%s'", i, err, cases[i].message);
    }
    uint8_t *tiny = calloc(4, 1);
    st_file f;
    EXPECT(!st_parse(&f, tiny, 4, err, sizeof(err)) && strstr(err, "too short"), "%s", err);
    uint8_t *huge = calloc(16, 1);
    huge[0] = 0xff, huge[7] = 0x7f;
    EXPECT(!st_parse(&f, huge, 16, err, sizeof(err)) && strstr(err, "truncated"), "%s", err);
}

TEST(safetensors_truncated_file_is_an_error_naming_it) {
    float a[64] = {0};
    st_writer w;
    st_writer_init(&w);
    st_add(&w, "w", a, 1, (int[]){64});
    char err[512];
    const char *path = TMP_PATH("trunc.safetensors");
    EXPECT(st_write(&w, path, err, sizeof(err)), "%s", err);
    st_writer_free(&w);
    EXPECT(truncate(path, 100) == 0, "truncate");
    st_file f;
    EXPECT(!st_read(&f, path, err, sizeof(err)), "truncated file accepted");
    EXPECT(strstr(err, path) && strstr(err, "outside"), "message: %s", err);
    unlink(path);
    EXPECT(!st_read(&f, path, err, sizeof(err)) && strstr(err, "No such file"), "%s", err);
    /* a directory opens for reading and then claims 2^63 bytes: eval --ckpt DIR said "out of memory" */
    EXPECT(!st_read(&f, "/tmp", err, sizeof(err)) && strstr(err, "/tmp: is a directory"), "%s", err);
    EXPECT(!st_read(&f, "/dev/null", err, sizeof(err)) && strstr(err, "/dev/null: is not a regular file"),
           "%s", err);
}

TEST(safetensors_converts_half_precision) {
    /* F16 1.0 = 0x3c00, -2.0 = 0xc000; BF16 1.0 = 0x3f80 */
    uint8_t data[4] = {0x00, 0x3c, 0x00, 0xc0};
    st_entry e = {.dtype = ST_F16, .numel = 2, .data = data, .nbytes = 4};
    float out[2];
    EXPECT(st_to_f32(&e, out) && out[0] == 1.0f && out[1] == -2.0f, "f16 %g %g", out[0], out[1]);
    uint8_t bf[2] = {0x80, 0x3f};
    st_entry e2 = {.dtype = ST_BF16, .numel = 1, .data = bf, .nbytes = 2};
    EXPECT(st_to_f32(&e2, out) && out[0] == 1.0f, "bf16 %g", out[0]);
    st_entry e3 = {.dtype = ST_I64, .numel = 1, .data = data, .nbytes = 8};
    EXPECT(!st_to_f32(&e3, out), "int64 converted to float");
}
