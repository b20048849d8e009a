/* Helpers for the model tests: resolve a registry name, count its parameters, compare its keys
 * with an official state_dict listing from ../shared/specs. */
#pragma once
#include "../models/model.h"
#include "test.h"

/* model config of a registry name with optional extra JSON merged over the model section */
void registry_config(model_config *mc, const char *name, const char *extra_json);
/* the registry model narrowed for fast tests: 8 channels a head, num_classes classes */
void registry_config_narrow(model_config *mc, const char *name, int num_classes);
int64_t registry_param_count(const char *name);
/* NULL if the listing matches (ignoring buffers), else a malloc'd description of the differences;
 * *missing_file set when the listing is absent */
char *compare_state_dict(const char *name, const char *listing, bool *missing_file);
