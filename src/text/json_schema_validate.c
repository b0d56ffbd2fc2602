/*
 * text/json_schema_validate.c - a JSON value checked against a schema of
 * the subset of frt/grammar.h, with the meaning JSON Schema 2020-12
 * (Validation, sections 6.1-6.5; Core 8.2.3 and 10.3) gives the keywords.
 * Written apart from the compiler on purpose: the tests check every
 * generated output with it, and check it against python3-jsonschema.
 */
#include "text/grammar_int.h"

#include "util/error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_NEST 64

static const char *const k_keywords[] = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "minItems",
    "maxItems", "minLength", "maxLength", "$defs", "definitions", "$ref",
    /* annotations: no effect on validity */
    "title", "description", "$schema", "$id", "$comment", "default", "examples", NULL};

int js_keyword_known(const char *key)
{
    for (const char *const *k = k_keywords; *k; k++)
        if (!strcmp(*k, key)) return 1;
    return 0;
}

typedef struct vctx {
    json_t *root;
    char *why;
    size_t why_len;
    int nest;
} vctx;

static int invalid(vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int invalid(vctx *v, const char *fmt, ...)
{
    if (v->why && v->why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->why, v->why_len, fmt, ap);
        va_end(ap);
    }
    return FRT_ERR_MISMATCH;
}

/* JSON Schema equality: numbers by value, objects and arrays member by member. */
static int js_equal(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b)) return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b);
    }
    if (json_typeof(a) != json_typeof(b)) return 0;
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b)) return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!js_equal(json_array_get(a, i), json_array_get(b, i))) return 0;
        return 1;
    }
    if (json_is_object(a)) {
        const char *k;
        json_t *x;
        if (json_object_size(a) != json_object_size(b)) return 0;
        json_object_foreach(a, k, x) {
            json_t *y = json_object_get(b, k);
            if (!y || !js_equal(x, y)) return 0;
        }
        return 1;
    }
    return json_equal(a, b);
}

static int type_is(json_t *inst, const char *t)
{
    if (!strcmp(t, "object")) return json_is_object(inst);
    if (!strcmp(t, "array")) return json_is_array(inst);
    if (!strcmp(t, "string")) return json_is_string(inst);
    if (!strcmp(t, "number")) return json_is_number(inst);
    if (!strcmp(t, "boolean")) return json_is_boolean(inst);
    if (!strcmp(t, "null")) return json_is_null(inst);
    if (!strcmp(t, "integer")) {
        if (json_is_integer(inst)) return 1;
        double d = json_is_real(inst) ? json_real_value(inst) : NAN;
        return isfinite(d) && floor(d) == d;
    }
    return -1;
}

static int check_type(vctx *v, json_t *t, json_t *inst)
{
    if (!t) return 0;
    if (json_is_string(t)) {
        int r = type_is(inst, json_string_value(t));
        if (r < 0) return frt_error(FRT_ERR_FORMAT, "json schema: unknown type '%s'", json_string_value(t));
        return r ? 0 : invalid(v, "not of type %s", json_string_value(t));
    }
    if (!json_is_array(t)) return frt_error(FRT_ERR_FORMAT, "json schema: 'type' must be a string or an array");
    for (size_t i = 0; i < json_array_size(t); i++) {
        json_t *ti = json_array_get(t, i);
        int r = json_is_string(ti) ? type_is(inst, json_string_value(ti)) : -1;
        if (r < 0) return frt_error(FRT_ERR_FORMAT, "json schema: 'type' must name types");
        if (r) return 0;
    }
    return invalid(v, "not of any of the listed types");
}

/* A non-negative integer keyword, -1 when absent, -2 malformed. */
static long long count_of(json_t *s, const char *key)
{
    json_t *x = json_object_get(s, key);
    if (!x) return -1;
    return json_is_integer(x) && json_integer_value(x) >= 0 ? json_integer_value(x) : -2;
}

static int validate(vctx *v, json_t *s, json_t *inst);

static int check_object(vctx *v, json_t *s, json_t *inst)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *ap = json_object_get(s, "additionalProperties");
    if ((props && !json_is_object(props)) || (req && !json_is_array(req)) || (ap && !json_is_boolean(ap)))
        return frt_error(json_is_object(ap) ? FRT_ERR_UNSUPPORTED : FRT_ERR_FORMAT,
                         "json schema: malformed or unsupported properties / required / additionalProperties");
    if (!json_is_object(inst)) return 0;
    for (size_t i = 0; req && i < json_array_size(req); i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r)) return frt_error(FRT_ERR_FORMAT, "json schema: 'required' must hold strings");
        if (!json_object_get(inst, json_string_value(r)))
            return invalid(v, "required property '%s' is missing", json_string_value(r));
    }
    const char *k;
    json_t *x;
    json_object_foreach(inst, k, x) {
        json_t *ps = props ? json_object_get(props, k) : NULL;
        if (ps) FRT_TRY(validate(v, ps, x));
        else if (json_is_false(ap)) return invalid(v, "property '%s' is not allowed", k);
    }
    return 0;
}

