/* Fuzz harness for the checkpoint reader: arbitrary bytes as a .safetensors file, then everything
 * eval does with a parsed file short of building the model (entries, conversions, metadata, config).
 * libFuzzer entry point; tests/test_fuzz.c replays it on mutated seeds inside `make test`. */
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../models/model.h"
#include "../../src/core/check.h"
#include "../../src/core/safetensors.h"

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    st_file f;
    char err[512];
    if (!st_parse(&f, buf, size, err, sizeof(err))) return 0;
    float *tmp = NULL;
    for (int i = 0; i < f.n; i++) {
        const st_entry *e = &f.entries[i];
        if (e->nbytes > (1u << 24)) continue;
        tmp = realloc(tmp, sizeof(float) * (size_t)(e->numel + 1));
        st_to_f32(e, tmp);
    }
    free(tmp);
    const char *cfg = st_meta(&f, "config");
    if (cfg) { /* the config travels in the header: errors in it must be reported, not crash */
        jmp_buf jump;
        vitc_die_jump = &jump;
        config c;
        config_init(&c);
        if (setjmp(jump) == 0) {
            model_config_load_text(&c, cfg, "fuzz");
            model_config mc;
            model_config_read(&mc, &c);
        }
        vitc_die_jump = NULL;
        config_free(&c);
    }
    st_close(&f);
    return 0;
}
