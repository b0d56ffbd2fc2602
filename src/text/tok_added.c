/* tok_added.c - splitting the added tokens (specials like <|im_end|>) out of
 * the text before normalization and BPE.
 *
 * Follows tokenizers/src/tokenizer/added_vocabulary.rs (find_matches):
 * patterns are matched leftmost-longest and non-overlapping (daachorse
 * MatchKind::LeftmostLongest; here a byte trie walked from each position),
 * then each match is checked and widened by the token's flags:
 *
 *   single_word  dropped unless both neighbours are not word characters
 *                (Rust regex \w: Alphabetic, M, Nd, Pc, Join_Control);
 *   lstrip       widened left over White_Space, not before the previous piece;
 *   rstrip       widened right over White_Space.
 *
 * The \w and White_Space tests run through PCRE2 (Unicode properties of
 * PCRE2's tables), never through hand-written tables. */
#include "text/tok_internal.h"
#include "util/error.h"

#include <stdlib.h>

static int trie_node(tok_trie *t, unsigned char byte)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        tok_trie_node *nodes = realloc(t->nodes, cap * sizeof *nodes);
        if (!nodes) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (added tokens)");
        t->nodes = nodes;
        t->cap = cap;
    }
    t->nodes[t->n] = (tok_trie_node){-1, -1, -1, byte};
    return (int)t->n++;
}

int tok_trie_add(tok_trie *t, const char *pat, size_t n, int32_t token)
{
    if (!t->n) {
        int rc = trie_node(t, 0);
        if (rc < 0) return rc;
        t->empty = 1;
    }
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)pat[i];
        int32_t c = t->nodes[node].child, last = -1;
        while (c >= 0 && t->nodes[c].byte != b) {
            last = c;
            c = t->nodes[c].sibling;
        }
        if (c < 0) {
            int nc = trie_node(t, b);
            if (nc < 0) return nc;
            c = nc;
            if (last >= 0)
                t->nodes[last].sibling = c;
            else
                t->nodes[node].child = c;
        }
        node = c;
    }
    if (t->nodes[node].token >= 0) return 1; /* duplicate pattern */
    t->nodes[node].token = token;
    t->first[(unsigned char)pat[0]] = 1;
    t->empty = 0;
    return 0;
}

void tok_trie_free(tok_trie *t)
{
    free(t->nodes);
    t->nodes = NULL;
    t->n = t->cap = 0;
}

/* Longest pattern that starts at S+I: *end and the token index, or -1. */
static int32_t trie_longest(const tok_trie *t, const char *s, size_t n, size_t i, size_t *end)
{
    int32_t node = 0, best = -1;
    for (size_t j = i; j < n; j++) {
        unsigned char b = (unsigned char)s[j];
        int32_t c = t->nodes[node].child;
        while (c >= 0 && t->nodes[c].byte != b) c = t->nodes[c].sibling;
        if (c < 0) break;
        node = c;
        if (t->nodes[node].token >= 0) {
            best = t->nodes[node].token;
            *end = j + 1;
        }
    }
    return best;
}

/* Does the character at S+OFF (S has N bytes) match RE? */
static int char_is(const tok_regex *re, tok_matcher *m, const char *s, size_t n, size_t off, int *yes)
{
    long len;
    FRT_TRY(tok_regex_match_at(re, m, s, n, off, &len));
    *yes = len > 0;
    return 0;
}

static size_t char_start_before(const char *s, size_t pos)
{
    size_t p = pos - 1;
    while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
    return p;
}

int tok_added_split(const frt_tokenizer *tok, const tok_trie *t, tok_matcher *m, const char *s,
                    size_t n, tok_piece_fn fn, void *ctx)
{
    if (n == 0) return 0;
    if (!t->n || t->empty) return fn(ctx, s, n, -1);
    size_t start_offset = 0, i = 0;
    while (i < n) {
        if (!t->first[(unsigned char)s[i]]) {
            i++;
            continue;
        }
        size_t mat_end = 0;
        int32_t k = trie_longest(t, s, n, i, &mat_end);
        if (k < 0) {
            i++;
            continue;
        }
        size_t start = i, stop = mat_end;
        i = mat_end; /* the automaton goes on after the match, taken or not */
        const tok_added *a = &tok->added[k];
        if (a->single_word) {
            int before = 0, after = 0;
            if (start > 0) FRT_TRY(char_is(&tok->word_re, m, s, start, char_start_before(s, start), &before));
            if (stop < n) FRT_TRY(char_is(&tok->word_re, m, s, n, stop, &after));
            if (before || after) continue; /* not a single word */
        }
        if (a->lstrip) {
            /* max(space_leftmost_at_end(s[..start]), start_offset) */
            size_t limit = start_offset < start ? start_offset : start;
            size_t p = start;
            while (p > limit) {
                size_t q = char_start_before(s, p);
                int ws;
                FRT_TRY(char_is(&tok->ws_re, m, s, start, q, &ws));
                if (!ws) break;
                p = q;
            }
            start = p > start_offset ? p : start_offset;
        }
        if (a->rstrip) {
            while (stop < n) {
                int ws;
                FRT_TRY(char_is(&tok->ws_re, m, s, n, stop, &ws));
                if (!ws) break;
                stop += (size_t)tok_utf8_len((unsigned char)s[stop]);
            }
        }
        if (start_offset < start) FRT_TRY(fn(ctx, s + start_offset, start - start_offset, -1));
        if (stop > start) FRT_TRY(fn(ctx, s + start, stop - start, k));
        start_offset = stop;
    }
    if (start_offset < n) FRT_TRY(fn(ctx, s + start_offset, n - start_offset, -1));
    return 0;
}
