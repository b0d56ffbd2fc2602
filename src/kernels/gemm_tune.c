/*
 * kernels/gemm_tune.c - the GEMM autotune file (gemm_tune.h): a strict
 * line parser (every field range-checked, the line named in each error)
 * and its writer.
 */
#include "kernels/gemm_tune.h"

#include "frt/fs.h"
#include "util/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALGO_MAX (1 << 30)
#define DIM_MAX (1 << 24)
#define BIG_MAX (1ll << 40)

static const char *const HEADER[] = {"frt-gemm-tune", "device", "cublaslt", "workspace", "candidates"};

/* The parser's position: the text, the current line and its number. */
typedef struct cursor {
    const char *what;
    int line;
    char buf[FRT_GEMM_TUNE_LINE_MAX + 1];
} cursor;

#define BAD(cu, ...) bad_line(cu, __VA_ARGS__)

static int bad_line(const cursor *cu, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad_line(const cursor *cu, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return frt_error(FRT_ERR_FORMAT, "%s: line %d: %s", cu->what, cu->line, msg);
}

/* A decimal integer in [lo, hi] (no sign but '-', no spaces, no leading
 * '+'); 0 or -1. */
static int to_ll(const char *s, long long lo, long long hi, long long *v)
{
    if (!*s || (*s != '-' && (*s < '0' || *s > '9'))) return -1;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

/* Splits buf at single spaces into at most max fields; returns the count,
 * or -1 for an empty field (two spaces, a leading or trailing space). */
static int split(char *buf, char **f, int max)
{
    int n = 0;
    for (char *p = buf;;) {
        if (n == max) return max + 1;
        f[n++] = p;
        char *sp = strchr(p, ' ');
        if (sp) *sp = '\0';
        if (!*p) return -1;
        if (!sp) return n;
        p = sp + 1;
    }
}

static int field(const cursor *cu, const char *s, long long lo, long long hi, const char *name, long long *v)
{
    if (to_ll(s, lo, hi, v) < 0) return BAD(cu, "%s '%.40s' is not an integer in [%lld, %lld]", name, s, lo, hi);
    return 0;
}

/* 1 when s has no control character (below 0x20, or 0x7f). */
static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 0;
    return 1;
}

/* A header record i ("device NAME" keeps the rest of the line). */
static int parse_header(cursor *cu, int i, frt_gemm_tune *t)
{
    char *sp = strchr(cu->buf, ' ');
    if (!sp || (size_t)(sp - cu->buf) != strlen(HEADER[i]) || strncmp(cu->buf, HEADER[i], (size_t)(sp - cu->buf)))
        return BAD(cu, "expected '%s ...'", HEADER[i]);
    const char *v = sp + 1;
    long long x;
    switch (i) {
    case 0:
        FRT_TRY(field(cu, v, 0, 1 << 20, "version", &x));
        if (x != FRT_GEMM_TUNE_VERSION) return BAD(cu, "version %lld (this build reads %d)", x, FRT_GEMM_TUNE_VERSION);
        return 0;
    case 1:
        if (!*v || strlen(v) >= sizeof t->device) return BAD(cu, "device name of %zu bytes (1 to 255)", strlen(v));
        if (!printable(v)) return BAD(cu, "a control character in the device name");
        memcpy(t->device, v, strlen(v) + 1);
        return 0;
    case 2:
        return field(cu, v, 0, BIG_MAX, "cublaslt version", &t->cublaslt_version);
    case 3:
        return field(cu, v, 0, BIG_MAX, "workspace", &t->workspace_bytes);
    default:
        FRT_TRY(field(cu, v, 1, FRT_GEMM_TUNE_MAX_CANDIDATES, "candidates", &x));
        t->candidates = (int)x;
        return 0;
    }
}

const frt_gemm_tune_entry *frt_gemm_tune_find(const frt_gemm_tune *t, int n, int in_dim, int out_dim, int out_bf16,
                                              int accumulate)
{
    for (int i = 0; t && i < t->n; i++) {
        const frt_gemm_tune_entry *e = &t->e[i];
        if (e->n == n && e->in_dim == in_dim && e->out_dim == out_dim && e->out_bf16 == out_bf16 &&
            e->accumulate == accumulate)
            return e;
    }
    return NULL;
}

/* "gemm N IN OUT DT ACC I A T S K R W C" into t->e[t->n]. */
static int parse_gemm(cursor *cu, frt_gemm_tune *t)
{
    char *f[16];
    const int nf = split(cu->buf, f, 15);
    if (nf < 0) return BAD(cu, "empty field (fields are separated by one space)");
    if (strcmp(f[0], "gemm")) return BAD(cu, "unknown record '%.40s' (gemm expected)", f[0]);
    if (nf != 14)
        return BAD(cu, "gemm needs 13 fields (N IN OUT DT ACC I and 7 algorithm ids), not %s%d", nf > 14 ? "more than " : "",
                   nf > 14 ? 13 : nf - 1);
    if (t->n == FRT_GEMM_TUNE_MAX) return BAD(cu, "more than %d gemm records", FRT_GEMM_TUNE_MAX);
    frt_gemm_tune_entry e;
    long long v[3], acc, idx, a[7];
    static const char *const dims[3] = {"N", "IN", "OUT"};
    for (int i = 0; i < 3; i++) FRT_TRY(field(cu, f[1 + i], 1, DIM_MAX, dims[i], &v[i]));
    if (strcmp(f[4], "f32") && strcmp(f[4], "bf16")) return BAD(cu, "dtype '%.40s' (f32 or bf16)", f[4]);
    FRT_TRY(field(cu, f[5], 0, 1, "ACC", &acc));
    FRT_TRY(field(cu, f[6], 0, t->candidates - 1, "index (below candidates)", &idx));
    for (int i = 0; i < 7; i++) FRT_TRY(field(cu, f[7 + i], 0, ALGO_MAX, "algorithm id", &a[i]));
    e.n = (int)v[0], e.in_dim = (int)v[1], e.out_dim = (int)v[2];
    e.out_bf16 = !strcmp(f[4], "bf16");
    e.accumulate = (int)acc;
    e.index = (int)idx;
    for (int i = 0; i < 7; i++) e.algo[i] = (int)a[i];
    if (frt_gemm_tune_find(t, e.n, e.in_dim, e.out_dim, e.out_bf16, e.accumulate))
        return BAD(cu, "shape %d x %d -> %d %s acc %d given twice", e.n, e.in_dim, e.out_dim, f[4], e.accumulate);
    t->e[t->n++] = e;
    return 0;
}

/* The next line (without its newline) into cu->buf; 0 at the end. */
static int next_line(cursor *cu, const char **p, const char *end)
{
    if (*p >= end) return 0;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const size_t n = (size_t)((nl ? nl : end) - *p);
    cu->line++;
    if (n > FRT_GEMM_TUNE_LINE_MAX) return BAD(cu, "longer than %d bytes", FRT_GEMM_TUNE_LINE_MAX);
    if (memchr(*p, '\0', n)) return BAD(cu, "a NUL byte");
    memcpy(cu->buf, *p, n);
    cu->buf[n] = '\0';
    if (n && cu->buf[n - 1] == '\r') cu->buf[n - 1] = '\0';
    *p = nl ? nl + 1 : end;
    return 1;
}

static int parse_all(cursor *cu, const char *text, size_t len, frt_gemm_tune *t)
{
    const char *p = text, *end = text + len;
    int header = 0, rc;
    while ((rc = next_line(cu, &p, end)) > 0) {
        if (!cu->buf[0] || cu->buf[0] == '#') continue;
        if (header < 5)
            FRT_TRY(parse_header(cu, header++, t));
        else
            FRT_TRY(parse_gemm(cu, t));
    }
    FRT_TRY(rc);
    if (header < 5) return frt_error(FRT_ERR_FORMAT, "%s: no '%s' record (truncated)", cu->what, HEADER[header]);
    return 0;
}

int frt_gemm_tune_parse(const char *text, size_t len, const char *what, frt_gemm_tune *out)
{
    if (!out || (!text && len)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm tune: NULL argument");
    memset(out, 0, sizeof *out);
    cursor *cu = calloc(1, sizeof *cu);
    frt_gemm_tune t;
    memset(&t, 0, sizeof t);
    t.e = malloc(FRT_GEMM_TUNE_MAX * sizeof *t.e);
    if (!cu || !t.e) {
        free(cu);
        free(t.e);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "gemm tune: out of memory");
    }
    cu->what = what ? what : "gemm tune";
    int rc = parse_all(cu, text ? text : "", len, &t);
    free(cu);
    if (rc < 0) {
        free(t.e);
        return rc;
    }
    *out = t;
    return 0;
}

void frt_gemm_tune_free(frt_gemm_tune *t)
{
    if (!t) return;
    free(t->e);
    memset(t, 0, sizeof *t);
}

/* The writer's range checks: what the parser accepts. */
static int check_entry(const frt_gemm_tune *t, const frt_gemm_tune_entry *e)
{
    int ok = e->n >= 1 && e->n <= DIM_MAX && e->in_dim >= 1 && e->in_dim <= DIM_MAX && e->out_dim >= 1 &&
             e->out_dim <= DIM_MAX && (e->out_bf16 == 0 || e->out_bf16 == 1) &&
             (e->accumulate == 0 || e->accumulate == 1) && e->index >= 0 && e->index < t->candidates;
    for (int i = 0; i < 7; i++) ok &= e->algo[i] >= 0 && e->algo[i] <= ALGO_MAX;
    return ok ? 0 : frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm tune: entry %d x %d -> %d out of range", e->n,
                              e->in_dim, e->out_dim);
}

