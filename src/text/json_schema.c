/*
 * text/json_schema.c - JSON Schema (the subset of frt/grammar.h) and OpenAI
 * tools arrays compiled to grammar nodes (text/grammar_int.h).
 *
 * One schema object becomes one node: enum / const -> LITERALS (the values
 * that also satisfy the rest of the schema, in compact JSON), anyOf and
 * type arrays -> ANYOF, $ref -> the node of its target (compiled again at
 * each use; a target already being compiled is a recursion and refused),
 * then by type: OBJECT (or OBJECT_ANY without properties), ARRAY, STRING,
 * NUMBER, INTEGER, the shared true/false/null literals. A schema without a
 * type is an object when it has object keywords, an array when it has
 * items, else any value. After compiling, the nesting depth and the most
 * stacks alive at once (anyOf widths) are checked against the limits.
 */
#include "text/grammar_int.h"

#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 60000
#define MAX_REF_DEPTH 32

typedef struct cc {
    frt_grammar *g;
    json_t *root;                   /* the document $ref resolves in */
    frt_grammar_diag *diag;
    char path[192];                 /* JSON pointer of the schema being compiled */
    json_t *refs[MAX_REF_DEPTH];    /* $ref targets being compiled */
    int n_refs;
} cc;

/* Fails with status, naming keyword and the current path. */
static int cc_fail(cc *c, int status, const char *keyword, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int cc_fail(cc *c, int status, const char *keyword, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->diag) {
        snprintf(c->diag->keyword, sizeof c->diag->keyword, "%s", keyword);
        snprintf(c->diag->path, sizeof c->diag->path, "%s", c->path);
    }
    return frt_error(status, "json schema: '%s' at %s: %s", keyword, c->path[0] ? c->path : "/", msg);
}

/* ---- nodes ---------------------------------------------------------------- */

int g_add(frt_grammar *g, g_kind kind)
{
    if (g->n_nodes >= MAX_NODES) return -1;
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 32;
        g_node *p = realloc(g->nodes, (size_t)cap * sizeof *p);
        if (!p) return -1;
        g->nodes = p;
        g->cap_nodes = cap;
    }
    g_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->max = -1;
    return g->n_nodes++;
}

int g_add_literal(frt_grammar *g, int node, const char *s, size_t len)
{
    g_node *n = &g->nodes[node];
    if (n->n_lits >= FRT_GRAMMAR_MAX_ENUM || len > UINT16_MAX - 1) return FRT_ERR_OUT_OF_RANGE;
    char **l = realloc(n->lits, (size_t)(n->n_lits + 1) * sizeof *l);
    if (l) n->lits = l;
    uint32_t *ll = realloc(n->lit_len, (size_t)(n->n_lits + 1) * sizeof *ll);
    if (ll) n->lit_len = ll;
    char *copy = malloc(len + 1);
    if (!l || !ll || !copy) {
        free(copy);
        return FRT_ERR_OUT_OF_MEMORY;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    n->lits[n->n_lits] = copy;
    n->lit_len[n->n_lits++] = (uint32_t)len;
    return 0;
}

int g_add_kid(frt_grammar *g, int node, int kid)
{
    g_node *n = &g->nodes[node];
    int *k = realloc(n->kids, (size_t)(n->n_kids + 1) * sizeof *k);
    if (!k) return FRT_ERR_OUT_OF_MEMORY;
    n->kids = k;
    n->kids[n->n_kids++] = kid;
    return 0;
}

static int literal_node(frt_grammar *g, const char *s)
{
    int n = g_add(g, G_LITERALS);
    if (n < 0 || g_add_literal(g, n, s, strlen(s))) return -1;
    return n;
}

int g_add_shared(frt_grammar *g)
{
    /* in the order of the G_NODE_* indices */
    if (g_add(g, G_ANY) != G_NODE_ANY || g_add(g, G_OBJECT_ANY) != G_NODE_OBJECT_ANY) return FRT_ERR_OUT_OF_MEMORY;
    int arr = g_add(g, G_ARRAY);
    if (arr != G_NODE_ARRAY_ANY) return FRT_ERR_OUT_OF_MEMORY;
    g->nodes[arr].kid = G_NODE_ANY;
    if (g_add(g, G_STRING) != G_NODE_STRING_ANY || g_add(g, G_NUMBER) != G_NODE_NUMBER) return FRT_ERR_OUT_OF_MEMORY;
    if (literal_node(g, "true") != G_NODE_TRUE || literal_node(g, "false") != G_NODE_FALSE ||
        literal_node(g, "null") != G_NODE_NULL)
        return FRT_ERR_OUT_OF_MEMORY;
    return 0;
}

void frt_grammar_free(frt_grammar *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        g_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_props; k++) free(n->props[k].key);
        for (int k = 0; k < n->n_lits; k++) free(n->lits[k]);
        free(n->props);
        free(n->lits);
        free(n->lit_len);
        free(n->kids);
    }
    for (int i = 0; i < g->n_tags; i++) free(g->tags[i]);
    free(g->tags);
    free(g->nodes);
    free(g);
}

