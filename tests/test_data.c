/* Data: folder/list indexing and its errors, unreadable files skipped with a warning, loader
 * determinism across worker counts, transforms on known inputs. */
#include <errno.h>
#include <stb_image_write.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/core/config.h"
#include "../src/data/augment.h"
#include "../src/data/data.h"
#include "../src/data/randaugment.h"
#include "test.h"

/* a temp folder tree: root/<class>/<i>.png with distinct gray levels; returns root */
static const char *make_folder(char *root, size_t len, int classes, int per_class, int size) {
    snprintf(root, len, "/tmp/vitc_data_%d_%d", (int)getpid(), classes * 100 + per_class);
    mkdir(root, 0755);
    unsigned char px[64 * 64];
    for (int c = 0; c < classes; c++) {
        char dir[512];
        snprintf(dir, sizeof(dir), "%s/class_%c", root, 'a' + c);
        mkdir(dir, 0755);
        for (int i = 0; i < per_class; i++) {
            for (int p = 0; p < size * size; p++) px[p] = (unsigned char)((c * 50 + i * 7 + p) % 256);
            char path[600];
            snprintf(path, sizeof(path), "%s/%03d.png", dir, i);
            stbi_write_png(path, size, size, 1, px, size);
        }
    }
    return root;
}

static void remove_tree(const char *root) {
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
}

static augment_config eval_config(int size, int chans) {
    augment_config a = {.img_size = size, .in_chans = chans, .crop_pct = 1.0, .scale_min = 0.5,
                        .scale_max = 1.0, .ratio_min = 0.75, .ratio_max = 1.33, .hflip = 0.5};
    for (int c = 0; c < 4; c++) a.mean[c] = 0, a.std[c] = 1;
    return a;
}

TEST(dataset_folder_classes_sorted_and_errors) {
    char root[256], err[1024];
    make_folder(root, sizeof(root), 3, 4, 8);
    dataset d;
    EXPECT(dataset_open(&d, root, err, sizeof(err)), "%s", err);
    EXPECT(d.n == 12 && d.n_classes == 3 && !strcmp(d.class_names[2], "class_c"), "indexing");
    EXPECT(d.labels[0] == 0 && d.labels[11] == 2 && strstr(d.paths[5], "class_b/001.png"), "order");
    dataset_free(&d);
    char empty[512];
    snprintf(empty, sizeof(empty), "%s/class_d", root);
    mkdir(empty, 0755);
    EXPECT(!dataset_open(&d, root, err, sizeof(err)) && strstr(err, "class_d is empty"), "%s", err);
    /* files not named as images (in any case of their extension) are left out, and counted */
    const char *others[] = {"class_d/notes.txt", "class_a/Thumbs.db", "class_b/004.webp"};
    for (int i = 0; i < 3; i++) {
        char path[600];
        snprintf(path, sizeof(path), "%s/%s", root, others[i]);
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
    }
    EXPECT(!dataset_open(&d, root, err, sizeof(err)) &&
               strstr(err, "class_d has no images (1 files, none named as one: .jpg .jpeg .png"),
           "%s", err);
    char renamed[2][600];
    snprintf(renamed[0], sizeof(renamed[0]), "%s/class_a/000.png", root);
    snprintf(renamed[1], sizeof(renamed[1]), "%s/class_d/000.JPEG", root);
    EXPECT(rename(renamed[0], renamed[1]) == 0, "%s", strerror(errno));
    EXPECT(dataset_open(&d, root, err, sizeof(err)), "%s", err);
    EXPECT(d.n == 12 && d.n_classes == 4 && d.labels[11] == 3 && strstr(d.paths[11], "000.JPEG") &&
               d.not_images == 3 && strstr(d.not_image, "class_a/Thumbs.db"),
           "%d images, %d classes, %d not images (%s)", d.n, d.n_classes, d.not_images,
           d.not_image ? d.not_image : "none");
    dataset_free(&d);
    EXPECT(!dataset_open(&d, "/nonexistent/vitc", err, sizeof(err)) && strstr(err, "/nonexistent/vitc"),
           "%s", err);
    char split[512];
    snprintf(split, sizeof(split), "%s/class_a", root); /* a folder of files, no class folders */
    EXPECT(!dataset_open(&d, split, err, sizeof(err)) && strstr(err, "has no class folders"), "%s", err);
    remove_tree(root);
}