static int check_tune(const frt_gemm_tune *t)
{
    const size_t dl = strnlen(t->device, sizeof t->device);
    if (!dl || dl == sizeof t->device || !printable(t->device))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm tune: the device name must be 1 to 255 bytes on one line");
    if (t->cublaslt_version < 0 || t->cublaslt_version > BIG_MAX || t->workspace_bytes < 0 ||
        t->workspace_bytes > BIG_MAX || t->candidates < 1 || t->candidates > FRT_GEMM_TUNE_MAX_CANDIDATES ||
        t->n < 0 || t->n > FRT_GEMM_TUNE_MAX || (t->n && !t->e))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm tune: a header field is out of range");
    for (int i = 0; i < t->n; i++) FRT_TRY(check_entry(t, &t->e[i]));
    return 0;
}

int frt_gemm_tune_format(const frt_gemm_tune *t, char **out, size_t *len)
{
    if (!t || !out || !len) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm tune: NULL argument");
    *out = NULL;
    FRT_TRY(check_tune(t));
    const size_t cap = 1024 + (size_t)t->n * 160;
    char *s = malloc(cap);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "gemm tune: out of memory");
    size_t k = (size_t)snprintf(s, cap,
                                "frt-gemm-tune %d\ndevice %s\ncublaslt %lld\nworkspace %lld\ncandidates %d\n"
                                "# gemm N IN OUT DT ACC index algo tile stages splitk reduction swizzle custom\n",
                                FRT_GEMM_TUNE_VERSION, t->device, t->cublaslt_version, t->workspace_bytes,
                                t->candidates);
    for (int i = 0; i < t->n; i++) {
        const frt_gemm_tune_entry *e = &t->e[i];
        k += (size_t)snprintf(s + k, cap - k, "gemm %d %d %d %s %d %d %d %d %d %d %d %d %d\n", e->n, e->in_dim,
                              e->out_dim, e->out_bf16 ? "bf16" : "f32", e->accumulate, e->index, e->algo[0],
                              e->algo[1], e->algo[2], e->algo[3], e->algo[4], e->algo[5], e->algo[6]);
    }
    *out = s;
    *len = k;
    return 0;
}

int frt_gemm_tune_read(const char *path, frt_gemm_tune *out)
{
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm tune: NULL argument");
    char *text = NULL;
    size_t len = 0;
    FRT_TRY(frt_file_read_all(path, (size_t)1 << 20, &text, &len));
    int rc = frt_gemm_tune_parse(text, len, path, out);
    free(text);
    return rc;
}

int frt_gemm_tune_write(const char *path, const frt_gemm_tune *t)
{
    if (!path) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm tune: NULL path");
    char *text = NULL;
    size_t len = 0;
    FRT_TRY(frt_gemm_tune_format(t, &text, &len));
    int rc = frt_file_write_atomic(path, text, len);
    free(text);
    return rc;
}
