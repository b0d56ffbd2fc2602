/* tok_regex.c - the split regexes of tokenizer.json through PCRE2.
 *
 * tokenizers compiles its regexes with Oniguruma (the onig crate, default
 * syntax) and iterates matches with onig's FindMatches. frt compiles the same
 * pattern text with PCRE2 (PCRE2_UTF | PCRE2_UCP, JIT) after a small
 * translation:
 *
 *   \s, \S   Oniguruma: U+0009..U+000D, U+0085 and Z (= the White_Space
 *            property); PCRE2's UCP \s adds U+180E. Rewritten as
 *            \p{White_Space} / \P{White_Space}.
 *   \uHHHH   Oniguruma (Ruby syntax) only; rewritten \x{HHHH}.
 *
 * and refuses (FRT_ERR_UNSUPPORTED) the constructs whose meaning differs
 * and that no published tokenizer regex needs: \w \W \b \B (word classes
 * differ), \h \H (hex digit in Oniguruma, horizontal space in PCRE2), \X \K
 * \Q \E, ^ and $ (line anchors in Oniguruma), inline options other than i,
 * {,n}, POSIX brackets, nested classes and && inside a character class.
 * \p{L}, \p{N}, \p{M} (general categories), (?i:...), lookahead and
 * everything else the GPT-2, Qwen2, Qwen3.5 and Llama 3 patterns use mean
 * the same in both. */
#include "text/tok_internal.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

#define REFUSE(...) (tok_buf_free(out), frt_error(FRT_ERR_UNSUPPORTED, __VA_ARGS__))

/* Oniguruma pattern P[0..N) -> PCRE2 pattern in OUT. */
static int translate(const char *p, size_t n, tok_buf *out, const char *what)
{
    int in_class = 0;
    size_t class_start = 0; /* index just after '[' or '[^' */
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\') {
            if (i + 1 >= n) {
                tok_buf_free(out);
                return frt_error(FRT_ERR_FORMAT, "%s: regex ends with a lone backslash", what);
            }
            char e = p[++i];
            switch (e) {
            case 's':
                FRT_TRY(tok_buf_put(out, "\\p{White_Space}", 15));
                continue;
            case 'S':
                FRT_TRY(tok_buf_put(out, "\\P{White_Space}", 15));
                continue;
            case 'u':
                if (i + 4 < n && is_hex(p[i + 1]) && is_hex(p[i + 2]) && is_hex(p[i + 3]) &&
                    is_hex(p[i + 4])) {
                    FRT_TRY(tok_buf_put(out, "\\x{", 3));
                    FRT_TRY(tok_buf_put(out, p + i + 1, 4));
                    FRT_TRY(tok_buf_put(out, "}", 1));
                    i += 4;
                    continue;
                }
                return REFUSE("%s: regex escape \\u without four hex digits is not supported", what);
            case 'b':
            case 'B':
                if (in_class && e == 'b') break; /* backspace inside a class, same in both */
                return REFUSE("%s: regex word boundary \\%c is not supported (Oniguruma and "
                              "PCRE2 define word characters differently)", what, e);
            case 'w':
            case 'W':
                return REFUSE("%s: regex class \\%c is not supported (Oniguruma and PCRE2 define "
                              "word characters differently)", what, e);
            case 'h':
            case 'H':
                return REFUSE("%s: regex escape \\%c is not supported (hex digit in Oniguruma, "
                              "horizontal space in PCRE2)", what, e);
            case 'X':
            case 'K':
            case 'Q':
            case 'E':
                return REFUSE("%s: regex escape \\%c is not supported", what, e);
            default:
                break;
            }
            char esc[2] = {'\\', e};
            FRT_TRY(tok_buf_put(out, esc, 2));
            continue;
        }
        if (in_class) {
            if (c == '[') {
                if (i + 1 < n && p[i + 1] == ':')
                    return REFUSE("%s: POSIX bracket expressions ([:name:]) in a regex are not "
                                  "supported", what);
                return REFUSE("%s: a nested character class ('[' inside [...]) is not supported; "
                              "escape it as \\[", what);
            }
            if (c == '&' && i + 1 < n && p[i + 1] == '&')
                return REFUSE("%s: character class intersection (&&) is not supported", what);
            if (c == ']') {
                if (i == class_start)
                    return REFUSE("%s: a ']' first in a character class is not supported; "
                                  "escape it as \\]", what);
                in_class = 0;
            }
            FRT_TRY(tok_buf_put(out, &c, 1));
            continue;
        }
        switch (c) {
        case '[':
            in_class = 1;
            FRT_TRY(tok_buf_put(out, &c, 1));
            if (i + 1 < n && p[i + 1] == '^') {
                FRT_TRY(tok_buf_put(out, "^", 1));
                i++;
            }
            class_start = i + 1;
            continue;
        case '^':
        case '$':
            return REFUSE("%s: regex anchor '%c' is not supported (a line anchor in Oniguruma); "
                          "use \\A or \\z", what, c);
        case '{':
            if (i + 1 < n && p[i + 1] == ',')
                return REFUSE("%s: regex quantifier {,n} is not supported", what);
            break;
        case '(':
            if (i + 2 < n && p[i + 1] == '?' && (is_alpha(p[i + 2]) || p[i + 2] == '-')) {
                for (size_t k = i + 2; k < n && p[k] != ':' && p[k] != ')'; k++) {
                    if (p[k] != 'i' && p[k] != '-')
                        return REFUSE("%s: regex inline option '%c' is not supported (only i)",
                                      what, p[k]);
                }
            }
            break;
        default:
            break;
        }
        FRT_TRY(tok_buf_put(out, &c, 1));
    }
    if (in_class) {
        tok_buf_free(out);
        return frt_error(FRT_ERR_FORMAT, "%s: regex has an unterminated character class", what);
    }
    return 0;
}

