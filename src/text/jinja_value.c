/* jinja_value.c - the arena, values and their Python text forms for the
 * Jinja engine: str() and repr() as CPython 3 prints them (Objects/
 * unicodeobject.c unicode_repr, Python/pystrtod.c float_repr_style 'short'),
 * and json.dumps (Lib/json/encoder.py) as transformers' tojson filter calls
 * it. */
#include "text/jinja_internal.h"
#include "text/tok_internal.h"
#include "util/error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- arena ---------------------------------------------------------------- */
struct jarena_block {
    jarena_block *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

void *ja_alloc(jarena *a, size_t n)
{
    if (n > SIZE_MAX - 64) {
        a->over = 1;
        return NULL;
    }
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->limit && (n > a->limit || a->used > a->limit - n)) {
        a->over = 1;
        return NULL;
    }
    jarena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 - sizeof *b ? n : 65536 - sizeof *b;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *ja_strdup(jarena *a, const char *s, size_t n)
{
    char *p = ja_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void ja_free(jarena *a)
{
    jarena_block *b = a->head;
    while (b) {
        jarena_block *nx = b->next;
        free(b);
        b = nx;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- buffers -------------------------------------------------------------- */
int jb_put(jbuf *b, const char *s, size_t n)
{
    if (b->limit && (n > b->limit || b->n > b->limit - n)) {
        b->over = 1;
        return FRT_ERR_OUT_OF_RANGE;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return FRT_ERR_OUT_OF_MEMORY;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

int jb_putc(jbuf *b, char c) { return jb_put(b, &c, 1); }

int jb_printf(jbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return FRT_ERR_INVALID_ARGUMENT;
    if ((size_t)n < sizeof tmp) return jb_put(b, tmp, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) return FRT_ERR_OUT_OF_MEMORY;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = jb_put(b, big, (size_t)n);
    free(big);
    return rc;
}

void jb_free(jbuf *b)
{
    free(b->p);
    free(b->sp);
    b->p = NULL;
    b->sp = NULL;
    b->n = b->cap = b->nsp = b->capsp = 0;
}

/* ---- provenance (jinja_internal.h) ------------------------------------------ */
const jtaint jt_whole = {0};

/* The I-th marked range of S, clipped to the string. */
static frt_text_span range_of(jval s, size_t i)
{
    if (s.s.tn == &jt_whole) return (frt_text_span){0, s.s.n};
    return s.s.tn->r[i];
}

static size_t n_ranges(jval s) { return !s.s.tn ? 0 : s.s.tn == &jt_whole ? (s.s.n ? 1 : 0) : s.s.tn->n; }

/* first range of S that ends after POS (binary search) */
static size_t first_after(jval s, size_t pos)
{
    size_t lo = 0, hi = n_ranges(s);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (range_of(s, mid).end <= pos) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int jt_any(jval s, size_t from, size_t n)
{
    if (!s.s.tn || !n) return 0;
    if (s.s.tn == &jt_whole) return 1;
    size_t i = first_after(s, from);
    return i < s.s.tn->n && s.s.tn->r[i].start < from + n;
}

int jb_mark(jbuf *b, size_t from, size_t to)
{
    if (from >= to) return 0;
    if (b->nsp && b->sp[b->nsp - 1].end >= from) { /* touching or overlapping the last: extend it */
        if (to > b->sp[b->nsp - 1].end) b->sp[b->nsp - 1].end = to;
        return 0;
    }
    if (b->nsp == b->capsp) {
        size_t cap = b->capsp ? b->capsp * 2 : 8;
        if (b->limit && cap * sizeof *b->sp > b->limit) { /* the ranges count against the buffer's limit too */
            b->over = 1;
            return FRT_ERR_OUT_OF_RANGE;
        }
        frt_text_span *sp = realloc(b->sp, cap * sizeof *sp);
        if (!sp) return FRT_ERR_OUT_OF_MEMORY;
        b->sp = sp;
        b->capsp = cap;
    }
    b->sp[b->nsp++] = (frt_text_span){from, to};
    return 0;
}

int jb_put_part(jbuf *b, jval s, size_t from, size_t n)
{
    size_t at = b->n;
    FRT_TRY(jb_put(b, s.s.p + from, n));
    if (!s.s.tn) return 0;
    for (size_t i = first_after(s, from), nr = n_ranges(s); i < nr; i++) {
        frt_text_span r = range_of(s, i);
        if (r.start >= from + n) break;
        size_t lo = r.start > from ? r.start : from, hi = r.end < from + n ? r.end : from + n;
        FRT_TRY(jb_mark(b, at + lo - from, at + hi - from));
    }
    return 0;
}

int jb_put_str(jbuf *b, jval s) { return jb_put_part(b, s, 0, s.s.n); }

/* the ranges SP[0, n) shifted by -BASE as a jtaint of a LEN-byte string */
static int taint_of(jarena *a, const frt_text_span *sp, size_t n, size_t base, size_t len, const jtaint **out)
{
    *out = NULL;
    if (!n) return 0;
    if (n == 1 && sp[0].start == base && sp[0].end == base + len) {
        *out = &jt_whole;
        return 0;
    }
    jtaint *t = ja_alloc(a, sizeof *t + n * sizeof t->r[0]);
    if (!t) return FRT_ERR_OUT_OF_MEMORY;
    t->n = n;
    for (size_t i = 0; i < n; i++) t->r[i] = (frt_text_span){sp[i].start - base, sp[i].end - base};
    *out = t;
    return 0;
}

int jb_taint(jarena *a, const jbuf *b, const jtaint **out) { return taint_of(a, b->sp, b->nsp, 0, b->n, out); }

int jv_sub(jarena *a, jval s, size_t from, size_t n, jval *out)
{
    jval r = jv_str(s.s.p + from, n);
    if (s.s.tn == &jt_whole) {
        r.s.tn = n ? &jt_whole : NULL;
    } else if (s.s.tn) {
        size_t i = first_after(s, from), k = i;
        while (k < s.s.tn->n && s.s.tn->r[k].start < from + n) k++;
        if (k > i) {
            /* clip the first and the last range to the piece */
            frt_text_span tmp[2] = {s.s.tn->r[i], s.s.tn->r[k - 1]};
            if (tmp[0].start < from) tmp[0].start = from;
            if (tmp[1].end > from + n) tmp[1].end = from + n;
            if (k - i == 1) {
                tmp[0].end = tmp[1].end;
                FRT_TRY(taint_of(a, tmp, 1, from, n, &r.s.tn));
            } else {
                jtaint *t = ja_alloc(a, sizeof *t + (k - i) * sizeof t->r[0]);
                if (!t) return FRT_ERR_OUT_OF_MEMORY;
                t->n = k - i;
                for (size_t j = i; j < k; j++) t->r[j - i] = s.s.tn->r[j];
                t->r[0].start = tmp[0].start;
                t->r[k - i - 1].end = tmp[1].end;
                for (size_t j = 0; j < t->n; j++) {
                    t->r[j].start -= from;
                    t->r[j].end -= from;
                }
                r.s.tn = t;
            }
        }
    }
    *out = r;
    return 0;
}

/* ---- UTF-8 ---------------------------------------------------------------- */
int ju_decode(const char *p, size_t n, size_t *pos, uint32_t *cp)
{
    if (*pos >= n) return 0;
    unsigned char c = (unsigned char)p[*pos];
    int l = tok_utf8_len(c);
    if (l <= 0 || *pos + (size_t)l > n) { /* not expected: inputs are validated */
        *cp = c;
        *pos += 1;
        return 1;
    }
    tok_utf8_decode(p + *pos, cp);
    *pos += (size_t)l;
    return 1;
}

size_t ju_count(const char *p, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) != 0x80) c++;
    return c;
}

/* Python str.isspace() for one code point: bidirectional class WS, B or S,
 * or category Zs. */
int jpy_isspace(uint32_t cp)
{
    if (cp < 128) return cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 28 && cp <= 31);
    const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
    return pr->category == UTF8PROC_CATEGORY_ZS || pr->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           pr->bidi_class == UTF8PROC_BIDI_CLASS_B || pr->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

/* Python str.isprintable() for one code point. */
static int py_isprintable(uint32_t cp)
{
    if (cp == ' ') return 1;
    if (cp < 0x20 || cp == 0x7f) return 0;
    if (cp < 0x7f) return 1;
    const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
    switch (pr->category) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return 0;
    default:
        return 1;
    }
}

/* ---- truthiness and equality ---------------------------------------------- */
int jv_truthy(jval v)
{
    switch (v.t) {
    case JT_UNDEF: case JT_NONE: return 0;
    case JT_BOOL: return v.b;
    case JT_INT: return v.i != 0;
    case JT_FLOAT: return v.f != 0.0;
    case JT_STR: return v.s.n != 0;
    case JT_LIST: return v.l->n != 0;
    case JT_DICT: return v.d->ns ? 1 : v.d->n != 0;
    default: return 1;
    }
}

static int is_num(jval v) { return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL; }
static double num_f(jval v) { return v.t == JT_FLOAT ? v.f : v.t == JT_INT ? (double)v.i : (double)v.b; }

static int equal_at(jval a, jval b, int depth);

int jv_equal(jval a, jval b) { return equal_at(a, b, 0); }

/* Values nested deeper than JV_MAX_NEST compare unequal (they can only be
 * built by a template looping on itself; Python would compare them). */
static int equal_at(jval a, jval b, int depth)
{
    if (depth > JV_MAX_NEST) return 0;
    if (is_num(a) && is_num(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT) {
            int64_t x = a.t == JT_INT ? a.i : a.b, y = b.t == JT_INT ? b.i : b.b;
            return x == y;
        }
        return num_f(a) == num_f(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JT_UNDEF: case JT_NONE: return 1;
    case JT_STR: return a.s.n == b.s.n && (a.s.n == 0 || !memcmp(a.s.p, b.s.p, a.s.n));
    case JT_LIST:
        if (a.l->n != b.l->n || a.l->tuple != b.l->tuple) return 0;
        for (size_t i = 0; i < a.l->n; i++)
            if (!equal_at(a.l->v[i], b.l->v[i], depth + 1)) return 0;
        return 1;
    case JT_DICT:
        if (a.d->ns || b.d->ns) return a.d == b.d;
        if (a.d->n != b.d->n) return 0;
        for (size_t i = 0; i < a.d->n; i++) {
            jval *o = jd_get(b.d, a.d->k[i]);
            if (!o || !equal_at(a.d->v[i], *o, depth + 1)) return 0;
        }
        return 1;
    case JT_MACRO: return a.m == b.m;
    case JT_FUNC: return a.fn == b.fn;
    default: return 0;
    }
}

/* ---- dict / list ---------------------------------------------------------- */
jdict *jd_new(jarena *a, size_t cap)
{
    jdict *d = ja_alloc(a, sizeof *d);
    if (!d) return NULL;
    if (cap) {
        d->k = ja_alloc(a, cap * sizeof *d->k);
        d->v = ja_alloc(a, cap * sizeof *d->v);
        if (!d->k || !d->v) return NULL;
        d->cap = cap;
    }
    return d;
}

jval *jd_get(const jdict *d, jval key)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], key)) return &d->v[i];
    return NULL;
}

jval *jd_get_str(const jdict *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JT_STR && d->k[i].s.n == n && !memcmp(d->k[i].s.p, key, n)) return &d->v[i];
    return NULL;
}

