/*
 * frt/status.h - status codes and the last-error message.
 *
 * Every frt call that can fail returns an int: 0 (FRT_OK) on success, a
 * negative frt_status on failure. After a failure, frt_last_error() returns a
 * human-readable message for the calling thread (the message of the most
 * recent failure on that thread; successes do not clear it).
 *
 * The library never prints and never exits on bad input: the CLI prints.
 */
#ifndef FRT_STATUS_H
#define FRT_STATUS_H

#include "frt/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description) */
#define FRT_STATUS_MAP(X)                                                     \
    X(OK, 0, "ok")                                                            \
    X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                           \
    X(ERR_OUT_OF_MEMORY, -2, "out of memory")                                 \
    X(ERR_NO_VARIANT, -3, "no graph variant for this shape key")              \
    X(ERR_OUT_OF_RANGE, -4, "out of range")                                   \
    X(ERR_IO, -5, "input/output error")                                       \
    X(ERR_FORMAT, -6, "malformed input")                                      \
    X(ERR_UNSUPPORTED, -7, "not supported")                                   \
    X(ERR_NO_DEVICE, -8, "no such device")                                    \
    X(ERR_BACKEND, -9, "backend error")                                       \
    X(ERR_MISMATCH, -10, "mismatch")                                          \
    X(ERR_STATE, -11, "invalid state for this call")                          \
    X(ERR_NOT_FOUND, -12, "not found")                                        \
    X(ERR_BUSY, -13, "busy")                                                  \
    X(ERR_CANCELLED, -14, "cancelled")

typedef enum frt_status {
#define FRT_STATUS_ENUM_(name, value, desc) FRT_##name = value,
    FRT_STATUS_MAP(FRT_STATUS_ENUM_)
#undef FRT_STATUS_ENUM_
} frt_status;

/* The fixed description of a status ("out of memory"); "unknown status" for
 * a value outside the enum. Never NULL; static storage. */
FRT_API const char *frt_status_str(int status);

/* The symbolic name of a status ("FRT_ERR_OUT_OF_MEMORY"). Never NULL. */
FRT_API const char *frt_status_name(int status);

/* The message of the calling thread's most recent failure, e.g.
 * "safetensors: model.safetensors: tensor 'x': byte range past end of file".
 * "" when none failed yet. Valid until the next frt call on this thread. */
FRT_API const char *frt_last_error(void);

/* Sets the calling thread's last-error message (printf format) and returns
 * status, so code layered on the library (frt's serving library, its
 * command line, programs of yours) fails the way the library does:
 * return frt_error(FRT_ERR_FORMAT, "...", ...); */
FRT_API int frt_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Evaluates a status expression and returns it from the caller on failure. */
#define FRT_TRY(expr)                                                          \
    do {                                                                       \
        int frt_try_rc_ = (expr);                                              \
        if (frt_try_rc_ < 0) return frt_try_rc_;                               \
    } while (0)

/* The library's version, "MAJOR.MINOR.PATCH" (CMake's project version, the
 * same number as libfrt.so's VERSION). Never NULL; static storage. */
FRT_API const char *frt_version(void);

#ifdef __cplusplus
}
#endif
#endif /* FRT_STATUS_H */
