/* jinja_eval.c - rendering a parsed template (text/jinja.h).
 *
 * Semantics follow Jinja2 3.1 (runtime.py, sandbox.py, filters.py, tests.py)
 * as configured by transformers: default Undefined (prints as nothing, is
 * false, iterates as empty, fails on attribute access and arithmetic), the
 * immutable sandbox (methods that modify lists / dicts are unreachable),
 * autoescape off, Python's operators on JSON values. Scopes: a for loop
 * iteration, a macro call and a caller() call open a scope; {% if %} does not;
 * assignments go to the innermost scope (so a {% set %} inside a loop does not
 * survive the iteration, which is why templates use namespace()).
 *
 * Everything a render allocates lives in one arena with a byte limit; output
 * size, evaluation steps and macro nesting have limits too (jinja.h).
 *
 * Provenance (frt_jinja_render_ex): strings from the content variables carry
 * marked byte ranges (jinja_internal.h, jtaint); every function here that
 * builds a string copies the marks of the bytes it copies (jb_put_part,
 * sub_str) or marks what it derives from a marked character (map_case,
 * html_escape), and buf_str keeps a buffer's marks in the new string. */
#include "text/jinja_internal.h"
#include "text/tok_internal.h"
#include "util/error.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <utf8proc.h>

typedef struct jscope {
    struct jscope *parent;
    jdict *vars;
} jscope;

enum { JF_RANGE = 1, JF_DICT, JF_NAMESPACE, JF_RAISE, JF_STRFTIME, JF_CYCLE, JF_METHOD, JF_UNSUPPORTED };

/* the loop variable: a dict of loop.* values, refreshed each iteration */
typedef struct ctx {
    jarena *a;
    jscope *root;
    const jdict *globals;
    size_t steps;
    frt_jinja_limits lim;
    int depth;
    int frames;        /* nested eval / exec calls (the C stack) */
    int ctl;           /* 1: break, 2: continue pending */
    jval placeholder;  /* the operand of {% filter %} / {% set x | f %} chains */
} ctx;

/* ---- errors --------------------------------------------------------------------- */
static int rt_err(const jnode *x, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rt_err(const jnode *x, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (x) return frt_error(status, "chat template: line %d, column %d: %s", x->line, x->col, msg);
    return frt_error(status, "chat template: %s", msg);
}

static int oom(void) { return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory"); }

static int mem_err(ctx *c)
{
    if (c->a->over)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "chat template: the render needs more than %zu bytes of memory "
                         "(limit max_memory)", c->lim.max_memory);
    return oom();
}

static int step(ctx *c, const jnode *x)
{
    if (++c->steps > c->lim.max_steps)
        return rt_err(x, FRT_ERR_OUT_OF_RANGE, "more than %zu evaluation steps (limit max_steps)", c->lim.max_steps);
    return 0;
}

static int buf_err(ctx *c, jbuf *b, int rc)
{
    if (b->over)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "chat template: the output exceeds %zu bytes (limit max_output)",
                         c->lim.max_output);
    return rc == FRT_ERR_OUT_OF_MEMORY ? oom() : rc;
}

static int undef_err(const jnode *x, jval v)
{
    if (v.undef_name) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "'%s' is undefined", v.undef_name);
    return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "a value is undefined");
}

/* ---- small value helpers ------------------------------------------------------------ */
static int new_str(ctx *c, const char *p, size_t n, jval *out)
{
    char *s = ja_strdup(c->a, p, n);
    if (!s) return mem_err(c);
    *out = jv_str(s, n);
    return 0;
}

/* the text of B with its marks, into the arena */
static int buf_str(ctx *c, const jbuf *b, jval *out)
{
    FRT_TRY(new_str(c, b->p ? b->p : "", b->n, out));
    return jb_taint(c->a, b, &out->s.tn) ? mem_err(c) : 0;
}

/* S[from, from + n) with its marks */
static int sub_str(ctx *c, jval s, size_t from, size_t n, jval *out)
{
    return jv_sub(c->a, s, from, n, out) ? mem_err(c) : 0;
}

/* str(v) into the arena */
static int to_str(ctx *c, jval v, jval *out)
{
    if (v.t == JT_STR) {
        *out = v;
        return 0;
    }
    jbuf b = {0};
    int rc = jv_str_append(&b, v);
    if (!rc) rc = buf_str(c, &b, out);
    jb_free(&b);
    return rc == FRT_ERR_OUT_OF_MEMORY ? oom() : rc;
}

static int make_list(ctx *c, size_t n, jval *out)
{
    if (n > ((size_t)1 << 40) / sizeof(jval)) {
        c->a->over = 1;
        return mem_err(c);
    }
    jlist *l = jl_new(c->a, n);
    if (!l) return mem_err(c);
    out->t = JT_LIST;
    out->safe = 0;
    out->l = l;
    return 0;
}

static int make_func(ctx *c, int id, jval self, const char *name, jval *out)
{
    jfunc *f = ja_alloc(c->a, sizeof *f);
    if (!f) return mem_err(c);
    f->id = id;
    f->self = self;
    f->name = name;
    out->t = JT_FUNC;
    out->fn = f;
    return 0;
}

static int is_str(jval v) { return v.t == JT_STR; }
static int is_digit_c(char ch) { return ch >= '0' && ch <= '9'; }
static int is_int(jval v) { return v.t == JT_INT || v.t == JT_BOOL; }
static int64_t int_of(jval v) { return v.t == JT_INT ? v.i : v.b; }
static int is_numv(jval v) { return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL; }
static double f_of(jval v) { return v.t == JT_FLOAT ? v.f : (double)int_of(v); }
static int streq(jval v, const char *s) { return v.t == JT_STR && v.s.n == strlen(s) && !memcmp(v.s.p, s, v.s.n); }

/* The items of an iterable as Python iterates them: list / tuple items,
 * dict keys, string characters; undefined iterates as empty. */
static int iterate(ctx *c, const jnode *x, jval v, jlist **out)
{
    static jlist empty;
    switch (v.t) {
    case JT_UNDEF: *out = &empty; return 0;
    case JT_LIST: *out = v.l; return 0;
    case JT_DICT: {
        if (v.d->ns) break;
        jval l = {0};
        FRT_TRY(make_list(c, v.d->n, &l));
        for (size_t i = 0; i < v.d->n; i++) l.l->v[i] = v.d->k[i];
        *out = l.l;
        return 0;
    }
    case JT_STR: {
        size_t n = ju_count(v.s.p, v.s.n), pos = 0;
        jval l = {0};
        FRT_TRY(make_list(c, n, &l));
        for (size_t i = 0; i < n; i++) {
            size_t at = pos;
            uint32_t cp;
            ju_decode(v.s.p, v.s.n, &pos, &cp);
            FRT_TRY(sub_str(c, v, at, pos - at, &l.l->v[i]));
        }
        *out = l.l;
        return 0;
    }
    default: break;
    }
    return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "'%s' object is not iterable", jv_type_name(v));
}

/* ---- Python string helpers ---------------------------------------------------------- */
typedef struct sspan {
    const char *p;
    size_t n;
} sspan;

static int in_chars(uint32_t cp, jval chars)
{
    size_t pos = 0;
    uint32_t c2;
    while (ju_decode(chars.s.p, chars.s.n, &pos, &c2))
        if (c2 == cp) return 1;
    return 0;
}

/* str.strip / lstrip / rstrip; CHARS JT_STR or not (white space) */
static sspan py_strip(sspan s, int left, int right, jval chars)
{
    int ws = chars.t != JT_STR;
    if (left)
        while (s.n) {
            size_t pos = 0;
            uint32_t cp;
            ju_decode(s.p, s.n, &pos, &cp);
            if (ws ? !jpy_isspace(cp) : !in_chars(cp, chars)) break;
            s.p += pos;
            s.n -= pos;
        }
    if (right)
        while (s.n) {
            size_t i = s.n - 1;
            while (i > 0 && ((unsigned char)s.p[i] & 0xC0) == 0x80) i--;
            size_t pos = i;
            uint32_t cp;
            ju_decode(s.p, s.n, &pos, &cp);
            if (ws ? !jpy_isspace(cp) : !in_chars(cp, chars)) break;
            s.n = i;
        }
    return s;
}

static const char *find_sub(sspan s, sspan sub, size_t from)
{
    if (sub.n == 0) return s.p + from;
    for (size_t i = from; i + sub.n <= s.n; i++)
        if (!memcmp(s.p + i, sub.p, sub.n)) return s.p + i;
    return NULL;
}

/* the case mapping of SV; each output character keeps the mark of its
 * input character */
static int map_case(ctx *c, jval sv, int mode /* 0 upper, 1 lower, 2 capitalize, 3 jinja title, 4 py title */,
                    jval *out)
{
    jbuf b = {0};
    sspan s = {sv.s.p, sv.s.n};
    size_t pos = 0, at = 0;
    uint32_t cp;
    int rc = 0, first = 1, prev_boundary = 1, prev_cased = 0;
    while (!rc && (at = pos, ju_decode(s.p, s.n, &pos, &cp))) {
        uint32_t r;
        if (mode == 0) r = (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp);
        else if (mode == 1) r = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
        else if (mode == 2) r = first ? (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp) : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
        else if (mode == 3) {
            int boundary = cp == '-' || jpy_isspace(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            r = prev_boundary && !boundary ? (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp)
                                           : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
            prev_boundary = boundary;
        } else {
            const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
            int cased = pr->category == UTF8PROC_CATEGORY_LU || pr->category == UTF8PROC_CATEGORY_LL ||
                        pr->category == UTF8PROC_CATEGORY_LT;
            r = cased ? (prev_cased ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp)
                                    : (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp))
                      : cp;
            prev_cased = cased;
        }
        first = 0;
        char u[4];
        int l = tok_utf8_encode(r, u);
        size_t o = b.n;
        rc = jb_put(&b, u, (size_t)l);
        if (!rc && jt_any(sv, at, pos - at)) rc = jb_mark(&b, o, b.n);
    }
    if (!rc) rc = buf_str(c, &b, out);
    jb_free(&b);
    return rc;
}

/* str.split(sep, maxsplit) (RIGHT: rsplit); sep JT_STR or None */
static int py_split(ctx *c, const jnode *x, jval self, jval sep, int64_t maxsplit, int right, jval *out)
{
    sspan s = {self.s.p, self.s.n};
    size_t cap = 8, n = 0;
    sspan *v = malloc(cap * sizeof *v);
    if (!v) return oom();
    int rc = 0;
#define PUSH(pp, nn)                                                             \
    do {                                                                         \
        if (n == cap) {                                                          \
            cap *= 2;                                                            \
            sspan *nv_ = realloc(v, cap * sizeof *v);                            \
            if (!nv_) { rc = oom(); goto out; }                                  \
            v = nv_;                                                             \
        }                                                                        \
        v[n].p = (pp);                                                           \
        v[n].n = (nn);                                                           \
        n++;                                                                     \
    } while (0)
    if (sep.t == JT_STR) {
        if (sep.s.n == 0) {
            free(v);
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "split: empty separator");
        }
        sspan ss = {sep.s.p, sep.s.n};
        if (!right) {
            size_t from = 0;
            int64_t k = 0;
            for (;;) {
                const char *f = (maxsplit < 0 || k < maxsplit) ? find_sub((sspan){s.p, s.n}, ss, from) : NULL;
                if (!f) {
                    PUSH(s.p + from, s.n - from);
                    break;
                }
                PUSH(s.p + from, (size_t)(f - s.p) - from);
                from = (size_t)(f - s.p) + ss.n;
                k++;
            }
        } else {
            size_t end = s.n;
            int64_t k = 0;
            for (;;) {
                const char *f = NULL;
                if (maxsplit < 0 || k < maxsplit)
                    for (size_t i = end >= ss.n ? end - ss.n + 1 : 0; i-- > 0;)
                        if (!memcmp(s.p + i, ss.p, ss.n)) {
                            f = s.p + i;
                            break;
                        }
                if (!f) {
                    PUSH(s.p, end);
                    break;
                }
                size_t at = (size_t)(f - s.p);
                PUSH(s.p + at + ss.n, end - at - ss.n);
                end = at;
                k++;
            }
            for (size_t i = 0; i < n / 2; i++) {
                sspan t = v[i];
                v[i] = v[n - 1 - i];
                v[n - 1 - i] = t;
            }
        }
    } else {
        /* runs of white space; no empty strings */
        if (!right) {
            size_t pos = 0;
            int64_t k = 0;
            for (;;) {
                uint32_t cp;
                size_t at = pos;
                while (at < s.n) {
                    size_t q = at;
                    ju_decode(s.p, s.n, &q, &cp);
                    if (!jpy_isspace(cp)) break;
                    at = q;
                }
                if (at >= s.n) break;
                if (maxsplit >= 0 && k >= maxsplit) {
                    sspan rest = py_strip((sspan){s.p + at, s.n - at}, 0, 1, jv_none());
                    PUSH(rest.p, rest.n);
                    break;
                }
                size_t e = at;
                while (e < s.n) {
                    size_t q = e;
                    ju_decode(s.p, s.n, &q, &cp);
                    if (jpy_isspace(cp)) break;
                    e = q;
                }
                PUSH(s.p + at, e - at);
                k++;
                pos = e;
            }
        } else {
            sspan rest = py_strip(s, 0, 1, jv_none());
            int64_t k = 0;
            while (rest.n) {
                if (maxsplit >= 0 && k >= maxsplit) {
                    PUSH(rest.p, rest.n);
                    break;
                }
                size_t e = rest.n;
                size_t b = e;
                while (b > 0) {
                    size_t i = b - 1;
                    while (i > 0 && ((unsigned char)rest.p[i] & 0xC0) == 0x80) i--;
                    size_t q = i;
                    uint32_t cp;
                    ju_decode(rest.p, rest.n, &q, &cp);
                    if (jpy_isspace(cp)) break;
                    b = i;
                }
                PUSH(rest.p + b, e - b);
                k++;
                rest.n = b;
                rest = py_strip(rest, 0, 1, jv_none());
            }
            for (size_t i = 0; i < n / 2; i++) {
                sspan t = v[i];
                v[i] = v[n - 1 - i];
                v[n - 1 - i] = t;
            }
        }
    }
    rc = make_list(c, n, out);
    if (!rc)
        for (size_t i = 0; !rc && i < n; i++) rc = sub_str(c, self, (size_t)(v[i].p - s.p), v[i].n, &out->l->v[i]);