/* ---- the compiler ----------------------------------------------------------- */

static int compile(cc *c, json_t *schema);

static int oom(cc *c) { return cc_fail(c, FRT_ERR_OUT_OF_MEMORY, "", "out of memory"); }

/* Runs compile() on a sub-schema at path + suffix. */
static int compile_at(cc *c, json_t *schema, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int compile_at(cc *c, json_t *schema, const char *fmt, ...)
{
    size_t at = strlen(c->path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->path + at, sizeof c->path - at, fmt, ap);
    va_end(ap);
    int node = compile(c, schema);
    c->path[at] = '\0';
    return node;
}

/* A non-negative integer keyword (<= 65535), -1 when absent. */
static int count_keyword(cc *c, json_t *s, const char *key, int *out)
{
    json_t *v = json_object_get(s, key);
    *out = -1;
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return cc_fail(c, FRT_ERR_FORMAT, key, "must be a non-negative integer");
    if (json_integer_value(v) > UINT16_MAX)
        return cc_fail(c, FRT_ERR_UNSUPPORTED, key, "values above %d are not supported", UINT16_MAX);
    *out = (int)json_integer_value(v);
    return 0;
}

/* The JSON text of a string's content (escaped as JSON, without quotes). */
static char *json_string_content(const char *s, size_t *len)
{
    json_t *j = json_string(s);
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!t) return NULL;
    size_t n = strlen(t);
    memmove(t, t + 1, n - 2);
    t[n - 2] = '\0';
    *len = n - 2;
    return t;
}

static int compile_object(cc *c, json_t *s)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *ap = json_object_get(s, "additionalProperties");
    if (ap && !json_is_false(ap))
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "additionalProperties", "only 'additionalProperties: false' is supported");
    if (props && !json_is_object(props)) return cc_fail(c, FRT_ERR_FORMAT, "properties", "must be an object");
    if (req && !json_is_array(req)) return cc_fail(c, FRT_ERR_FORMAT, "required", "must be an array of strings");
    if (!props && !ap) {
        if (req && json_array_size(req))
            return cc_fail(c, FRT_ERR_UNSUPPORTED, "required", "required properties need 'properties'");
        return G_NODE_OBJECT_ANY;
    }
    size_t n_props = props ? json_object_size(props) : 0;
    if (n_props > FRT_GRAMMAR_MAX_PROPERTIES)
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "properties", "more than %d properties", FRT_GRAMMAR_MAX_PROPERTIES);
    for (size_t i = 0; req && i < json_array_size(req); i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r)) return cc_fail(c, FRT_ERR_FORMAT, "required", "must be an array of strings");
        if (!json_object_get(props, json_string_value(r)))
            return cc_fail(c, FRT_ERR_UNSUPPORTED, "required", "'%s' is not in 'properties'", json_string_value(r));
    }
    g_prop *pv = calloc(n_props ? n_props : 1, sizeof *pv);
    if (!pv) return oom(c);
    const char *key;
    json_t *sub;
    size_t k = 0;
    int rc = 0;
    json_object_foreach(props, key, sub) {
        int node = compile_at(c, sub, "/properties/%s", key);
        if (node < 0) {
            rc = node;
            break;
        }
        pv[k].node = node;
        for (size_t i = 0; req && i < json_array_size(req); i++)
            if (!strcmp(json_string_value(json_array_get(req, i)), key)) pv[k].required = 1;
        if (!(pv[k].key = json_string_content(key, &(size_t){0}))) {
            rc = oom(c);
            break;
        }
        pv[k].key_len = (uint32_t)strlen(pv[k].key);
        k++;
    }
    int node = rc ? rc : g_add(c->g, G_OBJECT);
    if (node < 0) {
        for (size_t i = 0; i < k; i++) free(pv[i].key);
        free(pv);
        return rc ? rc : oom(c);
    }
    c->g->nodes[node].props = pv;
    c->g->nodes[node].n_props = (int)k;
    return node;
}

