/* Helpers for the model tests: resolve a registry name, count its parameters, compare its keys
 * with an official state_dict listing from ../shared/specs, read a reference fixture. */
#pragma once
#include "../models/model.h"
#include "../src/core/safetensors.h"
#include "test.h"

/* model config of a registry name with optional extra JSON merged over the model section */
void registry_config(model_config *mc, const char *name, const char *extra_json);
/* the registry model narrowed for fast tests: 8 channels a head, num_classes classes */
void registry_config_narrow(model_config *mc, const char *name, int num_classes);
int64_t registry_param_count(const char *name);
/* NULL if the listing matches (ignoring buffers), else a malloc'd description of the differences;
 * *missing_file set when the listing is absent */
char *compare_state_dict(const char *name, const char *listing, bool *missing_file);

/* tensor `name` of the fixture f (read from path) as a float tensor of its shape; dies naming both
 * when it is absent */
tensor *fixture_tensor(const st_file *f, const char *path, const char *name);
/* the worst rel_l2 of m's parameter gradients against the fixture's grad/<parameter name>, and that
 * parameter's name (VITC_TEST_VERBOSE=1 prints each) */
double worst_grad_error(const model *m, const st_file *f, const char *path, const char **worst_name);
