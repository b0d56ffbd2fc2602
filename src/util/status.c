/* status.c - status strings and the thread-local last-error message. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *frt_status_str(int status)
{
    switch (status) {
#define FRT_STATUS_STR_(name, value, desc) case value: return desc;
        FRT_STATUS_MAP(FRT_STATUS_STR_)
#undef FRT_STATUS_STR_
    }
    return "unknown status";
}

const char *frt_status_name(int status)
{
    switch (status) {
#define FRT_STATUS_NAME_(name, value, desc) case value: return "FRT_" #name;
        FRT_STATUS_MAP(FRT_STATUS_NAME_)
#undef FRT_STATUS_NAME_
    }
    return "FRT_UNKNOWN";
}

const char *frt_last_error(void) { return last_error; }

#ifndef FRT_VERSION_STRING
#error "FRT_VERSION_STRING is set by CMakeLists.txt (project VERSION)"
#endif
const char *frt_version(void) { return FRT_VERSION_STRING; }

int frt_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int frt_error_prefix(const char *fmt, ...)
{
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof last_error - 3) n = sizeof last_error - 3;
    memcpy(last_error, prefix, n);
    memcpy(last_error + n, ": ", 2);
    size_t rest = sizeof last_error - n - 3;
    size_t m = strnlen(old, rest);
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = '\0';
    return 0;
}
