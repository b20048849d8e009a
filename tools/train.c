/* train: builds the resolved config (defaults < model registry < --config < --set) and runs the
 * training loop. Exit 0 on success, 1 on runtime/input errors, 2 on usage errors, 130 on Ctrl-C. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../models/model.h"
#include "core/check.h"
#include "core/flags.h"
#include "core/threads.h"
#include "dist/dist.h"
#include "ops/backend.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: train --config FILE [--set key=value]... [--resume CKPT] [--threads N]\n"
            "             [--precision fp32|bf16|tf32] [--out DIR] [--overwrite] [--quiet] [--summary]\n"
            "             [--device cpu|cuda[:N]]\n"
            "  --config FILE   JSON config; a bare name is also looked up in configs/ (e.g. agent_swin_t)\n"
            "  --set k=v       override one key, e.g. --set train.lr=1e-3 --set model.attn=agent\n"
            "  --resume CKPT   continue a run from its checkpoint exactly\n"
            "  --threads N     OpenMP/OpenBLAS threads (default: OMP_NUM_THREADS or all cores)\n"
            "  --precision P   fp32 (default), bf16 (the GEMMs' operands in bfloat16, summed in fp32; on the\n"
            "                  CPU it needs AVX512_BF16) or tf32 (tensor-core GEMMs, --device cuda only);\n"
            "                  weights, optimizer and statistics stay fp32\n"
            "  --out DIR       run directories go to DIR/<run.name> (default checkpoints/)\n"
            "  --overwrite     start over in a run directory that holds another run's checkpoints\n"
            "                  (without it such a run stops before writing anything)\n"
            "  --quiet         no progress bar\n"
            "  --summary       print the module tree, parameters, MACs and activation memory, then exit\n"
            "  --device D      cpu (default), cuda or cuda:N: where the model trains (cuda needs a build with\n"
            "                  make CUDA=1 and a GPU); recorded as train.device, so a resumed run keeps it\n");
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names --config finds in dir: NAME for each NAME.json and NAME/ for each subdirectory (tiny/NAME
 * finds configs/tiny/NAME.json); their number, or -1 when dir cannot be read. */
static int config_names(const char *dir, char **names, int max) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; n < max && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        bool json = len > 5 && !strcmp(e->d_name + len - 5, ".json");
        if (!json && (e->d_type != DT_DIR || e->d_name[0] == '.')) continue;
        names[n] = xmalloc(len + 2);
        if (json) snprintf(names[n++], len + 2, "%.*s", (int)len - 5, e->d_name);
        else snprintf(names[n++], len + 2, "%s/", e->d_name);
    }
    closedir(d);
    return n;
}

/* The error for a --config name that matches no file: the nearest config name, then what the
 * directory it points into has (configs/tiny/ for tiny/NAME; configs/ for a bare name, a path such as
 * ./my.json, or a subdirectory configs/ lacks). */
static void no_such_config(const char *name, const char *tried) {
    const char *slash = strrchr(name, '/'), *base = slash ? slash + 1 : name;
    bool path = name[0] == '.' || name[0] == '/';
    int sub = slash && !path ? (int)(base - name) : 0; /* the length of "tiny/" */
    char dir[600], typed[512];
    snprintf(dir, sizeof(dir), "configs/%.*s", sub, name);
    snprintf(typed, sizeof(typed), "%s", base);
    char *ext = strstr(typed, ".json");
    if (ext) *ext = 0;
    char *names[512];
    int n = config_names(dir, names, 512);
    if (n < 0 && sub) {
        sub = 0;
        snprintf(dir, sizeof(dir), "configs/");
        n = config_names(dir, names, 512);
    }
    const char *near = config_closest(typed, (const char *const *)names, n);
    fprintf(stderr, "error: --config %s: no such file%s%s", name, path ? "" : ", nor ", path ? "" : tried);
    if (near) fprintf(stderr, "; did you mean %.*s%s?", sub, name, near);
    fputc('\n', stderr);
    if (n < 0) {
        fprintf(stderr, "there is no configs/ directory here\n");
        return;
    }
    qsort(names, (size_t)n, sizeof(names[0]), by_name);
    fprintf(stderr, "%s has:", dir);
    for (int i = 0; i < n; i++) fprintf(stderr, "%s%s", i % 8 ? ", " : "\n  ", names[i]);
    fputc('\n', stderr);
    for (int i = 0; i < n; i++) free(names[i]);
}

/* --config agent_swin_t or agent_swin_t.json also finds configs/agent_swin_t.json; NULL (after the
 * error) when neither exists */
