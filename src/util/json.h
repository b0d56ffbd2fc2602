/*
 * util/json.h - typed field access on jansson objects with frt errors.
 *
 * Each getter returns 1 when the field is present (and *out is set), 0 when
 * it is absent or JSON null (*out untouched; FRT_ERR_FORMAT "WHAT: missing
 * required field 'KEY'" instead when `required`), and a negative status for
 * a field of the wrong type or out of range. `what` names the document in
 * messages (a path); it may be NULL.
 */
#ifndef FRT_UTIL_JSON_H
#define FRT_UTIL_JSON_H

#include <jansson.h>
#include <stddef.h>

/* An integer in [lo, hi]. A JSON real with an integral value is accepted
 * (config writers emit 1e6 for integer fields). */
int frt_json_int(const json_t *obj, const char *key, int required, long long lo, long long hi, long long *out,
                 const char *what);

/* A finite number (integer or real) in [lo, hi]. */
int frt_json_number(const json_t *obj, const char *key, int required, double lo, double hi, double *out,
                    const char *what);

/* A boolean (true / false; the integers 0 and 1 are accepted too). */
int frt_json_bool(const json_t *obj, const char *key, int required, int *out, const char *what);

/* A string copied into buf (size bytes, NUL-terminated); FRT_ERR_FORMAT if
 * it does not fit or contains a NUL. */
int frt_json_string(const json_t *obj, const char *key, int required, char *buf, size_t size, const char *what);

/* An object or an array of the given jansson type (JSON_OBJECT,
 * JSON_ARRAY); *out is borrowed from obj. */
int frt_json_child(const json_t *obj, const char *key, int required, json_type type, json_t **out,
                   const char *what);

/* Parses len bytes of JSON text into a new reference (*out, json_decref
 * it). flags are jansson decoding flags (e.g. JSON_REJECT_DUPLICATES).
 * Errors: FRT_ERR_FORMAT "WHAT: invalid JSON at line L column C: TEXT". */
int frt_json_parse(const char *text, size_t len, size_t flags, json_t **out, const char *what);

#endif /* FRT_UTIL_JSON_H */