out:
    free(v);
    return rc;
#undef PUSH
}

/* str.replace(old, new, count) */
static int py_replace(ctx *c, jval sv, jval oldv, jval nwv, int64_t count, jval *out)
{
    sspan s = {sv.s.p, sv.s.n}, old = {oldv.s.p, oldv.s.n};
    jbuf b = {0};
    int rc = 0;
    int64_t k = 0;
    if (old.n == 0) {
        /* insert NEW before every character and at the end */
        size_t pos = 0;
        uint32_t cp;
        for (;;) {
            if (count >= 0 && k >= count) {
                rc = jb_put_part(&b, sv, pos, s.n - pos);
                break;
            }
            if ((rc = jb_put_str(&b, nwv))) break;
            k++;
            size_t at = pos;
            if (!ju_decode(s.p, s.n, &pos, &cp)) break;
            if ((rc = jb_put_part(&b, sv, at, pos - at))) break;
        }
    } else {
        size_t from = 0;
        for (;;) {
            const char *f = (count < 0 || k < count) ? find_sub(s, old, from) : NULL;
            if (!f) {
                rc = jb_put_part(&b, sv, from, s.n - from);
                break;
            }
            if ((rc = jb_put_part(&b, sv, from, (size_t)(f - s.p) - from))) break;
            if ((rc = jb_put_str(&b, nwv))) break;
            from = (size_t)(f - s.p) + old.n;
            k++;
        }
    }
    if (!rc) rc = buf_str(c, &b, out);
    jb_free(&b);
    return rc == FRT_ERR_OUT_OF_MEMORY ? mem_err(c) : rc;
}

/* HTML escape (markupsafe.escape) */
static int html_escape(ctx *c, jval v, jval *out)
{
    if (v.t == JT_STR && v.safe) {
        *out = v;
        return 0;
    }
    jval s;
    FRT_TRY(to_str(c, v, &s));
    jbuf b = {0};
    int rc = 0;
    for (size_t i = 0; !rc && i < s.s.n; i++) {
        char ch = s.s.p[i];
        size_t o = b.n;
        switch (ch) {
        case '&': rc = jb_put(&b, "&amp;", 5); break;
        case '<': rc = jb_put(&b, "&lt;", 4); break;
        case '>': rc = jb_put(&b, "&gt;", 4); break;
        case '"': rc = jb_put(&b, "&#34;", 5); break;
        case '\'': rc = jb_put(&b, "&#39;", 5); break;
        default: rc = jb_putc(&b, ch);
        }
        if (!rc && jt_any(s, i, 1)) rc = jb_mark(&b, o, b.n);
    }
    if (!rc) rc = buf_str(c, &b, out);
    jb_free(&b);
    if (!rc) out->safe = 1;
    return rc;
}

/* str.splitlines() */
static int is_line_break(uint32_t cp)
{
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
           cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

static int py_splitlines(ctx *c, jval sv, jval *out)
{
    sspan s = {sv.s.p, sv.s.n};
    size_t n = 0, pos = 0, start = 0;
    uint32_t cp;
    /* count */
    for (pos = 0, start = 0; pos < s.n;) {
        size_t at = pos;
        ju_decode(s.p, s.n, &pos, &cp);
        if (is_line_break(cp)) {
            if (cp == '\r' && pos < s.n && s.p[pos] == '\n') pos++;
            n++;
            start = pos;
            (void)at;
        }
    }
    if (start < s.n) n++;
    FRT_TRY(make_list(c, n, out));
    size_t k = 0;
    for (pos = 0, start = 0; pos < s.n;) {
        size_t at = pos;
        ju_decode(s.p, s.n, &pos, &cp);
        if (is_line_break(cp)) {
            FRT_TRY(sub_str(c, sv, start, at - start, &out->l->v[k++]));
            if (cp == '\r' && pos < s.n && s.p[pos] == '\n') pos++;
            start = pos;
        }
    }
    if (start < s.n) FRT_TRY(sub_str(c, sv, start, s.n - start, &out->l->v[k++]));
    return 0;
}

/* ---- attribute and item access ------------------------------------------------------ */
static const char *const str_methods[] = {
    "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "upper", "lower", "title",
    "capitalize", "replace", "find", "rfind", "count", "join", "splitlines", "isdigit", "isalpha", "isalnum",
    "isspace", "islower", "isupper", "removeprefix", "removesuffix", "index", "rindex", "casefold", "swapcase",
    "center", "ljust", "rjust", "zfill", "expandtabs", "format", "format_map", "partition", "rpartition",
    "encode", "isdecimal", "isnumeric", "isidentifier", "isprintable", "istitle", "isascii", "translate",
    "maketrans", NULL,
};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "copy", NULL};
static const char *const dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", "fromkeys", NULL};
static const char *const list_methods[] = {"index", "count", "copy", NULL};
static const char *const list_unsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", NULL};

static const char *in_names(const char *const *names, const char *s, size_t n)
{
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) return names[i];
    return NULL;
}

/* environment.getattr(obj, name): the Python attribute, else obj[name], else
 * undefined. */
static int get_attr(ctx *c, const jnode *x, jval obj, const char *name, size_t nn, jval *out)
{
    const char *m;
    switch (obj.t) {
    case JT_UNDEF: return undef_err(x, obj);
    case JT_DICT:
        if (obj.d->ns) {
            jval *v = jd_get_str(obj.d, name, nn);
            *out = v ? *v : jv_undef(NULL);
            return 0;
        }
        if ((m = in_names(dict_methods, name, nn))) return make_func(c, JF_METHOD, obj, m, out);
        if (in_names(dict_unsafe, name, nn)) {
            *out = jv_undef(NULL);
            return 0;
        }
        {
            jval *v = jd_get_str(obj.d, name, nn);
            if (v) {
                *out = *v;
                return 0;
            }
        }
        break;
    case JT_STR:
        if ((m = in_names(str_methods, name, nn))) return make_func(c, JF_METHOD, obj, m, out);
        break;
    case JT_LIST:
        if ((m = in_names(list_methods, name, nn))) return make_func(c, JF_METHOD, obj, m, out);
        if (in_names(list_unsafe, name, nn)) {
            *out = jv_undef(NULL);
            return 0;
        }
        break;
    default: break;
    }
    char *nm = ja_strdup(c->a, name, nn);
    if (!nm) return mem_err(c);
    *out = jv_undef(nm);
    return 0;
}

static int get_item(ctx *c, const jnode *x, jval obj, jval key, jval *out)
{
    switch (obj.t) {
    case JT_UNDEF: return undef_err(x, obj);
    case JT_DICT:
        if (!obj.d->ns) {
            jval *v = jd_get(obj.d, key);
            if (v) {
                *out = *v;
                return 0;
            }
        }
        break;
    case JT_LIST:
        if (is_int(key)) {
            int64_t i = int_of(key), n = (int64_t)obj.l->n;
            if (i < 0) i += n;
            *out = i >= 0 && i < n ? obj.l->v[i] : jv_undef(NULL);
            return 0;
        }
        break;
    case JT_STR:
        if (is_int(key)) {
            int64_t i = int_of(key), n = (int64_t)ju_count(obj.s.p, obj.s.n);
            if (i < 0) i += n;
            if (i < 0 || i >= n) {
                *out = jv_undef(NULL);
                return 0;
            }
            size_t pos = 0;
            uint32_t cp;
            for (int64_t k = 0; k < i; k++) ju_decode(obj.s.p, obj.s.n, &pos, &cp);
            size_t at = pos;
            ju_decode(obj.s.p, obj.s.n, &pos, &cp);
            return sub_str(c, obj, at, pos - at, out);
        }
        break;
    default: break;
    }
    if (key.t == JT_STR) return get_attr(c, x, obj, key.s.p, key.s.n, out);
    *out = jv_undef(NULL);
    return 0;
}

/* Python slice indices (PySlice_AdjustIndices). As Jinja's getitem does, a
 * slice Python refuses with a TypeError (bad bounds, an object that is not
 * a sequence) gives undefined. */
static int slice_value(ctx *c, const jnode *x, jval obj, jval start, jval stop, jval stepv, jval *out)
{
    int64_t st = 1;
    if (obj.t == JT_UNDEF) return undef_err(x, obj);
    jval bnd[3] = {start, stop, stepv};
    for (int k = 0; k < 3; k++)
        if ((obj.t != JT_LIST && obj.t != JT_STR) || (bnd[k].t != JT_NONE && bnd[k].t != JT_UNDEF && !is_int(bnd[k]))) {
            *out = jv_undef(NULL);
            return 0;
        }
    if (stepv.t != JT_NONE && stepv.t != JT_UNDEF) {
        st = int_of(stepv);
        if (st == 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "slice step cannot be zero");
    }
    jlist *items;
    int is_string = obj.t == JT_STR;
    FRT_TRY(iterate(c, x, obj, &items));
    int64_t n = (int64_t)items->n, lo, hi;
    jval bounds[2] = {start, stop};
    int64_t *res[2] = {&lo, &hi};
    for (int k = 0; k < 2; k++) {
        jval b = bounds[k];
        if (b.t == JT_NONE || b.t == JT_UNDEF) {
            *res[k] = k == 0 ? (st < 0 ? n - 1 : 0) : (st < 0 ? -1 : n);
            continue;
        }
        int64_t v = int_of(b);
        if (v < 0) {
            v += n;
            if (v < 0) v = st < 0 ? -1 : 0;
        } else if (v >= n) {
            v = st < 0 ? n - 1 : n;
        }
        *res[k] = v;
    }
    size_t cnt = 0;
    if (st > 0 && lo < hi) cnt = (size_t)((hi - lo - 1) / st + 1);
    if (st < 0 && hi < lo) cnt = (size_t)((lo - hi - 1) / (-st) + 1);
    if (is_string) {
        jbuf b = {0};
        int rc = 0;
        for (size_t i = 0; !rc && i < cnt; i++) {
            rc = jb_put_str(&b, items->v[lo + (int64_t)i * st]);
        }
        if (!rc) rc = buf_str(c, &b, out);
        jb_free(&b);
        return rc;
    }
    FRT_TRY(make_list(c, cnt, out));
    out->l->tuple = obj.l->tuple;
    for (size_t i = 0; i < cnt; i++) out->l->v[i] = items->v[lo + (int64_t)i * st];
    return 0;
}

/* ---- scopes ------------------------------------------------------------------------ */
static jscope *new_scope(ctx *c, jscope *parent)
{
    jscope *s = ja_alloc(c->a, sizeof *s);
    if (!s) return NULL;
    s->parent = parent;
    s->vars = jd_new(c->a, 0);
    return s->vars ? s : NULL;
}

static int scope_set(ctx *c, jscope *s, const char *name, jval v)
{
    if (jd_set(c->a, s->vars, jv_str(name, strlen(name)), v)) return mem_err(c);
    return 0;
}

static int lookup(ctx *c, jscope *s, const char *name, jval *out)
{
    size_t n = strlen(name);
    for (; s; s = s->parent) {
        jval *v = jd_get_str(s->vars, name, n);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    if (c->globals) {
        jval *v = jd_get_str(c->globals, name, n);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    static const struct {
        const char *name;
        int id;
    } builtins[] = {{"range", JF_RANGE}, {"dict", JF_DICT}, {"namespace", JF_NAMESPACE},
                    {"raise_exception", JF_RAISE}, {"strftime_now", JF_STRFTIME}, {"lipsum", JF_UNSUPPORTED},
                    {"cycler", JF_UNSUPPORTED}, {"joiner", JF_UNSUPPORTED}};
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(name, builtins[i].name)) return make_func(c, builtins[i].id, jv_none(), builtins[i].name, out);
    *out = jv_undef(name);
    return 0;
}

/* ---- evaluated call arguments ---------------------------------------------------------- */
typedef struct jargs {
    jval *pos;
    size_t npos;
    const char **kwn;
    jval *kwv;
    size_t nkw;
} jargs;

static int eval(ctx *c, jscope *s, const jnode *x, jval *out);
static int exec_body(ctx *c, jscope *s, const jnode *body, jbuf *out);

static int eval_args(ctx *c, jscope *s, const jnode *x, jargs *a)
{
    memset(a, 0, sizeof *a);
    if (x->args.n) {
        a->pos = ja_alloc(c->a, x->args.n * sizeof *a->pos);
        if (!a->pos) return mem_err(c);
        for (size_t i = 0; i < x->args.n; i++) FRT_TRY(eval(c, s, x->args.v[i], &a->pos[i]));
        a->npos = x->args.n;
    }
    if (x->kwargs.n) {
        a->kwv = ja_alloc(c->a, x->kwargs.n * sizeof *a->kwv);
        if (!a->kwv) return mem_err(c);
        for (size_t i = 0; i < x->kwargs.n; i++) FRT_TRY(eval(c, s, x->kwargs.v[i], &a->kwv[i]));
        a->kwn = x->names;
        a->nkw = x->kwargs.n;
    }
    return 0;
}

/* Binds A to the parameters NAMES (NULL-terminated): out[i] gets the value
 * or JT_UNDEF with undef_name NULL when absent. SKIP leading positional
 * arguments are not bound (already consumed). Unknown keywords and extra
 * positionals fail. */
static int bind(const jnode *x, const char *what, const jargs *a, size_t skip, const char *const *names, jval *out)
{
    size_t np = 0;
    while (names[np]) np++;
    for (size_t i = 0; i < np; i++) out[i] = jv_undef(NULL);
    if (a->npos > skip + np)
        return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s takes at most %zu arguments (%zu given)", what, np, a->npos - skip);
    for (size_t i = skip; i < a->npos; i++) out[i - skip] = a->pos[i];
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < np && strcmp(names[i], a->kwn[k])) i++;
        if (i == np) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s got an unexpected keyword argument '%s'", what, a->kwn[k]);
        out[i] = a->kwv[k];
    }
    return 0;
}