int jd_set(jarena *a, jdict *d, jval key, jval val)
{
    jval *o = jd_get(d, key);
    if (o) {
        *o = val;
        return 0;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jval *k = ja_alloc(a, cap * sizeof *k), *v = ja_alloc(a, cap * sizeof *v);
        if (!k || !v) return FRT_ERR_OUT_OF_MEMORY;
        if (d->n) {
            memcpy(k, d->k, d->n * sizeof *k);
            memcpy(v, d->v, d->n * sizeof *v);
        }
        d->k = k;
        d->v = v;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n] = val;
    d->n++;
    return 0;
}

jlist *jl_new(jarena *a, size_t n)
{
    jlist *l = ja_alloc(a, sizeof *l);
    if (!l) return NULL;
    if (n) {
        l->v = ja_alloc(a, n * sizeof *l->v);
        if (!l->v) return NULL;
    }
    l->n = n;
    return l;
}

/* MODE 0: plain; 1: every string and key marked; 2: marked, but an item
 * object's "role" member is not (the list of messages); 3: an object of
 * that list */
static int from_json(jarena *a, const json_t *j, int mode, jval *out);

int jv_from_json(jarena *a, const json_t *j, jval *out) { return from_json(a, j, 0, out); }
int jv_from_json_content(jarena *a, const json_t *j, jval *out) { return from_json(a, j, 2, out); }

