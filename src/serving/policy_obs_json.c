/*
 * policy_obs_json.c - the JSON form of a robot observation for POST
 * /v1/policy/infer (policy_obs.h, docs/policy-server.md): arrays as
 * {"dtype": "<f4" | "float32" ..., "shape": [..], "data": base64}, strings,
 * numbers and lists of numbers, nested objects flattened with '/'.
 */
#include "serving/policy_obs.h"

#include "frt/status.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* {"dtype", "shape", "data"}: exactly these three keys. */
static int js_is_array(json_t *v)
{
    return json_object_size(v) == 3 && json_object_get(v, "dtype") && json_object_get(v, "shape") &&
           json_object_get(v, "data");
}

static int js_array(frt_pobs_value *v, json_t *o)
{
    json_t *dt = json_object_get(o, "dtype"), *sh = json_object_get(o, "shape"), *da = json_object_get(o, "data");
    frt_pobs_dtype d;
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_string(da))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': dtype and data must be strings and shape a list", v->key);
    if (frt_pobs_dtype_parse(json_string_value(dt), json_string_length(dt), 1, &d) < 0)
        return frt_pobs_error_at(v->key, "");
    size_t nd = json_array_size(sh);
    if (nd > FRT_POBS_MAX_NDIM)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': %zu dimensions (at most %d)", v->key, nd,
                         FRT_POBS_MAX_NDIM);
    int64_t shape[FRT_POBS_MAX_NDIM];
    for (size_t i = 0; i < nd; i++) {
        json_t *e = json_array_get(sh, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > FRT_POBS_MAX_ELEMS)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': shape entry %zu is not an int in [0, 2^31]", v->key, i);
        shape[i] = json_integer_value(e);
    }
    uint8_t *bytes = NULL;
    size_t nb = 0;
    if (frt_pobs_base64_decode(json_string_value(da), json_string_length(da), &bytes, &nb) < 0)
        return frt_pobs_error_at(v->key, "data: ");
    int rc = frt_pobs_set_array(v, d, shape, (int)nd, bytes, nb);
    free(bytes);
    return rc;
}

/* A list of numbers as a 1-d f64 array. */
static int js_list(frt_pobs_value *v, json_t *a)
{
    size_t n = json_array_size(a);
    double *x = malloc((n ? n : 1) * sizeof *x);
    if (!x) return frt_error(FRT_ERR_OUT_OF_MEMORY, "'%s': out of memory", v->key);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        if (!json_is_number(e)) {
            free(x);
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': a list whose element %zu is not a number", v->key, i);
        }
        x[i] = json_number_value(e);
    }
    int64_t sh = (int64_t)n;
    int rc = frt_pobs_set_array(v, FRT_POBS_F64, &sh, 1, x, n * sizeof *x);
    free(x);
    return rc;
}

static int js_map(frt_pobs *o, const char *prefix, json_t *m, int depth);

static int js_entry(frt_pobs *o, const char *prefix, const char *k, json_t *val, int depth)
{
    size_t kn = strlen(k);
    if (json_is_object(val) && !js_is_array(val)) {
        char sub[FRT_POBS_MAX_KEY + 2];
        if (kn + strlen(prefix) + 1 > FRT_POBS_MAX_KEY)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "observation: a key under '%s' is too long", prefix);
        snprintf(sub, sizeof sub, "%s%s%s", prefix, *prefix ? "/" : "", k);
        if (depth >= FRT_POBS_MAX_DEPTH)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': objects nested deeper than %d", sub, FRT_POBS_MAX_DEPTH);
        return js_map(o, sub, val, depth + 1);
    }
    frt_pobs_value *v;
    FRT_TRY(frt_pobs_add(o, prefix, k, kn, &v));
    switch (json_typeof(val)) {
    case JSON_NULL: v->kind = FRT_POBS_NIL; return 0;
    case JSON_STRING: return frt_pobs_set_string(v, json_string_value(val), json_string_length(val));
    case JSON_TRUE:
    case JSON_FALSE: return frt_pobs_set_bool(v, json_is_true(val));
    case JSON_INTEGER: return frt_pobs_set_i64(v, json_integer_value(val));
    case JSON_REAL: return frt_pobs_set_f64(v, json_real_value(val));
    case JSON_ARRAY: return js_list(v, val);
    default: return js_array(v, val);
    }
}

static int js_map(frt_pobs *o, const char *prefix, json_t *m, int depth)
{
    const char *k;
    json_t *val;
    json_object_foreach(m, k, val) FRT_TRY(js_entry(o, prefix, k, val, depth));
    return 0;
}

int frt_pobs_parse_json(const char *buf, size_t len, frt_pobs *out)
{
    if (!buf || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "observation: NULL");
    *out = (frt_pobs){0};
    json_error_t e;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
    if (!root) return frt_error(FRT_ERR_INVALID_ARGUMENT, "JSON: %s (line %d)", e.text, e.line);
    int rc = json_is_object(root) ? js_map(out, "", root, 0)
                                  : frt_error(FRT_ERR_INVALID_ARGUMENT, "JSON: the body is not an object");
    json_decref(root);
    if (rc < 0) frt_pobs_free(out);
    return rc;
}