static int absent(jval v) { return v.t == JT_UNDEF && v.undef_name == NULL; }

/* ---- the tojson filter (transformers: json.dumps(x, ensure_ascii=False,
 * indent=None, separators=None, sort_keys=False)) ---------------------------------------- */
static int do_tojson(ctx *c, const jnode *x, jval v, const jargs *a, jval *out)
{
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    jval p[4];
    FRT_TRY(bind(x, "tojson", a, 0, names, p));
    jjson_opts o = {.ensure_ascii = !absent(p[0]) && jv_truthy(p[0]), .sort_keys = !absent(p[3]) && jv_truthy(p[3])};
    char *ind = NULL;
    if (!absent(p[1]) && p[1].t != JT_NONE) {
        o.has_indent = 1;
        if (is_int(p[1])) {
            int64_t k = int_of(p[1]);
            if (k > 4096) return rt_err(x, FRT_ERR_OUT_OF_RANGE, "tojson: indent %lld is too large", (long long)k);
            if (k < 0) k = 0;
            ind = ja_alloc(c->a, (size_t)k + 1);
            if (!ind) return mem_err(c);
            memset(ind, ' ', (size_t)k);
            o.indent = ind;
            o.indent_n = (size_t)k;
        } else if (p[1].t == JT_STR) {
            o.indent = p[1].s.p;
            o.indent_n = p[1].s.n;
        } else {
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "tojson: indent must be an int or a string");
        }
    }
    o.item_sep = o.has_indent ? "," : ", ";
    o.item_sep_n = strlen(o.item_sep);
    o.key_sep = ": ";
    o.key_sep_n = 2;
    if (!absent(p[2]) && p[2].t != JT_NONE) {
        if (p[2].t != JT_LIST || p[2].l->n != 2 || !is_str(p[2].l->v[0]) || !is_str(p[2].l->v[1]))
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "tojson: separators must be a pair of strings");
        o.item_sep = p[2].l->v[0].s.p;
        o.item_sep_n = p[2].l->v[0].s.n;
        o.key_sep = p[2].l->v[1].s.p;
        o.key_sep_n = p[2].l->v[1].s.n;
    }
    jbuf b = {.limit = c->lim.max_output};
    int rc = jv_tojson_append(&b, v, &o, 0);
    if (!rc) rc = buf_str(c, &b, out);
    if (rc && b.over) {
        rc = buf_err(c, &b, rc);
    } else if (rc && rc != FRT_ERR_OUT_OF_MEMORY) { /* add the position to "tojson: ..." */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", frt_last_error());
        rc = rt_err(x, rc, "%s", msg);
    }
    jb_free(&b);
    return rc;
}

/* ---- comparisons and arithmetic ------------------------------------------------------ */
static int compare_lt_at(const jnode *x, jval a, jval b, int *lt, const char *op, int depth);
static int compare_lt(const jnode *x, jval a, jval b, int *lt, const char *op) { return compare_lt_at(x, a, b, lt, op, 0); }

static int compare_lt_at(const jnode *x, jval a, jval b, int *lt, const char *op, int depth)
{
    if (depth > JV_MAX_NEST) return rt_err(x, FRT_ERR_OUT_OF_RANGE, "comparing values nested deeper than %d", JV_MAX_NEST);
    if (is_numv(a) && is_numv(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT)
            *lt = int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
        else
            *lt = f_of(a) < f_of(b) ? -1 : f_of(a) > f_of(b) ? 1 : 0;
        return 0;
    }
    if (a.t == JT_STR && b.t == JT_STR) {
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int r = n ? memcmp(a.s.p, b.s.p, n) : 0;
        *lt = r ? (r < 0 ? -1 : 1) : (a.s.n < b.s.n ? -1 : a.s.n > b.s.n);
        return 0;
    }
    if (a.t == JT_LIST && b.t == JT_LIST && a.l->tuple == b.l->tuple) {
        size_t n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_equal(a.l->v[i], b.l->v[i])) continue;
            return compare_lt_at(x, a.l->v[i], b.l->v[i], lt, op, depth + 1);
        }
        *lt = a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
        return 0;
    }
    if (a.t == JT_UNDEF) return undef_err(x, a);
    if (b.t == JT_UNDEF) return undef_err(x, b);
    return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "'%s' not supported between instances of '%s' and '%s'", op,
                  jv_type_name(a), jv_type_name(b));
}

static int contains(const jnode *x, jval item, jval container, int *yes)
{
    switch (container.t) {
    case JT_UNDEF: *yes = 0; return 0;
    case JT_STR:
        if (item.t != JT_STR)
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "'in <string>' requires string as left operand, not %s",
                          jv_type_name(item));
        *yes = find_sub((sspan){container.s.p, container.s.n}, (sspan){item.s.p, item.s.n}, 0) != NULL;
        return 0;
    case JT_LIST:
        *yes = 0;
        for (size_t i = 0; i < container.l->n; i++)
            if (jv_equal(item, container.l->v[i])) {
                *yes = 1;
                break;
            }
        return 0;
    case JT_DICT:
        if (container.d->ns) break;
        *yes = jd_get(container.d, item) != NULL;
        return 0;
    default: break;
    }
    return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "argument of type '%s' is not iterable", jv_type_name(container));
}

static int concat_str(ctx *c, jval a, jval b, jval *out)
{
    if (a.s.n + b.s.n < a.s.n) return mem_err(c);
    if (a.s.tn || b.s.tn) {
        jbuf buf = {0};
        int rc = jb_put_str(&buf, a);
        if (!rc) rc = jb_put_str(&buf, b);
        rc = rc ? mem_err(c) : buf_str(c, &buf, out);
        jb_free(&buf);
        return rc;
    }
    char *p = ja_alloc(c->a, a.s.n + b.s.n + 1);
    if (!p) return mem_err(c);
    if (a.s.n) memcpy(p, a.s.p, a.s.n);
    if (b.s.n) memcpy(p + a.s.n, b.s.p, b.s.n);
    *out = jv_str(p, a.s.n + b.s.n);
    return 0;
}

static int overflow(const jnode *x)
{
    return rt_err(x, FRT_ERR_UNSUPPORTED, "integer overflow: integers beyond 64 bits are not supported");
}

static int binop(ctx *c, const jnode *x, jop op, jval a, jval b, jval *out)
{
    static const char *const sym[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    if (a.t == JT_UNDEF) return undef_err(x, a);
    if (b.t == JT_UNDEF) return undef_err(x, b);
    if (is_numv(a) && is_numv(b)) {
        int ints = a.t != JT_FLOAT && b.t != JT_FLOAT;
        int64_t i = int_of(a), j = int_of(b), r;
        double f = f_of(a), g = f_of(b);
        switch (op) {
        case JOP_ADD:
            if (!ints) { *out = jv_float(f + g); return 0; }
            if (__builtin_add_overflow(i, j, &r)) return overflow(x);
            *out = jv_int(r);
            return 0;
        case JOP_SUB:
            if (!ints) { *out = jv_float(f - g); return 0; }
            if (__builtin_sub_overflow(i, j, &r)) return overflow(x);
            *out = jv_int(r);
            return 0;
        case JOP_MUL:
            if (!ints) { *out = jv_float(f * g); return 0; }
            if (__builtin_mul_overflow(i, j, &r)) return overflow(x);
            *out = jv_int(r);
            return 0;
        case JOP_DIV:
            if (g == 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "division by zero");
            *out = jv_float(f / g);
            return 0;
        case JOP_FLOORDIV:
        case JOP_MOD:
            if (ints) {
                if (j == 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "integer division or modulo by zero");
                if (i == INT64_MIN && j == -1) return overflow(x);
                int64_t q = i / j, m = i % j;
                if (m != 0 && ((m < 0) != (j < 0))) {
                    q--;
                    m += j;
                }
                *out = jv_int(op == JOP_FLOORDIV ? q : m);
                return 0;
            }
            if (g == 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "float division by zero");
            if (op == JOP_MOD) {
                double m = fmod(f, g);
                if (m != 0 && ((m < 0) != (g < 0))) m += g;
                *out = jv_float(m);
            } else {
                *out = jv_float(floor(f / g));
            }
            return 0;
        case JOP_POW:
            if (ints && j >= 0) {
                int64_t acc = 1, base = i;
                int64_t e = j;
                while (e > 0) {
                    if (e & 1)
                        if (__builtin_mul_overflow(acc, base, &acc)) return overflow(x);
                    e >>= 1;
                    if (e && __builtin_mul_overflow(base, base, &base)) return overflow(x);
                }
                *out = jv_int(acc);
                return 0;
            }
            if (f == 0 && g < 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "0.0 cannot be raised to a negative power");
            *out = jv_float(pow(f, g));
            return 0;
        default: break;
        }
    }
    if (op == JOP_ADD && a.t == JT_STR && b.t == JT_STR) {
        /* markupsafe: Markup + str escapes the str */
        jval ea = a, eb = b;
        if (a.safe && !b.safe) FRT_TRY(html_escape(c, b, &eb));
        if (b.safe && !a.safe) FRT_TRY(html_escape(c, a, &ea));
        FRT_TRY(concat_str(c, ea, eb, out));
        out->safe = a.safe || b.safe;
        return 0;
    }
    if (op == JOP_ADD && a.t == JT_LIST && b.t == JT_LIST && a.l->tuple == b.l->tuple) {
        FRT_TRY(make_list(c, a.l->n + b.l->n, out));
        out->l->tuple = a.l->tuple;
        if (a.l->n) memcpy(out->l->v, a.l->v, a.l->n * sizeof(jval));
        if (b.l->n) memcpy(out->l->v + a.l->n, b.l->v, b.l->n * sizeof(jval));
        return 0;
    }
    if (op == JOP_MUL && ((is_int(a) && (b.t == JT_STR || b.t == JT_LIST)) || (is_int(b) && (a.t == JT_STR || a.t == JT_LIST)))) {
        jval seq = is_int(a) ? b : a;
        int64_t k = is_int(a) ? int_of(a) : int_of(b);
        if (k < 0) k = 0;
        size_t unit = seq.t == JT_STR ? seq.s.n : seq.l->n * sizeof(jval);
        if (unit && (uint64_t)k > (c->lim.max_memory / unit)) {
            c->a->over = 1;
            return mem_err(c);
        }
        if (seq.t == JT_STR && seq.s.tn) {
            jbuf buf = {0};
            int rc = 0;
            for (int64_t i = 0; !rc && i < k; i++) rc = jb_put_str(&buf, seq);
            rc = rc ? mem_err(c) : buf_str(c, &buf, out);
            jb_free(&buf);
            return rc;
        }
        if (seq.t == JT_STR) {
            char *p = ja_alloc(c->a, seq.s.n * (size_t)k + 1);
            if (!p) return mem_err(c);
            for (int64_t i = 0; i < k; i++) memcpy(p + (size_t)i * seq.s.n, seq.s.p, seq.s.n);
            *out = jv_str(p, seq.s.n * (size_t)k);
            return 0;
        }
        FRT_TRY(make_list(c, seq.l->n * (size_t)k, out));
        out->l->tuple = seq.l->tuple;
        for (int64_t i = 0; i < k; i++) memcpy(out->l->v + (size_t)i * seq.l->n, seq.l->v, seq.l->n * sizeof(jval));
        return 0;
    }
    if (op == JOP_MOD && a.t == JT_STR)
        return rt_err(x, FRT_ERR_UNSUPPORTED, "printf-style string formatting ('%%') is not supported");
    return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "unsupported operand type(s) for %s: '%s' and '%s'",
                  op <= JOP_POW ? sym[op] : "?", jv_type_name(a), jv_type_name(b));
}

/* ---- tests ------------------------------------------------------------------------------ */
enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_ESCAPED, T_EVEN, T_FALSE, T_FILTER, T_FLOAT, T_GE,
    T_GT, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LOWER, T_LT, T_MAPPING, T_NE, T_NONE, T_NUMBER, T_ODD, T_SAMEAS,
    T_SEQUENCE, T_STRING, T_TEST, T_TRUE, T_UNDEFINED, T_UPPER,
};
static const struct {
    const char *name;
    int id;
} tests[] = {
    {"boolean", T_BOOLEAN}, {"callable", T_CALLABLE}, {"defined", T_DEFINED}, {"divisibleby", T_DIVISIBLEBY},
    {"eq", T_EQ}, {"equalto", T_EQ}, {"==", T_EQ}, {"escaped", T_ESCAPED}, {"even", T_EVEN}, {"false", T_FALSE},
    {"filter", T_FILTER}, {"float", T_FLOAT}, {"ge", T_GE}, {">=", T_GE}, {"gt", T_GT}, {">", T_GT},
    {"greaterthan", T_GT}, {"in", T_IN}, {"integer", T_INTEGER}, {"iterable", T_ITERABLE}, {"le", T_LE},
    {"<=", T_LE}, {"lower", T_LOWER}, {"lt", T_LT}, {"<", T_LT}, {"lessthan", T_LT}, {"mapping", T_MAPPING},
    {"ne", T_NE}, {"!=", T_NE}, {"none", T_NONE}, {"number", T_NUMBER}, {"odd", T_ODD}, {"sameas", T_SAMEAS},
    {"sequence", T_SEQUENCE}, {"string", T_STRING}, {"test", T_TEST}, {"true", T_TRUE}, {"undefined", T_UNDEFINED},
    {"upper", T_UPPER},
};