static jval json_string_val(const char *p, size_t n, int marked)
{
    jval v = jv_str(p, n);
    if (marked && n) v.s.tn = &jt_whole;
    return v;
}

static int from_json(jarena *a, const json_t *j, int mode, jval *out)
{
    switch (json_typeof(j)) {
    case JSON_NULL: *out = jv_none(); return 0;
    case JSON_TRUE: *out = jv_bool(1); return 0;
    case JSON_FALSE: *out = jv_bool(0); return 0;
    case JSON_INTEGER: *out = jv_int((int64_t)json_integer_value(j)); return 0;
    case JSON_REAL: *out = jv_float(json_real_value(j)); return 0;
    case JSON_STRING: *out = json_string_val(json_string_value(j), json_string_length(j), mode != 0); return 0;
    case JSON_ARRAY: {
        jlist *l = jl_new(a, json_array_size(j));
        if (!l) return FRT_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; i < l->n; i++) FRT_TRY(from_json(a, json_array_get(j, i), mode == 2 ? 3 : mode ? 1 : 0, &l->v[i]));
        out->t = JT_LIST;
        out->l = l;
        return 0;
    }
    case JSON_OBJECT: {
        jdict *d = jd_new(a, json_object_size(j));
        if (!d) return FRT_ERR_OUT_OF_MEMORY;
        const char *k;
        size_t kn;
        json_t *v;
        json_object_keylen_foreach((json_t *)j, k, kn, v) {
            jval jv;
            int role = mode == 3 && kn == 4 && !memcmp(k, "role", 4);
            FRT_TRY(from_json(a, v, role ? 0 : mode ? 1 : 0, &jv));
            d->k[d->n] = json_string_val(k, kn, mode != 0);
            d->v[d->n] = jv;
            d->n++;
        }
        out->t = JT_DICT;
        out->safe = 0;
        out->d = d;
        return 0;
    }
    }
    return FRT_ERR_INVALID_ARGUMENT;
}