static int compile_array(cc *c, json_t *s)
{
    int mn, mx;
    FRT_TRY(count_keyword(c, s, "minItems", &mn));
    FRT_TRY(count_keyword(c, s, "maxItems", &mx));
    json_t *items = json_object_get(s, "items");
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "items", "must be one schema (tuple forms are not supported)");
    if (json_is_false(items) && mn > 0) return cc_fail(c, FRT_ERR_UNSUPPORTED, "items", "false with minItems > 0");
    int kid = !items || json_is_true(items) ? G_NODE_ANY : json_is_false(items) ? G_NODE_ANY : compile_at(c, items, "/items");
    if (kid < 0) return kid;
    int node = g_add(c->g, G_ARRAY);
    if (node < 0) return oom(c);
    g_node *n = &c->g->nodes[node];
    n->kid = kid;
    n->min = mn < 0 ? 0 : mn;
    n->max = json_is_false(items) ? 0 : mx;
    if (n->max >= 0 && n->max < n->min) return cc_fail(c, FRT_ERR_UNSUPPORTED, "maxItems", "maxItems < minItems");
    return node;
}

static int compile_string(cc *c, json_t *s)
{
    int mn, mx;
    FRT_TRY(count_keyword(c, s, "minLength", &mn));
    FRT_TRY(count_keyword(c, s, "maxLength", &mx));
    if (mn < 0 && mx < 0) return G_NODE_STRING_ANY;
    if (mx >= 0 && mn > mx) return cc_fail(c, FRT_ERR_UNSUPPORTED, "maxLength", "maxLength < minLength");
    int node = g_add(c->g, G_STRING);
    if (node < 0) return oom(c);
    c->g->nodes[node].min = mn < 0 ? 0 : mn;
    c->g->nodes[node].max = mx;
    return node;
}

static int compile_type(cc *c, json_t *s, const char *type)
{
    if (!strcmp(type, "object")) return compile_object(c, s);
    if (!strcmp(type, "array")) return compile_array(c, s);
    if (!strcmp(type, "string")) return compile_string(c, s);
    if (!strcmp(type, "number")) return G_NODE_NUMBER;
    if (!strcmp(type, "integer")) {
        int n = g_add(c->g, G_INTEGER);
        return n < 0 ? oom(c) : n;
    }
    if (!strcmp(type, "null")) return G_NODE_NULL;
    if (!strcmp(type, "boolean")) {
        int n = g_add(c->g, G_ANYOF);
        if (n < 0 || g_add_kid(c->g, n, G_NODE_TRUE) || g_add_kid(c->g, n, G_NODE_FALSE)) return oom(c);
        return n;
    }
    return cc_fail(c, FRT_ERR_FORMAT, "type", "unknown type '%s'", type);
}

static int has_any(json_t *s, const char *const *keys)
{
    for (; *keys; keys++)
        if (json_object_get(s, *keys)) return 1;
    return 0;
}

/* type: a string, an array of strings (any of them), or absent (guessed
 * from the keywords present). */
static int compile_types(cc *c, json_t *s)
{
    static const char *const obj_kw[] = {"properties", "required", "additionalProperties", NULL};
    static const char *const arr_kw[] = {"items", "minItems", "maxItems", NULL};
    static const char *const str_kw[] = {"minLength", "maxLength", NULL};
    json_t *t = json_object_get(s, "type");
    if (!t) {
        if (has_any(s, obj_kw)) return compile_object(c, s);
        if (has_any(s, arr_kw)) return compile_array(c, s);
        if (has_any(s, str_kw)) return compile_string(c, s);
        return G_NODE_ANY;
    }
    if (json_is_string(t)) return compile_type(c, s, json_string_value(t));
    if (!json_is_array(t) || !json_array_size(t))
        return cc_fail(c, FRT_ERR_FORMAT, "type", "must be a string or a non-empty array of strings");
    int node = g_add(c->g, G_ANYOF);
    if (node < 0) return oom(c);
    for (size_t i = 0; i < json_array_size(t); i++) {
        json_t *ti = json_array_get(t, i);
        if (!json_is_string(ti)) return cc_fail(c, FRT_ERR_FORMAT, "type", "must be an array of strings");
        int kid = compile_type(c, s, json_string_value(ti));
        if (kid < 0) return kid;
        if (g_add_kid(c->g, node, kid)) return oom(c);
    }
    return node;
}

