/* serving/text.c - UTF-8 boundaries and repair, stop strings (text.h). */
#include "serving/text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s[0..n): 1..4, 0 when invalid,
 * -1 when it is a valid but incomplete start. */
static int seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    int len;
    uint32_t min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    uint32_t cp = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return -1;
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
        /* reject overlong and surrogate prefixes as early as the second byte */
        if (i == 1 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
                       (c == 0xF4 && s[1] > 0x8F)))
            return 0;
    }
    return cp >= min ? len : 0;
}

size_t frt_utf8_complete_len(const char *s, size_t n)
{
    /* an incomplete sequence can only start in the last 3 bytes */
    size_t from = n > 3 ? n - 3 : 0;
    for (size_t i = from; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0xC0) continue;
        if (seq_len((const unsigned char *)s + i, n - i) == -1) return i;
    }
    return n;
}

/* s[0..n) with each invalid byte replaced by U+FFFD (escape 0) or \xHH
 * (escape 1) into out (room for 4 n + 1 bytes); returns the length. */
static size_t repair(const char *s, size_t n, char *out, int escape)
{
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        int l = seq_len(u + i, n - i);
        if (l > 0) {
            memcpy(p, u + i, (size_t)l);
            p += l;
            i += (size_t)l;
        } else if (escape) {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = hex[u[i] >> 4];
            *p++ = hex[u[i] & 15];
            i++;
        } else {
            memcpy(p, "\xEF\xBF\xBD", 3);
            p += 3;
            i++;
        }
    }
    *p = 0;
    return (size_t)(p - out);
}

static char *repaired(const char *s, size_t n, size_t *out_len, int escape)
{
    char *out = malloc(4 * n + 1);
    if (!out) return NULL;
    size_t len = repair(s, n, out, escape);
    if (out_len) *out_len = len;
    return out;
}

char *frt_utf8_sanitize(const char *s, size_t n, size_t *out_len) { return repaired(s, n, out_len, 0); }

char *frt_utf8_escape_invalid(const char *s, size_t n, size_t *out_len) { return repaired(s, n, out_len, 1); }

size_t frt_utf8_repaired_chars(const char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; chars++) {
        int l = seq_len((const unsigned char *)s + i, n - i);
        i += l > 0 ? (size_t)l : 1;
    }
    return chars;
}

int frt_stop_find(const char *text, size_t n, const char *const *stops, int n_stops, size_t *at)
{
    int found = 0;
    size_t best = 0;
    for (int k = 0; k < n_stops; k++) {
        size_t ls = stops[k] ? strlen(stops[k]) : 0;
        if (!ls || ls > n) continue;
        for (size_t i = 0; i + ls <= n && (!found || i < best); i++) {
            if (!memcmp(text + i, stops[k], ls)) {
                found = 1;
                best = i;
                break;
            }
        }
    }
    if (found && at) *at = best;
    return found;
}

size_t frt_stop_holdback(const char *text, size_t n, const char *const *stops, int n_stops)
{
    size_t hold = 0;
    for (int k = 0; k < n_stops; k++) {
        size_t ls = stops[k] ? strlen(stops[k]) : 0;
        for (size_t l = ls ? ls - 1 : 0; l > hold; l--) {
            if (l <= n && !memcmp(text + n - l, stops[k], l)) {
                hold = l;
                break;
            }
        }
    }
    return hold;
}
