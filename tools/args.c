/* tools/args.c - the one argument parser of the frt command line (args.h). */
#include "args.h"

#include "frt/exec.h"
#include "frt/status.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- checked number parsing ----------------------------------------------- */

/* strto* skip leading space and take a sign; refuse what a person would not
 * call a number: empty, leading space. */
static int number_start(const char *s)
{
    if (!s || !*s) return FRT_PARSE_EMPTY;
    if (isspace((unsigned char)*s)) return FRT_PARSE_SYNTAX;
    return FRT_PARSE_OK;
}

int frt_parse_i64(const char *s, long long lo, long long hi, long long *out)
{
    int rc = number_start(s);
    if (rc) return rc;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end) return FRT_PARSE_SYNTAX;
    if (errno == ERANGE || v < lo || v > hi) return FRT_PARSE_RANGE;
    *out = v;
    return FRT_PARSE_OK;
}

int frt_parse_u64(const char *s, unsigned long long *out)
{
    int rc = number_start(s);
    if (rc) return rc;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end) return FRT_PARSE_SYNTAX;
    /* strtoull accepts "-1" as 2^64 - 1: a sign is out of range here */
    if (errno == ERANGE || *s == '-') return FRT_PARSE_RANGE;
    *out = v;
    return FRT_PARSE_OK;
}

int frt_parse_double(const char *s, double lo, double hi, double *out)
{
    int rc = number_start(s);
    if (rc) return rc;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end) return FRT_PARSE_SYNTAX;
    if (isnan(v)) return FRT_PARSE_NOT_FINITE;
    if (isinf(v)) return errno == ERANGE ? FRT_PARSE_RANGE : FRT_PARSE_NOT_FINITE; /* 1e999 vs "inf" */
    if (v < lo || v > hi) return FRT_PARSE_RANGE;
    *out = v; /* an underflow (1e-400) is a tiny number, kept */
    return FRT_PARSE_OK;
}

int frt_parse_size(const char *s, unsigned long long *out)
{
    int rc = number_start(s);
    if (rc) return rc;
    if (*s == '-') return FRT_PARSE_RANGE;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || isnan(v) || (isinf(v) && errno != ERANGE)) return FRT_PARSE_SYNTAX;
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {{"", 1},        {"B", 1},           {"K", 1e3},        {"KB", 1e3},
                 {"M", 1e6},     {"MB", 1e6},        {"G", 1e9},        {"GB", 1e9},
                 {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix)) continue;
        double b = v * units[i].mult;
        if (errno == ERANGE || b > 9223372036854775808.0) return FRT_PARSE_RANGE;
        *out = (unsigned long long)b;
        return FRT_PARSE_OK;
    }
    return FRT_PARSE_SYNTAX;
}

/* The next element of a comma-separated list at *p, spaces around it
 * trimmed, into item (cap bytes with the NUL); *start is where it begins,
 * *last says it was the list's last; *p moves past its comma. */
static int list_element(const char **p, char *item, size_t cap, const char **start, int *last)
{
    const char *q = *p;
    while (*q == ' ') q++;
    *start = q;
    while (*q && *q != ',') q++;
    size_t len = (size_t)(q - *start);
    while (len && (*start)[len - 1] == ' ') len--;
    *last = !*q;
    *p = *q ? q + 1 : q;
    if (len == 0) return FRT_PARSE_EMPTY;
    if (len >= cap) return FRT_PARSE_SYNTAX;
    memcpy(item, *start, len);
    item[len] = '\0';
    return FRT_PARSE_OK;
}

int frt_parse_i32_list(const char *s, long long lo, long long hi, int32_t **out, size_t *n, const char **bad_at)
{
    if (lo < INT32_MIN) lo = INT32_MIN;
    if (hi > INT32_MAX) hi = INT32_MAX;
    if (bad_at) *bad_at = s;
    if (!s) return FRT_PARSE_EMPTY;
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return FRT_PARSE_RANGE;
    size_t k = 0;
    const char *p = s;
    char item[32];
    for (int last = 0; !last;) {
        const char *start = p;
        int rc = list_element(&p, item, sizeof item, &start, &last);
        if (bad_at) *bad_at = start;
        long long x = 0;
        if (rc == FRT_PARSE_OK) rc = frt_parse_i64(item, lo, hi, &x);
        if (rc) {
            free(v);
            return rc;
        }
        v[k++] = (int32_t)x;
    }
    *out = v;
    *n = k;
    return FRT_PARSE_OK;
}

