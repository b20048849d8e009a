/* Fuzz harness for the config loader: arbitrary bytes as a --config file, resolved and validated in
 * every section as `train` does (errors are caught: they must report, never crash).
 * libFuzzer entry point; tests/test_fuzz.c replays it on mutated seeds inside `make test`. */
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../models/model.h"
#include "../../src/core/check.h"
#include "../../src/train/trainer.h"

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    jmp_buf jump;
    vitc_die_jump = &jump;
    config c;
    config_init(&c);
    if (setjmp(jump) == 0) {
        model_config_load_text(&c, text, "fuzz.json");
        train_check_config(&c);
        model_config mc;
        model_config_read(&mc, &c);
    }
    vitc_die_jump = NULL;
    config_free(&c);
    free(text);
    return 0;
}