int jinja_test_id(const char *name)
{
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (!strcmp(tests[i].name, name)) return tests[i].id;
    return -1;
}

static int test_id_of(jval name)
{
    if (name.t != JT_STR) return -1;
    char buf[32];
    if (name.s.n >= sizeof buf) return -1;
    memcpy(buf, name.s.p, name.s.n);
    buf[name.s.n] = '\0';
    return jinja_test_id(buf);
}

static int filter_id_of(jval name);

static int run_test(ctx *c, const jnode *x, int id, jval v, const jval *args, size_t nargs, int *res)
{
    jval arg = nargs ? args[0] : jv_undef(NULL);
    size_t need = 0;
    switch (id) {
    case T_DIVISIBLEBY: case T_EQ: case T_GE: case T_GT: case T_IN: case T_LE: case T_LT: case T_NE: case T_SAMEAS:
        need = 1;
        break;
    default: break;
    }
    if (nargs != need)
        return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "test takes %zu argument%s (%zu given)", need, need == 1 ? "" : "s", nargs);
    int cmp;
    switch (id) {
    case T_BOOLEAN: *res = v.t == JT_BOOL; return 0;
    case T_CALLABLE: *res = v.t == JT_MACRO || v.t == JT_FUNC; return 0;
    case T_DEFINED: *res = v.t != JT_UNDEF; return 0;
    case T_UNDEFINED: *res = v.t == JT_UNDEF; return 0;
    case T_DIVISIBLEBY:
        if (is_int(v) && is_int(arg)) {
            if (int_of(arg) == 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "integer division or modulo by zero");
            *res = int_of(arg) == -1 ? 1 : int_of(v) % int_of(arg) == 0;
            return 0;
        }
        if (is_numv(v) && is_numv(arg)) {
            if (f_of(arg) == 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "float modulo");
            *res = fmod(f_of(v), f_of(arg)) == 0;
            return 0;
        }
        return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "divisibleby: numbers expected");
    case T_EQ: *res = jv_equal(v, arg); return 0;
    case T_NE: *res = !jv_equal(v, arg); return 0;
    case T_LT: FRT_TRY(compare_lt(x, v, arg, &cmp, "<")); *res = cmp < 0; return 0;
    case T_LE: FRT_TRY(compare_lt(x, v, arg, &cmp, "<=")); *res = cmp <= 0; return 0;
    case T_GT: FRT_TRY(compare_lt(x, v, arg, &cmp, ">")); *res = cmp > 0; return 0;
    case T_GE: FRT_TRY(compare_lt(x, v, arg, &cmp, ">=")); *res = cmp >= 0; return 0;
    case T_IN: return contains(x, v, arg, res);
    case T_ESCAPED: *res = v.t == JT_STR && v.safe; return 0;
    case T_EVEN:
    case T_ODD:
        if (!is_int(v)) {
            if (v.t == JT_UNDEF) return undef_err(x, v);
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s: an integer expected", id == T_EVEN ? "even" : "odd");
        }
        *res = (int_of(v) % 2 == 0) == (id == T_EVEN);
        return 0;
    case T_FALSE: *res = v.t == JT_BOOL && !v.b; return 0;
    case T_TRUE: *res = v.t == JT_BOOL && v.b; return 0;
    case T_FILTER: *res = filter_id_of(v) >= 0; return 0;
    case T_TEST: *res = test_id_of(v) >= 0; return 0;
    case T_FLOAT: *res = v.t == JT_FLOAT; return 0;
    case T_INTEGER: *res = v.t == JT_INT; return 0;
    case T_NUMBER: *res = is_numv(v); return 0;
    case T_ITERABLE: *res = v.t == JT_LIST || v.t == JT_STR || (v.t == JT_DICT && !v.d->ns) || v.t == JT_UNDEF; return 0;
    case T_SEQUENCE: *res = v.t == JT_LIST || v.t == JT_STR || (v.t == JT_DICT && !v.d->ns) || v.t == JT_UNDEF; return 0;
    case T_MAPPING: *res = v.t == JT_DICT && !v.d->ns; return 0;
    case T_NONE: *res = v.t == JT_NONE; return 0;
    case T_STRING: *res = v.t == JT_STR; return 0;
    case T_SAMEAS:
        /* Python "is": None/True/False singletons, small ints, the same object */
        if (v.t != arg.t) *res = 0;
        else if (v.t == JT_NONE || v.t == JT_UNDEF) *res = v.t == JT_NONE;
        else if (v.t == JT_BOOL) *res = v.b == arg.b;
        else if (v.t == JT_INT) *res = v.i == arg.i && v.i >= -5 && v.i <= 256;
        else if (v.t == JT_STR) *res = v.s.p == arg.s.p && v.s.n == arg.s.n;
        else if (v.t == JT_LIST) *res = v.l == arg.l;
        else if (v.t == JT_DICT) *res = v.d == arg.d;
        else *res = 0;
        return 0;
    case T_LOWER:
    case T_UPPER: {
        jval s;
        FRT_TRY(to_str(c, v, &s));
        int any_cased = 0, ok = 1;
        size_t pos = 0;
        uint32_t cp;
        while (ju_decode(s.s.p, s.s.n, &pos, &cp)) {
            const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
            if (pr->category == UTF8PROC_CATEGORY_LU || pr->category == UTF8PROC_CATEGORY_LT) {
                any_cased = 1;
                if (id == T_LOWER) ok = 0;
            } else if (pr->category == UTF8PROC_CATEGORY_LL) {
                any_cased = 1;
                if (id == T_UPPER) ok = 0;
            }
        }
        *res = any_cased && ok;
        return 0;
    }
    }
    return rt_err(x, FRT_ERR_UNSUPPORTED, "test is not supported");
}

/* ---- filters ------------------------------------------------------------------------------ */
enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_COUNT, F_DEFAULT, F_DICTSORT, F_ESCAPE, F_FIRST, F_FLOAT, F_FORCEESCAPE,
    F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR,
    F_REPLACE, F_REVERSE, F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM,
    F_UNIQUE, F_UPPER, F_WORDCOUNT, F_CENTER,
};
static const struct {
    const char *name;
    int id;
} filters[] = {
    {"abs", F_ABS}, {"attr", F_ATTR}, {"capitalize", F_CAPITALIZE}, {"count", F_COUNT}, {"length", F_COUNT},
    {"d", F_DEFAULT}, {"default", F_DEFAULT}, {"dictsort", F_DICTSORT}, {"e", F_ESCAPE}, {"escape", F_ESCAPE},
    {"first", F_FIRST}, {"float", F_FLOAT}, {"forceescape", F_FORCEESCAPE}, {"indent", F_INDENT}, {"int", F_INT},
    {"items", F_ITEMS}, {"join", F_JOIN}, {"last", F_LAST}, {"list", F_LIST}, {"lower", F_LOWER}, {"map", F_MAP},
    {"max", F_MAX}, {"min", F_MIN}, {"reject", F_REJECT}, {"rejectattr", F_REJECTATTR}, {"replace", F_REPLACE},
    {"reverse", F_REVERSE}, {"safe", F_SAFE}, {"select", F_SELECT}, {"selectattr", F_SELECTATTR},
    {"sort", F_SORT}, {"string", F_STRING}, {"sum", F_SUM}, {"title", F_TITLE}, {"tojson", F_TOJSON},
    {"trim", F_TRIM}, {"unique", F_UNIQUE}, {"upper", F_UPPER}, {"wordcount", F_WORDCOUNT}, {"center", F_CENTER},
};

int jinja_filter_id(const char *name)
{
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (!strcmp(filters[i].name, name)) return filters[i].id;
    return -1;
}

static int filter_id_of(jval name)
{
    if (name.t != JT_STR) return -1;
    char buf[32];
    if (name.s.n >= sizeof buf) return -1;
    memcpy(buf, name.s.p, name.s.n);
    buf[name.s.n] = '\0';
    return jinja_filter_id(buf);
}

static int apply_filter(ctx *c, const jnode *x, int id, jval v, const jargs *a, jval *out);

/* make_attrgetter: "a.b.0" looked up item by item; missing -> DEFAULT */
static int attr_path(ctx *c, const jnode *x, jval v, jval path, jval dflt, jval *out)
{
    if (is_int(path)) return get_item(c, x, v, path, out);
    if (path.t != JT_STR) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "attribute must be a string or an integer");
    size_t i = 0;
    while (i <= path.s.n) {
        size_t j = i;
        while (j < path.s.n && path.s.p[j] != '.') j++;
        jval key = jv_str(path.s.p + i, j - i);
        int all_digits = j > i;
        int64_t k = 0;
        for (size_t q = i; q < j; q++) {
            if (path.s.p[q] < '0' || path.s.p[q] > '9' || k > INT64_MAX / 10 - 10) {
                all_digits = 0;
                break;
            }
            k = k * 10 + (path.s.p[q] - '0');
        }
        if (all_digits) key = jv_int(k);
        FRT_TRY(get_item(c, x, v, key, &v));
        if (v.t == JT_UNDEF && !absent(dflt)) {
            *out = dflt;
            return 0;
        }
        if (v.t == JT_UNDEF) break;
        i = j + 1;
    }
    *out = v;
    return 0;
}

/* select / reject / selectattr / rejectattr */
static int select_like(ctx *c, const jnode *x, jval v, const jargs *a, int with_attr, int keep_if, jval *out)
{
    jlist *items;
    FRT_TRY(iterate(c, x, v, &items));
    size_t k = 0;
    jval attr = jv_undef(NULL);
    if (with_attr) {
        if (a->npos < 1) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "selectattr / rejectattr: missing attribute");
        attr = a->pos[0];
        k = 1;
    }
    if (a->nkw) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "select-like filters take no keyword arguments");
    int tid = -1;
    if (a->npos > k) {
        tid = test_id_of(a->pos[k]);
        if (tid < 0) return rt_err(x, FRT_ERR_UNSUPPORTED, "select: this test is not supported");
        k++;
    }
    FRT_TRY(make_list(c, items->n, out));
    size_t n = 0;
    for (size_t i = 0; i < items->n; i++) {
        jval item = items->v[i], subj = item;
        if (with_attr) FRT_TRY(attr_path(c, x, item, attr, jv_undef(NULL), &subj));
        int r;
        if (tid < 0)
            r = jv_truthy(subj);
        else
            FRT_TRY(run_test(c, x, tid, subj, a->pos + k, a->npos - k, &r));
        if (!!r == keep_if) out->l->v[n++] = item;
    }
    out->l->n = n;
    return 0;
}

static int sort_key(ctx *c, const jnode *x, jval item, jval attr, int case_sensitive, jval *key)
{
    if (!absent(attr) && attr.t != JT_NONE) FRT_TRY(attr_path(c, x, item, attr, jv_undef(NULL), &item));
    if (!case_sensitive && item.t == JT_STR) return map_case(c, item, 1, key);
    *key = item;
    return 0;
}

static int do_sort(ctx *c, const jnode *x, jlist *items, jval attr, int case_sensitive, int reverse, jval *out)
{
    size_t n = items->n;
    jval *keys = ja_alloc(c->a, (n ? n : 1) * sizeof *keys);
    if (!keys) return mem_err(c);
    FRT_TRY(make_list(c, n, out));
    for (size_t i = 0; i < n; i++) {
        FRT_TRY(sort_key(c, x, items->v[i], attr, case_sensitive, &keys[i]));
        out->l->v[i] = items->v[i];
    }
    /* stable insertion sort (Python's sort is stable; reverse keeps stability) */
    for (size_t i = 1; i < n; i++) {
        jval kv = keys[i], iv = out->l->v[i];
        size_t j = i;
        while (j > 0) {
            int cmp;
            FRT_TRY(compare_lt(x, keys[j - 1], kv, &cmp, "<"));
            if (reverse ? cmp >= 0 : cmp <= 0) break;
            keys[j] = keys[j - 1];
            out->l->v[j] = out->l->v[j - 1];
            j--;
        }
        keys[j] = kv;
        out->l->v[j] = iv;
    }
    return 0;
}