/* One ID:BIAS element. */
static int bias_element(char *item, frt_logit_bias *out)
{
    char *colon = strchr(item, ':');
    if (!colon) return FRT_PARSE_SYNTAX;
    *colon = '\0';
    long long id = 0;
    double b = 0;
    int rc = frt_parse_i64(item, 0, INT32_MAX, &id);
    if (rc == FRT_PARSE_EMPTY) rc = FRT_PARSE_SYNTAX; /* ":5" */
    if (!rc) rc = frt_parse_double(colon + 1, -FLT_MAX, FLT_MAX, &b);
    if (!rc) *out = (frt_logit_bias){(int32_t)id, (float)b};
    return rc;
}

int frt_parse_logit_bias(const char *s, frt_logit_bias *out, int cap, int *n, const char **bad_at)
{
    if (bad_at) *bad_at = s;
    if (!s) return FRT_PARSE_EMPTY;
    const char *p = s;
    char item[64];
    int k = 0;
    for (int last = 0; !last;) {
        const char *start = p;
        int rc = list_element(&p, item, sizeof item, &start, &last);
        if (bad_at) *bad_at = start;
        if (!rc && k == cap) rc = FRT_PARSE_RANGE;
        if (!rc) rc = bias_element(item, &out[k]);
        if (rc) return rc;
        k++;
    }
    *n = k;
    return FRT_PARSE_OK;
}

/* ---- the option table ------------------------------------------------------ */

const char *frt_args_name(const frt_arg *a, char *buf, size_t n)
{
    if (a->short_name && a->long_name)
        snprintf(buf, n, "-%c/--%s", a->short_name, a->long_name);
    else if (a->short_name)
        snprintf(buf, n, "-%c", a->short_name);
    else
        snprintf(buf, n, "--%s", a->long_name);
    return buf;
}

int frt_args_error(const frt_cmd_spec *spec, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "frt %s: ", spec->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'frt %s --help')\n", spec->name);
    return FRT_ARGS_USAGE;
}

frt_arg *frt_args_find(frt_cmd_spec *spec, const char *long_name)
{
    for (int i = 0; i < spec->n_args; i++)
        if (spec->args[i].long_name && !strcmp(spec->args[i].long_name, long_name)) return &spec->args[i];
    return NULL;
}

const char *frt_args_first_given(frt_cmd_spec *spec, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (frt_args_find(spec, names[i])->given > 0) return names[i];
    return NULL;
}

int frt_args_backend(int backend)
{
    if (backend != FRT_ARG_BACKEND_AUTO) return backend;
    int n = 0;
    frt_device_count(FRT_BACKEND_CUDA, &n);
    return n > 0 ? FRT_BACKEND_CUDA : FRT_BACKEND_CPU;
}

static void int_range(const frt_arg *a, long long *lo, long long *hi)
{
    *lo = a->min, *hi = a->max;
    if (!*lo && !*hi) *hi = INT_MAX;
    if (*lo < INT_MIN) *lo = INT_MIN;
    if (*hi > INT_MAX) *hi = INT_MAX;
}

static const char *default_meta(frt_arg_kind k)
{
    switch (k) {
    case FRT_ARG_INT:
    case FRT_ARG_U64: return "N";
    case FRT_ARG_FLOAT:
    case FRT_ARG_DOUBLE: return "X";
    case FRT_ARG_SIZE: return "SIZE";
    case FRT_ARG_BACKEND: return "auto|cpu|cuda";
    default: return "VALUE";
    }
}

/* Whether word is one of the '|'-separated choices. */
static int is_choice(const char *choices, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, word, n)) return 1;
        p = bar ? bar + 1 : p + len;
    }
    return 0;
}

/* Stores value v for option a; prints the refusal and returns 2 when v is
 * not acceptable. */
