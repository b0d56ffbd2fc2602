/* json.c - typed jansson field access with frt errors. */
#include "util/json.h"

#include "util/error.h"

#include <math.h>
#include <string.h>

#define WHAT(w) ((w) ? (w) : "JSON")

static int lookup(const json_t *obj, const char *key, int required, json_t **v, const char *what)
{
    *v = obj && json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (!*v || json_is_null(*v)) {
        if (required) return frt_error(FRT_ERR_FORMAT, "%s: missing required field '%s'", WHAT(what), key);
        return 0;
    }
    return 1;
}

int frt_json_int(const json_t *obj, const char *key, int required, long long lo, long long hi, long long *out,
                 const char *what)
{
    json_t *v;
    int rc = lookup(obj, key, required, &v, what);
    if (rc <= 0) return rc;
    long long x;
    if (json_is_integer(v)) {
        x = (long long)json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d) || d != floor(d) || d < -9.2e18 || d > 9.2e18)
            return frt_error(FRT_ERR_FORMAT, "%s: field '%s' must be an integer, got %g", WHAT(what), key, d);
        x = (long long)d;
    } else {
        return frt_error(FRT_ERR_FORMAT, "%s: field '%s' must be an integer", WHAT(what), key);
    }
    if (x < lo || x > hi)
        return frt_error(FRT_ERR_FORMAT, "%s: field '%s' = %lld is outside [%lld, %lld]", WHAT(what), key, x, lo,
                         hi);
    *out = x;
    return 1;
}

int frt_json_number(const json_t *obj, const char *key, int required, double lo, double hi, double *out,
                    const char *what)
{
    json_t *v;
    int rc = lookup(obj, key, required, &v, what);
    if (rc <= 0) return rc;
    if (!json_is_number(v)) return frt_error(FRT_ERR_FORMAT, "%s: field '%s' must be a number", WHAT(what), key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi)
        return frt_error(FRT_ERR_FORMAT, "%s: field '%s' = %g is outside [%g, %g]", WHAT(what), key, d, lo, hi);
    *out = d;
    return 1;
}

int frt_json_bool(const json_t *obj, const char *key, int required, int *out, const char *what)
{
    json_t *v;
    int rc = lookup(obj, key, required, &v, what);
    if (rc <= 0) return rc;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
    } else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
        *out = (int)json_integer_value(v);
    } else {
        return frt_error(FRT_ERR_FORMAT, "%s: field '%s' must be true or false", WHAT(what), key);
    }
    return 1;
}

int frt_json_string(const json_t *obj, const char *key, int required, char *buf, size_t size, const char *what)
{
    json_t *v;
    int rc = lookup(obj, key, required, &v, what);
    if (rc <= 0) return rc;
    if (!json_is_string(v)) return frt_error(FRT_ERR_FORMAT, "%s: field '%s' must be a string", WHAT(what), key);
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n >= size || strlen(s) != n)
        return frt_error(FRT_ERR_FORMAT, "%s: field '%s' is too long (%zu bytes, at most %zu) or holds a NUL",
                         WHAT(what), key, n, size ? size - 1 : 0);
    memcpy(buf, s, n + 1);
    return 1;
}

int frt_json_child(const json_t *obj, const char *key, int required, json_type type, json_t **out,
                   const char *what)
{
    json_t *v;
    int rc = lookup(obj, key, required, &v, what);
    if (rc <= 0) return rc;
    if (json_typeof(v) != type)
        return frt_error(FRT_ERR_FORMAT, "%s: field '%s' must be %s", WHAT(what), key,
                         type == JSON_OBJECT ? "an object" : type == JSON_ARRAY ? "an array" : "of another type");
    *out = v;
    return 1;
}

int frt_json_parse(const char *text, size_t len, size_t flags, json_t **out, const char *what)
{
    if (!text && len) return frt_error(FRT_ERR_INVALID_ARGUMENT, "%s: NULL text", WHAT(what));
    json_error_t err;
    json_t *j = json_loadb(text ? text : "", len, flags, &err);
    if (!j)
        return frt_error(FRT_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", WHAT(what), err.line,
                         err.column, err.text);
    *out = j;
    return 0;
}
