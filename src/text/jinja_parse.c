/* jinja_parse.c - template text -> tree.
 *
 * The lexer follows Jinja2 3.1's lexer.py with the settings of transformers
 * (trim_blocks, lstrip_blocks, keep_trailing_newline=False): newlines
 * normalized to "\n", one trailing newline dropped, "-" strips all white
 * space on its side of a tag, "+" turns lstrip_blocks / trim_blocks off for
 * its side, lstrip_blocks strips the spaces and tabs before a block or
 * comment tag that starts a line, trim_blocks drops the first newline after
 * a block or comment tag; tag ends are recognized only outside brackets.
 * The parser follows parser.py: the same statements, the same precedence
 * (or < and < not < comparisons < + - < ~ < * / // % < ** < unary
 * < postfix / filters / tests). */
#include "text/jinja_internal.h"
#include "text/tok_internal.h"
#include "util/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum {
    TK_EOF = 0, TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP,
};

typedef struct tok {
    int type;
    const char *p; /* TK_TEXT / TK_STRING: value (arena); TK_NAME / TK_OP: the text */
    size_t n;
    int64_t i;
    double f;
    size_t off; /* offset in the normalized source */
} tok;

#define MAX_DEPTH 200

typedef struct parser {
    jarena *a;
    const char *src; /* normalized */
    size_t n;
    tok *t;
    size_t nt, ct, pos;
    int depth;
    int loop_depth;
    int macro_depth;
    /* positions: code points before each byte offset, and line starts */
    uint32_t *cp_before; /* n + 1 entries, NULL when not built */
    size_t *line_start;
    size_t n_lines;
} parser;

static int build_positions(parser *ps)
{
    ps->cp_before = malloc((ps->n + 1) * sizeof *ps->cp_before);
    size_t nl = 1;
    for (size_t i = 0; i < ps->n; i++) nl += ps->src[i] == '\n';
    ps->line_start = malloc(nl * sizeof *ps->line_start);
    if (!ps->cp_before || !ps->line_start) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    uint32_t cps = 0;
    ps->line_start[0] = 0;
    ps->n_lines = 1;
    for (size_t i = 0; i < ps->n; i++) {
        ps->cp_before[i] = cps;
        if (((unsigned char)ps->src[i] & 0xC0) != 0x80) cps++;
        if (ps->src[i] == '\n') ps->line_start[ps->n_lines++] = i + 1;
    }
    ps->cp_before[ps->n] = cps;
    return 0;
}

/* 1-based line and column (in code points) of byte offset OFF */
static void line_col(const parser *ps, size_t off, int *line, int *col)
{
    if (off > ps->n) off = ps->n;
    if (!ps->cp_before) {
        *line = 1;
        *col = 1;
        return;
    }
    size_t lo = 0, hi = ps->n_lines; /* the last line start <= off */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (ps->line_start[mid] <= off) lo = mid;
        else hi = mid;
    }
    *line = (int)(lo + 1 > (size_t)INT32_MAX ? INT32_MAX : lo + 1);
    *col = (int)(ps->cp_before[off] - ps->cp_before[ps->line_start[lo]] + 1);
}

static int fail_at(const parser *ps, int status, size_t off, const char *fmt, const char *arg)
{
    int line, col;
    line_col(ps, off, &line, &col);
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    return frt_error(status, "chat template: line %d, column %d: %s", line, col, msg);
}

/* ---- lexer ------------------------------------------------------------------ */
static int push_tok(parser *ps, tok t)
{
    if (ps->nt == ps->ct) {
        size_t cap = ps->ct ? ps->ct * 2 : 256;
        tok *nt = realloc(ps->t, cap * sizeof *nt);
        if (!nt) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
        ps->t = nt;
        ps->ct = cap;
    }
    ps->t[ps->nt++] = t;
    return 0;
}

static int is_ws_at(const char *s, size_t n, size_t i, size_t *len)
{
    uint32_t cp;
    size_t j = i;
    if (!ju_decode(s, n, &j, &cp)) return 0;
    *len = j - i;
    return jpy_isspace(cp);
}

/* Python str.rstrip() of s[0..n): the new length. */
static size_t rstrip_len(const char *s, size_t n)
{
    while (n) {
        size_t i = n - 1;
        while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
        size_t l;
        if (!is_ws_at(s, n, i, &l)) break;
        n = i;
    }
    return n;
}

static size_t skip_ws(const char *s, size_t n, size_t p)
{
    size_t l;
    while (p < n && is_ws_at(s, n, p, &l)) p += l;
    return p;
}