static int apply_filter(ctx *c, const jnode *x, int id, jval v, const jargs *a, jval *out)
{
    jval p[4];
    switch (id) {
    case F_SAFE:
    case F_STRING:
        FRT_TRY(bind(x, id == F_SAFE ? "safe" : "string", a, 0, (const char *const[]){NULL}, p));
        if (v.t == JT_UNDEF) {
            *out = jv_str("", 0);
        } else {
            int was_safe = v.t == JT_STR && v.safe;
            FRT_TRY(to_str(c, v, out));
            out->safe = (uint8_t)(id == F_SAFE || was_safe);
        }
        return 0;
    case F_ESCAPE:
    case F_FORCEESCAPE:
        FRT_TRY(bind(x, "escape", a, 0, (const char *const[]){NULL}, p));
        if (id == F_FORCEESCAPE && v.t == JT_STR) v.safe = 0;
        return html_escape(c, v.t == JT_UNDEF ? jv_str("", 0) : v, out);
    case F_TOJSON: return do_tojson(c, x, v, a, out);
    case F_TRIM: {
        FRT_TRY(bind(x, "trim", a, 0, (const char *const[]){"chars", NULL}, p));
        jval s;
        FRT_TRY(to_str(c, v, &s));
        sspan r = py_strip((sspan){s.s.p, s.s.n}, 1, 1, p[0].t == JT_STR ? p[0] : jv_none());
        FRT_TRY(sub_str(c, s, (size_t)(r.p - s.s.p), r.n, out));
        out->safe = s.safe;
        return 0;
    }
    case F_UPPER:
    case F_LOWER:
    case F_CAPITALIZE:
    case F_TITLE: {
        FRT_TRY(bind(x, "case filter", a, 0, (const char *const[]){NULL}, p));
        jval s;
        FRT_TRY(to_str(c, v, &s));
        return map_case(c, s, id == F_UPPER ? 0 : id == F_LOWER ? 1 : id == F_CAPITALIZE ? 2 : 3, out);
    }
    case F_COUNT:
        FRT_TRY(bind(x, "length", a, 0, (const char *const[]){NULL}, p));
        switch (v.t) {
        case JT_UNDEF: *out = jv_int(0); return 0;
        case JT_STR: *out = jv_int((int64_t)ju_count(v.s.p, v.s.n)); return 0;
        case JT_LIST: *out = jv_int((int64_t)v.l->n); return 0;
        case JT_DICT: if (!v.d->ns) { *out = jv_int((int64_t)v.d->n); return 0; } break;
        default: break;
        }
        return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "object of type '%s' has no len()", jv_type_name(v));
    case F_DEFAULT:
        FRT_TRY(bind(x, "default", a, 0, (const char *const[]){"default_value", "boolean", NULL}, p));
        if (v.t == JT_UNDEF || (!absent(p[1]) && jv_truthy(p[1]) && !jv_truthy(v)))
            *out = absent(p[0]) ? jv_str("", 0) : p[0];
        else
            *out = v;
        return 0;
    case F_FIRST:
    case F_LAST: {
        FRT_TRY(bind(x, "first", a, 0, (const char *const[]){NULL}, p));
        jlist *items;
        if (id == F_LAST && v.t == JT_DICT) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "'dict' object is not reversible");
        FRT_TRY(iterate(c, x, v, &items));
        *out = items->n ? items->v[id == F_FIRST ? 0 : items->n - 1] : jv_undef(NULL);
        return 0;
    }
    case F_LIST: {
        FRT_TRY(bind(x, "list", a, 0, (const char *const[]){NULL}, p));
        jlist *items;
        FRT_TRY(iterate(c, x, v, &items));
        FRT_TRY(make_list(c, items->n, out));
        if (items->n) memcpy(out->l->v, items->v, items->n * sizeof(jval));
        return 0;
    }
    case F_REVERSE: {
        FRT_TRY(bind(x, "reverse", a, 0, (const char *const[]){NULL}, p));
        if (v.t == JT_STR) return slice_value(c, x, v, jv_none(), jv_none(), jv_int(-1), out);
        jlist *items;
        if (v.t == JT_DICT) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "argument to reversed() must be a sequence");
        FRT_TRY(iterate(c, x, v, &items));
        FRT_TRY(make_list(c, items->n, out));
        for (size_t i = 0; i < items->n; i++) out->l->v[i] = items->v[items->n - 1 - i];
        return 0;
    }
    case F_ITEMS:
    case F_DICTSORT: {
        if (id == F_ITEMS) FRT_TRY(bind(x, "items", a, 0, (const char *const[]){NULL}, p));
        else FRT_TRY(bind(x, "dictsort", a, 0, (const char *const[]){"case_sensitive", "by", "reverse", NULL}, p));
        if (v.t == JT_UNDEF && id == F_ITEMS) return make_list(c, 0, out);
        if (v.t != JT_DICT || v.d->ns) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s: can only be used on a mapping",
                                                   id == F_ITEMS ? "items" : "dictsort");
        jval l = {0};
        FRT_TRY(make_list(c, v.d->n, &l));
        for (size_t i = 0; i < v.d->n; i++) {
            jval t;
            FRT_TRY(make_list(c, 2, &t));
            t.l->tuple = 1;
            t.l->v[0] = v.d->k[i];
            t.l->v[1] = v.d->v[i];
            l.l->v[i] = t;
        }
        if (id == F_ITEMS) {
            *out = l;
            return 0;
        }
        int by_value = p[1].t == JT_STR && streq(p[1], "value");
        if (!absent(p[1]) && !by_value && !streq(p[1], "key"))
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "You can only sort by either \"key\" or \"value\"");
        return do_sort(c, x, l.l, jv_int(by_value ? 1 : 0), !absent(p[0]) && jv_truthy(p[0]),
                       !absent(p[2]) && jv_truthy(p[2]), out);
    }
    case F_JOIN: {
        FRT_TRY(bind(x, "join", a, 0, (const char *const[]){"d", "attribute", NULL}, p));
        jlist *items;
        FRT_TRY(iterate(c, x, v, &items));
        jval sep = absent(p[0]) ? jv_str("", 0) : p[0];
        if (sep.t != JT_STR) FRT_TRY(to_str(c, sep, &sep));
        jbuf b = {.limit = c->lim.max_output};
        int rc = 0;
        for (size_t i = 0; !rc && i < items->n; i++) {
            jval it = items->v[i];
            if (!absent(p[1])) rc = attr_path(c, x, it, p[1], jv_undef(NULL), &it);
            if (!rc && i) rc = jb_put_str(&b, sep);
            if (!rc) rc = jv_str_append(&b, it);
        }
        if (!rc) rc = buf_str(c, &b, out);
        if (rc && b.over) rc = buf_err(c, &b, rc);
        jb_free(&b);
        return rc;
    }
    case F_MAP: {
        jlist *items;
        FRT_TRY(iterate(c, x, v, &items));
        FRT_TRY(make_list(c, items->n, out));
        if (a->npos == 0) {
            FRT_TRY(bind(x, "map", a, 0, (const char *const[]){"attribute", "default", NULL}, p));
            if (absent(p[0])) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "map: a filter name or attribute= is required");
            for (size_t i = 0; i < items->n; i++) FRT_TRY(attr_path(c, x, items->v[i], p[0], p[1], &out->l->v[i]));
            return 0;
        }
        int fid = filter_id_of(a->pos[0]);
        if (fid < 0) return rt_err(x, FRT_ERR_UNSUPPORTED, "map: this filter is not supported");
        jargs rest = *a;
        rest.pos++;
        rest.npos--;
        for (size_t i = 0; i < items->n; i++) FRT_TRY(apply_filter(c, x, fid, items->v[i], &rest, &out->l->v[i]));
        return 0;
    }
    case F_SELECT: return select_like(c, x, v, a, 0, 1, out);
    case F_REJECT: return select_like(c, x, v, a, 0, 0, out);
    case F_SELECTATTR: return select_like(c, x, v, a, 1, 1, out);
    case F_REJECTATTR: return select_like(c, x, v, a, 1, 0, out);
    case F_SORT: {
        FRT_TRY(bind(x, "sort", a, 0, (const char *const[]){"reverse", "case_sensitive", "attribute", NULL}, p));
        jlist *items;
        FRT_TRY(iterate(c, x, v, &items));
        return do_sort(c, x, items, p[2], !absent(p[1]) && jv_truthy(p[1]), !absent(p[0]) && jv_truthy(p[0]), out);
    }
    case F_UNIQUE: {
        FRT_TRY(bind(x, "unique", a, 0, (const char *const[]){"case_sensitive", "attribute", NULL}, p));
        jlist *items;
        FRT_TRY(iterate(c, x, v, &items));
        FRT_TRY(make_list(c, items->n, out));
        jval *keys = ja_alloc(c->a, (items->n ? items->n : 1) * sizeof *keys);
        if (!keys) return mem_err(c);
        size_t n = 0;
        for (size_t i = 0; i < items->n; i++) {
            jval k;
            FRT_TRY(sort_key(c, x, items->v[i], p[1], !absent(p[0]) && jv_truthy(p[0]), &k));
            int seen = 0;
            for (size_t j = 0; j < n && !seen; j++) seen = jv_equal(keys[j], k);
            if (!seen) {
                keys[n] = k;
                out->l->v[n++] = items->v[i];
            }
        }
        out->l->n = n;
        return 0;
    }
    case F_MAX:
    case F_MIN: {
        FRT_TRY(bind(x, "max", a, 0, (const char *const[]){"case_sensitive", "attribute", NULL}, p));
        jlist *items;
        FRT_TRY(iterate(c, x, v, &items));
        if (!items->n) {
            *out = jv_undef(NULL);
            return 0;
        }
        jval best = items->v[0], bk;
        FRT_TRY(sort_key(c, x, best, p[1], !absent(p[0]) && jv_truthy(p[0]), &bk));
        for (size_t i = 1; i < items->n; i++) {
            jval k;
            int cmp;
            FRT_TRY(sort_key(c, x, items->v[i], p[1], !absent(p[0]) && jv_truthy(p[0]), &k));
            FRT_TRY(compare_lt(x, k, bk, &cmp, "<"));
            if (id == F_MAX ? cmp > 0 : cmp < 0) {
                best = items->v[i];
                bk = k;
            }
        }
        *out = best;
        return 0;
    }
    case F_SUM: {
        FRT_TRY(bind(x, "sum", a, 0, (const char *const[]){"attribute", "start", NULL}, p));
        jlist *items;
        FRT_TRY(iterate(c, x, v, &items));
        jval acc = absent(p[1]) ? jv_int(0) : p[1];
        for (size_t i = 0; i < items->n; i++) {
            jval it = items->v[i];
            if (!absent(p[0])) FRT_TRY(attr_path(c, x, it, p[0], jv_undef(NULL), &it));
            FRT_TRY(binop(c, x, JOP_ADD, acc, it, &acc));
        }
        *out = acc;
        return 0;
    }
    case F_ABS:
        FRT_TRY(bind(x, "abs", a, 0, (const char *const[]){NULL}, p));
        if (v.t == JT_INT) {
            if (v.i == INT64_MIN) return overflow(x);
            *out = jv_int(v.i < 0 ? -v.i : v.i);
        } else if (v.t == JT_BOOL) {
            *out = jv_int(v.b);
        } else if (v.t == JT_FLOAT) {
            *out = jv_float(fabs(v.f));
        } else {
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "bad operand type for abs(): '%s'", jv_type_name(v));
        }
        return 0;
    case F_INT:
    case F_FLOAT: {
        if (id == F_INT) FRT_TRY(bind(x, "int", a, 0, (const char *const[]){"default", "base", NULL}, p));
        else FRT_TRY(bind(x, "float", a, 0, (const char *const[]){"default", NULL}, p));
        jval dflt = absent(p[0]) ? (id == F_INT ? jv_int(0) : jv_float(0.0)) : p[0];
        if (id == F_INT && !absent(p[1]) && !(is_int(p[1]) && int_of(p[1]) == 10))
            return rt_err(x, FRT_ERR_UNSUPPORTED, "int: a base other than 10 is not supported");
        if (is_numv(v)) {
            double f = f_of(v);
            if (id == F_FLOAT) *out = jv_float(f);
            else if (is_int(v)) *out = jv_int(int_of(v));
            else if (!isfinite(f) || fabs(f) >= 9.2e18) *out = dflt;
            else *out = jv_int((int64_t)f);
            return 0;
        }
        if (v.t != JT_STR) {
            *out = dflt;
            return 0;
        }
        /* Python int(s) / float(s): white space around, a sign, digits with
         * single underscores between them, for float a fraction, an exponent
         * or inf / infinity / nan */
        sspan t = py_strip((sspan){v.s.p, v.s.n}, 1, 1, jv_none());
        char buf[80];
        size_t k = 0, i = 0;
        int digits = 0, is_float_syntax = 0, ok = t.n > 0 && t.n < sizeof buf;
        if (ok && (t.p[0] == '+' || t.p[0] == '-')) buf[k++] = t.p[i++];
        if (ok && t.n - i >= 3 && (!strncasecmp(t.p + i, "inf", 3) || !strncasecmp(t.p + i, "nan", 3)) &&
            (t.n - i == 3 || (t.n - i == 8 && !strncasecmp(t.p + i, "infinity", 8)))) {
            *out = id == F_FLOAT ? jv_float(strtod(t.p[0] == '-' ? "-inf" : "inf", NULL) * 1) : dflt;
            if (id == F_FLOAT && !strncasecmp(t.p + i, "nan", 3)) *out = jv_float(NAN);
            return 0;
        }
        for (; ok && i < t.n; i++) {
            char ch = t.p[i];
            if (ch >= '0' && ch <= '9') {
                buf[k++] = ch;
                digits++;
            } else if (ch == '_' && i > 0 && is_digit_c(t.p[i - 1]) && i + 1 < t.n && is_digit_c(t.p[i + 1])) {
                continue;
            } else if (ch == '.' || ch == 'e' || ch == 'E' || ((ch == '+' || ch == '-') && (t.p[i - 1] == 'e' || t.p[i - 1] == 'E'))) {
                is_float_syntax = 1;
                buf[k++] = ch;
            } else {
                ok = 0;
            }
        }
        buf[k] = '\0';
        if (!ok || !digits) {
            *out = dflt;
            return 0;
        }
        char *end;
        errno = 0;
        if (id == F_INT && !is_float_syntax) {
            long long iv = strtoll(buf, &end, 10);
            if (*end == '\0' && errno != ERANGE) {
                *out = jv_int(iv);
                return 0;
            }
        }
        double f = strtod(buf, &end);
        if (*end != '\0') {
            *out = dflt;
            return 0;
        }
        if (id == F_FLOAT) *out = jv_float(f);
        else if (!isfinite(f) || fabs(f) >= 9.2e18) *out = dflt;
        else *out = jv_int((int64_t)f);
        return 0;
    }
    case F_ATTR: {
        FRT_TRY(bind(x, "attr", a, 0, (const char *const[]){"name", NULL}, p));
        if (p[0].t != JT_STR) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "attr: name must be a string");
        if (v.t == JT_DICT && !v.d->ns) { /* getattr only: dict keys are not attributes */
            const char *m = in_names(dict_methods, p[0].s.p, p[0].s.n);
            if (m) return make_func(c, JF_METHOD, v, m, out);
            *out = jv_undef(NULL);
            return 0;
        }
        return get_attr(c, x, v, p[0].s.p, p[0].s.n, out);
    }
    case F_INDENT: {
        FRT_TRY(bind(x, "indent", a, 0, (const char *const[]){"width", "first", "blank", NULL}, p));
        jval s, ind;
        FRT_TRY(to_str(c, v, &s));
        if (absent(p[0])) {
            ind = jv_str("    ", 4);
        } else if (p[0].t == JT_STR) {
            ind = p[0];
        } else if (is_int(p[0])) {
            int64_t w = int_of(p[0]);
            if (w > 4096) return rt_err(x, FRT_ERR_OUT_OF_RANGE, "indent: width too large");
            if (w < 0) w = 0;
            char *sp = ja_alloc(c->a, (size_t)w + 1);
            if (!sp) return mem_err(c);
            memset(sp, ' ', (size_t)w);
            ind = jv_str(sp, (size_t)w);
        } else {
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "indent: width must be an int or a string");
        }
        jval s2, lines;
        FRT_TRY(concat_str(c, s, jv_str("\n", 1), &s2));
        FRT_TRY(py_splitlines(c, s2, &lines));
        int blank = !absent(p[2]) && jv_truthy(p[2]);
        jbuf b = {.limit = c->lim.max_output};
        int rc = 0;
        if (!absent(p[1]) && jv_truthy(p[1])) rc = jb_put_str(&b, ind);
        for (size_t i = 0; !rc && i < lines.l->n; i++) {
            jval ln = lines.l->v[i];
            if (i) rc = jb_putc(&b, '\n');
            if (!rc && i && (blank || ln.s.n)) rc = jb_put_str(&b, ind);
            if (!rc) rc = jb_put_str(&b, ln);
        }
        if (!rc) rc = buf_str(c, &b, out);
        if (rc && b.over) rc = buf_err(c, &b, rc);
        jb_free(&b);
        return rc;
    }
    case F_REPLACE: {
        FRT_TRY(bind(x, "replace", a, 0, (const char *const[]){"old", "new", "count", NULL}, p));
        jval s;
        FRT_TRY(to_str(c, v, &s));
        if (p[0].t != JT_STR || p[1].t != JT_STR) {
            if (absent(p[0]) || absent(p[1])) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "replace: old and new are required");
            FRT_TRY(to_str(c, p[0], &p[0]));
            FRT_TRY(to_str(c, p[1], &p[1]));
        }
        int64_t cnt = -1;
        if (!absent(p[2]) && p[2].t != JT_NONE) {
            if (!is_int(p[2])) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "replace: count must be an integer");
            cnt = int_of(p[2]);
        }
        return py_replace(c, s, p[0], p[1], cnt, out);
    }
    case F_WORDCOUNT: {
        FRT_TRY(bind(x, "wordcount", a, 0, (const char *const[]){NULL}, p));
        jval s;
        FRT_TRY(to_str(c, v, &s));
        /* \w+ runs (letters, digits, underscore) */
        int64_t n = 0;
        int in = 0;
        size_t pos = 0;
        uint32_t cp;
        while (ju_decode(s.s.p, s.s.n, &pos, &cp)) {
            const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
            int w = cp == '_' || (pr->category >= UTF8PROC_CATEGORY_LU && pr->category <= UTF8PROC_CATEGORY_LO) ||
                    (pr->category >= UTF8PROC_CATEGORY_ND && pr->category <= UTF8PROC_CATEGORY_NO);
            if (w && !in) n++;
            in = w;
        }
        *out = jv_int(n);
        return 0;
    }
    case F_CENTER: {
        FRT_TRY(bind(x, "center", a, 0, (const char *const[]){"width", NULL}, p));
        jval s;
        FRT_TRY(to_str(c, v, &s));
        int64_t w = absent(p[0]) ? 80 : is_int(p[0]) ? int_of(p[0]) : -1;
        if (w < 0 || w > 65536) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "center: width must be an integer up to 65536");
        int64_t len = (int64_t)ju_count(s.s.p, s.s.n);
        if (len >= w) {
            *out = s;
            return 0;
        }
        /* CPython pad(): left = marg/2 + (marg & width & 1) */
        int64_t marg = w - len, left = marg / 2 + (marg & w & 1), right = marg - left;
        jbuf b = {0};
        int rc = 0;
        for (int64_t i = 0; !rc && i < left; i++) rc = jb_putc(&b, ' ');
        if (!rc) rc = jb_put_str(&b, s);
        for (int64_t i = 0; !rc && i < right; i++) rc = jb_putc(&b, ' ');
        rc = rc ? mem_err(c) : buf_str(c, &b, out);
        jb_free(&b);
        return rc;
    }
    }
    return rt_err(x, FRT_ERR_UNSUPPORTED, "filter is not supported");
}

