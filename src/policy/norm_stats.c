/*
 * policy/norm_stats.c - openpi's norm_stats.json (shared/normalize.py:
 * {"norm_stats": {KEY: {"mean", "std", "q01", "q99"}}}) parsed strictly,
 * and the two normalisations of transforms.py: z-score (Pi0) and quantile
 * (Pi0.5), for the state on the way in and the action chunk on the way out.
 * openpi computes them in float64 (the statistics are float64 arrays);
 * frt does the same and rounds the result to f32.
 */
#include "frt/policy_io.h"

#include "frt/status.h"
#include "policy/policy_internal.h"
#include "util/json.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NS_MAX_DIM 4096
#define NS_MAX_FILE_BYTES ((size_t)64 << 20)
#define NS_EPS 1e-6 /* transforms.py: std + 1e-6, q99 - q01 + 1e-6 */

enum { NS_MEAN, NS_STD, NS_Q01, NS_Q99, NS_N_FIELDS };
static const char *const ns_field[NS_N_FIELDS] = {"mean", "std", "q01", "q99"};

typedef struct ns_entry {
    char *key;
    size_t dim;
    double *v[NS_N_FIELDS]; /* [dim] each; q01 / q99 NULL when absent */
} ns_entry;

struct frt_policy_norm_stats {
    size_t n;
    ns_entry *e;
};

void frt_policy_norm_stats_free(frt_policy_norm_stats *st)
{
    if (!st) return;
    for (size_t i = 0; i < st->n; i++) {
        free(st->e[i].key);
        for (int f = 0; f < NS_N_FIELDS; f++) free(st->e[i].v[f]);
    }
    free(st->e);
    free(st);
}

/* One array of finite numbers; its length must be *dim (0: sets it). */
static int parse_array(const json_t *a, const char *key, int f, size_t *dim, double **out)
{
    const char *name = ns_field[f];
    if (!json_is_array(a)) return frt_error(FRT_ERR_FORMAT, "norm_stats: %s.%s is not a list", key, name);
    size_t n = json_array_size(a);
    if (n == 0 || n > NS_MAX_DIM)
        return frt_error(FRT_ERR_FORMAT, "norm_stats: %s.%s has %zu values (1..%d)", key, name, n, NS_MAX_DIM);
    if (*dim && n != *dim)
        return frt_error(FRT_ERR_FORMAT, "norm_stats: %s.%s has %zu values, %s.mean has %zu", key, name, n, key,
                         *dim);
    double *v = malloc(n * sizeof *v);
    if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "norm_stats: out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(a, i);
        v[i] = json_is_number(x) ? json_number_value(x) : NAN;
        if (!isfinite(v[i])) {
            free(v);
            return frt_error(FRT_ERR_FORMAT, "norm_stats: %s.%s[%zu] is not a finite number", key, name, i);
        }
    }
    *dim = n;
    *out = v;
    return 0;
}

/* std >= 0, q01 <= q99, quantiles both or neither. */
static int check_entry(const ns_entry *e)
{
    if (!e->v[NS_Q01] != !e->v[NS_Q99])
        return frt_error(FRT_ERR_FORMAT, "norm_stats: %s has only one of q01 / q99", e->key);
    for (size_t i = 0; i < e->dim; i++) {
        if (e->v[NS_STD][i] < 0) return frt_error(FRT_ERR_FORMAT, "norm_stats: %s.std[%zu] is negative", e->key, i);
        if (e->v[NS_Q01] && e->v[NS_Q01][i] > e->v[NS_Q99][i])
            return frt_error(FRT_ERR_FORMAT, "norm_stats: %s.q01[%zu] > q99[%zu]", e->key, i, i);
        if (e->v[NS_Q01] && !isfinite(e->v[NS_Q99][i] - e->v[NS_Q01][i]))
            return frt_error(FRT_ERR_FORMAT, "norm_stats: %s: q99[%zu] - q01[%zu] overflows", e->key, i, i);
    }
    return 0;
}

static int parse_entry(const char *key, const json_t *obj, ns_entry *e)
{
    if (!json_is_object(obj)) return frt_error(FRT_ERR_FORMAT, "norm_stats: %s is not an object", key);
    const char *k;
    const json_t *val;
    json_object_foreach((json_t *)obj, k, val) {
        int known = 0;
        for (int f = 0; f < NS_N_FIELDS; f++) known |= !strcmp(k, ns_field[f]);
        if (!known) return frt_error(FRT_ERR_FORMAT, "norm_stats: %s has an unknown field '%s'", key, k);
    }
    e->key = strdup(key);
    if (!e->key) return frt_error(FRT_ERR_OUT_OF_MEMORY, "norm_stats: out of memory");
    for (int f = 0; f < NS_N_FIELDS; f++) {
        const json_t *a = json_object_get(obj, ns_field[f]);
        if ((!a || json_is_null(a)) && f >= NS_Q01) continue;
        if (!a) return frt_error(FRT_ERR_FORMAT, "norm_stats: %s has no '%s'", key, ns_field[f]);
        FRT_TRY(parse_array(a, key, f, &e->dim, &e->v[f]));
    }
    return check_entry(e);
}