static const char *find_config(const char *name, char *buf, size_t len) {
    if (access(name, R_OK) == 0) return name;
    const char *ext = strstr(name, ".json") ? "" : ".json";
    snprintf(buf, len, "configs/%s%s", name, ext);
    if (access(buf, R_OK) == 0) return buf;
    no_such_config(name, buf);
    return NULL;
}

/* what train's flags gather: config files, and overrides in the order given, --out, --precision
 * and --device among them as the keys they set (so that a resumed run keeps them) */
typedef struct train_args {
    const char *files[16], *sets[256];
    int n_files, n_sets;
    char paths[16][512], out_set[1100], precision_set[64], device_set[64];
} train_args;

static int take_config(const char *flag, const char *value, void *to) {
    train_args *t = to;
    if (t->n_files == 16) {
        fprintf(stderr, "error: %s %s: at most 16 config files\n", flag, value);
        return 2;
    }
    t->files[t->n_files] = find_config(value, t->paths[t->n_files], sizeof(t->paths[0]));
    return t->files[t->n_files++] ? 0 : 1;
}

/* set: the override that flag's value makes */
static int add_set(train_args *t, const char *flag, const char *value, const char *set) {
    if (t->n_sets == 256) {
        fprintf(stderr, "error: %s %s: at most 256 overrides\n", flag, value);
        return 2;
    }
    t->sets[t->n_sets++] = set;
    return 0;
}

static int take_set(const char *flag, const char *value, void *to) {
    return add_set(to, flag, value, value);
}

static int take_out(const char *flag, const char *value, void *to) {
    train_args *t = to;
    snprintf(t->out_set, sizeof(t->out_set), "run.out=\"%s\"", value);
    return add_set(t, flag, value, t->out_set);
}

/* a wrong value is named by train.precision's check */
static int take_precision(const char *flag, const char *value, void *to) {
    train_args *t = to;
    snprintf(t->precision_set, sizeof(t->precision_set), "train.precision=\"%.40s\"", value);
    return add_set(t, flag, value, t->precision_set);
}

/* refused at once when this build or machine cannot run it */
static int take_device(const char *flag, const char *value, void *to) {
    train_args *t = to;
    int status = backend_select_flag(value);
    if (status) return status;
    snprintf(t->device_set, sizeof(t->device_set), "train.device=\"%.40s\"", value);
    return add_set(t, flag, value, t->device_set);
}

int main(int argc, char **argv) {
    dist_init(&argc, &argv);
    static train_args args; /* 12 KiB of paths */
    int threads = 0;
    train_options o = {0};
    bool summary = false;
    const tool_flag flags[] = {
        TAKE_FLAG("--config", &args, take_config),
        TAKE_FLAG("--set", &args, take_set),
        TAKE_FLAG("--out", &args, take_out),
        TAKE_FLAG("--precision", &args, take_precision),
        TAKE_FLAG("--device", &args, take_device),
        TEXT_FLAG("--resume", &o.resume),
        RANGE_FLAG("--threads", &threads, 1, VITC_MAX_THREADS),
        SWITCH_FLAG("--summary", &summary),
        SWITCH_FLAG("--quiet", &o.quiet),
        SWITCH_FLAG("--overwrite", &o.overwrite),
        FLAGS_END,
    };
    int status = flags_read(argc, argv, flags, usage);
    if (status >= 0) return status;
    const char **files = args.files, **sets = args.sets;
    int n_files = args.n_files, n_sets = args.n_sets;
    if (!n_files && !o.resume) {
        fprintf(stderr, "error: --config is required\n");
        usage(stderr);
        return 2;
    }
    vitc_set_threads(threads ? threads : dist_default_threads());
    if (o.quiet) vitc_log_level = LOG_WARN;
    config c;
    config_init(&c);
    if (n_files) {
        model_config_load(&c, files, n_files, sets, n_sets);
    } else { /* --resume alone: the run's own resolved config, then any --set */
        st_file f;
        char *saved = NULL, err[1024];
        if (!checkpoint_open(&f, o.resume, &saved, err, sizeof(err))) {
            fprintf(stderr, "error: --resume: %s\n", err);
            return 1;
        }
        st_close(&f);
        model_config_load_text(&c, saved, o.resume);
        free(saved);
        for (int i = 0; i < n_sets; i++) config_set(&c, sets[i]);
    }
    int code = 0;
    if (summary) { /* the model only: the data and training sections are not needed */
        model_config mc;
        model_config_read(&mc, &c);
        model *m = model_create(&mc, 0);
        model_summary(m, stdout);
        model_free(m);
    } else {
        code = train_run(&c, &o);
    }
    config_free(&c);
    dist_finalize();
    return code;
}
