/* tok_split_fast.c - the split regex of Llama 3, Qwen2/2.5/3 and Qwen3.5
 * without a regex engine, for the characters where that is exact.
 *
 * The patterns (tokenizer.json, Oniguruma syntax; Llama 3 has \p{N}{1,3}
 * where Qwen has \p{N}; Qwen3.5 has [\p{L}\p{M}] for \p{L} in A2 and
 * [^\s\p{L}\p{M}\p{N}] in A4, the same classes on ASCII, which has no M):
 *
 *   A1 (?i:'s|'t|'re|'ve|'m|'ll|'d)
 *   A2 [^\r\n\p{L}\p{N}]?\p{L}+
 *   A3 \p{N}            (Llama 3: \p{N}{1,3})
 *   A4  ?[^\s\p{L}\p{N}]+[\r\n]*
 *   A5 \s*[\r\n]+
 *   A6 \s+(?!\S)
 *   A7 \s+
 *
 * tok_fast_match gives the end of the match at a position with the
 * semantics of a backtracking engine (the first alternative that matches
 * wins, each quantifier greedy and backtracking), worked out per
 * alternative below. Every character is matched by one of A2, A3, A4 or
 * A7, so the matches tile the text: no gaps, no empty matches, each match
 * starts where the previous one ended.
 *
 * The classes of a character (\p{L}, \p{N}, \s = White_Space, which frt
 * translates Oniguruma's \s to, \p{M}) are PCRE2's own: ASCII is fixed
 * (a-z A-Z, 0-9, U+0009..U+000D and space), and the rest of the Basic
 * Multilingual Plane is classified once per process by running PCRE2 over
 * every code point (bmp_class). Where the answer could still differ from
 * PCRE2's, tok_fast_match answers 0 and the caller runs PCRE2 for that one
 * match: a character outside the BMP (emoji), a non-ASCII letter after an
 * apostrophe ((?i) matches the long s U+017F for 's'), a mark under the
 * Qwen3.5 pattern (it is in both [\p{L}\p{M}] and [^\r\n\p{L}\p{N}]).
 * So the spans are those of PCRE2 on any text, by construction and as
 * tested on random and real text (tests/test_tokenizer_fast.c) and by
 * fuzz_tokenizer. */
#include "text/tok_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* the Split patterns as tokenizer.json spells them */
static const char qwen2_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen35_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char llama3_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int tok_fast_kind(const char *pattern, size_t len)
{
    if (len == sizeof qwen2_pattern - 1 && !memcmp(pattern, qwen2_pattern, len)) return TOK_FAST_QWEN;
    if (len == sizeof qwen35_pattern - 1 && !memcmp(pattern, qwen35_pattern, len)) return TOK_FAST_QWEN35;
    if (len == sizeof llama3_pattern - 1 && !memcmp(pattern, llama3_pattern, len)) return TOK_FAST_LLAMA3;
    return TOK_FAST_NONE;
}

/* character classes of the patterns */
enum { C_L, C_N, C_NL /* \r \n */, C_WS /* other white space */, C_O /* anything else */, C_M /* a mark */,
       C_NA /* ask PCRE2 */, C_END };

/* ---- the class of every BMP code point, from PCRE2 ---------------------------- */
static unsigned char bmp_class[0x10000];
static int bmp_ready;
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

/* Marks the characters of every match of PATTERN in the UTF-8 text T (all
 * BMP code points from U+0080, in order) with class K. 0 or -1. */