/* enum / const: the values that satisfy the whole schema, as literals. */
static int compile_values(cc *c, json_t *s)
{
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    const char *kw = cn ? "const" : "enum";
    if (en && (!json_is_array(en) || !json_array_size(en)))
        return cc_fail(c, FRT_ERR_FORMAT, "enum", "must be a non-empty array");
    if (en && json_array_size(en) > FRT_GRAMMAR_MAX_ENUM)
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "enum", "more than %d values", FRT_GRAMMAR_MAX_ENUM);
    int node = g_add(c->g, G_LITERALS);
    if (node < 0) return oom(c);
    size_t n = cn ? 1 : json_array_size(en);
    for (size_t i = 0; i < n; i++) {
        json_t *v = cn ? cn : json_array_get(en, i);
        int rc = js_validate(c->root, s, v, NULL, 0);
        if (rc == FRT_ERR_MISMATCH) continue;
        if (rc) return cc_fail(c, rc, kw, "%s", frt_last_error());
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text) return oom(c);
        rc = g_add_literal(c->g, node, text, strlen(text));
        free(text);
        if (rc) return cc_fail(c, rc, kw, "a value longer than 65534 bytes");
    }
    if (!c->g->nodes[node].n_lits)
        return cc_fail(c, FRT_ERR_UNSUPPORTED, kw, "no value satisfies the rest of the schema");
    return node;
}

static int compile_anyof(cc *c, json_t *s)
{
    json_t *a = json_object_get(s, "anyOf");
    static const char *const kw[] = {"type", "properties", "items", "minLength", "maxLength", "minItems",
                                     "maxItems", "required", "additionalProperties", NULL};
    if (!json_is_array(a) || !json_array_size(a)) return cc_fail(c, FRT_ERR_FORMAT, "anyOf", "must be a non-empty array");
    if (has_any(s, kw))
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "anyOf", "anyOf beside other constraints is not supported (move "
                                                          "them into each alternative)");
    int node = g_add(c->g, G_ANYOF);
    if (node < 0) return oom(c);
    for (size_t i = 0; i < json_array_size(a); i++) {
        int kid = compile_at(c, json_array_get(a, i), "/anyOf/%zu", i);
        if (kid < 0) return kid;
        if (g_add_kid(c->g, node, kid)) return oom(c);
    }
    return node;
}

/* "#", "#/$defs/NAME", "#/definitions/NAME" -> the schema in c->root. */
static int compile_ref(cc *c, json_t *s)
{
    json_t *r = json_object_get(s, "$ref");
    static const char *const kw[] = {"type", "properties", "items", "enum", "const", "anyOf", "minLength",
                                     "maxLength", "minItems", "maxItems", "required", "additionalProperties", NULL};
    if (!json_is_string(r)) return cc_fail(c, FRT_ERR_FORMAT, "$ref", "must be a string");
    if (has_any(s, kw)) return cc_fail(c, FRT_ERR_UNSUPPORTED, "$ref", "$ref beside other constraints is not supported");
    const char *ref = json_string_value(r);
    json_t *target = NULL;
    if (!strcmp(ref, "#")) target = c->root;
    else if (!strncmp(ref, "#/$defs/", 8)) target = json_object_get(json_object_get(c->root, "$defs"), ref + 8);
    else if (!strncmp(ref, "#/definitions/", 14))
        target = json_object_get(json_object_get(c->root, "definitions"), ref + 14);
    else return cc_fail(c, FRT_ERR_UNSUPPORTED, "$ref", "only '#', '#/$defs/NAME' and '#/definitions/NAME' are supported");
    if (!target) return cc_fail(c, FRT_ERR_FORMAT, "$ref", "'%s' names no definition", ref);
    for (int i = 0; i < c->n_refs; i++)
        if (c->refs[i] == target) return cc_fail(c, FRT_ERR_UNSUPPORTED, "$ref", "'%s' is recursive", ref);
    if (c->n_refs >= MAX_REF_DEPTH) return cc_fail(c, FRT_ERR_UNSUPPORTED, "$ref", "references nested too deep");
    c->refs[c->n_refs++] = target;
    int node = compile_at(c, target, "(%s)", ref);
    c->n_refs--;
    return node;
}