/* ---- Python text forms ------------------------------------------------------ */
void jv_float_repr(double f, char out[40])
{
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest %.*e that reads back as f (Python's repr: dtoa mode 0) */
    char e[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e: [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, neg = 0;
    const char *s = e;
    if (*s == '-') {
        neg = 1;
        s++;
    }
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') digits[nd++] = *s;
    int exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    char *o = out;
    if (neg) *o++ = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -exp10 - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        } else {
            for (int i = 0; i <= exp10; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp10 + 1)
                for (int i = exp10 + 1; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        }
        *o = '\0';
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

const char *jv_type_name(jval v)
{
    switch (v.t) {
    case JT_UNDEF: return "Undefined";
    case JT_NONE: return "NoneType";
    case JT_BOOL: return "bool";
    case JT_INT: return "int";
    case JT_FLOAT: return "float";
    case JT_STR: return "str";
    case JT_LIST: return v.l->tuple ? "tuple" : "list";
    case JT_DICT: return v.d->ns ? "Namespace" : "dict";
    case JT_MACRO: return "Macro";
    default: return "builtin_function_or_method";
    }
}

/* Appends S[at, end) as ESC, marked when S[at, end) is. */
static int put_escape(jbuf *b, jval s, size_t at, size_t end, const char *esc)
{
    size_t o = b->n;
    FRT_TRY(jb_put(b, esc, strlen(esc)));
    return jt_any(s, at, end - at) ? jb_mark(b, o, b->n) : 0;
}

static int str_repr(jbuf *b, jval sv)
{
    const char *p = sv.s.p;
    size_t n = sv.s.n;
    int has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    FRT_TRY(jb_putc(b, q));
    size_t i = 0, start = 0;
    uint32_t cp;
    while (i < n) {
        size_t at = i;
        ju_decode(p, n, &i, &cp);
        const char *esc = NULL;
        char tmp[16];
        if (cp == (uint32_t)q || cp == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)cp;
            tmp[2] = '\0';
            esc = tmp;
        } else if (cp == '\n') esc = "\\n";
        else if (cp == '\r') esc = "\\r";
        else if (cp == '\t') esc = "\\t";
        else if (!py_isprintable(cp)) {
            if (cp < 0x100) snprintf(tmp, sizeof tmp, "\\x%02x", cp);
            else if (cp < 0x10000) snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            else snprintf(tmp, sizeof tmp, "\\U%08x", cp);
            esc = tmp;
        }
        if (esc) {
            FRT_TRY(jb_put_part(b, sv, start, at - start));
            FRT_TRY(put_escape(b, sv, at, i, esc));
            start = i;
        }
    }
    FRT_TRY(jb_put_part(b, sv, start, n - start));
    return jb_putc(b, q);
}

static int repr_or_str(jbuf *b, jval v, int repr, int depth)
{
    char tmp[48];
    if (depth > JV_MAX_NEST) return frt_error(FRT_ERR_OUT_OF_RANGE, "chat template: a value nested deeper than %d",
                                             JV_MAX_NEST);
    switch (v.t) {
    case JT_UNDEF: return repr ? jb_put(b, "Undefined", 9) : 0;
    case JT_NONE: return jb_put(b, "None", 4);
    case JT_BOOL: return v.b ? jb_put(b, "True", 4) : jb_put(b, "False", 5);
    case JT_INT: return jb_printf(b, "%lld", (long long)v.i);
    case JT_FLOAT: jv_float_repr(v.f, tmp); return jb_put(b, tmp, strlen(tmp));
    case JT_STR:
        if (!repr) return jb_put_str(b, v);
        if (v.safe) {
            FRT_TRY(jb_put(b, "Markup(", 7));
            FRT_TRY(str_repr(b, v));
            return jb_putc(b, ')');
        }
        return str_repr(b, v);
    case JT_LIST:
        FRT_TRY(jb_putc(b, v.l->tuple ? '(' : '['));
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) FRT_TRY(jb_put(b, ", ", 2));
            FRT_TRY(repr_or_str(b, v.l->v[i], 1, depth + 1));
        }
        if (v.l->tuple && v.l->n == 1) FRT_TRY(jb_putc(b, ','));
        return jb_putc(b, v.l->tuple ? ')' : ']');
    case JT_DICT:
        if (v.d->ns) FRT_TRY(jb_put(b, "<Namespace ", 11));
        FRT_TRY(jb_putc(b, '{'));
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) FRT_TRY(jb_put(b, ", ", 2));
            FRT_TRY(repr_or_str(b, v.d->k[i], 1, depth + 1));
            FRT_TRY(jb_put(b, ": ", 2));
            FRT_TRY(repr_or_str(b, v.d->v[i], 1, depth + 1));
        }
        FRT_TRY(jb_putc(b, '}'));
        return v.d->ns ? jb_putc(b, '>') : 0;
    case JT_MACRO: return jb_printf(b, "<Macro '%s'>", v.m->name ? v.m->name : "caller");
    default: return jb_printf(b, "<built-in method %s>", v.fn->name ? v.fn->name : "?");
    }
}