/* ImageNet-V2 names its class folders 0 to 999 by ImageNet's class numbers: against classes named
 * apart, folder 10 is class 10 (sorted as text it would be the third); folders that are not the
 * numbers 0 to n - 1 keep the sorted order */
TEST(dataset_numbered_class_folders_are_their_classes) {
    char root[256], err[1024], path[600];
    snprintf(root, sizeof(root), "/tmp/vitc_numbered_%d", (int)getpid());
    mkdir(root, 0755);
    unsigned char px[4 * 4] = {0};
    const char *names[12] = {"n0", "n1", "n2", "n3", "n4",  "n5",
                             "n6", "n7", "n8", "n9", "n10", "n11"};
    for (int k = 0; k < 12; k++) {
        snprintf(path, sizeof(path), "%s/%d", root, k);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/%d/%d.png", root, k, k);
        stbi_write_png(path, 4, 4, 1, px, 4);
    }
    dataset d;
    EXPECT(dataset_open(&d, root, err, sizeof(err)), "%s", err);
    class_match match = dataset_match_classes(&d, names, 12, "the checkpoint", err, sizeof(err));
    EXPECT(match == CLASSES_NAMED_APART && !strcmp(d.class_names[2], "10"), "match %d: %s", match,
           err);
    match = dataset_numbered_classes(&d, match);
    bool numbered = match == CLASSES_NUMBERED && d.n == 12;
    for (int i = 0; numbered && i < 12; i++) {
        char name[16], file[32];
        snprintf(name, sizeof(name), "%d", d.labels[i]);
        snprintf(file, sizeof(file), "/%d/%d.png", d.labels[i], d.labels[i]);
        numbered = !strcmp(d.class_names[d.labels[i]], name) && strstr(d.paths[i], file);
    }
    EXPECT(numbered, "match %d; class 2 is folder %s, class 10 is %s", match, d.class_names[2],
           d.class_names[10]);
    dataset_free(&d);
    /* not the numbers 0 to 11: a leading zero, a number past them; and a match is left alone */
    const char *renamed[][2] = {{"11", "011"}, {"011", "12"}};
    for (int i = 0; i < 2; i++) {
        char from[600];
        snprintf(from, sizeof(from), "%s/%s", root, renamed[i][0]);
        snprintf(path, sizeof(path), "%s/%s", root, renamed[i][1]);
        EXPECT(rename(from, path) == 0, "%s", strerror(errno));
        EXPECT(dataset_open(&d, root, err, sizeof(err)), "%s", err);
        match = dataset_match_classes(&d, names, 12, "the checkpoint", err, sizeof(err));
        bool as_text = dataset_numbered_classes(&d, match) == CLASSES_NAMED_APART && d.n == 12;
        for (int c = 0; as_text && c < 12; c++) /* a file per folder, in order */
            as_text =
                d.labels[c] == c && (!c || strcmp(d.class_names[c - 1], d.class_names[c]) < 0);
        EXPECT(as_text, "%s: class 2 is %s", renamed[i][1], d.class_names[2]);
        dataset_free(&d);
    }
    EXPECT(dataset_open(&d, root, err, sizeof(err)), "%s", err);
    match = dataset_match_classes(&d, (const char *const *)d.class_names, 12, "itself", err,
                                  sizeof(err));
    EXPECT(dataset_numbered_classes(&d, match) == CLASSES_MATCH && !strcmp(d.class_names[2], "10"),
           "its own classes: class 2 is %s", d.class_names[2]);
    dataset_free(&d);
    remove_tree(root);
}

TEST(dataset_list_file) {
    char root[256], err[1024], list[512];
    make_folder(root, sizeof(root), 2, 2, 8);
    snprintf(list, sizeof(list), "%s/list.txt", root);
    FILE *f = fopen(list, "w");
    fprintf(f, "class_b/000.png 1\nclass_a/001.png 0\n# comment\n\n");
    fclose(f);
    dataset d;
    EXPECT(dataset_open(&d, list, err, sizeof(err)), "%s", err);
    EXPECT(d.n == 2 && d.labels[0] == 1 && d.n_classes == 2, "list");
    dataset_free(&d);
    f = fopen(list, "w");
    fprintf(f, "class_b/000.png x\n");
    fclose(f);
    EXPECT(!dataset_open(&d, list, err, sizeof(err)) && strstr(err, "list.txt:1"), "%s", err);
    remove_tree(root);
}