static int store(const frt_cmd_spec *spec, frt_arg *a, const char *v)
{
    char name[64];
    frt_args_name(a, name, sizeof name);
    int rc = 0;
    switch (a->kind) {
    case FRT_ARG_FLAG: *(int *)a->dst = 1; return 0;
    case FRT_ARG_STR: *(const char **)a->dst = v; return 0;
    case FRT_ARG_CHOICE:
        if (!is_choice(a->choices, v)) {
            char list[128];
            size_t k = 0;
            for (const char *c = a->choices; *c && k + 3 < sizeof list; c++) {
                if (*c == '|') list[k++] = ',', list[k++] = ' ';
                else list[k++] = *c;
            }
            list[k] = '\0';
            return frt_args_error(spec, "%s: '%s' is not one of %s", name, v, list);
        }
        *(const char **)a->dst = v;
        return 0;
    case FRT_ARG_BACKEND: {
        frt_backend b;
        if (!strcmp(v, "auto")) {
            *(int *)a->dst = FRT_ARG_BACKEND_AUTO;
        } else if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
            return frt_args_error(spec, "%s: '%s' is not one of auto, cpu, cuda", name, v);
        } else {
            frt_backend_parse(v, &b);
            *(int *)a->dst = (int)b;
        }
        return 0;
    }
    case FRT_ARG_INT: {
        long long lo, hi, x = 0;
        int_range(a, &lo, &hi);
        rc = frt_parse_i64(v, lo, hi, &x);
        if (rc == FRT_PARSE_RANGE)
            return frt_args_error(spec, "%s: '%s' is out of range (an integer from %lld to %lld)", name, v, lo, hi);
        if (rc) return frt_args_error(spec, "%s: '%s' is not an integer", name, v);
        *(int *)a->dst = (int)x;
        return 0;
    }
    case FRT_ARG_U64:
        rc = frt_parse_u64(v, (unsigned long long *)a->dst);
        if (rc == FRT_PARSE_RANGE)
            return frt_args_error(spec, "%s: '%s' is out of range (an integer from 0 to %llu)", name, v, ULLONG_MAX);
        if (rc) return frt_args_error(spec, "%s: '%s' is not an integer", name, v);
        return 0;
    case FRT_ARG_FLOAT:
    case FRT_ARG_DOUBLE: {
        double x = 0;
        rc = frt_parse_double(v, a->fmin, a->fmax, &x);
        if (rc == FRT_PARSE_RANGE)
            return frt_args_error(spec, "%s: '%s' is out of range (a number from %g to %g)", name, v, a->fmin,
                                  a->fmax);
        if (rc == FRT_PARSE_NOT_FINITE) return frt_args_error(spec, "%s: '%s' is not a finite number", name, v);
        if (rc) return frt_args_error(spec, "%s: '%s' is not a number", name, v);
        if (a->kind == FRT_ARG_FLOAT)
            *(float *)a->dst = (float)x;
        else
            *(double *)a->dst = x;
        return 0;
    }
    case FRT_ARG_SIZE:
        rc = frt_parse_size(v, (unsigned long long *)a->dst);
        if (rc == FRT_PARSE_RANGE) return frt_args_error(spec, "%s: '%s' is out of range (0 to 2^63 bytes)", name, v);
        if (rc) return frt_args_error(spec, "%s: '%s' is not a size (e.g. 123, 500MB, 2GiB)", name, v);
        return 0;
    }
    return frt_args_error(spec, "%s: unknown option kind", name);
}

static void print_default(const frt_arg *a, FILE *f)
{
    if (a->dflt) {
        if (*a->dflt) fprintf(f, " (default: %s)", a->dflt);
        return;
    }
    switch (a->kind) {
    case FRT_ARG_FLAG: break;
    case FRT_ARG_STR:
    case FRT_ARG_CHOICE: {
        const char *s = *(const char **)a->dst;
        if (s) fprintf(f, " (default: %s)", s);
        break;
    }
    case FRT_ARG_BACKEND: {
        int b = *(int *)a->dst;
        fprintf(f, " (default: %s)",
                b == FRT_ARG_BACKEND_AUTO ? "auto: cuda when a CUDA device is present, else cpu"
                                          : frt_backend_name((frt_backend)b));
        break;
    }
    case FRT_ARG_INT: fprintf(f, " (default: %d)", *(int *)a->dst); break;
    case FRT_ARG_U64:
    case FRT_ARG_SIZE: fprintf(f, " (default: %llu)", *(unsigned long long *)a->dst); break;
    case FRT_ARG_FLOAT: fprintf(f, " (default: %g)", (double)*(float *)a->dst); break;
    case FRT_ARG_DOUBLE: fprintf(f, " (default: %g)", *(double *)a->dst); break;
    }
}

void frt_args_help(const frt_cmd_spec *spec, FILE *f)
{
    fprintf(f, "usage: frt %s %s\n", spec->name, spec->synopsis ? spec->synopsis : "[options]");
    if (spec->about) fprintf(f, "\n%s", spec->about);
    fprintf(f, "\noptions:\n");
    for (int i = 0; i < spec->n_args; i++) {
        const frt_arg *a = &spec->args[i];
        char left[96];
        int o = a->short_name ? snprintf(left, sizeof left, "-%c%s", a->short_name, a->long_name ? ", " : "")
                              : snprintf(left, sizeof left, "    ");
        if (a->long_name) o += snprintf(left + o, sizeof left - (size_t)o, "--%s", a->long_name);
        if (a->kind != FRT_ARG_FLAG)
            snprintf(left + o, sizeof left - (size_t)o, " %s",
                     a->meta ? a->meta : a->kind == FRT_ARG_CHOICE ? a->choices : default_meta(a->kind));
        fprintf(f, "  %-26s%s%s", left, strlen(left) >= 26 ? "\n                            " : "",
                a->help ? a->help : "");
        if (a->kind == FRT_ARG_INT && !a->dflt) {
            long long lo, hi;
            int_range(a, &lo, &hi);
            if (hi == INT_MAX)
                fprintf(f, " [>= %lld]", lo);
            else
                fprintf(f, " [%lld..%lld]", lo, hi);
        } else if ((a->kind == FRT_ARG_FLOAT || a->kind == FRT_ARG_DOUBLE) && !a->dflt) {
            fprintf(f, " [%g..%g]", a->fmin, a->fmax);
        }
        print_default(a, f);
        fputc('\n', f);
    }
    fprintf(f, "  -h, --help                show this help and exit\n"
               "      --version             print the frt version and exit\n");
    if (spec->epilog) fprintf(f, "\n%s", spec->epilog);
}

