/* The errors a user meets first, end to end with ./train: a misspelt key next to a missing one, a
 * --config name that matches no file, and a failed check, which shows its C source location only
 * with VITC_DEBUG=1. Each names what to type instead where it can, and exits 1. And the usage
 * errors of the tools' flags, which exit 2 before building a model. */
#include <stdlib.h>

#include "shell.h"
#include "test.h"
#include "tiny_run.h"

TEST(errors_cli_typo_is_named_before_a_missing_key) {
    char out[16384], path[400];
    snprintf(path, sizeof(path), "%s/typo.json", tiny_run_dir());
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"model\": {\"name\": \"deit_t\", \"embed_dimm\": 3}}");
    fclose(f);
    int code = run(out, sizeof(out), "./train --config %s", path);
    EXPECT(code == 1 && strstr(out, "model.embed_dimm: unknown key; did you mean embed_dim?") &&
               strstr(out, "valid keys in model: name,") && !strstr(out, "data.train"),
           "exit %d:\n%s", code, out);
}

TEST(errors_cli_config_name_suggests_and_lists_configs) {
    char out[16384];
    int code = run(out, sizeof(out), "./train --config agent_swn_t");
    EXPECT(code == 1 && strstr(out, "--config agent_swn_t: no such file, nor configs/agent_swn_t.json; "
                                    "did you mean agent_swin_t?\nconfigs/ has:") &&
               strstr(out, " agent_swin_s, agent_swin_s_288, agent_swin_t,") && strstr(out, " tiny/"),
           "exit %d:\n%s", code, out);
    /* a subdirectory's name: its own configs */
    code = run(out, sizeof(out), "./train --config tiny/deit_agnt");
    EXPECT(code == 1 && strstr(out, "did you mean tiny/deit_agent?\nconfigs/tiny/ has:") &&
               strstr(out, " deit_agent, deit_elfatt,"),
           "exit %d:\n%s", code, out);
}

TEST(errors_cli_source_location_only_with_vitc_debug) {
    char out[16384];
    /* ELFATT splits its heads into global and local ones: one head fails the check in its constructor */
    const char *cmd = "./train --config tiny/deit_elfatt --set model.num_heads=[1] --summary";
    int code = run(out, sizeof(out), "env -u VITC_DEBUG %s", cmd);
    EXPECT(code == 1 && strstr(out, "error: blocks.0.attn: ELFATT needs at least 2 heads") && !strstr(out, ".c:"),
           "no source location by default (exit %d):\n%s", code, out);
    code = run(out, sizeof(out), "VITC_DEBUG=1 %s", cmd);
    EXPECT(code == 1 && strstr(out, "ELFATT needs at least 2 heads") && strstr(out, "(check failed: ") &&
               strstr(out, ".c:"),
           "VITC_DEBUG=1 adds the failed check and its file:line (exit %d):\n%s", code, out);
}