/* The form of every keyword present, whichever type it applies to (a
 * malformed keyword is refused even where it would not apply, as the
 * validator refuses it). */
static int check_forms(cc *c, json_t *s)
{
    static const char *const counts[] = {"minItems", "maxItems", "minLength", "maxLength", NULL};
    int v;
    for (const char *const *k = counts; *k; k++) FRT_TRY(count_keyword(c, s, *k, &v));
    json_t *x;
    if ((x = json_object_get(s, "properties")) && !json_is_object(x))
        return cc_fail(c, FRT_ERR_FORMAT, "properties", "must be an object");
    if ((x = json_object_get(s, "required"))) {
        for (size_t i = 0; json_is_array(x) && i < json_array_size(x); i++)
            if (!json_is_string(json_array_get(x, i))) x = NULL;
        if (!json_is_array(x)) return cc_fail(c, FRT_ERR_FORMAT, "required", "must be an array of strings");
    }
    if ((x = json_object_get(s, "additionalProperties")) && !json_is_false(x))
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "additionalProperties", "only 'additionalProperties: false' is supported");
    if ((x = json_object_get(s, "items")) && !json_is_object(x) && !json_is_boolean(x))
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "items", "must be one schema (tuple forms are not supported)");
    return 0;
}

static int compile(cc *c, json_t *s)
{
    if (json_is_true(s)) return G_NODE_ANY;
    if (!json_is_object(s)) return cc_fail(c, json_is_false(s) ? FRT_ERR_UNSUPPORTED : FRT_ERR_FORMAT, "",
                                           "a schema must be an object (or true)");
    const char *key;
    json_t *v;
    json_object_foreach(s, key, v) {
        if (!js_keyword_known(key))
            return cc_fail(c, FRT_ERR_UNSUPPORTED, key, "keyword outside the supported JSON Schema subset");
    }
    FRT_TRY(check_forms(c, s));
    if (json_object_get(s, "$ref")) return compile_ref(c, s);
    if (json_object_get(s, "enum") || json_object_get(s, "const")) return compile_values(c, s);
    if (json_object_get(s, "anyOf")) return compile_anyof(c, s);
    return compile_types(c, s);
}

/* ---- limits ------------------------------------------------------------------ */

/* Frames one value of node takes at most, and stacks alive at once. */
static void measure(const frt_grammar *g, int node, int *depth, int *width, int level)
{
    const g_node *n = &g->nodes[node];
    int d = 0, w = 1, kd, kw;
    if (level > 4 * FRT_GRAMMAR_MAX_DEPTH) { /* deeper than any stack: reported as too deep */
        *depth = FRT_GRAMMAR_MAX_DEPTH + 1;
        *width = 1;
        return;
    }
    switch (n->kind) {
    case G_OBJECT:
        for (int i = 0; i < n->n_props; i++) {
            measure(g, n->props[i].node, &kd, &kw, level + 1);
            if (kd > d) d = kd;
            if (kw > w) w = kw;
        }
        d++;
        break;
    case G_ARRAY:
    case G_REPEAT:
        if (node == G_NODE_ARRAY_ANY) {
            d = 1;
            break;
        }
        measure(g, n->kid, &d, &w, level + 1);
        d++;
        w += n->kind == G_REPEAT;
        break;
    case G_ANYOF:
    case G_SEQ:
        w = n->kind == G_ANYOF ? 0 : 1;
        for (int i = 0; i < n->n_kids; i++) {
            measure(g, n->kids[i], &kd, &kw, level + 1);
            if (kd > d) d = kd;
            w = n->kind == G_ANYOF ? w + kw : (kw > w ? kw : w);
        }
        d += n->kind == G_SEQ;
        break;
    default: d = 1;
    }
    *depth = d;
    *width = w;
}

