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

#include <jansson.h>

#include <stdlib.h>
#include <string.h>

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

/* ---- protected bytes ------------------------------------------------------------------- */
/* The first protected range (in S's offsets, clipped at 0) that ends after
 * POS; {N, N} when none. */
static frt_text_span prot_next(const tok_protect *pr, size_t pos, size_t n)
{
    if (pr->whole) return (frt_text_span){0, n};
    size_t at = pr->base + pos, lo = 0, hi = pr->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pr->v[mid].end <= at) lo = mid + 1;
        else hi = mid;
    }
    if (lo == pr->n || pr->v[lo].start >= pr->base + n) return (frt_text_span){n, n};
    frt_text_span r = pr->v[lo];
    return (frt_text_span){r.start > pr->base ? r.start - pr->base : 0, r.end - pr->base < n ? r.end - pr->base : n};
}

static int is_protected(const tok_protect *pr, const tok_added *a) { return pr && (!pr->special_only || a->special); }

/* The longest pattern at S+I that protection allows (*end, the token index),
 * or -1: a protected token must end before the next protected byte. */
static int32_t match_at(const frt_tokenizer *tok, const tok_trie *t, const tok_protect *pr, const char *s, size_t n,
                        size_t i, size_t *end)
{
    int32_t k = trie_longest(t, s, n, i, end);
    if (k < 0 || !pr) return k;
    frt_text_span sp = prot_next(pr, i, n);
    size_t lim = sp.start > i ? sp.start : i;
    if (*end <= lim || !is_protected(pr, &tok->added[k])) return k;
    k = lim > i ? trie_longest(t, s, lim, i, end) : -1;
    return k;
}

/* lstrip's bound: the end of the last protected range that starts before
 * START (in S's offsets, at most START), 0 when none */
static size_t prot_end_before(const tok_protect *pr, size_t start)
{
    if (pr->whole) return start;
    size_t at = pr->base + start, lo = 0, hi = pr->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pr->v[mid].start < at) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0 || pr->v[lo - 1].end <= pr->base) return 0;
    size_t e = pr->v[lo - 1].end - pr->base;
    return e < start ? e : start;
}