int frt_args_parse(frt_cmd_spec *spec, int argc, char **argv, char **pos, int *n_pos)
{
    int only_pos = 0, np = 0;
    const char *extra = NULL; /* the first operand past max_pos */
    for (int i = 0; i < spec->n_args; i++) spec->args[i].given = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || !a[1]) {
            if (spec->max_pos >= 0 && np >= spec->max_pos) {
                if (!extra) extra = a;
            } else if (pos) {
                pos[np] = a;
            }
            np++;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_pos = 1;
            continue;
        }
        frt_arg *hit = NULL;
        const char *inline_value = NULL;
        if (a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            if (len == 4 && !strncmp(name, "help", 4) && !eq) {
                frt_args_help(spec, stdout);
                return FRT_ARGS_EXIT;
            }
            if (len == 7 && !strncmp(name, "version", 7) && !eq) {
                printf("frt %s\n", frt_version());
                return FRT_ARGS_EXIT;
            }
            for (int k = 0; k < spec->n_args && !hit; k++) {
                const char *ln = spec->args[k].long_name;
                if (ln && strlen(ln) == len && !strncmp(ln, name, len)) hit = &spec->args[k];
            }
            if (!hit) return frt_args_error(spec, "unknown option --%.*s", (int)len, name);
            if (eq) inline_value = eq + 1;
        } else {
            if (a[1] == 'h' && !a[2]) {
                frt_args_help(spec, stdout);
                return FRT_ARGS_EXIT;
            }
            for (int k = 0; k < spec->n_args && !hit && !a[2]; k++)
                if (spec->args[k].short_name == a[1]) hit = &spec->args[k];
            if (!hit) return frt_args_error(spec, "unknown option %s", a);
        }
        char name[64];
        frt_args_name(hit, name, sizeof name);
        hit->given++;
        if (hit->kind == FRT_ARG_FLAG) {
            if (inline_value) return frt_args_error(spec, "%s takes no value", name);
            *(int *)hit->dst = 1;
            continue;
        }
        const char *v = inline_value;
        if (!v) {
            if (i + 1 >= argc)
                return frt_args_error(spec, "%s needs a value (%s)", name,
                                      hit->meta ? hit->meta
                                                : hit->kind == FRT_ARG_CHOICE ? hit->choices : default_meta(hit->kind));
            v = argv[++i];
        }
        if (store(spec, hit, v)) return FRT_ARGS_USAGE;
    }
    if (n_pos) *n_pos = np < spec->max_pos || spec->max_pos < 0 ? np : spec->max_pos;
    if (extra) return frt_args_error(spec, "unexpected argument '%s'", extra);
    if (np < spec->min_pos)
        return frt_args_error(spec, "missing argument: usage: frt %s %s", spec->name,
                              spec->synopsis ? spec->synopsis : "[options]");
    return FRT_ARGS_RUN;
}

int frt_args_ids(const frt_cmd_spec *spec, const char *arg, int32_t **ids, size_t *n)
{
    const char *bad = NULL;
    int lrc = frt_parse_i32_list(arg, 0, INT32_MAX, ids, n, &bad);
    if (lrc == FRT_PARSE_EMPTY)
        return frt_args_error(spec, "--ids: '%s' has an empty element (a comma-separated list like 1,2,3)", arg);
    if (lrc == FRT_PARSE_RANGE)
        return frt_args_error(spec, "--ids: '%.*s' is not a token id (0 to %d)", (int)strcspn(bad, ","), bad,
                              INT32_MAX);
    if (lrc)
        return frt_args_error(spec, "--ids: '%.*s' is not an integer (a comma-separated list like 1,2,3)",
                              (int)strcspn(bad, ","), bad);
    return 0;
}

int frt_args_check_ids(const frt_cmd_spec *spec, const int32_t *ids, size_t n, int vocab)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return frt_args_error(spec, "--ids: token id %d (element %zu) is outside the vocabulary [0, %d)",
                                  (int)ids[i], i + 1, vocab);
    return 0;
}
