/* util/error.h - internal helpers to fail with a status and a message. */
#ifndef FRT_UTIL_ERROR_H
#define FRT_UTIL_ERROR_H

#include "frt/status.h"

/* frt_error and FRT_TRY are public (frt/status.h). */

/* Prepends "PREFIX: " to the current last-error message (context on the way
 * up: file name, tensor name). Returns 0. */
int frt_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));


#endif