static int push_text(parser *ps, size_t start, size_t len)
{
    if (!len) return 0;
    tok t = {.type = TK_TEXT, .p = ps->src + start, .n = len, .off = start};
    return push_tok(ps, t);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string literal at s[p] (the quote): Python's unicode-escape decoding of
 * its body (Jinja2 lexer.py: backslashreplace, then unicode-escape). */
static int lex_string(parser *ps, size_t p, size_t *end)
{
    const char *s = ps->src;
    char q = s[p];
    size_t i = p + 1;
    while (i < ps->n && s[i] != q) {
        if (s[i] == '\\' && i + 1 < ps->n) i++;
        i++;
    }
    if (i >= ps->n) return fail_at(ps, FRT_ERR_FORMAT, p, "unterminated string literal%s", "");
    *end = i + 1;
    char *out = ja_alloc(ps->a, i - p + 1);
    if (!out) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    size_t o = 0;
    for (size_t k = p + 1; k < i; k++) {
        char c = s[k];
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        char e = s[++k];
        uint32_t cp = 0;
        int nhex = 0;
        switch (e) {
        case '\n': continue;
        case '\\': out[o++] = '\\'; continue;
        case '\'': out[o++] = '\''; continue;
        case '"': out[o++] = '"'; continue;
        case 'a': out[o++] = '\a'; continue;
        case 'b': out[o++] = '\b'; continue;
        case 'f': out[o++] = '\f'; continue;
        case 'n': out[o++] = '\n'; continue;
        case 'r': out[o++] = '\r'; continue;
        case 't': out[o++] = '\t'; continue;
        case 'v': out[o++] = '\v'; continue;
        case 'x': nhex = 2; break;
        case 'u': nhex = 4; break;
        case 'U': nhex = 8; break;
        case 'N': return fail_at(ps, FRT_ERR_UNSUPPORTED, k - 1, "\\N{...} escapes are not supported%s", "");
        default:
            if (e >= '0' && e <= '7') {
                int d = 0;
                while (d < 3 && k < i && s[k] >= '0' && s[k] <= '7') {
                    cp = cp * 8 + (uint32_t)(s[k] - '0');
                    k++;
                    d++;
                }
                k--;
                o += (size_t)tok_utf8_encode(cp, out + o);
                continue;
            }
            out[o++] = '\\';
            out[o++] = e;
            continue;
        }
        for (int d = 0; d < nhex; d++) {
            int h = k + 1 < i ? hexval(s[k + 1]) : -1;
            if (h < 0) return fail_at(ps, FRT_ERR_FORMAT, k, "truncated \\%s escape in a string literal", (char[]){e, 0});
            cp = cp * 16 + (uint32_t)h;
            k++;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return fail_at(ps, FRT_ERR_UNSUPPORTED, k, "escapes outside Unicode scalar values (surrogates) are not "
                           "supported in string literals%s", "");
        o += (size_t)tok_utf8_encode(cp, out + o);
    }
    out[o] = '\0';
    tok t = {.type = TK_STRING, .p = out, .n = o, .off = p};
    return push_tok(ps, t);
}

static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
static const char ops1[] = "+-*/%~<>=.,:|()[]{}";

static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Tokens of one tag from s[p] until its end; *end after the end (and the
 * white space / newline the end eats). KIND '%' or '{'. */
static int lex_tag(parser *ps, char kind, size_t p, size_t *end, size_t *end_at)
{
    const char *s = ps->src;
    size_t n = ps->n;
    char stack[MAX_DEPTH];
    int depth = 0;
    size_t tag_start = p;
    for (;;) {
        p = skip_ws(s, n, p);
        *end_at = p;
        if (p >= n)
            return fail_at(ps, FRT_ERR_FORMAT, tag_start, "unexpected end of template: the tag is never closed%s", "");
        if (depth == 0) {
            if (kind == '%') {
                if (s[p] == '-' && p + 2 < n + 0 && s[p + 1] == '%' && s[p + 2] == '}') {
                    *end = skip_ws(s, n, p + 3);
                    break;
                }
                if (s[p] == '+' && p + 2 < n + 0 && s[p + 1] == '%' && s[p + 2] == '}') {
                    *end = p + 3;
                    break;
                }
                if (s[p] == '%' && p + 1 < n && s[p + 1] == '}') {
                    *end = p + 2 < n && s[p + 2] == '\n' ? p + 3 : p + 2;
                    break;
                }
            } else {
                if (s[p] == '-' && p + 2 < n && s[p + 1] == '}' && s[p + 2] == '}') {
                    *end = skip_ws(s, n, p + 3);
                    break;
                }
                if (s[p] == '}' && p + 1 < n && s[p + 1] == '}') {
                    *end = p + 2;
                    break;
                }
            }
        }
        char c = s[p];
        if (c == '\'' || c == '"') {
            size_t e = 0;
            FRT_TRY(lex_string(ps, p, &e));
            p = e;
        } else if (is_digit(c)) {
            size_t q = p;
            int after_dot = p > 0 && s[p - 1] == '.';
            while (q < n && (is_digit(s[q]) || (s[q] == '_' && q + 1 < n && is_digit(s[q + 1])))) q++;
            int is_float = 0;
            if (!after_dot && q + 1 < n && s[q] == '.' && is_digit(s[q + 1])) {
                is_float = 1;
                q++;
                while (q < n && (is_digit(s[q]) || (s[q] == '_' && q + 1 < n && is_digit(s[q + 1])))) q++;
            }
            if (!after_dot && q < n && (s[q] == 'e' || s[q] == 'E')) {
                size_t r = q + 1;
                if (r < n && (s[r] == '+' || s[r] == '-')) r++;
                if (r < n && is_digit(s[r])) {
                    is_float = 1;
                    q = r;
                    while (q < n && (is_digit(s[q]) || (s[q] == '_' && q + 1 < n && is_digit(s[q + 1])))) q++;
                }
            }
            char num[128];
            size_t k = 0;
            for (size_t r = p; r < q && k < sizeof num - 1; r++)
                if (s[r] != '_') num[k++] = s[r];
            num[k] = '\0';
            if (q - p >= sizeof num - 1) return fail_at(ps, FRT_ERR_FORMAT, p, "number literal too long%s", "");
            tok t = {.type = is_float ? TK_FLOAT : TK_INT, .off = p};
            errno = 0;
            if (is_float) {
                t.f = strtod(num, NULL);
            } else {
                t.i = strtoll(num, NULL, 10);
                if (errno == ERANGE)
                    return fail_at(ps, FRT_ERR_UNSUPPORTED, p, "integer literal beyond 64 bits is not supported%s", "");
            }
            FRT_TRY(push_tok(ps, t));
            p = q;
        } else if (is_name_start(c)) {
            size_t q = p;
            while (q < n && is_name_char(s[q])) q++;
            tok t = {.type = TK_NAME, .p = s + p, .n = q - p, .off = p};
            FRT_TRY(push_tok(ps, t));
            p = q;
        } else {
            size_t len = 0;
            for (int k = 0; ops2[k]; k++)
                if (p + 1 < n && s[p] == ops2[k][0] && s[p + 1] == ops2[k][1]) len = 2;
            if (!len && strchr(ops1, c) && c) len = 1;
            if (!len) {
                char ch[8] = {0};
                size_t l = (size_t)tok_utf8_len((unsigned char)c);
                memcpy(ch, s + p, l > 0 && l < 5 && p + l <= n ? l : 1);
                return fail_at(ps, FRT_ERR_FORMAT, p, "unexpected character '%s'", ch);
            }
            if (c == '(' || c == '[' || c == '{') {
                if (depth >= MAX_DEPTH) return fail_at(ps, FRT_ERR_OUT_OF_RANGE, p, "brackets nested too deeply%s", "");
                stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
            } else if (c == ')' || c == ']' || c == '}') {
                if (!depth) return fail_at(ps, FRT_ERR_FORMAT, p, "unexpected '%s'", (char[]){c, 0});
                if (stack[depth - 1] != c)
                    return fail_at(ps, FRT_ERR_FORMAT, p, "unexpected '%s'", (char[]){c, 0});
                depth--;
            }
            tok t = {.type = TK_OP, .p = s + p, .n = len, .off = p};
            FRT_TRY(push_tok(ps, t));
            p += len;
        }
    }
    return 0;
}

/* {% raw %} at s[p..] (after the sign): when it is one, its text up to
 * {% endraw %} becomes a text token and *end is past the endraw tag. */
static int lex_raw(parser *ps, size_t tag_at, size_t p, int *is_raw, size_t *end)
{
    const char *s = ps->src;
    size_t n = ps->n;
    *is_raw = 0;
    size_t q = skip_ws(s, n, p);
    if (!(q + 3 <= n && !memcmp(s + q, "raw", 3) && (q + 3 == n || !is_name_char(s[q + 3])))) return 0;
    q = skip_ws(s, n, q + 3);
    size_t body;
    if (q + 3 <= n && !memcmp(s + q, "-%}", 3))
        body = skip_ws(s, n, q + 3);
    else if (q + 2 <= n && !memcmp(s + q, "%}", 2))
        body = q + 2;
    else
        return 0;
    *is_raw = 1;
    for (size_t k = body; k + 1 < n; k++) {
        if (s[k] != '{' || s[k + 1] != '%') continue;
        size_t r = k + 2;
        int minus = r < n && s[r] == '-';
        if (r < n && (s[r] == '-' || s[r] == '+')) r++;
        r = skip_ws(s, n, r);
        if (!(r + 6 <= n && !memcmp(s + r, "endraw", 6))) continue;
        r = skip_ws(s, n, r + 6);
        size_t after;
        if (r + 3 <= n && !memcmp(s + r, "+%}", 3))
            after = r + 3;
        else if (r + 3 <= n && !memcmp(s + r, "-%}", 3))
            after = skip_ws(s, n, r + 3);
        else if (r + 2 <= n && !memcmp(s + r, "%}", 2))
            after = r + 2 < n && s[r + 2] == '\n' ? r + 3 : r + 2;
        else
            continue;
        size_t len = k - body;
        if (minus) len = rstrip_len(s + body, len);
        FRT_TRY(push_text(ps, body, len));
        *end = after;
        return 0;
    }
    return fail_at(ps, FRT_ERR_FORMAT, tag_at, "missing end of raw directive%s", "");
}

static int lex(parser *ps)
{
    const char *s = ps->src;
    size_t n = ps->n, pos = 0;
    int line_starting = 1;
    while (pos < n) {
        size_t i = pos;
        while (i + 1 < n && !(s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#'))) i++;
        if (i + 1 >= n) {
            FRT_TRY(push_text(ps, pos, n - pos));
            break;
        }
        char kind = s[i + 1];
        char sign = i + 2 < n && (s[i + 2] == '-' || s[i + 2] == '+') ? s[i + 2] : 0;
        size_t tlen = i - pos;
        if (sign == '-') {
            tlen = rstrip_len(s + pos, tlen);
        } else if (sign != '+' && kind != '{') {
            /* lstrip_blocks */
            size_t l_pos = 0;
            for (size_t k = tlen; k > 0; k--)
                if (s[pos + k - 1] == '\n') {
                    l_pos = k;
                    break;
                }
            if ((l_pos > 0 || line_starting) && l_pos < tlen) {
                int all_ws = 1;
                size_t k = pos + l_pos, l;
                while (k < pos + tlen) {
                    if (!is_ws_at(s, n, k, &l)) {
                        all_ws = 0;
                        break;
                    }
                    k += l;
                }
                if (all_ws) tlen = l_pos;
            }
        }
        size_t p = i + 2 + (sign ? 1 : 0);
        if (kind == '%') {
            int is_raw;
            size_t end = 0;
            FRT_TRY(push_text(ps, pos, tlen));
            FRT_TRY(lex_raw(ps, i, p, &is_raw, &end));
            if (is_raw) {
                line_starting = end > 0 && s[end - 1] == '\n';
                pos = end;
                continue;
            }
        } else {
            FRT_TRY(push_text(ps, pos, tlen));
        }
        if (kind == '#') {
            size_t e = p;
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= n) return fail_at(ps, FRT_ERR_FORMAT, i, "missing end of comment tag%s", "");
            size_t end = 0;
            if (e > p && s[e - 1] == '-')
                end = skip_ws(s, n, e + 2);
            else if (e > p && s[e - 1] == '+')
                end = e + 2;
            else
                end = e + 2 < n && s[e + 2] == '\n' ? e + 3 : e + 2;
            line_starting = s[end - 1] == '\n';
            pos = end;
            continue;
        }
        tok b = {.type = kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, .off = i};
        FRT_TRY(push_tok(ps, b));
        size_t end = 0, end_at = 0;
        FRT_TRY(lex_tag(ps, kind, p, &end, &end_at));
        tok e = {.type = kind == '%' ? TK_BLOCK_END : TK_VAR_END, .off = end_at};
        FRT_TRY(push_tok(ps, e));
        line_starting = s[end - 1] == '\n';
        pos = end;
    }
    tok e = {.type = TK_EOF, .off = n};
    return push_tok(ps, e);
}

/* ---- parser helpers ----------------------------------------------------------- */
static tok *cur(parser *ps) { return &ps->t[ps->pos]; }
static tok *peek(parser *ps, size_t k) { return ps->pos + k < ps->nt ? &ps->t[ps->pos + k] : &ps->t[ps->nt - 1]; }
static int is_op(const tok *t, const char *op) { return t->type == TK_OP && t->n == strlen(op) && !memcmp(t->p, op, t->n); }
static int is_name(const tok *t, const char *nm) { return t->type == TK_NAME && t->n == strlen(nm) && !memcmp(t->p, nm, t->n); }

static const char *tok_desc(const tok *t, char buf[64])
{
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "template data";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "end of print statement";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "end of statement block";
    case TK_STRING: return "string";
    case TK_INT: return "integer";
    case TK_FLOAT: return "float";
    default:
        snprintf(buf, 64, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p);
        return buf;
    }
}

static int unexpected(parser *ps, const char *expected)
{
    char buf[64], msg[200];
    snprintf(msg, sizeof msg, "unexpected %s, expected %s", tok_desc(cur(ps), buf), expected);
    return fail_at(ps, FRT_ERR_FORMAT, cur(ps)->off, "%s", msg);
}

static int expect_op(parser *ps, const char *op)
{
    if (!is_op(cur(ps), op)) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", op);
        return unexpected(ps, e);
    }
    ps->pos++;
    return 0;
}

static int expect_type(parser *ps, int type, const char *what)
{
    if (cur(ps)->type != type) return unexpected(ps, what);
    ps->pos++;
    return 0;
}

static jnode *new_node(parser *ps, jkind k, size_t off)
{
    jnode *x = ja_alloc(ps->a, sizeof *x);
    if (!x) {
        frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
        return NULL;
    }
    x->kind = k;
    line_col(ps, off, &x->line, &x->col);
    return x;
}

static const char *tok_name(parser *ps, const tok *t) { return ja_strdup(ps->a, t->p, t->n); }

typedef struct nvec {
    jnode **v;
    size_t n, cap;
} nvec;

static int nv_push(parser *ps, nvec *v, jnode *x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        jnode **nv = ja_alloc(ps->a, cap * sizeof *nv);
        if (!nv) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return 0;
}

static jnodes nv_done(nvec *v) { return (jnodes){v->v, v->n}; }

typedef struct svec {
    const char **v;
    size_t n, cap;
} svec;

static int sv_push(parser *ps, svec *v, const char *s)
{
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        const char **nv = ja_alloc(ps->a, cap * sizeof *nv);
        if (!nv) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = s;
    return 0;
}

/* ---- expressions ------------------------------------------------------------ */
static int parse_expr(parser *ps, int with_condexpr, jnode **out);
static int parse_tuple(parser *ps, int with_condexpr, const char *extra_end, int explicit_parens, jnode **out);
static int parse_unary(parser *ps, int with_filter, jnode **out);
static int parse_primary(parser *ps, jnode **out);
static int parse_postfix(parser *ps, jnode *node, jnode **out);

#define ENTER(ps)                                                                                     \
    do {                                                                                              \
        if (++(ps)->depth > MAX_DEPTH)                                                                \
            return fail_at(ps, FRT_ERR_OUT_OF_RANGE, cur(ps)->off, "expression nested too deeply%s", ""); \
    } while (0)
#define LEAVE(ps) ((ps)->depth--)

/* call arguments after '(' up to ')': positional into args, name=value into kwargs */
static int parse_call_args(parser *ps, jnode *call)
{
    nvec args = {0}, kwv = {0};
    svec kwn = {0};
    FRT_TRY(expect_op(ps, "("));
    while (!is_op(cur(ps), ")")) {
        if (args.n || kwv.n) {
            FRT_TRY(expect_op(ps, ","));
            if (is_op(cur(ps), ")")) break;
        }
        if (is_op(cur(ps), "*") || is_op(cur(ps), "**"))
            return fail_at(ps, FRT_ERR_UNSUPPORTED, cur(ps)->off, "*args / **kwargs in calls are not supported%s", "");
        jnode *v;
        if (cur(ps)->type == TK_NAME && is_op(peek(ps, 1), "=")) {
            const char *nm = tok_name(ps, cur(ps));
            ps->pos += 2;
            FRT_TRY(parse_expr(ps, 1, &v));
            FRT_TRY(sv_push(ps, &kwn, nm));
            FRT_TRY(nv_push(ps, &kwv, v));
        } else {
            if (kwv.n) return fail_at(ps, FRT_ERR_FORMAT, cur(ps)->off, "positional argument after keyword argument%s", "");
            FRT_TRY(parse_expr(ps, 1, &v));
            FRT_TRY(nv_push(ps, &args, v));
        }
    }
    ps->pos++;
    call->args = nv_done(&args);
    call->kwargs = nv_done(&kwv);
    call->names = kwn.v;
    call->n_names = kwn.n;
    return 0;
}

static int parse_filter(parser *ps, jnode *node, jnode **out)
{
    /* at the name after '|' */
    tok *t = cur(ps);
    if (t->type != TK_NAME) return unexpected(ps, "a filter name");
    jnode *f = new_node(ps, JN_FILTER, t->off);
    if (!f) return FRT_ERR_OUT_OF_MEMORY;
    f->name = tok_name(ps, t);
    if (!f->name) return FRT_ERR_OUT_OF_MEMORY;
    f->fid = jinja_filter_id(f->name);
    if (f->fid < 0) return fail_at(ps, FRT_ERR_UNSUPPORTED, t->off, "filter '%s' is not supported", f->name);
    ps->pos++;
    f->a = node;
    if (is_op(cur(ps), "(")) FRT_TRY(parse_call_args(ps, f));
    *out = f;
    return 0;
}

static int parse_test(parser *ps, jnode *node, jnode **out)
{
    /* at the token after 'is' */
    int neg = 0;
    if (is_name(cur(ps), "not")) {
        neg = 1;
        ps->pos++;
    }
    tok *t = cur(ps);
    if (t->type != TK_NAME) return unexpected(ps, "a test name");
    jnode *x = new_node(ps, JN_TEST, t->off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    x->name = tok_name(ps, t);
    if (!x->name) return FRT_ERR_OUT_OF_MEMORY;
    x->fid = jinja_test_id(x->name);
    if (x->fid < 0) return fail_at(ps, FRT_ERR_UNSUPPORTED, t->off, "test '%s' is not supported", x->name);
    ps->pos++;
    x->a = node;
    x->neg = neg;
    tok *c = cur(ps);
    if (is_op(c, "(")) {
        FRT_TRY(parse_call_args(ps, x));
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
                is_op(c, "(") || is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) return fail_at(ps, FRT_ERR_FORMAT, c->off, "You cannot chain multiple tests with is%s", "");
        jnode *arg;
        FRT_TRY(parse_primary(ps, &arg));
        FRT_TRY(parse_postfix(ps, arg, &arg));
        nvec a = {0};
        FRT_TRY(nv_push(ps, &a, arg));
        x->args = nv_done(&a);
    }
    *out = x;
    return 0;
}

static int parse_subscript(parser *ps, jnode *node, jnode **out)
{
    tok *t = cur(ps);
    if (is_op(t, ".")) {
        ps->pos++;
        tok *a = cur(ps);
        if (a->type == TK_NAME) {
            jnode *x = new_node(ps, JN_ATTR, t->off);
            if (!x) return FRT_ERR_OUT_OF_MEMORY;
            x->a = node;
            x->name = tok_name(ps, a);
            if (!x->name) return FRT_ERR_OUT_OF_MEMORY;
            ps->pos++;
            *out = x;
            return 0;
        }
        if (a->type == TK_INT) {
            jnode *x = new_node(ps, JN_ITEM, a->off), *k = new_node(ps, JN_LIT, a->off);
            if (!x || !k) return FRT_ERR_OUT_OF_MEMORY;
            k->lit = jv_int(a->i);
            x->a = node;
            x->b = k;
            ps->pos++;
            *out = x;
            return 0;
        }
        return unexpected(ps, "a name or number after '.'");
    }
    /* '[' */
    ps->pos++;
    nvec items = {0};
    int comma = 0;
    while (!is_op(cur(ps), "]")) {
        if (items.n) {
            FRT_TRY(expect_op(ps, ","));
            comma = 1;
            if (is_op(cur(ps), "]")) break;
        }
        /* one subscript: expr or a slice [a]:[b][:[c]] */
        jnode *start = NULL, *stop = NULL, *step = NULL;
        size_t off = cur(ps)->off;
        if (!is_op(cur(ps), ":")) FRT_TRY(parse_expr(ps, 1, &start));
        if (is_op(cur(ps), ":")) {
            ps->pos++;
            if (!is_op(cur(ps), "]") && !is_op(cur(ps), ",") && !is_op(cur(ps), ":")) FRT_TRY(parse_expr(ps, 1, &stop));
            if (is_op(cur(ps), ":")) {
                ps->pos++;
                if (!is_op(cur(ps), "]") && !is_op(cur(ps), ",")) FRT_TRY(parse_expr(ps, 1, &step));
            }
            jnode *sl = new_node(ps, JN_SLICE, off);
            if (!sl) return FRT_ERR_OUT_OF_MEMORY;
            sl->a = start;
            sl->b = stop;
            sl->c = step;
            start = sl;
        }
        FRT_TRY(nv_push(ps, &items, start));
    }
    if (!items.n) return unexpected(ps, "a subscript");
    if (items.n > 1)
        for (size_t k = 0; k < items.n; k++)
            if (items.v[k]->kind == JN_SLICE)
                return fail_at(ps, FRT_ERR_UNSUPPORTED, t->off, "slices inside a tuple subscript are not supported%s", "");
    ps->pos++;
    jnode *idx;
    if (items.n == 1 && !comma) {
        idx = items.v[0];
    } else {
        idx = new_node(ps, JN_TUPLE, t->off);
        if (!idx) return FRT_ERR_OUT_OF_MEMORY;
        idx->args = nv_done(&items);
    }
    jnode *x = NULL;
    if (idx->kind == JN_SLICE) {
        x = idx;
        /* a slice node: a = object; the bounds move to args */
        jnode *bounds = new_node(ps, JN_LIST, t->off);
        if (!bounds) return FRT_ERR_OUT_OF_MEMORY;
        bounds->a = idx->a;
        bounds->b = idx->b;
        bounds->c = idx->c;
        x->a = node;
        x->b = bounds;
        x->c = NULL;
    } else {
        x = new_node(ps, JN_ITEM, t->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        x->a = node;
        x->b = idx;
    }
    *out = x;
    return 0;
}

static int parse_postfix(parser *ps, jnode *node, jnode **out)
{
    for (;;) {
        tok *t = cur(ps);
        if (is_op(t, ".") || is_op(t, "[")) {
            FRT_TRY(parse_subscript(ps, node, &node));
        } else if (is_op(t, "(")) {
            jnode *c = new_node(ps, JN_CALL, t->off);
            if (!c) return FRT_ERR_OUT_OF_MEMORY;
            c->a = node;
            FRT_TRY(parse_call_args(ps, c));
            node = c;
        } else {
            break;
        }
    }
    *out = node;
    return 0;
}

static int parse_filter_expr(parser *ps, jnode *node, jnode **out)
{
    for (;;) {
        tok *t = cur(ps);
        if (is_op(t, "|")) {
            ps->pos++;
            FRT_TRY(parse_filter(ps, node, &node));
        } else if (is_name(t, "is")) {
            ps->pos++;
            FRT_TRY(parse_test(ps, node, &node));
        } else if (is_op(t, "(")) {
            jnode *c = new_node(ps, JN_CALL, t->off);
            if (!c) return FRT_ERR_OUT_OF_MEMORY;
            c->a = node;
            FRT_TRY(parse_call_args(ps, c));
            node = c;
        } else {
            break;
        }
    }
    *out = node;
    return 0;
}

static int parse_primary(parser *ps, jnode **out)
{
    ENTER(ps);
    tok *t = cur(ps);
    jnode *x = NULL;
    if (t->type == TK_NAME) {
        x = new_node(ps, JN_LIT, t->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        if (is_name(t, "true") || is_name(t, "True")) x->lit = jv_bool(1);
        else if (is_name(t, "false") || is_name(t, "False")) x->lit = jv_bool(0);
        else if (is_name(t, "none") || is_name(t, "None")) x->lit = jv_none();
        else {
            x->kind = JN_NAME;
            x->name = tok_name(ps, t);
            if (!x->name) return FRT_ERR_OUT_OF_MEMORY;
        }
        ps->pos++;
    } else if (t->type == TK_STRING) {
        x = new_node(ps, JN_LIT, t->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        /* adjacent literals are joined */
        size_t total = 0, k = ps->pos;
        while (ps->t[k].type == TK_STRING) total += ps->t[k++].n;
        if (k == ps->pos + 1) {
            x->lit = jv_str(t->p, t->n);
        } else {
            char *s = ja_alloc(ps->a, total + 1);
            if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
            size_t o = 0;
            for (size_t j = ps->pos; j < k; j++) {
                memcpy(s + o, ps->t[j].p, ps->t[j].n);
                o += ps->t[j].n;
            }
            x->lit = jv_str(s, total);
        }
        ps->pos = k;
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        x = new_node(ps, JN_LIT, t->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        x->lit = t->type == TK_INT ? jv_int(t->i) : jv_float(t->f);
        ps->pos++;
    } else if (is_op(t, "(")) {
        ps->pos++;
        FRT_TRY(parse_tuple(ps, 1, NULL, 1, &x));
        FRT_TRY(expect_op(ps, ")"));
    } else if (is_op(t, "[") || is_op(t, "{")) {
        int dict = is_op(t, "{");
        const char *close = dict ? "}" : "]";
        x = new_node(ps, dict ? JN_DICT : JN_LIST, t->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        ps->pos++;
        nvec keys = {0}, vals = {0};
        while (!is_op(cur(ps), close)) {
            if (keys.n) {
                FRT_TRY(expect_op(ps, ","));
                if (is_op(cur(ps), close)) break;
            }
            jnode *k, *v;
            FRT_TRY(parse_expr(ps, 1, &k));
            FRT_TRY(nv_push(ps, &keys, k));
            if (dict) {
                FRT_TRY(expect_op(ps, ":"));
                FRT_TRY(parse_expr(ps, 1, &v));
                FRT_TRY(nv_push(ps, &vals, v));
            }
        }
        ps->pos++;
        x->args = nv_done(&keys);
        x->kwargs = nv_done(&vals);
    } else {
        return unexpected(ps, "an expression");
    }
    LEAVE(ps);
    *out = x;
    return 0;
}

static int parse_unary(parser *ps, int with_filter, jnode **out)
{
    ENTER(ps);
    tok *t = cur(ps);
    jnode *x = NULL;
    if (is_op(t, "-") || is_op(t, "+")) {
        ps->pos++;
        jnode *operand;
        FRT_TRY(parse_unary(ps, 0, &operand));
        x = new_node(ps, is_op(t, "-") ? JN_NEG : JN_POS, t->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        x->a = operand;
    } else {
        FRT_TRY(parse_primary(ps, &x));
    }
    FRT_TRY(parse_postfix(ps, x, &x));
    if (with_filter) FRT_TRY(parse_filter_expr(ps, x, &x));
    LEAVE(ps);
    *out = x;
    return 0;
}

static int binop_node(parser *ps, jop op, size_t off, jnode *a, jnode *b, jnode **out)
{
    jnode *x = new_node(ps, JN_BINOP, off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    x->op = op;
    x->a = a;
    x->b = b;
    *out = x;
    return 0;
}

static int parse_pow(parser *ps, jnode **out)
{
    jnode *l, *r;
    FRT_TRY(parse_unary(ps, 1, &l));
    while (is_op(cur(ps), "**")) {
        size_t off = cur(ps)->off;
        ps->pos++;
        FRT_TRY(parse_unary(ps, 1, &r));
        FRT_TRY(binop_node(ps, JOP_POW, off, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_math2(parser *ps, jnode **out)
{
    jnode *l, *r;
    FRT_TRY(parse_pow(ps, &l));
    for (;;) {
        tok *t = cur(ps);
        jop op = is_op(t, "*") ? JOP_MUL : is_op(t, "/") ? JOP_DIV : is_op(t, "//") ? JOP_FLOORDIV : is_op(t, "%") ? JOP_MOD : 0;
        if (!op) break;
        ps->pos++;
        FRT_TRY(parse_pow(ps, &r));
        FRT_TRY(binop_node(ps, op, t->off, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_concat(parser *ps, jnode **out)
{
    jnode *first;
    FRT_TRY(parse_math2(ps, &first));
    if (!is_op(cur(ps), "~")) {
        *out = first;
        return 0;
    }
    jnode *x = new_node(ps, JN_CONCAT, cur(ps)->off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    nvec args = {0};
    FRT_TRY(nv_push(ps, &args, first));
    while (is_op(cur(ps), "~")) {
        ps->pos++;
        jnode *r;
        FRT_TRY(parse_math2(ps, &r));
        FRT_TRY(nv_push(ps, &args, r));
    }
    x->args = nv_done(&args);
    *out = x;
    return 0;
}

static int parse_math1(parser *ps, jnode **out)
{
    jnode *l, *r;
    FRT_TRY(parse_concat(ps, &l));
    for (;;) {
        tok *t = cur(ps);
        jop op = is_op(t, "+") ? JOP_ADD : is_op(t, "-") ? JOP_SUB : 0;
        if (!op) break;
        ps->pos++;
        FRT_TRY(parse_concat(ps, &r));
        FRT_TRY(binop_node(ps, op, t->off, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_compare(parser *ps, jnode **out)
{
    jnode *first;
    FRT_TRY(parse_math1(ps, &first));
    nvec rhs = {0};
    jop opsbuf[64];
    size_t nops = 0;
    size_t off = cur(ps)->off;
    for (;;) {
        tok *t = cur(ps);
        jop op = is_op(t, "==") ? JOP_EQ : is_op(t, "!=") ? JOP_NE : is_op(t, "<") ? JOP_LT : is_op(t, "<=") ? JOP_LE
               : is_op(t, ">") ? JOP_GT : is_op(t, ">=") ? JOP_GE : 0;
        if (op) {
            ps->pos++;
        } else if (is_name(t, "in")) {
            op = JOP_IN;
            ps->pos++;
        } else if (is_name(t, "not") && is_name(peek(ps, 1), "in")) {
            op = JOP_NOTIN;
            ps->pos += 2;
        } else {
            break;
        }
        if (nops == 64) return fail_at(ps, FRT_ERR_OUT_OF_RANGE, t->off, "comparison chain too long%s", "");
        jnode *r;
        FRT_TRY(parse_math1(ps, &r));
        FRT_TRY(nv_push(ps, &rhs, r));
        opsbuf[nops++] = op;
    }
    if (!nops) {
        *out = first;
        return 0;
    }
    jnode *x = new_node(ps, JN_COMPARE, off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    x->a = first;
    x->args = nv_done(&rhs);
    x->ops = ja_alloc(ps->a, nops * sizeof *x->ops);
    if (!x->ops) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    memcpy(x->ops, opsbuf, nops * sizeof *x->ops);
    *out = x;
    return 0;
}

static int parse_not(parser *ps, jnode **out)
{
    ENTER(ps);
    tok *t = cur(ps);
    if (is_name(t, "not")) {
        ps->pos++;
        jnode *x = new_node(ps, JN_NOT, t->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        FRT_TRY(parse_not(ps, &x->a));
        LEAVE(ps);
        *out = x;
        return 0;
    }
    FRT_TRY(parse_compare(ps, out));
    LEAVE(ps);
    return 0;
}

static int parse_logic(parser *ps, int is_or, jnode **out)
{
    jnode *l;
    if (is_or)
        FRT_TRY(parse_logic(ps, 0, &l));
    else
        FRT_TRY(parse_not(ps, &l));
    while (is_name(cur(ps), is_or ? "or" : "and")) {
        jnode *x = new_node(ps, is_or ? JN_OR : JN_AND, cur(ps)->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        ps->pos++;
        x->a = l;
        if (is_or)
            FRT_TRY(parse_logic(ps, 0, &x->b));
        else
            FRT_TRY(parse_not(ps, &x->b));
        l = x;
    }
    *out = l;
    return 0;
}

static int parse_condexpr(parser *ps, jnode **out)
{
    ENTER(ps);
    jnode *e1;
    FRT_TRY(parse_logic(ps, 1, &e1));
    while (is_name(cur(ps), "if")) {
        jnode *x = new_node(ps, JN_COND, cur(ps)->off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        ps->pos++;
        FRT_TRY(parse_logic(ps, 1, &x->a));
        x->b = e1;
        if (is_name(cur(ps), "else")) {
            ps->pos++;
            FRT_TRY(parse_condexpr(ps, &x->c));
        }
        e1 = x;
    }
    LEAVE(ps);
    *out = e1;
    return 0;
}

static int parse_expr(parser *ps, int with_condexpr, jnode **out)
{
    return with_condexpr ? parse_condexpr(ps, out) : parse_logic(ps, 1, out);
}

static int tuple_end(parser *ps, const char *extra_end)
{
    tok *t = cur(ps);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_EOF || is_op(t, ")")) return 1;
    return extra_end && is_name(t, extra_end);
}

static int parse_tuple(parser *ps, int with_condexpr, const char *extra_end, int explicit_parens, jnode **out)
{
    nvec items = {0};
    int is_tuple = 0;
    size_t off = cur(ps)->off;
    for (;;) {
        if (items.n) FRT_TRY(expect_op(ps, ","));
        if (tuple_end(ps, extra_end)) break;
        jnode *x = NULL;
        FRT_TRY(parse_expr(ps, with_condexpr, &x));
        FRT_TRY(nv_push(ps, &items, x));
        if (is_op(cur(ps), ","))
            is_tuple = 1;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n) {
            *out = items.v[0];
            return 0;
        }
        if (!explicit_parens) return unexpected(ps, "an expression");
    }
    jnode *t = new_node(ps, JN_TUPLE, off);
    if (!t) return FRT_ERR_OUT_OF_MEMORY;
    t->args = nv_done(&items);
    *out = t;
    return 0;
}

/* ---- statements --------------------------------------------------------------- */
static int parse_body(parser *ps, const char *const *ends, jnode **out);

/* expects the current token to be the name END (after {%), then the block end */
static int end_tag(parser *ps)
{
    ps->pos++;
    return expect_type(ps, TK_BLOCK_END, "end of statement block");
}

/* an assignment target: name, name.attr (with_ns), or names a, b / (a, b) */
static int parse_target(parser *ps, int with_ns, jnode *st, const char *extra_end)
{
    svec names = {0};
    int parens = 0;
    if (is_op(cur(ps), "(")) {
        parens = 1;
        ps->pos++;
    }
    for (;;) {
        tok *t = cur(ps);
        if (t->type != TK_NAME) return unexpected(ps, "a name to assign to");
        if (is_name(t, "true") || is_name(t, "false") || is_name(t, "none") || is_name(t, "True") ||
            is_name(t, "False") || is_name(t, "None"))
            return fail_at(ps, FRT_ERR_FORMAT, t->off, "can't assign to a constant%s", "");
        FRT_TRY(sv_push(ps, &names, tok_name(ps, t)));
        ps->pos++;
        if (with_ns && !parens && names.n == 1 && is_op(cur(ps), ".")) {
            ps->pos++;
            if (cur(ps)->type != TK_NAME) return unexpected(ps, "an attribute name");
            st->name = tok_name(ps, cur(ps));
            if (!st->name) return FRT_ERR_OUT_OF_MEMORY;
            ps->pos++;
            break;
        }
        if (!is_op(cur(ps), ",")) break;
        ps->pos++;
        if (parens && is_op(cur(ps), ")")) break;
        if (!parens && (cur(ps)->type == TK_BLOCK_END || is_op(cur(ps), "=") || (extra_end && is_name(cur(ps), extra_end))))
            break;
    }
    if (parens) FRT_TRY(expect_op(ps, ")"));
    st->names = names.v;
    st->n_names = names.n;
    return 0;
}

static int parse_if(parser *ps, size_t off, jnode **out)
{
    jnode *x = new_node(ps, JN_IF, off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    nvec branches = {0};
    jnode *br = x;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    for (;;) {
        FRT_TRY(parse_tuple(ps, 0, NULL, 0, &br->a));
        FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
        FRT_TRY(parse_body(ps, ends, &br->body));
        FRT_TRY(nv_push(ps, &branches, br));
        if (is_name(cur(ps), "elif")) {
            br = new_node(ps, JN_IF, cur(ps)->off);
            if (!br) return FRT_ERR_OUT_OF_MEMORY;
            ps->pos++;
            continue;
        }
        if (is_name(cur(ps), "else")) {
            FRT_TRY(end_tag(ps));
            static const char *const e2[] = {"endif", NULL};
            FRT_TRY(parse_body(ps, e2, &x->else_body));
        }
        break;
    }
    FRT_TRY(end_tag(ps));
    x->args = nv_done(&branches);
    *out = x;
    return 0;
}

static int parse_for(parser *ps, size_t off, jnode **out)
{
    jnode *x = new_node(ps, JN_FOR, off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    FRT_TRY(parse_target(ps, 0, x, "in"));
    if (!is_name(cur(ps), "in")) return unexpected(ps, "'in'");
    ps->pos++;
    FRT_TRY(parse_tuple(ps, 0, "recursive", 0, &x->a));
    if (is_name(cur(ps), "if")) {
        ps->pos++;
        FRT_TRY(parse_expr(ps, 1, &x->b));
    }
    if (is_name(cur(ps), "recursive"))
        return fail_at(ps, FRT_ERR_UNSUPPORTED, cur(ps)->off, "recursive for loops are not supported%s", "");
    FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
    static const char *const ends[] = {"endfor", "else", NULL};
    ps->loop_depth++;
    FRT_TRY(parse_body(ps, ends, &x->body));
    ps->loop_depth--;
    if (is_name(cur(ps), "else")) {
        FRT_TRY(end_tag(ps));
        static const char *const e2[] = {"endfor", NULL};
        int saved = ps->loop_depth;
        ps->loop_depth = 0; /* {% else %} of a for is outside the loop */
        FRT_TRY(parse_body(ps, e2, &x->else_body));
        ps->loop_depth = saved;
    }
    FRT_TRY(end_tag(ps));
    *out = x;
    return 0;
}

/* filters after {% set x | f %} / {% filter f | g %}: a chain applied to
 * a placeholder (a NULL-operand filter node) */
static int parse_filter_chain(parser *ps, jnode **out)
{
    jnode *x = NULL;
    for (;;) {
        FRT_TRY(parse_filter(ps, x, &x));
        if (!is_op(cur(ps), "|")) break;
        ps->pos++;
    }
    *out = x;
    return 0;
}

static int parse_set(parser *ps, size_t off, jnode **out)
{
    jnode *x = new_node(ps, JN_SET, off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    FRT_TRY(parse_target(ps, 1, x, NULL));
    if (is_op(cur(ps), "=")) {
        ps->pos++;
        FRT_TRY(parse_tuple(ps, 1, NULL, 0, &x->a));
        FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
        *out = x;
        return 0;
    }
    if (x->n_names != 1 || x->name)
        return fail_at(ps, FRT_ERR_FORMAT, cur(ps)->off, "a block set assigns one name%s", "");
    x->kind = JN_SET_BLOCK;
    if (is_op(cur(ps), "|")) {
        ps->pos++;
        FRT_TRY(parse_filter_chain(ps, &x->a));
    }
    FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
    static const char *const ends[] = {"endset", NULL};
    FRT_TRY(parse_body(ps, ends, &x->body));
    FRT_TRY(end_tag(ps));
    *out = x;
    return 0;
}

/* (a, b=default, ...) of a macro or call block */
static int parse_signature(parser *ps, jnode *x)
{
    svec names = {0};
    nvec defs = {0};
    FRT_TRY(expect_op(ps, "("));
    while (!is_op(cur(ps), ")")) {
        if (names.n) {
            FRT_TRY(expect_op(ps, ","));
            if (is_op(cur(ps), ")")) break;
        }
        if (cur(ps)->type != TK_NAME) return unexpected(ps, "a parameter name");
        FRT_TRY(sv_push(ps, &names, tok_name(ps, cur(ps))));
        ps->pos++;
        jnode *d = NULL;
        if (is_op(cur(ps), "=")) {
            ps->pos++;
            FRT_TRY(parse_expr(ps, 1, &d));
        } else if (defs.n && defs.v[defs.n - 1]) {
            return fail_at(ps, FRT_ERR_FORMAT, cur(ps)->off, "non-default argument follows default argument%s", "");
        }
        FRT_TRY(nv_push(ps, &defs, d));
    }
    ps->pos++;
    x->names = names.v;
    x->n_names = names.n;
    x->kwargs = nv_done(&defs);
    return 0;
}

static int parse_macro(parser *ps, size_t off, jnode **out)
{
    jnode *x = new_node(ps, JN_MACRO, off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    if (cur(ps)->type != TK_NAME) return unexpected(ps, "a macro name");
    x->name = tok_name(ps, cur(ps));
    if (!x->name) return FRT_ERR_OUT_OF_MEMORY;
    ps->pos++;
    FRT_TRY(parse_signature(ps, x));
    FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
    static const char *const ends[] = {"endmacro", NULL};
    int saved = ps->loop_depth;
    ps->loop_depth = 0;
    FRT_TRY(parse_body(ps, ends, &x->body));
    ps->loop_depth = saved;
    FRT_TRY(end_tag(ps));
    *out = x;
    return 0;
}

static int parse_call_block(parser *ps, size_t off, jnode **out)
{
    jnode *x = new_node(ps, JN_CALL_BLOCK, off);
    if (!x) return FRT_ERR_OUT_OF_MEMORY;
    if (is_op(cur(ps), "(")) FRT_TRY(parse_signature(ps, x));
    FRT_TRY(parse_expr(ps, 1, &x->a));
    if (x->a->kind != JN_CALL) return fail_at(ps, FRT_ERR_FORMAT, off, "expected a call after {%% call%s", "");
    FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
    static const char *const ends[] = {"endcall", NULL};
    int saved = ps->loop_depth;
    ps->loop_depth = 0;
    FRT_TRY(parse_body(ps, ends, &x->body));
    ps->loop_depth = saved;
    FRT_TRY(end_tag(ps));
    *out = x;
    return 0;
}

static int parse_statement(parser *ps, jnode **out)
{
    /* at the name after {% */
    tok *t = cur(ps);
    size_t off = t->off;
    if (t->type != TK_NAME) return unexpected(ps, "a statement name");
    ENTER(ps);
    ps->pos++;
    if (is_name(t, "if")) {
        FRT_TRY(parse_if(ps, off, out));
    } else if (is_name(t, "for")) {
        FRT_TRY(parse_for(ps, off, out));
    } else if (is_name(t, "set")) {
        FRT_TRY(parse_set(ps, off, out));
    } else if (is_name(t, "macro")) {
        FRT_TRY(parse_macro(ps, off, out));
    } else if (is_name(t, "call")) {
        FRT_TRY(parse_call_block(ps, off, out));
    } else if (is_name(t, "filter")) {
        jnode *x = new_node(ps, JN_FILTER_BLOCK, off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        FRT_TRY(parse_filter_chain(ps, &x->a));
        FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
        static const char *const ends[] = {"endfilter", NULL};
        FRT_TRY(parse_body(ps, ends, &x->body));
        FRT_TRY(end_tag(ps));
        *out = x;
    } else if (is_name(t, "generation")) {
        /* transformers' AssistantTracker: the body, rendered as is */
        FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
        static const char *const ends[] = {"endgeneration", NULL};
        FRT_TRY(parse_body(ps, ends, out));
        FRT_TRY(end_tag(ps));
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (!ps->loop_depth)
            return fail_at(ps, FRT_ERR_FORMAT, off, "'%s' outside a for loop", is_name(t, "break") ? "break" : "continue");
        jnode *x = new_node(ps, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, off);
        if (!x) return FRT_ERR_OUT_OF_MEMORY;
        FRT_TRY(expect_type(ps, TK_BLOCK_END, "end of statement block"));
        *out = x;
    } else {
        static const char *const known[] = {"include", "import", "from", "extends", "block", "with", "autoescape",
                                            "do", "trans", "pluralize", NULL};
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)(t->n > 40 ? 40 : t->n), t->p);
        for (int i = 0; known[i]; i++)
            if (is_name(t, known[i])) return fail_at(ps, FRT_ERR_UNSUPPORTED, off, "the '%s' tag is not supported", nm);
        return fail_at(ps, FRT_ERR_FORMAT, off, "unknown tag '%s'", nm);
    }
    LEAVE(ps);
    return 0;
}

/* Statements until one of ENDS (a name right after {%; the parser stops on
 * that name) or the end of the template (only when ENDS is NULL). */
static int parse_body(parser *ps, const char *const *ends, jnode **out)
{
    jnode *body = new_node(ps, JN_BODY, cur(ps)->off);
    if (!body) return FRT_ERR_OUT_OF_MEMORY;
    nvec items = {0};
    for (;;) {
        tok *t = cur(ps);
        if (t->type == TK_EOF) {
            if (ends) {
                char msg[128];
                snprintf(msg, sizeof msg, "unexpected end of template, expected '%s'", ends[0]);
                for (int i = 1; ends[i]; i++)
                    if (!strcmp(ends[i], "endfor") || !strcmp(ends[i], "endif")) snprintf(msg, sizeof msg,
                        "unexpected end of template, expected '%s'", ends[i]);
                return fail_at(ps, FRT_ERR_FORMAT, t->off, "%s", msg);
            }
            break;
        }
        if (t->type == TK_TEXT) {
            jnode *x = new_node(ps, JN_TEXT, t->off);
            if (!x) return FRT_ERR_OUT_OF_MEMORY;
            x->lit = jv_str(t->p, t->n);
            FRT_TRY(nv_push(ps, &items, x));
            ps->pos++;
        } else if (t->type == TK_VAR_BEGIN) {
            jnode *x = new_node(ps, JN_OUTPUT, t->off);
            if (!x) return FRT_ERR_OUT_OF_MEMORY;
            ps->pos++;
            FRT_TRY(parse_tuple(ps, 1, NULL, 0, &x->a));
            FRT_TRY(expect_type(ps, TK_VAR_END, "end of print statement"));
            FRT_TRY(nv_push(ps, &items, x));
        } else if (t->type == TK_BLOCK_BEGIN) {
            ps->pos++;
            tok *nm = cur(ps);
            if (ends && nm->type == TK_NAME)
                for (int i = 0; ends[i]; i++)
                    if (is_name(nm, ends[i])) goto done;
            if (nm->type == TK_NAME && nm->n > 3 && !memcmp(nm->p, "end", 3)) {
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)(nm->n > 40 ? 40 : nm->n), nm->p);
                return fail_at(ps, FRT_ERR_FORMAT, nm->off, "unexpected '%s'", name);
            }
            jnode *x = NULL;
            FRT_TRY(parse_statement(ps, &x));
            FRT_TRY(nv_push(ps, &items, x));
        } else {
            return unexpected(ps, "template data or a tag");
        }
    }
done:
    body->args = nv_done(&items);
    *out = body;
    return 0;
}

/* ---- entry points ----------------------------------------------------------------- */
int frt_jinja_parse(const char *source, size_t len, frt_jinja_template **out)
{
    if (out) *out = NULL;
    if (!source || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_jinja_parse: NULL argument");
    if (!tok_utf8_valid(source, len)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat template: not valid UTF-8");
    frt_jinja_template *t = calloc(1, sizeof *t);
    if (!t) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    parser ps = {.a = &t->arena};
    /* newlines normalized, one trailing newline dropped (keep_trailing_newline=False) */
    char *src = ja_alloc(&t->arena, len + 1);
    int rc = 0;
    if (!src) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    } else {
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
            if (source[i] == '\r') {
                src[o++] = '\n';
                if (i + 1 < len && source[i + 1] == '\n') i++;
            } else {
                src[o++] = source[i];
            }
        }
        if (o && src[o - 1] == '\n') o--;
        src[o] = '\0';
        ps.src = src;
        ps.n = o;
        if (o > (size_t)UINT32_MAX - 1)
            rc = frt_error(FRT_ERR_OUT_OF_RANGE, "chat template: larger than 4 GiB");
        else
            rc = build_positions(&ps);
        if (!rc) rc = lex(&ps);
    }
    if (!rc) rc = parse_body(&ps, NULL, &t->root);
    free(ps.t);
    free(ps.cp_before);
    free(ps.line_start);
    if (rc) {
        frt_jinja_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void frt_jinja_free(frt_jinja_template *t)
{
    if (!t) return;
    ja_free(&t->arena);
    free(t);
}
