/* util/error.h - internal helpers to fail with a status and a message. */
#ifndef FRT_UTIL_ERROR_H
#define FRT_UTIL_ERROR_H

#include "frt/status.h"

/* Sets the calling thread's last-error message (printf format) and returns
 * status, so a failure reads: return frt_error(FRT_ERR_FORMAT, "...", ...); */
int frt_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "PREFIX: " to the current last-error message (context on the way
 * up: file name, tensor name). Returns 0. */
int frt_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Evaluates a status expression and returns it from the caller on failure. */
#define FRT_TRY(expr)                                                          \
    do {                                                                       \
        int frt_try_rc_ = (expr);                                              \
        if (frt_try_rc_ < 0) return frt_try_rc_;                               \
    } while (0)

#endif