static int check_array(vctx *v, json_t *s, json_t *inst)
{
    long long mn = count_of(s, "minItems"), mx = count_of(s, "maxItems");
    json_t *items = json_object_get(s, "items");
    if (mn == -2 || mx == -2) return frt_error(FRT_ERR_FORMAT, "json schema: minItems / maxItems malformed");
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return frt_error(FRT_ERR_UNSUPPORTED, "json schema: 'items' must be one schema");
    if (!json_is_array(inst)) return 0;
    long long n = (long long)json_array_size(inst);
    if (mn >= 0 && n < mn) return invalid(v, "fewer than %lld items", mn);
    if (mx >= 0 && n > mx) return invalid(v, "more than %lld items", mx);
    for (size_t i = 0; items && i < json_array_size(inst); i++) FRT_TRY(validate(v, items, json_array_get(inst, i)));
    return 0;
}

static int check_string(vctx *v, json_t *s, json_t *inst)
{
    long long mn = count_of(s, "minLength"), mx = count_of(s, "maxLength");
    if (mn == -2 || mx == -2) return frt_error(FRT_ERR_FORMAT, "json schema: minLength / maxLength malformed");
    if (!json_is_string(inst)) return 0;
    const unsigned char *p = (const unsigned char *)json_string_value(inst);
    long long cps = 0;
    for (size_t i = 0; i < json_string_length(inst); i++) cps += (p[i] & 0xC0) != 0x80;
    if (mn >= 0 && cps < mn) return invalid(v, "shorter than %lld characters", mn);
    if (mx >= 0 && cps > mx) return invalid(v, "longer than %lld characters", mx);
    return 0;
}

static int check_values(vctx *v, json_t *s, json_t *inst)
{
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (cn && !js_equal(cn, inst)) return invalid(v, "not the const value");
    if (!en) return 0;
    if (!json_is_array(en)) return frt_error(FRT_ERR_FORMAT, "json schema: 'enum' must be an array");
    for (size_t i = 0; i < json_array_size(en); i++)
        if (js_equal(json_array_get(en, i), inst)) return 0;
    return invalid(v, "not one of the enum values");
}

static int check_anyof(vctx *v, json_t *s, json_t *inst)
{
    json_t *a = json_object_get(s, "anyOf");
    if (!a) return 0;
    if (!json_is_array(a) || !json_array_size(a))
        return frt_error(FRT_ERR_FORMAT, "json schema: 'anyOf' must be a non-empty array");
    for (size_t i = 0; i < json_array_size(a); i++) {
        int rc = validate(v, json_array_get(a, i), inst);
        if (rc != FRT_ERR_MISMATCH) return rc;
    }
    return invalid(v, "matches no alternative of anyOf");
}

static json_t *resolve(vctx *v, const char *ref)
{
    if (!strcmp(ref, "#")) return v->root;
    if (!strncmp(ref, "#/$defs/", 8)) return json_object_get(json_object_get(v->root, "$defs"), ref + 8);
    if (!strncmp(ref, "#/definitions/", 14)) return json_object_get(json_object_get(v->root, "definitions"), ref + 14);
    return NULL;
}

static int validate(vctx *v, json_t *s, json_t *inst)
{
    if (json_is_boolean(s)) return json_is_true(s) ? 0 : invalid(v, "the schema is false");
    if (!json_is_object(s)) return frt_error(FRT_ERR_FORMAT, "json schema: a schema must be an object or a boolean");
    if (++v->nest > MAX_NEST) {
        v->nest--;
        return frt_error(FRT_ERR_UNSUPPORTED, "json schema: nested deeper than %d (a recursive $ref?)", MAX_NEST);
    }
    const char *k;
    json_t *x;
    int rc = 0;
    json_object_foreach(s, k, x) {
        if (!js_keyword_known(k)) {
            rc = frt_error(FRT_ERR_UNSUPPORTED, "json schema: keyword '%s' is outside the supported subset", k);
            break;
        }
    }
    json_t *ref = json_object_get(s, "$ref");
    if (!rc && ref) {
        json_t *t = json_is_string(ref) ? resolve(v, json_string_value(ref)) : NULL;
        rc = t ? validate(v, t, inst) : frt_error(FRT_ERR_FORMAT, "json schema: unresolvable $ref");
    }
    if (!rc) rc = check_type(v, json_object_get(s, "type"), inst);
    if (!rc) rc = check_values(v, s, inst);
    if (!rc) rc = check_anyof(v, s, inst);
    if (!rc) rc = check_object(v, s, inst);
    if (!rc) rc = check_array(v, s, inst);
    if (!rc) rc = check_string(v, s, inst);
    v->nest--;
    return rc;
}

int js_validate(json_t *root, json_t *schema, json_t *inst, char *why, size_t why_len)
{
    vctx v = {root, why, why_len, 0};
    if (why && why_len) why[0] = '\0';
    return validate(&v, schema, inst);
}

int frt_json_schema_validate(const char *schema, size_t schema_len, const char *instance, size_t instance_len,
                             char *why, size_t why_len)
{
    if (!schema || !instance) return frt_error(FRT_ERR_INVALID_ARGUMENT, "json schema validate: NULL argument");
    json_error_t je;
    json_t *s = json_loadb(schema, schema_len, JSON_DECODE_ANY, &je);
    if (!s) return frt_error(FRT_ERR_FORMAT, "json schema validate: the schema is not JSON: %s", je.text);
    json_t *inst = json_loadb(instance, instance_len, JSON_DECODE_ANY, &je);
    int rc = inst ? js_validate(s, s, inst, why, why_len)
                  : frt_error(FRT_ERR_FORMAT, "json schema validate: the instance is not JSON: %s", je.text);
    json_decref(inst);
    json_decref(s);
    return rc;
}