int tok_regex_compile_pcre2(tok_regex *re, const char *pattern, size_t len, uint32_t extra_flags,
                            const char *what)
{
    int err = 0;
    PCRE2_SIZE off = 0;
    re->fast = TOK_FAST_NONE;
    re->code = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | extra_flags, &err,
                             &off, NULL);
    if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return frt_error(FRT_ERR_FORMAT, "%s: bad regex at offset %zu: %s", what, (size_t)off,
                         (const char *)msg);
    }
    /* JIT when the platform has it; the interpreter gives the same matches. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return 0;
}

int tok_regex_compile(tok_regex *re, const char *pattern, size_t len, const char *what)
{
    re->code = NULL;
    re->fast = TOK_FAST_NONE;
    if (!tok_utf8_valid(pattern, len))
        return frt_error(FRT_ERR_FORMAT, "%s: regex is not valid UTF-8", what);
    tok_buf out = {0};
    FRT_TRY(translate(pattern, len, &out, what));
    int rc = tok_regex_compile_pcre2(re, out.p ? out.p : "", out.n, 0, what);
    tok_buf_free(&out);
    if (!rc) re->fast = tok_fast_kind(pattern, len);
    if (re->fast) (void)tok_fast_ready(); /* without the table, PCRE2 decides non-ASCII */
    return rc;
}

int tok_regex_compile_literal(tok_regex *re, const char *s, size_t len, const char *what)
{
    re->code = NULL;
    re->fast = TOK_FAST_NONE;
    if (!tok_utf8_valid(s, len))
        return frt_error(FRT_ERR_FORMAT, "%s: split string is not valid UTF-8", what);
    tok_buf out = {0};
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        /* PCRE2: a backslash before any non-alphanumeric ASCII character
         * makes it literal; letters, digits and non-ASCII are literal. */
        if ((unsigned char)c < 0x80 && !is_alpha(c) && !(c >= '0' && c <= '9'))
            FRT_TRY(tok_buf_put(&out, "\\", 1));
        FRT_TRY(tok_buf_put(&out, &c, 1));
    }
    int rc = tok_regex_compile_pcre2(re, out.p ? out.p : "", out.n, 0, what);
    tok_buf_free(&out);
    return rc;
}