static int parse_root(const json_t *root, frt_policy_norm_stats *st)
{
    if (!json_is_object(root)) return frt_error(FRT_ERR_FORMAT, "norm_stats: the document is not an object");
    const char *k;
    const json_t *val;
    json_object_foreach((json_t *)root, k, val) if (strcmp(k, "norm_stats"))
        return frt_error(FRT_ERR_FORMAT, "norm_stats: unknown top-level key '%s'", k);
    const json_t *ns = json_object_get(root, "norm_stats");
    if (!json_is_object(ns)) return frt_error(FRT_ERR_FORMAT, "norm_stats: missing object 'norm_stats'");
    st->e = calloc(json_object_size(ns) + 1, sizeof *st->e);
    if (!st->e) return frt_error(FRT_ERR_OUT_OF_MEMORY, "norm_stats: out of memory");
    json_object_foreach((json_t *)ns, k, val) FRT_TRY(parse_entry(k, val, &st->e[st->n++]));
    return 0;
}

int frt_policy_norm_stats_parse(const char *json, size_t len, frt_policy_norm_stats **out)
{
    if (out) *out = NULL;
    if (!json || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "norm_stats: NULL argument");
    json_t *root = NULL;
    FRT_TRY(frt_json_parse(json, len, JSON_REJECT_DUPLICATES, &root, "norm_stats"));
    frt_policy_norm_stats *st = calloc(1, sizeof *st);
    int rc = st ? parse_root(root, st) : frt_error(FRT_ERR_OUT_OF_MEMORY, "norm_stats: out of memory");
    json_decref(root);
    if (rc < 0) {
        frt_policy_norm_stats_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

static int parse_file(const char *data, size_t len, void *out)
{
    return frt_policy_norm_stats_parse(data, len, out);
}

int frt_policy_norm_stats_load(const char *path, frt_policy_norm_stats **out)
{
    if (out) *out = NULL;
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "norm_stats: NULL argument");
    return policy_load_file(path, NS_MAX_FILE_BYTES, parse_file, out);
}

static const ns_entry *find(const frt_policy_norm_stats *st, const char *key)
{
    for (size_t i = 0; st && key && i < st->n; i++)
        if (!strcmp(st->e[i].key, key)) return &st->e[i];
    return NULL;
}

size_t frt_policy_norm_stats_dim(const frt_policy_norm_stats *st, const char *key, int *has_quantiles)
{
    const ns_entry *e = find(st, key);
    if (has_quantiles) *has_quantiles = e && e->v[NS_Q01];
    return e ? e->dim : 0;
}

/* The entry KEY, with quantiles when the variant needs them. */
static int entry_for(const frt_policy_norm_stats *st, const char *key, frt_policy_variant v, const ns_entry **out)
{
    const ns_entry *e = find(st, key);
    if (!e) return frt_error(FRT_ERR_NOT_FOUND, "norm_stats: no '%s' statistics", key);
    if (v == FRT_POLICY_PI05 && !e->v[NS_Q01])
        return frt_error(FRT_ERR_NOT_FOUND, "norm_stats: Pi0.5 normalises by quantiles; '%s' has no q01 / q99", key);
    *out = e;
    return 0;
}

int frt_policy_normalize_state(const frt_policy_norm_stats *st, frt_policy_variant v, const float *state, size_t n,
                               float *out)
{
    if (!st || (n && (!state || !out))) return frt_error(FRT_ERR_INVALID_ARGUMENT, "normalize state: NULL argument");
    const ns_entry *e = NULL;
    FRT_TRY(entry_for(st, "state", v, &e));
    if (n > e->dim)
        return frt_error(FRT_ERR_MISMATCH, "normalize state: %zu values, the statistics have %zu", n, e->dim);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(state[i]))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "state[%zu] is not finite (%g)", i, (double)state[i]);
    for (size_t i = 0; i < n; i++) {
        double x = state[i];
        if (v == FRT_POLICY_PI05)
            out[i] = (float)((x - e->v[NS_Q01][i]) / (e->v[NS_Q99][i] - e->v[NS_Q01][i] + NS_EPS) * 2.0 - 1.0);
        else
            out[i] = (float)((x - e->v[NS_MEAN][i]) / (e->v[NS_STD][i] + NS_EPS));
    }
    return 0;
}

static double unnormalize_one(const ns_entry *e, frt_policy_variant v, size_t i, double x)
{
    if (i >= e->dim) return v == FRT_POLICY_PI05 ? x : x * (1.0 + NS_EPS);
    if (v == FRT_POLICY_PI05) return (x + 1.0) / 2.0 * (e->v[NS_Q99][i] - e->v[NS_Q01][i] + NS_EPS) + e->v[NS_Q01][i];
    return x * (e->v[NS_STD][i] + NS_EPS) + e->v[NS_MEAN][i];
}

int frt_policy_unnormalize_actions(const frt_policy_norm_stats *st, frt_policy_variant v, const float *actions,
                                   size_t chunk, size_t action_dim, size_t out_dim, float *out)
{
    if (!st || !actions || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "unnormalize actions: NULL argument");
    if (out_dim == 0 || out_dim > action_dim)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "unnormalize actions: out_dim %zu outside 1..%zu", out_dim,
                         action_dim);
    const ns_entry *e = NULL;
    FRT_TRY(entry_for(st, "actions", v, &e));
    if (e->dim > action_dim)
        return frt_error(FRT_ERR_MISMATCH, "unnormalize actions: %zu statistics for %zu action dimensions", e->dim,
                         action_dim);
    for (size_t t = 0; t < chunk; t++)
        for (size_t i = 0; i < out_dim; i++)
            out[t * out_dim + i] = (float)unnormalize_one(e, v, i, actions[t * action_dim + i]);
    return 0;
}