TEST(dataset_classes_matched_by_name_to_the_reference) {
    char root[256], err[1024], list[512];
    make_folder(root, sizeof(root), 3, 1, 8);
    dataset d;
    EXPECT(dataset_open(&d, root, err, sizeof(err)), "%s", err);
    struct {
        const char *names[4];
        int n;
        class_match want;
        const char *says;
    } cases[] = {
        {{"class_a", "class_b", "class_c"}, 3, CLASSES_MATCH, NULL},
        {{"class_a", "class_b", "class_c", "class_d"}, 4, CLASSES_MATCH, NULL}, /* last absent */
        {{"class_a", "class_x", "class_c"},
         3,
         CLASSES_DIFFER,
         "class_b would take label 1, which ref gives to 'class_x' ('class_b' is not among"},
        {{"class_0", "class_a", "class_b", "class_c"},
         4,
         CLASSES_DIFFER,
         "class_a would take label 0, which ref gives to 'class_0' (its label for 'class_a' is 1)"},
        {{"class_a", "class_b"},
         2,
         CLASSES_DIFFER,
         "class_c would take label 2, which ref gives to no class"},
        {{"n1", "n2", "n3"}, 3, CLASSES_NAMED_APART, "('class_a' against 'n1' for label 0)"},
        {{"n1", "n2", "n3", "n4"}, 4, CLASSES_DIFFER, "class_a would take label 0"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        err[0] = 0;
        class_match got =
            dataset_match_classes(&d, cases[i].names, cases[i].n, "ref", err, sizeof(err));
        EXPECT(got == cases[i].want && (!cases[i].says || strstr(err, cases[i].says)),
               "case %zu: %d, %s", i, (int)got, err);
    }
    dataset_free(&d);
    snprintf(list, sizeof(list), "%s/list.txt", root);
    FILE *f = fopen(list, "w");
    fprintf(f, "class_a/000.png 0\nclass_c/000.png 2\n");
    fclose(f);
    EXPECT(dataset_open(&d, list, err, sizeof(err)), "%s", err);
    const char *none[3] = {0};
    EXPECT(dataset_match_classes(&d, none, 3, "ref", err, sizeof(err)) == CLASSES_MATCH, "%s", err);
    EXPECT(dataset_match_classes(&d, none, 2, "ref", err, sizeof(err)) == CLASSES_DIFFER &&
               strstr(err, "list.txt has labels up to 2, but ref has 2 classes"),
           "%s", err);
    dataset_free(&d);
    remove_tree(root);
}

static double one_batch_checksum(const batch *b) {
    double sum = 0;
    for (int i = 0; i < b->n * 16 * 16; i++) sum += b->images[i] * (1 + i % 7) + b->labels[i % b->n];
    return sum;
}

static double batch_checksum(loader *l, int epoch, int *n_batches, int *skipped) {
    loader_start_epoch(l, epoch, 0);
    batch b;
    double sum = 0;
    *n_batches = *skipped = 0;
    while (loader_next(l, &b)) {
        (*n_batches)++;
        *skipped += b.skipped;
        sum += one_batch_checksum(&b);
    }
    return sum;
}

TEST(loader_deterministic_whatever_the_workers_and_skips_bad_files) {
    char root[256], err[1024];
    make_folder(root, sizeof(root), 3, 7, 20);
    char bad[512];
    snprintf(bad, sizeof(bad), "%s/class_b/zz_corrupt.png", root);
    FILE *f = fopen(bad, "w");
    fprintf(f, "not a png");
    fclose(f);
    dataset d;
    EXPECT(dataset_open(&d, root, err, sizeof(err)), "%s", err);
    augment_config a = eval_config(16, 1);
    snprintf(a.randaugment, sizeof(a.randaugment), "rand-m9-mstd0.5-inc1");
    a.reprob = 0.5;
    loader *one = loader_create(&d, &a, 5, true, 1, 7), *three = loader_create(&d, &a, 5, true, 3, 7);
    int nb1, nb3, sk1, sk3;
    double s1 = batch_checksum(one, 2, &nb1, &sk1), s3 = batch_checksum(three, 2, &nb3, &sk3);
    EXPECT(nb1 == 4 && nb3 == 4, "22 samples / 5 with drop_last: %d %d batches", nb1, nb3);
    EXPECT(s1 == s3, "1 and 3 workers differ: %.17g vs %.17g", s1, s3);
    EXPECT(sk1 <= 1 && sk1 == sk3, "skipped %d %d", sk1, sk3);
    double other = batch_checksum(one, 3, &nb1, &sk1);
    EXPECT(other != s1, "another epoch gives another order/augmentation");
    loader_free(one);
    loader_free(three);
    loader *ev = loader_create(&d, &a, 5, false, 2, 0);
    int nb, sk;
    batch_checksum(ev, 0, &nb, &sk);
    EXPECT(nb == 5 && sk == 1, "eval keeps the last short batch (%d batches) and skips the corrupt file (%d)", nb, sk);
    loader_free(ev);
    dataset_free(&d);
    remove_tree(root);
}

/* a resumed run starts its epoch at the batch it stopped at: the same batches as the full epoch
 * from there on (order and augmentation), on a fresh loader with other workers */
TEST(loader_starting_mid_epoch_gives_the_rest_of_the_full_epoch) {
    char root[256], err[1024];
    make_folder(root, sizeof(root), 3, 9, 20);
    dataset d;
    EXPECT(dataset_open(&d, root, err, sizeof(err)), "%s", err);
    augment_config a = eval_config(16, 1);
    snprintf(a.randaugment, sizeof(a.randaugment), "rand-m9-mstd0.5-inc1");
    a.reprob = 0.5;
    loader *full = loader_create(&d, &a, 4, true, 1, 11), *rest = loader_create(&d, &a, 4, true, 2, 11);
    double sums[8];
    int n = 0;
    batch b;
    loader_start_epoch(full, 5, 0);
    while (n < 8 && loader_next(full, &b)) sums[n++] = one_batch_checksum(&b);
    EXPECT(n == 6, "27 samples / 4 with drop_last: %d batches", n);
    loader_start_epoch(rest, 5, 4);
    int got = 4;
    while (loader_next(rest, &b)) {
        EXPECT(got < n, "more batches than the full epoch");
        double s = one_batch_checksum(&b);
        EXPECT(s == sums[got], "batch %d: %.17g from batch 4 vs %.17g in the full epoch", got, s, sums[got]);
        got++;
    }
    EXPECT(got == n, "the rest of the epoch ended after batch %d of %d", got, n);
    loader_free(full);
    loader_free(rest);
    dataset_free(&d);
    remove_tree(root);
}

TEST(eval_transform_identity_and_normalisation) {
    unsigned char px[4 * 4 * 3];
    for (int i = 0; i < 48; i++) px[i] = (unsigned char)(i * 5);
    image img = {px, 4, 4, 3};
    augment_config a = eval_config(4, 3);
    a.mean[0] = 0.5, a.std[0] = 0.25;
    float out[48];
    transform_eval(&a, &img, out);
    EXPECT(fabsf(out[1] - 5 / 255.0f) < 1e-6f, "same-size resize is the identity");
    EXPECT(fabsf(out[0] - (0 - 0.5f) / 0.25f) < 1e-6f, "normalised %g", out[0]);
}

TEST(random_resized_crop_params_within_bounds_and_scale) {
    rng r;
    rng_seed(&r, 3, RNG_TEST);
    double area_sum = 0;
    for (int t = 0; t < 2000; t++) {
        int x, y, w, h;
        random_resized_crop_params(64, 48, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &r, &x, &y, &w, &h);
        EXPECT(x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= 64 && y + h <= 48, "crop %d %d %d %d", x, y, w, h);
        area_sum += (double)w * h / (64.0 * 48);
    }
    /* accepted crops: scale uniform in [0.08, 1] minus rejections of the big ones: mean below 0.54 */
    EXPECT(area_sum / 2000 > 0.3 && area_sum / 2000 < 0.54, "mean area %g", area_sum / 2000);
    int x, y, w, h;
    random_resized_crop_params(64, 48, 1.0, 1.0, 3.0, 3.0, &r, &x, &y, &w, &h);
    /* impossible ratio: fallback centre crop with the ratio clamped: w = 64, h = round(64/3) */
    EXPECT(w == 64 && h == 21 && x == 0 && y == 13, "fallback %d %d %d %d", x, y, w, h);
}

TEST(random_erasing_box_of_noise) {
    rng r;
    rng_seed(&r, 4, RNG_TEST);
    float img[32 * 32];
    for (int i = 0; i < 1024; i++) img[i] = 5.0f;
    random_erasing(img, 32, 1, 1.0, &r);
    int changed = 0;
    for (int i = 0; i < 1024; i++) changed += img[i] != 5.0f;
    EXPECT(changed >= 0.02 * 1024 * 0.5 && changed <= 1024 / 3 + 40, "erased %d pixels", changed);
    for (int i = 0; i < 1024; i++) img[i] = 5.0f;
    random_erasing(img, 32, 1, 0.0, &r);
    for (int i = 0; i < 1024; i++) EXPECT(img[i] == 5.0f, "p = 0 erased pixel %d", i);
}

TEST(randaugment_ops_on_known_inputs) {
    randaugment ra;
    EXPECT(randaugment_parse(&ra, "rand-m9-mstd0.5-inc1") && ra.num_ops == 2 && ra.magnitude == 9 &&
               ra.mstd == 0.5 && ra.increasing,
           "parse");
    EXPECT(!randaugment_parse(&ra, "rand-m9-bogus"), "bad spec accepted");
    const char *out_of_range[] = {"rand-n99999999999-m9-inc1", "rand-n17-m9-inc1", "rand-n-1-m9-inc1",
                                  "rand-minf-inc1", "rand-m9-mstdnan-inc1", "rand-n-m9-inc1"};
    for (int i = 0; i < 6; i++)
        EXPECT(!randaugment_parse(&ra, out_of_range[i]), "%s accepted", out_of_range[i]);
    EXPECT(randaugment_parse(&ra, "rand-n16-m9-inc1") && ra.num_ops == 16, "n16");
    /* timm's spec without inc1 is a spec, of an op set not implemented: the error says which */
    config spec;
    config_init(&spec);
    config_merge_text(&spec, "{\"aug\": {\"randaugment\": \"rand-n2-m9-mstd0.5\"}}", "x.json");
    augment_config ac;
    EXPECT_ERROR(augment_config_read(&ac, &spec),
                 "aug.randaugment: \"rand-n2-m9-mstd0.5\": only timm's increasing op set (inc1)");
    config_free(&spec);
    unsigned char a[8] = {0, 10, 100, 127, 128, 200, 250, 255}, s[8];
    image img = {a, 8, 1, 1}, scratch = {s, 8, 1, 1};
    randaugment_op(RA_INVERT, 5, false, &img, &scratch);
    EXPECT(a[0] == 255 && a[7] == 0 && a[2] == 155, "invert");
    randaugment_op(RA_INVERT, 5, false, &img, &scratch);
    randaugment_op(RA_SOLARIZE, 5, false, &img, &scratch); /* threshold 256 - 128 = 128 */
    EXPECT(a[3] == 127 && a[4] == 127 && a[7] == 0, "solarize %d %d %d", a[3], a[4], a[7]);
    unsigned char p[4] = {255, 17, 64, 200};
    image pimg = {p, 4, 1, 1};
    randaugment_op(RA_POSTERIZE, 5, false, &pimg, &scratch); /* 4 - 2 = 2 bits kept */
    EXPECT(p[0] == 192 && p[1] == 0 && p[2] == 64 && p[3] == 192, "posterize %d %d %d %d", p[0], p[1], p[2], p[3]);
    unsigned char c[4] = {50, 100, 150, 100};
    image cimg = {c, 4, 1, 1};
    randaugment_op(RA_AUTOCONTRAST, 0, false, &cimg, &scratch);
    EXPECT(c[0] == 0 && c[2] >= 254 && c[1] == 127, "autocontrast %d %d %d", c[0], c[1], c[2]);
    unsigned char b[4] = {100, 100, 200, 50};
    image bimg = {b, 4, 1, 1};
    randaugment_op(RA_BRIGHTNESS, 10, true, &bimg, &scratch); /* factor 1 - 0.9 */
    EXPECT(b[0] == 10 && b[2] == 20, "brightness %d %d", b[0], b[2]);
    /* translate right by 0.45 * 10 px (magnitude 10): the left columns take the fill colour */
    unsigned char t[10 * 3], ts[10 * 3];
    for (int i = 0; i < 30; i++) t[i] = 9;
    image timg = {t, 10, 1, 3}, tscratch = {ts, 10, 1, 3};
    randaugment_op(RA_TRANSLATE_X, 10, true, &timg, &tscratch);
    EXPECT(t[0] == 124 && t[1] == 116 && t[2] == 104 && t[27] == 9, "translate %d %d", t[0], t[27]);
}