/* ---- methods ---------------------------------------------------------------------------- */
static int call_method(ctx *c, const jnode *x, jval self, const char *m, const jargs *a, jval *out)
{
    jval p[3];
    if (self.t == JT_DICT) {
        if (!strcmp(m, "get")) {
            FRT_TRY(bind(x, "get", a, 0, (const char *const[]){"key", "default", NULL}, p));
            if (a->nkw) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "get() takes no keyword arguments");
            if (a->npos < 1) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "get expected at least 1 argument, got 0");
            jval *v = jd_get(self.d, p[0]);
            *out = v ? *v : absent(p[1]) ? jv_none() : p[1];
            return 0;
        }
        FRT_TRY(bind(x, m, a, 0, (const char *const[]){NULL}, p));
        if (!strcmp(m, "copy")) {
            jdict *d = jd_new(c->a, self.d->n);
            if (!d) return mem_err(c);
            for (size_t i = 0; i < self.d->n; i++) FRT_TRY(jd_set(c->a, d, self.d->k[i], self.d->v[i]) ? mem_err(c) : 0);
            out->t = JT_DICT;
            out->d = d;
            return 0;
        }
        jargs none = {0};
        if (!strcmp(m, "items")) return apply_filter(c, x, F_ITEMS, self, &none, out);
        FRT_TRY(make_list(c, self.d->n, out));
        for (size_t i = 0; i < self.d->n; i++) out->l->v[i] = !strcmp(m, "keys") ? self.d->k[i] : self.d->v[i];
        return 0;
    }
    if (self.t == JT_LIST) {
        if (!strcmp(m, "copy")) {
            FRT_TRY(bind(x, m, a, 0, (const char *const[]){NULL}, p));
            FRT_TRY(make_list(c, self.l->n, out));
            if (self.l->n) memcpy(out->l->v, self.l->v, self.l->n * sizeof(jval));
            return 0;
        }
        FRT_TRY(bind(x, m, a, 0, (const char *const[]){"value", NULL}, p));
        if (a->npos != 1) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s() takes exactly one argument", m);
        int64_t cnt = 0;
        for (size_t i = 0; i < self.l->n; i++)
            if (jv_equal(self.l->v[i], p[0])) {
                if (!strcmp(m, "index")) {
                    *out = jv_int((int64_t)i);
                    return 0;
                }
                cnt++;
            }
        if (!strcmp(m, "index")) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "list.index(x): x not in list");
        *out = jv_int(cnt);
        return 0;
    }
    /* str */
    sspan s = {self.s.p, self.s.n};
    if (a->nkw && strcmp(m, "split") && strcmp(m, "rsplit"))
        return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "str.%s() takes no keyword arguments", m);
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        if (a->npos != 1)
            return rt_err(x, a->npos > 1 ? FRT_ERR_UNSUPPORTED : FRT_ERR_INVALID_ARGUMENT,
                          a->npos > 1 ? "str.%s() with start / end is not supported" : "str.%s() takes one argument", m);
        jval arg = a->pos[0];
        jval one[1];
        jlist tmp = {1, one, 0};
        const jlist *cands = &tmp;
        if (arg.t == JT_LIST && arg.l->tuple) cands = arg.l;
        else if (arg.t == JT_STR) one[0] = arg;
        else return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s first arg must be str or a tuple of str, not %s", m, jv_type_name(arg));
        int yes = 0;
        for (size_t i = 0; i < cands->n && !yes; i++) {
            jval w = cands->v[i];
            if (w.t != JT_STR) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "tuple for %s must only contain str", m);
            if (w.s.n <= s.n)
                yes = m[0] == 's' ? !memcmp(s.p, w.s.p, w.s.n) : !memcmp(s.p + s.n - w.s.n, w.s.p, w.s.n);
        }
        *out = jv_bool(yes);
        return 0;
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        FRT_TRY(bind(x, m, a, 0, (const char *const[]){"sep", "maxsplit", NULL}, p));
        jval sep = absent(p[0]) ? jv_none() : p[0];
        if (sep.t != JT_NONE && sep.t != JT_STR) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "must be str or None, not %s", jv_type_name(sep));
        int64_t ms = -1;
        if (!absent(p[1])) {
            if (!is_int(p[1])) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "maxsplit must be an integer");
            ms = int_of(p[1]);
        }
        return py_split(c, x, self, sep, ms, m[0] == 'r', out);
    }
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        FRT_TRY(bind(x, m, a, 0, (const char *const[]){"chars", NULL}, p));
        if (!absent(p[0]) && p[0].t != JT_NONE && p[0].t != JT_STR)
            return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s arg must be None or str", m);
        sspan r = py_strip(s, m[0] != 'r', m[0] != 'l', p[0]);
        FRT_TRY(sub_str(c, self, (size_t)(r.p - s.p), r.n, out));
        out->safe = self.safe;
        return 0;
    }
    if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "capitalize") || !strcmp(m, "title") ||
        !strcmp(m, "casefold")) {
        FRT_TRY(bind(x, m, a, 0, (const char *const[]){NULL}, p));
        int mode = !strcmp(m, "upper") ? 0 : !strcmp(m, "capitalize") ? 2 : !strcmp(m, "title") ? 4 : 1;
        return map_case(c, self, mode, out);
    }
    if (!strcmp(m, "replace")) {
        if (a->npos < 2 || a->npos > 3) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "replace expected 2 or 3 arguments");
        if (a->pos[0].t != JT_STR || a->pos[1].t != JT_STR) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "replace arguments must be str");
        int64_t cnt = -1;
        if (a->npos == 3) {
            if (!is_int(a->pos[2])) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "replace count must be an integer");
            cnt = int_of(a->pos[2]);
        }
        return py_replace(c, self, a->pos[0], a->pos[1], cnt, out);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count") || !strcmp(m, "index") || !strcmp(m, "rindex")) {
        if (a->npos != 1) return rt_err(x, a->npos > 1 ? FRT_ERR_UNSUPPORTED : FRT_ERR_INVALID_ARGUMENT,
                                        a->npos > 1 ? "str.%s() with start / end is not supported" : "str.%s() takes one argument", m);
        if (a->pos[0].t != JT_STR) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "must be str, not %s", jv_type_name(a->pos[0]));
        sspan sub = {a->pos[0].s.p, a->pos[0].s.n};
        if (!strcmp(m, "count")) {
            int64_t n = 0;
            if (!sub.n) {
                *out = jv_int((int64_t)ju_count(s.p, s.n) + 1);
                return 0;
            }
            for (const char *f = find_sub(s, sub, 0); f; f = find_sub(s, sub, (size_t)(f - s.p) + sub.n)) n++;
            *out = jv_int(n);
            return 0;
        }
        const char *f = NULL;
        if (m[0] == 'r') {
            for (size_t i = s.n >= sub.n ? s.n - sub.n + 1 : 0; i-- > 0;)
                if (!memcmp(s.p + i, sub.p, sub.n)) {
                    f = s.p + i;
                    break;
                }
        } else {
            f = find_sub(s, sub, 0);
        }
        if (!f && strstr(m, "index")) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "substring not found");
        *out = jv_int(f ? (int64_t)ju_count(s.p, (size_t)(f - s.p)) : -1);
        return 0;
    }
    if (!strcmp(m, "join")) {
        if (a->npos != 1) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "join() takes exactly one argument");
        jlist *items;
        FRT_TRY(iterate(c, x, a->pos[0], &items));
        jbuf b = {.limit = c->lim.max_output};
        int rc = 0;
        for (size_t i = 0; !rc && i < items->n; i++) {
            if (items->v[i].t != JT_STR) {
                jb_free(&b);
                return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "sequence item %zu: expected str instance, %s found", i,
                              jv_type_name(items->v[i]));
            }
            if (i) rc = jb_put_str(&b, self);
            if (!rc) rc = jb_put_str(&b, items->v[i]);
        }
        if (!rc) rc = buf_str(c, &b, out);
        if (rc && b.over) rc = buf_err(c, &b, rc);
        jb_free(&b);
        return rc;
    }
    if (!strcmp(m, "splitlines")) {
        if (a->npos) return rt_err(x, FRT_ERR_UNSUPPORTED, "splitlines(keepends) is not supported");
        return py_splitlines(c, self, out);
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        if (a->npos != 1 || a->pos[0].t != JT_STR) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s() takes one str", m);
        jval w = a->pos[0];
        *out = self;
        if (w.s.n <= s.n) {
            if (m[6] == 'p' && !memcmp(s.p, w.s.p, w.s.n)) return sub_str(c, self, w.s.n, s.n - w.s.n, out);
            if (m[6] == 's' && !memcmp(s.p + s.n - w.s.n, w.s.p, w.s.n)) return sub_str(c, self, 0, s.n - w.s.n, out);
        }
        return 0;
    }
    if (!strncmp(m, "is", 2) && (!strcmp(m, "isdigit") || !strcmp(m, "isalpha") || !strcmp(m, "isalnum") ||
                                 !strcmp(m, "isspace") || !strcmp(m, "islower") || !strcmp(m, "isupper"))) {
        if (a->npos) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s() takes no arguments", m);
        if (!strcmp(m, "islower") || !strcmp(m, "isupper")) {
            int r;
            FRT_TRY(run_test(c, x, m[2] == 'l' ? T_LOWER : T_UPPER, self, NULL, 0, &r));
            *out = jv_bool(r);
            return 0;
        }
        int ok = s.n > 0;
        size_t pos = 0;
        uint32_t cp;
        while (ok && ju_decode(s.p, s.n, &pos, &cp)) {
            const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
            int alpha = pr->category >= UTF8PROC_CATEGORY_LU && pr->category <= UTF8PROC_CATEGORY_LO;
            int digit = pr->category == UTF8PROC_CATEGORY_ND;
            if (!strcmp(m, "isdigit")) ok = digit;
            else if (!strcmp(m, "isalpha")) ok = alpha;
            else if (!strcmp(m, "isalnum")) ok = alpha || pr->category == UTF8PROC_CATEGORY_ND ||
                                                 pr->category == UTF8PROC_CATEGORY_NL || pr->category == UTF8PROC_CATEGORY_NO;
            else ok = jpy_isspace(cp);
        }
        *out = jv_bool(ok);
        return 0;
    }
    return rt_err(x, FRT_ERR_UNSUPPORTED, "the str method '%s' is not supported", m);
}

