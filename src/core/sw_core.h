/* Internal core helpers: error reporting, assertions, small utilities. */
#ifndef SW_CORE_H
#define SW_CORE_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Records a printf-style detail for sw_last_error() and returns `s`, so that
 * a failure is one line: `return sw_fail(SW_STATUS_INVALID, "...", ...);` */
sw_status sw_fail(sw_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Clears the detail (called by successful public entry points is NOT
 * required; the detail is only meaningful after a failure). */
void sw_clear_error(void);

/* Invariants only a bug can break: returns SW_STATUS_INTERNAL with file:line
 * instead of aborting, so the caller keeps control. */
#define SW_ASSERT_RET(cond)                                                          \
    do {                                                                             \
        if (!(cond))                                                                 \
            return sw_fail(SW_STATUS_INTERNAL, "internal invariant failed: %s (%s:%d)", \
                           #cond, __FILE__, __LINE__);                               \
    } while (0)

#define SW_TRY(expr)                     \
    do {                                 \
        sw_status sw_try_s_ = (expr);    \
        if (sw_try_s_ != SW_OK)          \
            return sw_try_s_;            \
    } while (0)

/* Environment gates: integer value of a variable, `def` when unset/invalid. */
int64_t sw_env_int(const char *name, int64_t def);
/* 1 unless `name` (its first `len` bytes) has Spillway's prefix and is not
 * one of the variables that the library, the binding or the scripts read;
 * each such unknown name gets one warning on stderr when the library loads. */
int sw_env_name_known(const char *name, size_t len);
/* Number of online CPUs (>= 1). */
int sw_cpu_count(void);

void *sw_aligned_alloc(size_t align, size_t bytes); /* NULL on failure */
void sw_aligned_free(void *p);

static inline size_t sw_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

#ifdef __cplusplus
}
#endif
#endif
