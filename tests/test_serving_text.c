/*
 * test_serving_text.c - the token-text helpers of serving/text.h that the
 * logprobs answers use: frt_utf8_escape_invalid (OpenAI's \xHH form for the
 * bytes of a partial character) and frt_utf8_repaired_chars (the character
 * offsets of text_offset), on fixed cases and random byte strings checked
 * against frt_utf8_sanitize.
 */
#include "frt_test.h"

#include "serving/text.h"

static void check_escape(const char *in, size_t n, const char *want)
{
    size_t len = 0;
    char *got = frt_utf8_escape_invalid(in, n, &len);
    CHECK_MSG(got && len == strlen(want) && !strcmp(got, want), "escape: got '%s', want '%s'", got ? got : "(null)",
              want);
    free(got);
}

static void test_fixed(void)
{
    check_escape("abc", 3, "abc");
    check_escape("\xe4\xbd\xa0", 3, "\xe4\xbd\xa0");     /* a whole character */
    check_escape("\xe4\xbd", 2, "\\xe4\\xbd");            /* its first two bytes */
    check_escape("\xa0x", 2, "\\xa0x");                   /* a lone continuation byte */
    check_escape("a\xff\xc3\xa9", 4, "a\\xff\xc3\xa9");   /* 0xFF never starts a character */
    check_escape("", 0, "");
    CHECK(frt_utf8_repaired_chars("abc", 3) == 3);
    CHECK(frt_utf8_repaired_chars("\xe4\xbd\xa0z", 4) == 2);
    CHECK(frt_utf8_repaired_chars("\xe4\xbd", 2) == 2); /* two U+FFFD, as frt_utf8_sanitize writes */
    CHECK(frt_utf8_repaired_chars("", 0) == 0);
}

/* Counts code points of valid UTF-8. */
static size_t count_cp(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static void test_random(void)
{
    static const unsigned char pool[] = {'a', ' ', 0xC3, 0xA9, 0xE4, 0xBD, 0xA0, 0xF0, 0x9F, 0x98, 0x80, 0xFF, 0x80};
    int bad = 0;
    for (int r = 0; r < 2000; r++) {
        char s[24];
        size_t n = (size_t)(frt_test_u64() % sizeof s);
        for (size_t i = 0; i < n; i++) s[i] = (char)pool[frt_test_u64() % sizeof pool];
        size_t cl = 0, el = 0;
        char *clean = frt_utf8_sanitize(s, n, &cl), *esc = frt_utf8_escape_invalid(s, n, &el);
        size_t fffd = 0, bs = 0;
        for (size_t i = 0; i + 2 < cl; i++) fffd += !memcmp(clean + i, "\xEF\xBF\xBD", 3);
        for (size_t i = 0; i < el; i++) bs += esc[i] == '\\';
        /* each replaced byte: one U+FFFD in the repair, four ASCII characters in the escape */
        bad += frt_utf8_repaired_chars(s, n) != count_cp(clean, cl) || fffd != bs ||
               count_cp(esc, el) != count_cp(clean, cl) + 3 * fffd;
        free(clean);
        free(esc);
    }
    CHECK_MSG(bad == 0, "%d of 2000 random strings disagree with frt_utf8_sanitize", bad);
}

int main(void)
{
    frt_test_seed(2626);
    test_fixed();
    test_random();
    return frt_test_report();
}