/* ---- calls -------------------------------------------------------------------------------- */
static int call_macro(ctx *c, const jnode *x, jmacro *m, const jargs *a, jval caller, jval *out)
{
    if (c->depth >= c->lim.max_depth)
        return rt_err(x, FRT_ERR_OUT_OF_RANGE, "macro calls nested deeper than %d (limit max_depth)", c->lim.max_depth);
    const jnode *def = m->def;
    jscope *s = new_scope(c, m->closure ? m->closure : c->root);
    if (!s) return mem_err(c);
    size_t np = def->n_names;
    jval vargs, kw;
    size_t nextra = a->npos > np ? a->npos - np : 0;
    FRT_TRY(make_list(c, nextra, &vargs));
    vargs.l->tuple = 1;
    for (size_t i = 0; i < nextra; i++) vargs.l->v[i] = a->pos[np + i];
    jdict *kd = jd_new(c->a, 0);
    if (!kd) return mem_err(c);
    kw.t = JT_DICT;
    kw.safe = 0;
    kw.d = kd;
    jval *vals = ja_alloc(c->a, (np ? np : 1) * sizeof *vals);
    char *set = ja_alloc(c->a, np ? np : 1);
    if (!vals || !set) return mem_err(c);
    for (size_t i = 0; i < np && i < a->npos; i++) {
        vals[i] = a->pos[i];
        set[i] = 1;
    }
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < np && strcmp(def->names[i], a->kwn[k])) i++;
        if (i < np) {
            if (set[i]) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "macro '%s' got multiple values for argument '%s'",
                                      m->name ? m->name : "caller", a->kwn[k]);
            vals[i] = a->kwv[k];
            set[i] = 1;
        } else if (!strcmp(a->kwn[k], "caller") && caller.t == JT_UNDEF) {
            caller = a->kwv[k];
        } else {
            if (jd_set(c->a, kd, jv_str(a->kwn[k], strlen(a->kwn[k])), a->kwv[k])) return mem_err(c);
        }
    }
    FRT_TRY(scope_set(c, s, "varargs", vargs));
    FRT_TRY(scope_set(c, s, "kwargs", kw));
    if (caller.t != JT_UNDEF) FRT_TRY(scope_set(c, s, "caller", caller));
    for (size_t i = 0; i < np; i++) {
        if (!set[i]) {
            const jnode *d = def->kwargs.n > i ? def->kwargs.v[i] : NULL;
            if (d)
                FRT_TRY(eval(c, s, d, &vals[i]));
            else
                vals[i] = jv_undef(def->names[i]);
        }
        FRT_TRY(scope_set(c, s, def->names[i], vals[i]));
    }
    jbuf b = {.limit = c->lim.max_output};
    c->depth++;
    int rc = exec_body(c, s, def->body, &b);
    c->depth--;
    c->ctl = 0;
    if (!rc) rc = buf_str(c, &b, out);
    jb_free(&b);
    return rc;
}

static int strftime_now(ctx *c, const jnode *x, jval fmt, jval *out)
{
    if (fmt.t != JT_STR) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "strftime_now: the format must be a string");
    if (memchr(fmt.s.p, '\0', fmt.s.n) || fmt.s.n > 256) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "strftime_now: bad format");
    char f[260], res[1024];
    memcpy(f, fmt.s.p, fmt.s.n);
    f[fmt.s.n] = '\0';
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    size_t n = strftime(res, sizeof res, f, &tmv);
    if (n == 0 && fmt.s.n) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "strftime_now: the result is empty or too long");
    return new_str(c, res, n, out);
}

static int call_value(ctx *c, const jnode *x, jval fn, const jargs *a, jval *out)
{
    if (fn.t == JT_MACRO) return call_macro(c, x, fn.m, a, fn.m->caller, out);
    if (fn.t == JT_UNDEF) return undef_err(x, fn);
    if (fn.t != JT_FUNC) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "'%s' object is not callable", jv_type_name(fn));
    jval p[3];
    switch (fn.fn->id) {
    case JF_RANGE: {
        if (a->nkw || a->npos < 1 || a->npos > 3) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "range expected 1 to 3 integer arguments");
        for (size_t i = 0; i < a->npos; i++)
            if (!is_int(a->pos[i])) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "range: arguments must be integers");
        int64_t lo = a->npos > 1 ? int_of(a->pos[0]) : 0, hi = a->npos > 1 ? int_of(a->pos[1]) : int_of(a->pos[0]);
        int64_t st = a->npos > 2 ? int_of(a->pos[2]) : 1;
        if (st == 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "range() arg 3 must not be zero");
        double cnt = st > 0 ? (hi > lo ? ((double)hi - (double)lo - 1) / (double)st + 1 : 0)
                            : (lo > hi ? ((double)lo - (double)hi - 1) / (double)-st + 1 : 0);
        if (cnt > (double)c->lim.max_steps)
            return rt_err(x, FRT_ERR_OUT_OF_RANGE, "range of %.0f items exceeds the step limit (max_steps)", cnt);
        size_t n = (size_t)cnt;
        FRT_TRY(make_list(c, n, out));
        for (size_t i = 0; i < n; i++) out->l->v[i] = jv_int(lo + (int64_t)i * st);
        return 0;
    }
    case JF_DICT:
    case JF_NAMESPACE: {
        jdict *d = jd_new(c->a, 0);
        if (!d) return mem_err(c);
        if (a->npos > 1) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s expected at most 1 positional argument", fn.fn->name);
        if (a->npos == 1) {
            jval src = a->pos[0];
            if (src.t == JT_DICT && !src.d->ns) {
                for (size_t i = 0; i < src.d->n; i++)
                    if (jd_set(c->a, d, src.d->k[i], src.d->v[i])) return mem_err(c);
            } else {
                return rt_err(x, FRT_ERR_UNSUPPORTED, "%s() from a non-dict argument is not supported", fn.fn->name);
            }
        }
        for (size_t k = 0; k < a->nkw; k++)
            if (jd_set(c->a, d, jv_str(a->kwn[k], strlen(a->kwn[k])), a->kwv[k])) return mem_err(c);
        d->ns = fn.fn->id == JF_NAMESPACE;
        out->t = JT_DICT;
        out->safe = 0;
        out->d = d;
        return 0;
    }
    case JF_RAISE: {
        FRT_TRY(bind(x, "raise_exception", a, 0, (const char *const[]){"message", NULL}, p));
        jval msg;
        FRT_TRY(to_str(c, p[0], &msg));
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat template: %.*s", (int)(msg.s.n > 2000 ? 2000 : msg.s.n), msg.s.p);
    }
    case JF_STRFTIME:
        FRT_TRY(bind(x, "strftime_now", a, 0, (const char *const[]){"format", NULL}, p));
        return strftime_now(c, x, p[0], out);
    case JF_CYCLE: {
        if (a->nkw || a->npos == 0) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "no items for cycling given");
        jval *i = jd_get_str(fn.fn->self.d, "index0", 6);
        *out = a->pos[(size_t)(i ? i->i : 0) % a->npos];
        return 0;
    }
    case JF_METHOD: return call_method(c, x, fn.fn->self, fn.fn->name, a, out);
    default: return rt_err(x, FRT_ERR_UNSUPPORTED, "the global '%s' is not supported", fn.fn->name);
    }
}

/* ---- expressions ------------------------------------------------------------------------------ */
/* nested eval / exec calls allowed: a long chain like a + b + c + ... is a
 * deep tree, and macros nest too; the C stack must hold them (also under the sanitizers, whose frames are large) */
#define MAX_FRAMES 500

static int eval_node(ctx *c, jscope *s, const jnode *x, jval *out);

static int eval(ctx *c, jscope *s, const jnode *x, jval *out)
{
    if (c->frames >= MAX_FRAMES)
        return rt_err(x, FRT_ERR_OUT_OF_RANGE, "expressions and statements nested deeper than %d", MAX_FRAMES);
    c->frames++;
    int rc = eval_node(c, s, x, out);
    c->frames--;
    return rc;
}

static int eval_node(ctx *c, jscope *s, const jnode *x, jval *out)
{
    FRT_TRY(step(c, x));
    jval a, b;
    switch (x->kind) {
    case JN_LIT: *out = x->lit; return 0;
    case JN_NAME: return lookup(c, s, x->name, out);
    case JN_ATTR:
        FRT_TRY(eval(c, s, x->a, &a));
        return get_attr(c, x, a, x->name, strlen(x->name), out);
    case JN_ITEM:
        FRT_TRY(eval(c, s, x->a, &a));
        FRT_TRY(eval(c, s, x->b, &b));
        return get_item(c, x, a, b, out);
    case JN_SLICE: {
        jval lo = jv_none(), hi = jv_none(), st = jv_none();
        FRT_TRY(eval(c, s, x->a, &a));
        if (x->b->a) FRT_TRY(eval(c, s, x->b->a, &lo));
        if (x->b->b) FRT_TRY(eval(c, s, x->b->b, &hi));
        if (x->b->c) FRT_TRY(eval(c, s, x->b->c, &st));
        return slice_value(c, x, a, lo, hi, st, out);
    }
    case JN_CALL: {
        jargs args;
        FRT_TRY(eval(c, s, x->a, &a));
        FRT_TRY(eval_args(c, s, x, &args));
        return call_value(c, x, a, &args, out);
    }
    case JN_FILTER: {
        jargs args;
        if (x->a)
            FRT_TRY(eval(c, s, x->a, &a));
        else
            a = c->placeholder;
        FRT_TRY(eval_args(c, s, x, &args));
        return apply_filter(c, x, x->fid, a, &args, out);
    }
    case JN_TEST: {
        jargs args;
        int r;
        FRT_TRY(eval(c, s, x->a, &a));
        FRT_TRY(eval_args(c, s, x, &args));
        if (args.nkw) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "tests take no keyword arguments");
        FRT_TRY(run_test(c, x, x->fid, a, args.pos, args.npos, &r));
        *out = jv_bool(x->neg ? !r : r);
        return 0;
    }
    case JN_NEG:
    case JN_POS:
        FRT_TRY(eval(c, s, x->a, &a));
        if (a.t == JT_UNDEF) return undef_err(x, a);
        if (!is_numv(a)) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "bad operand type for unary %c: '%s'",
                                       x->kind == JN_NEG ? '-' : '+', jv_type_name(a));
        if (x->kind == JN_POS) *out = a.t == JT_BOOL ? jv_int(a.b) : a;
        else if (a.t == JT_FLOAT) *out = jv_float(-a.f);
        else if (int_of(a) == INT64_MIN) return overflow(x);
        else *out = jv_int(-int_of(a));
        return 0;
    case JN_NOT:
        FRT_TRY(eval(c, s, x->a, &a));
        *out = jv_bool(!jv_truthy(a));
        return 0;
    case JN_AND:
    case JN_OR:
        FRT_TRY(eval(c, s, x->a, &a));
        if (jv_truthy(a) == (x->kind == JN_OR)) {
            *out = a;
            return 0;
        }
        return eval(c, s, x->b, out);
    case JN_BINOP:
        FRT_TRY(eval(c, s, x->a, &a));
        FRT_TRY(eval(c, s, x->b, &b));
        return binop(c, x, x->op, a, b, out);
    case JN_CONCAT: {
        jbuf buf = {.limit = c->lim.max_output};
        int rc = 0;
        for (size_t i = 0; !rc && i < x->args.n; i++) {
            rc = eval(c, s, x->args.v[i], &a);
            if (!rc) rc = jv_str_append(&buf, a);
            if (rc && buf.over) rc = buf_err(c, &buf, rc);
        }
        if (!rc) rc = buf_str(c, &buf, out);
        jb_free(&buf);
        return rc;
    }
    case JN_COMPARE: {
        FRT_TRY(eval(c, s, x->a, &a));
        for (size_t i = 0; i < x->args.n; i++) {
            FRT_TRY(eval(c, s, x->args.v[i], &b));
            int r, cmp;
            switch (x->ops[i]) {
            case JOP_EQ: r = jv_equal(a, b); break;
            case JOP_NE: r = !jv_equal(a, b); break;
            case JOP_LT: FRT_TRY(compare_lt(x, a, b, &cmp, "<")); r = cmp < 0; break;
            case JOP_LE: FRT_TRY(compare_lt(x, a, b, &cmp, "<=")); r = cmp <= 0; break;
            case JOP_GT: FRT_TRY(compare_lt(x, a, b, &cmp, ">")); r = cmp > 0; break;
            case JOP_GE: FRT_TRY(compare_lt(x, a, b, &cmp, ">=")); r = cmp >= 0; break;
            case JOP_IN: FRT_TRY(contains(x, a, b, &r)); break;
            default: FRT_TRY(contains(x, a, b, &r)); r = !r; break;
            }
            if (!r) {
                *out = jv_bool(0);
                return 0;
            }
            a = b;
        }
        *out = jv_bool(1);
        return 0;
    }
    case JN_COND:
        FRT_TRY(eval(c, s, x->a, &a));
        if (jv_truthy(a)) return eval(c, s, x->b, out);
        if (x->c) return eval(c, s, x->c, out);
        *out = jv_undef(NULL);
        return 0;
    case JN_LIST:
    case JN_TUPLE:
        FRT_TRY(make_list(c, x->args.n, out));
        out->l->tuple = x->kind == JN_TUPLE;
        for (size_t i = 0; i < x->args.n; i++) FRT_TRY(eval(c, s, x->args.v[i], &out->l->v[i]));
        return 0;
    case JN_DICT: {
        jdict *d = jd_new(c->a, x->args.n);
        if (!d) return mem_err(c);
        for (size_t i = 0; i < x->args.n; i++) {
            FRT_TRY(eval(c, s, x->args.v[i], &a));
            FRT_TRY(eval(c, s, x->kwargs.v[i], &b));
            if (a.t == JT_LIST && !a.l->tuple) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "unhashable type: 'list'");
            if (a.t == JT_DICT) return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "unhashable type: 'dict'");
            if (jd_set(c->a, d, a, b)) return mem_err(c);
        }
        out->t = JT_DICT;
        out->safe = 0;
        out->d = d;
        return 0;
    }
    default: break;
    }
    return rt_err(x, FRT_ERR_UNSUPPORTED, "this expression is not supported");
}

