/* Converts Debian's dataset-fashion-mnist (IDX files, gzip-compressed) into an image-folder dataset:
 * OUT/{train,val}/<class>/<index>.png, the layout `train` reads. The test split becomes val. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb_image_write.h>

static const char *const class_names[10] = {"0_tshirt_top", "1_trouser", "2_pullover", "3_dress",
                                            "4_coat",       "5_sandal",  "6_shirt",    "7_sneaker",
                                            "8_bag",        "9_ankle_boot"};

/* the whole decompressed IDX file (via gzip -dc, so no zlib dependency) */
static uint8_t *read_idx(const char *path, size_t *len) {
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "gzip -dc '%s'", path);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, p)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    if (pclose(p) != 0 || !buf || n < 8) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

static int convert(const char *src, const char *images_name, const char *labels_name,
                   const char *out, const char *split, int limit) {
    char path[4096];
    size_t ni, nl;
    snprintf(path, sizeof(path), "%s/%s", src, images_name);
    uint8_t *images = read_idx(path, &ni);
    snprintf(path, sizeof(path), "%s/%s", src, labels_name);
    uint8_t *labels = read_idx(path, &nl);
    if (!images || !labels || be32(images) != 0x803 || be32(labels) != 0x801) {
        fprintf(stderr, "error: %s/%s or %s is missing or not an IDX file (install dataset-fashion-mnist)\n",
                src, images_name, labels_name);
        return 1;
    }
    uint32_t n = be32(images + 4), rows = be32(images + 8), cols = be32(images + 12);
    if (be32(labels + 4) != n || ni < 16 + (size_t)n * rows * cols || nl < 8 + (size_t)n) {
        fprintf(stderr, "error: %s: image and label counts or sizes disagree\n", src);
        return 1;
    }
    if (limit > 0 && (uint32_t)limit < n) n = (uint32_t)limit;
    for (int c = 0; c < 10; c++) {
        snprintf(path, sizeof(path), "%s/%s/%s", out, split, class_names[c]);
        char partial[4096];
        for (char *s = path; (s = strchr(s + 1, '/'));) {
            snprintf(partial, (size_t)(s - path) + 1, "%s", path);
            mkdir(partial, 0755);
        }
        if (mkdir(path, 0755) && errno != EEXIST) {
            fprintf(stderr, "error: cannot create %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        int label = labels[8 + i];
        if (label > 9) {
            fprintf(stderr, "error: %s: label %d of image %u\n", labels_name, label, i);
            return 1;
        }
        snprintf(path, sizeof(path), "%s/%s/%s/%05u.png", out, split, class_names[label], i);
        if (!stbi_write_png(path, (int)cols, (int)rows, 1, images + 16 + (size_t)i * rows * cols, (int)cols)) {
            fprintf(stderr, "error: cannot write %s\n", path);
            return 1;
        }
    }
    printf("%s: %u images of %ux%u in %s/%s\n", split, n, cols, rows, out, split);
    free(images);
    free(labels);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: fmnist_to_png SRC_DIR OUT_DIR [LIMIT]\n"
                        "  SRC_DIR  /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)\n"
                        "  LIMIT    convert only the first LIMIT images of each split\n");
        return 2;
    }
    int limit = argc > 3 ? atoi(argv[3]) : 0;
    if (convert(argv[1], "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", argv[2], "train", limit) ||
        convert(argv[1], "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", argv[2], "val", limit))
        return 1;
    return 0;
}