TEST(errors_cli_bench_names_each_usage_error) {
    const char *bench = getenv("VITC_BENCH");
    if (!bench) SKIP("VITC_BENCH (the bench binary, which make test sets) is not set");
    char out[16384];
    int code = run(out, sizeof(out), "%s --model deit_t --profile --sgemm 64,64,64", bench);
    EXPECT(code == 2 && strstr(out, "error: --profile with --sgemm: the bare GEMM's calls would "
                                    "count as the first op's time"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "%s --model deit_t --iters 0", bench);
    EXPECT(code == 2 && strstr(out, "error: --iters 0: expected an integer >= 1"), "exit %d:\n%s",
           code, out);
    code = run(out, sizeof(out), "%s --sgemm 99999999999,64,64", bench);
    EXPECT(code == 2 && strstr(out, "error: --sgemm 99999999999,64,64: expected M,K,N"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "%s --sgemm 64,64,64x", bench);
    EXPECT(code == 2 && strstr(out, "error: --sgemm 64,64,64x: expected M,K,N"), "exit %d:\n%s",
           code, out);
    code = run(out, sizeof(out), "%s --model deit_t --itres 3", bench);
    EXPECT(code == 2 && strstr(out, "error: unknown or incomplete argument '--itres'") &&
               strstr(out, "usage: bench"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "%s --model", bench);
    EXPECT(code == 2 && strstr(out, "error: unknown or incomplete argument '--model'"),
           "exit %d:\n%s", code, out);
    /* (under AddressSanitizer too: its allocator then returns NULL, as malloc does) */
    code = run(out, sizeof(out), "ASAN_OPTIONS=allocator_may_return_null=1 %s --model deit_t "
               "--batch 1000000000 --iters 1", bench);
    EXPECT(code == 1 && strstr(out, "error: out of memory allocating"), "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "%s --model deit_t --mode eval", bench);
    EXPECT(code == 2 && strstr(out, "usage: bench --model NAME [--mode train|infer]"),
           "exit %d:\n%s", code, out);
}

/* libgomp fails to start a hundred thousand threads, and the process crashed on the way */
TEST(errors_cli_thread_counts_are_bounded) {
    char out[16384];
    int code = run(out, sizeof(out), "./train --config tiny/deit_agent --threads 100000 --summary");
    EXPECT(code == 2 && strstr(out, "error: --threads 100000: expected an integer from 1 to 1024"),
           "exit %d:\n%s", code, out);
    code = run(out, sizeof(out), "OMP_NUM_THREADS=100000 ./train --config tiny/deit_agent --summary");
    EXPECT(code == 1 && strstr(out, "error: OMP_NUM_THREADS=100000: at most 1024 threads"),
           "exit %d:\n%s", code, out);
}

/* --help is the tools' own flag: bench took it for a flag missing its value */
TEST(errors_cli_help_prints_usage_on_stdout) {
    const char *bench = getenv("VITC_BENCH");
    char out[16384], cmd[300];
    const char *tools[] = {"./train", "./eval", "./sample", "%s"};
    for (int i = 0; i < 4; i++) {
        if (strstr(tools[i], "%s") && !bench) SKIP("VITC_BENCH (the bench binary) is not set");
        snprintf(cmd, sizeof(cmd), tools[i], bench);
        int code = run(out, sizeof(out), "%s --help 2>/dev/null", cmd);
        EXPECT(code == 0 && strstr(out, "usage: ") && !strstr(out, "error"), "%s --help: exit %d:\n%s",
               cmd, code, out);
    }
}

/* a number is read whole: "2x" is not 2, nor "two" 0 (bench's default thread count) */
TEST(errors_cli_number_flags_are_read_whole) {
    const char *bench = getenv("VITC_BENCH");
    char out[16384], cmd[600];
    const char *cases[][2] = {
        {"./train --config tiny/deit_agent --threads 2x", "--threads 2x"},
        {"./eval --ckpt none.safetensors --batch 5x", "--batch 5x"},
        {"./eval --ckpt none.safetensors --threads ''", "--threads "},
        {"./sample --ckpt none.safetensors --out none.png --n 3x", "--n 3x"},
        {"%s --model deit_t --mode infer --img 224px", "--img 224px"},
        {"%s --model deit_t --mode infer --threads two", "--threads two"},
    };
    for (int i = 0; i < 6; i++) {
        if (strstr(cases[i][0], "%s") && !bench) SKIP("VITC_BENCH (the bench binary) is not set");
        snprintf(cmd, sizeof(cmd), cases[i][0], bench);
        char message[100];
        snprintf(message, sizeof(message), "error: %s: expected an integer %s", cases[i][1],
                 strstr(cases[i][1], "--threads") ? "from 1 to 1024" : ">= 1");
        int code = run(out, sizeof(out), "%s", cmd);
        EXPECT(code == 2 && strstr(out, message), "%s: exit %d:\n%s", cmd, code, out);
    }
}

/* the images the tools write are PNG whatever the name: a name of another format is refused */
TEST(errors_cli_png_outputs_are_named_png) {
    char out[16384];
    const char *cases[][2] = {
        {"./eval --ckpt none.safetensors --image none.png --attn-map map.jpg",
         "--attn-map map.jpg"},
        {"./sample --ckpt none.safetensors --out grid.gif", "--out grid.gif"},
        {"./sample --ckpt none.safetensors --out dir/.png", "--out dir/.png"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char message[100];
        snprintf(message, sizeof(message), "error: %s: the file is written as PNG", cases[i][1]);
        int code = run(out, sizeof(out), "%s", cases[i][0]);
        EXPECT(code == 2 && strstr(out, message), "%s: exit %d:\n%s", cases[i][0], code, out);
    }
    int code = run(out, sizeof(out), "./sample --ckpt none.safetensors --out GRID.PNG");
    EXPECT(code == 1 && strstr(out, "none.safetensors"), "GRID.PNG: exit %d:\n%s", code, out);
    /* a folder the output cannot be written in is named before the work (sample found out after
     * its steps, eval --attn-map after the forward) */
    const char *folders[][2] = {
        {"./sample --ckpt none.safetensors --out /nowhere/grid.png",
         "--out /nowhere/grid.png: cannot write in /nowhere: No such file or directory"},
        {"./sample --ckpt none.safetensors --out x.png --jsd /nowhere/jsd.csv",
         "--jsd /nowhere/jsd.csv: cannot write in /nowhere: No such file or directory"},
        {"./eval --ckpt none.safetensors --image none.png --attn-map Makefile/map.png",
         "--attn-map Makefile/map.png: cannot write in Makefile: Not a directory"},
    };
    for (size_t i = 0; i < sizeof(folders) / sizeof(folders[0]); i++) {
        code = run(out, sizeof(out), "%s", folders[i][0]);
        EXPECT(code == 1 && strstr(out, folders[i][1]) && !strstr(out, "none.safetensors:"),
               "%s: exit %d:\n%s", folders[i][0], code, out);
    }
}
