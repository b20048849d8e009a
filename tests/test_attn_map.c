/* Attention maps (models/attn/attn_map.c) on every tiny backbone x attention model: each block's
 * equivalent attention row is a distribution over the keys (the local convs left out), and it lies
 * where the block can look — inside the query's shifted window (Swin) or its cross of stripes (CSwin). */
#include "../models/attn/attn_map.h"
#include "../models/model.h"
#include "../src/core/config.h"
#include "test.h"

static const char *const tiny[] = {
    "deit_native", "deit_agent", "deit_flatten", "deit_elfatt", "pvt_native", "pvt_agent",
    "pvt_flatten", "pvt_elfatt", "pvt_v2_native", "pvt_v2_flatten", "swin_native", "swin_agent",
    "swin_flatten", "swin_elfatt", "cswin_native", "cswin_agent", "cswin_flatten", "cswin_elfatt",
};

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = xmalloc((size_t)n + 1);
    s[fread(s, 1, (size_t)n, f)] = 0;
    fclose(f);
    return s;
}

/* the probe of block `block` for the query at fraction (qy, qx) of a random image */
static void probe_block(model *m, int block, float qy, float qx, attn_probe *p) {
    const model_config *mc = &m->cfg;
    rng r;
    rng_seed(&r, 7, RNG_TEST);
    tensor *x = TENSOR(1, mc->img_size, mc->img_size, mc->in_chans);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = rng_normal(&r);
    bool grad_was = tape_set_grad_enabled(false);
    *p = (attn_probe){.block = block, .qy = qy, .qx = qx};
    forward_opts o = {.train = false};
    attn_probe_set(p);
    model_forward(m, x, &o);
    attn_probe_set(NULL);
    tape_set_grad_enabled(grad_was);
}

TEST(attn_map_rows_are_distributions_in_every_block) {
    for (size_t t = 0; t < sizeof(tiny) / sizeof(*tiny); t++) {
        char path[128];
        snprintf(path, sizeof(path), "configs/tiny/%s.json", tiny[t]);
        char *json = read_text(path);
        EXPECT(json, "cannot read %s", path);
        config c;
        model *m = model_create_from_json(&c, json, path, 3);
        int blocks = 0;
        for (int s = 0; s < m->cfg.n_stages; s++) blocks += m->cfg.depths[s];
        for (int b = 0; b < blocks; b++) {
            attn_probe p;
            probe_block(m, b, 0.3f, 0.6f, &p);
            double sum = p.cls_weight, low = 0;
            for (int i = 0; p.row && i < p.map_h * p.map_w; i++) sum += p.row[i], low = fmin(low, p.row[i]);
            int hits = p.hits;
            attn_probe_free(&p);
            arena_reset(&vitc_arena);
            EXPECT(hits >= 1, "%s block %d: the probe saw no attention", tiny[t], b);
            /* FLatten's normaliser q_i·mean(k) + 1e-6 keeps its rows just under 1 where the (random)
             * focused q, k are small: q·k̄ / (q·k̄ + 1e-6) */
            bool flatten = strstr(tiny[t], "flatten") != NULL;
            double lo = flatten ? 0.5 : 1 - 2e-3;
            EXPECT(sum > lo && sum < 1 + 2e-3 && low > -1e-5, "%s block %d: row sums to %.6f, min %.3g",
                   tiny[t], b, sum, low);
        }
        model_free(m);
        config_free(&c);
        free(json);
    }
}

/* the sum of the row outside the cells keep(y, x) accepts */
static double weight_outside(const attn_probe *p, bool (*keep)(const attn_probe *, int, int)) {
    double out = 0;
    for (int y = 0; y < p->map_h; y++)
        for (int x = 0; x < p->map_w; x++)
            if (!keep(p, y, x)) out += fabs(p->row[y * p->map_w + x]);
    return out;
}

static int shift_, window_;
static bool same_shifted_window(const attn_probe *p, int y, int x) {
    int n = p->map_h, s = shift_, w = window_;
    return (y - s + n) % n / w == (p->query_y - s + n) % n / w && (x - s + n) % n / w == (p->query_x - s + n) % n / w;
}
static bool on_cross(const attn_probe *p, int y, int x) {
    return y / window_ == p->query_y / window_ || x / window_ == p->query_x / window_;
}

static model *tiny_model(const char *name, config *c) {
    char path[128];
    snprintf(path, sizeof(path), "configs/tiny/%s.json", name);
    char *json = read_text(path);
    model *m = json ? model_create_from_json(c, json, path, 5) : NULL;
    free(json);
    return m;
}

TEST(attn_map_swin_stays_in_the_shifted_window) {
    config c;
    model *m = tiny_model("swin_native", &c);
    EXPECT(m, "configs/tiny/swin_native.json");
    attn_probe p;
    probe_block(m, 1, 0.45f, 0.2f, &p); /* stage 0, second block: window 4, shift 2 on a 16x16 map */
    EXPECT(p.map_h == 16 && p.map_w == 16, "key grid %dx%d", p.map_h, p.map_w);
    shift_ = 2, window_ = 4;
    double outside = weight_outside(&p, same_shifted_window), inside = 1 - outside;
    shift_ = 0;
    double outside_unshifted = weight_outside(&p, same_shifted_window);
    attn_probe_free(&p);
    model_free(m);
    config_free(&c);
    arena_reset(&vitc_arena);
    EXPECT(outside < 1e-6 && inside > 0.99, "%.3g of the row outside the shifted window", outside);
    EXPECT(outside_unshifted > 0.05, "the row ignores the shift (%.3g outside the unshifted window)", outside_unshifted);
}

TEST(attn_map_cswin_forms_a_cross) {
    config c;
    model *m = tiny_model("cswin_native", &c);
    EXPECT(m, "configs/tiny/cswin_native.json");
    attn_probe p;
    probe_block(m, 0, 0.4f, 0.7f, &p); /* stage 0: stripes of width 2 */
    window_ = 2;
    double outside = weight_outside(&p, on_cross);
    double column = 0, row = 0;
    for (int y = 0; y < p.map_h; y++)
        for (int x = 0; x < p.map_w; x++) {
            if (x / 2 == p.query_x / 2 && y / 2 != p.query_y / 2) column += p.row[y * p.map_w + x];
            if (y / 2 == p.query_y / 2 && x / 2 != p.query_x / 2) row += p.row[y * p.map_w + x];
        }
    int hits = p.hits;
    attn_probe_free(&p);
    model_free(m);
    config_free(&c);
    arena_reset(&vitc_arena);
    EXPECT(hits == 2, "%d branches seen", hits);
    EXPECT(outside < 1e-6 && column > 0.05 && row > 0.05, "off the cross %.3g, column arm %.3f, row arm %.3f",
           outside, column, row);
}
