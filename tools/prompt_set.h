/*
 * tools/prompt_set.h - a list of token-id prompts, the input of frt compare
 * (cmd_compare.c): read from an ids file, from --ids, or drawn at random.
 *
 * An ids file holds one prompt a line, written as frt generate's --ids
 * takes it: a comma-separated list of token ids ("1, 2,3"; spaces around an
 * element allowed; each id 0 .. INT32_MAX; the vocabulary is checked by the
 * caller once a model is loaded). Lines that are empty or all blanks
 * (space, tab, CR) and lines whose first non-blank character is '#' are
 * skipped. fuzz/fuzz_prompt_set.c fuzzes the parser.
 */
#ifndef FRT_TOOLS_PROMPT_SET_H
#define FRT_TOOLS_PROMPT_SET_H

#include <stddef.h>
#include <stdint.h>

/* At most this many prompts in one set (a file with more is refused). */
#define FRT_PROMPT_SET_MAX 4096

typedef struct frt_prompt_set {
    int32_t *ids; /* every prompt's ids end to end (malloc'd) */
    size_t *off;  /* [n + 1]: prompt p is ids[off[p] .. off[p + 1]), each at least 1 id */
    int n;        /* prompts */
} frt_prompt_set;

/* Appends one prompt ids [len] (len >= 1; copied). 0, or -1 when out of
 * memory, len < 1 or the set already holds FRT_PROMPT_SET_MAX prompts (the
 * set is then unchanged). */
int frt_prompt_set_add(frt_prompt_set *s, const int32_t *ids, size_t len);

/* Appends n prompts of len ids each, uniform in [0, vocab), from a
 * splitmix64 stream seeded with seed (the same seed gives the same ids on
 * every machine). 0, or -1 as frt_prompt_set_add (prompts added before the
 * failure stay). */
int frt_prompt_set_add_random(frt_prompt_set *s, int n, int len, int vocab, uint64_t seed);

/* Parses an ids file's bytes text [len] (NUL bytes are not allowed) and
 * appends its prompts to *s. Returns 0, or on the first bad line a
 * frt_parse_err (tools/args.h) with *bad_line its number (1-based):
 *   FRT_PARSE_EMPTY     an empty element ("1,,2")
 *   FRT_PARSE_SYNTAX    not an integer list, or a NUL byte in the line
 *   FRT_PARSE_RANGE     an id outside [0, INT32_MAX], or one prompt more
 *                       than FRT_PROMPT_SET_MAX
 * and -1 when out of memory (*bad_line 0). On failure the prompts of the
 * lines before the bad one stay in *s (the caller frees the set). */
int frt_prompt_set_parse(frt_prompt_set *s, const char *text, size_t len, int *bad_line);

/* The longest prompt's length (0 for an empty set). */
size_t frt_prompt_set_max_len(const frt_prompt_set *s);

/* Frees the arrays and empties the set; NULL is allowed. */
void frt_prompt_set_free(frt_prompt_set *s);

#endif