int jv_str_append(jbuf *b, jval v) { return repr_or_str(b, v, 0, 0); }
int jv_repr_append(jbuf *b, jval v) { return repr_or_str(b, v, 1, 0); }

/* ---- json.dumps ------------------------------------------------------------- */
static int json_str(jbuf *b, jval sv, int ensure_ascii)
{
    const char *p = sv.s.p;
    size_t n = sv.s.n;
    FRT_TRY(jb_putc(b, '"'));
    size_t i = 0, start = 0;
    uint32_t cp;
    while (i < n) {
        size_t at = i;
        ju_decode(p, n, &i, &cp);
        char tmp[16];
        const char *esc = NULL;
        switch (cp) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (cp < 0x20 || (ensure_ascii && cp > 0x7e)) {
                if (cp >= 0x10000) {
                    uint32_t c = cp - 0x10000;
                    snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 | (c >> 10), 0xDC00 | (c & 0x3FF));
                } else {
                    snprintf(tmp, sizeof tmp, "\\u%04x", cp);
                }
                esc = tmp;
            }
        }
        if (esc) {
            FRT_TRY(jb_put_part(b, sv, start, at - start));
            FRT_TRY(put_escape(b, sv, at, i, esc));
            start = i;
        }
    }
    FRT_TRY(jb_put_part(b, sv, start, n - start));
    return jb_putc(b, '"');
}

static int json_newline(jbuf *b, const jjson_opts *o, int level)
{
    FRT_TRY(jb_putc(b, '\n'));
    for (int i = 0; i < level; i++) FRT_TRY(jb_put(b, o->indent, o->indent_n));
    return 0;
}

static int key_cmp_str(jval a, jval b)
{
    size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
    int c = n ? memcmp(a.s.p, b.s.p, n) : 0;
    return c ? c : (a.s.n > b.s.n) - (a.s.n < b.s.n);
}

/* json.dumps turns keys into strings: str as is, int / float / bool / None
 * as their JSON text. */
