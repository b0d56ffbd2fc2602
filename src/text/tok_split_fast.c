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
 * starts where the previous one ended. The fast path decides only from
 * ASCII characters, whose classes are fixed (\p{L}: a-z A-Z, \p{N}: 0-9,
 * \s: U+0009..U+000D and space, the White_Space property frt translates
 * Oniguruma's \s to); as soon as a character that the decision depends on
 * is not ASCII (a letter? a space? a case variant of 's'?), it answers 0
 * and the caller runs PCRE2 for that one match. So the spans are those of
 * PCRE2 on any text, by construction and as tested on random and real text
 * (tests/test_tokenizer_fast.c). */
#include "text/tok_internal.h"

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
    if (len == sizeof qwen35_pattern - 1 && !memcmp(pattern, qwen35_pattern, len)) return TOK_FAST_QWEN;
    if (len == sizeof llama3_pattern - 1 && !memcmp(pattern, llama3_pattern, len)) return TOK_FAST_LLAMA3;
    return TOK_FAST_NONE;
}

/* character classes of the patterns */
enum { C_L, C_N, C_NL /* \r \n */, C_WS /* other white space */, C_O /* anything else */, C_NA /* not ASCII */, C_END };

static inline int cls(const unsigned char *s, size_t n, size_t i)
{
    if (i >= n) return C_END;
    unsigned c = s[i];
    if (c >= 0x80) return C_NA;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return C_L;
    if (c >= '0' && c <= '9') return C_N;
    if (c == '\r' || c == '\n') return C_NL;
    if (c == ' ' || (c >= 9 && c <= 13)) return C_WS;
    return C_O;
}

/* A run of class K from I; 0 when it stops at a non-ASCII character (which
 * could continue it), else its end. */
static inline size_t run_of(const unsigned char *s, size_t n, size_t i, int k)
{
    while (cls(s, n, i) == k) i++;
    return cls(s, n, i) == C_NA ? 0 : i;
}

static inline int lower(unsigned char c) { return c | 0x20; }

/* A1 at P (s[p] is '\''): the end, 0 when no contraction matches, SIZE_MAX
 * when a deciding character is not ASCII. */
static size_t contraction(const unsigned char *s, size_t n, size_t p)
{
    int c1 = cls(s, n, p + 1);
    if (c1 == C_NA) return SIZE_MAX;
    if (c1 != C_L) return 0;
    int a = lower(s[p + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
    if (a != 'r' && a != 'v' && a != 'l') return 0;
    int c2 = cls(s, n, p + 2);
    if (c2 == C_NA) return SIZE_MAX;
    if (c2 != C_L) return 0;
    int b = lower(s[p + 2]);
    return (a == 'l' ? b == 'l' : b == 'e') ? p + 3 : 0;
}

/* A5, A6, A7 at P (s[p] is white space). */
static size_t white_space(const unsigned char *s, size_t n, size_t p)
{
    size_t q = p, last_nl = SIZE_MAX;
    for (int c; (c = cls(s, n, q)) == C_WS || c == C_NL; q++)
        if (c == C_NL) last_nl = q;
    if (cls(s, n, q) == C_NA) return 0;
    /* A5: \s* backtracks to the last \r or \n, [\r\n]+ takes just it */
    if (last_nl != SIZE_MAX) return last_nl + 1;
    /* A6: (?!\S) holds at the end of the text, or one character back */
    if (q == n || q - p < 2) return q; /* A6 at the end, else A7 */
    return q - 1;
}

size_t tok_fast_match(int kind, const char *text, size_t n, size_t p)
{
    const unsigned char *s = (const unsigned char *)text;
    int c0 = cls(s, n, p);
    if (c0 == C_NA || c0 == C_END) return 0;
    if (s[p] == '\'') {
        size_t e = contraction(s, n, p);
        if (e == SIZE_MAX) return 0;
        if (e) return e;
    }
    /* A2: the optional character is one that is not \r \n L N */
    if (c0 == C_L) return run_of(s, n, p, C_L);
    if (c0 == C_WS || c0 == C_O) {
        int c1 = cls(s, n, p + 1);
        if (c1 == C_NA) return 0;
        if (c1 == C_L) return run_of(s, n, p + 1, C_L);
    }
    /* A3 */
    if (c0 == C_N) {
        if (kind == TOK_FAST_QWEN) return p + 1;
        size_t e = p + 1;
        while (e < p + 3 && cls(s, n, e) == C_N) e++;
        return e < p + 3 && cls(s, n, e) == C_NA ? 0 : e;
    }
    /* A4: the optional space is taken when an "other" character follows */
    size_t q = p;
    if (s[p] == ' ' && cls(s, n, p + 1) == C_O) q = p + 1; /* p + 1 not ASCII was answered above */
    if (cls(s, n, q) == C_O) {
        size_t e = run_of(s, n, q, C_O);
        if (!e) return 0;
        while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
        return e;
    }
    return white_space(s, n, p);
}