int tok_added_split(const frt_tokenizer *tok, const tok_trie *t, tok_matcher *m, const char *s,
                    size_t n, const tok_protect *pr, tok_piece_fn fn, void *ctx)
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
        int32_t k = match_at(tok, t, pr, s, n, i, &mat_end);
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
            /* max(space_leftmost_at_end(s[..start]), start_offset), never into protected bytes */
            size_t limit = start_offset < start ? start_offset : start;
            if (is_protected(pr, a)) {
                size_t pl = prot_end_before(pr, start);
                if (pl > limit) limit = pl;
            }
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
            size_t lim = is_protected(pr, a) ? prot_next(pr, stop, n).start : n;
            while (stop < lim) {
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

/* ---- added tokens (AddedVocabulary::add_tokens) ------------------------------------------ */
typedef struct added_in {
    const char *content;
    size_t len;
    int single_word, lstrip, rstrip, normalized, special;
} added_in;

static int added_same(const tok_added *a, const added_in *t)
{
    return a->content_len == t->len && !memcmp(a->content, t->content, t->len) &&
           a->single_word == t->single_word && a->lstrip == t->lstrip && a->rstrip == t->rstrip &&
           a->normalized == t->normalized && a->special == t->special;
}

int tok_load_added(frt_tokenizer *tok, const json_t *list, tok_pairmap *by_id)
{
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: added_tokens is not a list");
    /* next_id: the model's vocabulary size (number of entries), as add_tokens
     * computes it on an empty added vocabulary */
    int64_t next_id = (int64_t)tok->vocab_entries;
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e) {
        if (!json_is_object(e)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: added_tokens[%zu] is not an object", i);
        const json_t *c = json_object_get(e, "content");
        if (!json_is_string(c)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: added_tokens[%zu] has no content", i);
        added_in t = {json_string_value(c), json_string_length(c), 0, 0, 0, 0, 0};
        const char *what = "tokenizer.json: added token";
        FRT_TRY(tok_json_bool(e, "special", 0, &t.special, what));
        FRT_TRY(tok_json_bool(e, "single_word", 0, &t.single_word, what));
        FRT_TRY(tok_json_bool(e, "lstrip", 0, &t.lstrip, what));
        FRT_TRY(tok_json_bool(e, "rstrip", 0, &t.rstrip, what));
        FRT_TRY(tok_json_bool(e, "normalized", !t.special, &t.normalized, what));
        if (!t.len) continue;
        if (!tok_utf8_valid(t.content, t.len))
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: added_tokens[%zu] is not valid UTF-8", i);

        int32_t existing = tok_strmap_get(&tok->added_map, t.content, t.len);
        const tok_pair_entry *slot = existing >= 0 ? tok_pairmap_get(by_id, existing, 0) : NULL;
        if (slot && added_same(&tok->added[slot->rank], &t)) continue;
        int32_t id = existing;
        if (id < 0) id = tok_strmap_get(&tok->vocab, t.content, t.len);
        if (id < 0) {
            if (next_id >= TOK_MAX_ID) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: too many tokens");
            id = (int32_t)next_id++;
        }
        slot = tok_pairmap_get(by_id, id, 0);

        tok_added a = {0};
        a.content = tok_arena_dup(&tok->arena, t.content, t.len);
        if (!a.content) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        a.content_len = (uint32_t)t.len;
        a.id = id;
        a.single_word = (unsigned char)t.single_word;
        a.lstrip = (unsigned char)t.lstrip;
        a.rstrip = (unsigned char)t.rstrip;
        a.normalized = (unsigned char)t.normalized;
        a.special = (unsigned char)t.special;
        /* normalized_cache: kept per id, replaced only by a new normalized form */
        a.pattern = NULL;
        if (slot) {
            a.pattern = tok->added[slot->rank].pattern;
            a.pattern_len = tok->added[slot->rank].pattern_len;
        }
        if (t.normalized && tok->n_norm) {
            const char *nf;
            size_t nn;
            char *owned;
            FRT_TRY(tok_normalize(tok, t.content, t.len, &nf, &nn, &owned));
            int differs = nn != t.len || memcmp(nf, t.content, nn);
            if (differs) {
                a.pattern = tok_arena_dup(&tok->arena, nf, nn);
                a.pattern_len = (uint32_t)nn;
            }
            free(owned);
            if (differs && !a.pattern) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        }
        FRT_TRY(tok_strmap_put(&tok->added_map, a.content, a.content_len, id, NULL));
        if (t.special) /* special_tokens_set: by content, never shrinks */
            FRT_TRY(tok_strmap_put(&tok->special_set, a.content, a.content_len, 1, NULL));
        if (slot) {
            tok->added[slot->rank] = a;
        } else {
            tok_added *arr = realloc(tok->added, (tok->n_added + 1) * sizeof *arr);
            if (!arr) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
            tok->added = arr;
            tok->added[tok->n_added] = a;
            FRT_TRY(tok_pairmap_put(by_id, id, 0, (uint32_t)tok->n_added, 0));
            tok->n_added++;
        }
    }
    return 0;
}

/* The match patterns (refresh_added_tokens): normalized tokens match their
 * cached normalized form after normalization, the others their content in
 * the raw text. */
int tok_build_tries(frt_tokenizer *tok)
{
    for (size_t k = 0; k < tok->n_added; k++) {
        tok_added *a = &tok->added[k];
        const char *pat = a->content;
        size_t n = a->content_len;
        tok_trie *t = &tok->trie_raw;
        if (a->normalized) {
            t = &tok->trie_norm;
            if (a->pattern) {
                pat = a->pattern;
                n = a->pattern_len;
            }
        }
        if (!n) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: added token %d normalizes to nothing", a->id);
        int rc = tok_trie_add(t, pat, n, (int32_t)k);
        if (rc < 0) return rc;
        if (rc > 0)
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: two added tokens match the same text `%.*s`",
                             (int)(n > 200 ? 200 : n), pat);
        if (a->single_word || a->lstrip || a->rstrip) tok->need_char_res = 1;
    }
    if (tok->need_char_res) {
        /* Rust regex crate classes (added_vocabulary.rs uses regex::Regex):
         * \s = White_Space, \w = Alphabetic + M + Nd + Pc + Join_Control. */
        static const char ws[] = "\\p{White_Space}";
        static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
        FRT_TRY(tok_regex_compile_pcre2(&tok->ws_re, ws, sizeof ws - 1, PCRE2_ANCHORED, "White_Space"));
        FRT_TRY(tok_regex_compile_pcre2(&tok->word_re, word, sizeof word - 1, PCRE2_ANCHORED, "word class"));
    }
    return 0;
}
