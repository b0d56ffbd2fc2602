/*
 * serving/text.h - text helpers for streaming generated text: UTF-8
 * boundaries and repair, stop strings.
 */
#ifndef FRT_SERVING_TEXT_H
#define FRT_SERVING_TEXT_H

#include <stddef.h>

/* The length of the longest prefix of s[0..n) that does not end inside a
 * multibyte sequence that later bytes could still complete. */
size_t frt_utf8_complete_len(const char *s, size_t n);

/* A malloc'd NUL-terminated copy of s[0..n) with every invalid UTF-8
 * sequence replaced by U+FFFD; *out_len (optional) its length. NULL when
 * out of memory. */
char *frt_utf8_sanitize(const char *s, size_t n, size_t *out_len);

/* s[0..n) with every byte of an invalid UTF-8 sequence written as the four
 * characters \xHH (lower-case hex, OpenAI's form for a token that is part
 * of a character), the rest as it is: a malloc'd NUL-terminated string,
 * *out_len (optional) its length. NULL when out of memory. */
char *frt_utf8_escape_invalid(const char *s, size_t n, size_t *out_len);

/* The characters (code points) of frt_utf8_sanitize(s, n). */
size_t frt_utf8_repaired_chars(const char *s, size_t n);

/* The earliest occurrence of any of the stop strings in text[0..n): returns
 * 1 and *at, or 0. Empty stop strings are ignored. */
int frt_stop_find(const char *text, size_t n, const char *const *stops, int n_stops, size_t *at);

/* The length of the longest suffix of text[0..n) that is a proper prefix of
 * a stop string (bytes to hold back while streaming). */
size_t frt_stop_holdback(const char *text, size_t n, const char *const *stops, int n_stops);

#endif