static int json_key(jbuf *tmp, jval k)
{
    char f[48];
    switch (k.t) {
    case JT_STR: return jb_put(tmp, k.s.p, k.s.n);
    case JT_INT: return jb_printf(tmp, "%lld", (long long)k.i);
    case JT_FLOAT:
        if (isnan(k.f)) return jb_put(tmp, "NaN", 3);
        if (isinf(k.f)) return k.f < 0 ? jb_put(tmp, "-Infinity", 9) : jb_put(tmp, "Infinity", 8);
        jv_float_repr(k.f, f);
        return jb_put(tmp, f, strlen(f));
    case JT_BOOL: return k.b ? jb_put(tmp, "true", 4) : jb_put(tmp, "false", 5);
    case JT_NONE: return jb_put(tmp, "null", 4);
    default:
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "tojson: keys must be str, int, float, bool or None, not %s",
                         jv_type_name(k));
    }
}

int jv_tojson_append(jbuf *b, jval v, const jjson_opts *o, int level)
{
    if (level > JV_MAX_NEST) return frt_error(FRT_ERR_OUT_OF_RANGE, "tojson: nesting deeper than %d", JV_MAX_NEST);
    char f[48];
    switch (v.t) {
    case JT_NONE: return jb_put(b, "null", 4);
    case JT_BOOL: return v.b ? jb_put(b, "true", 4) : jb_put(b, "false", 5);
    case JT_INT: return jb_printf(b, "%lld", (long long)v.i);
    case JT_FLOAT:
        if (isnan(v.f)) return jb_put(b, "NaN", 3);
        if (isinf(v.f)) return v.f < 0 ? jb_put(b, "-Infinity", 9) : jb_put(b, "Infinity", 8);
        jv_float_repr(v.f, f);
        return jb_put(b, f, strlen(f));
    case JT_STR: return json_str(b, v, o->ensure_ascii);
    case JT_LIST:
        if (!v.l->n) return jb_put(b, "[]", 2);
        FRT_TRY(jb_putc(b, '['));
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) FRT_TRY(jb_put(b, o->item_sep, o->item_sep_n));
            if (o->has_indent) FRT_TRY(json_newline(b, o, level + 1));
            FRT_TRY(jv_tojson_append(b, v.l->v[i], o, level + 1));
        }
        if (o->has_indent) FRT_TRY(json_newline(b, o, level));
        return jb_putc(b, ']');
    case JT_DICT: {
        if (v.d->ns) break;
        if (!v.d->n) return jb_put(b, "{}", 2);
        size_t n = v.d->n;
        size_t *order = malloc(n * sizeof *order);
        jval *keys = malloc(n * sizeof *keys);
        jbuf kb = {0};
        int rc = order && keys ? 0 : FRT_ERR_OUT_OF_MEMORY;
        /* key strings, concatenated in kb; keys[i] points into it afterwards */
        size_t *off = rc ? NULL : malloc((n + 1) * sizeof *off);
        if (!rc && !off) rc = FRT_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; !rc && i < n; i++) {
            off[i] = kb.n;
            rc = json_key(&kb, v.d->k[i]);
        }
        if (!rc) {
            off[n] = kb.n;
            for (size_t i = 0; i < n; i++) { /* str keys as they are (with their marks) */
                keys[i] = v.d->k[i].t == JT_STR ? v.d->k[i] : jv_str(kb.p ? kb.p + off[i] : "", off[i + 1] - off[i]);
                order[i] = i;
            }
            if (o->sort_keys) /* insertion sort: stable, n is small */
                for (size_t i = 1; i < n; i++) {
                    size_t x = order[i], j = i;
                    while (j > 0 && key_cmp_str(keys[order[j - 1]], keys[x]) > 0) {
                        order[j] = order[j - 1];
                        j--;
                    }
                    order[j] = x;
                }
            rc = jb_putc(b, '{');
        }
        for (size_t i = 0; !rc && i < n; i++) {
            if (i) rc = jb_put(b, o->item_sep, o->item_sep_n);
            if (!rc && o->has_indent) rc = json_newline(b, o, level + 1);
            if (!rc) rc = json_str(b, keys[order[i]], o->ensure_ascii);
            if (!rc) rc = jb_put(b, o->key_sep, o->key_sep_n);
            if (!rc) rc = jv_tojson_append(b, v.d->v[order[i]], o, level + 1);
        }
        if (!rc && o->has_indent) rc = json_newline(b, o, level);
        if (!rc) rc = jb_putc(b, '}');
        free(order);
        free(keys);
        free(off);
        jb_free(&kb);
        return rc;
    }
    default: break;
    }
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "tojson: Object of type %s is not JSON serializable", jv_type_name(v));
}
