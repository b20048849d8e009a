/* A short fuzz run inside `make test`: the libFuzzer harnesses of tests/fuzz/ replayed on seeded
 * mutations (bit flips, truncations, splices, JSON token insertions) of real files. The long runs
 * are `make fuzz` (libFuzzer, clang). */
#define FUZZ_ENTRY fuzz_checkpoint_one
#include "fuzz/fuzz_checkpoint.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_config_one
#include "fuzz/fuzz_config.c"
#undef FUZZ_ENTRY

#include "test.h"

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n + 1);
    *n = fread(b, 1, *n, f);
    fclose(f);
    return b;
}

static const char *const json_tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "-1", "1e300", "null",
                                          "true", "\"model\"", "\"attn\"", "[[", "0", "\"agent\""};

/* one mutation of seed into out (capacity cap); returns its length */
static size_t mutate(const uint8_t *seed, size_t n, uint8_t *out, size_t cap, bool json, rng *r) {
    size_t len = n < cap ? n : cap;
    memcpy(out, seed, len);
    int edits = 1 + (int)rng_below(r, 4);
    for (int e = 0; e < edits && len; e++) {
        size_t at = json ? rng_below(r, (uint32_t)len) : rng_below(r, (uint32_t)(len < 4096 ? len : 4096));
        switch (rng_below(r, json ? 4 : 3)) {
        case 0: out[at] ^= (uint8_t)(1u << rng_below(r, 8)); break;
        case 1: len = at + (len > at ? rng_below(r, (uint32_t)(len - at)) : 0); break;
        case 2: out[at] = (uint8_t)rng_below(r, 256); break;
        default: {
            const char *t = json_tokens[rng_below(r, sizeof(json_tokens) / sizeof(json_tokens[0]))];
            size_t tl = strlen(t);
            if (len + tl < cap) {
                memmove(out + at + tl, out + at, len - at);
                memcpy(out + at, t, tl);
                len += tl;
            }
        }
        }
    }
    return len;
}

TEST(fuzz_checkpoint_reader_short_run) {
    size_t n;
    uint8_t *seed = read_all("tests/fixtures/converted_swin_agent.safetensors", &n);
    EXPECT(seed, "seed file missing");
    uint8_t *buf = malloc(n + 64);
    rng r;
    rng_seed(&r, 77, RNG_TEST);
    test_abandon_begin(); /* the harnesses catch errors by longjmp */
    for (int i = 0; i < 3000; i++) fuzz_checkpoint_one(buf, mutate(seed, n, buf, n + 64, false, &r));
    test_abandon_end();
    free(buf);
    free(seed);
}

TEST(fuzz_config_loader_short_run) {
    const char *seeds[] = {"configs/agent_swin_b.json", "configs/demo_fmnist.json",
                           "configs/tiny/swin_agent.json", "configs/agent_cswin_b_384.json"};
    rng r;
    rng_seed(&r, 78, RNG_TEST);
    uint8_t buf[8192];
    for (int s = 0; s < 4; s++) {
        size_t n;
        uint8_t *seed = read_all(seeds[s], &n);
        EXPECT(seed, "%s missing", seeds[s]);
        test_abandon_begin();
        for (int i = 0; i < 800; i++) fuzz_config_one(buf, mutate(seed, n, buf, sizeof(buf), true, &r));
        test_abandon_end();
        free(seed);
    }
}
