/* Always-on error checks and logging. CHECK prints a message with the offending values (and, with
 * VITC_DEBUG=1 in the environment, the failed condition and its file:line), then exits 1
 * (runtime/input error). Never compiled out: we validate inputs. */
#pragma once
#include <stdio.h>
#include <stdlib.h>

void vitc_die(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) vitc_die(__FILE__, __LINE__, #cond, __VA_ARGS__);                             \
    } while (0)

/* Tests set vitc_die_jump to catch an error: the message goes to vitc_die_message and control
 * returns to their setjmp instead of exiting. */
#include <setjmp.h>
extern jmp_buf *vitc_die_jump;
extern char vitc_die_message[1024];

#define FATAL(...) vitc_die(__FILE__, __LINE__, NULL, __VA_ARGS__)

typedef enum { LOG_QUIET = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 } log_level;
extern log_level vitc_log_level;
void vitc_log(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define LOG_INFO(...) vitc_log(LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) vitc_log(LOG_WARN, __VA_ARGS__)

/* Heap helpers that die with file:line on failure. Every heap allocation of vitc goes through these,
 * so a test can count them (vitc_heap_allocs). */
#define xmalloc(n) vitc_xmalloc((n), __FILE__, __LINE__)
#define xcalloc(n, s) vitc_xcalloc((n), (s), __FILE__, __LINE__)
#define xrealloc(p, n) vitc_xrealloc((p), (n), __FILE__, __LINE__)
void *vitc_xmalloc(size_t n, const char *file, int line);
void *vitc_xcalloc(size_t n, size_t size, const char *file, int line);
void *vitc_xrealloc(void *p, size_t n, const char *file, int line);
extern long vitc_heap_allocs;