/* ---- statements ---------------------------------------------------------------------------------- */
static int emit(ctx *c, jbuf *out, jval v)
{
    int rc = jv_str_append(out, v);
    return rc ? buf_err(c, out, rc) : 0;
}

/* Assigns V to the names of target node X (one name, or unpacking). */
static int assign_names(ctx *c, jscope *s, const jnode *x, jval v)
{
    if (x->n_names == 1) return scope_set(c, s, x->names[0], v);
    jlist *items;
    if (v.t != JT_LIST && v.t != JT_STR && !(v.t == JT_DICT && !v.d->ns))
        return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "cannot unpack non-iterable %s object", jv_type_name(v));
    FRT_TRY(iterate(c, x, v, &items));
    if (items->n != x->n_names)
        return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "%s values to unpack (expected %zu, got %zu)",
                      items->n > x->n_names ? "too many" : "not enough", x->n_names, items->n);
    for (size_t i = 0; i < items->n; i++) FRT_TRY(scope_set(c, s, x->names[i], items->v[i]));
    return 0;
}

static int exec_for(ctx *c, jscope *s, const jnode *x, jbuf *out)
{
    jval it;
    FRT_TRY(eval(c, s, x->a, &it));
    jlist *items;
    FRT_TRY(iterate(c, x, it, &items));
    /* the if-clause filters before the loop (loop.length counts what passes) */
    if (x->b) {
        jval kept;
        FRT_TRY(make_list(c, items->n, &kept));
        size_t n = 0;
        jscope *fs = new_scope(c, s);
        if (!fs) return mem_err(c);
        for (size_t i = 0; i < items->n; i++) {
            fs->vars->n = 0;
            FRT_TRY(assign_names(c, fs, x, items->v[i]));
            jval r;
            FRT_TRY(eval(c, fs, x->b, &r));
            if (jv_truthy(r)) kept.l->v[n++] = items->v[i];
        }
        kept.l->n = n;
        items = kept.l;
    }
    if (!items->n) return x->else_body ? exec_body(c, s, x->else_body, out) : 0;
    jscope *is = new_scope(c, s);
    jdict *loop = jd_new(c->a, 12);
    if (!is || !loop) return mem_err(c);
    jval loopv = {.t = JT_DICT};
    loopv.d = loop;
    size_t n = items->n;
    jval cyc; /* loop.cycle reads loop.index0 when called */
    FRT_TRY(make_func(c, JF_CYCLE, loopv, "cycle", &cyc));
    for (size_t i = 0; i < n; i++) {
        FRT_TRY(step(c, x));
        is->vars->n = 0;
        loop->n = 0;
        struct {
            const char *k;
            jval v;
        } kv[] = {
            {"index", jv_int((int64_t)i + 1)}, {"index0", jv_int((int64_t)i)},
            {"revindex", jv_int((int64_t)(n - i))}, {"revindex0", jv_int((int64_t)(n - i - 1))},
            {"first", jv_bool(i == 0)}, {"last", jv_bool(i == n - 1)}, {"length", jv_int((int64_t)n)},
            {"depth", jv_int(1)}, {"depth0", jv_int(0)}, {"cycle", cyc},
            {"previtem", i > 0 ? items->v[i - 1] : jv_undef(NULL)},
            {"nextitem", i + 1 < n ? items->v[i + 1] : jv_undef(NULL)},
        };
        /* the loop dict is private to this loop: filled in place (capacity 12) */
        for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++) {
            if (kv[k].v.t == JT_UNDEF) continue;
            loop->k[loop->n] = jv_str(kv[k].k, strlen(kv[k].k));
            loop->v[loop->n++] = kv[k].v;
        }
        FRT_TRY(scope_set(c, is, "loop", loopv));
        FRT_TRY(assign_names(c, is, x, items->v[i]));
        FRT_TRY(exec_body(c, is, x->body, out));
        if (c->ctl == 1) {
            c->ctl = 0;
            break;
        }
        c->ctl = 0;
    }
    return 0;
}

static int exec_stmt_node(ctx *c, jscope *s, const jnode *x, jbuf *out);

static int exec_stmt(ctx *c, jscope *s, const jnode *x, jbuf *out)
{
    if (c->frames >= MAX_FRAMES)
        return rt_err(x, FRT_ERR_OUT_OF_RANGE, "expressions and statements nested deeper than %d", MAX_FRAMES);
    c->frames++;
    int rc = exec_stmt_node(c, s, x, out);
    c->frames--;
    return rc;
}

static int exec_stmt_node(ctx *c, jscope *s, const jnode *x, jbuf *out)
{
    FRT_TRY(step(c, x));
    jval v;
    switch (x->kind) {
    case JN_TEXT: {
        int rc = jb_put(out, x->lit.s.p, x->lit.s.n);
        return rc ? buf_err(c, out, rc) : 0;
    }
    case JN_OUTPUT:
        FRT_TRY(eval(c, s, x->a, &v));
        return emit(c, out, v);
    case JN_BODY: return exec_body(c, s, x, out);
    case JN_IF:
        for (size_t i = 0; i < x->args.n; i++) {
            const jnode *br = x->args.v[i];
            FRT_TRY(eval(c, s, br->a, &v));
            if (jv_truthy(v)) return exec_body(c, s, br->body, out);
        }
        return x->else_body ? exec_body(c, s, x->else_body, out) : 0;
    case JN_FOR: return exec_for(c, s, x, out);
    case JN_SET:
        FRT_TRY(eval(c, s, x->a, &v));
        if (x->name) { /* ns.attr = v */
            jval ns;
            FRT_TRY(lookup(c, s, x->names[0], &ns));
            if (ns.t != JT_DICT || !ns.d->ns)
                return rt_err(x, FRT_ERR_INVALID_ARGUMENT, "cannot assign attribute on non-namespace object");
            if (jd_set(c->a, ns.d, jv_str(x->name, strlen(x->name)), v)) return mem_err(c);
            return 0;
        }
        return assign_names(c, s, x, v);
    case JN_SET_BLOCK:
    case JN_FILTER_BLOCK: {
        jbuf b = {.limit = c->lim.max_output};
        int rc = exec_body(c, s, x->body, &b);
        if (!rc) rc = buf_str(c, &b, &v);
        jb_free(&b);
        FRT_TRY(rc);
        if (x->a) {
            jval saved = c->placeholder;
            c->placeholder = v;
            rc = eval(c, s, x->a, &v);
            c->placeholder = saved;
            FRT_TRY(rc);
        }
        if (x->kind == JN_SET_BLOCK) return scope_set(c, s, x->names[0], v);
        return emit(c, out, v);
    }
    case JN_MACRO: {
        jmacro *m = ja_alloc(c->a, sizeof *m);
        if (!m) return mem_err(c);
        m->def = x;
        m->name = x->name;
        m->closure = s;
        m->caller = jv_undef(NULL);
        v.t = JT_MACRO;
        v.m = m;
        return scope_set(c, s, x->name, v);
    }
    case JN_CALL_BLOCK: {
        jmacro *cm = ja_alloc(c->a, sizeof *cm);
        if (!cm) return mem_err(c);
        cm->def = x;
        cm->name = "caller";
        cm->closure = s;
        cm->caller = jv_undef(NULL);
        jval caller = {.t = JT_MACRO};
        caller.m = cm;
        jval fn;
        jargs args;
        FRT_TRY(eval(c, s, x->a->a, &fn));
        FRT_TRY(eval_args(c, s, x->a, &args));
        if (fn.t != JT_MACRO) return rt_err(x, FRT_ERR_UNSUPPORTED, "{%% call %%} of something other than a macro is not supported");
        FRT_TRY(call_macro(c, x, fn.m, &args, caller, &v));
        return emit(c, out, v);
    }
    case JN_BREAK: c->ctl = 1; return 0;
    case JN_CONTINUE: c->ctl = 2; return 0;
    default: break;
    }
    return rt_err(x, FRT_ERR_UNSUPPORTED, "this statement is not supported");
}

static int exec_body(ctx *c, jscope *s, const jnode *body, jbuf *out)
{
    for (size_t i = 0; i < body->args.n; i++) {
        FRT_TRY(exec_stmt(c, s, body->args.v[i], out));
        if (c->ctl) break;
    }
    return 0;
}

/* ---- entry points ------------------------------------------------------------------------------- */
frt_jinja_limits frt_jinja_default_limits(void)
{
    frt_jinja_limits l = {.max_output = 16u << 20, .max_memory = 256u << 20, .max_steps = 10000000, .max_depth = 64};
    return l;
}

/* The globals: the members of VARS, then those of CONTENT (marked). */
static int load_globals(ctx *c, const json_t *vars, const json_t *content)
{
    jval g = {0};
    if (vars) {
        if (jv_from_json(c->a, vars, &g)) return mem_err(c);
    } else {
        g.t = JT_DICT;
        g.d = jd_new(c->a, 0);
        if (!g.d) return mem_err(c);
    }
    const char *k;
    size_t kn;
    json_t *v;
    if (content) json_object_keylen_foreach((json_t *)content, k, kn, v) {
        if (jd_get_str(g.d, k, kn))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_jinja_render: the variable '%.*s' is given twice",
                             (int)(kn > 100 ? 100 : kn), k);
        jval jv;
        if (jv_from_json_content(c->a, v, &jv) || jd_set(c->a, g.d, jv_str(k, kn), jv)) return mem_err(c);
    }
    c->globals = g.d;
    return 0;
}

int frt_jinja_render_ex(const frt_jinja_template *t, const json_t *vars, const json_t *content,
                        const frt_jinja_limits *limits, char **text, size_t *len, frt_text_span **spans,
                        size_t *n_spans)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    if (!t || !text || (content && (!spans || !n_spans)))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_jinja_render: NULL argument");
    if (vars && !json_is_object(vars)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_jinja_render: vars is not a JSON object");
    if (content && !json_is_object(content))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_jinja_render: content is not a JSON object");
    frt_jinja_limits lim = limits ? *limits : frt_jinja_default_limits();
    frt_jinja_limits d = frt_jinja_default_limits();
    if (!lim.max_output) lim.max_output = d.max_output;
    if (!lim.max_memory) lim.max_memory = d.max_memory;
    if (!lim.max_steps) lim.max_steps = d.max_steps;
    if (lim.max_depth <= 0) lim.max_depth = d.max_depth;
    jarena arena = {.limit = lim.max_memory};
    ctx c = {.a = &arena, .lim = lim};
    int rc = 0;
    if (vars || content) rc = load_globals(&c, vars, content);
    if (!rc) {
        c.root = new_scope(&c, NULL);
        if (!c.root) rc = mem_err(&c);
    }
    jbuf out = {.limit = lim.max_output};
    if (!rc) rc = jb_put(&out, "", 0) ? buf_err(&c, &out, FRT_ERR_OUT_OF_MEMORY) : 0;
    if (!rc) rc = exec_body(&c, c.root, t->root, &out);
    ja_free(&arena);
    if (rc) {
        jb_free(&out);
        return rc;
    }
    *text = out.p;
    if (len) *len = out.n;
    if (spans) {
        *spans = out.sp;
        *n_spans = out.nsp;
    } else {
        free(out.sp);
    }
    return 0;
}

int frt_jinja_render(const frt_jinja_template *t, const json_t *vars, const frt_jinja_limits *limits, char **text,
                     size_t *len)
{
    return frt_jinja_render_ex(t, vars, NULL, limits, text, len, NULL, NULL);
}
