/*
 * fuzz_serving_text.c - libFuzzer target: serving/text.c (UTF-8 boundaries
 * and repair, stop strings). The input is split at its first two 0xFF bytes
 * into text and up to two stop strings. Checks: the repaired text is valid
 * UTF-8 (re-sanitizing it changes nothing), the complete length is within
 * the text and at most 3 bytes short of it, a found stop string occurs at
 * the reported offset and nowhere earlier, the hold-back is a proper prefix
 * of a stop string; the \xHH-escaped form is valid UTF-8, equal to the text
 * when nothing was replaced, and the repaired character count is within
 * bounds.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_serving_text CORPUS;
 * CI replays fuzz/corpus/serving_text/ through replay_serving_text.
 */
#include "serving/text.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dup_n(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cut[2] = {size, size};
    int k = 0;
    for (size_t i = 0; i < size && k < 2; i++)
        if (data[i] == 0xFF) cut[k++] = i;
    const char *text = (const char *)data;
    size_t n = cut[0];
    char *stops[2] = {NULL, NULL};
    int n_stops = 0;
    if (k >= 1) stops[n_stops++] = dup_n(data + cut[0] + 1, (k == 2 ? cut[1] : size) - cut[0] - 1);
    if (k == 2) stops[n_stops++] = dup_n(data + cut[1] + 1, size - cut[1] - 1);
    for (int i = 0; i < n_stops; i++)
        if (!stops[i]) abort();

    size_t ok = frt_utf8_complete_len(text, n);
    if (ok > n || n - ok > 3) abort();

    size_t clean_len = 0, again_len = 0;
    char *clean = frt_utf8_sanitize(text, n, &clean_len);
    if (!clean || strlen(clean) > clean_len) abort();
    char *again = frt_utf8_sanitize(clean, clean_len, &again_len);
    if (!again || again_len != clean_len || memcmp(again, clean, clean_len)) abort();
    free(again);
    /* the escaped form is valid UTF-8 and has as many characters as the
     * repaired text plus 3 per replaced byte */
    size_t esc_len = 0, esc_again_len = 0;
    char *esc = frt_utf8_escape_invalid(text, n, &esc_len);
    if (!esc) abort();
    char *esc_again = frt_utf8_sanitize(esc, esc_len, &esc_again_len);
    if (!esc_again || esc_again_len != esc_len || memcmp(esc, esc_again, esc_len)) abort();
    size_t chars = frt_utf8_repaired_chars(text, n), bad = 0;
    for (size_t i = 0; i + 2 < clean_len; i++) bad += !memcmp(clean + i, "\xEF\xBF\xBD", 3);
    if (chars > n || frt_utf8_repaired_chars(esc, esc_len) < chars || (bad == 0 && esc_len != n)) abort();
    free(esc_again);
    free(esc);
    free(clean);

    const char *const *sv = (const char *const *)stops;
    size_t at = 0;
    if (frt_stop_find(text, n, sv, n_stops, &at)) {
        int hit = 0;
        for (int i = 0; i < n_stops; i++) {
            size_t l = strlen(stops[i]);
            if (l && at + l <= n && !memcmp(text + at, stops[i], l)) hit = 1;
            for (size_t j = 0; l && j < at && j + l <= n; j++)
                if (!memcmp(text + j, stops[i], l)) abort(); /* an earlier occurrence */
        }
        if (!hit) abort();
    }
    size_t hold = frt_stop_holdback(text, n, sv, n_stops);
    if (hold > n) abort();
    if (hold) {
        int prefix = 0;
        for (int i = 0; i < n_stops; i++) {
            size_t l = strlen(stops[i]);
            if (hold < l && !memcmp(text + n - hold, stops[i], hold)) prefix = 1;
        }
        if (!prefix) abort();
    }
    free(stops[0]);
    free(stops[1]);
    return 0;
}