static int check_limits(cc *c)
{
    int d, w;
    measure(c->g, G_NODE_ROOT, &d, &w, 0);
    c->path[0] = '\0';
    if (d > FRT_GRAMMAR_MAX_DEPTH)
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "properties", "values nest deeper than %d levels", FRT_GRAMMAR_MAX_DEPTH);
    if (w > FRT_GRAMMAR_MAX_ALTERNATIVES)
        return cc_fail(c, FRT_ERR_UNSUPPORTED, "anyOf", "more than %d alternatives could be alive at once (anyOf "
                                                        "widths multiply through nesting)", FRT_GRAMMAR_MAX_ALTERNATIVES);
    return 0;
}

/* A grammar with the root (index 0, filled in later) and the shared nodes. */
static int grammar_new(frt_grammar **out)
{
    frt_grammar *g = calloc(1, sizeof *g);
    if (!g || g_add(g, G_SEQ) != G_NODE_ROOT || g_add_shared(g)) {
        frt_grammar_free(g);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar");
    }
    *out = g;
    return 0;
}

/* Makes the root a one-kid sequence of node. */
static int set_root(frt_grammar *g, int node) { return g_add_kid(g, G_NODE_ROOT, node); }

static json_t *parse_json(cc *c, const char *text, size_t len, const char *what)
{
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_DECODE_ANY, &je);
    if (!j) cc_fail(c, FRT_ERR_FORMAT, "", "%s is not JSON: %s (line %d)", what, je.text, je.line);
    return j;
}

int frt_grammar_compile_json_schema(const char *schema, size_t len, frt_grammar **out, frt_grammar_diag *diag)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "json schema: NULL out");
    *out = NULL;
    if (diag) memset(diag, 0, sizeof *diag);
    cc c = {.diag = diag};
    FRT_TRY(grammar_new(&c.g));
    int rc = 0, node = G_NODE_OBJECT_ANY;
    if (schema) {
        c.root = parse_json(&c, schema, len, "the schema");
        node = c.root ? compile(&c, c.root) : FRT_ERR_FORMAT;
    }
    rc = node < 0 ? node : set_root(c.g, node) ? oom(&c) : check_limits(&c);
    json_decref(c.root);
    if (rc) {
        frt_grammar_free(c.g);
        return rc;
    }
    *out = c.g;
    return 0;
}

/* ---- tool calls ------------------------------------------------------------------ */

static int add_tag(frt_grammar *g, const char *tag)
{
    char **t = realloc(g->tags, (size_t)(g->n_tags + 1) * sizeof *t);
    if (!t) return FRT_ERR_OUT_OF_MEMORY;
    g->tags = t;
    if (!(g->tags[g->n_tags] = strdup(tag))) return FRT_ERR_OUT_OF_MEMORY;
    g->n_tags++;
    return 0;
}

/* SEQ('NAME", "arguments": ', the parameters' node). */
static int tool_alternative(cc *c, json_t *fn, int i)
{
    json_t *params = json_object_get(fn, "parameters");
    size_t nl = 0;
    char *name = json_string_content(json_string_value(json_object_get(fn, "name")), &nl);
    if (!name) return oom(c);
    int seq = g_add(c->g, G_SEQ), lit = g_add(c->g, G_LITERALS);
    char *text = malloc(nl + 32);
    int rc = seq < 0 || lit < 0 || !text ? FRT_ERR_OUT_OF_MEMORY : 0;
    if (!rc) {
        snprintf(text, nl + 32, "%s\", \"arguments\": ", name);
        rc = g_add_literal(c->g, lit, text, strlen(text));
    }
    free(text);
    free(name);
    if (rc || g_add_kid(c->g, seq, lit)) return oom(c);
    int args = G_NODE_OBJECT_ANY;
    if (params) {
        snprintf(c->path, sizeof c->path, "/tools/%d/function/parameters", i);
        c->root = params;
        c->n_refs = 0;
        args = compile(c, params);
        if (args < 0) return args;
        if (c->g->nodes[args].kind != G_OBJECT && c->g->nodes[args].kind != G_OBJECT_ANY)
            return cc_fail(c, FRT_ERR_UNSUPPORTED, "type", "a tool's parameters must be an object schema");
    }
    if (g_add_kid(c->g, seq, args)) return oom(c);
    return seq;
}

