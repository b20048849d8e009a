/* JSON configuration (cJSON) with typed, range-checked getters. Layers merge in order of precedence
 * (built-in defaults < model registry < --config file < --set a.b=v); every getter records its key
 * and writes its default into the tree, so after reading, the tree is the resolved config and any
 * key nobody read is an unknown key (config_check_unknown names it, the nearest valid key and the
 * valid ones). Errors name the JSON path and the offending value and exit 1. */
#pragma once
#include <stdbool.h>

typedef struct cJSON cJSON;

typedef struct config {
    cJSON *root;
    char **known; /* dotted paths read so far */
    int n_known, cap_known;
} config;

void config_init(config *c);
void config_free(config *c);
/* Parses JSON text (source names it in errors) and merges it over the tree. */
void config_merge_text(config *c, const char *json, const char *source);
/* Reads a JSON file and merges it. */
void config_merge_file(config *c, const char *path);
/* "a.b.c=value": value parsed as JSON (number, bool, array, object, quoted string) or else taken
 * as a plain string. */
void config_set(config *c, const char *assignment);

int config_int(config *c, const char *path, int def, int lo, int hi);
double config_float(config *c, const char *path, double def, double lo, double hi);
bool config_bool(config *c, const char *path, bool def);
/* choices: NULL-terminated list of allowed values, or NULL for any string */
const char *config_str(config *c, const char *path, const char *def, const char *const *choices);
/* n values: a JSON array of exactly n numbers, or one number meaning n copies; def may be NULL
 * (then the key is required) */
void config_int_array(config *c, const char *path, int n, const int *def, int *out, int lo, int hi);
void config_float_array(config *c, const char *path, int n, const double *def, double *out,
                        double lo, double hi);
/* The raw node at path (NULL if absent), marking it known. */
cJSON *config_node(config *c, const char *path);
bool config_has(const config *c, const char *path);
/* Errors on the first key in the tree that no getter read, naming it, the valid key nearest to it
 * and all the valid keys beside it. */
void config_check_unknown(const config *c);
/* The entry of names[0..n) nearest to typed by edit distance, or NULL when even that one is too far
 * for a typo (more than one edit, and more than one per three letters): the "did you mean" of errors. */
const char *config_closest(const char *typed, const char *const *names, int n);
/* The resolved config as JSON text (caller frees with free()). */
char *config_to_json(const config *c);
/* Reports a config error at path and exits 1. */
void config_error(const char *path, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