void tok_regex_free(tok_regex *re)
{
    if (re->code) pcre2_code_free(re->code);
    re->code = NULL;
}

int tok_matcher_init(tok_matcher *m)
{
    m->jit = NULL;
    m->mctx = NULL;
    m->md = pcre2_match_data_create(4, NULL);
    if (!m->md) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (match data)");
    return 0;
}

void tok_matcher_free(tok_matcher *m)
{
    if (m->md) pcre2_match_data_free(m->md);
    if (m->mctx) pcre2_match_context_free(m->mctx);
    if (m->jit) pcre2_jit_stack_free(m->jit);
    m->md = NULL;
    m->mctx = NULL;
    m->jit = NULL;
}

/* pcre2_match with a retry on a bigger JIT stack (made on first need). */
static int match(const tok_regex *re, tok_matcher *m, const char *s, size_t n, size_t off,
                 uint32_t opts)
{
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, off, opts | PCRE2_NO_UTF_CHECK, m->md, m->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !m->jit) {
        m->mctx = pcre2_match_context_create(NULL);
        m->jit = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, NULL);
        if (!m->mctx || !m->jit) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: JIT stack");
        pcre2_jit_stack_assign(m->mctx, NULL, m->jit);
        rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, off, opts | PCRE2_NO_UTF_CHECK, m->md, m->mctx);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return frt_error(FRT_ERR_BACKEND, "tokenizer: regex match failed at byte %zu: %s", off,
                         (const char *)msg);
    }
    return 1;
}

int tok_regex_find_matches(const tok_regex *re, tok_matcher *m, const char *s, size_t n,
                           tok_spanvec *out)
{
    out->n = 0;
    if (n == 0) return tok_spanvec_push(out, 0, 0, 0);
    /* onig::FindMatches::next (onig/src/find.rs): search from last_end; an
     * empty match advances last_end by one character, and an empty match
     * found right after a non-empty one is skipped. */
    size_t last_end = 0, prev = 0;
    int skip_next_empty = 0;
    while (last_end <= n) {
        size_t ms = last_end, me = re->fast ? tok_fast_match(re->fast, s, n, last_end) : 0;
        if (!me) { /* no fast pattern, or a non-ASCII character decides */
            int rc = match(re, m, s, n, last_end, 0);
            if (rc < 0) return rc;
            if (rc == 0) break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
            ms = ov[0];
            me = ov[1];
        }
        if (me < ms) me = ms; /* \K cannot occur (refused); keep the span sane */
        last_end = me;
        if (me == ms) {
            last_end += me < n ? (size_t)tok_utf8_len((unsigned char)s[me]) : 1;
            if (skip_next_empty) {
                skip_next_empty = 0;
                continue;
            }
        } else {
            skip_next_empty = 1;
        }
        /* impl Pattern for &SysRegex (utils/onig.rs) */
        if (prev != ms) FRT_TRY(tok_spanvec_push(out, (uint32_t)prev, (uint32_t)ms, 0));
        FRT_TRY(tok_spanvec_push(out, (uint32_t)ms, (uint32_t)me, 1));
        prev = me;
    }
    if (prev != n) FRT_TRY(tok_spanvec_push(out, (uint32_t)prev, (uint32_t)n, 0));
    return 0;
}

int tok_regex_match_at(const tok_regex *re, tok_matcher *m, const char *s, size_t n, size_t off,
                       long *len)
{
    *len = -1;
    int rc = match(re, m, s, n, off, 0);
    if (rc <= 0) return rc;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
    *len = (long)(ov[1] - ov[0]);
    return 0;
}