static int check_tool(cc *c, json_t *t, int i, json_t **fn)
{
    snprintf(c->path, sizeof c->path, "/tools/%d", i);
    *fn = json_object_get(t, "function");
    json_t *type = json_object_get(t, "type");
    if (!json_is_object(t) || (type && (!json_is_string(type) || strcmp(json_string_value(type), "function"))) ||
        !json_is_object(*fn) || !json_is_string(json_object_get(*fn, "name")))
        return cc_fail(c, FRT_ERR_FORMAT, "tools", "a tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return 0;
}

/* The call: <tool_call>, \n{"name": ", one of the tools, }\n, </tool_call>. */
static int tool_call_node(cc *c, json_t *tools, const char *only)
{
    int call = g_add(c->g, G_SEQ), names = g_add(c->g, G_ANYOF);
    if (call < 0 || names < 0) return oom(c);
    static const char *const parts[] = {"<tool_call>", "\n{\"name\": \"", NULL, "}\n", "</tool_call>"};
    for (int p = 0; p < 5; p++) {
        int kid = parts[p] ? literal_node(c->g, parts[p]) : names;
        if (kid < 0 || g_add_kid(c->g, call, kid)) return oom(c);
    }
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *fn;
        FRT_TRY(check_tool(c, json_array_get(tools, i), (int)i, &fn));
        if (only && strcmp(json_string_value(json_object_get(fn, "name")), only)) continue;
        int alt = tool_alternative(c, fn, (int)i);
        if (alt < 0) return alt;
        if (g_add_kid(c->g, names, alt)) return oom(c);
    }
    c->path[0] = '\0';
    if (!c->g->nodes[names].n_kids)
        return cc_fail(c, FRT_ERR_NOT_FOUND, "tool_choice", "no tool is named '%s'", only ? only : "");
    return call;
}

/* One call, or (parallel) a call then any number of "\n" + call. */
static int tool_calls_root(cc *c, int call, int parallel)
{
    if (call < 0 || !parallel) return call;
    int seq = g_add(c->g, G_SEQ), more = g_add(c->g, G_REPEAT), next = g_add(c->g, G_SEQ);
    int nl = literal_node(c->g, "\n");
    if (seq < 0 || more < 0 || next < 0 || nl < 0 || g_add_kid(c->g, next, nl) || g_add_kid(c->g, next, call) ||
        g_add_kid(c->g, seq, call) || g_add_kid(c->g, seq, more))
        return oom(c);
    c->g->nodes[more].kid = next;
    c->g->nodes[more].min = 0;
    return seq;
}

int frt_grammar_compile_tool_calls(const char *tools, size_t len, const char *name, int parallel, frt_grammar **out,
                                   frt_grammar_diag *diag)
{
    if (!out || !tools) return frt_error(FRT_ERR_INVALID_ARGUMENT, "tool-call grammar: NULL argument");
    *out = NULL;
    if (diag) memset(diag, 0, sizeof *diag);
    cc c = {.diag = diag};
    FRT_TRY(grammar_new(&c.g));
    json_t *arr = parse_json(&c, tools, len, "tools");
    int node = FRT_ERR_FORMAT;
    if (arr && (!json_is_array(arr) || !json_array_size(arr)))
        node = cc_fail(&c, FRT_ERR_FORMAT, "tools", "must be a non-empty array");
    else if (arr && json_array_size(arr) > FRT_GRAMMAR_MAX_TOOLS)
        node = cc_fail(&c, FRT_ERR_UNSUPPORTED, "tools", "more than %d tools", FRT_GRAMMAR_MAX_TOOLS);
    else if (arr)
        node = tool_calls_root(&c, tool_call_node(&c, arr, name), parallel);
    c.g->guard = "</tool_call>";
    int rc = node < 0 ? node : set_root(c.g, node) || add_tag(c.g, "<tool_call>") || add_tag(c.g, "</tool_call>")
                                   ? oom(&c) : check_limits(&c);
    json_decref(arr);
    if (rc) {
        frt_grammar_free(c.g);
        return rc;
    }
    *out = c.g;
    return 0;
}
