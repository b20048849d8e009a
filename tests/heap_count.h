/* Heap calls made so far: every system heap call when heap_calls_counted(), else only vitc's own. */
#pragma once
#include <stdbool.h>

long heap_calls(void);
bool heap_calls_counted(void);
