/* The device switch (ops/backend.h) where no GPU serves: the CPU is selected, a name that is no
 * device and a CUDA this build or machine cannot run are refused with their messages, a device table
 * that lacks kernels is named, and the CLIs' --device (and train.device) exit 1 with that message
 * (2 for a name that is no device). */
#include "../src/core/memory.h"
#include "../src/ops/backend.h"
#include "shell.h"
#include "test.h"
#include "tiny_run.h"

/* what --device cuda says on this build where no GPU is visible: a CPU build has no CUDA backend; a
 * CUDA build (run with CUDA_VISIBLE_DEVICES= below) names its missing kernels or the missing device */
static bool cuda_refused(const char *message) {
#ifdef VITC_CUDA
    return strstr(message, "--device cuda: no CUDA device (") ||
           strstr(message, "--device cuda: this build has no CUDA kernel for ");
#else
    return strstr(message, "--device cuda: this build has no CUDA backend (build it with make CUDA=1)");
#endif
}

TEST(backend_select_takes_the_cpu_and_refuses_what_it_cannot_run) {
    char err[1536] = "";
    EXPECT(backend_select("cpu", err, sizeof(err)), "%s", err);
    EXPECT(kernels == &cpu_kernels && vitc_memory() == &host_memory, "the CPU's kernels and memory");
    const char *not_devices[] = {"tpu", "cuda:", "cuda:x", "cuda:-1", "cuda1", "CPU"};
    for (size_t i = 0; i < sizeof(not_devices) / sizeof(not_devices[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "--device %s: expected cpu, cuda or cuda:N", not_devices[i]);
        EXPECT(!backend_select(not_devices[i], err, sizeof(err)) && strstr(err, want), "%s: %s", not_devices[i], err);
    }
#ifndef VITC_CUDA
    EXPECT(!backend_select("cuda", err, sizeof(err)) && cuda_refused(err), "%s", err);
    EXPECT(!backend_select("cuda:1", err, sizeof(err)) &&
           strstr(err, "--device cuda:1: this build has no CUDA backend (build it with make CUDA=1)"), "%s", err);
    EXPECT(!backend_select_partial("cuda", err, sizeof(err)) && cuda_refused(err), "%s", err);
#endif
    EXPECT(kernels == &cpu_kernels && vitc_memory() == &host_memory, "a refusal left the CPU selected");
}

TEST(backend_missing_kernels_names_exactly_the_absent_ones) {
    char buf[1024];
    EXPECT(!backend_missing_kernels(&cpu_kernels, buf, sizeof(buf)) && !buf[0], "the CPU lacks %s", buf);
    kernel_table partial = cpu_kernels;
    partial.softmax_forward = NULL;
    partial.adamw_update = NULL;
    EXPECT(backend_missing_kernels(&partial, buf, sizeof(buf)), "two kernels missing, none named");
    int commas = 0;
    for (const char *p = buf; *p; p++) commas += *p == ',';
    EXPECT(strstr(buf, "softmax_forward") && strstr(buf, "adamw_update") && commas == 1, "named: %s", buf);
}

TEST(backend_cli_device_flags_exit_with_the_reason) {
    const char *work = tiny_run_dir(), *hide = "CUDA_VISIBLE_DEVICES= ";
    char out[16384];
    struct {
        const char *cmd;
        int code;
    } runs[] = {
        {"./train --config %s --out %s/runs --set run.name=dev --quiet --device cuda", 1},
        {"./train --config %s --out %s/runs --set run.name=dev --quiet --set train.device=cuda", 1},
        {"./eval --ckpt %s --data %s --device cuda", 1},
        {"./sample --ckpt %s --out %s/grid.png --device cuda", 1},
    };
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), runs[i].cmd, tiny_run_config(), work);
        int code = run(out, sizeof(out), "%s%s", hide, cmd);
        EXPECT(code == runs[i].code && cuda_refused(out), "%s: exit %d:\n%s", cmd, code, out);
        if (i == 1) EXPECT(strstr(out, "error: train.device: --device cuda: "), "%s", out);
    }
    const char *tools[] = {"train --device gpu --config x", "eval --ckpt x --device gpu",
                           "sample --ckpt x --out x.png --device gpu"};
    for (int i = 0; i < 3; i++) {
        int code = run(out, sizeof(out), "./%s", tools[i]);
        EXPECT(code == 2 && strstr(out, "--device gpu: expected cpu, cuda or cuda:N"), "%s: exit %d:\n%s", tools[i],
               code, out);
    }
}