static int mark_class(const char *pattern, const unsigned char *t, size_t n, int k)
{
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    int rc = re && md ? 0 : -1;
    if (re) (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    for (size_t at = 0; !rc && at < n;) {
        int m = pcre2_match(re, t, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            rc = -1;
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        for (size_t i = ov[0]; i < ov[1];) {
            uint32_t cp;
            i += (size_t)tok_utf8_decode((const char *)t + i, &cp);
            bmp_class[cp] = (unsigned char)k;
        }
        at = ov[1] > at ? ov[1] : at + 1;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc;
}

static void bmp_init(void)
{
    size_t cap = 3 * 0x10000, n = 0;
    unsigned char *t = malloc(cap);
    if (!t) return;
    for (uint32_t cp = 0; cp < 0x10000; cp++) {
        bmp_class[cp] = C_O;
        if (cp >= 0x80 && (cp < 0xD800 || cp > 0xDFFF)) n += (size_t)tok_utf8_encode(cp, (char *)t + n);
    }
    bmp_ready = !mark_class("\\p{M}+", t, n, C_M) && !mark_class("\\p{N}+", t, n, C_N) &&
                !mark_class("\\p{L}+", t, n, C_L) && !mark_class("\\p{White_Space}+", t, n, C_WS);
    free(t);
}

static inline int ascii_class(unsigned c)
{
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return C_L;
    if (c >= '0' && c <= '9') return C_N;
    if (c == '\r' || c == '\n') return C_NL;
    if (c == ' ' || (c >= 9 && c <= 13)) return C_WS;
    return C_O;
}

/* The class of the character at I (C_END at N) and its length in *w. */
static inline int cls(const unsigned char *s, size_t n, size_t i, int kind, size_t *w)
{
    *w = 1;
    if (i >= n) return C_END;
    unsigned c = s[i];
    if (c < 0x80) return ascii_class(c);
    if (c >= 0xF0 || !bmp_ready) return C_NA; /* outside the BMP */
    uint32_t cp;
    *w = (size_t)tok_utf8_decode((const char *)s + i, &cp);
    int k = bmp_class[cp];
    if (k == C_M) return kind == TOK_FAST_QWEN35 ? C_NA : C_O;
    return k;
}

/* A run of class K from I: its end, or 0 when it stops at a character
 * whose class PCRE2 must tell. */
static inline size_t run_of(const unsigned char *s, size_t n, size_t i, int kind, int k)
{
    size_t w;
    int c;
    while ((c = cls(s, n, i, kind, &w)) == k) i += w;
    return c == C_NA ? 0 : i;
}

static inline int lower(unsigned char c) { return c | 0x20; }

/* 1 when the character at I ends the contraction test: not a letter, or an
 * ASCII letter; -1 (ask PCRE2) for a letter outside ASCII, which (?i) may
 * match for an ASCII one. */
static inline int plain_letter(const unsigned char *s, size_t n, size_t i, int kind, int *c)
{
    size_t w;
    *c = cls(s, n, i, kind, &w);
    if (*c == C_NA || (*c == C_L && s[i] >= 0x80)) return -1;
    return 1;
}

/* A1 at P (s[p] is '\''): the end, 0 when no contraction matches, SIZE_MAX
 * when PCRE2 must tell. */
static size_t contraction(const unsigned char *s, size_t n, size_t p, int kind)
{
    int c1, c2;
    if (plain_letter(s, n, p + 1, kind, &c1) < 0) return SIZE_MAX;
    if (c1 != C_L) return 0;
    int a = lower(s[p + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
    if (a != 'r' && a != 'v' && a != 'l') return 0;
    if (plain_letter(s, n, p + 2, kind, &c2) < 0) return SIZE_MAX;
    if (c2 != C_L) return 0;
    int b = lower(s[p + 2]);
    return (a == 'l' ? b == 'l' : b == 'e') ? p + 3 : 0;
}

/* A5, A6, A7 at P (the character at p is white space). */
static size_t white_space(const unsigned char *s, size_t n, size_t p, int kind)
{
    size_t q = p, last_nl = SIZE_MAX, last = p, w;
    int c;
    while ((c = cls(s, n, q, kind, &w)) == C_WS || c == C_NL) {
        if (c == C_NL) last_nl = q;
        last = q;
        q += w;
    }
    if (c == C_NA) return 0;
    /* A5: \s* backtracks to the last \r or \n, [\r\n]+ takes just it */
    if (last_nl != SIZE_MAX) return last_nl + 1;
    /* A6 holds at the end of the text, or one character back when the run
     * has two or more; else A7 */
    if (q == n || last == p) return q;
    return last;
}

/* A3 at P (a digit): Qwen one digit, Llama 3 up to three. */
static size_t digits(const unsigned char *s, size_t n, size_t p, int kind, size_t w0)
{
    size_t e = p + w0, w;
    if (kind != TOK_FAST_LLAMA3) return e;
    for (int k = 1; k < 3; k++) {
        int c = cls(s, n, e, kind, &w);
        if (c == C_NA) return 0;
        if (c != C_N) break;
        e += w;
    }
    return e;
}

int tok_fast_ready(void)
{
    pthread_once(&bmp_once, bmp_init);
    return bmp_ready;
}

size_t tok_fast_match(int kind, const char *text, size_t n, size_t p)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t w0, w1;
    int c0 = cls(s, n, p, kind, &w0);
    if (c0 == C_NA || c0 == C_END) return 0;
    if (s[p] == '\'') {
        size_t e = contraction(s, n, p, kind);
        if (e == SIZE_MAX) return 0;
        if (e) return e;
    }
    /* A2: the optional character is one that is not \r \n L N */
    if (c0 == C_L) return run_of(s, n, p, kind, C_L);
    int c1 = C_END;
    if (c0 == C_WS || c0 == C_O) {
        c1 = cls(s, n, p + w0, kind, &w1);
        if (c1 == C_NA) return 0;
        if (c1 == C_L) return run_of(s, n, p + w0, kind, C_L);
    }
    if (c0 == C_N) return digits(s, n, p, kind, w0);
    /* A4: the optional space is taken when an "other" character follows */
    size_t q = s[p] == ' ' && c1 == C_O ? p + 1 : p;
    if (q > p || c0 == C_O) {
        size_t e = run_of(s, n, q, kind, C_O);
        if (!e) return 0;
        while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
        return e;
    }
    return white_space(s, n, p, kind);
}
